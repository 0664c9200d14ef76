"""bench-springs: our spring bone step (engine/springs/core.step, all characters in one call)
against the VRM Add-on's ``update_pose_bone_rotations(context, 1/60)`` on Godette and on 10 copies
of her (each with its own armature data: the add-on keeps its state in it), in the same process.

  .venv/bin/python tools/bench_runtime.py --springs     (or tools/bench_springs.py)

Prints ``bench-springs: addon_ms=.. ours_ms=.. ratio=.. addon10_ms=.. ours10_ms=.. ratio10=..
ours_per_added_avatar_ms=..``.  Our figure is the step alone (the preview then writes the rotations
into the ScenePose in one batched call); the add-on's includes writing its rotations to pose bones.
"""
from __future__ import annotations

import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from tools import _bootstrap, check_springs  # noqa: E402

GODETTE = _bootstrap.ROOT.parent / "shared" / "testdata" / "vrm" / "Godette_vrm0.blend"


def _median_ms(fn, n):
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1000.0)
    return statistics.median(ts)


def measure(copies=10, n=60) -> dict:
    import bpy
    import numpy as np

    from stylized_renderer.engine.springs import core, reader

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
    addon1 = _median_ms(lambda: update_pose_bone_rotations(ctx, 1.0 / 60.0), n)
    rig, st, world = ours(arms)
    ours1 = _median_ms(lambda: core.step(rig, st, world, 1.0 / 60.0), n)
    for i in range(copies - 1):
        c = arm.copy()
        c.data = arm.data.copy()
        c.location.x += 1.0 + i
        ctx.scene.collection.objects.link(c)
        enable(c)
        arms.append(c)
    ctx.view_layer.update()
    addon10 = _median_ms(lambda: update_pose_bone_rotations(ctx, 1.0 / 60.0), n)
    rig, st, world = ours(arms)
    ours10 = _median_ms(lambda: core.step(rig, st, world, 1.0 / 60.0), n)
    return {"joints": rig.joint_count // copies, "addon_ms": addon1, "ours_ms": ours1, "addon10_ms": addon10,
            "ours10_ms": ours10, "per_added": (ours10 - ours1) / (copies - 1)}


def main() -> int:
    _bootstrap.load()
    if not check_springs.enable_addon():
        print("bench-springs: the VRM Add-on could not be enabled")
        return 2
    r = measure()
    print(f"bench-springs: joints={r['joints']} addon_ms={r['addon_ms']:.3f} ours_ms={r['ours_ms']:.3f} "
          f"ratio={r['ours_ms'] / r['addon_ms']:.3f} addon10_ms={r['addon10_ms']:.3f} ours10_ms={r['ours10_ms']:.3f} "
          f"ratio10={r['ours10_ms'] / r['addon10_ms']:.3f} ours_per_added_avatar_ms={r['per_added']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
