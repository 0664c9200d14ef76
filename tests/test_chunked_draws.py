"""Big static meshes drawn in spatial chunks (engine/gpu/chunks.py, issue 37).

A 180,000-triangle ground under a box, a sun (cascades) and a point lamp of short reach (a cube
map), F12 through bpy.ops: the ground is uploaded in chunks, and the camera's passes, the
cascades and the lamp's faces leave out the chunks they cannot see (the pipeline's
``chunks_culled``); the frame is pixel for pixel the one drawn with every chunk in every draw.
A longer lamp reach redraws the lamp's kept faces (their chunks depend on it); moving one
ground vertex (a re-uploaded mesh) redraws only the tiles that see its chunk.
"""
from __future__ import annotations

import math

import bpy
import numpy as np
import pytest

import conftest as C
from support.depth_caches import without_depth_caches


@pytest.fixture(autouse=True)
def _free_kept_session():
    yield
    from stylized_renderer.engine.blender import render_engine

    render_engine.free_final_session()


def _scene(scene):
    scene.render.resolution_x, scene.render.resolution_y = 128, 96
    scene.stylized.outlines = False
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=300, y_subdivisions=300, size=60.0)
    ground = bpy.context.active_object
    ground.name = "Ground"
    ground.data.materials.append(C.add_material("Grey", (0.6, 0.6, 0.6, 1.0)))
    bpy.ops.mesh.primitive_cube_add(size=0.8, location=(0.6, 0.4, 0.4))
    bpy.context.active_object.data.materials.append(C.add_material("Red", (0.8, 0.2, 0.2, 1.0)))
    C.add_sun(scene, rotation=(math.radians(40.0), 0.0, math.radians(30.0)), strength=2.0)
    ld = bpy.data.lights.new("Lamp", "POINT")
    ld.energy = 60.0
    ld.use_custom_distance = True
    ld.cutoff_distance = 5.0               # the lamp's reach: most of the ground lies beyond it
    lamp = bpy.data.objects.new("Lamp", ld)
    lamp.location = (-0.5, -0.6, 1.6)
    scene.collection.objects.link(lamp)
    C.add_camera(scene, location=(0.0, -7.0, 4.0), rotation=(math.radians(60.0), 0.0, 0.0), lens=35.0)


def _f12(scene):
    from tools import render_capture

    px = C.render_scene(scene).copy()
    return px, dict(render_capture.LAST_RENDER["pipeline"])


def test_passes_draw_only_the_chunks_they_see_and_the_frame_is_unchanged(empty_scene):
    scene = empty_scene
    _scene(scene)
    culled, st = _f12(scene)
    print(f"chunks: drawn {st.get('chunks_drawn')} culled {st.get('chunks_culled')}")
    assert st.get("chunks_culled", 0) > st.get("chunks_drawn", 0) > 0, st

    with without_depth_caches(chunk_culling=False):    # every chunk in every draw, every tile redrawn
        whole, st2 = _f12(scene)
    assert "chunks_culled" not in st2, st2
    C.save_png(culled, C.ARTIFACTS / "chunked_ground.png")
    lum = culled[..., :3].mean(-1)
    assert lum.std() > 0.02                     # a lit ground with shadows, not an empty frame
    assert np.array_equal(culled, whole), np.abs(culled - whole).max()


def test_a_lamp_reaching_farther_redraws_its_kept_faces(empty_scene):
    """The static depth cache (shadow_cache.py) keeps a face while its key holds; a face drew only
    the chunks within the lamp's reach, so a longer reach (and nothing else changed) must redraw
    it, as a fresh render would draw it."""
    scene = empty_scene
    _scene(scene)
    _f12(scene)
    _px, st = _f12(scene)
    assert st.get("shadow_static_tiles_drawn", 0) == 0, st          # kept
    bpy.data.lights["Lamp"].cutoff_distance = 40.0
    kept, st = _f12(scene)
    assert st.get("shadow_static_tiles_drawn", 0) >= 6, st           # the lamp's six faces
    fresh, _st = _fresh(scene)
    assert np.array_equal(kept, fresh), np.abs(kept - fresh).max()


def _fresh(scene):
    """The frame drawn with no kept shadow depth (every tile drawn)."""
    with without_depth_caches():
        return _f12(scene)


def test_an_edit_redraws_only_the_tiles_that_see_the_edited_chunk(empty_scene):
    scene = empty_scene
    _scene(scene)
    _f12(scene)
    ground = bpy.data.objects["Ground"]
    verts = ground.data.vertices
    far = int(np.argmax([v.co.x + v.co.y for v in verts]))        # the far corner (28 m from the lamp)
    verts[far].co.z += 0.5
    ground.data.update()
    kept, st = _f12(scene)
    drawn = st.get("shadow_static_tiles_drawn", 0)
    print(f"edit far from the lamp: {drawn} static tiles drawn")
    # the sun's three cascades and the lamp's six faces show the ground (8 tiles redrawn when the
    # key was the mesh's buffer); the far corner lies in the far cascades only (2 here) and
    # beyond the lamp's 5 m reach
    assert 1 <= drawn <= 3, st
    fresh, _st = _fresh(scene)
    assert np.array_equal(kept, fresh), np.abs(kept - fresh).max()
    # an edit near the box, inside the lamp's reach, redraws its faces that see it
    near = int(np.argmin([(v.co.x - 0.6) ** 2 + (v.co.y - 0.4) ** 2 for v in verts]))
    verts[near].co.z += 0.05
    ground.data.update()
    kept, st = _f12(scene)
    assert st.get("shadow_static_tiles_drawn", 0) >= 2, st
    fresh, _st = _fresh(scene)
    assert np.array_equal(kept, fresh), np.abs(kept - fresh).max()
