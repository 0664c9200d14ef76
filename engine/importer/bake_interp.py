"""The interpolant between baked samples (issue 22 item 2): cubic Hermite per interval, with
tangents from the neighbouring samples, or linear / held where the adaptive bake found that
closer to Blender.

Every quantity a ``MatrixTable`` stores per sample (translation, quaternion components, stretch)
is interpolated by the same weights: between samples i and i + 1 at blend ``a`` the value is a
linear combination of at most ``ROWS`` samples, so one weight vector serves them all (and the
quaternion is normalised after).  Interval modes (``modes``, one per interval):

- ``CUBIC``: cubic Hermite with each end's tangent the derivative of the Lagrange polynomial
  through up to STENCIL samples around it (uneven spacing included), never reading across a
  source key (``knots``: where keyed motion may change its acceleration) nor a non-cubic
  interval; two samples in a segment give the secant (a lerp: motion keyed every frame).  Smooth
  motion between samples is followed to high order, where a lerp errs by the curvature (most of
  the adaptive bake's sub-frame samples before).
- ``LINEAR``: lerp (the quaternion normalised): motion keyed linearly per frame (mocap), a kink.
- ``HOLD``: the interval's first sample until its end: a stepped (CONSTANT) key switches where
  Blender switches.

numpy only; ``plan`` once per table (bake time), ``weights`` per played frame (a few scalars).
"""
from __future__ import annotations

import numpy as np

CUBIC, LINEAR, HOLD = 0, 1, 2
STENCIL = 5         # samples a tangent reads (the derivative of their Lagrange polynomial)
ROWS = 2 + 2 * STENCIL


def plan(times: np.ndarray, modes: np.ndarray, knots=None):
    """(rows (F-1,2,STENCIL) int, weights (F-1,2,STENCIL)): interval i's tangent at its start
    (``[:, 0]``) and end (``[:, 1]``) is ``sum weights * value[rows]``: the derivative there of
    the Lagrange polynomial through up to STENCIL samples around it, all within the interval's
    segment (a run of cubic intervals between ``knots``, the samples where a source key sits:
    the motion's acceleration may jump there, so no tangent reads across one).  Vectorised."""
    t = np.asarray(times, np.float64)
    f = t.size
    n = max(f - 1, 0)
    rows = np.zeros((n, 2, STENCIL), np.int64)
    w = np.zeros((n, 2, STENCIL))
    if n == 0:
        return rows, w
    cub = np.asarray(modes) == CUBIC
    cut = np.zeros(f, bool) if knots is None else np.asarray(knots, bool).copy()
    cut[0] = cut[-1] = True
    cut[1:] |= ~cub            # a non-cubic interval ends a segment on both sides
    cut[:-1] |= ~cub
    k = np.arange(f)
    lo_s = np.maximum.accumulate(np.where(cut, k, 0))              # last cut at or before each sample
    hi_s = np.minimum.accumulate(np.where(cut, k, f - 1)[::-1])[::-1]   # first cut at or after
    i = np.arange(n)
    lo, hi = lo_s[i], hi_s[i + 1]
    m = np.minimum(STENCIL, hi - lo + 1)
    for e in (0, 1):
        kk = i + e
        st = np.clip(kk - m // 2, lo, hi - m + 1)
        idx = st[:, None] + np.arange(STENCIL)[None]
        valid = np.arange(STENCIL)[None] < m[:, None]
        idx = np.where(valid, idx, kk[:, None])
        tn = t[idx]
        x = t[kk]
        d = np.zeros(idx.shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            _derivative_weights(tn, x, valid, d)
        rows[:, e] = idx
        w[:, e] = d
    return rows, w


def _derivative_weights(tn, x, valid, d) -> None:
    """``d`` (n,STENCIL): the derivative at ``x`` of each Lagrange basis polynomial of the valid
    nodes ``tn`` (n,STENCIL)."""
    n = tn.shape[0]
    for j in range(STENCIL):              # Lagrange derivative weights (a few small loops)
        acc = np.zeros(n)
        for l in range(STENCIL):
            if l == j:
                continue
            term = np.where(valid[:, l], 1.0 / np.where(valid[:, l], tn[:, j] - tn[:, l], 1.0), 0.0)
            for q in range(STENCIL):
                if q in (j, l):
                    continue
                term = term * np.where(valid[:, q], (x - tn[:, q]) / np.where(valid[:, q], tn[:, j] - tn[:, q], 1.0), 1.0)
            acc += term
        d[:, j] = np.where(valid[:, j], acc, 0.0)


def weights(times: np.ndarray, modes: np.ndarray, tangents, i: np.ndarray, a: np.ndarray):
    """(rows (K,ROWS) int, coefficients (K,ROWS)): the value in interval ``i`` (K,) at blend
    ``a`` (K,) is ``sum coefficients * value[rows]``.  Vectorised over K."""
    i = np.atleast_1d(np.asarray(i, np.int64))
    a = np.atleast_1d(np.asarray(a, np.float64))
    tr, tw = tangents
    t = np.asarray(times, np.float64)
    k = np.minimum(i, max(t.size - 2, 0))
    rows = np.zeros((i.size, ROWS), np.int64)
    c = np.zeros((i.size, ROWS))
    if t.size < 2:
        return rows, np.concatenate([np.ones((i.size, 1)), c[:, 1:]], 1)
    mode = np.asarray(modes)[k]
    a2, a3 = a * a, a * a * a
    h = t[k + 1] - t[k]
    cub = mode == CUBIC
    lin = mode == LINEAR
    rows[:, 0], rows[:, 1] = k, k + 1
    c[:, 0] = np.where(cub, 2 * a3 - 3 * a2 + 1, np.where(lin, 1.0 - a, 1.0))
    c[:, 1] = np.where(cub, -2 * a3 + 3 * a2, np.where(lin, a, 0.0))
    rows[:, 2:2 + STENCIL] = tr[k, 0]
    rows[:, 2 + STENCIL:] = tr[k, 1]
    c[:, 2:2 + STENCIL] = np.where(cub, (a3 - 2 * a2 + a) * h, 0.0)[:, None] * tw[k, 0]
    c[:, 2 + STENCIL:] = np.where(cub, (a3 - a2) * h, 0.0)[:, None] * tw[k, 1]
    return rows, c


def apply(values: np.ndarray, rows: np.ndarray, c: np.ndarray) -> np.ndarray:
    """(K,...) ``sum_r c[:, r] * values[rows[:, r]]`` of (F,...) ``values``."""
    return np.einsum("kr,kr...->k...", c, values[rows])


def _qmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(...,4) Hamilton products (w, x, y, z)."""
    aw, ax, ay, az = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bw, bx, by, bz = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return np.stack([aw * bw - ax * bx - ay * by - az * bz,
                     aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw], axis=-1)


def apply_rotation(q: np.ndarray, rows: np.ndarray, c: np.ndarray) -> np.ndarray:
    """(K,...,4) unit quaternions interpolated like ``apply`` but in the tangent space of each
    interval's first sample: ``q[i] exp(sum c * log(q[i]^-1 q[rows]))``.  A linear interval is
    then a slerp and a constant-speed turn is exact (a component-wise blend is neither)."""
    q = np.asarray(q, np.float64)
    base = q[rows[:, 0]]                                   # (K,M,4)
    inv = base * np.array([1.0, -1.0, -1.0, -1.0])
    rel = _qmul(inv[:, None], q[rows])                     # (K,R,M,4)
    rel = np.where(rel[..., :1] < 0.0, -rel, rel)
    s = np.linalg.norm(rel[..., 1:], axis=-1)
    ang = np.arctan2(s, rel[..., 0])
    scale = np.where(s > 1e-12, ang / np.maximum(s, 1e-300), 1.0)
    v = np.einsum("kr,kr...->k...", c, rel[..., 1:] * scale[..., None])     # (K,M,3)
    th = np.linalg.norm(v, axis=-1)
    sinc = np.where(th > 1e-12, np.sin(th) / np.maximum(th, 1e-300), 1.0)
    e = np.concatenate([np.cos(th)[..., None], v * sinc[..., None]], axis=-1)
    return _qmul(base, e)


def interpolate(parts, rows: np.ndarray, c: np.ndarray):
    """(t, q, p) of (F,...) decomposed samples ``parts`` at the weights ``rows``, ``c``."""
    t, q, p = parts
    return apply(t, rows, c), apply_rotation(q, rows, c), apply(p, rows, c)
