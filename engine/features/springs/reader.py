"""Read the VRM Add-on's spring bone setup (``spring_bone1``) from an armature, with or without the
add-on registered: the data is read as ID properties (``engine/features/vrm/expressions.extension_props``),
collider shapes from their Empties as the add-on's getters compute them (property_group.py:64-367).
"""
from __future__ import annotations

from typing import Callable, List, Optional, Tuple

import numpy as np

from ...core.animation.spring_rig import (
    CAPSULE,
    INSIDE_CAPSULE,
    INSIDE_SPHERE,
    PLANE,
    SPHERE,
    CharacterSpec,
    ColliderSpec,
    JointSpec,
    SpringSpec,
)
from ...core.finite import affine_inv
from ..vrm.read import extension_props, idprop  # one reader of the add-on's ID properties


def spring_data(arm_obj):
    """The ``spring_bone1`` property group of an armature object, or None."""
    data = getattr(arm_obj, "data", None)
    ext = extension_props(data) if data is not None else None
    sb = idprop(ext, "spring_bone1") if ext is not None else None
    if sb is None or not (len(idprop(sb, "springs", [])) or len(idprop(sb, "colliders", []))):
        return None
    return sb


def vrm0_data(arm_obj):
    """VRM 0.x ``secondary_animation`` with bone groups (used when there is no spring_bone1 copy)."""
    data = getattr(arm_obj, "data", None)
    ext = extension_props(data) if data is not None else None
    sa = idprop(idprop(ext, "vrm0", {}), "secondary_animation") if ext is not None else None
    if sa is None or not len(idprop(sa, "bone_groups", [])):
        return None
    return sa


def has_springs(arm_obj) -> bool:
    if getattr(arm_obj, "type", "") != "ARMATURE":
        return False
    sb = spring_data(arm_obj)
    return bool(len(idprop(sb, "springs", []))) if sb is not None else vrm0_data(arm_obj) is not None


def _vrm0_springs(arm_obj, sa, by_uuid, node_of_bone):
    """The add-on's "Assign VRM 0.0 Spring Bones" migration (spring_bone1/ops.py:1294-1411) as specs:
    one sphere collider per VRM 0.x collider Empty (radius = display size x mean |scale|), one
    spring per bone chain (root + first child repeatedly; other children start new chains)."""
    from collections import deque

    colliders, groups = [], {}
    for grp in idprop(sa, "collider_groups", []):
        uuid = str(idprop(grp, "uuid", ""))
        if not uuid:
            continue
        bone = _bone_name(idprop(grp, "node"), by_uuid)
        ids = []
        for c in idprop(grp, "colliders", []):
            ob = idprop(c, "bpy_object")
            if ob is None:
                continue
            if bone and arm_obj.pose.bones.get(bone) is not None:
                ids.append(len(colliders))
                radius = float(np.float32(ob.empty_display_size * np.abs(np.array(ob.scale)).mean()))
                colliders.append(ColliderSpec(node=node_of_bone(bone), kind=SPHERE, radius=radius,
                                              offset=tuple(_local(arm_obj, bone, ob.matrix_world)[:3, 3])))
        groups[uuid] = ids
    bones = arm_obj.data.bones
    assigned, springs = set(), []
    for bg in idprop(sa, "bone_groups", []):
        roots = []
        for ref in idprop(bg, "bones", []):
            b = bones.get(_bone_name(ref, by_uuid) or "")
            if b is None or b.name in assigned:
                continue
            t = b
            while t is not None and t not in roots:
                t = t.parent
            if t is not None:
                continue
            kids = list(b.children)
            while kids:
                k = kids.pop()
                if k in roots:
                    roots.remove(k)
                kids.extend(k.children)
            roots.append(b)
        chains, starts = [], deque(roots)
        while starts:
            b = starts.popleft()
            chain, kids = [b.name], deque(b.children)
            while kids:
                first = kids.popleft()
                chain.append(first.name)
                starts.extend(kids)
                kids = deque(first.children)
            chains.append(chain)
        assigned.update(n for c in chains for n in c)
        center = _bone_name(idprop(bg, "center"), by_uuid)
        cols = [i for g in idprop(bg, "collider_groups", []) for i in groups.get(str(idprop(g, "collider_group_uuid", "")), [])]
        gdir = tuple(float(x) for x in idprop(bg, "gravity_dir", (0.0, 0.0, 0.0)))
        for chain in chains:
            joints = [JointSpec(node=node_of_bone(n), stiffness=float(idprop(bg, "stiffiness", 0.0)),
                                drag_force=float(idprop(bg, "drag_force", 0.0)),
                                gravity_power=float(idprop(bg, "gravity_power", 0.0)), gravity_dir=gdir,
                                hit_radius=float(idprop(bg, "hit_radius", 0.0))) for n in chain]
            springs.append(SpringSpec(name=str(idprop(bg, "comment", "")) or "Spring", joints=joints, colliders=cols,
                                      center_node=node_of_bone(center) if center else -1))
    return springs, colliders


def _bone_by_uuid(arm_obj) -> dict:
    out = {}
    for b in arm_obj.data.bones:
        e = extension_props(b)
        u = idprop(e, "uuid", "") if e is not None else ""
        if u:
            out[str(u)] = b.name
    return out


def _bone_name(node_group, by_uuid) -> str:
    if node_group is None:
        return ""
    return by_uuid.get(str(idprop(node_group, "bone_uuid", "")), "")


def _local(arm_obj, bone_name: str, world) -> np.ndarray:
    """pose_bone.matrix^-1 @ arm.matrix_world^-1 @ world (the add-on's offset getter)."""
    m = np.array(arm_obj.matrix_world, np.float64)
    pb = arm_obj.pose.bones.get(bone_name) if bone_name else None
    if pb is not None:
        m = m @ np.array(pb.matrix, np.float64)
    return affine_inv(m) @ np.array(world, np.float64)     # never raises for a 0-scaled armature


def _read_collider(arm_obj, col, by_uuid, node_of_bone, warn) -> Optional[ColliderSpec]:
    bone = _bone_name(idprop(col, "node"), by_uuid)
    if not bone or arm_obj.pose.bones.get(bone) is None:
        return None
    ob = idprop(col, "bpy_object")
    kind = CAPSULE if int(idprop(col, "shape_type", 0)) == 1 else SPHERE
    ext = idprop(idprop(col, "extensions", {}), "vrmc_spring_bone_extended_collider", {})
    shape = idprop(ext, "shape", {})
    if bool(idprop(ext, "enabled", False)):
        et = int(idprop(ext, "shape_type", 0))
        if et == 0:
            kind = INSIDE_SPHERE if bool(idprop(idprop(shape, "sphere", {}), "inside", False)) else SPHERE
        elif et == 1:
            kind = INSIDE_CAPSULE if bool(idprop(idprop(shape, "capsule", {}), "inside", False)) else CAPSULE
        else:
            kind = PLANE
    if ob is None:
        warn(f"spring collider on bone '{bone}' of '{arm_obj.name}' has no Empty: radius 0 at the bone")
        return ColliderSpec(node=node_of_bone(bone), kind=kind)
    offset = _local(arm_obj, bone, ob.matrix_world)[:3, 3]
    tail = np.zeros(3)
    if ob.children:
        tail = _local(arm_obj, bone, ob.children[0].matrix_world)[:3, 3]
    scale = np.abs(np.array(ob.matrix_basis.to_scale(), np.float64))
    radius = float(np.float32(scale.mean() * ob.empty_display_size))
    normal = (0.0, 1.0, 0.0)
    if kind == PLANE:
        try:
            from mathutils import Vector

            if ob.rotation_mode == "QUATERNION":
                q = ob.rotation_quaternion.copy()
            elif ob.rotation_mode == "AXIS_ANGLE":
                from mathutils import Quaternion

                a = ob.rotation_axis_angle
                q = Quaternion((a[1], a[2], a[3]), a[0])
            else:
                q = ob.rotation_euler.to_quaternion()
            normal = tuple(q @ Vector((0.0, 1.0, 0.0)))
        except Exception:
            pass
    return ColliderSpec(node=node_of_bone(bone), kind=kind, offset=tuple(offset), tail=tuple(tail),
                        radius=radius, normal=normal)


def read_character(arm_obj, node_of_bone: Callable[[str], int], armature_node: int,
                   warn: Callable[[str], None] = lambda m: None) -> Optional[CharacterSpec]:
    """The springs of one armature object as a bpy-free CharacterSpec (nodes via ``node_of_bone``);
    None when it has none.  Problems (a joint whose bone is missing...) go to ``warn``."""
    sb = spring_data(arm_obj)
    sa = vrm0_data(arm_obj) if sb is None or not len(idprop(sb, "springs", [])) else None
    if sb is None and sa is None:
        return None
    by_uuid = _bone_by_uuid(arm_obj)
    if sa is not None:
        springs, colliders = _vrm0_springs(arm_obj, sa, by_uuid, node_of_bone)
        return _character(arm_obj, node_of_bone, armature_node, springs, colliders)
    colliders: List[ColliderSpec] = []
    col_index = {}
    for col in idprop(sb, "colliders", []):
        uuid = str(idprop(col, "uuid", ""))
        if not uuid:
            continue
        spec = _read_collider(arm_obj, col, by_uuid, node_of_bone, warn)
        if spec is None:
            continue
        col_index[uuid] = len(colliders)
        colliders.append(spec)
    groups = {}
    for grp in idprop(sb, "collider_groups", []):
        ids = [col_index[str(idprop(c, "collider_uuid", ""))] for c in idprop(grp, "colliders", [])
               if str(idprop(c, "collider_uuid", "")) in col_index]
        if ids:
            groups[str(idprop(grp, "uuid", ""))] = ids
    springs: List[SpringSpec] = []
    for i, sp in enumerate(idprop(sb, "springs", [])):
        name = str(idprop(sp, "vrm_name", "")) or f"spring {i}"
        joints = []
        for j in idprop(sp, "joints", []):
            bone = _bone_name(idprop(j, "node"), by_uuid)
            node = node_of_bone(bone) if bone else -1
            if node < 0:
                warn(f"spring '{name}' of '{arm_obj.name}': a joint names no bone of the armature (skipped)")
            joints.append(JointSpec(node=node, stiffness=float(idprop(j, "stiffness", 1.0)),
                                    drag_force=float(idprop(j, "drag_force", 0.5)),
                                    gravity_power=float(idprop(j, "gravity_power", 0.0)),
                                    gravity_dir=tuple(float(x) for x in idprop(j, "gravity_dir", (0.0, 0.0, -1.0))),
                                    hit_radius=float(idprop(j, "hit_radius", 0.0))))
        cols = []
        for g in idprop(sp, "collider_groups", []):
            cols += groups.get(str(idprop(g, "collider_group_uuid", "")), [])
        center = _bone_name(idprop(sp, "center"), by_uuid)
        springs.append(SpringSpec(name=name, joints=joints, colliders=cols,
                                  center_node=node_of_bone(center) if center else -1))
    return _character(arm_obj, node_of_bone, armature_node, springs, colliders)


def _character(arm_obj, node_of_bone, armature_node, springs, colliders) -> CharacterSpec:
    rest, parent, inherit = {}, {}, {}
    for b in arm_obj.data.bones:
        n = node_of_bone(b.name)
        if n < 0:
            continue
        rest[n] = np.array(b.matrix_local, np.float64)
        parent[n] = node_of_bone(b.parent.name) if b.parent is not None else -1
        inherit[n] = bool(b.use_inherit_rotation)
    return CharacterSpec(armature_node=armature_node, springs=springs, colliders=colliders, rest=rest,
                         parent=parent, inherit_rotation=inherit)


def standalone_nodes(arm_obj) -> Tuple[Callable[[str], int], int]:
    """Node numbering without a ScenePose: bone k of arm.data.bones -> k, the armature -> len(bones)."""
    idx = {b.name: i for i, b in enumerate(arm_obj.data.bones)}
    return (lambda name: idx.get(name, -1)), len(idx)
