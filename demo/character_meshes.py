# SPDX-License-Identifier: GPL-3.0-or-later
"""The demo character's armature and meshes (demo/character.py builds the scene): ``DemoRig``,
``DemoBody`` (tubes along the bone chains), ``DemoFace`` (head, hair, eyes, brows, mouth and the
shape keys ``DEMO_SHAPE_KEYS``), ``DemoWand`` and ``DemoGround``."""

import math

import bpy
from mathutils import Matrix, Vector

from .mesh_parts import MeshBuilder, add_disc, add_ellipsoid, add_tube, link_object, skin_to, smoothstep

DEMO_SHAPE_KEYS = ("blink_L", "blink_R", "smile", "aa", "angry", "surprised")
_ARM_DIR_L = Vector((math.cos(math.radians(-40.0)), 0.0, math.sin(math.radians(-40.0))))


def _bone_table():
    """(name, head, tail, parent) in rest (A-) pose. +X is the character's left."""
    bones = [
        ("root", (0, 0, 0), (0, 0.25, 0), None),
        ("hips", (0, 0, 0.95), (0, 0, 1.05), "root"),
        ("spine", (0, 0, 1.05), (0, 0, 1.22), "hips"),
        ("chest", (0, 0, 1.22), (0, 0, 1.40), "spine"),
        ("neck", (0, 0.005, 1.40), (0, 0.01, 1.50), "chest"),
        ("head", (0, 0.01, 1.50), (0, 0.01, 1.84), "neck"),
    ]
    for side, sx in (("L", 1.0), ("R", -1.0)):
        d = Vector((_ARM_DIR_L.x * sx, 0.0, _ARM_DIR_L.z))
        sh = Vector((0.17 * sx, 0.0, 1.385))
        elbow = sh + d * 0.28
        wrist = elbow + d * 0.25
        hand_tip = wrist + d * 0.15
        bones += [
            (f"shoulder.{side}", (0.03 * sx, 0.0, 1.37), tuple(sh), "chest"),
            (f"upper_arm.{side}", tuple(sh), tuple(elbow), f"shoulder.{side}"),
            (f"forearm.{side}", tuple(elbow), tuple(wrist), f"upper_arm.{side}"),
            (f"hand.{side}", tuple(wrist), tuple(hand_tip), f"forearm.{side}"),
            (f"thigh.{side}", (0.09 * sx, 0.0, 0.93), (0.10 * sx, -0.005, 0.50), "hips"),
            (f"shin.{side}", (0.10 * sx, -0.005, 0.50), (0.10 * sx, 0.01, 0.09), f"thigh.{side}"),
            (f"foot.{side}", (0.10 * sx, 0.01, 0.09), (0.10 * sx, -0.09, 0.03), f"shin.{side}"),
            (f"toe.{side}", (0.10 * sx, -0.09, 0.03), (0.10 * sx, -0.16, 0.03), f"foot.{side}"),
        ]
    return bones


def build_armature(scene):
    data = bpy.data.armatures.new("DemoRig")
    arm = link_object(scene, bpy.data.objects.new("DemoRig", data))
    view_layer = bpy.context.view_layer
    prev_active = view_layer.objects.active
    view_layer.objects.active = arm
    bpy.ops.object.mode_set(mode="EDIT")
    try:
        table = _bone_table()
        ebones = {}
        for name, head, tail, _parent in table:
            eb = data.edit_bones.new(name)
            eb.head = head
            eb.tail = tail
            if abs(eb.vector.normalized().z) > 0.9:
                eb.align_roll(Vector((0.0, -1.0, 0.0)))  # vertical bones: Z axis forward
            else:
                eb.align_roll(Vector((0.0, 0.0, 1.0)))
            ebones[name] = eb
        for name, _head, _tail, parent in table:
            if parent:
                ebones[name].parent = ebones[parent]
                ebones[name].use_connect = (Vector(ebones[parent].tail) - Vector(ebones[name].head)).length < 1e-6
    finally:
        bpy.ops.object.mode_set(mode="OBJECT")
        view_layer.objects.active = prev_active if prev_active is not None else arm
    data.display_type = "STICK"
    for pb in arm.pose.bones:
        pb.rotation_mode = "QUATERNION"
    return arm


def build_body(scene, arm, mats):
    """The skinned body: torso, neck, arms, legs and shoes as tubes along the bone chains."""
    SKIN, CLOTHES, PANTS, SHOES = range(4)
    bones = {b.name: (b.head_local.copy(), b.tail_local.copy()) for b in arm.data.bones}

    def chain(*names):
        return [(n, bones[n][0], bones[n][1]) for n in names]

    mb = MeshBuilder()

    # Torso (pants below the waist band, shirt above).
    torso = [
        ((0, 0.0, 0.84), 0.12, 0.085),
        ((0, 0.0, 0.90), 0.155, 0.10),
        ((0, 0.0, 0.98), 0.16, 0.105),
        ((0, 0.0, 1.04), 0.14, 0.093),
        ((0, 0.0, 1.06), 0.145, 0.097),
        ((0, 0.0, 1.14), 0.14, 0.092),
        ((0, -0.005, 1.25), 0.16, 0.10),
        ((0, -0.008, 1.33), 0.17, 0.105),
        ((0, -0.004, 1.39), 0.16, 0.09),
        ((0, 0.0, 1.43), 0.10, 0.07),
    ]
    waist_s = 0.20  # arc length of the waist band (z = 1.04)
    add_tube(mb, torso, (1, 0, 0), 28, lambda s: PANTS if s < waist_s else CLOTHES,
          chain("hips", "spine", "chest"), blend=0.06)

    # Neck.
    add_tube(mb, [((0, 0.008, 1.36), 0.05, 0.048), ((0, 0.01, 1.56), 0.045, 0.043)], (1, 0, 0), 16,
          lambda s: SKIN, chain("chest", "neck", "head"), blend=0.04)

    for side, sx in (("L", 1.0), ("R", -1.0)):
        d = Vector((_ARM_DIR_L.x * sx, 0.0, _ARM_DIR_L.z))
        sh = Vector(bones[f"upper_arm.{side}"][0])
        elbow = Vector(bones[f"forearm.{side}"][0])
        wrist = Vector(bones[f"hand.{side}"][0])
        start = Vector((0.06 * sx, 0.0, 1.385))
        cuff = sh + d * 0.20
        arm_ctrl = [
            (start, 0.05, 0.05),
            (sh, 0.058, 0.058),
            (cuff - d * 0.004, 0.056, 0.056),
            (cuff, 0.05, 0.05),
            (cuff + d * 0.002, 0.043, 0.043),
            (elbow, 0.04, 0.04),
            (wrist, 0.031, 0.028),
            (wrist + d * 0.05, 0.042, 0.022),
            (wrist + d * 0.10, 0.045, 0.022),
            (wrist + d * 0.15, 0.036, 0.018),
        ]
        sleeve_s = (sh - start).length + 0.20
        add_tube(mb, arm_ctrl, (0, -1, 0), 16, lambda s, e=sleeve_s: CLOTHES if s < e else SKIN,
              chain(f"shoulder.{side}", f"upper_arm.{side}", f"forearm.{side}", f"hand.{side}"),
              blend=0.05)

        hip = Vector((0.09 * sx, 0.0, 0.95))
        knee = Vector(bones[f"shin.{side}"][0])
        ankle = Vector(bones[f"foot.{side}"][0])
        leg_ctrl = [
            (hip, 0.085, 0.085),
            (Vector((0.095 * sx, 0.0, 0.86)), 0.088, 0.088),
            (knee, 0.056, 0.056),
            (knee.lerp(ankle, 0.45), 0.052, 0.052),
            (ankle + Vector((0, 0, 0.03)), 0.045, 0.045),
            (ankle, 0.040, 0.040),
        ]
        add_tube(mb, leg_ctrl, (0, -1, 0), 16, lambda s: PANTS,
              chain(f"thigh.{side}", f"shin.{side}", f"foot.{side}"), blend=0.06)

        x = 0.10 * sx
        shoe_ctrl = [
            ((x, 0.06, 0.05), 0.042, 0.045),
            ((x, 0.0, 0.055), 0.05, 0.052),
            ((x, -0.09, 0.045), 0.052, 0.042),
            ((x, -0.165, 0.04), 0.042, 0.03),
        ]
        add_tube(mb, shoe_ctrl, (1, 0, 0), 16, lambda s: SHOES, chain(f"foot.{side}", f"toe.{side}"),
              blend=0.04, spacing=0.025)

    me = mb.build("DemoBody", [mats["Skin"], mats["Clothes"], mats["Pants"], mats["Shoes"]])
    body = link_object(scene, bpy.data.objects.new("DemoBody", me))
    mb.apply_vertex_groups(body)
    skin_to(body, arm)
    return body


# the face

HEAD_C = Vector((0.0, 0.0, 1.645))
HEAD_R = Vector((0.11, 0.115, 0.13))
EYE_X = 0.044
EYE_Z = 1.648
MOUTH_Z = 1.565
HEAD_SCALE = 1.3
HEAD_PIVOT = Vector((0.0, 0.01, 1.50))


def _on_face(x, z, offset):
    """A point on the front (-Y) of the head ellipsoid at (x, z), ``offset`` in front of it."""
    nx = (x - HEAD_C.x) / HEAD_R.x
    nz = (z - HEAD_C.z) / HEAD_R.z
    k = max(0.0, 1.0 - nx * nx - nz * nz)
    return Vector((x, HEAD_C.y - HEAD_R.y * math.sqrt(k) - offset, z))


class _FaceBuilder(MeshBuilder):
    """Mesh builder whose feature vertices carry a 2D (x, z) parametrisation for shape keys."""

    def __init__(self):
        super().__init__()
        self.feature = {}  # vertex index -> (offset, tag, params)

    def add_feature_vert(self, x, z, offset, tag, params):
        i = self.add_vert(_on_face(x, z, offset), {"head": 1.0})
        self.feature[i] = (offset, tag, params)
        return i


def build_face(scene, arm, mats):
    SKIN, WHITE, IRIS, MOUTH, HAIR = range(5)
    fb = _FaceBuilder()

    # Head and hair (a shell over the top and back, bob cut around the face, a bun at the back).
    add_ellipsoid(fb, HEAD_C, HEAD_R, 32, 20, SKIN)

    def hair_keep(c):
        y = c.y - HEAD_C.y
        f = smoothstep((y + 0.075) / 0.08)  # 0 at the face, 1 at the back
        z_cut = (HEAD_C.z + 0.075) * (1.0 - f) + (HEAD_C.z - 0.095) * f
        return c.z > z_cut

    add_ellipsoid(fb, HEAD_C + Vector((0, 0.004, 0.008)), HEAD_R * 1.075, 32, 20, HAIR, keep=hair_keep)
    add_ellipsoid(fb, HEAD_C + Vector((0, 0.115, 0.05)), (0.055, 0.05, 0.06), 16, 10, HAIR)

    # Eyes: white, iris, highlight, then the eyelid with a dark lash line.
    for sx in (1.0, -1.0):
        cx = EYE_X * sx
        side = "L" if sx > 0 else "R"
        add_disc(fb, cx, EYE_Z, 0.021, 0.026, 0.0025, WHITE, f"eye.{side}")
        add_disc(fb, cx - 0.001 * sx, EYE_Z - 0.002, 0.016, 0.022, 0.0035, IRIS, f"eye.{side}")
        add_disc(fb, cx + 0.0065 * sx, EYE_Z + 0.009, 0.005, 0.005, 0.0045, WHITE, f"eye.{side}",
              rings=1, segs=8)
        # Eyelid grid: columns across the eye, rows from the lid's top edge down to the lash line.
        cols, rows = 9, 5
        grid = []
        for r in range(rows + 1):
            row = []
            for c in range(cols):
                xn = -1.0 + 2.0 * c / (cols - 1)
                row.append(fb.add_feature_vert(cx + 0.027 * xn, EYE_Z + 0.034, 0.0055, f"lid.{side}",
                                               (cx, xn, r, rows)))
            grid.append(row)
        for r in range(rows):
            mat = HAIR if r == rows - 1 else SKIN
            for c in range(cols - 1):
                fb.add_face((grid[r][c], grid[r + 1][c], grid[r + 1][c + 1], grid[r][c + 1]), mat)
        # Brow.
        bcols = 8
        brow = [[], []]
        for r in range(2):
            for c in range(bcols):
                xn = -1.0 + 2.0 * c / (bcols - 1)
                brow[r].append(fb.add_feature_vert(cx + 0.021 * xn, EYE_Z + 0.056, 0.004,
                                                   f"brow.{side}", (cx, xn * sx, r)))
        for c in range(bcols - 1):
            fb.add_face((brow[0][c], brow[0][c + 1], brow[1][c + 1], brow[1][c]), HAIR)

    # Mouth: a thin line at rest, opened / curved by the shape keys.
    add_disc(fb, 0.0, MOUTH_Z, 0.022, 0.003, 0.003, MOUTH, "mouth", rings=3, segs=20)
    # Small nose tip.
    add_disc(fb, 0.0, 1.605, 0.005, 0.003, 0.004, SKIN, "nose", rings=1, segs=8)

    # Shape keys, as functions of the feature parameters.
    def lid_pos(cx, xn, r, rows, close, lift=0.0, tilt=0.0):
        """Lid vertex position for closure ``close`` (0 open, 1 shut)."""
        x = cx + 0.027 * xn
        top = EYE_Z + 0.034
        arc = 1.0 - xn * xn
        lash_top_open = EYE_Z + 0.022 + 0.005 * arc
        lash_top_shut = EYE_Z - 0.023 - 0.004 * arc
        lash_top = lash_top_open + (lash_top_shut - lash_top_open) * close + lift
        lash_top += tilt * (-xn * math.copysign(1.0, cx))  # +: inner corner lower
        if r < rows:
            z = top + (lash_top - top) * (r / (rows - 1))
        else:
            z = lash_top - 0.0045 - 0.0015 * arc
        return x, z

    def rest_and_keys(i):
        offset, tag, p = fb.feature[i]
        co = fb.verts[i]
        rest = (co.x, co.z)
        keys = {}
        if tag.startswith("lid."):
            cx, xn, r, rows = p
            side = tag[-1]
            rest = lid_pos(cx, xn, r, rows, 0.0)
            keys[f"blink_{side}"] = lid_pos(cx, xn, r, rows, 1.0)
            keys["smile"] = lid_pos(cx, xn, r, rows, 0.1)
            keys["angry"] = lid_pos(cx, xn, r, rows, 0.3, tilt=0.006)
            keys["surprised"] = lid_pos(cx, xn, r, rows, 0.0, lift=0.006)
        elif tag.startswith("eye."):
            cx, cz, hw, hh, rr, a, _e = p
            x, z = co.x, co.z
            keys["surprised"] = (EYE_X * math.copysign(1.0, cx) + (x - EYE_X * math.copysign(1.0, cx)) * 1.12,
                                 EYE_Z + (z - EYE_Z) * 1.15)
            keys["smile"] = (x, EYE_Z + (z - EYE_Z) * 0.9 - 0.001)
        elif tag.startswith("brow."):
            cx, xo, r = p  # xo: -1 at the inner end, +1 at the outer end
            x = co.x
            base = EYE_Z + 0.056 + 0.004 * (1.0 - xo * xo) + 0.006 * r
            rest = (x, base)
            keys["angry"] = (x + 0.003 * math.copysign(1.0, -cx), base - 0.006 * (1.0 - xo) + 0.002)
            keys["surprised"] = (x, base + 0.012 + 0.003 * (1.0 - xo * xo))
            keys["smile"] = (x, base + 0.003)
        elif tag == "mouth":
            cx, cz, hw, hh, rr, a, _e = p
            ca, sa = math.cos(a), math.sin(a)
            xr = rr * ca
            keys["aa"] = (0.018 * xr, cz - 0.007 + 0.021 * rr * sa)
            keys["smile"] = (0.027 * xr,
                             cz + 0.011 * xr * xr + (0.0015 if sa > 0 else 0.008) * rr * sa)
            keys["angry"] = (0.019 * xr, cz - 0.007 * xr * xr + 0.003 * rr * sa + 0.002)
            keys["surprised"] = (0.012 * xr, cz - 0.005 + 0.017 * rr * sa)
        return offset, rest, keys

    # Put the rest positions in place first (the lids are built at a placeholder height).
    key_pos = {}
    for i in fb.feature:
        offset, rest, keys = rest_and_keys(i)
        fb.verts[i] = _on_face(rest[0], rest[1], offset)
        key_pos[i] = (offset, keys)

    # Stylised proportions: the whole head is modelled at a realistic size, then enlarged about
    # the top of the neck.
    def big(co):
        return HEAD_PIVOT + (Vector(co) - HEAD_PIVOT) * HEAD_SCALE

    fb.verts = [big(v) for v in fb.verts]

    me = fb.build("DemoFace", [mats["FaceSkin"], mats["EyeWhite"], mats["Eyes"], mats["Mouth"],
                               mats["Hair"]])
    face = link_object(scene, bpy.data.objects.new("DemoFace", me))
    fb.apply_vertex_groups(face)

    face.shape_key_add(name="Basis", from_mix=False)
    for name in DEMO_SHAPE_KEYS:
        kb = face.shape_key_add(name=name, from_mix=False)
        for i, (offset, keys) in key_pos.items():
            if name in keys:
                x, z = keys[name]
                kb.data[i].co = big(_on_face(x, z, offset))
        kb.slider_min = 0.0
        kb.slider_max = 1.0
        kb.value = 0.0
    me.shape_keys.name = "DemoFaceKey"
    skin_to(face, arm)
    return face


def build_wand(scene, arm, mats):
    mb = MeshBuilder()
    WOOD, STAR = 0, 1
    # Stick along +Z from the grip.
    add_tube(mb, [((0, 0, -0.06), 0.011, 0.011), ((0, 0, 0.28), 0.009, 0.009)], (1, 0, 0), 10,
          lambda s: WOOD, [("x", Vector((0, 0, 0)), Vector((0, 0, 1)))], spacing=0.05)
    # Five-pointed star at the tip (a thick prism in the local XZ plane).
    top = 0.33
    outline = []
    for k in range(10):
        a = math.pi / 2.0 + 2.0 * math.pi * k / 10.0
        r = 0.06 if k % 2 == 0 else 0.026
        outline.append((r * math.cos(a), r * math.sin(a)))
    th = 0.012
    front_c = mb.add_vert((0, -th, top))
    back_c = mb.add_vert((0, th, top))
    front = [mb.add_vert((x, -th, top + z)) for x, z in outline]
    back = [mb.add_vert((x, th, top + z)) for x, z in outline]
    n = len(outline)
    for k in range(n):
        k2 = (k + 1) % n
        mb.add_face((front_c, front[k], front[k2]), STAR)
        mb.add_face((back_c, back[k2], back[k]), STAR)
        mb.add_face((front[k2], front[k], back[k], back[k2]), STAR)
    me = mb.build("DemoWand", [mats["PropWood"], mats["PropStar"]], smooth=False)
    # The stick is round: smooth it, keep the star faceted.
    me.polygons.foreach_set("use_smooth", [m == WOOD for m in mb.face_mat])
    wand = link_object(scene, bpy.data.objects.new("DemoWand", me))

    bone = arm.data.bones["hand.R"]
    wand.parent = arm
    wand.parent_type = "BONE"
    wand.parent_bone = "hand.R"
    # Bone parents attach to the bone tail: cancel the rest transform so the world placement
    # below holds in the rest pose.
    wand.matrix_parent_inverse = (arm.matrix_world @ bone.matrix_local
                                  @ Matrix.Translation((0.0, bone.length, 0.0))).inverted()
    d = (bone.tail_local - bone.head_local).normalized()
    grip = bone.head_local + d * 0.085 + Vector((0.0, -0.01, 0.0))
    # Perpendicular to the hand in the frontal plane, tilted a little towards the camera.
    perp = Vector((-d.z, 0.0, d.x))
    if perp.z > 0:
        perp = -perp
    aim = (perp + Vector((0.0, -0.35, 0.0))).normalized()
    rot = Vector((0.0, 0.0, 1.0)).rotation_difference(aim)
    wand.matrix_basis = Matrix.Translation(grip) @ rot.to_matrix().to_4x4()
    return wand


def build_ground(scene, mats):
    mb = MeshBuilder()
    n, size = 16, 10.0
    idx = [[mb.add_vert((-size + 2 * size * i / n, -size + 2 * size * j / n, 0.0)) for i in range(n + 1)]
           for j in range(n + 1)]
    for j in range(n):
        for i in range(n):
            mb.add_face((idx[j][i], idx[j][i + 1], idx[j + 1][i + 1], idx[j + 1][i]), 0)
    me = mb.build("DemoGround", [mats["Ground"]], smooth=False)
    ground = link_object(scene, bpy.data.objects.new("DemoGround", me))
    return ground
