"""Preview playback vs timeline playback, headless (issue 6 acceptance; part of ``make bench``).

    .venv/bin/python tools/bench_preview.py [--seconds 10] [--fps 60] [--memory-frames 1000]

Builds the demo character (demo/character.py, else tools/scenes.py's character) and runs, inside
one GPU context (engine.gpu.util.run_in_gpu_context), the code path the viewport uses:
``render_engine.draw_view`` -> ``StylizedSession.render_texture`` (preview commands applied by
``engine.features.preview.state.apply_commands``, runtime update, extraction, FramePipeline) at 640x360.

* preview:  the preview player drives the pose (PreviewState.active, playing); the timeline
            does not move and the depsgraph is not re-evaluated.
* timeline: ``scene.frame_set(f)`` (with the frame's depsgraph updates handed to
            ``StylizedSession.sync`` as view_update does) + the session's timeline-mode update
            + draw.

Per-frame CPU cost = mean wall time of those calls (GPU work is not waited for, in both modes).
Then 1000 preview frames are rendered and Python memory (tracemalloc) and live GPU streams /
palettes (created - released through the session's backend) are compared before/after.
The last line reads ``bench-preview: preview_ms=P timeline_ms=T ratio=R``.

The demo's rig clips key no shape key (its face's keys are a clip of their own, on the face), so
the runs above never push a clip-driven key.  ``--clip-keys`` measures only that case: the demo's
Wave clip also carrying the face's shape-key channels (as a glTF clip keys its meshes' weights),
put into the session's asset, playing at 60 fps; per frame the session's ``update_frame`` (the
preview's step without the draw), in blocks of 10 frames alternating between the preview as it runs (the
runtime told that the preview fills every morph: ``SceneRuntime.update(fills_morphs=True)``) and
the former order (the runtime pushing the clip's keys first: ``fills_morphs=False`` forced on the
runtime), medians of each, and the face's MorphState pushes per frame:
``bench-preview-keys: fill_ms=A former_ms=B ratio=A/B pushes_fill=P pushes_former=Q``.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import time
import tracemalloc

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from tools import _bootstrap  # noqa: E402

W, H = 640, 360


def build_scene():
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.render.engine = "STYLIZED"
    try:
        from demo.character import build_demo_scene

        info = build_demo_scene(scene)
        return scene, info["armature"], "demo character"
    except ImportError:
        from tools import scenes

        arm, body, hat, ring = scenes.build_character(scene)
        return scene, arm, "tools/scenes.py character"


def camera_for(scene, depsgraph):
    import numpy as np  # noqa: F401

    from stylized_renderer.engine.blender.cameras import camera_from_matrices, camera_from_object

    cam = scene.camera
    if cam is not None:
        return camera_from_object(depsgraph, cam.evaluated_get(depsgraph), W, H)
    view = np.eye(4)
    view[2, 3] = -6.0
    proj = np.diag([1.0, W / H, -1.0, 0.0])
    proj[3, 2] = -1.0
    return camera_from_matrices(view, proj)


class Counter:
    """Live GPU streams / palettes created through a backend since counting began (by identity:
    releases of objects made before counting are ignored)."""

    def __init__(self, backend):
        self.created = self.released = 0
        self._live = set()
        for name in ("create_stream", "create_morph_stream", "create_palette_buffer"):
            if hasattr(backend, name):
                self._wrap(backend, name, True)
        for name in ("release_stream", "release_palette"):
            self._wrap(backend, name, False)

    def _wrap(self, backend, name, make):
        orig = getattr(backend, name)

        def wrapped(*a, **kw):
            r = orig(*a, **kw)
            if make and r is not None:
                self.created += 1
                self._live.add(id(r))
            elif not make and a and id(a[0]) in self._live:
                self.released += 1
                self._live.discard(id(a[0]))
            return r
        setattr(backend, name, wrapped)

    @property
    def live(self):
        return len(self._live)


def phases(stats) -> tuple:
    return tuple(float(stats.get(k, 0.0) or 0.0) for k in ("update_ms", "extraction_ms", "pipeline_ms"))


def clip_keys(frames: int = 400) -> dict:
    """``--clip-keys`` (see the module docstring): {fill_ms, former_ms, pushes_fill, pushes_former}."""
    import dataclasses

    import bpy

    from stylized_renderer.engine.blender.session import StylizedSession
    from stylized_renderer.engine.features.preview import control as preview
    from stylized_renderer.engine.gpu import util as gpu_util

    scene, arm, _what = build_scene()
    out = {}

    def run():
        session = StylizedSession(viewport=True)
        dg = bpy.context.evaluated_depsgraph_get()
        session.sync(dg)
        state = preview.get_state(scene, arm)
        state.active = True
        session.ensure_gpu()
        session.ensure_runtime(dg)
        assert session.update_frame(dg, state), session.update_error     # the clips are imported now
        asset = session.scene_asset
        assert asset is not None        # update_frame returned True: the scene is imported
        clips = list(asset.animations)
        k = next(i for i, c in enumerate(clips) if c.target_object == arm.name and c.name == "Wave")
        keys = next(c for c in clips if c.name == "Wave" and c.target_object != arm.name and c.morph_channels)
        clips[k] = dataclasses.replace(clips[k], curves=None, morph_channels=keys.morph_channels)
        asset.animations = tuple(clips)
        face = keys.morph_channels[0].node_index
        state.push("fade", 0.0)
        state.push("clip", "Wave")
        state.push("play")
        assert session.update_frame(dg, state) and state.last_error is None, state.last_error
        rt = session.runtime
        assert rt is not None           # update_frame returned True
        inst = rt.mesh_instances[face]
        assert inst is not None         # the Wave keys' node has a mesh instance
        st = next(p.morph_state for p in inst.primitives if p.morph_state is not None)
        calls = [0]
        real_set = st.set_weights

        def counted(indices, values, finite=False):
            calls[0] += 1
            return real_set(indices, values, finite=finite)

        st.set_weights = counted

        def former(dt=0.0, after_sample=None, fills_morphs=False):
            return type(rt).update(rt, dt, after_sample=after_sample, fills_morphs=False)

        times = {"fill": [], "former": []}
        pushes = {"fill": [], "former": []}
        for block in range(frames // 10):
            mode = "fill" if block % 2 == 0 else "former"
            if mode == "former":
                rt.__dict__["update"] = former      # the instance's update (popped below)
            for i in range(10):
                calls[0] = 0
                session.last_update_time = time.perf_counter() - 1.0 / 60.0     # the clip advances a 60 fps frame
                t0 = time.perf_counter()
                session.update_frame(dg, state)
                dt = time.perf_counter() - t0
                if i:            # the first frame of a block follows the other order's
                    times[mode].append(dt * 1e3)
                    pushes[mode].append(calls[0])
            rt.__dict__.pop("update", None)
        st.set_weights = real_set
        for mode in ("fill", "former"):
            out[f"{mode}_ms"] = statistics.median(times[mode])
            out[f"pushes_{mode}"] = statistics.mean(pushes[mode])
        session.free()

    gpu_util.run_in_gpu_context(run)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--fps", type=float, default=60.0)
    ap.add_argument("--memory-frames", type=int, default=1000)
    ap.add_argument("--clip-keys", action="store_true",
                    help="only the preview's frame step with a clip keying the face's shape keys")
    args = ap.parse_args(argv)

    _bootstrap.load()
    if args.clip_keys:
        r = clip_keys()
        print(f"bench-preview-keys: fill_ms={r['fill_ms']:.4f} former_ms={r['former_ms']:.4f} "
              f"ratio={r['fill_ms'] / r['former_ms']:.3f} pushes_fill={r['pushes_fill']:.2f} "
              f"pushes_former={r['pushes_former']:.2f}")
        sys.stdout.flush()
        return 0
    import bpy
    import numpy as np

    from stylized_renderer.engine.blender.render_engine import draw_view
    from stylized_renderer.engine.blender.session import StylizedSession
    from stylized_renderer.engine.features.preview import control as preview
    from stylized_renderer.engine.gpu import util as gpu_util

    scene, arm, what = build_scene()
    frames = max(1, int(round(args.seconds * args.fps)))
    dg = bpy.context.evaluated_depsgraph_get()
    cam = camera_for(scene, dg)
    view, proj = np.asarray(cam.view), np.asarray(cam.projection)
    f0, f1 = scene.frame_start, scene.frame_end
    out = {}

    def run():
        _sync = lambda: None  # noqa: E731  (Python gpu has no finish(); GPU work is not waited for)

        session = StylizedSession(viewport=True)
        session.sync(dg)
        state = preview.get_state(scene, arm)

        def draw():
            return draw_view(session, bpy.context.evaluated_depsgraph_get(), view, proj, False, W, H)

        # warm-up (import, GPU resources, shader compilation) in both modes
        draw()
        counter = Counter(session.backend)
        state.push("play")
        state.active = state.playing = True
        for _ in range(5):
            draw()
        _sync()

        # preview playback: the timer's redraw -> view_draw -> draw_view
        t_prev = []
        ph_prev = []
        frame_before = scene.frame_current
        c_prev = []
        for _ in range(frames):
            t0 = time.perf_counter()
            c0 = time.thread_time()
            draw()
            c_prev.append(time.thread_time() - c0)
            t_prev.append(time.perf_counter() - t0)
            ph_prev.append(phases(session.stats))
        _sync()
        out["preview_uploads"] = session.stats.get("palette_uploads")
        out["preview_time"] = state.time
        out["timeline_untouched"] = scene.frame_current == frame_before

        # timeline playback: frame_set + timeline-mode update + draw
        preview.hand_back_to_timeline(scene)
        state.active = False
        t_tl = []
        ph_tl = []
        span = max(1, f1 - f0 + 1)
        c_tl = []
        # the viewport's view_update: Blender hands the frame's depsgraph updates to sync()
        def view_update(_scene, depsgraph):
            if _scene == scene:
                session.sync(depsgraph, depsgraph.updates)

        bpy.app.handlers.frame_change_post.append(view_update)
        reimports = 0
        for i in range(frames):
            t0 = time.perf_counter()
            c0 = time.thread_time()
            scene.frame_set(f0 + (i % span))
            reimports += bool(session.imports.need_import)
            t1 = time.perf_counter()
            draw()
            c_tl.append(time.thread_time() - c0)
            t_tl.append(time.perf_counter() - t0)
            ph_tl.append(phases(session.stats) + ((t1 - t0) * 1e3,))
        bpy.app.handlers.frame_change_post.remove(view_update)
        out["reimports"] = reimports
        _sync()

        # per-pass GPU time (Profile GPU: the pipeline waits for each pass)
        scene.stylized.profile_gpu = True
        state.push("play")
        state.active = state.playing = True
        gpu_ms = {}
        for _ in range(20):
            draw()
            for k, v in (session.stats.get("gpu_ms") or {}).items():
                gpu_ms.setdefault(k, []).append(v)
        scene.stylized.profile_gpu = False
        out["gpu_ms"] = {k: statistics.median(v) for k, v in gpu_ms.items()}
        out["c_prev"], out["c_tl"] = c_prev, c_tl

        # memory over N rendered preview frames
        state.push("play")
        state.active = state.playing = True
        for _ in range(20):
            draw()
        _sync()
        tracemalloc.start()
        snap0 = tracemalloc.take_snapshot()
        cur0, _ = tracemalloc.get_traced_memory()
        live0 = counter.live
        for _ in range(args.memory_frames):
            draw()
        _sync()
        cur1, peak = tracemalloc.get_traced_memory()
        snap1 = tracemalloc.take_snapshot()
        tracemalloc.stop()
        top = snap1.compare_to(snap0, "lineno")[:3]
        out.update(ph_prev=ph_prev, ph_tl=ph_tl, t_prev=t_prev, t_tl=t_tl, mem0=cur0, mem1=cur1, peak=peak, live0=live0, live1=counter.live,
                   created=counter.created, released=counter.released, top=[str(s) for s in top],
                   stats=dict(session.stats))
        session.free()
        return True

    gpu_util.run_in_gpu_context(run)
    p_ms = statistics.mean(out["t_prev"]) * 1e3
    t_ms = statistics.mean(out["t_tl"]) * 1e3
    ratio = p_ms / t_ms if t_ms > 0 else float("inf")
    st = out["stats"]
    print(f"scene: {what}, {W}x{H}, {frames} frames per mode ({args.seconds:g} s at {args.fps:g} fps)")
    print(f"preview : mean {p_ms:.3f} ms  median {statistics.median(out['t_prev']) * 1e3:.3f} ms  "
          f"(clip time reached {out['preview_time']:.2f} s, timeline untouched: {out['timeline_untouched']})")
    print(f"timeline: mean {t_ms:.3f} ms  median {statistics.median(out['t_tl']) * 1e3:.3f} ms  "
          f"(frame changes that asked for a re-import: {out['reimports']} of {frames})")
    mp = np.mean(np.array(out["ph_prev"]), axis=0)
    mt = np.mean(np.array(out["ph_tl"]), axis=0)
    print(f"breakdown preview : update {mp[0]:.3f} ms, extraction {mp[1]:.3f} ms, pipeline (CPU submit) {mp[2]:.3f} ms")
    print(f"breakdown timeline: frame_set {mt[3]:.3f} ms, update {mt[0]:.3f} ms, extraction {mt[1]:.3f} ms, "
          f"pipeline (CPU submit) {mt[2]:.3f} ms")
    cpu_p = mp[0] + mp[1]
    cpu_t = mt[3] + mt[0] + mt[1]
    print(f"update+extract only (timeline includes frame_set): preview {cpu_p:.3f} ms, timeline {cpu_t:.3f} ms, "
          f"ratio {cpu_p / cpu_t if cpu_t > 0 else float('inf'):.3f}")
    print(f"last frame stats: update {st.get('update_ms', 0):.3f} ms, extraction {st.get('extraction_ms', 0):.3f} ms, "
          f"pipeline {st.get('pipeline_ms', 0):.3f} ms, palettes {st.get('palette_count')}, "
          f"joints {st.get('joint_matrix_count')}, gpu items {st.get('gpu_items')}, "
          f"fallbacks {len(st.get('fallbacks') or [])}")
    cp_ms = statistics.mean(out["c_prev"]) * 1e3
    ct_ms = statistics.mean(out["c_tl"]) * 1e3
    print(f"main-thread CPU time (time.thread_time; llvmpipe's rasteriser threads excluded): preview {cp_ms:.3f} ms, "
          f"timeline {ct_ms:.3f} ms, ratio {cp_ms / ct_ms if ct_ms > 0 else float('inf'):.3f}")
    print("per-pass GPU time (Profile GPU, median of 20 frames): "
          + ", ".join(f"{k} {v:.2f} ms" for k, v in out["gpu_ms"].items()))
    print(f"ratio preview/timeline = {ratio:.3f} (target <= 0.25): {'OK' if ratio <= 0.25 else 'ABOVE TARGET'}")
    print(f"memory over {args.memory_frames} preview frames: python {out['mem0'] / 1024:.1f} KiB -> "
          f"{out['mem1'] / 1024:.1f} KiB (delta {(out['mem1'] - out['mem0']) / 1024:+.1f} KiB, "
          f"traced peak {out['peak'] / 1024:.1f} KiB); live GPU streams+palettes {out['live0']} -> {out['live1']} "
          f"(created {out['created']}, released {out['released']} since warm-up)")
    for line in out["top"]:
        print(f"  tracemalloc top: {line}")
    print(f"bench-preview: preview_ms={p_ms:.3f} timeline_ms={t_ms:.3f} ratio={ratio:.3f}")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    code = main(sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:])
    os._exit(code)
