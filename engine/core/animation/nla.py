"""One ID's NLA stack and active action as Blender's ``anim_sys.cc`` / ``nla.cc`` see them (no
bpy; numpy only): the channel table, the tracks with their strips, the active action, and the
structure rules (mute / solo, the domain of written channels, quaternions all-or-nothing).  They
are evaluated, every ID of a scene at once, by ``animation.nla_eval.StackBatch`` (the rules,
verified against bpy 4.5 and 5.2, are in its docstring: strip time mapping, the strip picked per
track with its extrapolation, influence with blend in / out or an animated influence, animated
strip time, the blend types with their per-channel mix modes, the active action as the top
"dummy" strip).

An ID's animated properties are C scalar *channels* (one per (data path, array index)); each has
a mix mode (``MIX_ADD``, ``MIX_QUAT`` for the four components of a rotation quaternion,
``MIX_AXIS_ANGLE``, ``MIX_PROPORTIONAL`` for scale) and a default value.  A source of values is
anything with ``evaluate(frame) -> (K,)`` (``fcurves.CurveEvaluator``) plus the channel of each
of its K values.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np

MIX_ADD, MIX_QUAT, MIX_AXIS_ANGLE, MIX_PROPORTIONAL = 0, 1, 2, 3
REPLACE, COMBINE, ADD, SUBTRACT, MULTIPLY = 0, 1, 2, 3, 4
BLEND_TYPES = {"REPLACE": REPLACE, "COMBINE": COMBINE, "ADD": ADD, "SUBTRACT": SUBTRACT, "MULTIPLY": MULTIPLY}
NOTHING, HOLD, HOLD_FORWARD = 0, 1, 2
EXTEND_MODES = {"NOTHING": NOTHING, "HOLD": HOLD, "HOLD_FORWARD": HOLD_FORWARD}


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
        self.domain = self._domain()

    # -------------------------------------------------------------- structure
    def enabled_tracks(self) -> List[Track]:
        solo = [t for t in self.tracks if t.solo]
        if solo:
            return solo[:1]                  # the solo track, even muted
        return [t for t in self.tracks if not t.mute]

    def is_plain(self) -> bool:
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

    def rows_of(self, src: Source):
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


def unit_quats(q: np.ndarray) -> np.ndarray:
    """Unit rows of (N, 4) ``q``; a zero row becomes the identity."""
    n = np.sqrt(np.einsum("ij,ij->i", q, q))
    if n.all():
        return q / n[:, None]
    return np.where(n[:, None] > 0.0, q / np.where(n > 0.0, n, 1.0)[:, None], np.array([1.0, 0.0, 0.0, 0.0]))


#: qmul as one product: the (N, 16) outer products a_i b_j (row 4 i + j) times the signs of the
#: Hamilton product's terms in each of w, x, y, z
QMUL_SIGNS = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1],
                       [0, 1, 0, 0], [-1, 0, 0, 0], [0, 0, 0, 1], [0, 0, -1, 0],
                       [0, 0, 1, 0], [0, 0, 0, -1], [-1, 0, 0, 0], [0, 1, 0, 0],
                       [0, 0, 0, 1], [0, 0, 1, 0], [0, -1, 0, 0], [-1, 0, 0, 0]], np.float64)


def qmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton products of (N, 4) wxyz rows."""
    return (a[:, :, None] * b[:, None, :]).reshape(-1, 16) @ QMUL_SIGNS


def qpow(q: np.ndarray, w) -> np.ndarray:
    """Blender's ``normalize_qt_qt`` then ``pow_qt_fl_normalized`` of (N, 4) rows ``q`` (``w`` a
    scalar or one per row), in single precision step by step as Blender computes them: no sign
    flip (w < 0 goes the long way).  Single precision matters here: the angle is the arccosine of
    the normalised w, so near the identity the float32 rounding of w (an ulp of 6e-8) moves the
    result by its square root (a keyed x of 9.1e-4 comes out as 8.5e-4 in Blender), more than the
    preview's tolerance; every other step rounds as usual."""
    f = np.float32
    q = np.asarray(q, np.float64).astype(f)
    d = q[:, 0] * q[:, 0]
    for c in (1, 2, 3):                                   # dot_qtqt: left to right
        d = d + q[:, c] * q[:, c]
    n = np.sqrt(d)
    with np.errstate(divide="ignore", invalid="ignore"):
        u = q * (f(1.0) / np.where(n != 0.0, n, f(1.0)))[:, None]
    u[n == 0.0] = np.array([0.0, 1.0, 0.0, 0.0], f)      # normalize_qt of a zero quaternion
    c0 = u[:, 0]
    acos = np.where(c0 <= -1.0, f(np.pi), np.where(c0 >= 1.0, f(0.0), np.arccos(np.clip(c0, -1.0, 1.0))))   # saacos
    a = np.asarray(w, np.float64).astype(f) * acos
    v = u[:, 1:]
    dv = v[:, 0] * v[:, 0] + v[:, 1] * v[:, 1] + v[:, 2] * v[:, 2]
    out = np.empty(q.shape, np.float64)
    out[:, 0] = np.cos(a)
    big = dv > f(1e-35)                                     # normalize_v3_length: else zero
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(big, np.sin(a) / np.sqrt(np.where(big, dv, f(1.0))), f(0.0))
    out[:, 1:] = v * scale[:, None]
    return out
