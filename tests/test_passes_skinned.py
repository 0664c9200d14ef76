"""Skinned geometry in every pass (scene level, F12 through bpy.ops): a two-bone bar whose upper
half (the "arm") is raised sideways.  The forward pixels, the shadow on the ground and the
outline ring all move with the pose.  Whether the session draws the object through the runtime's
GPU skinning (palette) or Blender's evaluated mesh, the same passes consume it."""
from __future__ import annotations

import math

import bpy
import numpy as np
import pytest

from conftest import ARTIFACTS, add_camera, add_mesh_object, add_sun, save_png
from support.two_bone_rig import bar_geometry, bend, two_bone_rig

GROUND_SHADE = (0.1, 0.2, 0.6)
OUTLINE = (0.0, 1.0, 0.0)
BAR_LIT = (0.9, 0.2, 0.2)


def mtoon_material(name, base, shade, outline_width=0.0):
    mat = bpy.data.materials.new(name)
    p = mat.stylized_mtoon
    p.enabled = True
    p.base_color = tuple(base) + (1.0,)
    p.shade_color = shade
    p.shading_toony = 0.95
    p.shading_shift = 0.0
    p.gi_equalization = 0.0
    if outline_width > 0:
        p.outline_width_mode = "worldCoordinates"
        p.outline_width = outline_width
        p.outline_color = OUTLINE
        p.outline_lighting_mix = 0.0
    return mat


def build_scene(scene, raised: bool):
    scene.render.resolution_x = 160
    scene.render.resolution_y = 160
    scene.stylized.fxaa = False
    scene.stylized.outlines = True
    scene.stylized.shadows = True
    add_camera(scene, location=(0.0, -4.0, 5.0), rotation=(math.radians(40), 0.0, 0.0))
    # strength pi W/m^2: MToon light colour 1 (E / pi, README "Light units"): the exact lit/shade colours
    add_sun(scene, rotation=(0.0, math.radians(20), 0.0), strength=math.pi)
    ground = mtoon_material("Ground", (0.8, 0.8, 0.8), GROUND_SHADE)
    add_mesh_object(scene, "Ground", [(-4, -4, 0), (4, -4, 0), (4, 4, 0), (-4, 4, 0)], [(0, 1, 2, 3)],
                    material=ground)
    bar_mat = mtoon_material("Bar", BAR_LIT, (0.4, 0.1, 0.1), outline_width=0.06)
    v, f = bar_geometry()
    bar = add_mesh_object(scene, "Bar", v, f, material=bar_mat)
    rig = two_bone_rig(scene, bar, names=("base", "arm"))
    bend(rig, "arm", -90.0 if raised else 0.0)                 # bone Z: sideways swing
    bpy.context.view_layer.update()
    return bar


def render_pose(render, raised):
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.render.engine = "STYLIZED"
    build_scene(scene, raised)
    px = render(scene)
    save_png(px, ARTIFACTS / f"skinned_{'raised' if raised else 'bind'}.png")
    from tools.render_capture import LAST_RENDER as last_render

    st = last_render["stats"]
    # the GPU path drew the skinned bar (not Blender's evaluated mesh through the fallback)
    assert st["fallbacks"] == [] and st["gpu_items"] >= 1, st
    return px


def near(px, colour, tol=2e-3):
    return np.abs(px[..., :3] - np.asarray(colour)).max(-1) < tol


@pytest.fixture(scope="module")
def poses():
    from conftest import ensure_registered, render_scene

    ensure_registered()
    bind = render_pose(render_scene, False)
    raised = render_pose(render_scene, True)
    return bind, raised


def _centroid(mask):
    return np.argwhere(mask).mean(0)


def test_skinned_forward_pixels_move(poses):
    bind, raised = poses
    a = near(bind, BAR_LIT, 0.02) | near(bind, (0.4, 0.1, 0.1), 0.02)
    b = near(raised, BAR_LIT, 0.02) | near(raised, (0.4, 0.1, 0.1), 0.02)
    assert a.sum() > 200 and b.sum() > 200
    assert (a ^ b).sum() > 200
    # the arm swings sideways: the bar's pixels move along the image's x
    assert abs(_centroid(b)[1] - _centroid(a)[1]) > 5


def test_skinned_shadow_moves(poses):
    bind, raised = poses
    a = near(bind, GROUND_SHADE)
    b = near(raised, GROUND_SHADE)
    assert a.sum() > 100 and b.sum() > 100, (a.sum(), b.sum())
    assert (a ^ b).sum() > 100
    assert abs(_centroid(b)[1] - _centroid(a)[1]) > 3 or abs(_centroid(b)[0] - _centroid(a)[0]) > 3


def test_skinned_outline_ring_moves(poses):
    bind, raised = poses
    a = near(bind, OUTLINE)
    b = near(raised, OUTLINE)
    assert a.sum() > 50 and b.sum() > 50, (a.sum(), b.sum())
    assert abs(_centroid(b)[1] - _centroid(a)[1]) > 5
