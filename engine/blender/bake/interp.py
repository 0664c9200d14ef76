"""The interpolant between baked samples (issue 22 item 2): cubic Hermite per interval, with
tangents from the neighbouring samples, or linear / held where the adaptive bake found that
closer to Blender.

Translation and stretch are interpolated component-wise, the rotation as a rotation vector in
the tangent space of the interval's first sample (``q[i] exp(v(a))``: a linear interval is then
a slerp and a constant-speed turn is exact).  ``intervals`` makes an interval's Hermite terms
once (the player re-uses them while its clock stays in that interval), ``evaluate`` blends them
at any time.  Interval modes (``modes``, one per interval):

- ``CUBIC``: cubic Hermite with each end's tangent the derivative of the Lagrange polynomial
  through up to STENCIL samples around it (uneven spacing included), never reading across a
  source key (``knots``: where keyed motion may change its acceleration) nor a non-cubic
  interval; two samples in a segment give the secant (a lerp: motion keyed every frame).  Smooth
  motion between samples is followed to high order, where a lerp errs by the curvature (most of
  the adaptive bake's sub-frame samples before).
- ``LINEAR``: lerp (the quaternion normalised): motion keyed linearly per frame (mocap), a kink.
- ``HOLD``: the interval's first sample until its end: a stepped (CONSTANT) key switches where
  Blender switches.

numpy only; ``plan`` once per table (bake time), ``intervals`` once per interval entered,
``evaluate`` per played frame (a few (M,3) products and one quaternion product).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

CUBIC, LINEAR, HOLD = 0, 1, 2
STENCIL = 5         # samples a tangent reads (the derivative of their Lagrange polynomial)


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


class Intervals(NamedTuple):
    """K intervals made ready for evaluation at any blend (``intervals``): per interval its
    ``mode`` and, per moving value, the Hermite terms: ``t``/``p`` (start, end, start tangent,
    end tangent), each (K,M,...) with the tangents scaled by the interval's length; ``q``
    (start quaternion (K,M,4), then the end, start tangent and end tangent as rotation vectors
    in the start's tangent space (K,M,3))."""
    mode: np.ndarray
    t: tuple
    q: tuple
    p: tuple


def _logs(base: np.ndarray, q: np.ndarray) -> np.ndarray:
    """(K,R,M,3) rotation vectors of ``base``^-1 ``q`` ((K,M,4), (K,R,M,4)), shortest arc."""
    inv = base * np.array([1.0, -1.0, -1.0, -1.0])
    rel = _qmul(inv[:, None], q)
    rel = np.where(rel[..., :1] < 0.0, -rel, rel)
    s = np.sqrt(np.einsum("...i,...i->...", rel[..., 1:], rel[..., 1:]))
    ang = np.arctan2(s, rel[..., 0])
    scale = np.where(s > 1e-12, ang / np.maximum(s, 1e-300), 1.0)
    return rel[..., 1:] * scale[..., None]


def intervals(parts, times: np.ndarray, modes: np.ndarray, tangents, i: np.ndarray) -> Intervals:
    """The Hermite terms of intervals ``i`` (K,) of (F,M,...) decomposed samples ``parts``
    (t, q continuous along F, p), tangents per ``plan``.  Vectorised over K."""
    t, q, p = parts
    tm = np.asarray(times, np.float64)
    i = np.atleast_1d(np.asarray(i, np.int64))
    k = np.minimum(np.maximum(i, 0), max(tm.size - 2, 0))
    j = np.minimum(k + 1, tm.size - 1)
    mode = np.asarray(modes)[k] if tm.size > 1 else np.full(k.size, HOLD, np.int8)
    if tm.size < 2:
        tr = np.zeros((k.size, 2, STENCIL), np.int64)
        tw = np.zeros((k.size, 2, STENCIL))
        h = np.zeros(k.size)
    else:
        tr, tw = tangents[0][k], tangents[1][k]
        h = tm[j] - tm[k]
    w0 = tw[:, 0] * h[:, None]
    w1 = tw[:, 1] * h[:, None]

    def lin(x):
        return (x[k].astype(np.float64), x[j].astype(np.float64), np.einsum("ks,ks...->k...", w0, x[tr[:, 0]]),
                np.einsum("ks,ks...->k...", w1, x[tr[:, 1]]))

    base = q[k].astype(np.float64)
    rows = np.concatenate([j[:, None], tr[:, 0], tr[:, 1]], axis=1)
    if k.size == 1:         # the player: each distinct row once (the stencils overlap)
        uniq, inv = np.unique(rows[0], return_inverse=True)
        logs = _logs(base, q[uniq][None].astype(np.float64))[:, inv.ravel()]
    else:
        logs = _logs(base, q[rows].astype(np.float64))
    rq = (base, logs[:, 0], np.einsum("ks,ks...->k...", w0, logs[:, 1:1 + STENCIL]),
          np.einsum("ks,ks...->k...", w1, logs[:, 1 + STENCIL:]))
    return Intervals(mode, lin(t), rq, lin(p))


def evaluate(iv: Intervals, a: np.ndarray):
    """(t, q, p) (K,M,...) of intervals ``iv`` at blends ``a`` (K,): cubic Hermite, lerp (the
    rotation: slerp) or the start, per interval mode."""
    a = np.atleast_1d(np.asarray(a, np.float64))
    a2, a3 = a * a, a * a * a
    cub = iv.mode == CUBIC
    lin = iv.mode == LINEAR
    c0 = np.where(cub, 2 * a3 - 3 * a2 + 1, np.where(lin, 1.0 - a, 1.0))
    c1 = np.where(cub, -2 * a3 + 3 * a2, np.where(lin, a, 0.0))
    d0 = np.where(cub, a3 - 2 * a2 + a, 0.0)
    d1 = np.where(cub, a3 - a2, 0.0)

    def comb(terms, cs):
        out = None
        for x, c in zip(terms, cs):
            y = x * c.reshape((-1,) + (1,) * (x.ndim - 1))
            out = y if out is None else out + y
        return out

    t = comb(iv.t, (c0, c1, d0, d1))
    p = comb(iv.p, (c0, c1, d0, d1))
    base = iv.q[0]
    v = comb(iv.q[1:], (c1, d0, d1))
    th = np.sqrt(np.einsum("...i,...i->...", v, v))
    sinc = np.where(th > 1e-12, np.sin(th) / np.maximum(th, 1e-300), 1.0)
    e = np.concatenate([np.cos(th)[..., None], v * sinc[..., None]], axis=-1)
    return t, _qmul(base, e), p


def _qmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(...,4) Hamilton products (w, x, y, z)."""
    aw, ax, ay, az = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bw, bx, by, bz = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return np.stack([aw * bw - ax * bx - ay * by - az * bz,
                     aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw], axis=-1)
