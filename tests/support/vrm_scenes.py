"""The VRM avatar of the tests: Godette (../shared/testdata/vrm/Godette_vrm0.blend, a VRM 0.x
file; ``needs_godette`` skips where it is absent) opened with a face camera, her blend-shape
groups' previews keyed (``key_preview``, ``ANGRY`` and what it binds), turned into a VRM 1.0
avatar (``make_vrm1``, needs the VRM Add-on), and the CPU-side runtime of the current scene
(``runtime_for_scene``).  Shared by test_vrm_expressions, test_vrm_preview_channels,
test_scene_vrm and test_springs."""
from __future__ import annotations

import math

import bpy
import pytest

import conftest as C

VRM_DIR = C.TESTDATA / "vrm"
GODETTE = VRM_DIR / "Godette_vrm0.blend"

needs_godette = pytest.mark.skipif(not GODETTE.exists(),
                                   reason="../shared/testdata/vrm/Godette_vrm0.blend is absent (only in the project workspace)")


def open_godette(path=GODETTE):
    bpy.ops.wm.open_mainfile(filepath=str(path))
    scene = bpy.context.scene
    cd = bpy.data.cameras.get("FaceCam") or bpy.data.cameras.new("FaceCam")
    cd.lens = 85.0
    cam = bpy.data.objects.get("FaceCam")
    if cam is None:
        cam = bpy.data.objects.new("FaceCam", cd)
        scene.collection.objects.link(cam)
    cam.location = (0.0, -1.7, 1.2)
    cam.rotation_euler = (math.radians(90.0), 0.0, 0.0)
    scene.camera = cam
    scene.render.engine = "STYLIZED"
    scene.render.resolution_x, scene.render.resolution_y, scene.render.resolution_percentage = 160, 120, 100
    return scene


def key_preview(armature, index, frames_values):
    grp = armature.data.vrm_addon_extension.vrm0.blend_shape_master.blend_shape_groups[index]
    for frame, value in frames_values:
        grp.preview = value
        grp.keyframe_insert("preview", frame=frame)
    return grp


ANGRY = 8   # blend_shape_groups[8] of Godette: "Angry" (angled_eyebrows 1, ah 0.25, blink_l/r 0.25)
ANGRY_BINDS = {"angled_eyebrows": 1.0, "ah": 0.25, "blink_left": 0.25, "blink_right": 0.25}


def runtime_for_scene():
    """A SceneRuntime of the current scene (CPU side only: no GPU backend needed for weights)."""
    from stylized_renderer.engine.blender import importer
    from stylized_renderer.engine.core.runtime.backend import CpuBackend
    from stylized_renderer.engine.core.world.scene_runtime import SceneRuntime
    from stylized_renderer.engine.features.vrm.driver import VrmDriver

    asset = importer.import_scene(bpy.context.evaluated_depsgraph_get(), expression_check=VrmDriver.preview_problem)
    rt = SceneRuntime(asset, CpuBackend())
    assert rt.initialize(), rt.last_error
    return rt


def make_vrm1(arm):
    """Turn Godette into a VRM 1.0 avatar: presets and a custom expression bound to her face."""
    ext = arm.data.vrm_addon_extension
    ext.spec_version = "1.0"
    ex = ext.vrm1.expressions

    def bind(expr, key, weight=1.0):
        b = expr.morph_target_binds.add()
        b.node.mesh_object_name = "Face"
        b.index = key
        b.weight = weight

    bind(ex.preset.angry, "angled_eyebrows")
    bind(ex.preset.blink, "blink_left")
    bind(ex.preset.blink, "blink_right")
    bind(ex.preset.aa, "ah")
    bind(ex.preset.happy, "look_up", 0.5)
    ex.preset.happy.override_blink = "block"
    ex.preset.happy.override_mouth = "blend"
    ex.preset.surprised.is_binary = True
    bind(ex.preset.surprised, "oh")
    custom = ex.custom.add()
    custom.custom_name = "wink"
    bind(custom, "blink_left")
    return ex
