"""Lamp benchmark (issue 35): F12 of a night street, 64 point lamps on a 5 m grid over a 40 m
ground, against the same scene with 8 of them (every eighth lamp hidden from render: one lamp
per 10 x 20 m block), Stylized in the same process, taking turns (--runs each after a warm-up;
medians).  Every lamp lights through the clusters (engine/gpu/passes/clusters.py), so the cost
should follow the lamps that reach a pixel, not the lamps of the scene.  Last line:
  bench-lamps: lamps8_s=A lamps64_s=B ratio=B/A per_cluster_max=M per_cluster_mean=K
This is a benchmark, not a test: it asserts nothing.
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from tools import (
    _bootstrap,  # noqa: E402
    render_capture,  # noqa: E402,F401  (F12 results: the hook _bootstrap installs)
)

SHADOWS = True


def street(width: int, height: int, energy: float):
    """The night street: a 40 m ground, two rows of boxes (houses), 64 warm point lamps 4 m up on a
    5 m grid, a dark world, a camera looking down the street; returns (scene, lamps)."""
    import math

    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.render.engine = "STYLIZED"
    scene.render.resolution_x, scene.render.resolution_y = width, height
    scene.render.resolution_percentage = 100
    scene.view_settings.view_transform = "Standard"
    world = bpy.data.worlds.new("Night")
    world.use_nodes = True
    world.node_tree.nodes["Background"].inputs["Color"].default_value = (0.005, 0.006, 0.012, 1.0)
    scene.world = world
    grey = bpy.data.materials.new("Street")
    grey.diffuse_color = (0.5, 0.5, 0.5, 1.0)
    bpy.ops.mesh.primitive_plane_add(size=40.0)
    bpy.context.active_object.data.materials.append(grey)
    for k in range(8):
        for side in (-1, 1):
            bpy.ops.mesh.primitive_cube_add(size=3.0, location=(side * 12.0, -17.5 + 5.0 * k, 1.5))
            bpy.context.active_object.data.materials.append(grey)
    lamps = []
    for i in range(8):
        for j in range(8):
            data = bpy.data.lights.new(f"Lamp{i}{j}", "POINT")
            data.energy = energy
            data.color = (1.0, 0.8, 0.55)
            data.shadow_soft_size = 0.1
            data.use_shadow = SHADOWS
            ob = bpy.data.objects.new(f"Lamp{i}{j}", data)
            ob.location = (-17.5 + 5.0 * i, -17.5 + 5.0 * j, 4.0)
            scene.collection.objects.link(ob)
            lamps.append(ob)
    cam = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
    scene.collection.objects.link(cam)
    cam.location = (0.0, -32.0, 14.0)
    cam.rotation_euler = (math.radians(65.0), 0.0, 0.0)
    scene.camera = cam
    scene.stylized.render_samples = 1
    return scene, lamps


def f12(scene) -> float:
    import bpy

    t = time.perf_counter()
    bpy.ops.render.render(write_still=False, scene=scene.name)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=720)
    ap.add_argument("--energy", type=float, default=100.0, help="W per lamp (reach 10 m at the default threshold)")
    ap.add_argument("--png", default="", help="save the 64-lamp render here")
    args = ap.parse_args(sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:])
    _bootstrap.load(register=True)
    scene, lamps = street(args.width, args.height, args.energy)
    few = set(range(0, 64, 8))          # one lamp a column of the grid: 8 lamps

    def show(n):
        for k, ob in enumerate(lamps):
            ob.hide_render = n == 8 and k not in few

    times = {8: [], 64: []}
    for n in (8, 64):                   # warm-up (shader variants)
        show(n)
        f12(scene)
    for _ in range(args.runs):
        for n in (8, 64):
            show(n)
            times[n].append(f12(scene))
    stats = render_capture.LAST_RENDER.get("pipeline") or {}
    if args.png:
        import numpy as np
        pixels = render_capture.LAST_RENDER.get("pixels")
        if pixels is not None:
            import bpy
            img = bpy.data.images.new("bench_lamps", pixels.shape[1], pixels.shape[0], float_buffer=True)
            img.pixels.foreach_set(np.ascontiguousarray(pixels, np.float32).ravel())
            img.filepath_raw = args.png
            img.file_format = "PNG"
            img.save()
    a, b = statistics.median(times[8]), statistics.median(times[64])
    print(f"bench-lamps: lamps8_s={a:.3f} lamps64_s={b:.3f} ratio={b / a:.2f} "
          f"per_cluster_max={stats.get('lamps_per_cluster_max', 'nan')} "
          f"per_cluster_mean={stats.get('lamps_per_cluster_mean', 'nan')}")


if __name__ == "__main__":
    main()
