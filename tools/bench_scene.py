"""bench-scene (``tools/bench_runtime.py --scene``): the preview's Scene playback frame against
Blender's ``scene.frame_set`` on one scene: the heavy rig (365 bones, ~50k vertices, 50 shape
keys) with an NLA stack (HeavyAction1 Replace under HeavyAction2 Combine at 0.5, HeavyAction0
active with Add at 0.3) plus 5 demo characters (the demo and 4 linked duplicates) with NLA stacks
(Idle Replace, Wave Combine with blend in / out, repeat 2; the active action unassigned on the
copies, their own stacks on every rig object, each strip on its action's object slot: Blender
gives a copy's new strip no slot, and before that was set the 4 copies were animated neither by
Blender nor by the preview), and the faces' shared shape-key action.

  bench-scene: frame_set_ms=A scene_ms=B ratio=R ids=N channels=M palette_uploads=U read_ms=T
               frame_set_cpu_ms=Ac scene_cpu_ms=Bc ratio_cpu=Rc
               block_frame_set_ms=A2 block_scene_ms=B2 ratio_block=R2
               block_frame_set_cpu_ms=A2c block_scene_cpu_ms=B2c ratio_block_cpu=R2c frames=F0-F1

A: the median of ``scene.frame_set`` over frames 1..100; B: the median of the Scene preview's
frame as the viewport's draw runs it (``StylizedSession._update``, which ``render_texture`` calls
before drawing) with a Scene-mode PreviewState playing on the session's own clock (the time since
its last frame: here the frame_set between two of ours, so the scene advances a few frames per
step, at fractional frames) (the NLA of every ID, the pose, palettes and morph uploads, GPU
backend).  A and B are measured **interleaved** (one of each per step), in one GPU context held
for the whole run as a viewport's draws are: entering a fresh one per frame
(``gpu_util.run_in_gpu_context`` builds a temporary scene and render each time) left llvmpipe's
threads competing with the next frame and tripled B.  Interleaved, every frame_set (~10-20 ms of
depsgraph work) empties the CPU caches our next frame reads: B is a cold-cache figure, which the
real preview never sees (no frame_set runs between two preview frames).  A2, B2: the same two
frames measured in **alternating blocks** (10 of ours in a row, then 10 frame_sets; medians per
frame): ours follow each other as in the viewport.  Both are printed; which is which: ``ratio``
is the interleaved (cold) one, ``ratio_block`` the blocks one.  F0-F1: the scene frames the
interleaved run showed (the clock moves with the machine's speed).  Same process, same scene.
The wall-clock ratio depends on the machine's load (frame_set 10-45 ms); the CPU figures less.
Ac, Bc, Rc (and the block ones): the same medians in CPU time (``time.process_time``: every
thread of the process, so Blender's depsgraph threads count for frame_set, and whatever of them
still spins during our frame counts for ours).  The heavy rig's 50 shape keys are not animated
here (``build_heavy_rig(keyed_expressions=0)``).  T: reading the scene's animation when Play
starts (again after any depsgraph update: an edit of an action or a strip).  Where the time of a
frame goes and what remains: README (*Animation > Scene*).
"""
from __future__ import annotations

import statistics
import time


def build():
    import bpy

    from tools import scenes
    from tools.bench_common import build_crowd

    names = build_crowd(5)
    before = set(bpy.data.actions)
    scenes.build_heavy_rig(scene=bpy.context.scene, actions=3, frames=100)
    heavy = sorted((a for a in bpy.data.actions if a not in before and a.name.startswith("HeavyAction")),
                   key=lambda a: a.name)
    arm = next(ob for ob in bpy.context.scene.objects if ob.type == "ARMATURE" and ob.name not in names)
    ad = arm.animation_data
    ad.action = None
    t0 = ad.nla_tracks.new()
    t0.strips.new("h1", 1, heavy[1])
    t1 = ad.nla_tracks.new()
    s = t1.strips.new("h2", 1, heavy[2])
    s.blend_type = "COMBINE"
    s.use_animated_influence = True
    s.influence = 0.5
    ad.action = heavy[0]
    ad.action_blend_type = "ADD"
    ad.action_influence = 0.3
    idle = bpy.data.actions["Idle"]
    wave = bpy.data.actions["Wave"]
    for k, name in enumerate(names):
        ob = bpy.data.objects[name]
        a = ob.animation_data or ob.animation_data_create()
        a.action = None
        tr = a.nla_tracks.new()
        st = tr.strips.new("idle", 1 + k, idle)
        _object_slot(st)
        st.extrapolation = "HOLD"
        tr = a.nla_tracks.new()
        st = tr.strips.new("wave", 5 + k, wave)
        _object_slot(st)
        st.blend_type = "COMBINE"
        st.repeat = 2.0
        st.blend_in, st.blend_out = 4.0, 4.0
        st.extrapolation = "HOLD_FORWARD"
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 100
    scenes.finish()
    return names


def _object_slot(strip) -> None:
    """The strip plays its action's object slot.  Blender assigns a slot to a new strip only when
    the action has one for that object's name (the demo rig's, not its copies'): a copy's strip
    without one animates nothing, in Blender as in the preview."""
    if getattr(strip, "action_slot", True) is None:
        slot = next((sl for sl in strip.action.slots if sl.target_id_type == "OBJECT"), None)
        if slot is not None:
            strip.action_slot = slot


def measure(frames: int = 40, blocks: int = 6, block: int = 10) -> dict:
    """Medians of ``scene.frame_set`` and of the Scene preview's frame, measured interleaved (one
    of each per step: the machine's load weighs on both alike)."""
    import bpy

    from stylized_renderer.engine.blender.session import StylizedSession
    from stylized_renderer.engine.features.preview import control as preview
    from stylized_renderer.engine.gpu import util as gpu_util

    build()
    scene = bpy.context.scene
    scene.frame_set(1)
    s = StylizedSession(viewport=True)
    st = preview.PreviewState(active=True, scene_mode=True)
    st.push("scene_reload")
    st.push("play")

    def start():
        dg = bpy.context.evaluated_depsgraph_get()
        s.ensure_gpu()
        s.ensure_runtime(dg)
        assert s.update_frame(dg, st), s.update_error

    fs, ours, fs_cpu, ours_cpu = [], [], [], []

    def run():
        dg = bpy.context.evaluated_depsgraph_get()
        shown = []
        for i in range(frames):
            t, c = time.perf_counter(), time.process_time()
            with preview.timeline_handback_suspended():     # the benchmark's frame_set, not the user scrubbing
                scene.frame_set(1 + (i % 100))
            fs.append((time.perf_counter() - t) * 1e3)
            fs_cpu.append((time.process_time() - c) * 1e3)
            t, c = time.perf_counter(), time.process_time()
            s.update_and_report(dg, st)                                # what the viewport's draw runs first
            ours.append((time.perf_counter() - t) * 1e3)
            ours_cpu.append((time.process_time() - c) * 1e3)
            assert s.update_error is None, s.update_error
            shown.append(st.scene_frame)
        return shown

    bfs, bours, bfs_cpu, bours_cpu = [], [], [], []

    def run_blocks():
        # the same two frames in alternating blocks (``block`` of ours, then ``block`` frame_sets):
        # ours follow each other as in the viewport, where no frame_set runs between two preview
        # frames (interleaved, every frame_set empties the caches our next frame reads)
        dg = bpy.context.evaluated_depsgraph_get()
        for r in range(blocks):
            for _ in range(block):
                t, c = time.perf_counter(), time.process_time()
                s.update_and_report(dg, st)
                bours.append((time.perf_counter() - t) * 1e3)
                bours_cpu.append((time.process_time() - c) * 1e3)
                assert s.update_error is None, s.update_error
            for i in range(block):
                t, c = time.perf_counter(), time.process_time()
                with preview.timeline_handback_suspended():
                    scene.frame_set(1 + (r * block + i) % 100)
                bfs.append((time.perf_counter() - t) * 1e3)
                bfs_cpu.append((time.process_time() - c) * 1e3)

    gpu_util.run_in_gpu_context(start)
    shown = gpu_util.run_in_gpu_context(run)
    if blocks:
        gpu_util.run_in_gpu_context(run_blocks)
    pb = s.preview.scene_playback
    # the real clock moved the scene (a few frames per step: a frame_set lies between two of ours)
    assert st.playing and st.active and len(set(shown)) == len(shown), shown
    assert pb is not None and s.runtime is not None     # Scene playback showed the frames
    r = {"scene_ms": statistics.median(ours), "frame_set_ms": statistics.median(fs), "ids": len(pb.anim.ids),
         "channels": sum(len(a.keys) for a in pb.anim.ids), "palette_uploads": s.runtime.stats.palette_uploads,
         "build_ms": pb.build_ms, "frame_set_cpu_ms": statistics.median(fs_cpu),
         "scene_cpu_ms": statistics.median(ours_cpu), "shown": (min(shown), max(shown))}
    if blocks:
        r.update(block_frame_set_ms=statistics.median(bfs), block_scene_ms=statistics.median(bours),
                 block_frame_set_cpu_ms=statistics.median(bfs_cpu), block_scene_cpu_ms=statistics.median(bours_cpu))
    gpu_util.run_in_gpu_context(s.free)
    return r


def print_scene(r) -> None:
    print(f"bench-scene: frame_set_ms={r['frame_set_ms']:.3f} scene_ms={r['scene_ms']:.3f} "
          f"ratio={r['scene_ms'] / r['frame_set_ms']:.3f} ids={r['ids']} channels={r['channels']} "
          f"palette_uploads={r['palette_uploads']} read_ms={r['build_ms']:.1f} "
          f"frame_set_cpu_ms={r['frame_set_cpu_ms']:.3f} scene_cpu_ms={r['scene_cpu_ms']:.3f} "
          f"ratio_cpu={r['scene_cpu_ms'] / max(r['frame_set_cpu_ms'], 1e-9):.3f}"
          + (f" block_frame_set_ms={r['block_frame_set_ms']:.3f} block_scene_ms={r['block_scene_ms']:.3f} "
             f"ratio_block={r['block_scene_ms'] / r['block_frame_set_ms']:.3f} "
             f"block_frame_set_cpu_ms={r['block_frame_set_cpu_ms']:.3f} "
             f"block_scene_cpu_ms={r['block_scene_cpu_ms']:.3f} "
             f"ratio_block_cpu={r['block_scene_cpu_ms'] / max(r['block_frame_set_cpu_ms'], 1e-9):.3f}"
             if 'block_scene_ms' in r else "")
          + f" frames={r['shown'][0]:.2f}-{r['shown'][1]:.2f}")
