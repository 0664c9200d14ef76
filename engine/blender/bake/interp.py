"""The interpolant between baked samples (issue 22 item 2): cubic Hermite per interval, with
tangents from the neighbouring samples, or linear / held where the adaptive bake found that
closer to Blender.

Translation and stretch are interpolated component-wise, the rotation as a rotation vector in
the tangent space of the interval's first sample (``q[i] exp(v(a))``: a linear interval is then
a slerp and a constant-speed turn is exact).  ``coefficients`` turns an interval into one
polynomial in the blend per channel (the mode folded in), made once per interval (the table
keeps them, ``tables.MatrixTable``); ``evaluate`` runs it at any time.  Interval modes (``modes``, one per interval):

- ``CUBIC``: cubic Hermite with each end's tangent the derivative of the Lagrange polynomial
  through up to STENCIL samples around it (uneven spacing included), never reading across a
  source key (``knots``: where keyed motion may change its acceleration) nor a non-cubic
  interval; two samples in a segment give the secant (a lerp: motion keyed every frame).  Smooth
  motion between samples is followed to high order, where a lerp errs by the curvature (most of
  the adaptive bake's sub-frame samples before).
- ``LINEAR``: lerp (the quaternion normalised): motion keyed linearly per frame (mocap), a kink.
- ``HOLD``: the interval's first sample until its end: a stepped (CONSTANT) key switches where
  Blender switches.

numpy only; ``plan`` once per table (bake time), ``coefficients`` once per interval,
``evaluate`` per played frame (Horner on (M,WIDTH), one rotation-vector exponential and one
quaternion product).
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
    """K intervals made ready for evaluation at any blend (``intervals``): per interval its start
    sample (``t0`` (K,M,3), ``q0`` (K,M,4), ``p0`` (K,M,6)) and ``c`` (K,3,M,WIDTH): the
    coefficients of a, a^2 and a^3 of the polynomial that moves it (``coefficients``)."""
    t0: np.ndarray
    q0: np.ndarray
    p0: np.ndarray
    c: np.ndarray


WIDTH = 12          # a polynomial's channels: translation (3), rotation vector (3), stretch (6)


def _logs(base: np.ndarray, q: np.ndarray) -> np.ndarray:
    """(K,R,M,3) rotation vectors of ``base``^-1 ``q`` ((K,M,4), (K,R,M,4)), shortest arc."""
    inv = base * np.array([1.0, -1.0, -1.0, -1.0])
    rel = _qmul(inv[:, None], q)
    rel = np.where(rel[..., :1] < 0.0, -rel, rel)
    s = np.sqrt(np.einsum("...i,...i->...", rel[..., 1:], rel[..., 1:]))
    ang = np.arctan2(s, rel[..., 0])
    scale = np.where(s > 1e-12, ang / np.maximum(s, 1e-300), 1.0)
    return rel[..., 1:] * scale[..., None]


def coefficients(parts, times: np.ndarray, modes: np.ndarray, tangents, i: np.ndarray) -> np.ndarray:
    """(K,3,M,WIDTH) float64: the coefficients of a, a^2 and a^3 of intervals ``i`` (K,) of
    (F,M,...) decomposed samples ``parts`` (t, q continuous along F, p), tangents per ``plan``,
    per channel [translation - t0, rotation vector in the start's tangent space, stretch - p0]:
    cubic Hermite (start, end, the tangents scaled by the interval's length), the chord
    (LINEAR) or nothing (HOLD), per interval mode.  Vectorised over K; made once per interval
    (``MatrixTable`` keeps them), evaluated per frame by ``evaluate``."""
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
    base = q[k].astype(np.float64)
    if not (mode == CUBIC).any():       # chords and holds: no tangent is read
        tr = np.broadcast_to(k[:, None, None], tr.shape)
        w0 = w1 = np.zeros_like(w0)
    rows = np.concatenate([j[:, None], tr[:, 0], tr[:, 1]], axis=1)
    if k.size == 1:         # the player: each distinct row once (the stencils overlap)
        uniq, inv = np.unique(rows[0], return_inverse=True)
        logs = _logs(base, q[uniq][None].astype(np.float64))[:, inv.ravel()]
    else:                   # each interval's rows once: the window they span (the stencils overlap)
        lo = rows.min(axis=1)
        win = np.minimum(lo[:, None] + np.arange(int((rows.max(axis=1) - lo).max()) + 1), tm.size - 1)
        logs = _logs(base, q[win].astype(np.float64))[np.arange(k.size)[:, None], rows - lo[:, None]]
    def ends(x):            # start, end, start tangent, end tangent of a linear channel
        return (x[k].astype(np.float64), x[j].astype(np.float64), np.einsum("ks,ks...->k...", w0, x[tr[:, 0]]),
                np.einsum("ks,ks...->k...", w1, x[tr[:, 1]]))

    rot = (np.zeros(logs.shape[:1] + logs.shape[2:]), logs[:, 0],
           np.einsum("ks,ks...->k...", w0, logs[:, 1:1 + STENCIL]),
           np.einsum("ks,ks...->k...", w1, logs[:, 1 + STENCIL:]))
    # (K,M,WIDTH) each, the channels in WIDTH order: translation, rotation vector, stretch
    x0, x1, m0, m1 = (np.concatenate(c, axis=-1) for c in zip(ends(t), rot, ends(p)))
    d = x1 - x0
    cub = (mode == CUBIC)[:, None, None]
    lin = (mode == LINEAR)[:, None, None]
    c1 = np.where(cub, m0, np.where(lin, d, 0.0))
    c2 = np.where(cub, 3.0 * d - 2.0 * m0 - m1, 0.0)
    c3 = np.where(cub, m0 + m1 - 2.0 * d, 0.0)
    return np.stack([c1, c2, c3], axis=1)


def intervals(parts, times: np.ndarray, modes: np.ndarray, tangents, i: np.ndarray) -> Intervals:
    """The start samples and polynomial coefficients of intervals ``i`` (K,) (``coefficients``)."""
    t, q, p = parts
    k = np.minimum(np.maximum(np.atleast_1d(np.asarray(i, np.int64)), 0), max(np.asarray(times).size - 2, 0))
    return Intervals(t[k], q[k], p[k], coefficients(parts, times, modes, tangents, k))


def evaluate(iv: Intervals, a: np.ndarray):
    """(t, q, p) (K,M,...) float64 of intervals ``iv`` at blends ``a`` (K,): the polynomial
    (Horner), the rotation vector mapped onto the start's rotation (``q0 exp(v)``)."""
    a = np.atleast_1d(np.asarray(a, np.float64)).reshape(-1, 1, 1)
    c = iv.c
    return finish(iv.t0, iv.q0, iv.p0, ((c[:, 2] * a + c[:, 1]) * a + c[:, 0]) * a)


def finish(t0, q0, p0, y):
    """(t, q, p) float64 from start samples (...,M,3|4|6) and the polynomial's value ``y``
    (...,M,WIDTH): ``t0 + y_t``, ``q0 exp(y_v)``, ``p0 + y_p``."""
    v = y[..., 3:6]
    th = np.sqrt((v * v).sum(-1))
    e = np.empty(v.shape[:-1] + (4,))
    e[..., 0] = np.cos(th)
    np.multiply(v, np.sinc(th * (1.0 / np.pi))[..., None], out=e[..., 1:])
    return t0 + y[..., 0:3], _qmul(q0, e), p0 + y[..., 6:12]


def _qmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(...,4) Hamilton products (w, x, y, z) (float64)."""
    aw, ax, ay, az = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bw, bx, by, bz = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return np.stack([aw * bw - ax * bx - ay * by - az * bz,
                     aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw], axis=-1)
