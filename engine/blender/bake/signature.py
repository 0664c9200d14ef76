"""Signatures of a rig and an action: what Blender's evaluation of a bake depends on
(``bake.BakeCache`` re-bakes when they change)."""
from __future__ import annotations

import zlib

import numpy as np

from ..importer import actions as _actions


def _rna_props(struct) -> tuple:
    """(identifier, type) of every RNA property of ``struct`` (no module-level cache: signatures
    are read at bake and re-check time only)."""
    return tuple((p.identifier, p.type) for p in struct.bl_rna.properties if p.identifier != "rna_type")


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


def read_bulk(coll, prop: str, width: int, dtype=np.float32) -> np.ndarray:
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


def driver_signature(ad, values: bool = True) -> tuple:
    """Every driver of ``ad``: its expression, variables and targets, and (``values``) the current
    values of its targets (they change with the frame when the targets are animated)."""
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
                if idb is not None and values:
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
        kp = read_bulk(fc.keyframe_points, "co", 2)
        out.append((fc.data_path, fc.array_index, fc.mute, d.type, d.expression, d.use_self, tuple(vars_),
                    _crc(kp), tuple(_rna_values(m) for m in fc.modifiers)))
    return tuple(out)


def rig_signature(armature, action=None, slot=None, keyed=None, static: bool = False) -> tuple:
    """What Blender's evaluation of an action on ``armature`` depends on besides the action's
    keys: rest matrices and bone settings, the pose values and custom properties the action
    does not key, constraint settings and their target objects' transforms, drivers (their
    variables' current values included), the armature's world matrix and parent.  Read at bake
    and re-check time only (a few ms on a Rigify rig), never per frame.

    ``keyed``: the (data path, index) pairs animated elsewhere (instead of ``action``'s keys).
    ``static``: only what does not change with the scene's frame (a Scene bake, compared at any
    frame): no driver target values, target or armature world matrices, and no pose value,
    custom property or constraint setting that a driver or ``keyed`` writes."""
    arm = armature
    bones = arm.data.bones
    pbs = arm.pose.bones
    keyed = set(_keyed_paths(action, slot) if keyed is None else keyed)
    driven = set()
    if static:
        for ad in (arm.animation_data,):
            driven |= {(d.data_path, d.array_index) for d in (ad.drivers if ad is not None else ())}
        keyed |= driven
    varying = {p for p, _i in keyed}
    names = [pb.name for pb in pbs]
    pose_parts = []
    for prop, width in _POSE_PROPS:
        try:
            vals = read_bulk(pbs, prop, width).reshape(len(pbs), width).copy()
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
            pre = f'pose.bones["{pb.name}"].constraints["{c.name}"].'
            vals = _rna_values(c)
            if static:
                vals = tuple(v for v in vals if pre + v[0] not in varying)
            cons.append((pb.name, c.type, vals))
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

    target_mats = tuple((n, () if static else _matrix_of(bpy.data.objects.get(n))) for n in sorted(targets))
    arm_custom = tuple((k, str(arm[k])) for k in arm.keys())
    rest = read_bulk(bones, "matrix_local", 16)
    flags = tuple((b.name, b.parent.name if b.parent else None, b.use_deform, b.bbone_segments,
                   b.use_inherit_rotation, b.inherit_scale, b.use_local_location, b.use_connect)
                  for b in bones)
    return (arm.name, arm.as_pointer(), arm.data.as_pointer(), _crc(rest), flags, tuple(pose_parts), modes,
            tuple(custom), arm_custom, tuple(cons), tuple(obj_cons), target_mats,
            driver_signature(arm.animation_data, not static), driver_signature(arm.data.animation_data, not static),
            () if static else _matrix_of(arm), arm.parent.name if arm.parent else None, arm.parent_type, arm.parent_bone)


def bake_signature(armature, action, slot, fps: float, substeps: int = 1) -> tuple:
    return (rig_signature(armature, action, slot), _actions.action_signature(action, slot), float(fps),
            max(1, int(substeps)))

