"""Compare our spring bone simulation (engine/springs) with the VRM Add-on's own.

Usage:
  .venv/bin/python tools/check_springs.py FILE.blend [--steps N] [--dt S] [--control none|no-collisions|no-gravity|wrong-order]
                                         [--addon DIR]

For every armature with VRM spring bones: a generated head shake (the bone above the springs yaws
+-40 degrees with a 37-step period, as /work/notes/springs_rules.md sec. 4) is set on the pose
bone; per step Blender evaluates it, the add-on's ``update_pose_bone_rotations(context, dt)`` runs
and Blender evaluates again; our side composes the same input pose (Blender's pose basis of every
bone that is not a spring joint) with OUR spring rotations (its own forward kinematics, nothing of
the add-on's result is read) and runs ``engine.springs.core.step``.  Every spring joint's world
position is compared.  The add-on simulates only VRM 1.0 data with Animation on: both are set.

Prints ``spring-check: joints=J steps=N max_rel_error=X tip_motion=Y`` (error relative to the
avatar's height; tip_motion = largest movement of a tail joint relative to its root bone's head,
also relative to the height).  Exit 0 only when max_rel_error <= 1e-3 and tip_motion > 1e-3.
Negative controls (``--control``) break our side on purpose; they must fail.
"""
from __future__ import annotations

import argparse
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from tools import _bootstrap  # noqa: E402

TOLERANCE = 1e-3
ADDON_DIR = _bootstrap.ROOT.parent / "shared" / "vendor" / "vrm_addon"


def enable_addon(addon_dir=ADDON_DIR) -> bool:
    import addon_utils
    import bpy

    if str(addon_dir) not in sys.path:
        sys.path.insert(0, str(addon_dir))
    try:
        addon_utils.enable("io_scene_gltf2", default_set=True)
        addon_utils.enable("io_scene_vrm", default_set=True)
    except Exception:
        return False
    return hasattr(bpy.types.Armature, "vrm_addon_extension")


def _fk(arm, basis: dict):
    """pose_bone.matrix of every bone from basis matrices (standard inheritance), parent first."""
    import numpy as np

    out = {}
    for b in arm.data.bones:                     # Blender keeps bones parent-first
        rest = np.array(b.matrix_local, np.float64)
        if b.parent is None:
            out[b.name] = rest @ basis[b.name]
        else:
            out[b.name] = out[b.parent.name] @ np.linalg.inv(np.array(b.parent.matrix_local)) @ rest @ basis[b.name]
    return out


def shake_bones(arm, spec, node_name):
    """The bones that carry the springs: for each spring the nearest ancestor of its joints that is
    not a joint itself (Godette: head_Armature and chest_Armature), in bone order."""
    joints = {node_name[j.node] for s in spec.springs for j in s.joints if j.node >= 0}
    out = set()
    for s in spec.springs:
        for j in s.joints:
            if j.node < 0:
                continue
            b = arm.data.bones[node_name[j.node]].parent
            while b is not None and b.name in joints:
                b = b.parent
            if b is not None:
                out.add(b.name)
    return [b.name for b in arm.data.bones if b.name in out]


def run(path: str, steps: int = 120, dt: float = 1.0 / 60.0, control: str = "none", log=print) -> dict:
    import bpy
    import numpy as np
    from mathutils import Quaternion

    from stylized_renderer.engine.springs import core, reader

    bpy.ops.wm.open_mainfile(filepath=str(path))
    from io_scene_vrm.editor.spring_bone1.handler import update_pose_bone_rotations

    ctx = bpy.context
    arms = [o for o in bpy.data.objects if reader.has_springs(o)]
    if not arms:
        raise SystemExit(f"spring-check: {path} has no armature with VRM spring bones")
    results = []
    for arm in arms:
        node_of, arm_node = reader.standalone_nodes(arm)
        names = [b.name for b in arm.data.bones]
        spec = reader.read_character(arm, node_of, arm_node, warn=log)
        if control == "no-collisions":
            for s in spec.springs:
                s.colliders = []
        elif control == "no-gravity":
            for s in spec.springs:
                for j in s.joints:
                    j.gravity_power = 0.0
        rig = core.SpringRig([spec], joint_order="listed" if control == "wrong-order" else "addon")
        state = rig.new_state()
        results.append((arm, spec, rig, state, names, node_of, arm_node))
        ext = arm.data.vrm_addon_extension
        ext.spec_version = "1.0"
        ext.spring_bone1.enable_animation = True
    max_err = tip = 0.0
    joints = 0
    for arm, spec, rig, state, names, node_of, arm_node in results:
        shaken = [arm.pose.bones[b] for b in shake_bones(arm, spec, names)]
        for pb in shaken:
            pb.rotation_mode = "QUATERNION"
        our_rot = {}
        tails = np.unique([j.node for s in spec.springs for j in s.joints if j.node >= 0])   # every spring joint
        joints += int(tails.size)
        bones = arm.data.bones
        height = float(np.ptp(np.array([b.head_local for b in bones] + [b.tail_local for b in bones]), axis=0).max())
        roots = rig.head[:, 0] if rig.depth else rig.head[:, :0].reshape(-1)
        rest_vec = None
        W = np.array(arm.matrix_world, np.float64)
        for n in range(1, steps + 1):
            yaw = math.radians(40.0) * math.sin(2.0 * math.pi * n / 37.0)
            for i, pb in enumerate(shaken):     # the first carrier yaws, the others sway
                pb.rotation_quaternion = Quaternion((0.0, 0.0, 1.0), yaw if i == 0 else 0.5 * yaw)
            ctx.view_layer.update()
            # ours: Blender's input basis for the non-spring bones, our rotations for spring heads
            basis = {b.name: np.array(arm.pose.bones[b.name].matrix_basis, np.float64) for b in bones}
            for node, q in our_rot.items():
                m = basis[names[node]].copy()
                m[:3, :3] = core.quat_to_mat3(q)
                basis[names[node]] = m
            pm = _fk(arm, basis)
            world = np.array([W @ pm[nm] for nm in names] + [W])
            rots = core.step(rig, state, world, dt)
            for node, q in zip(*core.pose_rotations(rig, rots)):
                our_rot[int(node)] = q
            update_pose_bone_rotations(ctx, dt)
            ctx.view_layer.update()
            # compare: our FK with the new rotations against Blender's evaluated pose after the add-on
            for node, q in our_rot.items():
                m = basis[names[node]].copy()
                m[:3, :3] = core.quat_to_mat3(q)
                basis[names[node]] = m
            pm = _fk(arm, basis)
            ours = np.array([(W @ pm[names[t]])[:3, 3] for t in tails])
            theirs = np.array([(W @ np.array(arm.pose.bones[names[t]].matrix))[:3, 3] for t in tails])
            max_err = max(max_err, float(np.abs(ours - theirs).max()) / height)
            tv = rig.tail[rig.valid]
            hv = np.broadcast_to(roots[:, None], rig.valid.shape)[rig.valid]
            vec = np.array([(W @ pm[names[t]])[:3, 3] - (W @ pm[names[h]])[:3, 3] for t, h in zip(tv, hv)]).reshape(-1, 3)
            if rest_vec is None:
                rest_vec = vec
            if len(vec):
                tip = max(tip, float(np.linalg.norm(vec - rest_vec, axis=1).max()) / height)
    return {"joints": joints, "steps": steps, "max_rel_error": max_err, "tip_motion": tip}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--dt", type=float, default=1.0 / 60.0)
    ap.add_argument("--control", default="none", choices=["none", "no-collisions", "no-gravity", "wrong-order"])
    ap.add_argument("--addon", default=str(ADDON_DIR))
    args = ap.parse_args(argv)
    _bootstrap.load()
    if not enable_addon(pathlib.Path(args.addon)):
        print(f"spring-check: the VRM Add-on could not be enabled from {args.addon}")
        return 2
    r = run(args.file, args.steps, args.dt, args.control)
    print(f"spring-check: joints={r['joints']} steps={r['steps']} max_rel_error={r['max_rel_error']:.3e} "
          f"tip_motion={r['tip_motion']:.3e}")
    ok = r["max_rel_error"] <= TOLERANCE and r["tip_motion"] > TOLERANCE and r["steps"] >= 120
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
