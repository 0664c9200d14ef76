"""Batched numpy evaluation of keyframed F-Curves, following Blender's fcurve evaluation
(BKE fcurve.cc: binary search with a 1e-4 exact-key threshold, constant extrapolation, CONSTANT /
LINEAR / BEZIER segments with the core's ``correct_bezpart`` and the cubic solve for x(t) = frame).

Curves with modifiers, easing interpolations, linear extrapolation or unsorted keys, and samples
whose Bezier segment is not monotonic in x, are left to ``FCurve.evaluate`` (returned as None /
NaN masks) so the result always equals Blender's own evaluation (to float rounding).
"""
from __future__ import annotations

import numpy as np

from ...core.animation.fcurves import bezier_poly, correct_bezpart, solve_x

_EPS32 = float(np.finfo(np.float32).eps)
EXACT_THRESH = 1e-4
IPO_CONST, IPO_LIN, IPO_BEZ = 0, 1, 2


def read_keys(fc):
    """(co (n,2), handle_left (n,2), handle_right (n,2), ipo (n,)) of an F-Curve."""
    kp = fc.keyframe_points
    n = len(kp)
    co = np.empty(n * 2, np.float32)
    hl = np.empty(n * 2, np.float32)
    hr = np.empty(n * 2, np.float32)
    ipo = np.empty(n, np.int32)
    if n:
        kp.foreach_get("co", co)
        kp.foreach_get("handle_left", hl)
        kp.foreach_get("handle_right", hr)
        kp.foreach_get("interpolation", ipo)
    f = np.float64
    return co.reshape(n, 2).astype(f), hl.reshape(n, 2).astype(f), hr.reshape(n, 2).astype(f), ipo


def eligible(fc, co, ipo) -> bool:
    n = co.shape[0]
    if n == 0 or len(fc.modifiers) or fc.extrapolation != "CONSTANT":
        return False
    if n > 1 and (np.any(ipo[:-1] > IPO_BEZ) or np.any(np.diff(co[:, 0]) <= 0.0)):
        return False
    return True


def evaluate_batch(curves, frames: np.ndarray) -> np.ndarray:
    """curves: list of (co, hl, hr, ipo) from read_keys (eligible ones). Returns (C, F) values,
    NaN where the sample must be left to FCurve.evaluate."""
    C = len(curves)
    F = frames.size
    out = np.full((C, F), np.nan)
    if C == 0 or F == 0:
        return out
    counts = np.array([c[0].shape[0] for c in curves], np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    X = np.concatenate([c[0][:, 0] for c in curves])
    Y = np.concatenate([c[0][:, 1] for c in curves])
    HL = np.concatenate([c[1] for c in curves])
    HR = np.concatenate([c[2] for c in curves])
    IPO = np.concatenate([c[3] for c in curves])
    cid = np.repeat(np.arange(C), F)
    f = np.tile(frames.astype(np.float64), C)
    big = 2.0 * (max(np.abs(X).max(), np.abs(frames).max()) + 10.0)
    g = np.searchsorted(X + np.repeat(np.arange(C), counts) * big, f + cid * big, side="right") - 1
    first, last = starts[cid], starts[cid] + counts[cid] - 1
    g = np.clip(g, first, last)
    val = np.full(f.shape, np.nan)
    before = f <= X[first]
    after = f >= X[last]
    val[before] = Y[first[before]]
    val[after] = Y[last[after]]
    todo = ~(before | after)
    # samples on a key return it; samples within Blender's 1e-4 search threshold below the next key
    # take a different code path there: leave those to FCurve.evaluate
    on_key = todo & (np.abs(f - X[g]) < 1e-8)
    val[on_key] = Y[g[on_key]]
    todo &= ~on_key
    gn = np.minimum(g + 1, last)
    todo &= ~(np.abs(X[gn] - f) < EXACT_THRESH)
    idx = np.flatnonzero(todo)
    p, q = g[idx], gn[idx]
    ipo = IPO[p]
    ft = f[idx]
    # constant
    m = ipo == IPO_CONST
    val[idx[m]] = Y[p[m]]
    # linear
    m = ipo == IPO_LIN
    if m.any():
        pp, qq = p[m], q[m]
        fac = (ft[m] - X[pp]) / (X[qq] - X[pp])
        val[idx[m]] = Y[pp] + fac * (Y[qq] - Y[pp])
    # bezier
    m = ipo == IPO_BEZ
    if m.any():
        pp, qq, fb, ib = p[m], q[m], ft[m], idx[m]
        v1x, v1y = X[pp], Y[pp]
        v2x, v2y = HR[pp, 0], HR[pp, 1]
        v3x, v3y = HL[qq, 0], HL[qq, 1]
        v4x, v4y = X[qq], Y[qq]
        flat = (np.abs(v1y - v4y) < _EPS32) & (np.abs(v2y - v3y) < _EPS32) & (np.abs(v3y - v4y) < _EPS32)
        val[ib[flat]] = v1y[flat]
        k = ~flat
        ib, fb = ib[k], fb[k]
        v1x, v1y, v2x, v2y, v3x, v3y, v4x, v4y = (a[k] for a in (v1x, v1y, v2x, v2y, v3x, v3y, v4x, v4y))
        v2x, v2y, v3x, v3y = correct_bezpart(v1x, v1y, v2x, v2y, v3x, v3y, v4x, v4y)
        c0, c1, c2, c3 = bezier_poly(v1x, v2x, v3x, v4x)
        c0 = c0 - fb
        ln = v4x - v1x
        # x(t) must be monotonic on [0, 1] (a single root); otherwise leave it to FCurve.evaluate
        with np.errstate(divide="ignore", invalid="ignore"):
            tv = np.where(c3 != 0.0, -c2 / (3.0 * np.where(c3 != 0.0, c3, 1.0)), 0.0)
        tv = np.clip(tv, 0.0, 1.0)
        dmin = np.minimum(np.minimum(c1, 3.0 * c3 + 2.0 * c2 + c1), (3.0 * c3 * tv + 2.0 * c2) * tv + c1)
        mono = dmin >= -1e-12
        t = solve_x(np.stack([c0, c1, c2, c3], axis=1), 0.0)   # (c0 holds x0 - frame)
        x = ((c3 * t + c2) * t + c1) * t + c0
        ok = mono & (np.abs(x) < 1e-6 * np.maximum(1.0, np.abs(ln)))
        d0, d1, d2, d3 = bezier_poly(v1y, v2y, v3y, v4y)
        y = d0 + t * d1 + t * t * d2 + t * t * t * d3
        val[ib[ok]] = y[ok]
    return val.reshape(C, F)
