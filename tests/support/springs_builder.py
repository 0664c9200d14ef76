"""Generated VRM 1.0 avatars with spring bones for the spring tests (needs the VRM Add-on enabled
to author the data; the saved file is then read with or without it).

``build_avatar``: an armature (hips, spine, neck, head, legs) with long hair chains hanging from the
head (sphere collider on the head) and a skirt of chains around the hips with capsule colliders on
both thighs; gravity on every joint; the first hair spring lists its joints tip first (the add-on
sorts them: the 'wrong joint order' control does not).  A head shake / hips sway action "Shake".
"""
from __future__ import annotations

import math

import bpy
from mathutils import Vector


def _bone(eb, name, head, tail, parent=None, connect=False):
    b = eb.new(name)
    b.head, b.tail = Vector(head), Vector(tail)
    if parent is not None:
        b.parent = eb[parent]
        b.use_connect = connect
    return b


def _chain(eb, prefix, parent, a, z, r, out, down, length):
    """A chain of ``length + 1`` connected bones ``<prefix>_<k>`` hanging from ``parent``: it starts
    ``r`` out from (0, 0, z) at angle ``a`` and each bone steps ``out`` further and ``down``."""
    d = Vector((math.cos(a), math.sin(a), 0.0))
    p = Vector((0, 0, z)) + d * r
    chain = []
    for k in range(length + 1):
        q = p + d * out + Vector((0, 0, down))
        nm = f"{prefix}_{k}"
        _bone(eb, nm, p, q, parent, k > 0)
        chain.append(nm)
        parent, p = nm, q
    return chain


def build_avatar(name="Avatar", hair_chains=6, hair_len=8, skirt_chains=8, skirt_len=4,
                 gravity=0.3, location=(0.0, 0.0, 0.0)):
    ctx = bpy.context
    data = bpy.data.armatures.new(name)
    arm = bpy.data.objects.new(name, data)
    arm.location = location
    ctx.scene.collection.objects.link(arm)
    ctx.view_layer.objects.active = arm
    bpy.ops.object.mode_set(mode="EDIT")
    eb = data.edit_bones
    _bone(eb, "hips", (0, 0, 0.9), (0, 0, 1.0))
    _bone(eb, "spine", (0, 0, 1.0), (0, 0, 1.3), "hips", True)
    _bone(eb, "neck", (0, 0, 1.3), (0, 0, 1.45), "spine", True)
    _bone(eb, "head", (0, 0, 1.45), (0, 0, 1.65), "neck", True)
    for s, x in (("L", 0.1), ("R", -0.1)):
        _bone(eb, f"thigh_{s}", (x, 0, 0.9), (x, 0, 0.5), "hips")
        _bone(eb, f"shin_{s}", (x, 0, 0.5), (x, 0, 0.1), f"thigh_{s}", True)
    hair = [_chain(eb, f"hair{c}", "head", math.pi * (0.2 + 0.6 * c / max(hair_chains - 1, 1)),   # behind and beside the head
                   1.6, 0.1, 0.02, -0.07, hair_len) for c in range(hair_chains)]
    skirt = [_chain(eb, f"skirt{c}", "hips", 2 * math.pi * c / skirt_chains, 0.92, 0.16, 0.03, -0.09, skirt_len)
             for c in range(skirt_chains)]
    bpy.ops.object.mode_set(mode="OBJECT")
    ext = data.vrm_addon_extension
    ext.spec_version = "1.0"
    sb = ext.spring_bone1

    def collider(bone, capsule, radius, offset, tail=(0, 0, 0)):
        col = sb.add_collider(ctx, arm)
        col.node.bone_name = bone
        if capsule:
            col.shape_type = "Capsule"
            col.shape.capsule.radius = radius
            col.shape.capsule.offset = offset
            col.shape.capsule.tail = tail
        else:
            col.shape.sphere.radius = radius
            col.shape.sphere.offset = offset
        return col

    head_c = collider("head", False, 0.11, (0, 0.1, 0))
    legs = [collider(f"thigh_{s}", True, 0.08, (0, 0, 0), (0, 0.4, 0)) for s in ("L", "R")]
    groups = []
    for cols, nm in (([head_c], "head"), (legs, "legs")):
        g = sb.add_collider_group()
        g.vrm_name = nm
        for col in cols:
            g.add_collider().collider_uuid = col.uuid
        groups.append(g)

    def spring(chain, group, stiffness, drag, grav, reverse=False):
        sp = sb.add_spring()
        sp.vrm_name = chain[0]
        for nm in (chain[::-1] if reverse else chain):
            j = sp.add_joint()
            j.node.bone_name = nm
            j.stiffness, j.drag_force, j.gravity_power, j.hit_radius = stiffness, drag, grav, 0.02
        sp.add_collider_group().collider_group_uuid = group.uuid
        return sp

    for i, chain in enumerate(hair):
        spring(chain, groups[0], 0.8, 0.3, gravity, reverse=(i == 0))
    for chain in skirt:
        spring(chain, groups[1], 1.5, 0.4, gravity * 1.5)
    return arm


def add_shake_action(arm, frames=48, yaw_deg=40.0):
    """A clip that yaws the head and sways the hips (keyed, so the preview can play it)."""
    from mathutils import Quaternion

    for nm in ("head", "hips"):
        arm.pose.bones[nm].rotation_mode = "QUATERNION"
    for f in range(1, frames + 1, 2):
        yaw = math.radians(yaw_deg) * math.sin(2 * math.pi * f / 24.0)
        hb, hp = arm.pose.bones["head"], arm.pose.bones["hips"]
        hb.rotation_quaternion = Quaternion((0, 0, 1), yaw)
        hp.rotation_quaternion = Quaternion((0, 0, 1), 0.5 * yaw)
        hp.location = (0.0, 0.1 * math.sin(2 * math.pi * f / 24.0), 0.0)
        hb.keyframe_insert("rotation_quaternion", frame=f)
        hp.keyframe_insert("rotation_quaternion", frame=f)
        hp.keyframe_insert("location", frame=f)
    arm.animation_data.action.name = "Shake"
    return arm.animation_data.action


def add_bone_boxes(arm, size=0.035):
    """One mesh object: a small box at the middle of every bone, weighted fully to that bone."""
    import bmesh

    me = bpy.data.meshes.new(arm.name + "_boxes")
    ob = bpy.data.objects.new(arm.name + "_boxes", me)
    bpy.context.scene.collection.objects.link(ob)
    bm = bmesh.new()
    groups = []
    for b in arm.data.bones:
        c = (b.head_local + b.tail_local) * 0.5
        res = bmesh.ops.create_cube(bm, size=size)
        for v in res["verts"]:
            v.co += c
        groups.append((b.name, [v.index for v in res["verts"]] if False else res["verts"]))
    bm.verts.index_update()
    idx = [(name, [v.index for v in vs]) for name, vs in groups]
    bm.to_mesh(me)
    bm.free()
    for name, vs in idx:
        ob.vertex_groups.new(name=name).add(vs, 1.0, "REPLACE")
    ob.parent = arm
    ob.modifiers.new("Armature", "ARMATURE").object = arm
    return ob
