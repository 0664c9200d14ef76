"""Deterministic bpy scene generators shared by tests and benchmarks.

Everything is created in the current scene through bpy.data (armature bones need edit mode,
entered with ``object.mode_set``, which works headless without a window).
"""
from __future__ import annotations

import math

import bpy
import numpy as np

ROTATION_MODES = ("QUATERNION", "XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX", "AXIS_ANGLE")


def _scene(scene=None):
    return scene or bpy.context.scene


def link(obj, scene=None):
    _scene(scene).collection.objects.link(obj)
    return obj


def finish():
    """Sync the view layer (its object list is lazily rebuilt) and evaluate once."""
    bpy.context.view_layer.update()


def make_armature(name, bones, scene=None, location=(0, 0, 0)):
    """bones: list of (name, parent_name_or_None, head, tail[, use_deform]). Returns the object."""
    arm = bpy.data.armatures.new(name)
    ob = link(bpy.data.objects.new(name, arm), scene)
    ob.location = location
    vl = bpy.context.view_layer
    prev = vl.objects.active
    vl.objects.active = ob
    bpy.ops.object.mode_set(mode="EDIT")
    try:
        eb = arm.edit_bones
        for spec in bones:
            bname, parent, head, tail = spec[:4]
            b = eb.new(bname)
            b.head, b.tail = head, tail
            if parent is not None:
                b.parent = eb[parent]
            if len(spec) > 4:
                b.use_deform = spec[4]
    finally:
        bpy.ops.object.mode_set(mode="OBJECT")
        vl.objects.active = prev
    return ob


def make_mesh(name, verts, faces, scene=None, uv=None, material_indices=None, materials=()):
    me = bpy.data.meshes.new(name)
    me.from_pydata(np.asarray(verts, np.float64).tolist() if not isinstance(verts, list) else verts, [],
                   np.asarray(faces).tolist() if not isinstance(faces, list) else faces)
    for mname in materials:
        me.materials.append(bpy.data.materials.get(mname) or bpy.data.materials.new(mname))
    if material_indices is not None:
        me.polygons.foreach_set("material_index", np.asarray(material_indices, np.int32))
    if uv is not None:
        layer = me.uv_layers.new(name="UVMap")
        layer.uv.foreach_set("vector", np.asarray(uv, np.float32).ravel())
    me.update()
    ob = link(bpy.data.objects.new(name, me), scene)
    return ob


def grid(nx, ny, size=(2.0, 2.0), origin=(-1.0, 0.0, 0.0)):
    """Grid in the XZ plane: (verts (nx*ny,3), quads, per-corner uvs)."""
    xs = np.linspace(0, size[0], nx) + origin[0]
    zs = np.linspace(0, size[1], ny) + origin[2]
    X, Z = np.meshgrid(xs, zs, indexing="xy")
    verts = np.stack([X.ravel(), np.full(X.size, origin[1]), Z.ravel()], axis=1)
    i = np.arange(nx * ny).reshape(ny, nx)
    quads = np.stack([i[:-1, :-1], i[:-1, 1:], i[1:, 1:], i[1:, :-1]], axis=-1).reshape(-1, 4)
    vuv = np.stack([(X.ravel() - xs[0]) / size[0], (Z.ravel() - zs[0]) / size[1]], axis=1)
    return verts, quads, vuv[quads.ravel()]


def skin_to(obj, arm, weights_by_bone=None):
    """Add an Armature modifier (and parent to the armature). weights_by_bone: {bone: (verts, weights)}."""
    md = obj.modifiers.new("Armature", "ARMATURE")
    md.object = arm
    obj.parent = arm
    for bone, (vs, ws) in (weights_by_bone or {}).items():
        vg = obj.vertex_groups.get(bone) or obj.vertex_groups.new(name=bone)
        ws = np.broadcast_to(np.asarray(ws, np.float64), (len(vs),))
        for w in np.unique(ws):
            sel = np.asarray(vs)[ws == w]
            vg.add([int(v) for v in sel], float(w), "REPLACE")
    return md


def new_action(name, owner, id_type="OBJECT", assign=True):
    """A slotted action with one layer/strip; returns (action, channelbag)."""
    act = bpy.data.actions.new(name)
    slot = act.slots.new(id_type=id_type, name=owner.name)
    layer = act.layers.new("Layer")
    strip = layer.strips.new(type="KEYFRAME")
    cb = strip.channelbag(slot, ensure=True)
    if assign:
        ad = owner.animation_data or owner.animation_data_create()
        ad.action = act
        ad.action_slot = slot
    return act, cb


def add_curve(cb, data_path, index, frames, values, interpolation=None):
    fc = cb.fcurves.new(data_path, index=index)
    n = len(frames)
    fc.keyframe_points.add(n)
    co = np.stack([np.asarray(frames, np.float64), np.asarray(values, np.float64)], axis=1)
    fc.keyframe_points.foreach_set("co", co.ravel())
    if interpolation:
        for k in fc.keyframe_points:
            k.interpolation = interpolation
    fc.update()
    return fc


# ----------------------------------------------------------------------------------------------
# the heavy rig (benchmark)
# ----------------------------------------------------------------------------------------------

def build_heavy_rig(bones=365, vertices=50000, shape_keys=50, actions=3, frames=100, influences=4,
                    scene=None, seed=0, keyed_expressions=0, resting_expressions=False):
    """``keyed_expressions``: key the values of that many shape keys over ``frames`` (an avatar
    talking: Blender re-evaluates the mesh on every frame, so a final render checks it).
    ``resting_expressions``: every shape key's value 0 (a real avatar's expressions rest at 0; the
    keyed ones follow their curves); else as ``shape_key_add`` leaves them (1.0 on Blender 5.x,
    0.0 on 4.5)."""
    rng = np.random.default_rng(seed)
    depth = 19
    specs = []
    heads = []
    # a spine of `depth` bones, then branches of up to depth-2 bones hanging off spine bones
    for i in range(depth):
        h = (0.0, 0.0, i * 0.1)
        specs.append((f"spine{i:02d}", None if i == 0 else f"spine{i - 1:02d}", h, (0.0, 0.0, (i + 1) * 0.1)))
        heads.append(h)
    b = depth
    branch = 0
    while b < bones:
        base = branch % depth
        ang = branch * 2.399963
        d = np.array([math.cos(ang), 0.0, math.sin(ang) * 0.3]) * 0.1
        parent = f"spine{base:02d}"
        p = np.array([0.0, 0.0, base * 0.1 + 0.1])
        for k in range(min(depth - 1, bones - b)):
            nm = f"b{branch:02d}_{k:02d}"
            specs.append((nm, parent, tuple(p), tuple(p + d)))
            heads.append(tuple(p))
            p = p + d
            parent = nm
            b += 1
        branch += 1
    arm = make_armature("HeavyRig", specs, scene)
    n = int(round(math.sqrt(vertices)))
    verts, quads, uv = grid(n, n, size=(2.0, 2.0), origin=(-1.0, 0.0, 0.0))
    mats = (np.arange(len(quads)) % 2).astype(np.int32)
    ob = make_mesh("HeavyBody", verts, quads, scene, uv=uv, material_indices=mats, materials=("BodyA", "BodyB"))
    skin_to(ob, arm)
    # weights: `influences` nearest bone heads, quantised so vertex-group adds stay few
    H = np.array(heads)
    nv = len(verts)
    names = [s[0] for s in specs]
    groups = [ob.vertex_groups.new(name=nm) for nm in names]
    chunk = 4096
    sel_j, sel_w = [], []
    for s in range(0, nv, chunk):
        d = np.linalg.norm(verts[s:s + chunk, None, :] - H[None], axis=2)
        j = np.argsort(d, axis=1)[:, :influences]
        w = 1.0 / (np.take_along_axis(d, j, axis=1) + 0.05)
        w /= w.sum(axis=1, keepdims=True)
        sel_j.append(j)
        sel_w.append(np.round(w * 32) / 32)
    J = np.concatenate(sel_j)
    W = np.concatenate(sel_w)
    vid = np.repeat(np.arange(nv), influences)
    Jf, Wf = J.ravel(), W.ravel()
    keep = Wf > 0
    vid, Jf, Wf = vid[keep], Jf[keep], Wf[keep]
    order = np.lexsort((Wf, Jf))
    vid, Jf, Wf = vid[order], Jf[order], Wf[order]
    key = Jf * 64 + np.round(Wf * 32).astype(np.int64)
    cuts = np.flatnonzero(np.diff(key)) + 1
    for a, e in zip(np.concatenate([[0], cuts]), np.concatenate([cuts, [len(key)]])):
        groups[int(Jf[a])].add(vid[a:e].tolist(), float(Wf[a]), "REPLACE")
    # shape keys, each a bump over a local patch
    if shape_keys:
        ob.shape_key_add(name="Basis", from_mix=False)
        base = verts.astype(np.float64)
        for k in range(shape_keys):
            kb = ob.shape_key_add(name=f"Shape{k:02d}", from_mix=False)
            c = rng.uniform(-0.8, 0.8, 2)
            r2 = (base[:, 0] - c[0]) ** 2 + (base[:, 2] - 1.0 - c[1]) ** 2
            bump = np.exp(-r2 / 0.01)
            bump[bump < 1e-3] = 0.0
            co = base.copy()
            co[:, 1] += bump * 0.1
            kb.data.foreach_set("co", co.astype(np.float32).ravel())
            if resting_expressions:
                kb.value = 0.0
    # actions: every bone's quaternion keyed every 10 frames
    fr = np.arange(0, frames + 1, 10, dtype=np.float64)
    for a in range(actions):
        act, cb = new_action(f"HeavyAction{a}", arm, assign=(a == 0))
        for bi, nm in enumerate(names):
            ang = 0.3 * np.sin(fr * 0.05 * (a + 1) + bi)
            ax = rng.normal(size=3)
            ax /= np.linalg.norm(ax)
            q = np.stack([np.cos(ang / 2), *(ax[:, None] * np.sin(ang / 2)[None])], axis=1)
            for c in range(4):
                add_curve(cb, f'pose.bones["{nm}"].rotation_quaternion', c, fr, q[:, c])
        act.use_fake_user = True
    if shape_keys and keyed_expressions:
        key = ob.data.shape_keys
        kact, kcb = new_action("HeavyExpressions", key, id_type="KEY")
        kf = np.arange(0, frames + 1, 2, dtype=np.float64)
        for k in range(min(keyed_expressions, shape_keys)):
            add_curve(kcb, f'key_blocks["Shape{k:02d}"].value', 0, kf, 0.5 + 0.5 * np.sin(kf * 0.3 + k))
    finish()
    return arm, ob


# ----------------------------------------------------------------------------------------------
# small rigs (tests)
# ----------------------------------------------------------------------------------------------

def build_character(scene=None):
    """Armature (4 bones: Root, Spine, Head, Unused) + Body (two material slots, plus an unused
    slot) + Hat sharing the armature; a Ring object-parented to the skinned Body."""
    arm = make_armature("Rig", [("Root", None, (0, 0, 0), (0, 0, 0.5)),
                                ("Spine", "Root", (0, 0, 0.5), (0, 0, 1.0)),
                                ("Head", "Spine", (0, 0, 1.0), (0, 0, 1.5)),
                                ("Unused", "Root", (0, 0, 0), (0.3, 0, 0)),
                                ("NoDeform", "Root", (0, 0, 0), (-0.3, 0, 0), False)], scene)
    arm.location = (0.5, -0.2, 0.1)
    verts, quads, uv = grid(5, 7, size=(1.0, 1.5), origin=(-0.5, 0.0, 0.0))
    mats = np.where(np.arange(len(quads)) < len(quads) // 2, 0, 1)
    body = make_mesh("Body", verts, quads, scene, uv=uv, material_indices=mats, materials=("Skin", "Cloth", "Spare"))
    z = verts[:, 2]
    w_root = np.clip(1.0 - z / 0.75, 0, 1)
    w_spine = np.clip(1.0 - np.abs(z - 0.75) / 0.75, 0, 1)
    w_head = np.clip((z - 0.75) / 0.75, 0, 1)
    all_v = np.arange(len(verts))
    skin_to(body, arm, {"Root": (all_v, w_root), "Spine": (all_v, w_spine), "Head": (all_v, w_head),
                        "NoDeform": (all_v, np.full(len(verts), 0.5))})
    body.vertex_groups.new(name="Unused")  # group exists but holds no weights
    hv, hq, _ = grid(3, 3, size=(0.4, 0.4), origin=(-0.2, 0.1, 1.2))
    hat = make_mesh("Hat", hv, hq, scene)
    skin_to(hat, arm, {"Head": (np.arange(len(hv)), np.ones(len(hv)))})
    ring = make_mesh("Ring", [(0, 0, 0), (0.1, 0, 0), (0, 0.1, 0)], [(0, 1, 2)], scene)
    ring.parent = body
    ring.location = (0.1, 0.2, 0.3)
    act, cb = new_action("CharacterWave", arm)
    fr = np.array([1.0, 10.0, 20.0])
    for c, vals in enumerate([(1, 0.9, 1), (0, 0.43, 0), (0, 0, 0), (0, 0, 0)]):
        add_curve(cb, 'pose.bones["Spine"].rotation_quaternion', c, fr, vals)
    add_curve(cb, 'pose.bones["Head"].location', 2, fr, (0, 0.2, 0))
    finish()
    return arm, body, hat, ring


def build_many_influences(counts=(1, 5, 6, 8, 9), scene=None):
    """One triangle fan per vertex count: vertex i weighted to counts[i] bones with distinct weights.
    Also a vertex with zero weight and one below Blender's 1e-4 threshold."""
    nb = max(counts)
    arm = make_armature("InfRig", [(f"B{i}", None, (i * 0.1, 0, 0), (i * 0.1, 0, 0.2)) for i in range(nb)], scene)
    nv = len(counts) + 2
    verts = [(i * 0.2, 0.0, 0.0) for i in range(nv)] + [(0.0, 0.0, 1.0)]
    faces = [(i, i + 1, nv) for i in range(nv - 1)]
    ob = make_mesh("InfMesh", verts, faces, scene)
    wb = {}
    for v, c in enumerate(counts):
        for k in range(c):
            wb.setdefault(f"B{k}", ([], []))
            wb[f"B{k}"][0].append(v)
            wb[f"B{k}"][1].append(round(0.9 - 0.1 * k, 3) if k < 8 else round(0.08 / (k - 6), 4))
    wb["B0"][0].append(nv - 1)
    wb["B0"][1].append(0.00005)
    skin_to(ob, arm, {k: (np.array(vw[0]), np.array(vw[1])) for k, vw in wb.items()})
    finish()
    return arm, ob


def build_bone_parented_prop(scene=None):
    """Armature with a rotated/scaled bone chain; a Sword parented to bone 'Hand' (parent_type BONE)."""
    arm = make_armature("PropRig", [("Shoulder", None, (0, 0, 1), (0.4, 0, 1.2)),
                                    ("Hand", "Shoulder", (0.4, 0, 1.2), (0.7, 0.1, 1.0))], scene)
    arm.location = (1.0, 2.0, 0.0)
    arm.rotation_euler = (0.1, 0.2, 0.3)
    arm.scale = (1.0, 1.5, 1.0)
    sword = make_mesh("Sword", [(0, 0, 0), (0.1, 0, 0), (0, 0, 0.8)], [(0, 1, 2)], scene)
    sword.parent = arm
    sword.parent_type = "BONE"
    sword.parent_bone = "Hand"
    from mathutils import Euler, Matrix
    sword.matrix_parent_inverse = (Matrix.Translation((0.1, -0.2, 0.3)) @ Euler((0.3, 0.1, -0.2)).to_matrix().to_4x4())
    sword.location = (0.05, 0.1, 0.0)
    sword.rotation_mode = "YXZ"
    sword.rotation_euler = (0.2, 0.5, -0.1)
    gem = make_mesh("Gem", [(0, 0, 0), (0.05, 0, 0), (0, 0.05, 0)], [(0, 1, 2)], scene)
    gem.parent = sword
    gem.location = (0, 0, 0.7)
    bpy.context.view_layer.update()
    finish()
    return arm, sword, gem


def build_shape_key_mesh(scene=None):
    """Mesh with relative-key chains, a vertex-group mask, wide slider ranges, a muted key, an empty
    name and a Key action."""
    verts, quads, uv = grid(4, 4, size=(1.0, 1.0), origin=(-0.5, 0.0, 0.0))
    ob = make_mesh("Face", verts, quads, scene, uv=uv)
    vg = ob.vertex_groups.new(name="Mask")
    vg.add([0, 1, 2, 3], 0.5, "REPLACE")
    vg.add([4, 5], 1.0, "REPLACE")
    basis = ob.shape_key_add(name="Basis", from_mix=False)
    base = np.array(verts, np.float64)

    def key(name, offset, rel=None):
        kb = ob.shape_key_add(name=name, from_mix=False)
        co = base + np.asarray(offset)
        kb.data.foreach_set("co", co.astype(np.float32).ravel())
        if rel is not None:
            kb.relative_key = rel
        return kb

    a = key("Smile", np.outer(np.linspace(0, 1, len(base)), (0, 0.1, 0)))
    b = key("SmileMore", np.outer(np.linspace(0, 1, len(base)), (0, 0.25, 0.05)), rel=a)   # chain
    m = key("Masked", np.tile((0.0, 0.0, 0.2), (len(base), 1)))
    m.vertex_group = "Mask"
    w = key("Wide", np.tile((0.1, 0.0, 0.0), (len(base), 1)))
    w.slider_min, w.slider_max = -2.0, 3.5
    mu = key("Muted", np.tile((0.0, 0.05, 0.0), (len(base), 1)))
    mu.mute = True
    e = key("", np.tile((0.0, 0.0, -0.05), (len(base), 1)))
    act, cb = new_action("FaceAnim", ob.data.shape_keys, id_type="KEY")
    add_curve(cb, 'key_blocks["Smile"].value', 0, [1, 5, 10], [0.0, 1.0, 0.2])
    add_curve(cb, 'key_blocks["Wide"].value', 0, [1, 10], [-1.0, 2.0])
    finish()
    return ob, basis, (a, b, m, w, mu, e)


def build_driven_shape_keys(scene=None):
    """A mesh whose shape key value is driven by a bone's rotation (no Key action)."""
    arm = make_armature("DriverRig", [("Jaw", None, (0, 0, 0), (0, 0, 0.3))], scene)
    verts, quads, _ = grid(3, 3)
    ob = make_mesh("DrivenFace", verts, quads, scene)
    ob.shape_key_add(name="Basis", from_mix=False)
    kb = ob.shape_key_add(name="Open", from_mix=False)
    co = np.array(verts, np.float32) + np.array([0, 0, -0.1], np.float32)
    kb.data.foreach_set("co", co.ravel())
    fc = kb.driver_add("value")
    drv = fc.driver
    drv.type = "SCRIPTED"
    var = drv.variables.new()
    var.type = "TRANSFORMS"
    var.targets[0].id = arm
    var.targets[0].bone_target = "Jaw"
    var.targets[0].transform_type = "ROT_X"
    drv.expression = var.name
    finish()
    return arm, ob


def build_rotation_modes(scene=None, frames=(1, 7, 13, 20)):
    """One object and one bone per rotation mode, each with an action on its rotation channels."""
    objs = []
    rng = np.random.default_rng(3)
    arm = make_armature("ModeRig", [(f"Bone_{m}", None, (i * 0.3, 0, 0), (i * 0.3, 0, 0.3))
                                    for i, m in enumerate(ROTATION_MODES)], scene)
    for i, m in enumerate(ROTATION_MODES):
        ob = make_mesh(f"Obj_{m}", [(0, 0, 0), (0.1, 0, 0), (0, 0.1, 0)], [(0, 1, 2)], scene)
        ob.location = (i, 1.0, 0.0)
        ob.rotation_mode = m
        act, cb = new_action(f"Rot_{m}", ob)
        fr = np.array(frames, np.float64)
        prop, n = ({"QUATERNION": ("rotation_quaternion", 4), "AXIS_ANGLE": ("rotation_axis_angle", 4)}
                   .get(m, ("rotation_euler", 3)))
        vals = rng.uniform(-2.0, 2.0, (len(fr), n))
        for c in range(n):
            add_curve(cb, prop, c, fr, vals[:, c])
        add_curve(cb, "location", 2, fr, rng.uniform(-1, 1, len(fr)))
        objs.append(ob)
        arm.pose.bones[f"Bone_{m}"].rotation_mode = m
    act, cb = new_action("ModeRigAction", arm)
    fr = np.array(frames, np.float64)
    for m in ROTATION_MODES:
        prop, n = ({"QUATERNION": ("rotation_quaternion", 4), "AXIS_ANGLE": ("rotation_axis_angle", 4)}
                   .get(m, ("rotation_euler", 3)))
        vals = rng.uniform(-2.0, 2.0, (len(fr), n))
        for c in range(n):
            add_curve(cb, f'pose.bones["Bone_{m}"].{prop}', c, fr, vals[:, c])
        add_curve(cb, f'pose.bones["Bone_{m}"].scale', 1, fr, rng.uniform(0.5, 1.5, len(fr)))
    finish()
    return arm, objs


def build_ghost_bone_action(scene=None, constrained: bool = False):
    """``build_character`` whose action keys, besides the rig's bones, bones the armature lacks
    (``Ghost``, ``Head.R``: glTF clips of nodes that became no bone, or renamed bones), also in
    an NLA strip: Blender ignores such channels.  ``constrained``: a Copy Rotation constraint on
    Spine (the preview bakes the rig).  Returns (arm, body, hat, ring)."""
    arm, body, hat, ring = build_character(scene)
    act = arm.animation_data.action
    cb = act.layers[0].strips[0].channelbag(act.slots[0])
    fr = np.array([1.0, 10.0, 20.0])
    add_curve(cb, 'pose.bones["Ghost"].location', 0, fr, (0.0, 2.0, -1.0))
    add_curve(cb, 'pose.bones["Ghost"].rotation_quaternion', 1, fr, (0.0, 0.5, 0.0))
    add_curve(cb, 'pose.bones["Head.R"].scale', 2, fr, (1.0, 3.0, 1.0))
    add_curve(cb, 'pose.bones["Unused"].rotation_quaternion', 3, fr, (0.0, 0.3, 0.0))
    nod, ncb = new_action("GhostNod", arm, assign=False)
    add_curve(ncb, 'pose.bones["Head"].rotation_quaternion', 1, fr, (0.0, 0.4, 0.1))
    add_curve(ncb, 'pose.bones["Ghost"].rotation_euler', 2, fr, (0.0, 1.0, 0.0))
    track = arm.animation_data.nla_tracks.new()
    strip = track.strips.new("nod", 1, nod)
    strip.action_slot = nod.slots[0]
    strip.blend_type = "COMBINE"
    if constrained:
        con = arm.pose.bones["Spine"].constraints.new("COPY_ROTATION")
        con.target, con.subtarget = arm, "Unused"
        con.influence = 0.5
    _scene(scene).frame_start, _scene(scene).frame_end = 1, 20
    finish()
    return arm, body, hat, ring

