"""Blender 5.0 slotted Actions -> AnimationClipAsset (baked at every integer frame)."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import numpy as np

from ...core.assets import AnimationClipAsset, AssetError, MorphWeightChannelAsset, NodeAnimationChannelAsset
from .curve_read import build_binding, read_curve_set
from .fcurve_eval import eligible, evaluate_batch, read_keys
from .rotation import make_continuous, quat_mul, rotation_prop, rotation_to_quat

_Q = r'"((?:[^"\\]|\\.)*)"'
_TRS = r"(location|rotation_quaternion|rotation_euler|rotation_axis_angle|scale)"
RE_BONE = re.compile(r"^pose\.bones\[" + _Q + r"\]\." + _TRS + r"$")
RE_BONE_ANY = re.compile(r"^pose\.bones\[" + _Q + r"\]")
RE_OBJ = re.compile(r"^" + _TRS + r"$")
RE_KEY = re.compile(r"^key_blocks\[" + _Q + r"\]\.value$")
RE_KEY_ANY = re.compile(r"^key_blocks\[" + _Q + r"\]")


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", r"\1", s)


def scene_fps(scene) -> float:
    return float(scene.render.fps) / float(scene.render.fps_base or 1.0)


def pick_slot(action, id_type: str, anim_data=None, owner_name: str = ""):
    """The slot ``anim_data`` uses for ``action``, else a slot whose target id type matches."""
    used = getattr(anim_data, "action_slot", None) if anim_data is not None else None
    if anim_data is not None and anim_data.action == action and used is not None:
        return used
    cands = [s for s in action.slots if s.target_id_type in (id_type, "UNSPECIFIED")]
    for s in cands:
        if s.name_display == owner_name:
            return s
    return cands[0] if cands else None


def slot_fcurves(action, slot) -> list:
    out = []
    if slot is None:
        return out
    for layer in action.layers:
        for strip in layer.strips:
            try:
                cb = strip.channelbag(slot)
            except Exception:  # non-keyframe strip types
                cb = None
            if cb is not None:
                out.extend(cb.fcurves)
    return out


def sample_frames(action) -> Tuple[np.ndarray, float, float]:
    start, end = (float(x) for x in action.frame_range)
    ints = np.arange(math.ceil(start), math.floor(end) + 1, dtype=np.float64)
    frames = np.unique(np.concatenate([[start], ints, [end]]))
    return frames, start, end


def _check_finite(action_name: str, fc, co, hl, hr) -> None:
    bad = ~(np.isfinite(co).all(axis=1) & np.isfinite(hl).all(axis=1) & np.isfinite(hr).all(axis=1))
    if bad.any():
        i = int(np.argmax(bad))
        frame = co[i, 0]
        where = f"frame {frame:g}" if np.isfinite(frame) else f"keyframe #{i}"
        raise AssetError(f"action '{action_name}': curve {fc.data_path}[{fc.array_index}] has a "
                         f"non-finite key at {where}")


def sample_curves(action_name: str, fcs: list, frames: np.ndarray) -> list:
    """Blender's values of each F-Curve at ``frames``: batched numpy evaluation of plain keyframe
    curves (fcurve_eval), ``FCurve.evaluate`` for everything else. Non-finite keys raise."""
    keys = []
    fast = []
    for fc in fcs:
        co, hl, hr, ipo = read_keys(fc)
        _check_finite(action_name, fc, co, hl, hr)
        keys.append((co, hl, hr, ipo))
        fast.append(eligible(fc, co, ipo))
    batch = evaluate_batch([k for k, e in zip(keys, fast) if e], frames)
    out = []
    row = 0
    fl = frames.tolist()
    for fc, e in zip(fcs, fast):
        if e:
            v = batch[row]
            row += 1
            miss = np.isnan(v)
            if miss.any():
                ev = fc.evaluate
                v = v.copy()
                v[miss] = [ev(f) for f in frames[miss].tolist()]
        else:
            ev = fc.evaluate
            v = np.fromiter((ev(f) for f in fl), np.float64, frames.size)
        if not np.all(np.isfinite(v)):
            i = int(np.argmax(~np.isfinite(v)))
            raise AssetError(f"action '{action_name}': curve {fc.data_path}[{fc.array_index}] evaluates to a "
                             f"non-finite value at frame {frames[i]:g}")
        out.append(v)
    return out


def sample_fcurve(action_name: str, fc, frames: np.ndarray) -> np.ndarray:
    return sample_curves(action_name, [fc], frames)[0]


@dataclass
class NodeTarget:
    """What the baker needs to know about one animatable node."""
    index: int
    rotation_mode: str
    location: np.ndarray      # basis values for components without curves
    rotation: Dict[str, np.ndarray]   # raw values per rotation property
    scale: np.ndarray
    # object delta transforms (matrix_basis = T(loc + dloc) R(drot @ rot) S(scale * dscale))
    delta_location: Optional[np.ndarray] = None
    delta_rotation: Optional[np.ndarray] = None   # wxyz
    delta_scale: Optional[np.ndarray] = None
    # a connected bone: Blender ignores its location (the bone starts at its parent's tail), so
    # location keys give no channel and the base translation is zero
    ignore_location: bool = False


def _used_curves(target: NodeTarget, curves: Dict[Tuple[str, int], object]):
    rprop, rn = rotation_prop(target.rotation_mode)
    width = {"location": 3, rprop: rn, "scale": 3}
    return {k: fc for k, fc in curves.items() if k[0] in width and 0 <= k[1] < width[k[0]]}


def _bake_node(target: NodeTarget, sampled: Dict[Tuple[str, int], np.ndarray], n: int, times):
    ch = {}

    def comps(prop, base):
        arr = None
        for (p, i), vals in sampled.items():
            if p == prop:
                if arr is None:
                    arr = np.tile(np.asarray(base, np.float64), (n, 1))
                arr[:, i] = vals
        return arr

    t = None if target.ignore_location else comps("location", target.location)
    if t is not None:
        if target.delta_location is not None:
            t = t + target.delta_location
        ch["translation_times"], ch["translation_values"] = times, t
    prop, _ = rotation_prop(target.rotation_mode)
    r = comps(prop, target.rotation[prop])
    if r is not None:
        q = rotation_to_quat(r, target.rotation_mode)
        if target.delta_rotation is not None:
            q = quat_mul(np.broadcast_to(target.delta_rotation, q.shape), q)
        ch["rotation_times"] = times
        ch["rotation_values"] = make_continuous(q)
    s = comps("scale", target.scale)
    if s is not None:
        if target.delta_scale is not None:
            s = s * target.delta_scale
        ch["scale_times"], ch["scale_values"] = times, s
    if not ch:
        return None
    return NodeAnimationChannelAsset(node_index=target.index, **ch)


def _bake_work(action, slot, target_object, object_target, bones, armature_name="", strict=True,
               ignored=None) -> list:
    """[(target, {(prop, index): fcurve})] of every node ``slot`` animates (muted curves skipped).
    A curve naming a missing bone raises AssetError (``strict``) or is left out (its bone's name
    appended to ``ignored`` when given)."""
    obj_curves: Dict[Tuple[str, int], object] = {}
    bone_curves: Dict[str, Dict[Tuple[str, int], object]] = {}
    for fc in slot_fcurves(action, slot):
        if fc.mute:
            continue
        dp = fc.data_path
        m = RE_BONE_ANY.match(dp)
        if m:
            bname = _unescape(m.group(1))
            if bname not in bones:
                if not strict:
                    if ignored is not None:
                        ignored.append(bname)
                    continue
                raise AssetError(f"action '{action.name}': channel {dp}[{fc.array_index}] names bone "
                                 f"'{bname}' which {('armature ' + repr(armature_name)) if armature_name else 'object ' + repr(target_object)} does not have")
            mb = RE_BONE.match(dp)
            if mb:
                bone_curves.setdefault(bname, {})[(mb.group(2), fc.array_index)] = fc
            continue
        mo = RE_OBJ.match(dp)
        if mo and object_target is not None:
            obj_curves[(mo.group(1), fc.array_index)] = fc
    work = []
    if obj_curves and object_target is not None:
        work.append((object_target, _used_curves(object_target, obj_curves)))
    for bname, curves in bone_curves.items():
        work.append((bones[bname], _used_curves(bones[bname], curves)))
    return work


def bake_inputs_signature(action, slot, object_target: Optional[NodeTarget], bones: Dict[str, NodeTarget]) -> tuple:
    """What a baked clip takes from its targets: per animated node its rotation mode, delta
    transforms and the basis values of the components its curves do not key.  Values a curve
    keys are left out, so animating them (an animation render, timeline playback) does not make
    the clip look changed."""
    out = []
    for target, cs in _bake_work(action, slot, "", object_target, bones, strict=False):
        rprop, _ = rotation_prop(target.rotation_mode)
        keyed = set(cs)
        free = []
        for prop, base in (("location", target.location), (rprop, target.rotation[rprop]), ("scale", target.scale)):
            base = np.asarray(base, np.float64)
            if any(p == prop for p, _i in keyed):
                free.append(tuple(float(base[i]) for i in range(base.shape[0]) if (prop, i) not in keyed))
        deltas = tuple(None if d is None else np.asarray(d, np.float64).tobytes()
                       for d in (target.delta_location, target.delta_rotation, target.delta_scale))
        out.append((target.index, target.rotation_mode, tuple(free), deltas, target.ignore_location))
    return tuple(out)


def expression_curves(action, slot) -> list:
    """[(F-Curve, channel name)] of the VRM expression previews ``slot`` animates (an armature
    data slot; muted curves skipped), channel names as ``vrm_paths.channel_key_for_path``."""
    from .vrm_paths import channel_key_for_path

    out = []
    for fc in slot_fcurves(action, slot):
        if fc.mute:
            continue
        key = channel_key_for_path(fc.data_path)
        if key is not None:
            out.append((fc, key))
    return out


def _bake_expressions(action, curves, frames, times, node_index: int) -> list:
    """MorphWeightChannelAssets of the armature object's node for the preview ``curves``
    (raw previews: the VRM rules are applied per frame by the morph source)."""
    if not curves or node_index < 0:
        return []
    values = sample_curves(action.name, [fc for fc, _k in curves], frames)
    return [MorphWeightChannelAsset(node_index=node_index, target_name=key, times=times, values=v)
            for (_fc, key), v in zip(curves, values)]


def bake_object_action(action, slot, fps: float, target_object: str, object_target: Optional[NodeTarget],
                       bones: Dict[str, NodeTarget], armature_name: str = "",
                       expression_curves=(), expression_node: int = -1,
                       ignore_missing: bool = False) -> AnimationClipAsset:
    """Bake pose-bone and object TRS curves of ``slot``. Raises AssetError for a missing bone.
    ``expression_curves`` ((F-Curve, channel name) of an armature data slot, see
    ``expression_curves``) become morph weight channels of ``expression_node`` (the armature
    object's node): the VRM expression previews the clip keys.  ``ignore_missing``: channels of
    bones the armature lacks (an animation pack made for a rig with extra bones) are left out
    and named in the clip's ``notes`` instead of raising.  The clip carries its source curves
    (``curves``, evaluated by the player at any time) besides their samples at the frames."""
    frames, start, end = sample_frames(action)
    times = (frames - start) / fps
    xcurves = [fc for fc, _k in expression_curves] if expression_node >= 0 else []
    morph = _bake_expressions(action, list(expression_curves), frames, times, expression_node)
    ignored = []
    work = _bake_work(action, slot, target_object, object_target, bones, armature_name,
                      strict=ignore_missing is False, ignored=ignored)
    flat = [fc for _, cs in work for fc in cs.values()]
    values = sample_curves(action.name, flat, frames)
    curves, notes = read_curve_set(action.name, flat + xcurves, frames,
                                   values + [m.values for m in morph])
    index = {id(fc): i for i, fc in enumerate(flat)}
    binding = build_binding(curves, work, index, range(len(flat), len(flat) + len(xcurves)))
    if ignored:
        names = sorted(set(ignored))
        more = f" and {len(names) - 6} more" if len(names) > 6 else ""
        notes.insert(0, f"action '{action.name}': {len(ignored)} channel(s) of bones "
                        f"{', '.join(repr(b) for b in names[:6])}{more} ignored: "
                        f"{'armature ' + repr(armature_name) if armature_name else 'the object'} has no such bone")
    channels = []
    k = 0
    for target, cs in work:
        sampled = {}
        for key in cs:
            sampled[key] = values[k]
            k += 1
        c = _bake_node(target, sampled, frames.size, times)
        if c is not None:
            channels.append(c)
    channels.sort(key=lambda c: c.node_index)
    return AnimationClipAsset(name=action.name, duration_seconds=(end - start) / fps, channels=tuple(channels),
                              morph_channels=tuple(morph), frame_start=start, fps=fps, target_object=target_object,
                              action_name=action.name, curves=binding, notes=tuple(notes))


def bake_key_action(action, slot, fps: float, target_object: str, node_index: int, key_names,
                    mesh_name: str = "") -> AnimationClipAsset:
    frames, start, end = sample_frames(action)
    times = (frames - start) / fps
    morph = []
    kcurves = []
    for fc in slot_fcurves(action, slot):
        if fc.mute:
            continue
        m = RE_KEY_ANY.match(fc.data_path)
        if not m:
            continue
        kname = _unescape(m.group(1))
        if kname not in key_names:
            raise AssetError(f"action '{action.name}': channel {fc.data_path} names shape key '{kname}' "
                             f"which mesh '{mesh_name or target_object}' does not have")
        if RE_KEY.match(fc.data_path):
            vals = sample_fcurve(action.name, fc, frames)
            morph.append(MorphWeightChannelAsset(node_index=node_index, target_name=kname, times=times, values=vals))
            kcurves.append(fc)
    curves, notes = read_curve_set(action.name, kcurves, frames, [m.values for m in morph])
    binding = build_binding(curves, [], {}, range(len(kcurves)))
    return AnimationClipAsset(name=action.name, duration_seconds=(end - start) / fps, morph_channels=tuple(morph),
                              frame_start=start, fps=fps, target_object=target_object, action_name=action.name,
                              curves=binding, notes=tuple(notes))


def action_bone_names(action, slot) -> Tuple[set, bool]:
    """(bone names referenced by pose.bones paths, has object TRS curves)."""
    names, has_obj = set(), False
    for fc in slot_fcurves(action, slot):
        m = RE_BONE_ANY.match(fc.data_path)
        if m:
            names.add(_unescape(m.group(1)))
        elif RE_OBJ.match(fc.data_path):
            has_obj = True
    return names, has_obj


def action_key_names(action, slot) -> set:
    out = set()
    for fc in slot_fcurves(action, slot):
        m = RE_KEY_ANY.match(fc.data_path)
        if m:
            out.add(_unescape(m.group(1)))
    return out


def _fcurve_signatures(action, slot) -> tuple:
    """(data path, index, mute, key count, checksum of key points, handles and interpolation)
    of every F-curve of ``slot``: equal unless the keys were edited."""
    import zlib

    out = []
    for fc in slot_fcurves(action, slot):
        kp = fc.keyframe_points
        n = len(kp)
        pts = np.empty(n * 6, np.float32)
        interp = np.empty(n, np.int32)
        if n:
            kp.foreach_get("co", pts[:2 * n])
            kp.foreach_get("handle_left", pts[2 * n:4 * n])
            kp.foreach_get("handle_right", pts[4 * n:])
            kp.foreach_get("interpolation", interp)
        out.append((fc.data_path, fc.array_index, fc.mute, n, zlib.crc32(pts.tobytes() + interp.tobytes())))
    return tuple(out)


def action_content_signature(action) -> tuple:
    """Every slot's F-curve signatures: equal unless the action itself was edited.  Read once per
    action update, not per frame."""
    return (action.as_pointer(), tuple(action.frame_range),
            tuple((slot.handle, _fcurve_signatures(action, slot)) for slot in action.slots))


def action_signature(action, slot) -> tuple:
    """What a clip baked from ``slot`` of ``action`` depends on (its keys included)."""
    return (action.as_pointer(), action.name, tuple(action.frame_range), None if slot is None else slot.handle,
            _fcurve_signatures(action, slot))
