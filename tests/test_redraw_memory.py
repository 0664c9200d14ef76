"""Viewport redraws keep no Python memory, a leak Blender's own API would otherwise cause.

Blender keeps every Python wrapper made of the temporary object behind a curve's, text's,
surface's or metaball's generated mesh (``DepsgraphObjectInstance.object`` of that instance):
120 bytes each time it is read, never freed (4.5, 5.0 and 5.2; reading ``inst.parent`` or a real
object keeps nothing).  The session reads those meshes through their own objects
(engine/blender/sources/fallback.py ``own_geometry``), so redraws do not grow the process.
"""
from __future__ import annotations

import gc
import math
import tracemalloc

import bpy

from stylized_renderer.engine.gpu import util as gpu_util
from stylized_renderer.engine.blender.render_engine import draw_view
from test_trust import _every_kind, captured, session  # noqa: F401  (fixtures)
from test_viewport_draw import look_at, perspective


def test_redraws_of_every_object_kind_keep_no_python_memory(empty_scene, session, captured):  # noqa: F811
    """300 redraws (view_update's updates + draw_view, the timeline playing: a new frame every
    10th) of text, a bevelled curve and a metaball among every other object kind, after 400
    that warm the caches: the Python memory they leave is under 700 bytes a redraw.  Measured:
    150-350 (numpy's and Python's own small caches still settling); reading each generated
    instance's object three times a redraw, as before, left 1,350-1,500 (3 x 3 x 120 of them
    Blender's kept wrappers)."""
    scene = empty_scene
    _every_kind(scene)
    view, proj = look_at((0.0, -10.0, 0.5)), perspective(math.radians(45), 4 / 3)
    session.sync(bpy.context.evaluated_depsgraph_get())
    captured.take()

    def redraw(i):
        if i % 10 == 0:
            scene.frame_set(1 + (i // 10) % 20)
        session.sync(bpy.context.evaluated_depsgraph_get(), captured.take())
        return draw_view(session, bpy.context.evaluated_depsgraph_get(), view, proj, False, 64, 48)

    def run(n, start):
        return gpu_util.run_in_gpu_context(lambda: [redraw(start + i) and None for i in range(n)])

    run(400, 0)     # warm-up: shaders, caches (numpy's among them), every frame of the range seen twice
    n = 300
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        run(n, 200)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    names = {name for name, _r in session.stats["fallbacks"]}
    assert {"Txt", "Crv", "Meta"} <= names, names          # the generated meshes were drawn
    print(f"python memory kept: {grown / n:.1f} bytes a redraw")
    assert grown / n < 700.0, grown / n
