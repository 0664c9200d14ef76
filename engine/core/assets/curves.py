"""A plain clip's F-Curves as the user keyed them (no bpy): the source keys, not a resampling.

The seed's rule is that a clip's keys are the source keys.  ``FCurveSetAsset`` holds every
keyframe of a clip's F-Curves (frame, value, both handles, interpolation, easing and its
back / amplitude / period settings), each curve's extrapolation and its Cycles modifier, so the
preview player can evaluate them at any time as Blender does (``engine.core.animation.fcurves``).
``CurveBindingAsset`` says which curve drives which component of which node (translation,
rotation in the bone's rotation mode, scale) or morph weight.

Codes are Blender's (``Keyframe.interpolation`` / ``easing`` enum values, ``FModifierCycles``
modes), so the importer copies them with ``foreach_get``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .readonly import AssetError, readonly_array

# Keyframe.interpolation values (Blender's BEZT_IPO_*)
IPO_CONSTANT, IPO_LINEAR, IPO_BEZIER = 0, 1, 2
IPO_BACK, IPO_BOUNCE, IPO_CIRC, IPO_CUBIC, IPO_ELASTIC, IPO_EXPO = 3, 4, 5, 6, 7, 8
IPO_QUAD, IPO_QUART, IPO_QUINT, IPO_SINE = 9, 10, 11, 12
IPO_COUNT = 13
# Keyframe.easing values (BEZT_IPO_EASE_*)
EASE_AUTO, EASE_IN, EASE_OUT, EASE_IN_OUT = 0, 1, 2, 3
# FModifierCycles.mode_before / mode_after values (FCM_EXTRAPOLATE_*)
CYCLE_NONE, CYCLE_REPEAT, CYCLE_REPEAT_OFFSET, CYCLE_MIRROR = 0, 1, 2, 3

#: rotation modes of ``CurveBindingAsset.r_mode``: 0 quaternion, 1 axis-angle, 2.. Euler orders
ROT_QUATERNION, ROT_AXIS_ANGLE = 0, 1
EULER_ORDERS = ("XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX")


def rotation_mode_code(mode: str) -> int:
    if mode == "QUATERNION":
        return ROT_QUATERNION
    if mode == "AXIS_ANGLE":
        return ROT_AXIS_ANGLE
    return 2 + EULER_ORDERS.index(mode)


@dataclass(frozen=True)
class FCurveSetAsset:
    """C curves with N keys in all (curve c owns keys ``offsets[c] : offsets[c] + counts[c]``,
    sorted by frame, at least one each).  ``cycles`` (C, 4): before mode, before count, after
    mode, after count of the curve's Cycles modifier (all 0 without one); ``has_cycles`` (C,)."""

    counts: np.ndarray        # (C,) int64
    co: np.ndarray            # (N, 2) frame, value
    handle_left: np.ndarray   # (N, 2)
    handle_right: np.ndarray  # (N, 2)
    interpolation: np.ndarray  # (N,) int64 IPO_*
    easing: np.ndarray        # (N,) int64 EASE_*
    back: np.ndarray          # (N,)
    amplitude: np.ndarray     # (N,)
    period: np.ndarray        # (N,)
    extrapolation: np.ndarray  # (C,) int64: 0 constant, 1 linear
    has_cycles: np.ndarray    # (C,) bool
    cycles: np.ndarray        # (C, 4) int64

    def __post_init__(self):
        s = object.__setattr__
        s(self, "counts", readonly_array(self.counts, np.int64))
        s(self, "co", readonly_array(self.co, np.float64, (2,), "co"))
        s(self, "handle_left", readonly_array(self.handle_left, np.float64, (2,), "handle_left"))
        s(self, "handle_right", readonly_array(self.handle_right, np.float64, (2,), "handle_right"))
        for name in ("interpolation", "easing"):
            s(self, name, readonly_array(getattr(self, name), np.int64))
        for name in ("back", "amplitude", "period"):
            s(self, name, readonly_array(getattr(self, name), np.float64))
        s(self, "extrapolation", readonly_array(self.extrapolation, np.int64))
        s(self, "has_cycles", readonly_array(self.has_cycles, bool))
        s(self, "cycles", readonly_array(self.cycles, np.int64, (4,), "cycles"))
        n, c = self.co.shape[0], self.counts.shape[0]
        if int(self.counts.sum()) != n or (c and int(self.counts.min()) < 1):
            raise AssetError("curve set: key counts do not match the keys")
        for name in ("handle_left", "handle_right", "interpolation", "easing", "back", "amplitude", "period"):
            if getattr(self, name).shape[0] != n:
                raise AssetError(f"curve set: {name} has {getattr(self, name).shape[0]} rows, not {n}")
        for name in ("extrapolation", "has_cycles", "cycles"):
            if getattr(self, name).shape[0] != c:
                raise AssetError(f"curve set: {name} has {getattr(self, name).shape[0]} rows, not {c}")

    @property
    def count(self) -> int:
        return int(self.counts.shape[0])

    @property
    def offsets(self) -> np.ndarray:
        out = np.zeros(self.count, np.int64)
        if self.count:
            out[1:] = np.cumsum(self.counts)[:-1]
        return out

    def is_valid(self) -> bool:
        arrays = (self.co, self.handle_left, self.handle_right, self.back, self.amplitude, self.period)
        if not all(np.isfinite(a).all() for a in arrays):
            return False
        if self.interpolation.size and (self.interpolation.min() < 0 or self.interpolation.max() >= IPO_COUNT):
            return False
        x = self.co[:, 0]
        same = np.repeat(np.arange(self.count), self.counts)
        inner = same[1:] == same[:-1]
        return bool(np.all(np.diff(x)[inner] > 0.0))


@dataclass(frozen=True)
class CurveBindingAsset:
    """Which curve drives what.  Per translated node (``t_nodes``): ``t_base`` (3,) the basis with
    the delta location added, ``t_curve`` (3,) the curve of each component (-1: not keyed),
    ``t_add`` the delta location added to a keyed component.  Rotations: ``r_mode`` (rotation
    mode code), ``r_base`` (4,) raw basis values in that mode (Euler: 3 used), ``r_curve`` (4,),
    ``r_delta`` (4,) the delta rotation quaternion (identity when none) applied before.  Scales:
    ``s_base`` (basis x delta scale), ``s_curve``, ``s_mul`` (delta scale).  ``m_curve``: the curve
    of each of the clip's morph channels, in order."""

    curves: FCurveSetAsset
    t_nodes: np.ndarray
    t_base: np.ndarray
    t_curve: np.ndarray
    t_add: np.ndarray
    r_nodes: np.ndarray
    r_mode: np.ndarray
    r_base: np.ndarray
    r_curve: np.ndarray
    r_delta: np.ndarray
    s_nodes: np.ndarray
    s_base: np.ndarray
    s_curve: np.ndarray
    s_mul: np.ndarray
    m_curve: np.ndarray

    def __post_init__(self):
        s = object.__setattr__
        for k, w in (("t", 3), ("s", 3)):
            s(self, f"{k}_nodes", readonly_array(getattr(self, f"{k}_nodes"), np.int64))
            s(self, f"{k}_base", readonly_array(getattr(self, f"{k}_base"), np.float64, (w,), f"{k}_base"))
            s(self, f"{k}_curve", readonly_array(getattr(self, f"{k}_curve"), np.int64, (w,), f"{k}_curve"))
        s(self, "t_add", readonly_array(self.t_add, np.float64, (3,), "t_add"))
        s(self, "s_mul", readonly_array(self.s_mul, np.float64, (3,), "s_mul"))
        s(self, "r_nodes", readonly_array(self.r_nodes, np.int64))
        s(self, "r_mode", readonly_array(self.r_mode, np.int64))
        s(self, "r_base", readonly_array(self.r_base, np.float64, (4,), "r_base"))
        s(self, "r_curve", readonly_array(self.r_curve, np.int64, (4,), "r_curve"))
        s(self, "r_delta", readonly_array(self.r_delta, np.float64, (4,), "r_delta"))
        s(self, "m_curve", readonly_array(self.m_curve, np.int64))

    def is_valid(self, node_count: int) -> bool:
        c = self.curves.count
        for nodes in (self.t_nodes, self.r_nodes, self.s_nodes):
            if nodes.size and (nodes.min() < 0 or nodes.max() >= node_count or np.unique(nodes).size != nodes.size):
                return False
        for idx in (self.t_curve, self.r_curve, self.s_curve, self.m_curve):
            if idx.size and (idx.min() < -1 or idx.max() >= c):
                return False
        if self.r_mode.size and (self.r_mode.min() < 0 or self.r_mode.max() >= 2 + len(EULER_ORDERS)):
            return False
        arrays = (self.t_base, self.t_add, self.r_base, self.r_delta, self.s_base, self.s_mul)
        return self.curves.is_valid() and all(np.isfinite(a).all() for a in arrays)
