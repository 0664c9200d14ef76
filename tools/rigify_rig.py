"""Generated rigs that only Blender can evaluate (constraints, IK, drivers, B-Bones), shared by
tests/test_bake.py, tests/test_bake_rigify.py and tools/bench_bake.py.

build_constraint_rig(): a small armature whose deform bones follow keyed controls through an IK
    constraint, a Copy Rotation constraint and a driver; a tube mesh weighted to the deform bones.
build_rigify(): a Rigify character as a new user makes one: the bundled ``rigify`` add-on's human
    metarig, ``pose.rigify_generate`` (generate_rigify(), the slow step), a body of tubes around the DEF bones weighted (up to 3 bones a
    vertex, B-Bones included) by distance, an action keyed on a few FK/IK controls.
"""
from __future__ import annotations

import math

import bpy
import numpy as np

from tools import scenes

FRAMES = (1, 4, 7, 10)


def _tubes(segments, radius_scale=0.18, rings=4, sides=6, min_radius=0.01):
    """Tubes around (head, tail) segments: (verts (V,3), quads (Q,4))."""
    verts, quads = [], []
    off = 0
    ang = np.linspace(0.0, 2.0 * math.pi, sides, endpoint=False)
    for head, tail in segments:
        h, t = np.asarray(head, np.float64), np.asarray(tail, np.float64)
        axis = t - h
        length = float(np.linalg.norm(axis))
        if length < 1e-6:
            continue
        d = axis / length
        ref = np.array([0.0, 0.0, 1.0]) if abs(d[2]) < 0.9 else np.array([1.0, 0.0, 0.0])
        u = np.cross(d, ref)
        u /= np.linalg.norm(u)
        v = np.cross(d, u)
        r = max(min_radius, radius_scale * length)
        s = np.linspace(0.05, 0.95, rings)
        ring = np.cos(ang)[:, None] * u + np.sin(ang)[:, None] * v
        pts = h + s[:, None, None] * axis + r * ring[None]
        verts.append(pts.reshape(-1, 3))
        i = np.arange(rings * sides).reshape(rings, sides) + off
        j = np.roll(i, -1, axis=1)
        quads.append(np.stack([i[:-1], j[:-1], j[1:], i[1:]], axis=-1).reshape(-1, 4))
        off += rings * sides
    return np.concatenate(verts), np.concatenate(quads)


def _distance_weights(verts, heads, tails, per_vertex=3):
    """Weights of each vertex to its ``per_vertex`` nearest segments, ~1/d^2, normalised, rounded:
    {segment index: (vertex indices, weights)} (vectorised)."""
    p = verts[:, None, :]
    a, b = heads[None], tails[None]
    ab = b - a
    t = np.clip(np.einsum("vbi,vbi->vb", p - a, np.broadcast_to(ab, (verts.shape[0],) + ab.shape[1:]))
                / np.maximum(np.einsum("bi,bi->b", ab[0], ab[0]), 1e-12)[None], 0.0, 1.0)
    d = np.linalg.norm(p - (a + t[..., None] * ab), axis=2)
    k = min(per_vertex, heads.shape[0])
    near = np.argsort(d, axis=1)[:, :k]
    w = 1.0 / (np.take_along_axis(d, near, axis=1) ** 2 + 1e-4)
    w /= w.sum(axis=1, keepdims=True)
    w = np.round(w, 3)
    w[w < 0.02] = 0.0
    out = {}
    for b_ in np.unique(near):
        rows, cols = np.nonzero((near == b_) & (w > 0.0))
        if rows.size:
            out[int(b_)] = (rows, w[rows, cols])
    return out


def _skin_by_distance(name, arm, bone_names, per_vertex=3, **tube_args):
    """A mesh of tubes around ``bone_names`` (armature space = world: the armature at the
    origin), skinned to them by distance."""
    bones = arm.data.bones
    mw = np.array(arm.matrix_world)
    heads = np.array([mw[:3, :3] @ np.array(bones[n].head_local) + mw[:3, 3] for n in bone_names])
    tails = np.array([mw[:3, :3] @ np.array(bones[n].tail_local) + mw[:3, 3] for n in bone_names])
    verts, quads = _tubes(list(zip(heads, tails)), **tube_args)
    ob = scenes.make_mesh(name, verts, quads)
    wb = {bone_names[k]: v for k, v in _distance_weights(verts, heads, tails, per_vertex).items()}
    scenes.skin_to(ob, arm, wb)
    return ob


def _key_rotation(pb, euler, frame):
    from mathutils import Euler

    e = Euler(euler, "XYZ")
    if pb.rotation_mode == "QUATERNION":
        pb.rotation_quaternion = e.to_quaternion()
        pb.keyframe_insert("rotation_quaternion", frame=frame)
    elif pb.rotation_mode == "AXIS_ANGLE":
        q = e.to_quaternion()
        axis, angle = q.to_axis_angle()
        pb.rotation_axis_angle = (angle, *axis)
        pb.keyframe_insert("rotation_axis_angle", frame=frame)
    else:
        pb.rotation_euler = e.to_quaternion().to_euler(pb.rotation_mode)
        pb.keyframe_insert("rotation_euler", frame=frame)


# ------------------------------------------------------------------------------------------------
# a small rig: IK + Copy Rotation + a driver
# ------------------------------------------------------------------------------------------------

def build_constraint_rig(scene=None, frames=FRAMES):
    """Deform bones ``upper``/``lower`` (IK to the keyed ``ik_target``, pole ``pole``),
    ``arm2`` (Copy Rotation of the keyed ``ctrl``, influence 0.7) and ``tail`` (rotation X driven
    by ``ctrl``'s X location), a tube mesh weighted to them; action 'RigAction' keys the controls
    at ``frames``.  Returns (armature, mesh, action)."""
    arm = scenes.make_armature("CRig", [
        ("root", None, (0, 0, 0), (0, 0, 0.5)),
        ("upper", "root", (0, 0, 0.5), (0, 0.1, 1.5)),
        ("lower", "upper", (0, 0.1, 1.5), (0, 0, 2.5)),
        ("arm2", "root", (0.8, 0, 0.5), (0.8, 0, 1.5)),
        ("tail", "root", (-0.8, 0, 0.5), (-0.8, 0, 1.5)),
        ("ik_target", None, (0, 0.6, 2.3), (0, 0.6, 2.7), False),
        ("pole", None, (0, 1.5, 1.5), (0, 1.5, 1.8), False),
        ("ctrl", None, (1.5, 0, 0), (1.5, 0, 0.5), False),
    ], scene)
    pb = arm.pose.bones
    ik = pb["lower"].constraints.new("IK")
    ik.target, ik.subtarget, ik.chain_count = arm, "ik_target", 2
    ik.pole_target, ik.pole_subtarget = arm, "pole"
    cr = pb["arm2"].constraints.new("COPY_ROTATION")
    cr.target, cr.subtarget, cr.influence = arm, "ctrl", 0.7
    pb["tail"].rotation_mode = "XYZ"
    fc = pb["tail"].driver_add("rotation_euler", 0)
    drv = fc.driver
    drv.type = "SCRIPTED"
    var = drv.variables.new()
    var.name, var.type = "x", "TRANSFORMS"
    var.targets[0].id = arm
    var.targets[0].bone_target = "ctrl"
    var.targets[0].transform_type = "LOC_X"
    var.targets[0].transform_space = "LOCAL_SPACE"
    drv.expression = "x * 1.5"
    ob = _skin_by_distance("CBody", arm, ["root", "upper", "lower", "arm2", "tail"], per_vertex=2,
                           radius_scale=0.15, rings=5, sides=6)
    pb["ctrl"].rotation_mode = "XYZ"
    poses = [((0.0, 0.6, 2.3), (0.0, 0.0, 0.0), 0.0), ((0.3, 0.9, 1.9), (0.4, 0.2, 0.1), 0.3),
             ((-0.2, 1.0, 1.6), (-0.3, 0.5, 0.6), -0.2), ((0.1, 0.4, 2.0), (0.8, -0.4, 0.2), 0.5)]
    rest_ik = np.array(arm.data.bones["ik_target"].head_local)
    for f, (ikp, rot, x) in zip(frames, poses):
        pb["ik_target"].location = tuple(np.array(ikp) - rest_ik)   # bone-local = world offset (no roll)
        pb["ik_target"].keyframe_insert("location", frame=f)
        pb["ctrl"].rotation_euler = rot
        pb["ctrl"].keyframe_insert("rotation_euler", frame=f)
        pb["ctrl"].location = (x, 0.0, 0.0)
        pb["ctrl"].keyframe_insert("location", frame=f)
    action = arm.animation_data.action
    action.name = "RigAction"
    sc = scene or bpy.context.scene
    sc.frame_start, sc.frame_end = frames[0], frames[-1]
    sc.frame_set(frames[0])
    scenes.finish()
    return arm, ob, action


# ------------------------------------------------------------------------------------------------
# the Rigify character
# ------------------------------------------------------------------------------------------------

def enable_rigify():
    import addon_utils

    mod = addon_utils.enable("rigify", default_set=True)
    if mod is None and not hasattr(bpy.ops.pose, "rigify_generate"):
        raise RuntimeError("the bundled 'rigify' add-on could not be enabled")
    return mod


RIGIFY_KEYS = {
    # control: [(frame, kind, value)]
    "torso": [("location", (0.0, 0.0, 0.0)), ("location", (0.05, 0.0, -0.08)), ("location", (-0.04, 0.03, -0.02)),
              ("location", (0.0, -0.02, 0.05))],
    "chest": [("rotation", (0.0, 0.0, 0.0)), ("rotation", (0.25, 0.1, 0.0)), ("rotation", (-0.1, -0.2, 0.15)),
              ("rotation", (0.3, 0.0, -0.2))],
    "head": [("rotation", (0.0, 0.0, 0.0)), ("rotation", (0.3, 0.0, 0.2)), ("rotation", (-0.2, 0.3, 0.0)),
             ("rotation", (0.1, -0.3, -0.1))],
    "upper_arm_fk.L": [("rotation", (0.0, 0.0, 0.0)), ("rotation", (0.6, 0.2, -0.4)),
                       ("rotation", (-0.4, 0.0, 0.7)), ("rotation", (0.9, -0.3, 0.2))],
    "forearm_fk.L": [("rotation", (0.0, 0.0, 0.0)), ("rotation", (0.8, 0.0, 0.0)), ("rotation", (0.2, 0.0, 0.0)),
                     ("rotation", (1.2, 0.0, 0.0))],
    "hand_ik.R": [("location", (0.0, 0.0, 0.0)), ("location", (0.1, -0.15, 0.25)),
                  ("location", (-0.12, 0.1, 0.35)), ("location", (0.05, -0.2, 0.1))],
    "foot_ik.L": [("location", (0.0, 0.0, 0.0)), ("location", (0.0, -0.15, 0.2)), ("location", (0.05, 0.1, 0.05)),
                  ("location", (0.0, 0.0, 0.3))],
    "thigh_fk.R": [("rotation", (0.0, 0.0, 0.0)), ("rotation", (0.4, 0.0, 0.1)), ("rotation", (-0.3, 0.1, 0.0)),
                   ("rotation", (0.6, 0.0, -0.1))],
}


def generate_rigify():
    """The bundled add-on's human metarig generated in the current scene (``pose.rigify_generate``,
    the slow step: seconds), its metarig and widget objects removed: the rig ("rig")."""
    enable_rigify()
    bpy.ops.object.armature_human_metarig_add()
    meta = bpy.context.view_layer.objects.active
    bpy.ops.pose.rigify_generate()
    rig = getattr(meta.data, "rigify_target_rig", None) or next(
        o for o in bpy.data.objects if o.type == "ARMATURE" and o is not meta)
    for ob in [o for o in bpy.data.objects if o.name.startswith("WGT-")]:
        bpy.data.objects.remove(ob)
    for coll in [c for c in bpy.data.collections if c.name.startswith("WGTS")]:
        bpy.data.collections.remove(coll)
    bpy.data.objects.remove(meta)
    bpy.context.view_layer.objects.active = rig
    return rig


def build_rigify(scene=None, frames=FRAMES, face: bool = True, rings: int = 3, sides: int = 5,
                 per_vertex: int = 5, rig=None):
    """A generated Rigify character: (rig, body mesh, action).  The metarig and the widget
    objects are removed (the user's scene keeps only the rig and the body).  ``face``: the DEF
    bones of the face get tubes too.  ``per_vertex``: DEF bones weighting each vertex (5, most of
    them B-Bones: up to 10 palette influences a vertex, as automatic weights give).
    The left arm is set to FK and the right leg to FK (``IK_FK`` = 1) as unkeyed pose values;
    the right arm and the left leg stay IK.  ``rings`` x ``sides`` vertices per DEF bone (160 DEF
    bones with the face, 73 without: 3 x 5 gives 2.4k / 1.1k vertices).  ``rig``: a rig
    generate_rigify() made (e.g. once per test run, saved and opened again) instead of a new one."""
    sc = scene or bpy.context.scene
    rig = rig or generate_rigify()
    bpy.context.view_layer.objects.active = rig
    face_roots = ("DEF-brow", "DEF-cheek", "DEF-chin", "DEF-ear", "DEF-eye", "DEF-forehead", "DEF-jaw",
                  "DEF-lid", "DEF-lip", "DEF-nose", "DEF-temple", "DEF-tongue", "DEF-teeth", "DEF-tongue")
    deform = [b.name for b in rig.data.bones if b.use_deform and (face or not b.name.startswith(face_roots))]
    body = _skin_by_distance("RigifyBody", rig, deform, per_vertex=per_vertex, radius_scale=0.2, rings=rings,
                             sides=sides)
    pb = rig.pose.bones
    for ctrl, side in (("upper_arm_parent.L", 1.0), ("thigh_parent.R", 1.0)):
        if ctrl in pb and "IK_FK" in pb[ctrl].keys():
            pb[ctrl]["IK_FK"] = side
    base = {name: (tuple(pb[name].location),) for name in RIGIFY_KEYS if name in pb}
    for name, keys in RIGIFY_KEYS.items():
        if name not in pb:
            raise RuntimeError(f"Rigify control '{name}' is missing from the generated rig")
        for f, (kind, value) in zip(frames, keys):
            if kind == "location":
                pb[name].location = tuple(np.array(base[name][0]) + np.array(value))
                pb[name].keyframe_insert("location", frame=f)
            else:
                _key_rotation(pb[name], value, f)
    action = rig.animation_data.action
    action.name = "RigifyAction"
    sc.frame_start, sc.frame_end = frames[0], frames[-1]
    sc.frame_set(frames[0])
    scenes.finish()
    return rig, body, action
