"""The small scene of the compositing tests (issue 26/27): a sphere, a cube and a ground plane
under a sun and a bright world, seen by a perspective camera; helpers to render it with any
engine into a written EXR and read that file back (tests/support/exr_read.py); ``interior`` a
mask without its border pixels (the pass tests compare masks of different engines with it)."""
from __future__ import annotations

import math

import bpy
import numpy as np

import conftest as C
from support.exr_read import layer_pass, read_exr

W, H = 96, 72


def stage(scene, world=0.8):
    """Sphere ('Ball', in collection 'Character'), cube ('Box'), ground ('Ground'), sun, camera."""
    scene.render.resolution_x = W
    scene.render.resolution_y = H
    scene.view_settings.view_transform = "Standard"
    w = bpy.data.worlds.new("World")
    w.use_nodes = True
    w.node_tree.nodes["Background"].inputs["Color"].default_value = (world, world, world, 1.0)
    scene.world = w
    char = bpy.data.collections.new("Character")
    scene.collection.children.link(char)
    bpy.ops.mesh.primitive_uv_sphere_add(segments=32, ring_count=16, radius=1.0, location=(-0.8, 0.0, 1.0))
    ball = bpy.context.active_object
    ball.name = "Ball"
    for coll in list(ball.users_collection):
        coll.objects.unlink(ball)
    char.objects.link(ball)
    ball.data.materials.append(C.add_material("Red", (0.8, 0.1, 0.1, 1.0)))
    bpy.ops.mesh.primitive_cube_add(size=1.2, location=(1.2, 0.6, 0.6))
    box = bpy.context.active_object
    box.name = "Box"
    box.data.materials.append(C.add_material("Blue", (0.1, 0.2, 0.8, 1.0)))
    bpy.ops.mesh.primitive_plane_add(size=8.0, location=(0.0, 0.0, 0.0))
    ground = bpy.context.active_object
    ground.name = "Ground"
    ground.data.materials.append(C.add_material("Grey", (0.5, 0.5, 0.5, 1.0)))
    C.add_sun(scene, rotation=(math.radians(40), math.radians(20), 0.0), strength=3.0)
    C.add_camera(scene, location=(0.0, -7.0, 2.5), rotation=(math.radians(78), 0.0, 0.0))
    return ball, box, ground


def exr_settings(scene, path, multilayer=True):
    imf = scene.render.image_settings
    if multilayer:
        if hasattr(imf, "media_type"):
            imf.media_type = "MULTI_LAYER_IMAGE"
        else:
            imf.file_format = "OPEN_EXR_MULTILAYER"
    else:
        if hasattr(imf, "media_type"):
            imf.media_type = "IMAGE"
        imf.file_format = "OPEN_EXR"
    if hasattr(imf, "use_exr_interleave"):
        imf.use_exr_interleave = True      # one part (tests/support/exr_read.py reads single-part files)
    imf.exr_codec = "NONE"
    imf.color_depth = "32"
    scene.render.filepath = str(path)


def render_exr(scene, path, engine="STYLIZED", multilayer=True, samples=4) -> dict:
    """F12 with ``engine`` written to ``path`` (EXR, uncompressed); the file's channels."""
    old = scene.render.engine
    scene.render.engine = C.EEVEE if engine == "EEVEE" else engine
    if engine == "EEVEE":
        scene.eevee.taa_render_samples = samples
    elif engine == "CYCLES":
        scene.cycles.samples = samples
        scene.cycles.device = "CPU"
    exr_settings(scene, path, multilayer)
    bpy.ops.render.render(write_still=True, scene=scene.name)
    scene.render.engine = old
    return read_exr(path)


def combined(ch, layer="ViewLayer"):
    return layer_pass(ch, f"{layer}.Combined")


def coverage_iou(a, b) -> float:
    a = np.asarray(a, bool)
    b = np.asarray(b, bool)
    u = np.count_nonzero(a | b)
    return 1.0 if u == 0 else np.count_nonzero(a & b) / u


def interior(mask):
    """``mask`` without its one-pixel border (edges differ by anti-aliasing between engines)."""
    m = np.asarray(mask, bool)
    out = m.copy()
    out[1:] &= m[:-1]
    out[:-1] &= m[1:]
    out[:, 1:] &= m[:, :-1]
    out[:, :-1] &= m[:, 1:]
    return out
