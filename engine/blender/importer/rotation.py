"""Rotation conversions matching Blender's rotation modes (vectorised numpy, no bpy).

Quaternions are (w, x, y, z).  Euler orders use Blender's naming: 'XYZ' applies X first, then Y,
then Z (matrix = Rz @ Ry @ Rx).
"""
from __future__ import annotations

import numpy as np

EULER_ORDERS = ("XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX")
_AXIS = {"X": 0, "Y": 1, "Z": 2}


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product of (N,4) wxyz arrays."""
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack([
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ], axis=-1)


def normalize_quat(q: np.ndarray) -> np.ndarray:
    """Normalise like Blender's normalize_qt (a zero quaternion becomes (0, 1, 0, 0))."""
    q = np.array(q, dtype=np.float64, copy=True)
    if q.size == 4 and q.ndim <= 2:
        # one quaternion (a bone's rest or pose at import: hundreds of calls): the same
        # arithmetic (np.linalg.norm is sqrt of the summed squares) without the masks
        v = q.reshape(4)
        n = np.sqrt(np.add.reduce(v * v))
        if n == 0.0:
            v[:] = (0.0, 1.0, 0.0, 0.0)
        else:
            v /= n
        return q
    single = q.ndim == 1
    q = np.atleast_2d(q)
    n = np.linalg.norm(q, axis=1)
    bad = n == 0.0
    q[~bad] /= n[~bad, None]
    if bad.any():
        q[bad] = (0.0, 1.0, 0.0, 0.0)
    return q[0] if single else q


def euler_to_quat(e: np.ndarray, order: str = "XYZ") -> np.ndarray:
    """(N,3) Euler angles (radians, per axis X, Y, Z) in a Blender order -> (N,4) unit quaternions."""
    e = np.atleast_2d(np.asarray(e, dtype=np.float64))
    if order not in EULER_ORDERS:
        raise ValueError(f"unknown Euler order {order!r}")
    n = e.shape[0]
    if not e.any() and not np.signbit(e).any():
        # all +0 (an object's delta rotation, nearly always): the identity the products below
        # give bit for bit (cos 0 = 1, sin +0 = +0), without them (an import reads one per object)
        q = np.zeros((n, 4))
        q[:, 0] = 1.0
        return q
    q = None
    for axis in order:  # applied first .. last: q = q_last * ... * q_first
        i = _AXIS[axis]
        h = e[:, i] * 0.5
        qa = np.zeros((n, 4))
        qa[:, 0] = np.cos(h)
        qa[:, 1 + i] = np.sin(h)
        q = qa if q is None else quat_mul(qa, q)
    return q  # pyright: ignore[reportReturnType]  (an Euler order names three axes: q is set)


def axis_angle_to_quat(aa: np.ndarray) -> np.ndarray:
    """(N,4) Blender axis-angle (angle, x, y, z) -> (N,4) quaternions (zero axis: identity)."""
    aa = np.atleast_2d(np.asarray(aa, dtype=np.float64))
    axis = aa[:, 1:4]
    ln = np.linalg.norm(axis, axis=1)
    q = np.zeros((aa.shape[0], 4))
    q[:, 0] = 1.0
    ok = ln > 0.0
    h = aa[ok, 0] * 0.5
    q[ok, 0] = np.cos(h)
    q[ok, 1:] = axis[ok] / ln[ok, None] * np.sin(h)[:, None]
    return q


def rotation_to_quat(values: np.ndarray, mode: str) -> np.ndarray:
    """Convert raw rotation-channel values of ``mode`` to unit quaternions (N,4)."""
    if mode == "QUATERNION":
        return normalize_quat(np.atleast_2d(values))
    if mode == "AXIS_ANGLE":
        return axis_angle_to_quat(values)
    return euler_to_quat(values, mode)


def make_continuous(q: np.ndarray) -> np.ndarray:
    """Flip signs so successive quaternions lie on the same hemisphere (same rotations)."""
    q = np.array(q, dtype=np.float64, copy=True)
    if q.shape[0] < 2:
        return q
    d = np.einsum("ij,ij->i", q[1:], q[:-1])
    s = np.concatenate([[1.0], np.cumprod(np.where(d < 0.0, -1.0, 1.0))])
    return q * s[:, None]


ROTATION_PROPS = {
    "QUATERNION": ("rotation_quaternion", 4),
    "AXIS_ANGLE": ("rotation_axis_angle", 4),
}


def rotation_prop(mode: str):
    """(data path property, component count) Blender evaluates for a rotation mode."""
    return ROTATION_PROPS.get(mode, ("rotation_euler", 3))
