"""Render benchmark: F12 of the demo character scene at 1280x720 with shadows and outlines, timed
against Workbench and EEVEE (BLENDER_EEVEE, EEVEE Next in 5.0) on the same scene in the same
process.  Each engine renders once to warm up (shader compilation), then the median of --runs
timed renders is reported.  Uses demo/character.py's build_demo_scene() when it exists, otherwise
a generated skinned-ish scene.  Last line:
  bench-render: stylized_s=X workbench_s=Y eevee_s=Z ratio_workbench=R1 ratio_eevee=R2
This is a benchmark, not a test: it asserts nothing.
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _bootstrap  # noqa: E402


def build_scene():
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    try:
        from demo.character import build_demo_scene
    except ImportError:
        build_demo_scene = None
    if build_demo_scene is not None:
        build_demo_scene(scene)
        return scene, "demo character"
    return _generated_scene(scene), "generated"


def _generated_scene(scene):
    """A subdivided capsule-ish body on an armature, a ground plane, a sun and a camera."""
    import math

    import bpy

    bpy.ops.mesh.primitive_uv_sphere_add(segments=96, ring_count=64, radius=0.5, location=(0, 0, 1.0))
    body = bpy.context.active_object
    body.scale = (0.6, 0.5, 1.6)
    bpy.ops.mesh.primitive_plane_add(size=10)
    bpy.ops.object.armature_add(location=(0, 0, 0.2))
    rig = bpy.context.active_object
    body.parent = rig
    mod = body.modifiers.new("Armature", "ARMATURE")
    mod.object = rig
    g = body.vertex_groups.new(name="Bone")
    g.add(list(range(len(body.data.vertices))), 1.0, "REPLACE")
    mat = bpy.data.materials.new("Body")
    body.data.materials.append(mat)
    if hasattr(mat, "stylized_mtoon"):
        mat.stylized_mtoon.enabled = True
        mat.stylized_mtoon.outline_width_mode = "worldCoordinates"
        mat.stylized_mtoon.outline_width = 0.01
    bpy.ops.object.light_add(type="SUN", rotation=(0.6, 0.2, 0.3))
    bpy.ops.object.camera_add(location=(0, -4, 1.4), rotation=(math.radians(88), 0, 0))
    scene.camera = bpy.context.active_object
    return scene


def time_engine(scene, engine, runs):
    import bpy

    scene.render.engine = engine
    t = time.perf_counter()
    bpy.ops.render.render(scene=scene.name)          # warm-up: shader compilation, caches
    warm = time.perf_counter() - t
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        bpy.ops.render.render(scene=scene.name)
        times.append(time.perf_counter() - t)
    return statistics.median(times), warm


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=720)
    ap.add_argument("--eevee-runs", type=int, default=1,
                    help="timed EEVEE renders (EEVEE takes minutes per frame on software GL)")
    ap.add_argument("--skip-eevee", action="store_true", help="report eevee_s=nan (slow software GL)")
    args = ap.parse_args()
    _bootstrap.load()
    scene, kind = build_scene()
    scene.render.resolution_x = args.width
    scene.render.resolution_y = args.height
    scene.render.resolution_percentage = 100
    st = getattr(scene, "stylized", None)
    if st is not None:
        st.shadows = True
        st.outlines = True
    from stylized_renderer.engine import render_engine

    print(f"scene: {kind}, {args.width}x{args.height}, {args.runs} timed renders per engine (median)")
    sty, sty_warm = time_engine(scene, "STYLIZED", args.runs)
    stats = render_engine.last_render.get("stats", {})
    print(f"  STYLIZED          {sty:8.3f} s (first {sty_warm:.3f} s)  items={stats.get('items')} "
          f"fallbacks={stats.get('fallbacks', stats.get('fallback_objects'))}")
    wb, wb_warm = time_engine(scene, "BLENDER_WORKBENCH", args.runs)
    print(f"  BLENDER_WORKBENCH {wb:8.3f} s (first {wb_warm:.3f} s)")
    if args.skip_eevee:
        ee = float("nan")
    else:
        ee, ee_warm = time_engine(scene, _bootstrap.eevee_engine_id(), max(1, args.eevee_runs))
        print(f"  BLENDER_EEVEE     {ee:8.3f} s (first {ee_warm:.3f} s, {scene.eevee.taa_render_samples} samples)")
    print(f"bench-render: stylized_s={sty:.3f} workbench_s={wb:.3f} eevee_s={ee:.3f} "
          f"ratio_workbench={sty / wb:.3f} ratio_eevee={sty / ee:.3f}")


if __name__ == "__main__":
    main()
