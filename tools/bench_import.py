"""Import benchmark on the generated heavy rig (365 bones, ~50k vertices, 4 influences,
50 shape keys, 3 actions of 100 frames).

Run: .venv/bin/python tools/bench_import.py   (prints figures; the last line is machine-readable)
"""
from __future__ import annotations

import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _load():
    sys.path.insert(0, str(ROOT / "tools"))
    import _bootstrap

    _bootstrap.load()          # registered: the F12 measurement renders with the engine
    from stylized_renderer.engine import importer
    return importer


def main(repeats: int = 3) -> None:
    import bpy
    from tools import scenes

    importer = _load()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    t = time.perf_counter()
    arm, body = scenes.build_heavy_rig()
    print(f"heavy rig built in {time.perf_counter() - t:.2f} s: {len(arm.data.bones)} bones, "
          f"{len(body.data.vertices)} vertices, {len(body.data.shape_keys.key_blocks) - 1} shape keys, "
          f"{sum(1 for a in bpy.data.actions)} actions")
    scene = bpy.context.scene
    best = None
    cpu_best = None
    for _ in range(repeats):
        t = time.perf_counter()
        c = time.process_time()
        asset = importer.import_scene(scene)     # no cache: everything built
        dt = time.perf_counter() - t
        dc = time.process_time() - c
        cpu_best = dc if cpu_best is None else min(cpu_best, dc)
        if best is None or dt < best[0]:
            best = (dt, dict(asset.import_stats))
    import_s, stats = best
    try:
        import os
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    print(f"full import: {import_s:.3f} s wall (best of {repeats}), {cpu_best:.3f} s CPU; "
          f"load average {load:.1f} on {os.cpu_count()} CPUs")
    for k in ("nodes_s", "meshes_s", "mesh_read_s", "skin_s", "morph_s", "actions_s", "assemble_s"):
        print(f"  {k:22s} {stats.get(k, 0.0):.3f}")
    prim = asset.meshes[0].primitives[0]
    print(f"  nodes={asset.node_count} primitives={len(asset.meshes[0].primitives)} influences={prim.influences} "
          f"morphs={len(prim.morph_targets)} clips={len(asset.animations)}")
    # the session's asset cache: a verified re-import fingerprints every mesh (what F12 and farm
    # frames pay so that no edit renders stale); an unverified one trusts depsgraph updates
    cache = importer.AssetCache()
    importer.import_scene(scene, cache=cache)
    nb = importer.build_nodes(importer.collect_objects(bpy.context.view_layer))
    first = cache.meshes[body.name].asset
    fp, unv = [], []
    for _ in range(5):
        t = time.perf_counter()
        m = importer.import_mesh(body, nb, cache, verify=True)
        fp.append(time.perf_counter() - t)
        t = time.perf_counter()
        importer.import_mesh(body, nb, cache, verify=False)
        unv.append(time.perf_counter() - t)
    assert m is first
    check_ms = sorted(fp)[2] * 1000
    print(f"verified cached mesh re-import (content fingerprint): {check_ms:.1f} ms (median of 5); "
          f"unverified: {sorted(unv)[2] * 1000:.2f} ms")
    importer.import_scene(scene, cache=cache, clips=False)
    t = time.perf_counter()
    importer.import_scene(scene, cache=cache, clips=False)     # what a final render's frame pays
    full_ms = (time.perf_counter() - t) * 1000
    print(f"verified cached full-scene re-import (no clips, as final renders do): {full_ms:.1f} ms")
    f12_ms = _f12_ms(scene)
    print(f"F12 frame of the heavy rig ({scene.render.resolution_x}x{scene.render.resolution_y}, "
          f"frames 2-3 of one animation render): {f12_ms:.0f} ms; "
          f"check/F12 = {full_ms / f12_ms:.3f}")
    print(f"bench-import: import_s={import_s:.3f} check_ms={full_ms:.1f} f12_ms={f12_ms:.0f} "
          f"check_ratio={full_ms / f12_ms:.3f}")


def _f12_ms(scene) -> float:
    """Mean wall time of frames 2 and 3 of a Ctrl+F12 (the engine and its session survive
    between the frames: those frames verify the cache instead of importing)."""
    import tempfile

    import bpy

    from stylized_renderer.engine import render_engine

    cam = bpy.data.objects.new("BenchCam", bpy.data.cameras.new("BenchCam"))
    scene.collection.objects.link(cam)
    scene.camera = cam
    cam.location = (0.0, -6.0, 1.0)
    cam.rotation_euler = (1.5708, 0.0, 0.0)
    scene.render.engine = "STYLIZED"
    scene.frame_start, scene.frame_end = 1, 3
    times = {}

    def post(sc, *_):
        times[sc.frame_current] = time.perf_counter()

    bpy.app.handlers.render_post.append(post)
    try:
        scene.render.filepath = tempfile.mkdtemp() + "/f"
        t0 = time.perf_counter()
        bpy.ops.render.render(animation=True)
    finally:
        bpy.app.handlers.render_post.remove(post)
    del render_engine
    return (times[3] - times[1]) * 500 if 1 in times and 3 in times else (time.perf_counter() - t0) * 1000 / 3

if __name__ == "__main__":
    main()
