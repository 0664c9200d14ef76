"""bench-springs: our spring bone stage against the VRM Add-on's ``update_pose_bone_rotations(context,
1/60)`` on Godette and on 10 copies of her (each with its own armature data: the add-on keeps its
state in it), in the same process, timed interleaved (ours and the add-on's alternating), medians.

  .venv/bin/python tools/bench_runtime.py --springs     (or tools/bench_springs.py)

What each side's timed call does (the same work):
- the add-on: reads every spring armature's pose (``pose_bone.matrix``, ``matrix_world``, the
  colliders' Empties through its property getters), simulates one step, writes the rotations it
  changed into ``pose_bone.rotation_quaternion``.  Blender's evaluation of that pose afterwards
  (the depsgraph) is not in its figure.
- ours (``SpringsRuntime.simulate`` on a ScenePose of the imported scene, the preview's own call):
  reads the pose's world matrices, simulates one step (spring_solver prepare + advance: the
  frame's world terms and the step), writes the rotations into the pose's local TRS
  (``ScenePose.write_rotations``, the player's write for rotations) and updates the worlds of the joints
  and what hangs below them (``update_world_below``: what the palettes read; Blender's depsgraph
  evaluation on the add-on's side, not in its figure, so ours does more).

Prints ``bench-springs: addon_ms=.. ours_ms=.. ratio=.. addon10_ms=.. ours10_ms=.. ratio10=..
ours_per_added_avatar_ms=..``, then where our one-avatar figure goes (the step alone, the write,
the world update: medians of the same interleaved runs) and the floor of one numpy call here
(``a + b`` on (8,3) float64, 100 of them right after the add-on's step, as ours run) with our
stage in those units (it makes about 100 numpy calls on Godette: docs/springs.md).
"""
from __future__ import annotations

import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from tools import _bootstrap, check_springs  # noqa: E402

GODETTE = _bootstrap.ROOT.parent / "shared" / "testdata" / "vrm" / "Godette_vrm0.blend"


def _interleaved_ms(fns, n):
    """Medians (ms) of each of ``fns``, called in turn ``n`` times."""
    ts = [[] for _ in fns]
    for _ in range(n):
        for i, fn in enumerate(fns):
            t = time.perf_counter()
            fn()
            ts[i].append((time.perf_counter() - t) * 1000.0)
    return [statistics.median(t) for t in ts]


def _godette_stage(arms):
    """(SpringsRuntime, ScenePose) of the imported scene: the preview's objects, not stand-ins."""
    import bpy

    from stylized_renderer.engine.blender import importer
    from stylized_renderer.engine.core.animation.pose import ScenePose
    from stylized_renderer.engine.features.springs import runtime as springs_runtime

    bpy.context.view_layer.update()
    asset = importer.import_scene(bpy.context.evaluated_depsgraph_get())
    pose = ScenePose()
    if not pose.initialize(asset) or not pose.update_world_matrices():
        raise RuntimeError(f"bench-springs: the pose could not be built: {pose.last_error}")
    sr = springs_runtime.build(asset)
    if sr.joint_count == 0 or sr.warnings:
        raise RuntimeError(f"bench-springs: no springs read ({sr.warnings})")
    return sr, pose


def _parts(sr, pose, dt):
    """One stage, timed in parts (ms): step (read the pose + simulate), write, world update."""
    from stylized_renderer.engine.core.animation import spring_solver as solver

    t0 = time.perf_counter()
    sr.rotations = solver.advance(sr.rig, sr.state, solver.prepare(sr.rig, pose.world_matrices, dt), 1)
    t1 = time.perf_counter()
    sr.write(pose, worlds=False)
    t2 = time.perf_counter()
    pose.update_world_below(sr.nodes)        # as SpringsRuntime.write does on a pose clean before it
    t3 = time.perf_counter()
    return (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3


def measure(copies=10, n=300) -> dict:
    import bpy
    import numpy as np

    from stylized_renderer.engine.features.springs import reader

    bpy.ops.wm.open_mainfile(filepath=str(GODETTE))
    from io_scene_vrm.editor.spring_bone1.handler import update_pose_bone_rotations

    ctx = bpy.context
    arm = next(o for o in bpy.data.objects if reader.has_springs(o))
    arms = [arm]

    def enable(o):
        o.data.vrm_addon_extension.spec_version = "1.0"
        o.data.vrm_addon_extension.spring_bone1.enable_animation = True

    enable(arm)
    dt = 1.0 / 60.0
    sr, pose = _godette_stage(arms)
    a, b = np.random.rand(8, 3), np.random.rand(8, 3)
    addon, parts, full, floor = [], [], [], []
    for _ in range(n):      # interleaved: each of ours right after the add-on's (both see its cache)
        t = time.perf_counter()
        update_pose_bone_rotations(ctx, dt)
        addon.append((time.perf_counter() - t) * 1e3)
        t = time.perf_counter()
        sr.simulate(pose, 1)
        full.append((time.perf_counter() - t) * 1e3)
        t = time.perf_counter()
        update_pose_bone_rotations(ctx, dt)
        addon.append((time.perf_counter() - t) * 1e3)
        parts.append(_parts(sr, pose, dt))
        update_pose_bone_rotations(ctx, dt)  # the floor: 100 trivial numpy calls after the add-on too
        t = time.perf_counter()
        for _ in range(100):
            _ = a + b
        floor.append((time.perf_counter() - t) * 1e3 / 100.0)
    med = statistics.median
    hot = []                              # ours alone, one stage after the other (warm caches)
    for _ in range(n):
        t = time.perf_counter()
        sr.simulate(pose, 1)
        hot.append((time.perf_counter() - t) * 1e3)
    r = {"hot_ms": med(hot), "joints": sr.joint_count, "addon_ms": med(addon), "ours_ms": med(full),
         "step_ms": med(p[0] for p in parts), "write_ms": med(p[1] for p in parts),
         "worlds_ms": med(p[2] for p in parts), "floor_us": med(floor) * 1000.0}
    for i in range(copies - 1):
        c = arm.copy()
        c.data = arm.data.copy()
        c.location.x += 1.0 + i
        ctx.scene.collection.objects.link(c)
        enable(c)
        arms.append(c)
    sr10, pose10 = _godette_stage(arms)
    r["addon10_ms"], r["ours10_ms"] = _interleaved_ms([lambda: update_pose_bone_rotations(ctx, dt),
                                                      lambda: sr10.simulate(pose10, 1)], n)
    r["per_added"] = (r["ours10_ms"] - r["ours_ms"]) / (copies - 1)
    r["joints10"] = sr10.joint_count
    return r


def main() -> int:
    _bootstrap.load()
    if not check_springs.enable_addon():
        print("bench-springs: the VRM Add-on could not be enabled")
        return 2
    r = measure()
    print(f"bench-springs: joints={r['joints']} addon_ms={r['addon_ms']:.3f} ours_ms={r['ours_ms']:.3f} "
          f"ratio={r['ours_ms'] / r['addon_ms']:.3f} addon10_ms={r['addon10_ms']:.3f} ours10_ms={r['ours10_ms']:.3f} "
          f"ratio10={r['ours10_ms'] / r['addon10_ms']:.3f} ours_per_added_avatar_ms={r['per_added']:.3f}")
    print(f"bench-springs: ours in parts step_ms={r['step_ms']:.3f} write_ms={r['write_ms']:.3f} "
          f"worlds_ms={r['worlds_ms']:.3f}; one numpy call floor_us={r['floor_us']:.2f}; our stage = "
          f"{r['ours_ms'] * 1000.0 / r['floor_us']:.0f} floor calls, the step alone "
          f"{r['step_ms'] * 1000.0 / r['floor_us']:.0f}; 0.05x the add-on = "
          f"{0.05 * r['addon_ms'] * 1000.0 / r['floor_us']:.0f} floor calls; ours alone (not interleaved) "
          f"ms={r['hot_ms']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
