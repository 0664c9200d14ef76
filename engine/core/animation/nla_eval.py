"""Every ID's NLA stack and active action of a scene evaluated in one vectorised pass, as Blender's
``anim_sys.cc`` / ``nla.cc`` evaluate each (no bpy; numpy only).  ``StackBatch(stacks)`` compiles
the stacks (``animation.nla``: channels, tracks, strips, the active action) once into tables; per
frame there is no Python work per strip or per channel:

* **The strip of each track** (``nlastrips_ctime_get_strip``), for every track at once: the first
  strip whose end is not before the time; within it, that strip; before the first strip, the
  first if it holds (Hold); between two strips, the earlier one unless it extends Nothing; after
  the last, the last unless it extends Nothing.  A muted strip is picked and contributes nothing.
  The evaluation time is clamped to the picked strip's range (its start before, its end after).
* **Influence**: an animated influence curve at that time, clamped to [0, 1]; else the blend in /
  out ramps (``|t - start| / blend_in`` in the first ``blend_in`` frames, ``|end - t| /
  blend_out`` in the last), else 1; the active action's own influence for the active action.
  A strip with influence <= 0 (or below float epsilon) is skipped.
* **Strip time** (``nlastrip_get_frame_actionclip``): ``action_start + fmod(t - start, length x
  scale) / scale`` (reversed: from the action's end), the action's end exactly at the strip's end
  when the repeat is whole; an animated strip time replaces it (cyclic: wrapped into the action's
  range).  The active action (the top "dummy" strip) evaluates at the scene time itself and
  applies when its extrapolation allows: Hold always, Hold Forward from its first key, Nothing
  within its key range; not at all when a track is solo.
* **The blend**, track by track bottom to top (every ID's k-th track in one step: IDs have their
  own channels), over a snapshot that starts at the channels' defaults: Replace ``lo (1 - w) +
  v w``, Add ``lo + v w``, Subtract ``lo - v w``, Multiply ``w lo v + (1 - w) lo``, Combine per
  channel mix mode (``lo + (v - default) w``; scale ``lo (v / default)^w``; a quaternion
  ``normalize(lo) x pow(normalize(v), w)``, Blender's ``pow_qt_fl_normalized`` without a sign
  flip, in single precision as Blender: ``nla.qpow``).  A strip writes its own channels and the rest of any quaternion it keys partly (the
  defaults there: quaternions are all-or-nothing).
* **Written channels**: those keyed by any strip of an enabled track or by the active action
  (the domain) take the snapshot; an ID with an active action and no NLA to evaluate (no strips
  on enabled tracks, or NLA off) takes the action's values on its curves' channels only.  The
  rest keep the value the property holds.  Written channels are clamped to their property's
  range (Blender writes through RNA).

Per frame, only the curves of the strips that blend are evaluated, each strip's at its own action
time (one ``CurveEvaluator`` call per such strip: a bisect and one product over its curves).
"""
from __future__ import annotations

import bisect
from typing import Any, Callable, Sequence, cast

import numpy as np

from .nla import (
    ADD,
    COMBINE,
    HOLD,
    HOLD_FORWARD,
    MIX_ADD,
    MIX_AXIS_ANGLE,
    MIX_PROPORTIONAL,
    MIX_QUAT,
    MULTIPLY,
    NOTHING,
    REPLACE,
    SUBTRACT,
    Stack,
    qmul,
    qpow,
    unit_quats,
)

_FLT_EPS = float(np.finfo(np.float32).eps)
#: up to this many strips the strip picked per track is looked up in a table (StackBatch._pick)
PICK_TABLE_STRIPS = 128


class _Curves:
    """The curves of several instances (a strip's action, an animated influence) in one value
    array: instance i's curves at ``offsets[i]:offsets[i + 1]``, each evaluated by its own
    ``CurveEvaluator`` (one timing group: one bisect and one (C, 4) x (4,) product)."""

    def __init__(self):
        self.evaluators = []
        self.offsets = [0]

    @property
    def count(self) -> int:
        return self.offsets[-1]

    def add(self, evaluator) -> int:
        """Adds one instance; returns its first curve's index."""
        self.evaluators.append(evaluator)
        self.offsets.append(self.offsets[-1] + evaluator.count)
        return self.offsets[-2]

    def evaluate(self, frames: np.ndarray, which: np.ndarray, out: np.ndarray) -> np.ndarray:
        """The curves of instances ``which`` at their ``frames`` into ``out`` (the others keep
        what ``out`` holds)."""
        evs, offs = self.evaluators, self.offsets
        for i, f in zip(which.tolist(), frames.tolist()):      # per evaluated strip: one call
            out[offs[i]:offs[i + 1]] = evs[i].evaluate(f)
        return out


class _Group:
    """The rows one blend type of one layer may write: (row, strip, value index) per pair; the
    value index points into ``[curve values, defaults]`` (a quaternion's other components take
    their defaults).  Combine splits them by mix mode; its quaternions as (Q, 4) blocks."""

    def __init__(self, blend: int, pairs: list, modes: np.ndarray, nvals: int):
        self.blend = blend
        rows = np.array([p[0] for p in pairs], np.int64)
        strip = np.array([p[1] for p in pairs], np.int64)
        vidx = np.array([p[2] for p in pairs], np.int64)
        vidx = np.where(vidx >= 0, vidx, nvals + rows)       # a default: row r at nvals + r
        if blend != COMBINE:
            self.parts = [_Part(rows, strip, vidx)]
            return
        m = modes[rows]
        add = (m == MIX_ADD) | (m == MIX_AXIS_ANGLE)
        prop = m == MIX_PROPORTIONAL
        q = np.flatnonzero(m == MIX_QUAT)
        # quaternion blocks: a strip's rows are sorted, a quaternion's four components consecutive
        self.parts = [_Part(rows[add], strip[add], vidx[add]), _Part(rows[prop], strip[prop], vidx[prop]),
                      _Part(rows[q].reshape(-1, 4), strip[q][::4], vidx[q].reshape(-1, 4))]


class _Part:
    """Rows (or quaternion blocks), the strip of each and where its value is."""

    def __init__(self, rows, strip, vidx):
        self.rows, self.strip, self.vidx = rows, strip, vidx
        self.strips = np.unique(strip)

    def select(self, active: np.ndarray, infl: np.ndarray):
        """(rows, value indices, weights) of the active strips' pairs, or None."""
        on = active[self.strips]
        if on.all():
            if not on.size:
                return None
            if self.strips.size == 1:
                return self.rows, self.vidx, float(infl[self.strips[0]])
            return self.rows, self.vidx, infl[self.strip]
        if not on.any():
            return None
        sel = active[self.strip]
        return self.rows[sel], self.vidx[sel], infl[self.strip[sel]]


class StackBatch:
    """``stacks`` (one per ID, channels concatenated in order) evaluated together: ``evaluate(t,
    current)`` -> (values, written) over every channel (see the module docstring)."""

    def __init__(self, stacks: Sequence[Stack]):
        stacks = list(stacks)
        sizes = [int(s.modes.shape[0]) for s in stacks]
        offs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        C = int(offs[-1])
        self.count = C
        self.modes = np.concatenate([s.modes for s in stacks]) if stacks else np.zeros(0, np.int64)
        self.defaults = np.concatenate([s.defaults for s in stacks]) if stacks else np.zeros(0)
        lower = [s.lower if s.lower is not None else np.full(n, np.nan) for s, n in zip(stacks, sizes)]
        upper = [s.upper if s.upper is not None else np.full(n, np.nan) for s, n in zip(stacks, sizes)]
        self.curves = _Curves()
        self.controls = _Curves()
        written = np.zeros(C, bool)
        plain_rows, plain_curves, plain_inst = [], [], []
        strips = []      # per strip: (fields, layer, track or -1 for an active action, src instance)
        tracks = []      # per track: (first strip, strip count)
        pairs = {}       # (layer, blend) -> [(row, strip, value index)]
        infl_ctrl, time_ctrl = [], []     # (strip, control instance)
        for stack, o in zip(stacks, offs[:-1].tolist()):
            if stack.action is not None and stack.is_plain():
                # the active action alone: its values on its curves' channels
                src = stack.action
                first = self.curves.add(src.evaluator)
                plain_inst.append(len(self.curves.evaluators) - 1)
                plain_rows.append(o + np.asarray(src.channels, np.int64))
                plain_curves.append(first + np.arange(src.channels.shape[0]))
                written[o + np.asarray(src.channels, np.int64)] = True
                continue
            written[o + np.flatnonzero(stack.domain)] = True
            layer = 0
            for track in stack.enabled_tracks():
                if not track.strips:
                    continue
                tracks.append((len(strips), len(track.strips)))
                for st in track.strips:
                    self._add_strip(stack, o, st, layer, len(tracks) - 1, strips, pairs, infl_ctrl, time_ctrl)
                layer += 1
            if stack.action is not None and not any(t.solo for t in stack.tracks):
                a0, a1 = stack.action_range
                if a1 == a0:
                    a1 = a0 + 1.0
                fields = dict(start=a0, end=a1, action_start=a0, action_end=a1, scale=1.0, repeat=1.0,
                              reverse=False, extend=stack.action_extend, blend_in=0.0, blend_out=0.0,
                              blend=stack.action_blend, influence=float(stack.action_influence), mute=False,
                              time_cyclic=False, source=stack.action)
                self._add_strip(stack, o, fields, layer, -1, strips, pairs, infl_ctrl, time_ctrl)
        self._written = written
        self._plain = ((np.concatenate(plain_rows), np.concatenate(plain_curves)) if plain_rows else None)
        self._plain_inst = np.array(plain_inst, np.int64)
        lo = np.concatenate(lower) if stacks else np.zeros(0)
        hi = np.concatenate(upper) if stacks else np.zeros(0)
        lo = np.where(np.isnan(lo), -np.inf, lo)
        hi = np.where(np.isnan(hi), np.inf, hi)
        clamp = np.flatnonzero(written & (np.isfinite(lo) | np.isfinite(hi)))
        self._clamp = (clamp, lo[clamp], hi[clamp]) if clamp.size else None
        self._nla_rows = np.flatnonzero(written)
        if self._plain is not None:
            keep = np.ones(C, bool)
            keep[self._plain[0]] = False
            self._nla_rows = np.flatnonzero(written & keep)
        self._tables(strips, tracks)
        self.layers = [[_Group(b, pairs[(L, b)], self.modes, self.curves.count)
                        for b in sorted(b for (l, b) in pairs if l == L)]
                       for L in range(1 + max((l for l, _ in pairs), default=-1))]
        self._infl_ctrl = np.array(infl_ctrl, np.int64).reshape(-1, 2)
        self._time_ctrl = np.array(time_ctrl, np.int64).reshape(-1, 2)
        self._ctrl = np.concatenate([self._infl_ctrl, self._time_ctrl])
        self._ctrl_first = np.array(self.controls.offsets[:-1], np.int64)
        self._ctrl_vals = np.zeros(self.controls.count)

    def _add_strip(self, stack, o, st, layer, track, strips, pairs, infl_ctrl, time_ctrl) -> None:
        """One strip (an NLA strip, or the active action's fields as a dict) into the tables."""
        get = cast(Callable[[str], Any], st.get if isinstance(st, dict) else (lambda k, _s=st: getattr(_s, k)))
        k = len(strips)
        src = get("source")
        inst = -1
        if src is not None:
            first = self.curves.add(src.evaluator)
            inst = len(self.curves.evaluators) - 1
            idx, _heads = stack.rows_of(src)
            pos = {int(c): j for j, c in enumerate(np.asarray(src.channels).tolist())}
            lst = pairs.setdefault((layer, int(get("blend"))), [])
            for r in idx.tolist():      # set-up time: a loop over the strip's channels
                j = pos.get(r)
                lst.append((o + r, k, first + j if j is not None else -1))
        if track >= 0:
            for name, out in (("influence_curve", infl_ctrl), ("time_curve", time_ctrl)):
                c = get(name)
                if c is not None:
                    self.controls.add(c)
                    out.append((k, len(self.controls.evaluators) - 1))
        strips.append((dict((n, get(n)) for n in ("start", "end", "action_start", "action_end", "scale",
                                                   "repeat", "reverse", "extend", "blend_in", "blend_out",
                                                   "influence", "mute", "time_cyclic")), track, inst))

    def _tables(self, strips, tracks) -> None:
        def f(n: str, dt: type = np.float64) -> np.ndarray:
            return np.array([s[0][n] for s in strips], dt)
        self._start, self._end = f("start"), f("end")
        self._astart, self._aend = f("action_start"), f("action_end")
        scale = np.abs(f("scale"))
        self._scale = np.where(scale != 0.0, scale, 1.0)
        rep = f("repeat")
        rep = np.where(rep != 0.0, rep, 1.0)
        self._whole = np.abs(rep - np.floor(rep)) < _FLT_EPS
        length = self._aend - self._astart
        self._length = np.where(length != 0.0, length, 1.0)
        self._reverse = f("reverse", bool)
        self._extend = f("extend", np.int64)
        self._bi, self._bo = np.abs(f("blend_in")), np.abs(f("blend_out"))
        self._influence = f("influence")
        self._mute = f("mute", bool)
        self._cyclic = f("time_cyclic", bool)
        self._track = np.array([s[1] for s in strips], np.int64)
        inst = np.array([s[2] for s in strips], np.int64)
        self._has_src = inst >= 0
        self._src_strips = np.flatnonzero(self._has_src)
        self._src_inst = inst[self._src_strips]                  # their curve instances
        self._dummy = np.flatnonzero(self._track < 0)
        self._trackless = np.where(self._track < 0, len(strips), 0)   # never a track's candidate
        self._track_first = np.array([t[0] for t in tracks], np.int64)
        self._track_last = np.array([t[0] + t[1] - 1 for t in tracks], np.int64)
        self._strip_count = len(strips)
        self._index = np.arange(len(strips))
        self._pick_table = None
        self._pick_table = self._make_pick_table()
        # every strip's curve values, then the defaults: a pair's value index points into it
        self._pool = np.concatenate([np.zeros(self.curves.count), self.defaults])
        self._vals = self._pool[:self.curves.count]
        self._written.flags.writeable = False

    # ------------------------------------------------------------------ per frame
    def _pick(self, t: float):
        """(picked (S,) bool, clamped time (S,)) of every strip at scene time ``t``: looked up in
        the pick table (one bisect) when there is one, else ``_pick_at``."""
        table = self._pick_table
        if table is None or t != t:
            return self._pick_at(t)
        bounds, picked, tc0, tc1 = table
        j = bisect.bisect_left(bounds, t)
        k = 2 * j + 1 if j < len(bounds) and bounds[j] == t else 2 * j
        return picked[k], tc0[k] + tc1[k] * t

    def _make_pick_table(self):
        """Which strips are picked changes only where the time crosses a strip's start or end or
        the active action's range: per open interval between those times and per time itself, the
        picked strips and their clamped time (a constant, or the time itself: ``tc0 + tc1 t``),
        made by ``_pick_at`` at one time of each (set-up; None for more than ``PICK_TABLE_STRIPS``
        strips)."""
        S = self._strip_count
        if S == 0 or S > PICK_TABLE_STRIPS:
            return None
        bounds = sorted(set(np.concatenate([self._start, self._end]).tolist()))
        reps = []
        for j, b in enumerate(bounds):
            lo = bounds[j - 1] if j else b - abs(b) - 1.0
            reps += [0.5 * (lo + b) if j else lo, b]       # the interval below b, then b itself
        reps.append(bounds[-1] + abs(bounds[-1]) + 1.0)
        picked = np.zeros((len(reps), S), bool)
        tc0 = np.zeros((len(reps), S))
        tc1 = np.zeros((len(reps), S))
        for k, r in enumerate(reps):
            p, tc = self._pick_at(r)
            picked[k] = p
            lin = (tc == r) if k % 2 == 0 else np.zeros(S, bool)   # a time itself: constants
            tc0[k] = np.where(lin, 0.0, tc)
            tc1[k] = lin
        for a in (picked, tc0, tc1):
            a.flags.writeable = False
        return bounds, picked, tc0, tc1

    def _pick_at(self, t: float):
        """(picked (S,) bool, clamped time (S,)) of every strip at scene time ``t``."""
        S = self._strip_count
        picked = np.zeros(S, bool)
        tc = self._start.copy()
        if self._track_first.size and t == t:
            cand = np.maximum(np.where(t <= self._end, self._index, S), self._trackless)
            first = np.minimum.reduceat(cand, self._track_first)
            found = first <= self._track_last
            k = np.where(found, first, self._track_last)
            within = found & (self._start[k] <= t)
            head = k == self._track_first
            prev = np.maximum(k - 1, 0)
            ext = self._extend
            # before the first strip: it if it holds; between two: the earlier unless Nothing;
            # after the last: it unless Nothing
            est = np.where(within, k,
                           np.where(found & head, np.where(ext[k] == HOLD, k, -1),
                                    np.where(found, np.where(ext[prev] != NOTHING, prev, -1),
                                             np.where(ext[k] != NOTHING, k, -1))))
            side = np.where(within, 0, np.where(found & head, -1, 1))
            ok = est >= 0
            e, sd = est[ok], side[ok]
            e_ok = ~self._mute[e]
            e, sd = e[e_ok], sd[e_ok]
            picked[e] = True
            tc[e] = np.where(sd < 0, self._start[e], np.where(sd > 0, self._end[e], t))
        d = self._dummy
        if d.size:
            a0, a1, ext = self._start[d], self._end[d], self._extend[d]
            picked[d] = ((ext == HOLD) | ((ext == HOLD_FORWARD) & (t >= a0))
                         | ((ext == NOTHING) & (a0 <= t) & (t <= a1)))
            tc[d] = t
        return picked, tc

    def evaluate(self, t: float, current: np.ndarray):
        """(values (C,), written (C,) bool) at scene time ``t``; ``current`` gives the values of
        channels nobody writes (they keep what the property holds)."""
        t = float(t)
        out = np.array(current, np.float64)
        picked, tc = self._pick(t)
        start, end = self._start, self._end
        # influence: blend in / out, else the strip's (1; the active action's own)
        bi, bo = self._bi, self._bo
        with np.errstate(divide="ignore", invalid="ignore"):
            ramp_in = (bi != 0.0) & (tc <= start + bi)
            ramp_out = ~ramp_in & (bo != 0.0) & (tc >= end - bo)
            infl = np.where(ramp_in, np.abs(tc - start) / bi, np.where(ramp_out, np.abs(end - tc) / bo,
                                                                      self._influence))
            # strip time (the active action: the scene time itself)
            span = self._length * self._scale
            ph = np.fmod(tc - start, span) / self._scale
            at_end = (np.abs(tc - end) < _FLT_EPS) & self._whole
            stime = np.where(self._reverse, np.where(at_end, self._astart, self._aend - ph),
                             np.where(at_end, self._aend, self._astart + ph))
        if self._dummy.size:
            stime[self._dummy] = t
        if self._infl_ctrl.size or self._time_ctrl.size:
            ctrl = self._ctrl
            cv = self.controls.evaluate(tc[ctrl[:, 0]], ctrl[:, 1], self._ctrl_vals)
            first = self._ctrl_first
            if self._infl_ctrl.size:
                s, c = self._infl_ctrl[:, 0], self._infl_ctrl[:, 1]
                infl[s] = np.minimum(np.maximum(cv[first[c]], 0.0), 1.0)
            if self._time_ctrl.size:
                s, c = self._time_ctrl[:, 0], self._time_ctrl[:, 1]
                v = cv[first[c]]
                cyc = self._cyclic[s]
                span = self._aend[s] - self._astart[s]
                wrap = np.fmod(v - self._astart[s], np.where(span != 0.0, span, 1.0))
                stime[s] = np.where(cyc, wrap, v)
        active = picked & self._has_src & ~(infl <= 0.0) & ~(np.abs(infl) < _FLT_EPS)
        # the curves of the strips that blend, each at its strip time; the plain actions at t
        run = np.flatnonzero(active[self._src_strips])
        vals = self.curves.evaluate(stime[self._src_strips[run]], self._src_inst[run], self._vals)
        if self._plain_inst.size:
            self.curves.evaluate(np.full(self._plain_inst.size, t), self._plain_inst, vals)
        pool = self._pool
        snap = self.defaults.copy()
        for groups in self.layers:
            for g in groups:
                _blend(g, snap, pool, active, infl, self.defaults)
        nla = self._nla_rows
        out[nla] = snap[nla]
        if self._plain is not None:
            rows, curves = self._plain
            out[rows] = vals[curves]
        if self._clamp is not None:
            rows, lo, hi = self._clamp
            out[rows] = np.minimum(np.maximum(out[rows], lo), hi)
        return out, self._written

def _blend(g: _Group, snap, pool, active, infl, defaults) -> None:
    """One layer's strips of one blend type into ``snap`` (every ID at once)."""
    if g.blend != COMBINE:
        hit = g.parts[0].select(active, infl)
        if hit is None:
            return
        rows, vidx, w = hit
        sv = pool[vidx]
        lo = snap[rows]
        if g.blend == REPLACE:
            snap[rows] = lo * (1.0 - w) + sv * w
        elif g.blend == ADD:
            snap[rows] = lo + sv * w
        elif g.blend == SUBTRACT:
            snap[rows] = lo - sv * w
        elif g.blend == MULTIPLY:
            snap[rows] = w * (lo * sv) + (1.0 - w) * lo
        return
    add, prop, quat = g.parts
    hit = add.select(active, infl)
    if hit is not None:
        rows, vidx, w = hit
        snap[rows] = snap[rows] + (pool[vidx] - defaults[rows]) * w
    hit = prop.select(active, infl)
    if hit is not None:
        rows, vidx, w = hit
        base = defaults[rows]
        b = np.where(base == 0.0, 1.0, base)
        with np.errstate(divide="ignore", invalid="ignore"):
            snap[rows] = snap[rows] * np.power(pool[vidx] / b, w)
    hit = quat.select(active, infl)
    if hit is not None:
        blocks, vidx, w = hit
        snap[blocks] = qmul(unit_quats(snap[blocks]), qpow(pool[vidx], w))
