"""Final renders and the GPU context they draw in (issue 40: "Framebuffer is not bound").

Blender draws a final render in its Render's own GPU context and, in a window, frees that context
once the render is done and no compositor needs it (RE_FreeUnusedGPUResources), making a new one
for the next render.  The F12 session is kept between renders (render_engine.py), and an OpenGL
framebuffer does not move between contexts: the second render of a GUI session failed with
"Framebuffer is not bound".  ``FramePipeline.follow_gpu_context`` drops the targets when a render
runs in another context.  Headless Blender keeps the Render's context, so these tests check both
sides through the real F12 / Ctrl+F12: renders in one context keep their targets (no needless
rebuild), and a render that finds its targets from another context (the mark the session keeps of
its context no longer current, as after the GUI freed it) makes them again and draws the same
picture.  The GUI journeys `render` then `render_anim` (docs/gui-tests.md) run the real case.
"""
from __future__ import annotations

import bpy
import numpy as np

import conftest as C
from tools import render_capture


def _scene(scene):
    """A sun-lit, shadowed cube that moves over frames 1-2, anti-aliased (shadow, colour and
    accumulation targets all in use)."""
    C.add_camera(scene)
    C.add_sun(scene, rotation=(0.6, 0.2, 0.0))
    v, f = C.cube_geometry(2.0)
    cube = C.add_mesh_object(scene, "Cube", v, f, material=C.add_material("Red", (0.8, 0.1, 0.1)))
    cube.keyframe_insert("location", frame=1)
    cube.location = (0.5, 0.0, 0.0)
    cube.keyframe_insert("location", frame=2)
    scene.frame_start, scene.frame_end = 1, 2
    scene.frame_set(1)
    scene.stylized.render_samples = 2
    return cube


def _kept():
    from stylized_renderer.engine.blender import render_engine

    session = render_engine.kept_final_session()
    assert session is not None, "no final-render session is kept after the render"
    return session


def test_renders_in_one_gpu_context_keep_their_targets(empty_scene, render, tmp_path):
    scene = empty_scene
    _scene(scene)
    render(scene)
    session = _kept()
    assert session.pipeline is not None
    color, shadow = session.pipeline._color, session.pipeline.shadow.texture
    assert color is not None and shadow is not None
    render(scene)
    scene.render.filepath = str(tmp_path / "f_####")
    bpy.ops.render.render(animation=True, scene=scene.name)     # Ctrl+F12 after the F12s
    assert sorted(p.name for p in tmp_path.glob("f_*.png")) == ["f_0001.png", "f_0002.png"]
    assert _kept() is session and session.pipeline.gpu_context.changes == 0
    assert session.pipeline._color is color, "an F12 in the same GPU context remade the targets"


def test_render_in_another_gpu_context_remakes_targets(empty_scene, render, tmp_path):
    scene = empty_scene
    _scene(scene)
    first = render(scene).copy()
    session = _kept()
    assert session.pipeline is not None
    color, fb = session.pipeline._color, session.pipeline._fb_main
    # what the GUI does between two renders: the Render's GPU context is freed and the next render
    # gets a new one; the session's mark of the context its targets were made in is then stale
    session.pipeline.gpu_context._mark = object()
    again = render(scene)
    assert session.pipeline.gpu_context.changes == 1
    assert session.pipeline._color is not color and session.pipeline._fb_main is not fb
    assert np.array_equal(again, first), "the remade targets draw another picture"
    session.pipeline.gpu_context._mark = object()
    scene.render.filepath = str(tmp_path / "f_####")
    bpy.ops.render.render(animation=True, scene=scene.name)     # Ctrl+F12 in a new context
    assert sorted(p.name for p in tmp_path.glob("f_*.png")) == ["f_0001.png", "f_0002.png"]
    assert session.pipeline.gpu_context.changes == 2, "the frames of one Ctrl+F12 share their context"
    assert "pixels" in render_capture.LAST_RENDER
