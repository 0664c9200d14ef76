"""Skin once per frame (engine/passes/skin_once.py, issue #14, off by default): with the flag on,
every skinned item is morphed and skinned once into a texture and the forward, outline and
shadow passes fetch the result by vertex id; the frame must equal the per-pass skinning (1e-5).
Scenes: a skinned sphere with a shader-composed shape key, a Preserve Volume arm, vertices with
more than 8 influences and instanced linked duplicates.  A fetch that reads another item's
vertices (the skinned bases permuted) must change the picture."""
from __future__ import annotations

import math

import bpy
import numpy as np

from conftest import ARTIFACTS, add_camera, add_egg_ball, add_sun, render_scene, save_png
from stylized_renderer.engine import render_engine
from stylized_renderer.engine.passes import skin_once
from stylized_renderer.engine.world.scene_runtime import SceneRuntime
from tools import scenes
from tools.bench_render import duplicate_linked
from tools import render_capture  # noqa: E402  (F12 results: the hook the tests install)

TOL = 1e-5


def _skinned_morph_ball(scene):
    """A sphere with a strong shape key, skinned to a two-bone armature that bends it."""
    arm = scenes.make_armature("BallRig", [("Low", None, (0, 0, -1.0), (0, 0, 0.0)),
                                           ("High", "Low", (0, 0, 0.0), (0, 0, 1.2))], scene)
    arm.location = (-0.5, 0.5, 0.3)
    ob = add_egg_ball(scene, segments=(24, 12), radius=0.9, value=0.8)
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
    z = co[:, 2]
    w_high = np.clip((z + 0.3) / 0.6, 0.0, 1.0)
    all_v = np.arange(len(me.vertices))
    scenes.skin_to(ob, arm, {"Low": (all_v, 1.0 - w_high), "High": (all_v, w_high)})
    hb = arm.pose.bones["High"]
    hb.rotation_mode = "XYZ"
    hb.rotation_euler = (0.6, 0.0, 0.3)
    return arm, ob


def _scene(scene):
    from test_preserve_volume import build_arm

    scene.render.resolution_x, scene.render.resolution_y = 240, 160
    scene.render.resolution_percentage = 100
    scene.stylized.fxaa = False
    build_arm()                                               # Preserve Volume ("general")
    inf_arm, _ob = scenes.build_many_influences(counts=(2, 9, 12, 20))   # > 8 influences
    inf_arm.location = (-2.0, 0.0, 0.5)
    for b in inf_arm.pose.bones:
        b.rotation_mode = "XYZ"
        b.rotation_euler = (0.2, 0.1, 0.0)
    _skinned_morph_ball(scene)
    chars = [scenes.build_character(scene)]
    chars[0][0].location = (2.5, 0.0, 0.0)
    for k in (1, 2, 3):                                       # instanced linked duplicates
        duplicate_linked(chars[0][0], (0.8 * k, 0.5, 0.0), f".crowd{k}")
    add_camera(scene, location=(1.8, -11.0, 1.3), rotation=(math.radians(90), 0.0, 0.0))
    add_sun(scene, rotation=(0.6, 0.2, 0.3), strength=3.0)
    scene.stylized.shadows = scene.stylized.outlines = True
    scene.frame_set(8)


def _render(scene, monkeypatch, on: bool):
    monkeypatch.setattr(skin_once, "ENABLED", on)
    img = render_scene(scene).copy()
    return img, dict(render_capture.LAST_RENDER["pipeline"])


def test_skin_once_equals_per_pass_skinning(empty_scene, monkeypatch):
    monkeypatch.setattr(SceneRuntime, "default_morph_policy", "shader")
    scene = empty_scene
    _scene(scene)
    off, off_stats = _render(scene, monkeypatch, False)
    on, stats = _render(scene, monkeypatch, True)
    save_png(on, ARTIFACTS / "skin_once_on.png")
    save_png(off, ARTIFACTS / "skin_once_off.png")
    assert off_stats["skin_once_vertices"] == 0
    assert stats["skin_once_vertices"] > 1000 and stats["skin_once_draws"] > 0, stats
    assert stats["instanced_draws"] > 0, stats
    assert render_capture.LAST_RENDER["stats"].get("shader_morphs", 0) >= 1
    assert (on[..., :3].max(axis=-1) > 0.05).sum() > 2000
    assert np.abs(on - off).max() <= TOL, np.abs(on - off).max()


def test_skin_once_wrong_vertices_fail(empty_scene, monkeypatch):
    """The comparison above sees a fetch of the wrong item: the skinned bases rotated by one item
    after the skin pass (every item reads its neighbour's block) change the picture."""
    monkeypatch.setattr(SceneRuntime, "default_morph_policy", "shader")
    scene = empty_scene
    _scene(scene)
    real = skin_once.SkinOnce.run

    def shifted(self, inst):
        ok = real(self, inst)
        sel = np.flatnonzero(inst.vclass == inst.FETCH)
        inst.rows[sel, 4, 3] = np.roll(inst.rows[sel, 4, 3], 1)
        return ok

    right, _s = _render(scene, monkeypatch, True)
    monkeypatch.setattr(skin_once.SkinOnce, "run", shifted)
    wrong, _s = _render(scene, monkeypatch, True)
    save_png(wrong, ARTIFACTS / "skin_once_wrong.png")
    assert np.abs(wrong - right).max() > 0.1
