"""Runtime benchmark: our per-frame update vs Blender's scene.frame_set, in one process.

Builds the heavy rig (365 bones, ~50k vertices, 4 influences, 50 shape keys with 5 active, an action
animating every bone) and measures the median per-frame cost of
  (a) Blender's scene.frame_set
  (b) our preview-player update: sample + pose + palettes (+ GPU upload) + morph (+ GPU upload)
  (c) our timeline-mode update: read Blender's evaluated pose + the same chain (after frame_set)
  (d) a paused frame (must be ~free: 0 palette and 0 morph uploads)
then prints the scaling table (joints 100 -> 1000, active targets 1 -> 50) and the last line
  bench-runtime: frame_set_ms=A player_ms=B timeline_ms=C paused_ms=D ratio_player=R1 ratio_timeline=R2
This is a benchmark, not a test: it asserts nothing.
"""
from __future__ import annotations

import pathlib
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _bootstrap  # noqa: E402


def median_ms(fn, n):
    out = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - t) * 1e3)
    return statistics.median(out)


def build(bones, vertices, shape_keys, active):
    import bpy

    import scenes

    bpy.ops.wm.read_factory_settings(use_empty=True)
    info = scenes.build_heavy_rig(bones=bones, vertices=vertices, shape_keys=shape_keys, actions=1, frames=100)
    scene = bpy.context.scene
    scene.render.engine = "STYLIZED"
    # 5 (or `active`) keys on, with values changing per frame through the player's clip? The seed's
    # morph rebuild happens when weights change: we vary them per frame below.
    return info


def measure(bones=365, vertices=50000, shape_keys=50, active=5, frames=60, with_blender=True):
    import bpy

    from stylized_renderer.engine import gpu_util, importer
    from stylized_renderer.engine.runtime.gpu_backend import GpuBackend
    from stylized_renderer.engine.timeline import TimelineReader
    from stylized_renderer.engine.world.scene_runtime import SceneRuntime

    build(bones, vertices, shape_keys, active)
    scene = bpy.context.scene
    dg = bpy.context.evaluated_depsgraph_get()
    asset = importer.import_scene(dg)
    arm_clips = [c for c in asset.animations if c.channels]
    result = {}
    fs = 1
    if with_blender:
        def frame_set(i):
            scene.frame_set(1 + (i % 100))
        frame_set(0)
        result["frame_set_ms"] = median_ms(frame_set, frames)

    def task():
        rt = SceneRuntime(asset, GpuBackend())
        assert rt.initialize(), rt.last_error
        mesh_node = next(i for i, inst in enumerate(rt.mesh_instances) if inst is not None)
        names = rt.morph_key_names(mesh_node)
        weights = np.zeros(len(names))
        rt.set_clip(arm_clips[0])
        rt.player.play()
        rt.player.set_looping(True)

        def player_frame(i):
            w = weights.copy()
            w[:active] = 0.25 + 0.5 * ((i + np.arange(active)) % 7) / 7.0
            rt.set_node_morph_weights(mesh_node, w)
            rt.update(1.0 / 60.0)

        player_frame(0)
        r = {"player_ms": median_ms(player_frame, frames)}
        r["palette_uploads_playing"] = rt.stats.palette_uploads
        r["morph_uploads_playing"] = rt.stats.morph_uploads
        rt.player.pause()
        rt.update(0.0)

        def paused(i):
            rt.update(1.0 / 60.0)

        r["paused_ms"] = median_ms(paused, frames)
        r["palette_uploads_paused"] = rt.stats.palette_uploads
        r["morph_uploads_paused"] = rt.stats.morph_uploads
        rt.release()
        return r

    result.update(gpu_util.run_in_gpu_context(task))

    if with_blender:
        def timeline_task():
            rt = SceneRuntime(asset, GpuBackend())
            assert rt.initialize(), rt.last_error
            reader = TimelineReader(asset, rt)
            times = []
            for i in range(frames):
                scene.frame_set(1 + (i % 100))   # outside our timing: that is (a)
                d = bpy.context.evaluated_depsgraph_get()
                t = time.perf_counter()
                nodes, mats, w = reader.read(d)
                rt.update_timeline(nodes, mats, w)
                times.append((time.perf_counter() - t) * 1e3)
            rt.release()
            return statistics.median(times)

        result["timeline_ms"] = gpu_util.run_in_gpu_context(timeline_task)
    return result


def main() -> int:
    _bootstrap.load()
    r = measure()
    print(f"heavy rig: 365 bones, ~50k vertices, 50 shape keys (5 active)")
    print(f"  (a) scene.frame_set        {r['frame_set_ms']:8.3f} ms")
    print(f"  (b) preview player update  {r['player_ms']:8.3f} ms  (palette uploads {r['palette_uploads_playing']}, "
          f"morph uploads {r['morph_uploads_playing']} per frame)")
    print(f"  (c) timeline-mode update   {r['timeline_ms']:8.3f} ms  (after frame_set)")
    print(f"  (d) paused frame           {r['paused_ms']:8.4f} ms  (palette uploads {r['palette_uploads_paused']}, "
          f"morph uploads {r['morph_uploads_paused']})")
    print("scaling (preview player update, ms):")
    print("  joints   active=1   active=5   active=50")
    for joints in (100, 365, 1000):
        row = []
        for active in (1, 5, 50):
            m = measure(bones=joints, vertices=20000, shape_keys=50, active=active, frames=60, with_blender=False)
            row.append(m["player_ms"])
        print(f"  {joints:6d} " + " ".join(f"{v:10.3f}" for v in row))
    ratio_p = r["player_ms"] / r["frame_set_ms"]
    ratio_t = r["timeline_ms"] / r["frame_set_ms"]
    print(f"bench-runtime: frame_set_ms={r['frame_set_ms']:.3f} player_ms={r['player_ms']:.3f} "
          f"timeline_ms={r['timeline_ms']:.3f} paused_ms={r['paused_ms']:.4f} "
          f"ratio_player={ratio_p:.3f} ratio_timeline={ratio_t:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
