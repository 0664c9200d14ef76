"""Rigify benchmark: the preview player on a baked Rigify character against Blender's frame_set.

Builds the Rigify character of tools/rigify_rig.py (the bundled add-on's human metarig, generated,
a body of tubes around its 160 DEF bones, 5 bones a vertex with B-Bones (up to 10 influences),
~49k vertices like the heavy rig of
tools/bench_runtime.py, an action keyed on FK/IK controls) and
measures the median per-frame cost of
  (a) Blender's scene.frame_set on that scene (constraints, IK, drivers, B-Bones, the body);
  (b) the preview player as the viewport runs it: StylizedSession.update_frame in preview mode,
      playing the baked clip (sample + exact bone matrices + B-Bone segments + palettes + upload);
  (c) the bake's cost per frame of the action (engine/blender/bake/record.py: frame_set + reading
      the pose and the B-Bone segments, the adaptive bake's mid-point checks and sub-frame samples
      included), over fresh bakes, and the bake's memory (Bake.nbytes; the session's BakedPose
      shares its tables);
and prints
  bench-rigify: frame_set_ms=A player_ms=B ratio_player=R bake_ms_per_frame=C bake_ratio=C/A bake_mb=M
``measure()`` returns the figures (tools/bench_runtime.py calls it); ``main()`` prints them.
This is a benchmark, not a test: it asserts nothing.  Goal: ratio_player <= 0.10.

Measured (2 CPU cores shared with other jobs, llvmpipe; 706 bones, 160 deform, 48.6k vertices,
5 bones a vertex, 668 palette rows of which 560 B-Bone segment rows): frame_set 2.2-2.4 ms on quiet
runs (up to 8.5 ms under load; Blender's rig evaluation ~0.7 ms, its Armature modifier the rest),
player 0.21 ms, ratio ~0.09: at the goal.  What makes the player cheap on a baked clip
(engine/features/preview/bakes.py ``BakeFeed``): the inner bones' worlds from the bake's root-relative matrices
(``ScenePose.set_world_shortcut``: one (4k,4) x (4,4) product per root bone instead of one
batched product per bone level), and the palettes straight from the baked joints
(``SkinningPaletteSet.set_baked_joints``: each row's root-relative joint @ B-Bone relation @
inverse bind, then one product per run of rows sharing a mesh and a root bone).  The locals are
written as they are (7 us for 364 bones; deferring them until read saved 4.7 us of a frame and
was removed, issue 24).  Before these (player
~0.41 ms, ratio ~0.17) the bone-level world chain (~110 us), the per-row segment and inverse-bind
products (~100 us) and the root-channel sampling (~75 us) made most of it.

Issue 22 (exact between frames; same loaded machine, same process, one run each): the adaptive
bake of this fast 10-frame clip takes 77 samples and 143 mid-point checks (largest error between
samples 4.9e-4 of the rig's size, 3.5 MB): bake_ratio 43.8 x frame_set (1.87 before, one sample
a frame, 2.7e-2 between frames); player_ms 2.15 vs frame_set 35.1, ratio_player 0.061 (0.028
before: the palettes are now folded from one exact sample a frame instead of lerping per-frame
folded tables).  On a 250-frame Rigify clip (keys 83 frames apart) the bake adds no sample and
checks 31 mid-points (6.6e-5), 35.7 vs 21.0 ms a frame (the decomposition and the checks).

Issue 22 follow-up (in-process interleaved A/B, the machine loaded by other jobs: frame_set 25-60
ms instead of ~15): the player keeps each interval's polynomial (bake_interp.coefficients, a short
bake all at its first frame, a long one per interval entered, at most 2 MB a table) instead of
re-making the Hermite terms on entering each interval: ratio_player median 0.264 -> 0.194 over 12
rounds (0.223 -> 0.135 over 10; the pre-issue-22 lerp/slerp measured 0.225 / 0.159 in the same
runs).  The 250-frame bake: 11.42 MB, 15.39 MB after playing every interval.  The fast clip's
bake: 20 samples, 27 mid-point checks (23 before: the halves of an interval measured more than
twice the tolerance off are measured again), bake_ratio median 4.21 -> 3.55 over 8 bakes each
(the Refiner's rotation logarithms once per stencil window, the B-Bone segments in one array).
"""
from __future__ import annotations

import pathlib
import statistics
import sys
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from tools import _bootstrap  # noqa: E402
from tools.bench_common import median_ms as _median_ms  # noqa: E402


def measure(frames: int = 60, bakes: int = 3, rings: int = 16, sides: int = 19, keys=None) -> dict:
    """``keys``: the frames the action keys (tools/rigify_rig.py FRAMES when None: a fast 10-frame
    clip; (1, 84, 167, 250): the 250-frame clip).  frame_set and the bake alternate (``bakes``
    rounds, each its own ratio; the median is ``bake_ratio``)."""
    import bpy

    root = str(pathlib.Path(__file__).resolve().parents[1])
    if root not in sys.path:
        sys.path.insert(0, root)
    from stylized_renderer.engine.blender.session import StylizedSession
    from stylized_renderer.engine.features.preview.control import PreviewState
    from stylized_renderer.engine.gpu import util as gpu_util
    from tools import rigify_rig

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.render.engine = "STYLIZED"
    frames_kw: dict[str, Any] = {"frames": tuple(keys)} if keys else {}
    rig, body, action = rigify_rig.build_rigify(rings=rings, sides=sides, **frames_kw)
    f0, f1 = scene.frame_start, scene.frame_end
    span = f1 - f0 + 1
    result: dict[str, Any] = {"bones": len(rig.data.bones), "deform_bones": sum(b.use_deform for b in rig.data.bones),
              "vertices": len(body.data.vertices)}

    def frame_set(i):
        scene.frame_set(f0 + (i % span))

    frame_set(0)
    session = StylizedSession()         # its own bakes: the ones below are what its preview plays
    per_frame, sets, ratios = [], [], []
    for _ in range(max(1, bakes)):        # interleaved: frame_set, then a fresh bake
        sets.append(_median_ms(frame_set, frames))
        scene.frame_set(f0)
        session.bakes.clear()
        b = session.bakes.ensure(rig, action.name)
        if b is None:
            raise RuntimeError(f"the rig '{rig.name}' got no bake of '{action.name}' (it needs none)")
        # per frame of the action (the adaptive bake's sub-frame samples and mid-point checks
        # are part of each frame's cost)
        per_frame.append(b.seconds / max(b.frame_count - b.added, 1) * 1e3)
        ratios.append(per_frame[-1] / sets[-1])
    result["frame_set_ms"] = statistics.median(sets)
    result["bake_ms_per_frame"] = statistics.median(per_frame)
    result["bake_ratio"] = statistics.median(ratios)
    result["bake_frames"] = b.frame_count - b.added
    result["bake_samples"] = b.frame_count
    result["bake_checked"] = b.checked
    result["bake_between_error"] = b.between_error
    result["bake_mb"] = b.nbytes / 2**20

    session.imports.want_clips = True
    dg = bpy.context.evaluated_depsgraph_get()
    state = PreviewState(armature=rig.name, active=True)
    state.push("clip", action.name)
    state.push("loop", True)
    state.push("play")

    def task():
        session.ensure_gpu()
        session.ensure_runtime(dg)
        assert session.update_frame(dg, state) and state.active, state.last_error

        def player_frame(i):
            session.update_frame(dg, state)

        r = {"player_ms": _median_ms(player_frame, frames)}
        assert session.runtime is not None      # update_frame returned True above
        r["palette_uploads_playing"] = session.runtime.stats.palette_uploads
        r["fallbacks"] = dict(session.imports.fallbacks)
        return r

    try:
        result.update(gpu_util.run_in_gpu_context(task))
    finally:
        session.free()                  # (and its bakes)
    result["ratio_player"] = result["player_ms"] / result["frame_set_ms"]
    return result


def main() -> int:
    _bootstrap.load()
    keys = None
    if "--keys" in sys.argv:      # e.g. --keys 1,84,167,250 (the 250-frame clip)
        keys = [int(x) for x in sys.argv[sys.argv.index("--keys") + 1].split(",")]
    r = measure(keys=keys)
    print(f"Rigify character: {r['bones']} bones ({r['deform_bones']} deform), {r['vertices']} vertices, "
          f"{r['bake_frames']} baked frames, fallbacks: {r['fallbacks'] or 'none'}")
    print(f"  (a) scene.frame_set        {r['frame_set_ms']:8.3f} ms")
    print(f"  (b) preview player update  {r['player_ms']:8.3f} ms  (palette uploads {r['palette_uploads_playing']})")
    print(f"  (c) bake per frame         {r['bake_ms_per_frame']:8.3f} ms  ({r['bake_samples']} samples, "
          f"{r['bake_checked']} mid-points checked, largest error between samples {r['bake_between_error']:.1e}, "
          f"{r['bake_mb']:.1f} MB)")
    print(f"bench-rigify: frame_set_ms={r['frame_set_ms']:.3f} player_ms={r['player_ms']:.3f} "
          f"ratio_player={r['ratio_player']:.3f} bake_ms_per_frame={r['bake_ms_per_frame']:.3f} "
          f"bake_ratio={r['bake_ratio']:.2f} bake_mb={r['bake_mb']:.2f} bake_samples={r['bake_samples']} "
          f"bake_checked={r['bake_checked']} bake_between_error={r['bake_between_error']:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
