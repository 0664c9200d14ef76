"""Static casters' shadow depth is kept between frames (engine/gpu/passes/shadow_cache.py, issue 37).

A ground, a box and a ball (static casters), a skinned two-bone column (a moving caster), a sun
(cascades) and a point lamp (a cube map), F12 through bpy.ops: the second F12 redraws no static
tile and draws only the character over the kept depth; bending the character redraws no static
tile and copies only the character's footprints; moving the box redraws the tiles it reaches (not all); every warm frame is pixel for pixel
the frame drawn without the cache (every caster into every tile it reaches).
"""
from __future__ import annotations

import math

import bpy
import numpy as np
import pytest

import conftest as C
from support.depth_caches import without_depth_caches
from support.two_bone_rig import bend, two_bone_rig


@pytest.fixture(autouse=True)
def _free_kept_session():
    """Free the kept final session after each test (``_fresh`` takes its depth caches away for
    one F12), so no later test (another file's F12) renders with it."""
    yield
    from stylized_renderer.engine.blender import render_engine

    render_engine.free_final_session()


def _scene(scene):
    scene.render.resolution_x, scene.render.resolution_y = 96, 72
    scene.stylized.outlines = False
    bpy.ops.mesh.primitive_plane_add(size=12.0)
    bpy.context.active_object.data.materials.append(C.add_material("Grey", (0.6, 0.6, 0.6, 1.0)))
    bpy.ops.mesh.primitive_uv_sphere_add(segments=16, ring_count=8, radius=0.45, location=(-1.3, -0.2, 0.8))
    bpy.context.active_object.name = "Ball"
    bpy.ops.mesh.primitive_cube_add(size=0.7, location=(1.4, -0.6, 0.35))
    box = bpy.context.active_object
    box.name = "Box"
    bpy.ops.mesh.primitive_cube_add(size=1.0, location=(0.0, 0.0, 1.0))
    body = bpy.context.active_object
    body.scale = (0.3, 0.3, 2.0)
    bpy.ops.object.transform_apply(scale=True)
    bpy.ops.object.mode_set(mode="EDIT")
    bpy.ops.mesh.subdivide(number_cuts=3)
    bpy.ops.object.mode_set(mode="OBJECT")
    rig = two_bone_rig(scene, body)
    rig.location = (0.2, 1.2, 0.0)
    C.add_sun(scene, rotation=(math.radians(40.0), 0.0, math.radians(30.0)), strength=2.0)
    ld = bpy.data.lights.new("Lamp", "POINT")
    ld.energy = 150.0
    lamp = bpy.data.objects.new("Lamp", ld)
    lamp.location = (0.3, -0.4, 1.7)
    scene.collection.objects.link(lamp)
    C.add_camera(scene, location=(0.0, -9.0, 6.5), rotation=(math.radians(52.0), 0.0, 0.0), lens=35.0)
    return rig, box


def _f12(scene):
    from tools import render_capture

    px = C.render_scene(scene).copy()
    return px, dict(render_capture.LAST_RENDER["pipeline"])


def _fresh(scene):
    """The same frame drawn without the cache (every caster into every tile it reaches, as before
    the cache): the kept session's shadow passes lose their depth caches for one F12."""
    with without_depth_caches():
        px, st = _f12(scene)
    assert "shadow_static_draws" not in st
    return px, st


def _atlas_texels() -> int:
    from stylized_renderer.engine.blender import render_engine

    session = render_engine.kept_final_session()
    assert session is not None, "F12 keeps its session"
    pipe = session.pipeline
    assert pipe is not None, "the kept session has its pipeline"
    return sum(p._size[0] * p._size[1] for p in (pipe.shadow, pipe.local_shadow) if p._size is not None)


def test_static_depth_is_kept_and_redrawn_only_where_a_static_caster_moved(empty_scene):
    scene = empty_scene
    rig, box = _scene(scene)
    _, first = _f12(scene)
    assert first["local_shadows"] == 1 and first["shadow_static_tiles_drawn"] >= 7   # 3 cascades + 6 faces (some empty)
    px, second = _f12(scene)
    second_px = px
    assert second["shadow_static_tiles_drawn"] == 0 and second["shadow_static_draws"] == 0
    assert second["shadow_moving_draws"] > 0                # the skinned column, over the kept depth
    assert np.array_equal(px, _fresh(scene)[0])
    _, again = _f12(scene)                # (a frame drawn without the cache: the atlas is redrawn)
    assert again["shadow_static_tiles_drawn"] == first["shadow_static_tiles_drawn"]

    bend(rig, "upper", 80.0)                               # only the character moves
    bpy.context.view_layer.update()
    px, bent = _f12(scene)
    assert bent["shadow_static_tiles_drawn"] == 0 and bent["shadow_static_draws"] == 0
    assert bent["shadow_moving_draws"] > 0
    # only the column's footprints are copied (back, then saved), not the atlases
    assert 0 < bent["shadow_restored_texels"] < 0.5 * _atlas_texels()
    ref, _ = _fresh(scene)
    assert np.array_equal(px, ref)
    assert not np.array_equal(px, second_px)                # (the bent column's shadow moved)

    _f12(scene)
    box.location.x += 0.4                                  # a static caster moves
    bpy.context.view_layer.update()
    px, moved = _f12(scene)
    assert 0 < moved["shadow_static_tiles_drawn"] < first["shadow_static_tiles_drawn"] + 3
    assert moved["shadow_static_draws"] > 0
    assert np.array_equal(px, _fresh(scene)[0])


def test_a_moving_static_object_is_drawn_over_the_kept_depth(empty_scene):
    """An object moving frame after frame stops redrawing the static tiles: after the frame it
    starts moving in (it leaves the static set), it is drawn with the moving casters."""
    scene = empty_scene
    _rig, box = _scene(scene)
    _f12(scene)
    _f12(scene)
    redrawn = []
    for _ in range(3):
        box.location.y += 0.2
        bpy.context.view_layer.update()
        px, st = _f12(scene)
        redrawn.append(st["shadow_static_tiles_drawn"])
    assert redrawn[0] > 0 and redrawn[1:] == [0, 0], redrawn
    assert np.array_equal(px, _fresh(scene)[0])


def test_a_moving_caster_over_most_of_the_atlas_draws_every_caster_directly(empty_scene):
    """Footprints over more than MAX_FOOTPRINT_SHARE of the tiles (here the column scaled to cover
    the lamps' faces and the cascades): the frame draws every caster directly, keeps nothing, and
    the pictures stay those drawn without the cache; back to its size, the footprints are kept."""
    scene = empty_scene
    rig, _box = _scene(scene)
    _f12(scene)
    rig.scale = (12.0, 12.0, 1.4)
    bpy.context.view_layer.update()
    px, big = _f12(scene)
    assert big["shadow_bypassed"] >= 1
    assert np.array_equal(px, _fresh(scene)[0])
    rig.scale = (1.0, 1.0, 1.0)
    bpy.context.view_layer.update()
    _f12(scene)
    px, small = _f12(scene)
    assert small["shadow_bypassed"] == 0 and small["shadow_restored_texels"] > 0
    assert np.array_equal(px, _fresh(scene)[0])
