"""bench-springs: our spring bone step (engine/core/animation/spring_solver.step: the frame's world terms, one
step, the rotations; all characters in one call) against the VRM Add-on's
``update_pose_bone_rotations(context, 1/60)`` on Godette and on 10 copies of her (each with its own
armature data: the add-on keeps its state in it), in the same process, timed interleaved (ours and
the add-on's alternating), medians.

  .venv/bin/python tools/bench_runtime.py --springs     (or tools/bench_springs.py)

Prints ``bench-springs: addon_ms=.. ours_ms=.. ratio=.. addon10_ms=.. ours10_ms=.. ratio10=..
ours_per_added_avatar_ms=..`` and a second line with what bounds our one-avatar figure: the
extra steps of a frame (``advance`` of 2 more steps on the same evaluation: a 24 fps frame runs 2-3),
and the floor of one numpy call here (``a + b`` on (8,3) float64), our step in those units.
Our figure is the step alone (the preview then writes the rotations into the ScenePose in one
batched call); the add-on's includes writing its rotations to pose bones.
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


def measure(copies=10, n=200) -> dict:
    import bpy
    import numpy as np

    from stylized_renderer.engine.core.animation import spring_rig as core, spring_solver as solver
    from stylized_renderer.engine.features.springs import reader

    bpy.ops.wm.open_mainfile(filepath=str(GODETTE))
    from io_scene_vrm.editor.spring_bone1.handler import update_pose_bone_rotations

    ctx = bpy.context
    arm = next(o for o in bpy.data.objects if reader.has_springs(o))
    arms = [arm]

    def enable(o):
        o.data.vrm_addon_extension.spec_version = "1.0"
        o.data.vrm_addon_extension.spring_bone1.enable_animation = True

    def ours(objs):
        specs, worlds, base = [], [], 0
        for o in objs:
            node_of, arm_node = reader.standalone_nodes(o)
            specs.append(reader.read_character(o, lambda b, f=node_of, k=base: f(b) + k if f(b) >= 0 else -1,
                                               arm_node + base))
            # node indices shift per copy: rest/parent keys too
            w = reader.standalone_world(o)
            worlds.append(w)
            base += len(w)
        rig = core.SpringRig(specs)
        st = rig.new_state()
        world = np.concatenate(worlds)
        return rig, st, world

    enable(arm)
    ctx.view_layer.update()
    rig, st, world = ours(arms)
    dt = 1.0 / 60.0
    frame = solver.prepare(rig, world, dt)
    a, b = np.random.rand(8, 3), np.random.rand(8, 3)
    addon1, ours1, extra2, floor = _interleaved_ms(
        [lambda: update_pose_bone_rotations(ctx, dt), lambda: solver.step(rig, st, world, dt),
         lambda: solver.advance(rig, st, frame, 2), lambda: [a + b for _ in range(100)]], n)
    floor /= 100.0
    for i in range(copies - 1):
        c = arm.copy()
        c.data = arm.data.copy()
        c.location.x += 1.0 + i
        ctx.scene.collection.objects.link(c)
        enable(c)
        arms.append(c)
    ctx.view_layer.update()
    rig, st, world = ours(arms)
    addon10, ours10 = _interleaved_ms([lambda: update_pose_bone_rotations(ctx, dt),
                                       lambda: solver.step(rig, st, world, dt)], n)
    return {"joints": rig.joint_count // copies, "addon_ms": addon1, "ours_ms": ours1, "addon10_ms": addon10,
            "ours10_ms": ours10, "per_added": (ours10 - ours1) / (copies - 1), "extra2_ms": extra2,
            "floor_us": floor * 1000.0}


def main() -> int:
    _bootstrap.load()
    if not check_springs.enable_addon():
        print("bench-springs: the VRM Add-on could not be enabled")
        return 2
    r = measure()
    print(f"bench-springs: joints={r['joints']} addon_ms={r['addon_ms']:.3f} ours_ms={r['ours_ms']:.3f} "
          f"ratio={r['ours_ms'] / r['addon_ms']:.3f} addon10_ms={r['addon10_ms']:.3f} ours10_ms={r['ours10_ms']:.3f} "
          f"ratio10={r['ours10_ms'] / r['addon10_ms']:.3f} ours_per_added_avatar_ms={r['per_added']:.3f}")
    print(f"bench-springs: two more steps of a frame (advance 2) ms={r['extra2_ms']:.3f}; one numpy call "
          f"floor_us={r['floor_us']:.2f}; our step = {r['ours_ms'] * 1000.0 / r['floor_us']:.0f} floor calls; "
          f"0.05x the add-on = {0.05 * r['addon_ms'] * 1000.0 / r['floor_us']:.0f} floor calls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
