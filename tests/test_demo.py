# SPDX-License-Identifier: GPL-3.0-or-later
"""The demo character generator (demo/character.py) and a light render of it."""
from __future__ import annotations

import bpy
import numpy as np
import pytest
from mathutils import Vector

from demo.character import action_fcurves, build_demo_scene
from demo.character_meshes import DEMO_SHAPE_KEYS

REQUIRED_BONES = ("hips", "spine", "chest", "neck", "head", "hand.L", "hand.R", "foot.L", "foot.R")


@pytest.fixture
def demo(ext):
    bpy.ops.wm.read_factory_settings(use_empty=True)
    return build_demo_scene()


def test_armature_has_a_full_humanoid_skeleton(demo):
    arm = demo["armature"]
    assert arm.type == "ARMATURE" and arm.name == "DemoRig"
    names = set(arm.data.bones.keys())
    assert len(names) >= 20
    for b in REQUIRED_BONES:
        assert b in names, b
    for side in "LR":
        for part in ("shoulder", "upper_arm", "forearm", "thigh", "shin", "toe"):
            assert f"{part}.{side}" in names


def test_body_is_skinned_with_two_or_more_materials(demo):
    body, arm = demo["body"], demo["armature"]
    assert body.type == "MESH"
    assert len(body.material_slots) >= 2
    used = {p.material_index for p in body.data.polygons}
    assert len(used) >= 2, "every material slot should be used by some faces"
    assert 2000 <= len(body.data.vertices) <= 8000
    assert body.modifiers[0].type == "ARMATURE" and body.modifiers[0].object == arm
    assert body.parent == arm
    bone_names = set(arm.data.bones.keys())
    groups = {vg.index: vg.name for vg in body.vertex_groups}
    assert set(groups.values()) <= bone_names
    assert len(groups) >= 15
    for v in body.data.vertices:
        ws = [g.weight for g in v.groups if g.weight > 0]
        assert 1 <= len(ws) <= 2
        assert abs(sum(ws) - 1.0) < 1e-4


def test_face_has_the_six_shape_keys_with_visible_deformations(demo):
    face = demo["face"]
    keys = face.data.shape_keys
    assert keys is not None
    names = [kb.name for kb in keys.key_blocks]
    for k in DEMO_SHAPE_KEYS:
        assert k in names, k
    basis = np.array([v.co[:] for v in keys.key_blocks[0].data])
    for k in DEMO_SHAPE_KEYS:
        co = np.array([v.co[:] for v in keys.key_blocks[k].data])
        moved = np.linalg.norm(co - basis, axis=1)
        assert moved.max() > 0.008, f"{k} barely moves ({moved.max():.4f} m)"
    assert len(face.material_slots) >= 2
    assert face.modifiers[0].type == "ARMATURE"
    assert [vg.name for vg in face.vertex_groups] == ["head"]


def test_actions_idle_and_wave_one_keys_shape_keys(demo):
    names = set(demo["action_names"])
    assert {"Idle", "Wave"} <= names
    assert all(bpy.data.actions.get(n) is not None for n in names)
    shape_keyed = [n for n in names
                   if any(fc.data_path.startswith("key_blocks[") for _s, fc in action_fcurves(bpy.data.actions[n]))]
    assert shape_keyed, "no action animates a shape key"
    for n in names:
        act = bpy.data.actions[n]
        bone_curves = [fc for _s, fc in action_fcurves(act) if fc.data_path.startswith("pose.bones[")]
        assert bone_curves
        lo = min(fc.range()[0] for fc in bone_curves)
        hi = max(fc.range()[1] for fc in bone_curves)
        assert hi - lo >= 47
    arm, face = demo["armature"], demo["face"]
    assert arm.animation_data.action.name == "Wave"
    assert face.data.shape_keys.animation_data.action.name == "Wave"


def test_wave_leaves_the_bind_pose_and_animates(demo):
    scene = bpy.context.scene
    arm = demo["armature"]
    rest_tip = arm.matrix_world @ arm.data.bones["hand.R"].tail_local
    tips = []
    for f in (1, 7, 13):
        scene.frame_set(f)
        tips.append(arm.matrix_world @ arm.pose.bones["hand.R"].tail)
    head_z = (arm.matrix_world @ arm.pose.bones["head"].head).z
    assert tips[0].z > head_z, "the waving hand is raised above the head"
    assert (tips[0] - rest_tip).length > 0.5
    assert (tips[0] - tips[1]).length > 0.05, "the hand waves between frames"
    scene.frame_set(1)
    kbs = demo["face"].data.shape_keys.key_blocks
    assert kbs["smile"].value > 0.5
    for name in ("angry", "surprised"):  # not animated: must rest at 0
        assert kbs[name].value == 0.0, name


def test_prop_ground_sun_camera(demo):
    prop, arm = demo["prop"], demo["armature"]
    assert prop.parent == arm and prop.parent_type == "BONE" and prop.parent_bone.startswith("hand.")
    scene = bpy.context.scene
    scene.frame_set(1)
    hand = arm.matrix_world @ arm.pose.bones[prop.parent_bone].head
    assert (prop.matrix_world.translation - hand).length < 0.2, "the prop follows the hand"
    assert demo["ground"].type == "MESH"
    assert demo["sun"].type == "LIGHT" and demo["sun"].data.type == "SUN"
    sun_dir = demo["sun"].matrix_world.to_3x3() @ Vector((0, 0, -1))
    assert sun_dir.z < -0.5 and abs(sun_dir.x) + abs(sun_dir.y) > 0.3, "an angled sun"
    assert scene.camera == demo["camera"]
    assert scene.frame_end - scene.frame_start + 1 >= 48 and scene.render.fps == 24


def test_build_is_deterministic(ext):
    bpy.ops.wm.read_factory_settings(use_empty=True)
    a = build_demo_scene()
    co_a = np.array([v.co[:] for v in a["body"].data.vertices])
    bpy.ops.wm.read_factory_settings(use_empty=True)
    b = build_demo_scene()
    co_b = np.array([v.co[:] for v in b["body"].data.vertices])
    assert np.array_equal(co_a, co_b)


CHARACTER = ("DemoBody", "DemoFace", "DemoWand")


def _render_small(render, frame):
    scene = bpy.context.scene
    scene.frame_set(frame)
    return np.array(render(scene), dtype=np.float32)


def test_demo_renders_with_the_character_visible_and_moving(demo, render):
    scene = bpy.context.scene
    try:
        scene.render.engine = "STYLIZED"
    except TypeError:
        pytest.skip("the STYLIZED render engine is not registered")
    scene.render.resolution_x, scene.render.resolution_y = 160, 120
    f1 = _render_small(render, 1)
    f13 = _render_small(render, 13)
    for name in CHARACTER:
        bpy.data.objects[name].hide_render = True
    bg = _render_small(render, 1)
    for name in CHARACTER:
        bpy.data.objects[name].hide_render = False
    assert np.isfinite(f1).all()
    cover = (np.abs(f1[..., :3] - bg[..., :3]).max(axis=-1) > 1e-3).mean()
    assert cover > 0.03, f"the character covers only {cover:.1%} of the image"
    changed = (np.abs(f1[..., :3] - f13[..., :3]).max(axis=-1) > 1e-3).mean()
    assert changed > 0.002, "frames 1 and 13 look the same"
