"""Compact tables of baked matrices, interpolated in a space that does not shrink (issue 22 item 2).

A ``MatrixTable`` holds (F,N,4,4) affine matrices sampled at F times.  Each matrix is split into
translation, rotation (a unit quaternion, continuous along F) and stretch (the symmetric factor
of the polar decomposition ``M3 = R @ P``: scale and shear), stored as float32; matrices that do
not change over F are stored once (float64).  ``at(i, a)`` composes, for a time between samples
i and i + 1 at blend ``a``, ``T(lerp t) @ R(slerp q) @ P(lerp p)``: exact at the samples (float32
precision), and a rotating limb keeps its length between them (a matrix lerp shrinks it).
numpy only, vectorised over the matrices (no Python loop over bones or frames).
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from . import interp as _interp

COEF_BYTES = 2 << 20      # the most a table keeps of its intervals' polynomials (MatrixTable.coefficients)
_SYM = (np.array([0, 1, 2, 0, 0, 1]), np.array([0, 1, 2, 1, 2, 2]))   # stretch: xx yy zz xy xz yz


def quat_from_rot(r: np.ndarray) -> np.ndarray:
    """(...,4) unit quaternions (w, x, y, z) of (...,3,3) rotation matrices (vectorised)."""
    m = r.reshape(-1, 3, 3)
    n = m.shape[0]
    q = np.empty((n, 4))
    tr = m[:, 0, 0] + m[:, 1, 1] + m[:, 2, 2]
    d = np.stack([tr, m[:, 0, 0], m[:, 1, 1], m[:, 2, 2]], axis=1)
    k = np.argmax(d, axis=1)
    # the largest of 4w^2, 4x^2, 4y^2, 4z^2 is taken as the pivot (stable)
    w4 = np.sqrt(np.maximum(1.0 + tr, 1e-30)) * 2.0
    x4 = np.sqrt(np.maximum(1.0 + m[:, 0, 0] - m[:, 1, 1] - m[:, 2, 2], 1e-30)) * 2.0
    y4 = np.sqrt(np.maximum(1.0 - m[:, 0, 0] + m[:, 1, 1] - m[:, 2, 2], 1e-30)) * 2.0
    z4 = np.sqrt(np.maximum(1.0 - m[:, 0, 0] - m[:, 1, 1] + m[:, 2, 2], 1e-30)) * 2.0
    a21, a12 = m[:, 2, 1], m[:, 1, 2]
    a02, a20 = m[:, 0, 2], m[:, 2, 0]
    a10, a01 = m[:, 1, 0], m[:, 0, 1]
    cand = np.stack([
        np.stack([0.25 * w4, (a21 - a12) / w4, (a02 - a20) / w4, (a10 - a01) / w4], 1),
        np.stack([(a21 - a12) / x4, 0.25 * x4, (a01 + a10) / x4, (a02 + a20) / x4], 1),
        np.stack([(a02 - a20) / y4, (a01 + a10) / y4, 0.25 * y4, (a12 + a21) / y4], 1),
        np.stack([(a10 - a01) / z4, (a02 + a20) / z4, (a12 + a21) / z4, 0.25 * z4], 1)], 1)
    q = cand[np.arange(n), k]
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return q.reshape(r.shape[:-2] + (4,))


def rot_from_quat(q: np.ndarray) -> np.ndarray:
    """(...,3,3) rotation matrices of (...,4) quaternions (normalised here)."""
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    out = np.empty(q.shape[:-1] + (3, 3))
    out[..., 0, 0] = 1 - 2 * (y * y + z * z)
    out[..., 0, 1] = 2 * (x * y - w * z)
    out[..., 0, 2] = 2 * (x * z + w * y)
    out[..., 1, 0] = 2 * (x * y + w * z)
    out[..., 1, 1] = 1 - 2 * (x * x + z * z)
    out[..., 1, 2] = 2 * (y * z - w * x)
    out[..., 2, 0] = 2 * (x * z - w * y)
    out[..., 2, 1] = 2 * (y * z + w * x)
    out[..., 2, 2] = 1 - 2 * (x * x + y * y)
    return out


def slerp(q0: np.ndarray, q1: np.ndarray, a) -> np.ndarray:
    """(...,4) spherical interpolation (shortest arc; nlerp where the arc is tiny)."""
    d = np.einsum("...i,...i->...", q0, q1)
    q1 = np.where(d[..., None] < 0.0, -q1, q1)
    d = np.abs(d)
    th = np.arccos(np.clip(d, -1.0, 1.0))
    s = np.sin(th)
    small = s < 1e-6
    s = np.where(small, 1.0, s)
    w0 = np.where(small, 1.0 - a, np.sin((1.0 - a) * th) / s)
    w1 = np.where(small, a, np.sin(a * th) / s)
    out = q0 * w0[..., None] + q1 * w1[..., None]
    return out / np.linalg.norm(out, axis=-1, keepdims=True)


def det3(m: np.ndarray) -> np.ndarray:
    """(...) determinants of (...,3,3) matrices (closed form)."""
    return (m[..., 0, 0] * (m[..., 1, 1] * m[..., 2, 2] - m[..., 1, 2] * m[..., 2, 1])
            - m[..., 0, 1] * (m[..., 1, 0] * m[..., 2, 2] - m[..., 1, 2] * m[..., 2, 0])
            + m[..., 0, 2] * (m[..., 1, 0] * m[..., 2, 1] - m[..., 1, 1] * m[..., 2, 0]))


def _fro(m: np.ndarray) -> np.ndarray:
    return np.sqrt(np.einsum("...ij,...ij->...", m, m))


def inv3(m: np.ndarray):
    """(inverse (...,3,3), determinant (...)) of (...,3,3) matrices by cofactors (vectorised,
    far cheaper than batched LAPACK on many small matrices); singular rows give non-finite
    values (callers check the determinant)."""
    a, b, c = m[..., 0, 0], m[..., 0, 1], m[..., 0, 2]
    d, e, f = m[..., 1, 0], m[..., 1, 1], m[..., 1, 2]
    g, h, i = m[..., 2, 0], m[..., 2, 1], m[..., 2, 2]
    A, B, C = e * i - f * h, f * g - d * i, d * h - e * g
    det = a * A + b * B + c * C
    adj = np.stack([np.stack([A, c * h - b * i, b * f - c * e], -1),
                    np.stack([B, a * i - c * g, c * d - a * f], -1),
                    np.stack([C, b * g - a * h, a * e - b * d], -1)], -2)
    with np.errstate(divide="ignore", invalid="ignore"):
        return adj / det[..., None, None], det


def affine_inv(m: np.ndarray) -> np.ndarray:
    """(...,4,4) inverses of affine matrices (last row 0 0 0 1); a singular one (a bone scaled
    to zero) by pinv."""
    r, det = inv3(m[..., :3, :3])
    out = np.zeros(m.shape)
    out[..., :3, :3] = r
    out[..., :3, 3] = -(r @ m[..., :3, 3:4])[..., 0]
    out[..., 3, 3] = 1.0
    bad = ~(np.abs(det) > 1e-30) | ~np.isfinite(out).all(axis=(-2, -1))
    if bad.any():
        out[bad] = np.linalg.pinv(m[bad])
    return out


def _polar_rotation(m3: np.ndarray) -> np.ndarray:
    """(k,3,3) the rotation of the polar decomposition of (k,3,3) non-singular matrices (a
    mirroring one: of its negative), by scaled Newton iteration ``X <- (gX + X^-T / g) / 2``
    with cofactor inverses; an SVD for what does not converge."""
    x = np.where((det3(m3) < 0.0)[:, None, None], -m3, m3)
    for _ in range(12):
        xi, det = inv3(x)
        if not (np.abs(det) > 1e-300).all():
            break
        g = np.sqrt(_fro(xi) / _fro(x))[:, None, None]
        nx = 0.5 * (g * x + np.swapaxes(xi, -1, -2) / g)
        done = np.abs(nx - x).max() < 1e-13
        x = nx
        if done:
            break
    bad = ~(np.abs(np.swapaxes(x, -1, -2) @ x - np.eye(3)).max(axis=(-2, -1)) < 1e-9) | (det3(x) < 0.0)
    if bad.any():
        u, _sv, vt = np.linalg.svd(m3[bad])
        rh = u @ vt
        flip = np.linalg.det(rh) < 0.0
        u[flip, :, 2] *= -1.0
        x[bad] = u @ vt
    return x


def decompose(m: np.ndarray):
    """(t (...,3), q (...,4), p (...,6)) of (...,4,4) affine matrices: ``M3 = R(q) @ P`` with P
    symmetric (the polar decomposition; a mirroring matrix keeps its flip in P).  A rotation
    times a scale along its own axes (almost every bone) takes the normalised columns; the
    others (shear: B-Bone segments, stretched limbs) a Newton iteration."""
    m3 = m[..., :3, :3]
    r = m3 / np.maximum(np.sqrt(np.einsum("...ij,...ij->...j", m3, m3)), 1e-30)[..., None, :]
    gram = np.swapaxes(r, -1, -2) @ r
    off = np.abs(gram - np.eye(3)).reshape(gram.shape[:-2] + (9,)).max(axis=-1)
    hard = (off > 1e-6) | (det3(r) < 0.0)      # 1e-6: the float32 noise of matrices read from Blender
    if hard.any():
        r = r.copy()
        r[hard] = _polar_rotation(m3[hard])
    p = np.swapaxes(r, -1, -2) @ m3
    p = 0.5 * (p + np.swapaxes(p, -1, -2))
    return m[..., :3, 3].copy(), quat_from_rot(r), p[..., _SYM[0], _SYM[1]]


def decompose_moving(m: np.ndarray, tol: float = 1e-7):
    """``decompose(m)`` of (F,N,4,4) samples, decomposing only the columns that change over F
    (the others: their first sample, broadcast)."""
    f, n = m.shape[:2]
    if f < 2 or not n:
        return decompose(m)
    mov = np.flatnonzero(np.abs(m - m[:1]).reshape(f, n, 16).max(axis=(0, 2)) > 0.0)
    t0, q0, p0 = decompose(m[0])
    t = np.broadcast_to(t0, (f, n, 3)).copy()
    q = np.broadcast_to(q0, (f, n, 4)).copy()
    p = np.broadcast_to(p0, (f, n, 6)).copy()
    if mov.size:
        t[:, mov], q[:, mov], p[:, mov] = decompose(m[:, mov])
    return t, q, p


def compose(t: np.ndarray, q: np.ndarray, p: np.ndarray) -> np.ndarray:
    """(...,4,4) affine matrices ``T(t) @ R(q) @ P(p)`` (inverse of ``decompose``)."""
    ps = np.empty(p.shape[:-1] + (3, 3))
    ps[..., _SYM[0], _SYM[1]] = p
    ps[..., _SYM[1], _SYM[0]] = p
    out = np.zeros(t.shape[:-1] + (4, 4))
    out[..., :3, :3] = rot_from_quat(q) @ ps
    out[..., :3, 3] = t
    out[..., 3, 3] = 1.0
    return out


def continuous(q: np.ndarray) -> np.ndarray:
    """(F,...,4) quaternions on one hemisphere along F, per track (vectorised)."""
    if q.shape[0] < 2:
        return q
    d = np.einsum("f...i,f...i->f...", q[1:], q[:-1])
    s = np.cumprod(np.where(d < 0.0, -1.0, 1.0), axis=0)
    out = q.copy()
    out[1:] *= s[..., None]
    return out


class MatrixTable:
    """(F,N,4,4) matrices sampled at F times, stored decomposed (see the module docstring).

    ``static``: (N,4,4) float64, the first sample of every matrix (exact for those that never
    change); ``moving`` (M,): the matrices that change, with ``t`` (F,M,3), ``q`` (F,M,4)
    (continuous along F) and ``p`` (F,M,6) float32."""

    def __init__(self, mats: np.ndarray, tol: float = 1e-7, parts=None, times=None, modes=None, knots=None):
        """``parts``: ``decompose(mats)`` when the caller has it already (not decomposed again).
        ``times`` (F,): the samples' times (default 0..F-1); ``modes`` (F-1,): each interval's
        interpolation, ``knots`` (F,) bool: samples no tangent reads across (``bake_interp``;
        default: cubic, none)."""
        mats = np.asarray(mats, np.float64)
        self.frames, self.count = int(mats.shape[0]), int(mats.shape[1])
        self.static = mats[0].copy() if self.frames else np.tile(np.eye(4), (self.count, 1, 1))
        if self.frames > 1 and self.count:
            dev = np.abs(mats - mats[:1]).reshape(self.frames, self.count, 16).max(axis=(0, 2))
            self.moving = np.flatnonzero(dev > tol * np.maximum(1.0, np.abs(self.static).reshape(self.count, 16).max(1)))
        else:
            self.moving = np.zeros(0, np.int64)
        if parts is not None and self.moving.size:
            t, q, p = (x[:, self.moving] for x in parts)
        else:
            t, q, p = decompose(mats[:, self.moving]) if self.moving.size else (
                np.zeros((self.frames, 0, 3)), np.zeros((self.frames, 0, 4)), np.zeros((self.frames, 0, 6)))
        self.t = t.astype(np.float32)
        self.q = continuous(q).astype(np.float32)
        self.p = p.astype(np.float32)
        self.set_interpolation(times, modes, knots)

    def set_interpolation(self, times=None, modes=None, knots=None) -> None:
        """The samples' times and the intervals' modes (``bake_interp``), and the tangent plan."""
        f = self.frames
        self.times = np.arange(f, dtype=np.float64) if times is None else np.asarray(times, np.float64)
        self.modes = (np.full(max(f - 1, 0), _interp.CUBIC, np.int8) if modes is None
                      else np.asarray(modes, np.int8))
        self.knots = np.zeros(f, bool) if knots is None else np.asarray(knots, bool)
        self.tangents = _interp.plan(self.times, self.modes, self.knots)
        self._coef = OrderedDict()  # interval -> its polynomial (3,M,WIDTH) float32 (``coefficients``)

    @property
    def nbytes(self) -> int:
        """Bytes held: the samples and the intervals' polynomials kept so far (at most
        COEF_BYTES)."""
        return int(self.static.nbytes + self.moving.nbytes + self.t.nbytes + self.q.nbytes + self.p.nbytes
                   + sum(c.nbytes for c in self._coef.values()))

    def coefficients(self, i: int) -> np.ndarray:
        """(3,M,WIDTH) float32: interval i's polynomial (``bake_interp.coefficients``), kept once
        made.  The first call makes every interval's at once when they fit in COEF_BYTES (a
        short bake: no interval is made while playing); a longer bake makes each interval the
        first time the player enters it, the least recently used dropped beyond COEF_BYTES."""
        c = self._coef.get(i)
        if c is not None:
            self._coef.move_to_end(i)
            return c
        n = max(self.frames - 1, 0)
        per = 3 * self.moving.size * _interp.WIDTH * 4
        todo = np.arange(n) if not self._coef and n * per <= COEF_BYTES else np.array([i])
        for s in range(0, todo.size, 64):          # a few intervals at a time (memory)
            k = todo[s:s + 64]
            got = _interp.coefficients((self.t, self.q, self.p), self.times, self.modes, self.tangents, k)
            for j, kk in enumerate(k.tolist()):
                self._coef[kk] = got[j].astype(np.float32)
        while len(self._coef) > 1 and len(self._coef) * per > COEF_BYTES:
            self._coef.popitem(last=False)
        self._coef.move_to_end(i)
        return self._coef[i]

    def at(self, i: int, a: float, rows=None) -> np.ndarray:
        """(N,4,4) float64 matrices between samples i and i + 1 at blend ``a`` (``a`` 0: sample i),
        interpolated per ``bake_interp`` (cubic Hermite, linear or held per interval): one gather
        of the interval's kept polynomial and samples, the polynomial, the rotation's exponential."""
        out = self.static.copy()
        if not self.moving.size:
            return out
        if a <= 0.0 or self.frames == 1:
            out[self.moving] = compose(self.t[i].astype(np.float64), self.q[i].astype(np.float64),
                                       self.p[i].astype(np.float64))
            return out
        c = self.coefficients(i)
        a = np.float32(a)  # pyright: ignore[reportAssignmentType]  (float32 on purpose: the product's precision)
        out[self.moving] = compose(*_interp.finish(self.t[i], self.q[i], self.p[i], ((c[2] * a + c[1]) * a + c[0]) * a))
        return out

    def all_frames(self) -> np.ndarray:
        """(F,N,4,4) float64: every sample (bake time only: transient)."""
        out = np.broadcast_to(self.static, (self.frames,) + self.static.shape).copy()
        if self.moving.size:
            out[:, self.moving] = compose(self.t.astype(np.float64), self.q.astype(np.float64),
                                          self.p.astype(np.float64))
        return out

def levels(parents: np.ndarray):
    """[(rows, parent rows)] per depth of a forest given by ``parents`` (-1: a root), from the
    roots down: ``chain`` composes one level at a time (a few vectorised products)."""
    parents = np.asarray(parents, np.int64)
    depth = np.zeros(parents.size, np.int64)
    up = parents.copy()
    for _ in range(parents.size):           # one step per level, all rows at once
        has = up >= 0
        if not has.any():
            break
        depth += has
        up = np.where(has, parents[np.maximum(up, 0)], -1)
    return [(np.flatnonzero(depth == d), parents[depth == d]) for d in range(int(depth.max(initial=-1)) + 1)]


def chain(local: np.ndarray, plan) -> np.ndarray:
    """(...,N,4,4) ``parent chain @ local`` of every row (roots: their local), ``plan`` from
    ``levels``."""
    out = np.empty_like(local)
    for rows, par in plan:
        if rows.size == 0:
            continue
        top = par < 0
        if top.all():
            out[..., rows, :, :] = local[..., rows, :, :]
        else:
            out[..., rows, :, :] = local[..., rows, :, :]
            sub = rows[~top]
            out[..., sub, :, :] = out[..., par[~top], :, :] @ local[..., sub, :, :]
    return out
