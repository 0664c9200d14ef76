"""Matrices that may be singular, non-finite or too large to draw (issue 27 items 4-6).

A bone or object scaled to 0 has a singular matrix.  Blender still deforms through it: what hangs
from it collapses (onto a point, a line or a plane).  ``affine_inv`` inverts a batch of 4x4 affine
matrices exactly where they are invertible (``np.linalg.inv``: the per-frame fast path is one
call) and, where one is singular, takes its *affine* pseudo-inverse ``[[A+, -A+ t], [0, 1]]``:
``M @ affine_inv(M)`` is then the orthogonal projection onto the affine space ``t + range(A)``
that M maps into, so ``parent @ inv(parent) @ child`` gives back every child that lies in it
(everything below a bone scaled to 0 does) and a skin matrix ``inv(meshWorld) @ ...`` drawn
through a collapsed ``meshWorld`` lands where Blender's evaluated mesh is.

``DRAW_LIMIT``: a world matrix with an entry beyond it cannot be drawn in the shaders' 32-bit
floats (squared lengths overflow 3.4e38 from about 1.8e19 on; at 1e15 m a float32 position is
already off by about 6e7 m), so such an object is skipped and named, like a non-finite one.
numpy only, no state.
"""
from __future__ import annotations

import numpy as np

DRAW_LIMIT = 1e15


def affine_pinv(m: np.ndarray) -> np.ndarray:
    """(..., 4, 4) affine pseudo-inverses ``[[pinv(A), -pinv(A) t], [0, 0, 0, 1]]`` (the general
    pseudo-inverse for a matrix whose last row is not (0, 0, 0, 1)); NaN for non-finite input."""
    m = np.asarray(m, dtype=np.float64)
    out = np.full(m.shape, np.nan)
    finite = np.isfinite(m).all(axis=(-2, -1))
    if not finite.any():
        return out
    f = m[finite]
    affine = np.all(f[:, 3] == (0.0, 0.0, 0.0, 1.0), axis=1)
    res = np.empty_like(f)
    if affine.any():
        a = f[affine]
        ap = np.linalg.pinv(a[:, :3, :3])
        r = np.zeros_like(a)
        r[:, :3, :3] = ap
        r[:, :3, 3] = -np.einsum("nij,nj->ni", ap, a[:, :3, 3])
        r[:, 3, 3] = 1.0
        res[affine] = r
    if not affine.all():
        res[~affine] = np.linalg.pinv(f[~affine])
    out[finite] = res
    return out


def affine_inv(m: np.ndarray) -> np.ndarray:
    """Inverses of (..., 4, 4) matrices: ``np.linalg.inv`` when every one is invertible (one
    call), else the exact inverse of the invertible ones and ``affine_pinv`` of the singular
    ones (and NaN for non-finite ones).  Never raises for a singular matrix."""
    m = np.asarray(m, dtype=np.float64)
    try:
        return np.linalg.inv(m)
    except np.linalg.LinAlgError:
        pass
    flat = m.reshape(-1, 4, 4)
    out = np.full(flat.shape, np.nan)
    finite = np.isfinite(flat).all(axis=(1, 2))
    det = np.zeros(flat.shape[0])
    if finite.any():
        det[finite] = np.linalg.det(flat[finite])
    ok = finite & (det != 0.0) & np.isfinite(det)
    if ok.any():
        out[ok] = np.linalg.inv(flat[ok])
    rest = finite & ~ok
    if rest.any():
        out[rest] = affine_pinv(flat[rest])
    return out.reshape(m.shape)


def object_inv(m: np.ndarray, zero_singular: bool = False) -> np.ndarray:
    """The inverse of mesh object matrices as Blender's Armature modifier takes it
    (``invert_m4_m4(obinv, object_to_world)``, armature_deform.cc): exact where invertible.  Where
    a matrix is singular (the object scaled to 0 on an axis), Blender 4.x keeps Eigen's failed
    inverse, the zero matrix, so the deformed mesh collapses onto the object's origin; Blender
    5.x keeps the axes that still have a scale, which ``affine_pinv`` gives (exact for an
    unrotated object; measured against the evaluated mesh).  ``zero_singular``: Blender 4.x's
    rule; the caller knows which Blender it follows (the session tells the runtime:
    ``SceneRuntime(zero_singular_inverse=...)``)."""
    m = np.asarray(m, dtype=np.float64)
    try:
        return np.linalg.inv(m)
    except np.linalg.LinAlgError:
        pass
    out = affine_inv(m)
    if zero_singular:
        flat = out.reshape(-1, 4, 4)
        src = m.reshape(-1, 4, 4)
        with np.errstate(invalid="ignore", over="ignore"):
            singular = ~(np.abs(np.linalg.det(src[:, :3, :3])) > 0.0)
        flat[singular] = 0.0
    return out


def affine_solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``inv(a) @ b`` (``np.linalg.solve``), through ``affine_inv`` where ``a`` is singular."""
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        return np.matmul(affine_inv(a), b)


def undrawable(m: np.ndarray) -> np.ndarray:
    """(N,) True where the (N, 4, 4) matrix has a non-finite entry or one beyond DRAW_LIMIT."""
    m = np.asarray(m).reshape(-1, 16)
    with np.errstate(invalid="ignore"):
        return ~np.all(np.abs(m) <= DRAW_LIMIT, axis=1)
