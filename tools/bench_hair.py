"""Hair benchmark: F12 of a sphere with N hair strands (a ``CURVES`` object, P points per strand,
Blender's default Catmull-Rom resolution) with Stylized (ribbons built from the evaluated curves,
engine/blender/sources/hair.py) and Workbench in the same process, and the ribbon build alone for a second camera
(what a viewport orbit costs per frame).  Each engine renders once to warm up, then they take
turns for --runs timed renders; medians are reported.  Last line:
  bench-hair: strands=N points=P stylized_s=X workbench_s=Y ratio_workbench=X/Y ribbons_ms=Z
This is a benchmark, not a test: it asserts nothing.
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))


def build(strands: int, points: int):
    import bpy
    import numpy as np

    from conftest import add_camera, add_material, add_sun

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.render.resolution_x, scene.render.resolution_y, scene.render.resolution_percentage = 640, 480, 100
    add_camera(scene, location=(0.0, -8.0, 0.0))
    add_sun(scene, rotation=(0.6, 0.0, 0.3), strength=3.0)
    bpy.ops.mesh.primitive_uv_sphere_add(radius=1.0)
    bpy.context.object.data.materials.append(add_material("Skin", (0.8, 0.6, 0.5)))
    hc = bpy.data.hair_curves.new("Hair")
    hc.add_curves([points] * strands)
    rng = np.random.default_rng(1)
    d = rng.normal(size=(strands, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    t = np.linspace(0.0, 0.6, points)
    pos = d[:, None, :] * (1.0 + t[None, :, None]) + np.array([0.0, 0.0, -1.0]) * (t ** 2)[None, :, None]
    hc.position_data.foreach_set("vector", pos.reshape(-1).astype(np.float32))
    hc.materials.append(add_material("HairBrown", (0.35, 0.12, 0.03)))
    ob = bpy.data.objects.new("Hair", hc)
    scene.collection.objects.link(ob)
    return scene, ob


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--strands", type=int, default=10000)
    ap.add_argument("--points", type=int, default=8)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    from tools._bootstrap import load

    load()
    import bpy
    import numpy as np

    from stylized_renderer.engine.blender.sources import hair
    from stylized_renderer.engine.core.world.frame import CameraData

    scene, ob = build(args.strands, args.points)
    times = {"STYLIZED": [], "BLENDER_WORKBENCH": []}
    for engine in times:
        scene.render.engine = engine
        bpy.ops.render.render()             # warm-up
    for _ in range(args.runs):
        for engine, out in times.items():
            scene.render.engine = engine
            t0 = time.perf_counter()
            bpy.ops.render.render()
            out.append(time.perf_counter() - t0)
    dg = bpy.context.evaluated_depsgraph_get()
    read = hair.read_strands(ob.evaluated_get(dg), np.array(ob.matrix_world))
    if read is None:
        raise RuntimeError(f"the object '{ob.name}' has no hair strands")
    strands = hair.evaluate(read)
    view = np.eye(4)
    view[2, 3] = -8.0
    proj = np.array([[2.7, 0, 0, 0], [0, 3.6, 0, 0], [0, 0, -1.002, -0.2], [0, 0, -1, 0]])
    cam = CameraData(view=view, projection=proj, is_ortho=False)
    build_ms = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        hair.ribbon_primitives(strands, cam, 480, False, ["HairBrown"])
        build_ms.append((time.perf_counter() - t0) * 1e3)
    st, wb = statistics.median(times["STYLIZED"]), statistics.median(times["BLENDER_WORKBENCH"])
    print(f"bench-hair: strands={args.strands} points={args.points} evaluated_points={strands.point_count} "
          f"stylized_s={st:.3f} workbench_s={wb:.3f} ratio_workbench={st / wb:.2f} "
          f"ribbons_ms={statistics.median(build_ms):.1f}", flush=True)


if __name__ == "__main__":
    main()
