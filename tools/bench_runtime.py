"""Runtime benchmark: our per-frame update vs Blender's scene.frame_set, in one process.

Builds the heavy rig (365 bones, ~50k vertices, 4 influences, 50 shape keys with 5 active, an action
animating every bone) and measures the median per-frame cost of
  (a) Blender's scene.frame_set
  (b) our preview-player update: the frame's expression weights set (set_node_morph_weights,
      5 keys changing on a 7-frame cycle; the weight arrays are made before the timing), then
      sample + pose + palettes (+ GPU upload) + morph (+ GPU upload)
  (c) our timeline-mode update: read Blender's evaluated pose + the same chain (after frame_set)
  (d) a paused frame (must be ~free: 0 palette and 0 morph uploads)
then prints the scaling table (joints 100 -> 1000, active targets 1 -> 50) and the last line
  bench-runtime: frame_set_ms=A player_ms=B timeline_ms=C paused_ms=D ratio_player=R1 ratio_timeline=R2
and, for the same heavy rig, the memory line
  bench-memory: engine_mb=X blender_mb=Y memory_ratio=Z
with a breakdown of the largest engine arrays (``--memory`` runs only that part), and the crowd
(N linked duplicates of the demo character, N = 1, 6, 36; ``--crowd N ...`` runs only that part):
  bench-crowd: n=N frame_set_ms=A player_ms=B ratio=R ms_per_character=C session_ms=S session_ratio=Q
  bench-crowd-slope: update_ms_per_added_character=... frame_set_ms_per_added_character=...
and the Scene preview (``--scene``; tools/bench_scene.py: the heavy rig + 5 characters with NLA):
  bench-scene: frame_set_ms=A scene_ms=B ratio=R ids=N channels=M
where B is SceneRuntime.update of all N characters playing the demo's clip (set_clip with every
rig as a target), S the same through the user path (the viewport session's update_frame with a
PreviewState playing the clip with "Play on All Characters" on: the command drain, the shape-key
push and the update) and A Blender's scene.frame_set of the same scene (every rig has the action).

How memory is measured:
  engine_mb   the bytes of every numpy array reachable from our assets and runtime state after a
              few player frames: the SceneAsset (nodes, meshes, primitives, morph targets, skins,
              clips) and the SceneRuntime (pose, palettes, mesh instances and their streams'
              CPU arrays, the GPU backend's caches of CPU-side data), walked attribute by
              attribute through our own classes, lists, tuples and dicts.  Each array is counted
              once, by the array owning its memory (a view counts as its base).  GPU memory is
              not numpy and not counted there; the morph delta textures' size is printed apart.
  blender_mb  Blender's own data for the rig's mesh object, computed from counts x the element
              sizes Blender stores: every attribute of the mesh (``Mesh.attributes``, the internal
              ones such as positions, ``.edge_verts``, ``.corner_vert``, ``.corner_edge``
              included: domain size x the attribute type's size), the face offsets
              ((faces + 1) x int32), the vertex groups (MDeformVert 16 bytes per vertex +
              MDeformWeight 8 bytes per weight) and every shape key's coordinates (key blocks x
              vertices x 12 bytes, the basis included).  Not counted, so the ratio errs against
              us: the evaluated mesh the depsgraph keeps, Blender's normal/triangle caches, its
              GPU batches, the armature and the action.
Last, the Rigify character of tools/bench_bake.py (preview player vs frame_set, bake cost per frame):
  bench-rigify: frame_set_ms=A player_ms=B ratio_player=R bake_ms_per_frame=C
``--heavy`` prints only the heavy rig's bench-runtime line.  The heavy rig's clip is a plain clip:
the player evaluates its 1,460 Bezier quaternion curves at the frame's time (engine/core/animation/
fcurves.py; they share their key frames, so one located segment and one (C, 4) x (4,) product),
then normalises each quaternion as Blender does.  Its sampling step measured 15 us against 22 us
for the integer-frame samples and slerp it replaced (same process, interleaved).
This is a benchmark, not a test: it asserts nothing.
"""
from __future__ import annotations

import functools
import pathlib
import statistics
import sys
import time
import types

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from tools import _bootstrap  # noqa: E402
from tools.bench_common import build_crowd, median_ms  # noqa: E402


def build(bones, vertices, shape_keys, active):
    import bpy

    from tools import scenes

    bpy.ops.wm.read_factory_settings(use_empty=True)
    info = scenes.build_heavy_rig(bones=bones, vertices=vertices, shape_keys=shape_keys, actions=1, frames=100)
    scene = bpy.context.scene
    scene.render.engine = "STYLIZED"
    # 5 (or `active`) keys on, with values changing per frame through the player's clip? The seed's
    # morph rebuild happens when weights change: we vary them per frame below.
    return info


def measure(bones=365, vertices=50000, shape_keys=50, active=5, frames=60, with_blender=True):
    import bpy

    from stylized_renderer.engine.blender import importer
    from stylized_renderer.engine.blender.sources.timeline import TimelineReader
    from stylized_renderer.engine.core.world.scene_runtime import SceneRuntime
    from stylized_renderer.engine.features.vrm.driver import VrmDriver
    from stylized_renderer.engine.gpu import util as gpu_util
    from stylized_renderer.engine.gpu.backend import GpuBackend

    build(bones, vertices, shape_keys, active)
    scene = bpy.context.scene
    dg = bpy.context.evaluated_depsgraph_get()
    asset = importer.import_scene(dg)
    arm_clips = [c for c in asset.animations if c.channels]
    result = {}
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

        # the expression weights of each frame (a 7-frame cycle), made before the timing: the
        # timed frame is ours alone (setting them, then the update)
        cycle = []
        for k in range(7):
            w = weights.copy()
            w[:active] = 0.25 + 0.5 * ((k + np.arange(active)) % 7) / 7.0
            cycle.append(w)

        def player_frame(i):
            rt.set_node_morph_weights(mesh_node, cycle[i % 7])
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
            reader = TimelineReader(asset, rt, expressions=VrmDriver())   # as the session makes it
            times = []
            for i in range(frames):
                scene.frame_set(1 + (i % 100))   # outside our timing: that is (a)
                d = bpy.context.evaluated_depsgraph_get()
                t = time.perf_counter()
                nodes, mats, w = reader.read(d)
                rt.update_timeline(nodes, mats, w, bbone_segments=reader.bbone_segments)
                times.append((time.perf_counter() - t) * 1e3)
            rt.release()
            return statistics.median(times)

        result["timeline_ms"] = gpu_util.run_in_gpu_context(timeline_task)
    return result


# ---------------------------------------------------------------------------------------------
# crowd
# ---------------------------------------------------------------------------------------------

def measure_crowd(n: int, frames: int = 40) -> dict:
    """Blender's ``scene.frame_set`` of an n-character crowd against the preview update of the
    same n characters playing the demo clip: ``SceneRuntime.update`` with the clip set on every
    rig (``set_clip(clip, targets=...)``: sampled once, one pose write, one batched palette
    step), on the GPU backend, in one process."""
    import bpy

    from stylized_renderer.engine.blender import importer
    from stylized_renderer.engine.core.world.scene_runtime import SceneRuntime
    from stylized_renderer.engine.gpu import util as gpu_util
    from stylized_renderer.engine.gpu.backend import GpuBackend

    names = build_crowd(n)
    scene = bpy.context.scene
    t0 = time.perf_counter()
    asset = importer.import_scene(bpy.context.evaluated_depsgraph_get())
    import_ms = (time.perf_counter() - t0) * 1e3
    clip = next(c for c in asset.animations if c.target_object == names[0] and c.channels
                and c.action_name == "Wave")
    span = 48

    def frame_set(i):
        scene.frame_set(1 + (i % span))

    frame_set(0)
    fs = median_ms(frame_set, frames)

    def task():
        rt = SceneRuntime(asset, GpuBackend())
        assert rt.initialize(), rt.last_error
        assert rt.set_clip(clip, targets=names), rt.last_error
        rt.player.play()
        rt.player.set_looping(True)
        rt.update(1.0 / 60.0)
        ms = median_ms(lambda i: rt.update(1.0 / 60.0), frames)
        r = {"player_ms": ms, "palette_uploads": rt.stats.palette_uploads, "palettes": rt.stats.palette_count,
             "nodes": asset.node_count}
        rt.release()
        return r

    def session_task():
        # the user path: the viewport session's update_frame with "Play on All Characters" on
        from stylized_renderer.engine.blender.session import StylizedSession
        from stylized_renderer.engine.features.preview import control as preview

        s = StylizedSession(viewport=True)
        dg = bpy.context.evaluated_depsgraph_get()
        s.ensure_gpu()
        s.ensure_runtime(dg)
        st = preview.PreviewState(armature=names[0], active=True, crowd=True)
        for cmd in (("loop", True), ("clip", clip.name), ("play",)):
            st.push(*cmd)
        s.update_frame(dg, st)
        assert s.runtime is not None and s.runtime.crowd_targets == names and st.last_error is None, st.last_error
        ms = median_ms(lambda i: s.update_frame(dg, st), frames)
        s.free()
        return ms

    r = gpu_util.run_in_gpu_context(task)
    r.update(n=n, frame_set_ms=fs, import_ms=import_ms, session_ms=gpu_util.run_in_gpu_context(session_task))
    return r


def print_crowd(rows) -> None:
    for r in rows:
        n = r["n"]
        print(f"bench-crowd: n={n} frame_set_ms={r['frame_set_ms']:.3f} player_ms={r['player_ms']:.3f} "
              f"ratio={r['player_ms'] / r['frame_set_ms']:.3f} ms_per_character={r['player_ms'] / n:.4f}"
              f" session_ms={r['session_ms']:.3f} session_ratio={r['session_ms'] / r['frame_set_ms']:.3f}"
              f"  (nodes {r['nodes']}, palettes {r['palettes']}, uploads {r['palette_uploads']}, "
              f"import {r['import_ms']:.0f} ms)")
    if len(rows) >= 2:
        ns = np.array([r["n"] for r in rows], np.float64)
        up = np.polyfit(ns, [r["player_ms"] for r in rows], 1)
        fs = np.polyfit(ns, [r["frame_set_ms"] for r in rows], 1)
        print(f"bench-crowd-slope: update_ms_per_added_character={up[0]:.4f} (intercept {up[1]:.3f}) "
              f"frame_set_ms_per_added_character={fs[0]:.4f} (intercept {fs[1]:.3f})")


# ---------------------------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------------------------

_ATTRIBUTE_BYTES = {"FLOAT": 4, "INT": 4, "FLOAT_VECTOR": 12, "FLOAT_COLOR": 16, "BYTE_COLOR": 4,
                    "STRING": 1, "BOOLEAN": 1, "FLOAT2": 8, "INT8": 1, "INT16_2D": 4, "INT32_2D": 8,
                    "QUATERNION": 16, "FLOAT4X4": 64}


def blender_mesh_bytes(ob) -> dict:
    """Blender's own data of a mesh object (see the module docstring), by part."""
    me = ob.data
    sizes = {"POINT": len(me.vertices), "EDGE": len(me.edges), "FACE": len(me.polygons),
             "CORNER": len(me.loops)}
    out = {"attributes": 0}
    for a in me.attributes:
        out["attributes"] += sizes.get(a.domain, 0) * _ATTRIBUTE_BYTES.get(a.data_type, 4)
    out["face_offsets"] = (len(me.polygons) + 1) * 4
    weights = sum(len(v.groups) for v in me.vertices) if ob.vertex_groups else 0
    out["vertex_groups"] = (16 * len(me.vertices) + 8 * weights) if ob.vertex_groups else 0
    keys = me.shape_keys.key_blocks if me.shape_keys is not None else ()
    out["shape_keys"] = len(keys) * len(me.vertices) * 12
    return out


def numpy_arrays(roots: dict) -> dict:
    """{id: (owning array, label)} of every numpy array reachable from ``roots`` ({label: obj})
    through our own classes (``stylized_renderer.*``), lists, tuples, sets and dicts."""
    from collections import deque

    found = {}
    seen = set()
    stack = deque()
    for label, obj in roots.items():   # breadth first, root after root: the nearest owner names an array
        stack.append((obj, label))
        _walk(stack, seen, found)
    return found


def _walk(stack, seen, found) -> None:
    while stack:
        o, label = stack.popleft()
        if id(o) in seen:
            continue
        seen.add(id(o))
        if isinstance(o, np.ndarray):
            b = o
            while isinstance(b.base, np.ndarray):
                b = b.base
            found.setdefault(id(b), (b, label))
            continue
        if o is None or isinstance(o, (str, bytes, int, float, bool, np.generic)):
            continue
        if isinstance(o, dict):
            stack.extend((v, label) for v in o.values())
            stack.extend((k, label) for k in o.keys())
            continue
        if isinstance(o, (list, tuple, set, frozenset)):
            stack.extend((v, label) for v in o)
            continue
        if isinstance(o, functools.partial):     # a deferred target's maker (its rows made on first use)
            stack.extend((v, label) for v in (o.func,) + tuple(o.args) + tuple(o.keywords.values()))
            continue
        if isinstance(o, types.MethodType):
            stack.append((o.__self__, label))
            continue
        cls = type(o)
        if not cls.__module__.startswith("stylized_renderer"):
            continue                    # bpy / gpu objects, functions, modules
        names = list(getattr(o, "__dict__", {}).keys())
        for c in cls.__mro__:
            names.extend(getattr(c, "__slots__", ()))
        for n in names:
            try:
                v = getattr(o, n)
            except Exception:
                continue
            stack.append((v, f"{cls.__name__}.{n}"))


def measure_memory(bones=365, vertices=50000, shape_keys=50, active=5, frames=10):
    import bpy

    from stylized_renderer.engine.blender import importer
    from stylized_renderer.engine.core.world.scene_runtime import SceneRuntime
    from stylized_renderer.engine.gpu import util as gpu_util
    from stylized_renderer.engine.gpu.backend import GpuBackend

    arm, ob = build(bones, vertices, shape_keys, active)
    dg = bpy.context.evaluated_depsgraph_get()
    asset = importer.import_scene(dg)
    arm_clips = [c for c in asset.animations if c.channels]
    blender = blender_mesh_bytes(ob)

    def task():
        backend = GpuBackend()
        rt = SceneRuntime(asset, backend)
        assert rt.initialize(), rt.last_error
        mesh_node = next(i for i, inst in enumerate(rt.mesh_instances) if inst is not None)
        weights = np.zeros(len(rt.morph_key_names(mesh_node)))
        rt.set_clip(arm_clips[0])
        rt.player.play()
        for i in range(frames):          # animated weights: the shader path and its textures
            w = weights.copy()
            w[:active] = 0.25 + 0.5 * ((i + np.arange(active)) % 7) / 7.0
            rt.set_node_morph_weights(mesh_node, w)
            rt.update(1.0 / 60.0)
        rt.player.pause()
        rt.update(0.0)
        rt.update(0.0)                   # still weights: settled by one CPU rebuild
        found = numpy_arrays({"asset": asset, "runtime": rt})
        gpu_bytes = getattr(backend, "morph_texture_bytes", 0)
        rt.release()
        return found, gpu_bytes

    found, gpu_bytes = gpu_util.run_in_gpu_context(task)
    by_label = {}
    for arr, label in found.values():
        by_label[label] = by_label.get(label, 0) + arr.nbytes
    engine = sum(by_label.values())
    return {"engine_bytes": engine, "blender": blender, "blender_bytes": sum(blender.values()),
            "by_label": by_label, "gpu_morph_bytes": gpu_bytes, "arrays": len(found)}


def print_memory(m) -> None:
    mb = 1024.0 * 1024.0
    print(f"memory, heavy rig: {m['arrays']} numpy arrays held by our assets and runtime")
    for label, b in sorted(m["by_label"].items(), key=lambda kv: -kv[1])[:16]:
        print(f"  {label:40s} {b / mb:8.2f} MB")
    print("  blender: " + " ".join(f"{k}={v / mb:.2f}MB" for k, v in m["blender"].items()))
    print(f"  (GPU, not counted: morph delta textures {m['gpu_morph_bytes'] / mb:.2f} MB)")
    e, b = m["engine_bytes"] / mb, m["blender_bytes"] / mb
    print(f"bench-memory: engine_mb={e:.2f} blender_mb={b:.2f} memory_ratio={e / b:.3f}")


def print_heavy(r) -> None:
    print(f"bench-runtime: frame_set_ms={r['frame_set_ms']:.3f} player_ms={r['player_ms']:.3f} "
          f"timeline_ms={r['timeline_ms']:.3f} paused_ms={r['paused_ms']:.4f} "
          f"ratio_player={r['player_ms'] / r['frame_set_ms']:.3f} "
          f"ratio_timeline={r['timeline_ms'] / r['frame_set_ms']:.3f}")


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memory", action="store_true", help="only the memory part (bench-memory line)")
    ap.add_argument("--heavy", action="store_true",
                    help="only the heavy rig's frame (bench-runtime line, no scaling table)")
    ap.add_argument("--crowd", type=int, nargs="+", metavar="N",
                    help="only the crowd part, for these character counts (bench-crowd lines)")
    ap.add_argument("--scene", action="store_true",
                    help="only the Scene preview against frame_set (bench-scene line, tools/bench_scene.py)")
    ap.add_argument("--springs", action="store_true",
                    help="only VRM spring bones against the VRM Add-on (bench-springs line, tools/bench_springs.py)")
    args = ap.parse_args()
    _bootstrap.load()
    if args.springs:
        from tools import bench_springs

        return bench_springs.main()
    if args.scene:
        from tools import bench_scene

        bench_scene.print_scene(bench_scene.measure())
        return 0
    if args.memory:
        print_memory(measure_memory())
        return 0
    if args.crowd:
        print_crowd([measure_crowd(n) for n in args.crowd])
        return 0
    r = measure()
    if args.heavy:
        print_heavy(r)
        return 0
    print("heavy rig: 365 bones, ~50k vertices, 50 shape keys (5 active)")
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
    print_memory(measure_memory())
    print("crowd: N linked duplicates of the demo character playing its clip (preview update vs frame_set)")
    print_crowd([measure_crowd(n) for n in (1, 6, 36)])
    from tools import bench_scene  # the heavy rig + 5 characters with NLA stacks: Scene preview vs frame_set

    bench_scene.print_scene(bench_scene.measure())
    from tools import bench_bake  # the Rigify character (tools/bench_bake.py): preview player vs frame_set, bake cost

    r = bench_bake.measure()
    print(f"bench-rigify: frame_set_ms={r['frame_set_ms']:.3f} player_ms={r['player_ms']:.3f} "
          f"ratio_player={r['ratio_player']:.3f} bake_ms_per_frame={r['bake_ms_per_frame']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
