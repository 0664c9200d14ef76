"""F-Curves evaluated as Blender evaluates them, at any frame, vectorised over curves (no bpy).

Transcribes Blender's ``fcurve.cc`` (``fcurve_eval_keyframes``: extrapolation, the binary search
with its 1e-4 "exact key" threshold, CONSTANT / LINEAR / BEZIER segments with
``BKE_fcurve_correct_bezpart`` and the cubic solved for the time, then the value), the easing
modes of ``BLI_easing`` (Sine, Quad, Cubic, Quart, Quint, Expo, Circ, Back, Bounce, Elastic with
In / Out / In-Out and Auto: Back, Bounce and Elastic ease out, the others in) and the Cycles
modifier's time mapping (``fmodifier.cc`` ``fcm_cycles_time``: before / after modes, cycle counts,
Repeat with Offset).

Every segment's value is linear in per-curve coefficients: ``value = coef . basis`` where the
coefficients are the key values (Bezier: the polynomial of the corrected segment's y) and the
basis depends only on the segment's *timing*: its key frames, handle frames, interpolation,
easing settings and the curve's Cycles modifier.  Curves with equal timing (a clip keyed at the
same frames, the usual case) form one timing group: per frame each group is located and its
basis made once (vectorised over groups), and every curve's value is one row product.  Elastic
segments are not linear in the change (Blender's amplitude depends on it): they are evaluated
per curve, vectorised over the curves in one at that frame.
"""
from __future__ import annotations

import bisect

import numpy as np

from ..assets import curves as crv
from ..assets.curves import FCurveSetAsset

#: Blender's key search threshold (BKE_fcurve_bezt_binarysearch_index_ex(..., 0.0001, ...), IS_EQT: <=)
EXACT_THRESH = 1e-4
_FLT_EPS = float(np.finfo(np.float32).eps)
_POW_MIN = 0.0009765625
_POW_SCALE = 1.0 / (1.0 - 0.0009765625)
# segment kinds of the timing table: 0 constant, 1 linear, 2 Bezier, else 3 + 4 * ipo + easing
K_CONST, K_LIN, K_BEZ = 0, 1, 2
#: up to this many timing groups a frame is evaluated group by group in Python scalars
SCALAR_GROUPS = 8


def _kind_ipo(kind: int) -> int:
    return (kind - 3) // 4


def bezier_poly(p0, p1, p2, p3):
    """Power-basis coefficients of the cubic Bezier with control values p0..p3."""
    return (p0, 3.0 * (p1 - p0), 3.0 * (p0 - 2.0 * p1 + p2), p3 - p0 + 3.0 * (p1 - p2))


def correct_bezpart(v1x, v1y, v2x, v2y, v3x, v3y, v4x, v4y):
    """(v2x, v2y, v3x, v3y): Bezier segments' inner handles as ``BKE_fcurve_correct_bezpart``
    leaves them (Blender >= 2.91): a handle longer (in x) than the segment is scaled back to its
    span, keeping its direction (vectorised over segments; keys v1, v4 and handles v2, v3)."""
    h1x, h1y, h2x, h2y = v1x - v2x, v1y - v2y, v4x - v3x, v4y - v3y
    ln = v4x - v1x
    l1, l2 = np.abs(h1x), np.abs(h2x)
    live = (l1 + l2) != 0.0
    f1 = live & (l1 > ln)
    fac = np.where(f1, ln / np.where(f1, l1, 1.0), 1.0)
    v2x, v2y = np.where(f1, v1x - fac * h1x, v2x), np.where(f1, v1y - fac * h1y, v2y)
    f2 = live & (l2 > ln)
    fac = np.where(f2, ln / np.where(f2, l2, 1.0), 1.0)
    v3x, v3y = np.where(f2, v4x - fac * h2x, v3x), np.where(f2, v4y - fac * h2y, v3y)
    return v2x, v2y, v3x, v3y


class CurveEvaluator:
    """Evaluates every curve of an ``FCurveSetAsset`` at one frame: ``evaluate(frame)`` -> (C,)."""

    def __init__(self, cs: FCurveSetAsset):
        self.count = C = cs.count
        offs, counts = cs.offsets, cs.counts
        N = cs.co.shape[0]
        x, y = cs.co[:, 0], cs.co[:, 1]
        hl, hr, ipo = cs.handle_left, cs.handle_right, cs.interpolation
        cid = np.repeat(np.arange(C), counts)
        last = offs + counts - 1
        # per segment, indexed by its left key (the last key of a curve starts none)
        nxt = np.minimum(np.arange(N) + 1, max(N - 1, 0))
        seg = np.ones(N, bool)
        seg[last] = False
        dx = np.where(seg, x[nxt] - x, 0.0)
        kind = np.full(N, K_CONST, np.int64)
        bez = seg & (ipo == crv.IPO_BEZIER) & (dx != 0.0)
        lin = seg & (ipo == crv.IPO_LINEAR) & (dx != 0.0)
        eased = seg & (ipo > crv.IPO_BEZIER) & (dx != 0.0)
        kind[lin] = K_LIN
        kind[bez] = K_BEZ
        auto_out = np.isin(ipo, (crv.IPO_BACK, crv.IPO_BOUNCE, crv.IPO_ELASTIC))
        easing = np.where(cs.easing == crv.EASE_AUTO, np.where(auto_out, crv.EASE_OUT, crv.EASE_IN), cs.easing)
        kind[eased] = 3 + 4 * ipo[eased] + easing[eased]
        params = np.zeros((N, 3))
        m = eased & (ipo == crv.IPO_BACK)
        params[m, 0] = cs.back[m]
        m = eased & (ipo == crv.IPO_ELASTIC)
        params[m, 1] = cs.amplitude[m]
        params[m, 2] = cs.period[m]
        # Bezier segments: BKE_fcurve_correct_bezpart, then the x and y polynomials
        xpoly = np.zeros((N, 4))
        coef_seg = np.zeros((N, 4))
        coef_seg[:, 0] = y
        coef_seg[lin | eased, 1] = (y[nxt] - y)[lin | eased]
        if bez.any():
            i = np.flatnonzero(bez)
            j = i + 1
            v1x, v1y, v4x, v4y = x[i], y[i], x[j], y[j]
            v2x, v2y, v3x, v3y = correct_bezpart(v1x, v1y, hr[i, 0], hr[i, 1], hl[j, 0], hl[j, 1], v4x, v4y)
            xpoly[i] = np.stack(bezier_poly(v1x, v2x, v3x, v4x), axis=1)
            flat = ((np.abs(v1y - v4y) < _FLT_EPS) & (np.abs(hr[i, 1] - hl[j, 1]) < _FLT_EPS)
                    & (np.abs(hl[j, 1] - v4y) < _FLT_EPS))
            coef_seg[i[~flat]] = np.stack(bezier_poly(v1y, v2y, v3y, v4y), axis=1)[~flat]
        # a curve's rows: before (its first key's), its segments, after: row of key a = a + curve + 1
        self._coef = np.zeros((N + C, 4))
        self._coef[np.arange(N) + cid + 1] = coef_seg
        first_row = offs + np.arange(C)
        after_row = last + np.arange(C) + 1
        self._coef[first_row, 0] = y[offs]
        self._coef[after_row] = 0.0
        self._coef[after_row, 0] = y[last]
        ext = np.flatnonzero(cs.extrapolation == 1)
        for c in ext.tolist():      # build time only, curves with linear extrapolation
            o, k = int(offs[c]), int(counts[c])
            sl = slice(o, o + k)
            self._coef[first_row[c], 1] = self._slope(x[sl], y[sl], hl[sl], hr[sl], ipo[sl], 0, +1)
            self._coef[after_row[c], 1] = self._slope(x[sl], y[sl], hl[sl], hr[sl], ipo[sl], k - 1, -1)
        self._slot0 = first_row
        self._cycdy = np.where(cs.has_cycles, y[last] - y[offs], 0.0) if C else np.zeros(0)
        # timing groups: curves with equal key frames, segment kinds, x polynomials and settings
        groups = {}
        group_of = np.zeros(C, np.int64)
        tables = []
        for c in range(C):          # build time only: a dictionary lookup per curve
            o, k = int(offs[c]), int(counts[c])
            sl = slice(o, o + k - 1)
            cyc = cs.cycles[c] if cs.has_cycles[c] else np.zeros(4, np.int64)
            sig = (x[o:o + k].tobytes(), kind[sl].tobytes(), xpoly[sl].tobytes(), params[sl].tobytes(),
                   bool(cs.has_cycles[c]), np.asarray(cyc).tobytes())
            g = groups.get(sig)
            if g is None:
                g = groups[sig] = len(tables)
                tables.append((x[o:o + k], kind[sl], xpoly[sl], params[sl], bool(cs.has_cycles[c]),
                               np.asarray(cyc, np.int64)))
            group_of[c] = g
        self._group_of = group_of
        self._build_groups(tables)
        # the one-group case (every curve keyed at the same frames): coefficients as a (K+1, C, 4)
        # grid, slot-major: one slot's coefficients of every curve are one contiguous block (a
        # frame reads them sequentially, not one cache line per curve)
        self._grid = None
        self._one = None
        if len(tables) == 1 and C:
            self._grid = np.ascontiguousarray(self._coef.reshape(C, -1, 4).transpose(1, 0, 2))
        if C and len(tables) <= SCALAR_GROUPS and not self._cyc_groups.size:
            # the scalar path: per timing group its keys, segment kinds and x polynomials as Python
            # values and its curves' coefficients as a slot-major (K+1, C_g, 4) grid
            one = []
            for g in range(len(tables)):
                k, o = int(self._gcounts[g]), int(self._goff[g])
                cols = np.flatnonzero(group_of == g)
                grid = self._grid if len(tables) == 1 else self._coef[np.arange(k + 1)[:, None] + self._slot0[cols]]
                one.append((self._gx[o:o + k].tolist(), self._kind[o:o + k].tolist(), self._xpoly[o:o + k].tolist(),
                            k, grid, None if len(tables) == 1 else cols))
            self._one = one

    @staticmethod
    def _slope(x, y, hl, hr, ipo, e, step):
        """Linear extrapolation's slope at end key ``e`` (fcurve_eval_keyframes_extrapolate)."""
        if ipo[e] == crv.IPO_CONSTANT:
            return 0.0
        if ipo[e] == crv.IPO_LINEAR:
            if x.shape[0] == 1:
                return 0.0
            d = x[e + step] - x[e]
            return 0.0 if d == 0.0 else (y[e + step] - y[e]) / d
        h = hl[e] if step > 0 else hr[e]
        d = x[e] - h[0]
        return 0.0 if d == 0.0 else (y[e] - h[1]) / d

    def _build_groups(self, tables):
        G = len(tables)
        self.group_count = G
        counts = np.array([t[0].shape[0] for t in tables], np.int64)
        self._gcounts = counts
        self._goff = np.zeros(G, np.int64)
        if G:
            self._goff[1:] = np.cumsum(counts)[:-1]
        xs = np.concatenate([t[0] for t in tables]) if G else np.zeros(0)
        self._gx = xs
        lo = xs.min() if xs.size else 0.0
        hi = xs.max() if xs.size else 0.0
        self._span = (hi - lo) + 10.0
        self._lo = lo
        gid = np.repeat(np.arange(G), counts)
        self._gshift = (xs - lo) + gid * self._span
        self._gbase = np.arange(G) * self._span
        self._first = self._goff
        self._last = self._goff + counts - 1
        self._xfirst = xs[self._first] if G else np.zeros(0)
        self._xlast = xs[self._last] if G else np.zeros(0)
        # segment tables, indexed by the segment's left key (flattened over groups)
        n = xs.shape[0]
        self._kind = np.zeros(n, np.int64)
        self._xpoly = np.zeros((n, 4))
        self._params = np.zeros((n, 3))
        for g, t in enumerate(tables):
            o, k = int(self._goff[g]), int(counts[g])
            self._kind[o:o + k - 1] = t[1]
            self._xpoly[o:o + k - 1] = t[2]
            self._params[o:o + k - 1] = t[3]
        # Bezier segments whose x(t) is linear to 1e-3 of the span (automatic handles: a third of
        # the interval, up to float32 rounding): two Newton steps from the linear guess solve them
        span = np.maximum(np.abs(self._xpoly[:, 1] + self._xpoly[:, 2] + self._xpoly[:, 3]), 1e-300)
        self._xnear = (np.abs(self._xpoly[:, 2]) + np.abs(self._xpoly[:, 3]) <= 1e-3 * span) & (self._xpoly[:, 1] > 0)
        self._kinds_present = sorted(set(int(v) for v in np.unique(self._kind)) - {K_CONST})
        cyc = [g for g, t in enumerate(tables) if t[4]]
        self._cyc_groups = np.array(cyc, np.int64)
        self._cyc = np.array([tables[g][5] for g in cyc], np.int64).reshape(-1, 4)

    # ---------------------------------------------------------------- per frame
    def evaluate(self, frame: float) -> np.ndarray:
        """(C,) every curve's value at ``frame`` (Blender's evaluation time)."""
        if self.count == 0:
            return np.zeros(0)
        if self._one is not None:
            got = self._evaluate_scalar(float(frame))
            if got is not None:
                return got
        f = np.full(self.group_count, float(frame))
        offset = None
        if self._cyc_groups.size:
            offset = self._cycles(f)
        slot, basis, elastic = self._locate(f)
        if self._grid is not None:
            vals = self._grid[int(slot[0])] @ basis[0]
        else:
            g = self._group_of
            rows = self._coef[self._slot0 + slot[g]]
            vals = np.einsum("ij,ij->i", rows, basis[g])
        if offset is not None:
            vals += offset[self._group_of] * self._cycdy
        if elastic is not None:
            self._apply_elastic(vals, slot, elastic)
        return vals

    def _evaluate_scalar(self, f: float):
        """``evaluate`` for a few timing groups without Cycles, in Python scalars (per group one
        bisect, the basis, one (C_g, 4) x (4,) product); None for a frame in an easing segment
        of any group (the general path evaluates those)."""
        one = self._one or ()         # the caller evaluates this way only when the tables are made
        if len(one) == 1:
            return _evaluate_one(one[0], f)
        out = np.empty(self.count)
        for table in one:
            got = _evaluate_one(table, f)
            if got is None:
                return None
            out[table[5]] = got
        return out

    def _cycles(self, f: np.ndarray) -> np.ndarray:
        """fcm_cycles_time for the groups with a Cycles modifier: maps ``f`` in place; returns
        (G,) the cycle offsets' multipliers (Repeat with Offset) for ``_cycdy``."""
        gi = self._cyc_groups
        fg = f[gi]
        xf, xl = self._xfirst[gi], self._xlast[gi]
        bm, bc, am, ac = self._cyc.T
        before = (fg < xf) & (bm != 0)
        after = ~(fg < xf) & (fg > xl) & (am != 0)
        side = np.where(before, -1.0, np.where(after, 1.0, 0.0))
        mode = np.where(before, bm, np.where(after, am, 0))
        cycles = np.where(before, bc, ac)
        ofs = np.where(before, xf, xl)
        dx = xl - xf
        act = (side != 0) & (mode != 0) & (dx != 0)
        safe = np.where(dx != 0, dx, 1.0)
        cycle = side * (fg - ofs) / safe
        cyct = np.fmod(fg - ofs, safe)
        act &= ~((cycles != 0) & (cycle > cycles))
        n = np.where(side < 0, np.floor((fg - ofs) / safe), np.ceil((fg - ofs) / safe))
        n = np.where(act & (mode == crv.CYCLE_REPEAT_OFFSET), n, 0.0)
        mirror = mode == crv.CYCLE_MIRROR
        odd = (np.trunc(cycle).astype(np.int64) % 2) == 1
        odd1 = (np.trunc(cycle + 1.0).astype(np.int64) % 2) == 1
        at_end = np.where(side > 0, xl, xf)
        new = np.where(cyct == 0.0, np.where(mirror & odd, np.where(side > 0, xf, xl), at_end),
                       np.where(mirror & odd1, np.where(side < 0, xf, xl) - cyct, xf + cyct))
        new = np.where(new < xf, new + dx, new)
        f[gi] = np.where(act, new, fg)
        out = np.zeros(self.group_count)
        out[gi] = n
        return out

    def _locate(self, f: np.ndarray):
        """(slot per group, (G, 4) basis, elastic state or None)."""
        G = self.group_count
        rel = np.clip(f - self._lo, -1.0, self._span - 5.0)
        pos = np.searchsorted(self._gshift, self._gbase + rel, side="right")   # first key > f
        first, last = self._first, self._last
        counts = self._gcounts
        basis = np.zeros((G, 4))
        basis[:, 0] = 1.0
        before = f <= self._xfirst
        after = ~before & (f >= self._xlast)
        # slots: 0 before, j + 1 the segment from key j, k after (a curve's rows)
        slot = np.where(before, 0, counts)
        basis[before, 1] = (f - self._xfirst)[before]
        basis[after, 1] = (f - self._xlast)[after]
        inner = ~(before | after)
        if not inner.any():
            return slot, basis, None
        gi = np.flatnonzero(inner)
        right = np.clip(pos[gi], first[gi] + 1, last[gi])
        left = right - 1
        x = self._gx
        fi = f[gi]
        exact_l = np.abs(fi - x[left]) <= EXACT_THRESH
        exact_r = ~exact_l & (np.abs(x[right] - fi) <= EXACT_THRESH)
        seg = left - first[gi]
        s = np.where(exact_r, np.where(right == last[gi], counts[gi], seg + 2), seg + 1)
        slot[gi] = s
        live = ~(exact_l | exact_r)
        kind = np.where(live, self._kind[left], K_CONST)
        elastic = None
        for kd in self._kinds_present:
            m = kind == kd
            if not m.any():
                continue
            rows = gi[m]
            a = left[m]
            u = fi[m] - x[a]
            dur = x[a + 1] - x[a]
            if kd == K_LIN:
                basis[rows, 1] = u / dur
            elif kd == K_BEZ:
                t = _near_linear_x(self._xpoly[a], fi[m]) if self._xnear[a].all() else solve_x(self._xpoly[a], fi[m])
                basis[rows, 1] = t
                basis[rows, 2] = t * t
                basis[rows, 3] = t * t * t
            elif _kind_ipo(kd) == crv.IPO_ELASTIC:
                if elastic is None:
                    elastic = np.zeros((G, 6))
                    elastic[:, 0] = -1.0
                elastic[rows] = np.stack([np.full(rows.shape[0], float((kd - 3) % 4)), u, dur,
                                          self._params[a, 1], self._params[a, 2], np.ones(rows.shape[0])], axis=1)
            else:
                basis[rows, 1] = ease(_kind_ipo(kd), (kd - 3) % 4, u, dur, self._params[a, 0])
        return slot, basis, elastic

    def _apply_elastic(self, vals, slot, el) -> None:
        """Elastic segments, per curve (Blender's amplitude depends on each curve's change):
        ``el`` (G, 6) easing, time, duration, amplitude, period, flag of each group in one."""
        g = self._group_of
        cs = np.flatnonzero(el[g, 5] > 0)
        if cs.size == 0:
            return
        e = el[g[cs]]
        rows = self._coef[self._slot0[cs] + slot[g[cs]]]
        vals[cs] = elastic(e[:, 0].astype(np.int64), e[:, 1], rows[:, 0], rows[:, 1], e[:, 2], e[:, 3], e[:, 4])


def _evaluate_one(table, f: float):
    """The curves of one timing group at ``f`` (``CurveEvaluator._evaluate_scalar``), or None."""
    xs, kinds, xpoly, k, grid, _curves = table
    if f <= xs[0]:
        return grid[0] @ np.array((1.0, f - xs[0], 0.0, 0.0))
    if f >= xs[-1]:
        return grid[k] @ np.array((1.0, f - xs[-1], 0.0, 0.0))
    i = bisect.bisect_right(xs, f)
    a = i - 1
    if f - xs[a] <= EXACT_THRESH:
        return grid[a + 1, :, 0].copy()
    if xs[i] - f <= EXACT_THRESH:
        return grid[k if i == k - 1 else i + 1, :, 0].copy()
    kind = kinds[a]
    if kind == K_CONST:
        return grid[a + 1, :, 0].copy()
    if kind == K_LIN:
        return grid[a + 1] @ np.array((1.0, (f - xs[a]) / (xs[i] - xs[a]), 0.0, 0.0))
    if kind == K_BEZ:
        t = _solve_x_scalar(xpoly[a], f)
        return grid[a + 1] @ np.array((1.0, t, t * t, t * t * t))
    return None


def _solve_x_scalar(xp, f: float) -> float:
    """``solve_x`` for one segment, in Python floats."""
    c0, c1, c2, c3 = xp[0] - f, xp[1], xp[2], xp[3]
    span = c1 + c2 + c3
    t = min(max(-c0 / span, 0.0), 1.0) if span > 0 else 0.0
    lo, hi = 0.0, 1.0
    for _ in range(64):
        x = ((c3 * t + c2) * t + c1) * t + c0
        if x > 0.0:
            hi = t
        else:
            lo = t
        dx = (3.0 * c3 * t + 2.0 * c2) * t + c1
        tn = t - x / dx if dx != 0.0 else 0.5 * (lo + hi)
        if not (lo <= tn <= hi) or tn != tn:
            tn = 0.5 * (lo + hi)
        if abs(tn - t) <= 1e-15:
            return tn
        t = tn
    return t


def _near_linear_x(xp: np.ndarray, f: np.ndarray) -> np.ndarray:
    """``solve_x`` for nearly linear x(t) (``CurveEvaluator._xnear``): the linear guess, then two
    Newton steps (its error is below 1e-3, so the root to ~1e-12)."""
    c0 = xp[:, 0] - f
    c1, c2, c3 = xp[:, 1], xp[:, 2], xp[:, 3]
    t = -c0 / (c1 + c2 + c3)
    for _ in range(2):
        t = t - (((c3 * t + c2) * t + c1) * t + c0) / ((3.0 * c3 * t + 2.0 * c2) * t + c1)
    return np.clip(t, 0.0, 1.0)


def solve_x(xp: np.ndarray, f) -> np.ndarray:
    """t in [0, 1] with x(t) = f for (N, 4) monotone cubics (after correct_bezpart): Newton with
    bisection fallback, to float64 precision."""
    c0 = xp[:, 0] - f
    c1, c2, c3 = xp[:, 1], xp[:, 2], xp[:, 3]
    span = c1 + c2 + c3
    t = np.clip(-c0 / np.where(span > 0, span, 1.0), 0.0, 1.0)
    lo = np.zeros_like(t)
    hi = np.ones_like(t)
    for _ in range(64):
        x = ((c3 * t + c2) * t + c1) * t + c0
        pos = x > 0.0
        hi = np.where(pos, t, hi)
        lo = np.where(pos, lo, t)
        dx = (3.0 * c3 * t + 2.0 * c2) * t + c1
        with np.errstate(divide="ignore", invalid="ignore"):
            tn = t - x / dx
        bad = ~np.isfinite(tn) | (tn < lo) | (tn > hi)
        tn = np.where(bad, 0.5 * (lo + hi), tn)
        done = np.abs(tn - t) <= 1e-15
        t = tn
        if done.all():
            break
    return t


def _bounce_out(u):
    u = np.asarray(u, np.float64)
    r = np.empty_like(u)
    a = u < 1 / 2.75
    b = ~a & (u < 2 / 2.75)
    c = ~a & ~b & (u < 2.5 / 2.75)
    d = ~(a | b | c)
    r[a] = 7.5625 * u[a] * u[a]
    v = u[b] - 1.5 / 2.75
    r[b] = 7.5625 * v * v + 0.75
    v = u[c] - 2.25 / 2.75
    r[c] = 7.5625 * v * v + 0.9375
    v = u[d] - 2.625 / 2.75
    r[d] = 7.5625 * v * v + 0.984375
    return r


def ease(ipo: int, easing: int, time, dur, back=None) -> np.ndarray:
    """BLI_easing's factor g (value = begin + change * g) of the non-elastic easings, for
    ``time`` from the segment start over ``dur`` frames; ``easing`` resolved (In, Out, InOut)."""
    time = np.asarray(time, np.float64)
    u = time / dur
    if ipo == crv.IPO_BACK:
        s = np.asarray(back, np.float64)
        if easing == crv.EASE_IN:
            return u * u * ((s + 1) * u - s)
        if easing == crv.EASE_OUT:
            v = u - 1
            return v * v * ((s + 1) * v + s) + 1
        s = s * 1.525
        w = 2 * u
        v = w - 2
        return np.where(w < 1, 0.5 * (w * w * ((s + 1) * w - s)), 0.5 * (v * v * ((s + 1) * v + s) + 2))
    if ipo == crv.IPO_BOUNCE:
        if easing == crv.EASE_IN:
            return 1 - _bounce_out((dur - time) / dur)
        if easing == crv.EASE_OUT:
            return _bounce_out(u)
        w = 2 * u
        return np.where(time < dur / 2, (1 - _bounce_out(np.maximum(1 - w, 0.0))) * 0.5,
                        _bounce_out(np.maximum(w - 1, 0.0)) * 0.5 + 0.5)
    if ipo == crv.IPO_CIRC:
        if easing == crv.EASE_IN:
            return -(np.sqrt(np.maximum(1 - u * u, 0.0)) - 1)
        if easing == crv.EASE_OUT:
            v = u - 1
            return np.sqrt(np.maximum(1 - v * v, 0.0))
        w = 2 * u
        v = w - 2
        return np.where(w < 1, -0.5 * (np.sqrt(np.maximum(1 - w * w, 0.0)) - 1),
                        0.5 * (np.sqrt(np.maximum(1 - v * v, 0.0)) + 1))
    if ipo in (crv.IPO_QUAD, crv.IPO_CUBIC, crv.IPO_QUART, crv.IPO_QUINT):
        p = {crv.IPO_QUAD: 2, crv.IPO_CUBIC: 3, crv.IPO_QUART: 4, crv.IPO_QUINT: 5}[ipo]
        if ipo == crv.IPO_QUAD:
            if easing == crv.EASE_IN:
                return u * u
            if easing == crv.EASE_OUT:
                return -u * (u - 2)
            w = 2 * u
            v = w - 1
            return np.where(w < 1, 0.5 * w * w, -0.5 * (v * (v - 2) - 1))
        if easing == crv.EASE_IN:
            return u ** p
        if easing == crv.EASE_OUT:
            v = u - 1
            return (v ** p + 1) if p % 2 else -(v ** p - 1)
        w = 2 * u
        v = w - 2
        second = 0.5 * (v ** p + 2) if p % 2 else -0.5 * (v ** p - 2)
        return np.where(w < 1, 0.5 * w ** p, second)
    if ipo == crv.IPO_EXPO:
        def expo_in(t, d):
            return np.where(t == 0.0, 0.0, (np.power(2.0, 10 * (t / d - 1)) - _POW_MIN) * _POW_SCALE)

        def expo_out(t, d):
            return np.where(t == 0.0, 0.0, 1 - (np.power(2.0, -10 * t / d) - _POW_MIN) * _POW_SCALE)
        if easing == crv.EASE_IN:
            return expo_in(time, dur)
        if easing == crv.EASE_OUT:
            return expo_out(time, dur)
        h = dur / 2
        return np.where(time <= h, 0.5 * expo_in(time, h), 0.5 + 0.5 * expo_out(time - h, h))
    if ipo == crv.IPO_SINE:
        if easing == crv.EASE_IN:
            return 1 - np.cos(u * (np.pi / 2))
        if easing == crv.EASE_OUT:
            return np.sin(u * (np.pi / 2))
        return -0.5 * (np.cos(np.pi * u) - 1)
    return u


def _elastic_blend(time, change, dur, amp, s, f):
    """elastic_blend (USE_ELASTIC_BLEND): ``f`` scaled where the amplitude is below the change."""
    t = np.abs(s)
    nz = change != 0
    with np.errstate(divide="ignore", invalid="ignore"):
        f2 = np.where(amp != 0, f * amp / np.where(nz, np.abs(change), 1.0), 0.0)
        td = np.abs(time * dur)
        l = np.where(t > 0, td / np.where(t > 0, t, 1.0), 0.0)
        f2 = np.where(td < t, f2 * l + (1 - l), f2)
    return np.where(nz, f2, f)


def elastic(easing, time, begin, change, dur, amp, period) -> np.ndarray:
    """BLI_easing_elastic_ease_{in,out,in_out} per curve (arrays; ``easing`` resolved)."""
    out = np.empty(np.shape(time))
    for e in (crv.EASE_IN, crv.EASE_OUT, crv.EASE_IN_OUT):
        m = easing == e
        if m.any():
            out[m] = _elastic_one(e, time[m], begin[m], change[m], dur[m], amp[m], period[m])
    return out


def _elastic_one(e, time, begin, change, dur, amp, period):
    two_pi = 2 * np.pi
    if e == crv.EASE_IN_OUT:
        u = time / (dur / 2)
        done = u == 2.0
        u = u - 1.0
        period = np.where(period == 0, dur * (0.3 * 1.5), period)
    else:
        u = time / dur
        done = u == 1.0
        u = u - 1.0 if e == crv.EASE_IN else -u
        period = np.where(period == 0, dur * 0.3, period)
    small = (amp == 0) | (amp < np.abs(change))
    f = np.ones_like(u)
    s = np.where(small, period / 4, 0.0)
    f = np.where(small, _elastic_blend(u, change, dur, amp, s, f), f)
    with np.errstate(invalid="ignore"):
        s = np.where(small, s, period / two_pi * np.arcsin(np.clip(change / np.where(amp != 0, amp, 1.0), -1, 1)))
    a = np.where(small, change, amp)
    wave = a * np.power(2.0, 10 * u) * np.sin((u * dur - s) * two_pi / period)
    if e == crv.EASE_IN:
        v = -f * wave + begin
    elif e == crv.EASE_OUT:
        v = f * wave + change + begin
    else:
        v = np.where(u < 0, -0.5 * f * wave + begin, 0.5 * f * wave + change + begin)
        # the second half is evaluated at -u
        neg = u >= 0
        if neg.any():
            un = -u
            wave2 = a * np.power(2.0, 10 * un) * np.sin((un * dur - s) * two_pi / period)
            v = np.where(neg, 0.5 * f * wave2 + change + begin, v)
    v = np.where(time == 0.0, begin, v)
    return np.where(done, begin + change, v)
