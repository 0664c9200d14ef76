"""The scene's animation as the timeline evaluates it, read once from Blender and evaluated by the
bpy-free ``animation.nla`` stack at any time: each animated ID's active action and NLA stack
(objects: transforms and pose bones; shape keys; armature data: VRM expression previews).  Reading happens when Scene playback starts;
the frame only evaluates F-Curves (``animation.fcurves``) and blends (``animation.nla``).

``SceneAnimation.evaluate(t)`` gives, per ID, its channels' values at scene time ``t`` (frames,
subframe included) and which of them Blender would write there; ``evaluate_all(t)`` the same for
every channel of every ID at once (``animation.nla_eval.StackBatch``: one vectorised pass over all
stacks, what Scene playback runs per frame).
"""
from __future__ import annotations

import re
from typing import List, Sequence

import numpy as np

from ...core.animation.fcurves import CurveEvaluator
from ...core.animation.nla import (
    BLEND_TYPES,
    EXTEND_MODES,
    MIX_ADD,
    MIX_AXIS_ANGLE,
    MIX_PROPORTIONAL,
    MIX_QUAT,
    Source,
    Stack,
    Strip,
    Track,
)
from ...core.animation.nla_eval import StackBatch
from ..importer.actions import pick_slot, slot_fcurves
from ..importer.curve_read import read_curve_set
from ..importer.vrm_paths import channel_key_for_path

_LAST = re.compile(r"^(.*?)\.?([A-Za-z_][A-Za-z0-9_]*)$")


def _mix_mode(path: str) -> int:
    if path.endswith("rotation_quaternion"):
        return MIX_QUAT
    if path.endswith("rotation_axis_angle"):
        return MIX_AXIS_ANGLE
    if path == "scale" or path.endswith(".scale"):
        return MIX_PROPORTIONAL
    return MIX_ADD


def _owner_and_prop(idb, path: str):
    m = _LAST.match(path)
    if m is None:
        return None, None
    head, prop = m.group(1), m.group(2)
    try:
        owner = idb.path_resolve(head) if head else idb
    except (ValueError, AttributeError):
        return None, None
    return owner, prop


def _channel_info(idb, path: str, index: int):
    """(mix mode, default, current value, lower, upper) of one channel."""
    mode = _mix_mode(path)
    owner, prop = _owner_and_prop(idb, path)
    cur = 0.0
    lo = hi = np.nan
    default = 0.0
    rp = None
    if owner is not None and prop is not None:     # (an owner comes with its property's name)
        try:
            v = getattr(owner, prop)
            cur = float(v[index]) if hasattr(v, "__len__") else float(v)
        except (AttributeError, IndexError, TypeError, ValueError):
            pass
        rp = owner.bl_rna.properties.get(prop)
    if rp is not None and rp.type in ("FLOAT", "INT", "BOOLEAN"):
        try:
            arr = getattr(rp, "default_array", None)
            default = float(arr[index]) if getattr(rp, "array_length", 0) and arr is not None else float(rp.default)
        except (TypeError, IndexError):
            default = 0.0
        if rp.type != "BOOLEAN":
            lo, hi = float(rp.hard_min), float(rp.hard_max)
    if owner is not None and prop == "value" and hasattr(owner, "slider_min"):   # a shape key
        lo, hi = float(owner.slider_min), float(owner.slider_max)
    if mode == MIX_QUAT:
        default = 1.0 if index == 0 else 0.0
    elif mode == MIX_AXIS_ANGLE:
        default = 0.0
    elif mode == MIX_PROPORTIONAL and default == 0.0:
        default = 1.0
    if not (abs(lo) < 1e30):
        lo = np.nan
    if not (abs(hi) < 1e30):
        hi = np.nan
    return mode, default, cur, lo, hi


def _id_type(idb) -> str:
    return {"Key": "KEY", "Armature": "ARMATURE"}.get(idb.bl_rna.identifier, "OBJECT")


class IdAnimation:
    """One ID's stack, its channel keys ((data path, index), in channel order) and the values the
    channels held when read (what a channel nobody writes keeps)."""

    def __init__(self, idb, stack: Stack, keys: List[tuple], current: np.ndarray, notes: List[str],
                 unsupported: Sequence[str] = ()):
        self.id = idb
        self.name = idb.name
        self.stack = stack
        self.keys = keys
        self.current = current
        self.notes = notes
        self.unsupported = list(unsupported)   # curves the preview does not evaluate itself (why)
        self._batch = None

    def evaluate(self, t: float):
        """(values, written) of this ID's channels at scene time ``t``."""
        if self._batch is None:      # compiled on first use (after any edit of the stack's strips)
            self._batch = StackBatch([self.stack])
        return self._batch.evaluate(float(t), self.current)


class _Sampled:
    """One curve's values at ``frames`` through ``FCurve.evaluate``, computed only if asked for
    (``read_curve_set`` uses them only for a curve the preview cannot evaluate itself).  With
    ``sample`` False (a check: it never fills what it checks from Blender) the values are NaN."""

    def __init__(self, fc, frames, sample: bool = True):
        self.fc = fc
        self.frames = frames
        self.sample = sample

    def __array__(self, dtype=None, copy=None):
        if not self.sample:
            return np.full(len(self.frames), np.nan, dtype=dtype or np.float64)
        ev = self.fc.evaluate
        return np.array([ev(float(f)) for f in self.frames], dtype=dtype or np.float64)


def _curves_of(action, slot, resolves=None):
    """The unmuted curves of ``slot`` (of those, the ones ``resolves`` keeps, when given)."""
    return [fc for fc in slot_fcurves(action, slot) if not fc.mute and (resolves is None or resolves(fc))]


class _Resolves:
    """Whether a curve's channel exists on ``idb``: Blender ignores a curve whose path does not
    resolve (a bone the armature lacks: a glTF clip of a node that became no bone, a renamed
    bone; a deleted shape key) or whose index is past its property's length; so does the
    preview.  A VRM expression preview is kept whether it resolves or not (the preview evaluates
    it itself, also without the VRM Add-on, whose properties are then absent).  The skipped
    paths are kept for one note."""

    def __init__(self, idb):
        self.idb = idb
        self._known = {}
        self.missing = []

    def __call__(self, fc) -> bool:
        path, index = fc.data_path, int(fc.array_index)
        ok = self._known.get(path)
        if ok is None and channel_key_for_path(path) is not None:
            ok = self._known[path] = 1 << 30
        if ok is None:
            try:
                v = self.idb.path_resolve(path)
                ok = len(v) if hasattr(v, "__len__") and not isinstance(v, str) else 1
            except (ValueError, AttributeError, TypeError):
                ok = 0
            self._known[path] = ok
            if not ok:
                self.missing.append(path)
        return 0 <= index < ok

    def note(self) -> List[str]:
        if not self.missing:
            return []
        paths = sorted(set(self.missing))
        more = f" and {len(paths) - 4} more" if len(paths) > 4 else ""
        return [f"'{self.idb.name}': {len(paths)} animated path(s) ignored, as Blender ignores them: "
                f"{', '.join(paths[:4])}{more} (no such bone, shape key or property)"]


def read_id(idb, sample: bool = True):
    """The ``IdAnimation`` of ``idb`` (an Object or a Key), or None when it has no animation.
    A curve the preview cannot evaluate itself (``curve_read._unsupported``) is listed in
    ``unsupported``; with ``sample`` it plays sampled through ``FCurve.evaluate`` at every frame
    of its action (the preview), without it evaluates to NaN (a check: never Blender's values)."""
    ad = getattr(idb, "animation_data", None)
    if ad is None or (ad.action is None and not len(ad.nla_tracks)):
        return None
    id_type = _id_type(idb)
    resolves = _Resolves(idb)
    # every (action, slot) the ID's animation uses: the active action's and each strip's
    uses = []
    if ad.action is not None:
        uses.append((ad.action, pick_slot(ad.action, id_type, ad, idb.name)))
    for tr in ad.nla_tracks:
        for st in tr.strips:
            if st.action is not None:
                uses.append((st.action, getattr(st, "action_slot", None)))
    # the channel table: every keyed (path, index); a quaternion keyed anywhere gets all four
    keys = {}
    for act, slot in uses:
        for fc in _curves_of(act, slot, resolves):
            path, idx = fc.data_path, int(fc.array_index)
            if _mix_mode(path) == MIX_QUAT:
                for i in range(4):
                    keys.setdefault((path, i), None)
            else:
                keys.setdefault((path, idx), None)
    order = sorted(keys)
    pos = {k: i for i, k in enumerate(order)}
    info = [_channel_info(idb, p, i) for p, i in order]
    modes = np.array([x[0] for x in info], np.int64)
    defaults = np.array([x[1] for x in info])
    current = np.array([x[2] for x in info])
    lower = np.array([x[3] for x in info])
    upper = np.array([x[4] for x in info])
    notes = resolves.note()
    unsupported = []
    sources = {}

    def curve_set(label, fcs, frames):
        sampled = [_Sampled(fc, frames, sample) for fc in fcs]
        cs, n = read_curve_set(label, fcs, frames, sampled)
        notes.extend(n)
        unsupported.extend(n)
        return cs

    def source(act, slot):
        key = (act.name, getattr(slot, "handle", None))
        if key not in sources:
            if slot is None:
                sources[key] = None
            else:
                fcs = _curves_of(act, slot, resolves)
                frames = np.arange(np.floor(act.frame_range[0]), np.ceil(act.frame_range[1]) + 1.0)
                cs = curve_set(act.name, fcs, frames)
                ch = np.array([pos[(fc.data_path, int(fc.array_index))] for fc in fcs], np.int64)
                sources[key] = Source(CurveEvaluator(cs), ch)
        return sources[key]

    def ctrl(st, path):
        fcs = [fc for fc in getattr(st, "fcurves", ()) if fc.data_path == path]
        if not fcs:
            return None
        frames = np.array([st.frame_start, st.frame_end])
        return CurveEvaluator(curve_set(f"strip '{st.name}'", fcs[:1], frames))

    tracks = []
    for tr in ad.nla_tracks:
        strips = []
        for st in tr.strips:
            if st.type != "CLIP":
                notes.append(f"'{idb.name}': NLA strip '{st.name}' is a {st.type.lower()} strip: not evaluated")
                continue
            src = source(st.action, getattr(st, "action_slot", None)) if st.action is not None else None
            strips.append(Strip(
                src, float(st.frame_start), float(st.frame_end), float(st.action_frame_start),
                float(st.action_frame_end), float(st.scale), float(st.repeat), bool(st.use_reverse),
                EXTEND_MODES[st.extrapolation], float(st.blend_in), float(st.blend_out),
                BLEND_TYPES[st.blend_type], 1.0, bool(st.mute),
                ctrl(st, "influence") if st.use_animated_influence else None,
                ctrl(st, "strip_time") if st.use_animated_time else None,
                bool(st.use_animated_time_cyclic)))
        tracks.append(Track(strips, bool(tr.mute), bool(tr.is_solo)))
    action = None
    rng = (0.0, 1.0)
    if ad.action is not None:
        action = source(ad.action, pick_slot(ad.action, id_type, ad, idb.name))
        fr = ad.action.frame_range   # the key range incl. F-Modifiers when no manual range is set
        if getattr(ad.action, "use_frame_range", False):
            fcs = _curves_of(ad.action, pick_slot(ad.action, id_type, ad, idb.name))   # all, as Blender
            xs = [x for fc in fcs for x in fc.range()]
            fr = (min(xs), max(xs)) if xs else (0.0, 1.0)
        rng = (float(fr[0]), float(fr[1]))
    stack = Stack(modes, defaults, tracks, action, rng, BLEND_TYPES[ad.action_blend_type],
                  float(ad.action_influence), EXTEND_MODES[ad.action_extrapolation], bool(ad.use_nla),
                  lower, upper)
    return IdAnimation(idb, stack, order, current, notes, unsupported)


class SceneAnimation:
    """Every animated Object, shape-key datablock and armature datablock (VRM expression
    previews are keyed there) of a scene (``sample``: see ``read_id``)."""

    def __init__(self, scene, sample: bool = True):
        self.ids: List[IdAnimation] = []
        self._batch = None
        seen = set()
        for ob in scene.objects:
            data = getattr(ob, "data", None)
            for idb in (ob, data if ob.type == "ARMATURE" else None, getattr(data, "shape_keys", None)):
                if idb is None or idb.as_pointer() in seen:
                    continue
                seen.add(idb.as_pointer())
                if getattr(idb, "use_tweak_mode", False) or getattr(getattr(idb, "animation_data", None), "use_tweak_mode", False):
                    continue
                a = read_id(idb, sample)
                if a is not None:
                    self.ids.append(a)

    def evaluate_all(self, t: float):
        """(values, written) of every channel of every ID (in ``ids`` order, each ID's keys in
        order) at scene time ``t``, in one pass; compiled on first use."""
        if self._batch is None:
            self._batch = StackBatch([a.stack for a in self.ids])
            self._current = np.concatenate([a.current for a in self.ids]) if self.ids else np.zeros(0)
            self._offsets = np.cumsum([0] + [len(a.keys) for a in self.ids])
        return self._batch.evaluate(float(t), self._current)

    def evaluate(self, t: float):
        """[(IdAnimation, values, written)] at scene time ``t``."""
        vals, written = self.evaluate_all(t)
        o = self._offsets
        return [(a, vals[o[i]:o[i + 1]], written[o[i]:o[i + 1]]) for i, a in enumerate(self.ids)]
