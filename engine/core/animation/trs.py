"""TRS kernels of the pose (numpy only): local matrices ``T @ R @ S`` and ``pre @ T @ R @ S`` from
translations, unit wxyz quaternions and scales, with the rotation made from the quaternion's
products in one matrix product (no per-row Python)."""
from __future__ import annotations

from typing import Optional

import numpy as np


def _quadratic_form() -> tuple:
    """(a, b, C): R.ravel() = (q[a] * q[b]) @ C (10 products, C (10, 9)) for a wxyz quaternion q,
    the homogeneous form R = (w^2 - v.v) I + 2 v v^T + 2 w [v]x of assets.types.quat_to_matrix."""
    c = np.zeros((4, 4, 3, 3))
    for i in range(3):
        c[0, 0, i, i] += 1.0
        for k in range(3):
            c[k + 1, k + 1, i, i] -= 1.0
        for j in range(3):
            c[i + 1, j + 1, i, j] += 2.0
    # 2 w [v]x: [[0,-z,y],[z,0,-x],[-y,x,0]]
    for (i, j, k, sign) in ((0, 1, 3, -1.0), (1, 0, 3, 1.0), (0, 2, 2, 1.0), (2, 0, 2, -1.0),
                            (1, 2, 1, -1.0), (2, 1, 1, 1.0)):
        c[0, k, i, j] += sign * 2.0
    c = c.reshape(16, 9)
    # the 10 distinct products q_a q_b (a <= b): off-diagonal pairs carry both coefficients
    pairs = [(a, b) for a in range(4) for b in range(a, 4)]
    form = np.array([c[4 * a + b] + (c[4 * b + a] if a != b else 0.0) for a, b in pairs])
    return np.array([a for a, _ in pairs]), np.array([b for _, b in pairs]), form


QUAT_PAIR_A, QUAT_PAIR_B, QUAT_PAIR_FORM = _quadratic_form()
_COLUMN_OF_ENTRY = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2])
_COLUMN_OF_ENTRY_3X4 = np.array([0, 1, 2, 3] * 3)    # (s, 1) per column of a 3x4 block


def compose_trs_fast(t: np.ndarray, q: np.ndarray, s: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
    """T @ R @ S for (N,3), unit (N,4) wxyz, (N,3) -> (N,4,4), as ``compose_trs(.., normalized=True)``
    but with the rotation made by one matrix product of the quaternions' outer products."""
    n = q.shape[0]
    if out is None:
        out = np.zeros((n, 4, 4))
        out[:, 3, 3] = 1.0
    qq = np.take(q, QUAT_PAIR_A, axis=1)
    qq *= np.take(q, QUAT_PAIR_B, axis=1)
    r = np.dot(qq, QUAT_PAIR_FORM)
    r *= np.take(s, _COLUMN_OF_ENTRY, axis=1)
    out[:, :3, :3] = r.reshape(n, 3, 3)
    out[:, :3, 3] = t
    return out


def pre_rotation_forms(pre: np.ndarray) -> np.ndarray:
    """(N,14,12): for each affine ``pre``, the linear map from ``x = (q_a q_b (10), t (3), 1)`` to
    the top three rows of ``pre @ T @ R(q)`` (row-major 3x4): the quaternion's quadratic form
    (``compose_trs_fast``) carried through pre's 3x3 block, then ``pre3 @ t + pre_t``.  So
    ``pre @ T @ R @ S`` takes one (1,14) x (14,12) product per row (``compose_pre_trs``)."""
    pre = np.asarray(pre, np.float64)
    n = pre.shape[0]
    p3 = pre[:, :3, :3]
    f = np.zeros((n, 14, 3, 4))
    f[:, :10, :, :3] = np.einsum("nij,kjl->nkil", p3, QUAT_PAIR_FORM.reshape(10, 3, 3))
    f[:, 10:13, :, 3] = p3.transpose(0, 2, 1)      # row 10 + j, entry (i, 3): pre3[i, j]
    f[:, 13, :, 3] = pre[:, :3, 3]
    return f.reshape(n, 14, 12)


def compose_pre_trs(pre: np.ndarray, forms: np.ndarray, t: np.ndarray, q: np.ndarray, s: Optional[np.ndarray],
                    out: np.ndarray, bottom: bool = True) -> None:
    """``out = pre @ T @ R @ S`` for affine (N,4,4) ``pre`` with ``forms = pre_rotation_forms(pre)``,
    (N,3) ``t``, unit (N,4) wxyz ``q`` and (N,3) ``s`` (None: all ones): the top three rows are one batched
    (1,14) x (14,12) product per row (rotation and translation together), then the columns of the
    rotation block are scaled.  ``bottom=False``: ``out``'s last rows already equal pre's."""
    n = q.shape[0]
    x = np.empty((n, 1, 14))
    np.multiply(np.take(q, QUAT_PAIR_A, axis=1), np.take(q, QUAT_PAIR_B, axis=1), out=x[:, 0, :10])
    x[:, 0, 10:13] = t
    x[:, 0, 13] = 1.0
    top = np.matmul(x, forms).reshape(n, 12)     # contiguous: numpy's strided loops are slow
    if s is not None:
        s4 = np.ones((n, 4))
        s4[:, :3] = s
        top *= np.take(s4, _COLUMN_OF_ENTRY_3X4, axis=1)           # column l of the rotation block times s[l]
    out[:, :3] = top.reshape(n, 3, 4)
    if bottom:
        out[:, 3] = pre[:, 3]
