"""Bake constraint / IK / driver rigs through Blender's own evaluation for the preview player
(issue 11 item 3).

The preview player evaluates keyed TRS channels itself; only Blender can evaluate constraints,
IK, drivers and B-Bone curves (a Rigify rig keys its control bones and drives the deform bones
through all of those).  For such an armature the selected clip is baked once, the way the glTF
exporter samples constraint-driven animation: the action is assigned to the armature alone (every
other action unassigned, every NLA track muted), the scene is set to each frame of
``actions.sample_frames(action)`` and Blender's evaluated armature-space pose of every bone (and
the armature's world matrix, and the B-Bone segment matrices of deforming B-Bones) is recorded.
The scene's frame, subframe, actions, slots, NLA mute flags and the pose values the bake wrote are
restored exactly afterwards, also on error.  ``baked_clip`` turns a bake into the LINEAR
AnimationClipAsset the player plays (local TRS of every bone per frame, through
``ScenePose.basis_from_worlds``, so the bones' inheritance flags are honoured).

``BakeCache`` (one per process: ``BAKES``) keys bakes by (armature, clip) and by a signature of
the rig and the action (rest matrices, pose values the action does not key, custom properties,
constraint settings, drivers, constraint/driver target transforms, the armature's world matrix,
the action's keys).  Lookups are free while nothing was marked dirty (``StylizedSession.sync``
marks it on armature/object/action updates); the next lookup then re-checks the signature once.

bpy is used here (an importer-layer module); ``baked_clip``/``BakedPose`` are numpy only.
"""
from __future__ import annotations

import bisect
import math
import time
import zlib
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from ..assets import AnimationClipAsset, NodeAnimationChannelAsset
from . import actions as _actions

_MAX_LISTED = 3     # names listed per reason


class BakeError(Exception):
    """A bake could not be made (the message names the armature / action / bone)."""


# ------------------------------------------------------------------------------------------------
# why a rig needs Blender's evaluation
# ------------------------------------------------------------------------------------------------

def _listing(names: List[str]) -> str:
    shown = ", ".join(f"'{n}'" for n in names[:_MAX_LISTED])
    more = len(names) - _MAX_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def weighted_bbones(armature) -> List[str]:
    """Deform bones with B-Bone segments > 1 that a mesh deformed by ``armature`` has a vertex
    group for (those bend the mesh along a curve only Blender evaluates)."""
    import bpy

    bent = {b.name for b in armature.data.bones if b.use_deform and b.bbone_segments > 1}
    if not bent:
        return []
    groups = set()
    for ob in bpy.data.objects:
        if ob.type != "MESH":
            continue
        if any(md.type == "ARMATURE" and md.object == armature for md in ob.modifiers):
            groups.update(vg.name for vg in ob.vertex_groups)
    return [b.name for b in armature.data.bones if b.name in bent and b.name in groups]


def bake_reasons(armature) -> List[str]:
    """Why the clips of ``armature`` need Blender's evaluation (object or bone constraints, IK
    included, drivers on the armature, its data or its pose bones, weighted B-Bones).  An empty
    list: the player's own evaluation of the keyed channels is exact, no bake."""
    if armature is None or armature.type != "ARMATURE":
        return []
    out = []
    if len(armature.constraints):
        live = [c for c in armature.constraints if c.enabled]
        if live:
            out.append(f"object constraints on '{armature.name}' ({_listing([c.name for c in live])})")
    ik, other = [], []
    for pb in (armature.pose.bones if armature.pose is not None else ()):
        for c in pb.constraints:
            if not c.enabled:
                continue
            (ik if c.type in ("IK", "SPLINE_IK") else other).append(pb.name)
    if ik:
        out.append(f"IK on bone {_listing(list(dict.fromkeys(ik)))}")
    if other:
        names = list(dict.fromkeys(other))
        out.append(f"bone constraint on {_listing(names)}")
    for idb, what in ((armature, "the armature object"), (armature.data, "the armature data")):
        ad = idb.animation_data
        drv = [d for d in ad.drivers if not d.mute] if ad is not None else []
        if drv:
            out.append(f"{len(drv)} driver{'s' if len(drv) != 1 else ''} on {what} "
                       f"({_listing([d.data_path for d in drv])})")
    bb = weighted_bbones(armature)
    if bb:
        out.append(f"weighted B-Bones (segments > 1) on {_listing(bb)}")
    return out


# ------------------------------------------------------------------------------------------------
# isolation: Blender evaluating one action alone (shared with tools/check_deform.py)
# ------------------------------------------------------------------------------------------------

def animated_ids() -> list:
    """Every ID with animation data whose actions or NLA tracks an isolation touches."""
    import bpy

    out = []
    for coll in (bpy.data.objects, bpy.data.shape_keys, bpy.data.meshes, bpy.data.armatures,
                 bpy.data.materials, bpy.data.scenes):
        for idb in coll:
            if getattr(idb, "animation_data", None) is not None:
                out.append(idb)
    return out


def save_animation() -> list:
    """[(id, action, slot, [(track, mute)])] of every animated ID (``restore_animation``)."""
    saved = []
    for idb in animated_ids():
        ad = idb.animation_data
        saved.append((idb, ad.action, getattr(ad, "action_slot", None),
                      [(tr, tr.mute) for tr in ad.nla_tracks]))
    return saved


def restore_animation(saved) -> None:
    """Put back what ``save_animation`` recorded; animation data created since (``isolate`` on an
    ID that had none) is removed again."""
    held = {idb.as_pointer() for idb, _a, _s, _t in saved}
    for idb in animated_ids():
        if idb.as_pointer() not in held:
            idb.animation_data_clear()
    for idb, action, slot, tracks in saved:
        ad = idb.animation_data
        if ad is None:
            continue
        if ad.action != action:
            ad.action = action
        if action is not None and slot is not None and getattr(ad, "action_slot", None) != slot:
            try:
                ad.action_slot = slot
            except Exception:
                pass
        for tr, mute in tracks:
            if tr.mute != mute:
                tr.mute = mute


def isolate(owner, action, slot=None, with_data: bool = False) -> None:
    """Unassign every action and mute every NLA track, then assign ``action`` (and ``slot``) to
    ``owner`` alone (``with_data``: its data's slot too, see ``_isolate_data_slot``)."""
    for idb in animated_ids():
        ad = idb.animation_data
        if ad.action is not None:
            ad.action = None
        for tr in ad.nla_tracks:
            tr.mute = True
    ad = owner.animation_data or owner.animation_data_create()
    ad.action = action
    if hasattr(ad, "action_slot"):
        if slot is None and getattr(ad, "action_slot", None) is None and len(action.slots):
            slot = action.slots[0]
        if slot is not None:
            try:
                ad.action_slot = slot
            except Exception:
                pass
    if with_data:
        _isolate_data_slot(owner, action)


def _isolate_data_slot(owner, action) -> None:
    """An armature's action can also key its data (the VRM Add-on's expression previews live on
    the armature data, in the action's ARMATURE slot): assign that slot to the data too, so the
    isolated evaluation plays the whole clip. Only where the data already has animation data
    (nothing is created on the user's data)."""
    data = getattr(owner, "data", None)
    dad = getattr(data, "animation_data", None)
    if dad is None or not hasattr(dad, "action_slot"):
        return
    slots = [s for s in getattr(action, "slots", ()) if s.target_id_type == "ARMATURE"]
    if not slots:
        return
    dad.action = action
    try:
        dad.action_slot = slots[0]
    except Exception:
        pass


# ------------------------------------------------------------------------------------------------
# values the action writes (saved and restored around a bake)
# ------------------------------------------------------------------------------------------------

def _split_path(path: str):
    """('container path', key): key is an attribute name or a ('["name"]') custom property."""
    if path.endswith('"]'):
        i = path.rfind('["')
        return path[:i], ("item", path[i + 2:-2].replace('\\"', '"').replace("\\\\", "\\"))
    i = path.rfind(".")
    return (path[:i], ("attr", path[i + 1:])) if i >= 0 else ("", ("attr", path))


def _written_values(owner, action, slot) -> list:
    """[(container, key, value)] of every property the action's curves write on ``owner``."""
    out = []
    seen = set()
    for fc in _actions.slot_fcurves(action, slot):
        if fc.data_path in seen:
            continue
        seen.add(fc.data_path)
        base, (kind, key) = _split_path(fc.data_path)
        try:
            cont = owner.path_resolve(base) if base else owner
            val = cont[key] if kind == "item" else getattr(cont, key)
        except Exception:   # a path Blender cannot resolve writes nothing either
            continue
        if hasattr(val, "to_list"):
            val = val.to_list()
        elif not isinstance(val, (int, float, bool, str)) and hasattr(val, "__len__"):
            val = tuple(val)
        out.append((cont, kind, key, val))
    return out


def _restore_values(written) -> None:
    for cont, kind, key, val in written:
        try:
            if kind == "item":
                cont[key] = val
            else:
                setattr(cont, key, val)
        except Exception:
            pass


# ------------------------------------------------------------------------------------------------
# signatures
# ------------------------------------------------------------------------------------------------

_PROPS: Dict[str, tuple] = {}


def _rna_props(struct) -> tuple:
    rna = struct.bl_rna
    hit = _PROPS.get(rna.identifier)
    if hit is None:
        hit = tuple((p.identifier, p.type) for p in rna.properties if p.identifier != "rna_type")
        _PROPS[rna.identifier] = hit
    return hit


def _rna_values(struct, depth: int = 0) -> tuple:
    """Every RNA property value of ``struct`` (IDs by name, collections one level deep)."""
    out = []
    for ident, ptype in _rna_props(struct):
        try:
            v = getattr(struct, ident)
        except Exception:
            continue
        if ptype == "POINTER":
            v = getattr(v, "name_full", None) if v is not None and hasattr(v, "name_full") else None
        elif ptype == "COLLECTION":
            v = tuple(_rna_values(it, depth + 1) for it in v) if depth < 1 else len(v)
        elif isinstance(v, set):
            v = tuple(sorted(v))
        elif not isinstance(v, (int, float, bool, str)) and v is not None:
            try:
                v = tuple(np.asarray(v, np.float64).ravel().tolist())
            except Exception:
                v = str(v)
        out.append((ident, v))
    return tuple(out)


def _crc(a) -> int:
    return zlib.crc32(np.ascontiguousarray(a).tobytes())


def _bulk(coll, prop: str, width: int, dtype=np.float32) -> np.ndarray:
    n = len(coll)
    buf = np.empty(n * width, dtype)
    if n:
        coll.foreach_get(prop, buf)
    return buf.reshape(n, width) if width > 1 else buf


_POSE_PROPS = (("location", 3), ("rotation_quaternion", 4), ("rotation_euler", 3), ("rotation_axis_angle", 4),
               ("scale", 3), ("bbone_curveinx", 1), ("bbone_curveinz", 1), ("bbone_curveoutx", 1),
               ("bbone_curveoutz", 1), ("bbone_rollin", 1), ("bbone_rollout", 1), ("bbone_easein", 1),
               ("bbone_easeout", 1))


def _keyed_paths(action, slot) -> set:
    return {(fc.data_path, fc.array_index) for fc in _actions.slot_fcurves(action, slot) if not fc.mute} \
        if action is not None else set()


def _matrix_of(ob) -> tuple:
    return tuple(np.asarray(ob.matrix_world, np.float64).ravel().round(9).tolist()) if ob is not None else ()


def _driver_signature(ad) -> tuple:
    out = []
    if ad is None:
        return ()
    for fc in ad.drivers:
        d = fc.driver
        vars_ = []
        for v in d.variables:
            tg = []
            for t in v.targets:
                idb = t.id
                val = None
                if idb is not None:
                    try:
                        if v.type == "SINGLE_PROP" and t.data_path:
                            val = idb.path_resolve(t.data_path)
                            if not isinstance(val, (int, float, bool, str)):
                                val = tuple(val) if hasattr(val, "__len__") else str(val)
                        elif getattr(idb, "matrix_world", None) is not None:
                            val = _matrix_of(idb)
                    except Exception:
                        val = "unresolved"
                tg.append((getattr(idb, "name_full", None), t.data_path, t.bone_target, t.transform_type,
                           t.transform_space, t.rotation_mode, val))
            vars_.append((v.name, v.type, tuple(tg)))
        kp = _bulk(fc.keyframe_points, "co", 2)
        out.append((fc.data_path, fc.array_index, fc.mute, d.type, d.expression, d.use_self, tuple(vars_),
                    _crc(kp), tuple(_rna_values(m) for m in fc.modifiers)))
    return tuple(out)


def rig_signature(armature, action=None, slot=None) -> tuple:
    """What Blender's evaluation of an action on ``armature`` depends on besides the action's
    keys: rest matrices and bone settings, the pose values and custom properties the action
    does not key, constraint settings and their target objects' transforms, drivers (their
    variables' current values included), the armature's world matrix and parent.  Read at bake
    and re-check time only (a few ms on a Rigify rig), never per frame."""
    arm = armature
    bones = arm.data.bones
    pbs = arm.pose.bones
    keyed = _keyed_paths(action, slot)
    names = [pb.name for pb in pbs]
    pose_parts = []
    for prop, width in _POSE_PROPS:
        try:
            vals = _bulk(pbs, prop, width).reshape(len(pbs), width).copy()
        except Exception:
            continue
        for k, name in enumerate(names):
            path = f'pose.bones["{name}"].{prop}'
            for i in range(width):
                if (path, i) in keyed:
                    vals[k, i] = 0.0
        pose_parts.append((prop, _crc(vals)))
    modes = tuple(pb.rotation_mode for pb in pbs)
    custom = []
    targets = set()
    cons = []
    for pb in pbs:
        for key in pb.keys():
            if (f'pose.bones["{pb.name}"]["{key}"]', 0) in keyed:
                continue
            v = pb[key]
            custom.append((pb.name, key, v.to_list() if hasattr(v, "to_list") else
                           (v if isinstance(v, (int, float, str, bool)) else str(v))))
        for c in pb.constraints:
            cons.append((pb.name, c.type, _rna_values(c)))
            for attr in ("target", "pole_target"):
                t = getattr(c, attr, None)
                if t is not None and t != arm:
                    targets.add(t.name)
            for t in getattr(c, "targets", ()):   # Armature constraint
                if getattr(t, "target", None) is not None and t.target != arm:
                    targets.add(t.target.name)
    obj_cons = []
    for c in arm.constraints:
        obj_cons.append((c.type, _rna_values(c)))
        t = getattr(c, "target", None)
        if t is not None and t != arm:
            targets.add(t.name)
    import bpy

    target_mats = tuple((n, _matrix_of(bpy.data.objects.get(n))) for n in sorted(targets))
    arm_custom = tuple((k, str(arm[k])) for k in arm.keys())
    rest = _bulk(bones, "matrix_local", 16)
    flags = tuple((b.name, b.parent.name if b.parent else None, b.use_deform, b.bbone_segments,
                   b.use_inherit_rotation, b.inherit_scale, b.use_local_location, b.use_connect)
                  for b in bones)
    return (arm.name, arm.as_pointer(), arm.data.as_pointer(), _crc(rest), flags, tuple(pose_parts), modes,
            tuple(custom), arm_custom, tuple(cons), tuple(obj_cons), target_mats,
            _driver_signature(arm.animation_data), _driver_signature(arm.data.animation_data),
            _matrix_of(arm), arm.parent.name if arm.parent else None, arm.parent_type, arm.parent_bone)


def bake_signature(armature, action, slot, fps: float, substeps: int = 1) -> tuple:
    return (rig_signature(armature, action, slot), _actions.action_signature(action, slot), float(fps),
            max(1, int(substeps)))


# ------------------------------------------------------------------------------------------------
# the bake
# ------------------------------------------------------------------------------------------------

@dataclass
class Bake:
    """Blender's evaluation of one action on one armature, per sampled frame (name-keyed, so it
    is independent of any scene asset's node order)."""
    armature: str
    clip_name: str
    action_name: str
    frames: np.ndarray                 # (F,) sampled frames (actions.sample_frames)
    frame_start: float
    fps: float
    bone_names: List[str]              # (B,) pose.bones order
    pose: np.ndarray                   # (F,B,4,4) armature-space pose matrices (PoseBone.matrix)
    world: np.ndarray                  # (F,4,4) armature matrix_world
    parent_world: Optional[np.ndarray]  # (F,4,4) the armature parent's world (object channel), or None
    object_channel: bool               # the armature object's own transform is baked too
    bbone_pose: Dict[str, np.ndarray] = field(default_factory=dict)   # bone -> (F,S+1,4,4)
    bbone_rest: Dict[str, np.ndarray] = field(default_factory=dict)   # bone -> (S+1,4,4)
    reasons: List[str] = field(default_factory=list)
    seconds: float = 0.0
    signature: tuple = ()
    version: int = 0
    substeps: int = 1                  # samples per frame interval

    @property
    def frame_count(self) -> int:
        return int(self.frames.shape[0])

    @property
    def duration_seconds(self) -> float:
        return float((self.frames[-1] - self.frames[0]) / self.fps) if self.frames.size else 0.0


def _object_channel_needed(armature, action, slot) -> bool:
    if any(c.enabled for c in armature.constraints):
        return True
    ad = armature.animation_data
    if ad is not None and any(_actions.RE_OBJ.match(d.data_path) for d in ad.drivers if not d.mute):
        return True
    _names, has_obj = _actions.action_bone_names(action, slot)
    return bool(has_obj)


def _parent_world(ob_eval) -> Optional[np.ndarray]:
    """World matrix of the node an armature object is parented to (object or bone), evaluated."""
    p = ob_eval.parent
    if p is None:
        return None
    w = np.array(p.matrix_world, np.float64)
    if ob_eval.parent_type == "BONE" and p.type == "ARMATURE" and ob_eval.parent_bone:
        pb = p.pose.bones.get(ob_eval.parent_bone)
        if pb is not None:
            w = w @ np.array(pb.matrix, np.float64)
    return w


def bake_frames(action, substeps: int = 1) -> Tuple[np.ndarray, float, float]:
    """``actions.sample_frames(action)`` with ``substeps - 1`` evenly spaced subframes inserted
    in every interval (``substeps`` 1: the frames themselves)."""
    frames, start, end = _actions.sample_frames(action)
    n = max(1, int(substeps))
    if n > 1 and frames.size > 1:
        a = frames[:-1, None] + (frames[1:] - frames[:-1])[:, None] * (np.arange(n) / n)[None]
        frames = np.concatenate([a.ravel(), frames[-1:]])
    return frames, start, end


def bake_action(armature, action, slot=None, clip_name: Optional[str] = None, scene=None,
                progress: Optional[Callable[[int, int], None]] = None, reasons=None,
                substeps: int = 1) -> Bake:
    """Blender's evaluation of ``action`` (its ``slot``) on ``armature`` alone, at every frame of
    ``actions.sample_frames(action)`` (and ``substeps - 1`` subframes between each: the preview
    interpolates linearly between baked samples, so more substeps cut the error between frames
    at that cost).  The scene's frame, subframe, actions, slots, NLA mute flags and the pose
    values the action writes are restored exactly, also on error.  ``progress(done, total)`` is
    called per sample.  Raises BakeError with a message naming the armature and action."""
    import bpy

    from .. import preview as _preview

    if armature is None or armature.type != "ARMATURE":
        raise BakeError(f"cannot bake: '{getattr(armature, 'name', armature)}' is not an armature")
    if action is None:
        raise BakeError(f"cannot bake armature '{armature.name}': no action")
    try:
        action.name
    except ReferenceError:
        raise BakeError(f"cannot bake armature '{armature.name}': the action was deleted") from None
    if armature.mode == "EDIT" or getattr(armature.data, "is_editmode", False):
        raise BakeError(f"cannot bake action '{action.name}' on '{armature.name}': the armature is in Edit Mode")
    scene = scene or bpy.context.scene
    if armature.name not in scene.objects:
        raise BakeError(f"cannot bake action '{action.name}': armature '{armature.name}' is not in scene '{scene.name}'")
    ad0 = armature.animation_data
    slot = slot if slot is not None else _actions.pick_slot(action, "OBJECT", ad0, armature.name)
    if len(getattr(action, "slots", ())) and slot is None:
        raise BakeError(f"cannot bake action '{action.name}' on '{armature.name}': it has no object slot")
    fps = _actions.scene_fps(scene)
    frames, start, end = bake_frames(action, substeps)
    if not (np.isfinite(frames).all() and frames.size):
        raise BakeError(f"cannot bake action '{action.name}': its frame range {tuple(action.frame_range)} is not finite")
    for fc in _actions.slot_fcurves(action, slot):
        co = _bulk(fc.keyframe_points, "co", 2)
        if not np.isfinite(co).all():
            raise BakeError(f"cannot bake action '{action.name}' on '{armature.name}': curve "
                            f"{fc.data_path}[{fc.array_index}] has a non-finite key")
    t0 = time.perf_counter()
    signature = bake_signature(armature, action, slot, fps, substeps)
    reasons = list(reasons) if reasons is not None else bake_reasons(armature)
    names = [pb.name for pb in armature.pose.bones]
    nb = len(names)
    bent = weighted_bbones(armature)
    obj_chan = _object_channel_needed(armature, action, slot)
    nf = int(frames.size)
    pose = np.empty((nf, nb, 4, 4))
    world = np.empty((nf, 4, 4))
    pworld = np.empty((nf, 4, 4)) if obj_chan and armature.parent is not None else None
    bb_pose = {}
    bb_rest = {}
    saved_frame = (scene.frame_current, float(scene.frame_subframe))
    saved = save_animation()
    written = _written_values(armature, action, slot)
    # values the armature's own current action writes too (restored after the re-evaluation)
    ad = armature.animation_data
    if ad is not None and ad.action is not None and ad.action != action:
        written += _written_values(armature, ad.action, getattr(ad, "action_slot", None))
    flat = np.empty(nb * 16, np.float32)
    try:
        with _preview.timeline_handback_suspended():
            isolate(armature, action, slot)
            for k, f in enumerate(frames.tolist()):
                fi = math.floor(f)
                scene.frame_set(int(fi), subframe=float(f - fi))
                dg = bpy.context.evaluated_depsgraph_get()
                ob = armature.evaluated_get(dg)
                ob.pose.bones.foreach_get("matrix", flat)
                pose[k] = flat.reshape(nb, 4, 4).transpose(0, 2, 1)
                world[k] = np.array(ob.matrix_world, np.float64)
                if pworld is not None:
                    pw = _parent_world(ob)
                    pworld[k] = pw if pw is not None else np.eye(4)
                for bname in bent:
                    pb = ob.pose.bones[bname]
                    segs = pb.bone.bbone_segments
                    arr = bb_pose.get(bname)
                    if arr is None:
                        arr = bb_pose[bname] = np.empty((nf, segs + 1, 4, 4))
                        bb_rest[bname] = np.array([np.array(pb.bbone_segment_matrix(a, rest=True), np.float64)
                                                   for a in range(segs + 1)])
                    arr[k] = [np.array(pb.bbone_segment_matrix(a, rest=False), np.float64) for a in range(segs + 1)]
                if progress is not None:
                    progress(k + 1, nf)
    except BakeError:
        raise
    except Exception as ex:
        raise BakeError(f"baking action '{action.name}' on '{armature.name}' failed: {type(ex).__name__}: {ex}") from ex
    finally:
        with _preview.timeline_handback_suspended():
            restore_animation(saved)
            _restore_values(written)
            scene.frame_set(int(saved_frame[0]), subframe=saved_frame[1])
            _restore_values(written)
    bad = ~np.isfinite(pose.reshape(nf, nb, 16)).all(axis=2)
    if bad.any():
        f, b = (int(x[0]) for x in np.nonzero(bad))
        raise BakeError(f"baking action '{action.name}' on '{armature.name}': bone '{names[b]}' has a "
                        f"non-finite pose at frame {frames[f]:g}")
    return Bake(armature=armature.name, clip_name=clip_name or action.name, action_name=action.name,
                frames=frames, frame_start=float(start), fps=fps, bone_names=names, pose=pose, world=world,
                parent_world=pworld, object_channel=obj_chan, bbone_pose=bb_pose, bbone_rest=bb_rest,
                reasons=reasons, seconds=time.perf_counter() - t0, signature=signature,
                substeps=max(1, int(substeps)))


# ------------------------------------------------------------------------------------------------
# bake -> the player's clip (numpy only)
# ------------------------------------------------------------------------------------------------

def _continuous(q: np.ndarray) -> np.ndarray:
    """(F,B,4) quaternions on one hemisphere along F, per track (vectorised)."""
    if q.shape[0] < 2:
        return q
    d = np.einsum("fbi,fbi->fb", q[1:], q[:-1])
    s = np.cumprod(np.where(d < 0.0, -1.0, 1.0), axis=0)
    out = q.copy()
    out[1:] *= s[..., None]
    return out


class BakedPose:
    """A bake bound to the nodes of one scene asset: what the player's clip does not carry.

    ``locals`` (F,B,4,4): every baked bone's exact parent-relative local matrix per frame
    (``inv(parent world) @ world`` from Blender's evaluated pose), for
    ``ScenePose.set_local_matrices``.  A TRS local cannot hold the shear that constraints and
    stretching under non-uniformly scaled parents leave (Rigify's IK limbs), so the baked clip
    keeps TRS tracks for the root bones only (``root``: the player's clock, In Place and the
    crossfade act on them) and the session writes these matrices for the others around the
    player's sample: exact at the baked frames, linear in between.
    ``bbone_table`` (F,R,4,4) and ``rest``: the B-Bone segment matrices of the weighted B-Bones
    (``SkinningPaletteSet.set_bbone_segments``).
    ``anchors`` / ``relative_t``: each inner bone's root bone and its transposed matrix relative
    to it per frame, for the per-frame fast path (``ScenePose.set_world_shortcut`` and, through
    ``joint_table``, ``SkinningPaletteSet.set_baked_joints``): exact at the baked frames; between
    them these lerp the root-relative matrices instead of each local, a different interpolation
    of the same bake (Rigify half frames: 2.75e-2 of the object size against Blender, 2.62e-2
    with lerped locals; both are linear interpolations of a 1-sample-per-frame bake)."""

    def __init__(self, times: np.ndarray, nodes: np.ndarray, locals_: np.ndarray, root: np.ndarray,
                 bbone_nodes: List[int], bbone_pose: List[np.ndarray], bbone_rest: List[np.ndarray],
                 anchors: Optional[np.ndarray] = None, relative: Optional[np.ndarray] = None):
        self.times = np.asarray(times, np.float64)
        self._times = self.times.tolist()
        self.nodes = np.asarray(nodes, np.int64)
        self.locals = locals_
        self.root = np.asarray(root, bool)
        inner = np.flatnonzero(~self.root)
        # anchors (B',): the root bone node of each inner node; relative_t (F,B',4,4): the
        # transposed ``inverse(root pose) @ pose`` (ScenePose.set_world_shortcut).  The inner
        # nodes are ordered by anchor, so each root's bones are one run (one product a frame).
        self.anchors = self.relative_t = None
        if anchors is not None and relative is not None:
            anchors = np.asarray(anchors, np.intp)
            order = np.argsort(anchors, kind="stable")
            inner = inner[order]
            self.anchors = anchors[order]
            self.relative_t = np.ascontiguousarray(np.asarray(relative, np.float64)[:, order].transpose(0, 1, 3, 2))
        self.inner_nodes = self.nodes[inner].astype(np.intp)
        self.inner_locals = np.ascontiguousarray(locals_[:, inner], np.float64)    # (F,B',4,4), per-frame reads
        # every per-frame matrix finite: the preview writes them without per-frame checks
        self.finite = bool(np.isfinite(self.inner_locals).all()
                           and (self.relative_t is None or np.isfinite(self.relative_t).all()))
        self.bbone_nodes = list(bbone_nodes)
        self._slices = []
        o = 0
        for p in bbone_pose:
            self._slices.append(slice(o, o + p.shape[1]))
            o += p.shape[1]
        self.bbone_table = (np.concatenate(bbone_pose, axis=1) if bbone_pose
                            else np.zeros((self.times.size, 0, 4, 4)))
        self.rest = {n: r for n, r in zip(self.bbone_nodes, bbone_rest)}

    def _where(self, time_seconds: float):
        """(frame interval index, blend) of ``time_seconds`` (clamped to the baked range)."""
        t = self._times
        n = len(t)
        if n == 1:
            return 0, 0.0
        x = min(max(float(time_seconds), t[0]), t[-1])
        i = min(max(bisect.bisect_right(t, x) - 1, 0), n - 2)
        return i, (x - t[i]) / max(t[i + 1] - t[i], 1e-12)

    @staticmethod
    def _lerp(arr, i, a):
        if a <= 0.0 or arr.shape[0] == 1:
            return arr[i]
        if a >= 1.0:
            return arr[i + 1]
        return arr[i] * (1.0 - a) + arr[i + 1] * a

    def local_matrices(self, time_seconds: float, inner_only: bool = False) -> np.ndarray:
        """(B,4,4) local matrices at ``time_seconds`` (``inner_only``: the non-root bones',
        aligned with ``inner_nodes``)."""
        i, a = self._where(time_seconds)
        return self._lerp(self.inner_locals if inner_only else self.locals, i, a)

    def relation_table(self, segment_keys: np.ndarray) -> np.ndarray:
        """(F,R,4,4) segment deform relations ``pose[a] @ inverse(rest[a])`` per baked frame,
        one per row of the palettes' ``segment_keys`` ((R,2) bone node, segment index); rows of
        bones not baked stay at the rest relation (identity).  Linear in the pose, so a lerp of
        these equals the relations of the lerped segments."""
        keys = np.asarray(segment_keys, np.int64).reshape(-1, 2)
        nf = self.times.size
        out = np.tile(np.eye(4), (nf, keys.shape[0], 1, 1))
        start = {n: sl.start for n, sl in zip(self.bbone_nodes, self._slices)}
        width = {n: sl.stop - sl.start for n, sl in zip(self.bbone_nodes, self._slices)}
        ok = np.array([int(n) in start and 0 <= int(a) < width[int(n)] for n, a in keys], bool)
        if ok.any():
            cols = np.array([start[int(n)] + int(a) for n, a in keys[ok]], np.int64)
            rest = np.concatenate([self.rest[n] for n in self.bbone_nodes])[cols]
            out[:, ok] = self.bbone_table[:, cols] @ np.linalg.inv(rest)[None]
        return out

    def frame_at(self, time_seconds: float):
        """(i, a): ``time_seconds`` lies between baked frames i and i + 1, at blend ``a`` (clamped
        to the baked range; ``a`` is 0 at i, and i + 1 exists whenever ``a`` > 0)."""
        i, a = self._where(time_seconds)
        if self.times.size == 1 or a <= 0.0:
            return i, 0.0
        if a >= 1.0:
            return i + 1, 0.0
        return i, a

    def joint_table(self, joint_rows: Optional[np.ndarray]):
        """``(joints_t (F,T,4,4), anchors (T,))`` for ``SkinningPaletteSet.set_baked_joints``:
        per baked frame and palette row (``joint_rows``: each row's joint node) the transposed
        joint matrix relative to its root bone (identity for a root bone, its own anchor).  None
        when a row's joint is not a baked bone (or there are no rows / root-relative matrices)."""
        if joint_rows is None or self.relative_t is None or not len(joint_rows):
            return None
        rows = np.asarray(joint_rows, np.int64)
        nf = self.times.size
        where = {int(n): k for k, n in enumerate(self.inner_nodes.tolist())}
        roots = set(self.nodes[self.root].tolist())
        if any(int(n) not in where and int(n) not in roots for n in rows.tolist()):
            return None                  # once per bake and palette set, not per frame
        inner = np.array([where.get(int(n), -1) for n in rows.tolist()], np.int64)
        out = np.tile(np.eye(4), (nf, rows.size, 1, 1))
        hit = inner >= 0
        out[:, hit] = self.relative_t[:, inner[hit]]
        anchors = np.where(hit, self.anchors[np.maximum(inner, 0)], rows).astype(np.intp)
        return out, anchors

    def relative_matrices_t(self, time_seconds: float) -> Optional[np.ndarray]:
        """(B',4,4) transposed matrices of the inner bones relative to their root bones at
        ``time_seconds`` (lerped: exact at the baked frames), aligned with ``inner_nodes`` /
        ``anchors``; None without them."""
        if self.relative_t is None:
            return None
        i, a = self._where(time_seconds)
        return self._lerp(self.relative_t, i, a)

    def bbone_relations(self, table: np.ndarray, time_seconds: float) -> np.ndarray:
        i, a = self._where(time_seconds)
        return self._lerp(table, i, a)

    def bbone_segments(self, time_seconds: float):
        """``(pose, rest)`` dicts for ``set_bbone_segments`` at ``time_seconds``."""
        i, a = self._where(time_seconds)
        cur = self._lerp(self.bbone_table, i, a)
        return {n: cur[s] for n, s in zip(self.bbone_nodes, self._slices)}, self.rest


def baked_clip(bake: Bake, scene_asset, template=None):
    """(AnimationClipAsset, BakedPose) for ``scene_asset``.  The clip has LINEAR local TRS
    tracks for the armature's root bones (and the armature object when ``bake.object_channel``)
    that reproduce the baked world matrices with the bones' inheritance flags
    (``ScenePose.basis_from_worlds``), quaternions on one hemisphere per track; every other
    bone's exact local matrix per frame is in the BakedPose.  The clip keeps ``template``'s
    name, target and morph channels.  Raises BakeError when the armature is not in the asset."""
    from ..animation.pose import ScenePose

    arm_node = scene_asset.node_index(bake.armature)
    if arm_node < 0:
        raise BakeError(f"armature '{bake.armature}' is not in the imported scene")
    idx = np.array([scene_asset.node_index(bake.armature, n) for n in bake.bone_names], np.int64)
    has = idx >= 0
    bones = idx[has]
    pos = {int(n): j for j, n in enumerate(bones.tolist())}
    ppos = np.array([pos.get(int(scene_asset.parents[n]), -1) for n in bones.tolist()], np.int64)
    root = ppos < 0
    sp = ScenePose()
    if not sp.initialize(scene_asset) or not sp.update_world_matrices():
        raise BakeError(f"baking '{bake.clip_name}': the scene pose could not be built: {sp.last_error}")
    base = np.array(sp.world_matrices, np.float64)
    parent = int(scene_asset.parents[arm_node])
    nf = bake.frame_count
    chan_nodes = np.concatenate([[arm_node], bones[root]]) if bake.object_channel else bones[root]
    T = np.empty((nf, chan_nodes.size, 3))
    Q = np.empty((nf, chan_nodes.size, 4))
    S = np.empty((nf, chan_nodes.size, 3))
    worlds = np.einsum("fij,fbjk->fbik", bake.world, bake.pose[:, has])
    for k in range(nf):     # per baked frame (bake time, not per played frame)
        w = base.copy()
        w[arm_node] = bake.world[k]
        if bake.parent_world is not None and parent >= 0:
            w[parent] = bake.parent_world[k]
        w[bones] = worlds[k]
        try:
            t, q, s = sp.basis_from_worlds(w)
        except ValueError as ex:
            raise BakeError(f"baking '{bake.clip_name}' on '{bake.armature}' at frame {bake.frames[k]:g}: {ex}") from ex
        T[k], Q[k], S[k] = t[chan_nodes], q[chan_nodes], s[chan_nodes]
    Q = _continuous(Q)
    times = (bake.frames - bake.frame_start) / bake.fps
    channels = [NodeAnimationChannelAsset(node_index=int(n), translation_times=times, translation_values=T[:, j],
                                          rotation_times=times, rotation_values=Q[:, j],
                                          scale_times=times, scale_values=S[:, j])
                for j, n in enumerate(chan_nodes.tolist())]
    clip = AnimationClipAsset(
        name=template.name if template is not None else bake.clip_name,
        duration_seconds=bake.duration_seconds, channels=channels,
        morph_channels=template.morph_channels if template is not None else (),
        frame_start=bake.frame_start, fps=bake.fps,
        target_object=template.target_object if template is not None else bake.armature,
        action_name=bake.action_name)
    # exact parent-relative locals of every bone (armature space for root bones)
    locals_ = bake.pose[:, has].copy()
    child = ~root
    if child.any():
        try:
            inv = np.linalg.inv(worlds[:, ppos[child]])
        except np.linalg.LinAlgError:
            inv = np.linalg.pinv(worlds[:, ppos[child]])
        locals_[:, child] = inv @ worlds[:, child]
    bnodes, bpose, brest = [], [], []
    for name, arr in bake.bbone_pose.items():
        node = scene_asset.node_index(bake.armature, name)
        if node >= 0:
            bnodes.append(node)
            bpose.append(arr)
            brest.append(bake.bbone_rest[name])
    # each bone relative to its root bone (the topmost baked ancestor): ScenePose.set_world_shortcut
    top = np.arange(bones.size)
    for _ in range(bones.size):                  # one step per bone level, all bones at once (bake time)
        up = ppos[top]
        if not (up >= 0).any():
            break
        top = np.where(up >= 0, up, top)
    pose_arm = bake.pose[:, has]
    try:
        top_inv = np.linalg.inv(pose_arm[:, top[child]])
    except np.linalg.LinAlgError:
        top_inv = np.linalg.pinv(pose_arm[:, top[child]])
    relative = top_inv @ pose_arm[:, child]
    return clip, BakedPose(times, bones, locals_, root, bnodes, bpose, brest,
                           anchors=bones[top[child]], relative=relative)


# ------------------------------------------------------------------------------------------------
# the cache
# ------------------------------------------------------------------------------------------------

class BakeCache:
    """Bakes by (armature name, clip name), re-baked when the action or the rig changes.

    ``mark_dirty()`` (StylizedSession.sync on armature/object/action updates) makes the next
    ``lookup`` of each entry re-check its signature once; until then lookups are a dict access
    (the per-frame path).  ``ensure`` always re-checks and bakes when needed.  ``substeps``:
    samples per frame interval (1: the action's frames; part of the signature)."""

    def __init__(self, substeps: int = 1):
        self.substeps = max(1, int(substeps))
        self.entries: Dict[Tuple[str, str], Bake] = {}
        self._checked: Dict[Tuple[str, str], bool] = {}
        self._reasons: Dict[str, List[str]] = {}
        self.bake_count = 0
        self.hits = 0
        self._version = 0
        self.reasons_generation = 0   # bumped whenever the cached reasons are dropped

    def clear(self) -> None:
        """Forget every bake (and the counters)."""
        self.entries.clear()
        self._checked.clear()
        self._reasons.clear()
        self.reasons_generation += 1
        self.bake_count = 0
        self.hits = 0

    def mark_dirty(self) -> None:
        self._checked = dict.fromkeys(self._checked, False)
        self._reasons.clear()
        self.reasons_generation += 1

    def reasons(self, armature_name: str) -> List[str]:
        """``bake_reasons`` of the armature (cached until ``mark_dirty``)."""
        hit = self._reasons.get(armature_name)
        if hit is None:
            import bpy

            hit = bake_reasons(bpy.data.objects.get(armature_name))
            self._reasons[armature_name] = hit
        return hit

    @staticmethod
    def _action_for(armature, clip_name: str, action_name: Optional[str] = None):
        import bpy

        action = bpy.data.actions.get(action_name or clip_name)
        if action is None:
            raise BakeError(f"clip '{clip_name}' of '{armature.name}': action "
                            f"'{action_name or clip_name}' does not exist")
        slot = _actions.pick_slot(action, "OBJECT", armature.animation_data, armature.name)
        return action, slot

    def _current(self, key, armature, action, slot) -> Optional[Bake]:
        e = self.entries.get(key)
        if e is None:
            return None
        import bpy

        fps = _actions.scene_fps(bpy.context.scene)
        if e.signature != bake_signature(armature, action, slot, fps, self.substeps):
            return None
        self._checked[key] = True
        return e

    def lookup(self, armature_name: str, clip_name: str) -> Tuple[Optional[Bake], str]:
        """(bake, "") when a current bake exists, else (None, why).  Free unless marked dirty."""
        key = (armature_name, clip_name)
        e = self.entries.get(key)
        if e is None:
            return None, "not baked yet (press Play)"
        if self._checked.get(key):
            return e, ""
        import bpy

        arm = bpy.data.objects.get(armature_name)
        try:
            if arm is None:
                return None, f"armature '{armature_name}' is gone"
            action, slot = self._action_for(arm, clip_name, e.action_name)
            if self._current(key, arm, action, slot) is None:
                return None, "the rig or the action changed since the bake (press Play to re-bake)"
        except (BakeError, ReferenceError) as ex:
            return None, str(ex)
        return e, ""

    def ensure(self, armature, clip_name: str, action_name: Optional[str] = None,
               progress: Optional[Callable[[int, int], None]] = None) -> Optional[Bake]:
        """The current bake of ``clip_name`` on ``armature`` (baked now when missing or stale);
        None when the armature needs no bake.  Raises BakeError."""
        reasons = bake_reasons(armature)
        self._reasons[armature.name] = reasons
        if not reasons:
            return None
        key = (armature.name, clip_name)
        action, slot = self._action_for(armature, clip_name, action_name)
        hit = self._current(key, armature, action, slot)
        if hit is not None:
            self.hits += 1
            return hit
        b = bake_action(armature, action, slot, clip_name=clip_name, progress=progress, reasons=reasons,
                        substeps=self.substeps)
        self._version += 1
        b.version = self._version
        self.entries[key] = b
        self._checked[key] = True
        self.bake_count += 1
        return b


BAKES = BakeCache()


def describe(armature_name: str, clip_name: Optional[str]) -> List[str]:
    """Lines for the Animation panel: why the armature's clips are baked, and the bake of
    ``clip_name`` (frames, time) or that it still needs one.  Empty when no bake is needed."""
    reasons = BAKES.reasons(armature_name) if armature_name else []
    if not reasons:
        return []
    b, why = BAKES.lookup(armature_name, clip_name) if clip_name else (None, "no clip")
    if b is None:
        return [f"Needs a bake through Blender: {why}"] + [f"  {r}" for r in reasons]
    per = b.seconds / max(b.frame_count, 1) * 1e3
    what = f"{b.frame_count} frames" if b.substeps == 1 else f"{b.frame_count} samples ({b.substeps} per frame)"
    return ([f"Baked through Blender: {what} in {b.seconds:.2f} s ({per:.1f} ms each)"]
            + [f"  {r}" for r in reasons])


def ensure_with_progress(window_manager, armature, clip_name: str, action_name: Optional[str] = None):
    """``BAKES.ensure`` with the window manager's progress indicator (operators)."""
    state = {"begun": False}

    def progress(done, total):
        if window_manager is None:
            return
        if not state["begun"]:
            window_manager.progress_begin(0, total)
            state["begun"] = True
        window_manager.progress_update(done)

    try:
        return BAKES.ensure(armature, clip_name, action_name, progress=progress)
    finally:
        if state["begun"]:
            window_manager.progress_end()
