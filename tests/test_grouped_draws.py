"""Render speed paths (issues 12, 15): the shared final-render session, one batch per primitive
for linked duplicates, grouped (instanced) draws that give the same pixels as drawing each
instance alone."""
from __future__ import annotations

import bpy
import numpy as np
import pytest

from conftest import render_scene
from stylized_renderer.engine.blender import render_engine
from stylized_renderer.engine.gpu.passes import instancing
from support.crowds import character_crowd, last_pipeline_stats
from tools import render_capture  # noqa: E402  (F12 results: the hook the tests install)
from tools.bench_render import add_linked_duplicates


@pytest.fixture
def no_instancing(monkeypatch):
    def off():
        monkeypatch.setattr(instancing, "ENABLED", False)
    return off


def test_linked_duplicates_draw_one_batch_per_primitive(empty_scene):
    """N linked duplicates: the number of batches and draw calls does not grow with N."""
    scene = empty_scene
    character_crowd(scene, 1)
    render_scene(scene)
    one = last_pipeline_stats()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.render.engine = "STYLIZED"
    scene.render.resolution_x, scene.render.resolution_y = 160, 120
    character_crowd(scene, 5)
    render_scene(scene)
    five = last_pipeline_stats()
    assert five["items"] == 5 * one["items"], (one, five)
    assert five["batches_drawn"] == one["batches_drawn"], (one, five)
    assert five["draw_calls"] == one["draw_calls"], (one, five)
    assert five["instanced_draws"] > 0
    kept = render_engine.kept_final_session()
    assert kept is not None and kept.backend is not None
    backend = kept.backend
    assert backend.stream_uploads == one["batches_drawn"]


def test_grouped_draws_match_each_instance_drawn_alone(empty_scene, no_instancing):
    """The instanced frame equals the frame with every item drawn by its own call, and a
    character of the crowd matches the same character rendered without the others (spot check)."""
    scene = empty_scene
    scene.render.resolution_x, scene.render.resolution_y = 320, 160
    chars = character_crowd(scene, 4)
    grouped = render_scene(scene).copy()
    stats = last_pipeline_stats()
    no_instancing()
    # a new session: its shadow atlases draw every caster again, as the first render's did (the
    # kept one would draw only the moving ones over the static depth it kept)
    from stylized_renderer.engine.blender import render_engine

    render_engine.free_final_session()
    single = render_scene(scene).copy()
    alone = last_pipeline_stats()
    assert alone["instanced_draws"] == 0 and stats["instanced_draws"] > 0
    assert 4 * stats["draw_calls"] == alone["draw_calls"], (stats, alone)
    assert np.abs(grouped - single).max() <= 1e-6
    # each spot-checked character alone (the others hidden): its pixels are the crowd's there
    bg = grouped[0, 0].copy()
    for k in (0, 2, 3):
        for j, (rig, objs) in enumerate(chars):
            for ob in [rig] + objs:
                ob.hide_render = j != k
        alone = render_scene(scene).copy()
        mask = np.abs(alone - bg).max(axis=2) > 1e-4
        assert mask.sum() > 200, k
        d = np.abs(alone[mask] - grouped[mask]).max(axis=1)
        assert float(d.max()) <= 1e-6, (k, float(d.max()), int((d > 1e-6).sum()))   # every pixel


def test_demo_crowd_grouped_equals_single(empty_scene, no_instancing):
    """The demo character (skinned, shader-composed face morphs, bone-parented wand) and 3 linked
    duplicates: grouped draws give the same pixels as drawing each item alone."""
    from demo.character import build_demo_scene

    scene = empty_scene
    build_demo_scene(scene)
    scene.render.resolution_x, scene.render.resolution_y = 240, 180
    render_scene(scene)
    one = last_pipeline_stats()
    add_linked_duplicates(scene, 3)
    grouped = render_scene(scene).copy()
    stats = last_pipeline_stats()
    # the face's shape keys rebuilt on the CPU at the same values share one stream per primitive
    assert stats["items"] > 3 * one["items"] and stats["batches_drawn"] == one["batches_drawn"], (one, stats)
    no_instancing()
    single = render_scene(scene).copy()
    alone = last_pipeline_stats()
    assert stats["instanced_draws"] > 0 and stats["draw_calls"] < alone["draw_calls"], (stats, alone)
    assert np.abs(grouped - single).max() <= 1e-6


def test_f12_reuses_the_scene_session_and_sees_edits(empty_scene):
    """A second F12 of an unchanged scene keeps the runtime (no rebuild); an edit between two F12
    renders is drawn; another scene gets its own session."""
    scene = empty_scene
    chars = character_crowd(scene, 1)
    first = render_scene(scene).copy()
    s1 = render_engine.kept_final_session()
    reuses = render_capture.LAST_RENDER["stats"]["runtime_reuses"]
    again = render_scene(scene).copy()
    assert render_engine.kept_final_session() is s1
    assert render_capture.LAST_RENDER["stats"]["runtime_reuses"] == reuses + 1
    assert np.array_equal(first, again)
    chars[0][0].pose.bones["Spine"].rotation_euler = (-0.6, 0.0, -0.4)
    edited = render_scene(scene).copy()
    assert np.abs(edited - first).max(axis=2).__gt__(0.05).sum() > 40
    other = bpy.data.scenes.new("Other")
    other.render.engine = "STYLIZED"
    other.render.resolution_x, other.render.resolution_y = 64, 48
    other.camera = scene.camera
    other.collection.objects.link(scene.camera)
    render_scene(other)
    assert render_engine.kept_final_session() is not s1


def test_shader_morph_instances_grouped_equal_single(empty_scene, no_instancing, monkeypatch):
    """Shader-composed face morphs of linked duplicates: one shared weights texture with a base
    per instance gives the same pixels as each instance drawn with its own weights."""
    from demo.character import build_demo_scene
    from stylized_renderer.engine.core.world.scene_runtime import SceneRuntime

    monkeypatch.setattr(SceneRuntime, "default_morph_policy", "shader")
    scene = empty_scene
    build_demo_scene(scene)
    add_linked_duplicates(scene, 3)
    scene.render.resolution_x, scene.render.resolution_y = 240, 180
    grouped = render_scene(scene).copy()
    stats = last_pipeline_stats()
    assert render_capture.LAST_RENDER["stats"]["shader_morphs"] > 0
    no_instancing()
    single = render_scene(scene).copy()
    assert stats["instanced_draws"] > 0 and stats["draw_calls"] < last_pipeline_stats()["draw_calls"]
    assert np.abs(grouped - single).max() <= 1e-6
