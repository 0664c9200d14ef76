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

The meshes are built in ``demo/character_meshes.py`` from the blocks of ``demo/mesh_parts.py``.
"""

import math

import bpy
from mathutils import Matrix, Vector

from .character_meshes import build_armature, build_body, build_face, build_ground, build_wand
from .mesh_parts import link_object

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


# --------------------------------------------------------------------------------------------
# Lights and camera
# --------------------------------------------------------------------------------------------


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
    sun = link_object(scene, bpy.data.objects.new("DemoSun", light))
    # Light from the camera's left, front and above: the shadow falls back and to the right.
    _look_at(sun, (-3.2, -2.4, 3.2), (0.0, 0.0, 0.0))
    return sun


def _build_camera(scene):
    cam_data = bpy.data.cameras.new("DemoCamera")
    cam_data.lens = 50.0
    cam_data.clip_start = 0.1
    cam_data.clip_end = 50.0
    cam = link_object(scene, bpy.data.objects.new("DemoCamera", cam_data))
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
    arm = build_armature(scene)
    body = build_body(scene, arm, mats)
    face = build_face(scene, arm, mats)
    wand = build_wand(scene, arm, mats)
    ground = build_ground(scene, mats)
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
