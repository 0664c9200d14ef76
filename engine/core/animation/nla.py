"""One ID's NLA stack and active action evaluated as Blender's ``anim_sys.cc`` / ``nla.cc`` do
(no bpy; numpy only).  The rules, verified against bpy 4.5 and 5.2, are in the docstrings below
(strip time mapping, the strip picked per track with its extrapolation, influence with blend
in / out or an animated influence, animated strip time, the blend types with their per-channel
mix modes, mute / solo, the active action as the top "dummy" strip, the domain of written
channels and its defaults).

An ID's animated properties are C scalar *channels* (one per (data path, array index)); each has
a mix mode (``MIX_ADD``, ``MIX_QUAT`` for the four components of a rotation quaternion,
``MIX_AXIS_ANGLE``, ``MIX_PROPORTIONAL`` for scale) and a default value.  A source of values is
anything with ``evaluate(frame) -> (K,)`` (``fcurves.CurveEvaluator``) plus the channel of each
of its K values.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np

MIX_ADD, MIX_QUAT, MIX_AXIS_ANGLE, MIX_PROPORTIONAL = 0, 1, 2, 3
REPLACE, COMBINE, ADD, SUBTRACT, MULTIPLY = 0, 1, 2, 3, 4
BLEND_TYPES = {"REPLACE": REPLACE, "COMBINE": COMBINE, "ADD": ADD, "SUBTRACT": SUBTRACT, "MULTIPLY": MULTIPLY}
NOTHING, HOLD, HOLD_FORWARD = 0, 1, 2
EXTEND_MODES = {"NOTHING": NOTHING, "HOLD": HOLD, "HOLD_FORWARD": HOLD_FORWARD}
_FLT_EPS = float(np.finfo(np.float32).eps)


@dataclass
class Source:
    """An action's curves (one slot) and the channel each curve writes."""
    evaluator: object              # evaluate(frame) -> (K,)
    channels: np.ndarray           # (K,) int64 channel indices


@dataclass
class Strip:
    source: Optional[Source]
    start: float
    end: float
    action_start: float
    action_end: float
    scale: float = 1.0
    repeat: float = 1.0
    reverse: bool = False
    extend: int = HOLD
    blend_in: float = 0.0
    blend_out: float = 0.0
    blend: int = REPLACE
    influence: float = 1.0
    mute: bool = False
    influence_curve: object = None      # evaluate(frame) -> (1,) when use_animated_influence
    time_curve: object = None           # evaluate(frame) -> (1,) when use_animated_time
    time_cyclic: bool = False
    no_time_map: bool = False           # the active action's dummy strip (extend != Nothing)


@dataclass
class Track:
    strips: List[Strip]
    mute: bool = False
    solo: bool = False


@dataclass
class Stack:
    """One ID's animation data: channel table, NLA tracks (bottom to top), active action."""
    modes: np.ndarray                   # (C,) MIX_*
    defaults: np.ndarray                # (C,)
    tracks: List[Track] = field(default_factory=list)
    action: Optional[Source] = None
    action_range: tuple = (0.0, 1.0)    # the action's key range incl. F-Modifiers
    action_blend: int = REPLACE
    action_influence: float = 1.0
    action_extend: int = HOLD
    use_nla: bool = True
    lower: Optional[np.ndarray] = None  # (C,) clamp minimum (nan: none), applied on write
    upper: Optional[np.ndarray] = None

    def __post_init__(self):
        self.modes = np.asarray(self.modes, np.int64)
        self.defaults = np.asarray(self.defaults, np.float64)
        # quaternion groups: the first channel of each run of four MIX_QUAT channels
        q = np.flatnonzero(self.modes == MIX_QUAT)
        self._quat_heads = q[::4] if q.size % 4 == 0 else q[:0]
        self._quat_of = np.full(self.modes.shape[0], -1, np.int64)
        if self._quat_heads.size:
            self._quat_of[self._quat_heads[:, None] + np.arange(4)] = self._quat_heads[:, None]
        self._blend_rows = {}     # id(Source) -> (channels it blends, its quaternion heads)
        self._clamps = None
        self.domain = self._domain()

    # -------------------------------------------------------------- structure
    def enabled_tracks(self) -> List[Track]:
        solo = [t for t in self.tracks if t.solo]
        if solo:
            return solo[:1]                  # the solo track, even muted
        return [t for t in self.tracks if not t.mute]

    def _plain(self) -> bool:
        if self.action is None:
            return False
        if not self.use_nla:
            return True
        return (not any(t.solo for t in self.tracks)
                and not any(len(t.strips) for t in self.enabled_tracks()))

    def _domain(self) -> np.ndarray:
        """Channels written: keyed by any strip of an enabled track or by the active action."""
        dom = np.zeros(self.modes.shape[0], bool)
        srcs = [s.source for t in self.enabled_tracks() for s in t.strips]
        if self.action is not None and not any(t.solo for t in self.tracks):
            srcs.append(self.action)
        for src in srcs:
            if src is not None:
                dom[src.channels] = True
        return self._expand_quats(dom)

    def _expand_quats(self, mask: np.ndarray) -> np.ndarray:
        """``mask`` with every quaternion it touches whole (all four components)."""
        if self._quat_heads.size:
            q = self._quat_of >= 0
            hit = np.zeros(mask.shape[0], bool)
            hit[self._quat_of[mask & q]] = True
            mask |= q & hit[np.maximum(self._quat_of, 0)]
        return mask

    def _rows_of(self, src: Source):
        """(channels ``src`` blends: its own plus the rest of each quaternion it keys, their
        quaternion heads): made once per source."""
        hit = self._blend_rows.get(id(src))
        if hit is None or hit[0] is not src:
            mask = np.zeros(self.modes.shape[0], bool)
            mask[src.channels] = True
            idx = np.flatnonzero(self._expand_quats(mask))
            heads = np.unique(self._quat_of[idx[self.modes[idx] == MIX_QUAT]])
            hit = self._blend_rows[id(src)] = (src, idx, heads)
        return hit[1], hit[2]

    # -------------------------------------------------------------- evaluation
    def evaluate(self, t: float, current: np.ndarray):
        """(values (C,), written (C,) bool) at scene time ``t``; ``current`` gives the values of
        channels nobody writes (they keep what the property holds)."""
        out = np.array(current, np.float64)
        written = np.zeros(out.shape[0], bool)
        if self.action is not None and self._plain():
            vals = self.action.evaluator.evaluate(t)
            out[self.action.channels] = vals
            written[self.action.channels] = True
            return self._clamp(out, written), written
        snap = self.defaults.copy()
        for track in self.enabled_tracks():
            self._blend_strip(snap, _pick(track.strips, t))
        if self.action is not None and not any(t_.solo for t_ in self.tracks):
            a0, a1 = self.action_range
            if a1 == a0:
                a1 = a0 + 1.0
            ext = self.action_extend
            dummy = Strip(self.action, a0, a1, a0, a1, extend=ext, blend=self.action_blend,
                          influence=self.action_influence, no_time_map=ext != NOTHING)
            if ext == HOLD or (ext == HOLD_FORWARD and t >= a0) or (ext == NOTHING and a0 <= t <= a1):
                self._blend_strip(snap, (dummy, t, float(self.action_influence), t))
        dom = self.domain
        out[dom] = snap[dom]
        written[dom] = True
        return self._clamp(out, written), written

    def _clamp(self, out, written):
        """Blender's write through RNA: written channels clamped to their property's range."""
        if self.lower is None:
            return out
        if self._clamps is None:
            lo = np.where(np.isnan(self.lower), -np.inf, self.lower)
            hi = np.where(np.isnan(self.upper), np.inf, self.upper)
            self._clamps = (lo, hi, bool(np.isfinite(lo).any() or np.isfinite(hi).any()))
        lo, hi, any_ = self._clamps
        if any_:
            out = np.where(written, np.minimum(np.maximum(out, lo), hi), out)
        return out

    def _blend_strip(self, snap: np.ndarray, picked) -> None:
        if picked is None:
            return
        strip, tc, infl, stime = picked
        src = strip.source
        if src is None or infl <= 0.0 or abs(infl) < _FLT_EPS:
            return
        vals = np.asarray(src.evaluator.evaluate(stime), np.float64)
        ch = src.channels
        # the strip's own snapshot: its values on the channels it keys, the defaults on the rest
        # of a quaternion it keys partly (quaternions are all-or-nothing)
        idx, heads = self._rows_of(src)
        s = self.defaults.copy()
        s[ch] = vals
        lo = snap[idx]
        sv = s[idx]
        w = float(infl)
        mode = strip.blend
        if mode == REPLACE:
            snap[idx] = lo * (1.0 - w) + sv * w
        elif mode == ADD:
            snap[idx] = lo + sv * w
        elif mode == SUBTRACT:
            snap[idx] = lo - sv * w
        elif mode == MULTIPLY:
            snap[idx] = w * (lo * sv) + (1.0 - w) * lo
        else:
            self._combine(snap, s, idx, heads, w)

    def _combine(self, snap, s, idx, heads, w) -> None:
        modes = self.modes[idx]
        base = self.defaults[idx]
        add = (modes == MIX_ADD) | (modes == MIX_AXIS_ANGLE)
        if add.any():
            i = idx[add]
            snap[i] = snap[i] + (s[i] - base[add]) * w
        prop = modes == MIX_PROPORTIONAL
        if prop.any():
            i = idx[prop]
            b = np.where(base[prop] == 0.0, 1.0, base[prop])
            with np.errstate(divide="ignore", invalid="ignore"):
                snap[i] = snap[i] * np.power(s[i] / b, w)
        if heads.size:
            g = heads[:, None] + np.arange(4)[None, :]
            snap[g] = qmul(_normalize(snap[g]), qpow(_normalize(s[g]), w))


def _normalize(q: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(q, axis=1)[:, None]
    return np.where(n > 0.0, q / np.where(n > 0.0, n, 1.0), np.array([1.0, 0.0, 0.0, 0.0]))


def qmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    aw, ax, ay, az = a.T
    bw, bx, by, bz = b.T
    return np.stack([aw * bw - ax * bx - ay * by - az * bz,
                     aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw], axis=1)


def qpow(q: np.ndarray, w: float) -> np.ndarray:
    """Blender's ``pow_qt_fl_normalized``: no sign flip (w < 0 goes the long way)."""
    a = w * np.arccos(np.clip(q[:, 0], -1.0, 1.0))
    v = q[:, 1:]
    n = np.linalg.norm(v, axis=1)[:, None]
    vhat = np.where(n > 0.0, v / np.where(n > 0.0, n, 1.0), 0.0)
    return np.concatenate([np.cos(a)[:, None], vhat * np.sin(a)[:, None]], axis=1)


def strip_time(s: Strip, t: float) -> float:
    """``nlastrip_get_frame_actionclip`` (evaluation): the action frame of a strip at ``t``
    (already clamped to [start, end])."""
    if s.no_time_map:
        return t
    scale = abs(s.scale) or 1.0
    repeat = s.repeat or 1.0
    length = (s.action_end - s.action_start) or 1.0
    whole = abs(repeat - math.floor(repeat)) < _FLT_EPS
    at_end = abs(t - s.end) < _FLT_EPS and whole
    if s.reverse:
        return s.action_start if at_end else s.action_end - math.fmod(t - s.start, length * scale) / scale
    return s.action_end if at_end else s.action_start + math.fmod(t - s.start, length * scale) / scale


def _pick(strips: List[Strip], t: float):
    """``nlastrips_ctime_get_strip`` + controls: (strip, clamped time, influence, action frame)
    of the strip a track evaluates at ``t``, or None."""
    est = None
    side = 0   # 0 within, -1 before, 1 after
    n = len(strips)
    for i, s in enumerate(strips):
        if s.start <= t <= s.end or s.no_time_map:
            est, side = s, 0
            break
        if t < s.start:
            if i == 0:
                est, side = (s if s.extend == HOLD else None), -1
            else:
                p = strips[i - 1]
                est, side = (p if p.extend != NOTHING else None), 1
            break
        if t > s.end and i == n - 1:
            est, side = (s if s.extend != NOTHING else None), 1
            break
    if est is None or est.mute:
        return None
    tc = est.start if side < 0 else est.end if side > 0 else t
    if est.influence_curve is not None:
        infl = min(max(float(est.influence_curve.evaluate(tc)[0]), 0.0), 1.0)
    else:
        bi, bo = abs(est.blend_in), abs(est.blend_out)
        if bi != 0.0 and tc <= est.start + bi:
            infl = abs(tc - est.start) / bi
        elif bo != 0.0 and tc >= est.end - bo:
            infl = abs(est.end - tc) / bo
        else:
            infl = est.influence      # 1 for an NLA strip; the active action's influence
    if est.time_curve is not None:
        st = float(est.time_curve.evaluate(tc)[0])
        if est.time_cyclic:
            st = math.fmod(st - est.action_start, (est.action_end - est.action_start) or 1.0)
    else:
        st = strip_time(est, tc)
    return est, tc, infl, st
