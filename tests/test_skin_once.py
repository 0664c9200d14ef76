"""Skin once per frame (engine/gpu/passes/skin_once.py, issue #37 item 2): a frame drawn with
more than one anti-aliasing sample morphs and skins every skinned vertex once, and the shadow,
forward and outline passes and every coverage sample's id draws fetch the result by vertex id.

- The skinning work of a frame does not grow with the sample count (real F12s at 2 and 8
  samples: the draws whose vertex stage skins are the skin pass's, as many at 8 as at 2); with
  the mechanism off it grows with every sample.
- The pictures equal the per-pass skinning (1e-5) on a scene of every deformation layout: a
  skinned sphere with a shader-composed shape key, a Preserve Volume arm, vertices with more
  than 8 influences and instanced linked duplicates; a fetch of another item's vertices (the
  blocks rotated by one item) changes the picture.
"""
from __future__ import annotations

import math

import bpy
import numpy as np

from conftest import ARTIFACTS, add_camera, add_egg_ball, add_sun, render_scene, save_png
from stylized_renderer.engine.core.world.scene_runtime import SceneRuntime
from stylized_renderer.engine.gpu.passes import skin_once
from tools import render_capture, scenes
from tools.bench_render import duplicate_linked

TOL = 1e-5


def _skinned_morph_ball(scene):
    """A sphere with a strong shape key, skinned to a two-bone armature that bends it."""
    arm = scenes.make_armature("BallRig", [("Low", None, (0, 0, -1.0), (0, 0, 0.0)),
                                           ("High", "Low", (0, 0, 0.0), (0, 0, 1.2))], scene)
    arm.location = (-0.5, 0.5, 0.3)
    ob = add_egg_ball(scene, "Ball", segments=(24, 12), radius=0.9, value=0.8)
    ob.location = arm.location
    me = ob.data
    mat = bpy.data.materials.new("BallMat")
    p = mat.stylized_mtoon
    p.enabled = True
    p.base_color = (0.9, 0.7, 0.2, 1.0)
    p.shade_color = (0.2, 0.1, 0.4)
    p.outline_width_mode = "worldCoordinates"
    p.outline_width = 0.03
    me.materials.append(mat)
    co = np.empty((len(me.vertices), 3), np.float32)
    me.vertices.foreach_get("co", co.ravel())
    w_high = np.clip((co[:, 2] + 0.3) / 0.6, 0.0, 1.0)
    all_v = np.arange(len(me.vertices))
    scenes.skin_to(ob, arm, {"Low": (all_v, 1.0 - w_high), "High": (all_v, w_high)})
    hb = arm.pose.bones["High"]
    hb.rotation_mode = "XYZ"
    hb.rotation_euler = (0.6, 0.0, 0.3)
    return arm, ob


def _scene(scene, samples: int):
    from support.deform_rigs import build_arm

    scene.render.resolution_x, scene.render.resolution_y = 240, 160
    scene.render.resolution_percentage = 100
    scene.stylized.render_samples = samples
    build_arm()                                               # Preserve Volume ("general")
    inf_arm, _ob = scenes.build_many_influences(counts=(2, 9, 12, 20))   # > 8 influences
    inf_arm.location = (-2.0, 0.0, 0.5)
    for b in inf_arm.pose.bones:
        b.rotation_mode = "XYZ"
        b.rotation_euler = (0.2, 0.1, 0.0)
    _skinned_morph_ball(scene)
    arm = scenes.build_character(scene)[0]
    arm.location = (2.5, 0.0, 0.0)
    for k in (1, 2, 3):                                       # instanced linked duplicates
        duplicate_linked(arm, (0.8 * k, 0.5, 0.0), f".crowd{k}")
    add_camera(scene, location=(1.8, -11.0, 1.3), rotation=(math.radians(90), 0.0, 0.0))
    add_sun(scene, rotation=(0.6, 0.2, 0.3), strength=3.0)
    scene.stylized.shadows = scene.stylized.outlines = True
    scene.frame_set(8)


def _render(scene, monkeypatch, on: bool, samples: int | None = None):
    monkeypatch.setattr(skin_once, "ENABLED", on)
    if samples is not None:
        scene.stylized.render_samples = samples
    img = render_scene(scene).copy()
    return img, dict(render_capture.LAST_RENDER["pipeline"])


def test_one_skinning_per_frame_whatever_the_sample_count(empty_scene, monkeypatch):
    scene = empty_scene
    _scene(scene, 2)
    _img, two = _render(scene, monkeypatch, True, 2)
    _img, eight = _render(scene, monkeypatch, True, 8)
    # the skin pass is the only vertex stage that skins: one draw per vertex buffer and layout
    assert two["skin_once_draws"] > 0 and two["skin_once_vertices"] > 1000, two
    assert eight["skinning_draws"] == two["skinning_draws"] == eight["skin_once_draws"], (two, eight)
    # per-pass skinning (the mechanism off): every coverage sample skins again
    _img, off2 = _render(scene, monkeypatch, False, 2)
    _img, off8 = _render(scene, monkeypatch, False, 8)
    assert off8["skin_once_draws"] == 0
    assert off8["skinning_draws"] > off2["skinning_draws"] > two["skinning_draws"], (off2, off8)


def test_skin_once_equals_per_pass_skinning(empty_scene, monkeypatch):
    monkeypatch.setattr(SceneRuntime, "default_morph_policy", "shader")
    scene = empty_scene
    _scene(scene, 4)
    off, off_stats = _render(scene, monkeypatch, False)
    on, stats = _render(scene, monkeypatch, True)
    save_png(on, ARTIFACTS / "skin_once_on.png")
    assert off_stats["skin_once_vertices"] == 0
    assert stats["skin_once_vertices"] > 1000 and stats["instanced_draws"] > 0, stats
    assert render_capture.LAST_RENDER["stats"].get("shader_morphs", 0) >= 1
    assert (on[..., :3].max(axis=-1) > 0.05).sum() > 2000
    assert np.abs(on - off).max() <= TOL, np.abs(on - off).max()

    # a fetch of the wrong item's vertices (each item reads its neighbour's block) is seen
    real = skin_once.SkinOnce.run

    def shifted(self, inst):
        ok = real(self, inst)
        sel = np.flatnonzero(inst.vclass == inst.FETCH)
        inst.rows[sel, 5, 0] = np.roll(inst.rows[sel, 5, 0], 1)
        return ok

    monkeypatch.setattr(skin_once.SkinOnce, "run", shifted)
    wrong, _s = _render(scene, monkeypatch, True)
    save_png(wrong, ARTIFACTS / "skin_once_wrong.png")
    assert np.abs(wrong - on).max() > 0.1
