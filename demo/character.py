# SPDX-License-Identifier: GPL-3.0-or-later
"""Procedural demo character for the Stylized Renderer.

Everything is built with ``bpy.data`` (plus an armature edit-mode switch), so it works headless
with Blender as a Python module. The result is deterministic: no randomness is used.

The character is a low-poly stylised humanoid facing -Y:

* ``DemoRig``: an armature of 22 bones (root, hips, spine, chest, neck, head, shoulders, arms,
  hands, thighs, shins, feet, toes).
* ``DemoBody``: tubes along the bone chains (torso, neck, arms with mitten hands, legs, shoes),
  skinned with smooth two-bone weights; materials Skin, Clothes, Pants, Shoes.
* ``DemoFace``: head, hair, eyes with eyelids, brows and mouth, skinned to the head bone, with the
  shape keys blink_L, blink_R, smile, aa, angry and surprised.
* Actions ``Idle`` and ``Wave``. Both are slotted actions with one slot for the armature and one
  for the face's shape keys (blinks, smile, "aa"). ``Wave`` is active.
* ``DemoWand``: a star wand parented to the bone ``hand.R``.
* ``DemoGround``, ``DemoSun`` (angled so the character casts a shadow) and ``DemoCamera``.
"""

import math

import bpy
from mathutils import Matrix, Vector

DEMO_SHAPE_KEYS = ("blink_L", "blink_R", "smile", "aa", "angry", "surprised")

FRAME_START = 1
FRAME_END = 48
CYCLE = 48  # frames per loop of both actions (frame 49 == frame 1)


# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------

def _srgb(r, g, b):
    """8-bit sRGB to linear RGBA (Principled BSDF colours are scene-linear)."""

    def lin(c):
        c = c / 255.0
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    return (lin(r), lin(g), lin(b), 1.0)


def _smoothstep(x):
    x = min(1.0, max(0.0, x))
    return x * x * (3.0 - 2.0 * x)


def action_fcurves(action):
    """All F-curves of a (slotted, Blender 4.4+) action as (slot_identifier, fcurve) pairs."""
    out = []
    layers = getattr(action, "layers", None)
    if layers is not None and len(layers):
        for layer in layers:
            for strip in layer.strips:
                for bag in strip.channelbags:
                    ident = bag.slot.identifier if bag.slot else ""
                    out.extend((ident, fc) for fc in bag.fcurves)
        return out
    legacy = getattr(action, "fcurves", None)  # pre-4.4 layered-less actions
    if legacy is not None:
        out.extend(("", fc) for fc in legacy)
    return out


def _link(scene, obj):
    scene.collection.objects.link(obj)
    return obj


def _material(name, color, roughness=0.6, emission=None):
    mat = bpy.data.materials.new(name)
    mat.diffuse_color = color  # viewport / Workbench colour
    mat.roughness = roughness
    if mat.node_tree is None and hasattr(mat, "use_nodes"):
        mat.use_nodes = True
    tree = mat.node_tree
    bsdf = None
    if tree is not None:
        bsdf = next((n for n in tree.nodes if n.type == "BSDF_PRINCIPLED"), None)
        if bsdf is None:
            bsdf = tree.nodes.new("ShaderNodeBsdfPrincipled")
            out = next((n for n in tree.nodes if n.type == "OUTPUT_MATERIAL"), None)
            if out is None:
                out = tree.nodes.new("ShaderNodeOutputMaterial")
            tree.links.new(bsdf.outputs["BSDF"], out.inputs["Surface"])
    if bsdf is not None:
        bsdf.inputs["Base Color"].default_value = color
        bsdf.inputs["Roughness"].default_value = roughness
        if emission is not None:
            sock = bsdf.inputs.get("Emission Color") or bsdf.inputs.get("Emission")
            if sock is not None:
                sock.default_value = emission[0]
            strength = bsdf.inputs.get("Emission Strength")
            if strength is not None:
                strength.default_value = emission[1]
    return mat


class _MeshBuilder:
    """Collects vertices, faces, per-face material indices and per-vertex bone weights."""

    def __init__(self):
        self.verts = []
        self.faces = []
        self.face_mat = []
        self.weights = []  # per vertex: dict bone -> weight

    def add_vert(self, co, weights=None):
        self.verts.append(Vector(co))
        self.weights.append(dict(weights or {}))
        return len(self.verts) - 1

    def add_face(self, idx, mat):
        self.faces.append(tuple(idx))
        self.face_mat.append(mat)

    def build(self, name, materials, smooth=True):
        me = bpy.data.meshes.new(name)
        me.from_pydata([tuple(v) for v in self.verts], [], self.faces)
        for m in materials:
            me.materials.append(m)
        me.polygons.foreach_set("material_index", self.face_mat)
        me.polygons.foreach_set("use_smooth", [smooth] * len(self.faces))
        me.validate(clean_customdata=False)
        me.update()
        return me

    def apply_vertex_groups(self, obj):
        groups = {}
        for vi, wd in enumerate(self.weights):
            total = sum(wd.values())
            if total <= 0.0:
                continue
            for bone, w in wd.items():
                if w <= 1e-4:
                    continue
                vg = groups.get(bone)
                if vg is None:
                    vg = groups[bone] = obj.vertex_groups.new(name=bone)
                vg.add([vi], w / total, "REPLACE")


# --------------------------------------------------------------------------------------------
# Armature
# --------------------------------------------------------------------------------------------

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


def _build_armature(scene):
    data = bpy.data.armatures.new("DemoRig")
    arm = _link(scene, bpy.data.objects.new("DemoRig", data))
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


# --------------------------------------------------------------------------------------------
# Tubes (body parts)
# --------------------------------------------------------------------------------------------

def _chain_weights(point, chain, blend=0.05):
    """Weights of ``point`` over a bone chain [(name, head, tail)], blending at the joints.

    The point is projected on the nearest bone; close to a joint it is shared smoothly with the
    neighbouring bone, so each vertex has one or two influences.
    """
    best = None
    for i, (_name, h, t) in enumerate(chain):
        seg = t - h
        L2 = seg.length_squared
        u = 0.0 if L2 == 0 else max(0.0, min(1.0, (point - h).dot(seg) / L2))
        d = (h + seg * u - point).length
        if best is None or d < best[0] - 1e-9:
            best = (d, i, u)
    _d, i, u = best
    lengths = [(t - h).length for _n, h, t in chain]
    pos = sum(lengths[:i]) + u * lengths[i]
    cum = 0.0
    weights = {chain[i][0]: 1.0}
    for k in range(1, len(chain)):
        cum += lengths[k - 1]
        sd = pos - cum
        if abs(sd) < blend:
            w_next = _smoothstep((sd + blend) / (2.0 * blend))
            weights = {chain[k - 1][0]: 1.0 - w_next, chain[k][0]: w_next}
            break
    return weights


def _tube(mb, ctrl, ref, segs, mat_of_s, chain, spacing=0.02, blend=0.05, cap_start=True,
          cap_end=True, cap_rings=3):
    """Add a closed tube along control points ``ctrl`` = [(pos, rx, ry), ...].

    ``ref`` is the direction the first radius (rx) points at (projected perpendicular to the
    tube). ``mat_of_s`` maps the arc-length position to a material index.
    """
    pts = [(Vector(p), rx, ry) for p, rx, ry in ctrl]
    # Sample every segment uniformly, always keeping the control points themselves.
    samples = []  # (pos, rx, ry, s)
    s_acc = 0.0
    for i in range(len(pts) - 1):
        (p0, ax, ay), (p1, bx, by) = pts[i], pts[i + 1]
        L = (p1 - p0).length
        n = max(1, int(math.ceil(L / spacing)))
        for k in range(n):
            f = k / n
            samples.append((p0.lerp(p1, f), ax + (bx - ax) * f, ay + (by - ay) * f, s_acc + L * f))
        s_acc += L
    p_last, rx_last, ry_last = pts[-1]
    samples.append((p_last, rx_last, ry_last, s_acc))

    def tangent(i):
        a = samples[max(0, i - 1)][0]
        b = samples[min(len(samples) - 1, i + 1)][0]
        return (b - a).normalized()

    ref = Vector(ref).normalized()
    rings = []  # (center, u, v, rx, ry, s, t)
    for i, (c, rx, ry, s) in enumerate(samples):
        t = tangent(i)
        u = (ref - t * ref.dot(t)).normalized()
        v = t.cross(u)
        rings.append((c, u, v, rx, ry, s, t))

    # Rounded caps: extra shrinking rings beyond both ends.
    def cap_rings_for(ring, direction):
        c, u, v, rx, ry, s, t = ring
        depth = min(rx, ry)
        out = []
        for k in range(1, cap_rings + 1):
            phi = (math.pi / 2.0) * k / (cap_rings + 1)
            f = math.cos(phi)
            out.append((c + t * (direction * depth * math.sin(phi)), u, v, rx * f, ry * f, s, t))
        pole = c + t * (direction * depth)
        return out, pole

    all_rings = list(rings)
    start_pole = end_pole = None
    if cap_start:
        extra, start_pole = cap_rings_for(rings[0], -1.0)
        all_rings = list(reversed(extra)) + all_rings
    if cap_end:
        extra, end_pole = cap_rings_for(rings[-1], 1.0)
        all_rings = all_rings + extra

    ring_idx = []
    for c, u, v, rx, ry, s, _t in all_rings:
        w = _chain_weights(c, chain, blend)
        idx = []
        for j in range(segs):
            a = 2.0 * math.pi * j / segs
            co = c + u * (rx * math.cos(a)) + v * (ry * math.sin(a))
            idx.append(mb.add_vert(co, w))
        ring_idx.append((idx, s))
    for r in range(len(ring_idx) - 1):
        (ia, sa), (ib, sb) = ring_idx[r], ring_idx[r + 1]
        mat = mat_of_s(0.5 * (sa + sb))
        for j in range(segs):
            j2 = (j + 1) % segs
            mb.add_face((ia[j], ia[j2], ib[j2], ib[j]), mat)
    if start_pole is not None:
        idx, s = ring_idx[0]
        p = mb.add_vert(start_pole, _chain_weights(start_pole, chain, blend))
        for j in range(segs):
            mb.add_face((p, idx[(j + 1) % segs], idx[j]), mat_of_s(s))
    if end_pole is not None:
        idx, s = ring_idx[-1]
        p = mb.add_vert(end_pole, _chain_weights(end_pole, chain, blend))
        for j in range(segs):
            mb.add_face((p, idx[j], idx[(j + 1) % segs]), mat_of_s(s))


def _build_body(scene, arm, mats):
    """The skinned body: torso, neck, arms, legs and shoes as tubes along the bone chains."""
    SKIN, CLOTHES, PANTS, SHOES = range(4)
    bones = {b.name: (b.head_local.copy(), b.tail_local.copy()) for b in arm.data.bones}

    def chain(*names):
        return [(n, bones[n][0], bones[n][1]) for n in names]

    mb = _MeshBuilder()

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
    _tube(mb, torso, (1, 0, 0), 28, lambda s: PANTS if s < waist_s else CLOTHES,
          chain("hips", "spine", "chest"), blend=0.06)

    # Neck.
    _tube(mb, [((0, 0.008, 1.36), 0.05, 0.048), ((0, 0.01, 1.56), 0.045, 0.043)], (1, 0, 0), 16,
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
        _tube(mb, arm_ctrl, (0, -1, 0), 16, lambda s, e=sleeve_s: CLOTHES if s < e else SKIN,
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
        _tube(mb, leg_ctrl, (0, -1, 0), 16, lambda s: PANTS,
              chain(f"thigh.{side}", f"shin.{side}", f"foot.{side}"), blend=0.06)

        x = 0.10 * sx
        shoe_ctrl = [
            ((x, 0.06, 0.05), 0.042, 0.045),
            ((x, 0.0, 0.055), 0.05, 0.052),
            ((x, -0.09, 0.045), 0.052, 0.042),
            ((x, -0.165, 0.04), 0.042, 0.03),
        ]
        _tube(mb, shoe_ctrl, (1, 0, 0), 16, lambda s: SHOES, chain(f"foot.{side}", f"toe.{side}"),
              blend=0.04, spacing=0.025)

    me = mb.build("DemoBody", [mats["Skin"], mats["Clothes"], mats["Pants"], mats["Shoes"]])
    body = _link(scene, bpy.data.objects.new("DemoBody", me))
    mb.apply_vertex_groups(body)
    _skin_to(body, arm)
    return body


def _skin_to(obj, arm):
    obj.parent = arm
    obj.matrix_parent_inverse = arm.matrix_world.inverted()
    mod = obj.modifiers.new("Armature", "ARMATURE")
    mod.object = arm
    mod.use_vertex_groups = True
    mod.use_deform_preserve_volume = False
    # The armature modifier must be the first one.
    while obj.modifiers[0] != mod:
        obj.modifiers.move(obj.modifiers.find(mod.name), 0)


# --------------------------------------------------------------------------------------------
# Face
# --------------------------------------------------------------------------------------------

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


class _FaceBuilder(_MeshBuilder):
    """Mesh builder whose feature vertices carry a 2D (x, z) parametrisation for shape keys."""

    def __init__(self):
        super().__init__()
        self.feature = {}  # vertex index -> (offset, tag, params)

    def add_feature_vert(self, x, z, offset, tag, params):
        i = self.add_vert(_on_face(x, z, offset), {"head": 1.0})
        self.feature[i] = (offset, tag, params)
        return i


def _ellipsoid(mb, center, radii, segs, rings, mat, keep=None):
    """UV ellipsoid; ``keep(face_center)`` filters faces (for the hair shell)."""
    c = Vector(center)
    top = mb.add_vert(c + Vector((0, 0, radii[2])), {"head": 1.0})
    grid = []
    for r in range(1, rings):
        th = math.pi * r / rings
        row = []
        for s in range(segs):
            ph = 2.0 * math.pi * s / segs - math.pi / 2.0  # seam at the back
            co = c + Vector((radii[0] * math.sin(th) * math.cos(ph),
                             radii[1] * math.sin(th) * math.sin(ph),
                             radii[2] * math.cos(th)))
            row.append(mb.add_vert(co, {"head": 1.0}))
        grid.append(row)
    bottom = mb.add_vert(c - Vector((0, 0, radii[2])), {"head": 1.0})

    def add(idx):
        if keep is not None:
            cen = sum((mb.verts[i] for i in idx), Vector()) / len(idx)
            if not keep(cen):
                return
        mb.add_face(tuple(reversed(idx)), mat)  # outward-facing winding

    for s in range(segs):
        s2 = (s + 1) % segs
        add((top, grid[0][s2], grid[0][s]))
        for r in range(len(grid) - 1):
            add((grid[r][s], grid[r][s2], grid[r + 1][s2], grid[r + 1][s]))
        add((bottom, grid[-1][s], grid[-1][s2]))


def _disc(fb, cx, cz, hw, hh, offset, mat, tag, rings=3, segs=16, extra=None):
    """Elliptic disc on the face, as a polar grid (centre + rings)."""
    centre = fb.add_feature_vert(cx, cz, offset, tag, (cx, cz, hw, hh, 0.0, 0.0, extra))
    prev = None
    for r in range(1, rings + 1):
        rr = r / rings
        row = []
        for s in range(segs):
            a = 2.0 * math.pi * s / segs
            x = cx + hw * rr * math.cos(a)
            z = cz + hh * rr * math.sin(a)
            row.append(fb.add_feature_vert(x, z, offset, tag, (cx, cz, hw, hh, rr, a, extra)))
        if prev is None:
            for s in range(segs):
                fb.add_face((centre, row[s], row[(s + 1) % segs]), mat)
        else:
            for s in range(segs):
                s2 = (s + 1) % segs
                fb.add_face((prev[s], row[s], row[s2], prev[s2]), mat)
        prev = row


def _build_face(scene, arm, mats):
    SKIN, WHITE, IRIS, MOUTH, HAIR = range(5)
    fb = _FaceBuilder()

    # Head and hair (a shell over the top and back, bob cut around the face, a bun at the back).
    _ellipsoid(fb, HEAD_C, HEAD_R, 32, 20, SKIN)

    def hair_keep(c):
        y = c.y - HEAD_C.y
        f = _smoothstep((y + 0.075) / 0.08)  # 0 at the face, 1 at the back
        z_cut = (HEAD_C.z + 0.075) * (1.0 - f) + (HEAD_C.z - 0.095) * f
        return c.z > z_cut

    _ellipsoid(fb, HEAD_C + Vector((0, 0.004, 0.008)), HEAD_R * 1.075, 32, 20, HAIR, keep=hair_keep)
    _ellipsoid(fb, HEAD_C + Vector((0, 0.115, 0.05)), (0.055, 0.05, 0.06), 16, 10, HAIR)

    # Eyes: white, iris, highlight, then the eyelid with a dark lash line.
    for sx in (1.0, -1.0):
        cx = EYE_X * sx
        side = "L" if sx > 0 else "R"
        _disc(fb, cx, EYE_Z, 0.021, 0.026, 0.0025, WHITE, f"eye.{side}")
        _disc(fb, cx - 0.001 * sx, EYE_Z - 0.002, 0.016, 0.022, 0.0035, IRIS, f"eye.{side}")
        _disc(fb, cx + 0.0065 * sx, EYE_Z + 0.009, 0.005, 0.005, 0.0045, WHITE, f"eye.{side}",
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
    _disc(fb, 0.0, MOUTH_Z, 0.022, 0.003, 0.003, MOUTH, "mouth", rings=3, segs=20)
    # Small nose tip.
    _disc(fb, 0.0, 1.605, 0.005, 0.003, 0.004, SKIN, "nose", rings=1, segs=8)

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
    face = _link(scene, bpy.data.objects.new("DemoFace", me))
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
    _skin_to(face, arm)
    return face


# --------------------------------------------------------------------------------------------
# Prop, ground, lights, camera
# --------------------------------------------------------------------------------------------

def _build_wand(scene, arm, mats):
    mb = _MeshBuilder()
    WOOD, STAR = 0, 1
    # Stick along +Z from the grip.
    _tube(mb, [((0, 0, -0.06), 0.011, 0.011), ((0, 0, 0.28), 0.009, 0.009)], (1, 0, 0), 10,
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
    wand = _link(scene, bpy.data.objects.new("DemoWand", me))

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


def _build_ground(scene, mats):
    mb = _MeshBuilder()
    n, size = 16, 10.0
    idx = [[mb.add_vert((-size + 2 * size * i / n, -size + 2 * size * j / n, 0.0)) for i in range(n + 1)]
           for j in range(n + 1)]
    for j in range(n):
        for i in range(n):
            mb.add_face((idx[j][i], idx[j][i + 1], idx[j + 1][i + 1], idx[j + 1][i]), 0)
    me = mb.build("DemoGround", [mats["Ground"]], smooth=False)
    ground = _link(scene, bpy.data.objects.new("DemoGround", me))
    return ground


def _look_at(obj, location, target):
    obj.location = location
    direction = Vector(target) - Vector(location)
    obj.rotation_mode = "QUATERNION"
    obj.rotation_quaternion = direction.to_track_quat("-Z", "Y")


def _build_sun(scene):
    light = bpy.data.lights.new("DemoSun", "SUN")
    # pi W/m^2: MToon's light colour is E / pi (README "Light units"), so the lit colour shows as
    # itself, as bright as a white diffuse surface lit head-on by this sun in EEVEE
    light.energy = math.pi
    light.color = (1.0, 0.98, 0.95)
    light.angle = math.radians(1.0)
    if hasattr(light, "use_shadow"):
        light.use_shadow = True
    sun = _link(scene, bpy.data.objects.new("DemoSun", light))
    # Light from the camera's left, front and above: the shadow falls back and to the right.
    _look_at(sun, (-3.2, -2.4, 3.2), (0.0, 0.0, 0.0))
    return sun


def _build_camera(scene):
    cam_data = bpy.data.cameras.new("DemoCamera")
    cam_data.lens = 50.0
    cam_data.clip_start = 0.1
    cam_data.clip_end = 50.0
    cam = _link(scene, bpy.data.objects.new("DemoCamera", cam_data))
    _look_at(cam, (1.35, -4.1, 1.45), (0.0, 0.0, 0.98))
    scene.camera = cam
    return cam


# --------------------------------------------------------------------------------------------
# Actions
# --------------------------------------------------------------------------------------------

def _rot(arm, bone, axis_angles):
    """Pose quaternion for ``bone`` from rotations given about armature-space axes.

    ``axis_angles`` = [(axis, degrees), ...] are applied in order. They are expressed in the rest
    frame of the bone's parent (i.e. conjugated by the bone's rest orientation).
    """
    m = arm.data.bones[bone].matrix_local.to_3x3()
    r = Matrix.Identity(3)
    for axis, deg in axis_angles:
        r = Matrix.Rotation(math.radians(deg), 3, Vector(axis)) @ r
    q = (m.inverted() @ r @ m).to_quaternion()
    q.normalize()
    return q


X, Y, Z = (1, 0, 0), (0, 1, 0), (0, 0, 1)


def _idle_pose(ph):
    """Idle: breathing and a gentle sway, arms relaxed at the sides. ``ph`` in [0, 1)."""
    s1 = math.sin(2.0 * math.pi * ph)
    c1 = math.cos(2.0 * math.pi * ph)
    s2 = math.sin(4.0 * math.pi * ph)
    return {
        "hips": [(Z, 2.0 * s1), (Y, 1.0 * s1)],
        "spine": [(X, 1.5 * s2), (Y, -1.5 * s1)],
        "chest": [(X, -2.0 * s2)],
        "neck": [(X, 1.0 * s2)],
        "head": [(Y, 3.0 * c1), (Z, -4.0 * s1), (X, -2.0 * s2)],
        "shoulder.L": [(Y, 2.0 + 1.0 * s2)],
        "shoulder.R": [(Y, -2.0 - 1.0 * s2)],
        "upper_arm.L": [(Y, 36.0 + 2.5 * s1), (X, -4.0)],
        "upper_arm.R": [(Y, -36.0 + 2.5 * s1), (X, -4.0)],
        "forearm.L": [(Y, 6.0), (X, -8.0 - 2.0 * s2)],
        "forearm.R": [(Y, -6.0), (X, -8.0 - 2.0 * s2)],
        "hand.L": [(Y, 8.0 + 3.0 * c1)],
        "hand.R": [(Y, -8.0 - 3.0 * c1)],
    }


def _wave_pose(ph):
    """Wave: right arm raised high, the forearm and hand waving twice per loop."""
    s1 = math.sin(2.0 * math.pi * ph)
    s2 = math.sin(4.0 * math.pi * ph)
    c2 = math.cos(4.0 * math.pi * ph)
    return {
        "hips": [(Z, -4.0 + 2.0 * s1), (Y, -1.5)],
        "spine": [(Y, -3.0 - 1.0 * s2), (X, 1.5 * s1)],
        "chest": [(Y, -2.0), (X, -1.5 * s2)],
        "neck": [(Y, 3.0)],
        "head": [(Y, 7.0 + 3.0 * s2), (Z, 8.0 + 2.0 * s1), (X, -3.0)],
        "shoulder.L": [(Y, 2.0)],
        "shoulder.R": [(Y, 16.0 + 2.0 * s2)],
        "upper_arm.L": [(Y, 36.0 + 2.0 * s1), (X, -6.0)],
        "upper_arm.R": [(Y, 84.0 + 4.0 * s2), (X, -12.0)],
        "forearm.L": [(Y, 8.0), (X, -10.0)],
        "forearm.R": [(Y, 28.0 + 22.0 * s2), (X, -8.0)],
        "hand.L": [(Y, 8.0)],
        "hand.R": [(Y, 10.0 * c2), (X, -15.0)],
    }


def _key_bones(arm, pose_fn, step=4):
    """Key every bone of pose_fn on frames FRAME_START .. FRAME_START + CYCLE every ``step``."""
    last = {}
    for f in range(FRAME_START, FRAME_START + CYCLE + 1, step):
        ph = ((f - FRAME_START) % CYCLE) / CYCLE
        pose = pose_fn(ph)
        for bone, aa in pose.items():
            q = _rot(arm, bone, aa)
            prev = last.get(bone)
            if prev is not None and prev.dot(q) < 0.0:
                q = -q
            last[bone] = q
            pb = arm.pose.bones[bone]
            pb.rotation_quaternion = q
            pb.keyframe_insert("rotation_quaternion", frame=f, group=bone)


def _key_shapes(key, keys):
    """keys: {shape: [(frame, value), ...]}."""
    for name, pts in keys.items():
        kb = key.key_blocks[name]
        for f, v in pts:
            kb.value = v
            kb.keyframe_insert("value", frame=f)
        kb.value = 0.0


def _make_action(name, arm, face_key, pose_fn, shape_keys):
    act = bpy.data.actions.new(name)
    act.use_fake_user = True
    arm.animation_data_create()
    arm.animation_data.action = act
    _key_bones(arm, pose_fn)
    face_key.animation_data_create()
    face_key.animation_data.action = act
    _key_shapes(face_key, shape_keys)
    act.use_frame_range = True
    act.frame_start = FRAME_START
    act.frame_end = FRAME_START + CYCLE
    act.use_cyclic = True
    for _slot, fc in action_fcurves(act):
        if fc.data_path.startswith("key_blocks"):
            continue
        for kp in fc.keyframe_points:
            kp.interpolation = "BEZIER"
            kp.handle_left_type = kp.handle_right_type = "AUTO_CLAMPED"
        fc.update()
    return act


def _blink(at):
    return [(at - 3, 0.0), (at, 1.0), (at + 1, 1.0), (at + 4, 0.0)]


def _build_actions(arm, face):
    key = face.data.shape_keys
    end = FRAME_START + CYCLE
    idle = _make_action("Idle", arm, key, _idle_pose, {
        "blink_L": [(FRAME_START, 0.0)] + _blink(30) + [(end, 0.0)],
        "blink_R": [(FRAME_START, 0.0)] + _blink(30) + [(end, 0.0)],
        "smile": [(FRAME_START, 0.15), (end, 0.15)],
    })
    wave = _make_action("Wave", arm, key, _wave_pose, {
        "smile": [(FRAME_START, 0.85), (end, 0.85)],
        "blink_L": [(FRAME_START, 0.0)] + _blink(14) + _blink(38) + [(end, 0.0)],
        "blink_R": [(FRAME_START, 0.0)] + _blink(14) + _blink(38) + [(end, 0.0)],
        "aa": [(FRAME_START, 0.0), (21, 0.0), (24, 0.7), (27, 0.15), (30, 0.8), (34, 0.0),
               (end, 0.0)],
    })
    # Wave is the active action of both the rig and the face.
    arm.animation_data.action = wave
    key.animation_data.action = wave
    return idle, wave


# --------------------------------------------------------------------------------------------
# Materials and the scene
# --------------------------------------------------------------------------------------------

def _build_materials():
    spec = {
        "Skin": (_srgb(250, 206, 182), 0.6),
        "FaceSkin": (_srgb(250, 206, 182), 0.6),
        "Clothes": (_srgb(232, 98, 92), 0.5),
        "Pants": (_srgb(52, 64, 112), 0.6),
        "Shoes": (_srgb(112, 70, 48), 0.4),
        "Hair": (_srgb(84, 62, 128), 0.4),
        "Eyes": (_srgb(58, 150, 120), 0.2),
        "EyeWhite": (_srgb(250, 250, 252), 0.3),
        "Mouth": (_srgb(150, 48, 60), 0.5),
        "PropWood": (_srgb(120, 78, 44), 0.6),
        "PropStar": (_srgb(255, 206, 60), 0.3),
        "Ground": (_srgb(178, 206, 160), 0.9),
    }
    mats = {name: _material(name, col, rough) for name, (col, rough) in spec.items()}
    _apply_mtoon_hints(mats)
    return mats


def _apply_mtoon_hints(mats):
    """If the engine's MToon property group (``Material.stylized_mtoon``) is registered, switch
    the demo materials to MToon with toon settings and outlines; otherwise leave them as
    Principled BSDF materials (the engine then derives a toon look from them).

    Tolerant of the property group's exact layout: unknown attributes are skipped.
    """
    for name, mat in mats.items():
        props = getattr(mat, "stylized_mtoon", None)
        if props is None:
            return
        base = tuple(mat.diffuse_color)
        # Hand-picked shade: darker, slightly more saturated and cooler than the lit colour.
        lum = 0.2126 * base[0] + 0.7152 * base[1] + 0.0722 * base[2]
        shade = tuple(max(0.0, min(1.0, (lum + (c - lum) * 1.25) * 0.5)) for c in base[:3])
        shade = (shade[0] * 0.95, shade[1] * 0.95, min(1.0, shade[2] * 1.1 + 0.01))
        outlined = name not in ("Ground", "EyeWhite", "Eyes", "Mouth", "PropStar")
        values = {
            "enabled": True,
            "base_color": base,
            "shade_color": shade,
            "shading_toony": 0.95,
            "shading_shift": -0.05,
            "gi_equalization": 0.9,
            "rim_color": (0.0, 0.0, 0.0) if name == "Ground" else (0.25, 0.22, 0.2),
            "rim_fresnel_power": 4.0,
            "rim_lift": 0.0,
            "outline_width_mode": "screenCoordinates" if outlined else "none",
            "outline_width": 0.006 if outlined else 0.0,
            "outline_color": (0.06, 0.035, 0.05),
            "outline_lighting_mix": 0.25,
        }
        if name == "PropStar":
            values["emissive_color"] = (0.6, 0.45, 0.05)
        for attr, value in values.items():
            if not hasattr(props, attr):
                continue
            try:
                setattr(props, attr, value)
            except (TypeError, ValueError, AttributeError):
                try:  # colour size mismatch (RGB vs RGBA)
                    setattr(props, attr, tuple(value)[:3] if len(value) == 4 else tuple(value) + (1.0,))
                except Exception:  # noqa: BLE001 - best effort only
                    pass


def _setup_scene(scene):
    scene.frame_start = FRAME_START
    scene.frame_end = FRAME_END
    scene.render.fps = 24
    scene.render.fps_base = 1.0
    scene.render.resolution_x = 640
    scene.render.resolution_y = 480
    scene.render.resolution_percentage = 100
    try:
        scene.view_settings.view_transform = "Standard"  # toon colours, no AgX desaturation
    except TypeError:
        pass
    world = scene.world
    if world is None:
        world = bpy.data.worlds.new("DemoWorld")
        scene.world = world
    sky = _srgb(150, 178, 212)
    world.color = sky[:3]
    tree = world.node_tree
    if tree is not None:
        bg = next((n for n in tree.nodes if n.type == "BACKGROUND"), None)
        if bg is not None:
            bg.inputs["Color"].default_value = sky
            bg.inputs["Strength"].default_value = 1.0


def build_demo_scene(scene=None):
    """Build the demo character and its set in ``scene`` (default: the context scene).

    Returns a dict with the created objects ("armature", "body", "face", "prop", "ground",
    "sun", "camera"), the actions ("actions": {"Idle": ..., "Wave": ...}), "action_names", and
    "active_action" (the name of the action the timeline plays).
    """
    if scene is None:
        scene = bpy.context.scene
    _setup_scene(scene)
    mats = _build_materials()
    arm = _build_armature(scene)
    body = _build_body(scene, arm, mats)
    face = _build_face(scene, arm, mats)
    wand = _build_wand(scene, arm, mats)
    ground = _build_ground(scene, mats)
    sun = _build_sun(scene)
    cam = _build_camera(scene)
    idle, wave = _build_actions(arm, face)
    scene.frame_set(FRAME_START)
    return {
        "armature": arm,
        "body": body,
        "face": face,
        "prop": wand,
        "ground": ground,
        "sun": sun,
        "camera": cam,
        "materials": mats,
        "actions": {"Idle": idle, "Wave": wave},
        "action_names": [idle.name, wave.name],
        "active_action": wave.name,
    }
