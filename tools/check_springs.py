"""Compare our spring bone simulation (engine/features/springs) with the VRM Add-on's own.

Usage:
  .venv/bin/python tools/check_springs.py FILE.blend [--steps N] [--dt S] [--control none|no-collisions|no-gravity|wrong-order]
                                         [--addon DIR]

Motion: the armature's action when it covers the run, else a generated head shake (the bones that
carry the springs yaw +-40 degrees with a 37/60 s period, keyed on every frame).  Several armatures
with spring bones: the preview's crowd plays the first one's clip on all of them, and so does the
add-on's side; each armature's error is in ``armatures``.

Ours: the clip is played by the REAL preview path (a viewport StylizedSession, a PreviewState
playing the clip, ``update_frame`` as view_draw calls it) with a fixed clock step ``dt`` per update;
after each update every spring joint's world position is read from the session's pose.  Nothing of
Blender's pose or of the add-on is read.

The add-on: the same file and action, its frame handlers removed (the check calls its step itself);
per preview update the scene is set to the clip time the preview showed (``frame_set`` with the
subframe: Blender evaluates the action), then ``update_pose_bone_rotations(context, 1/60)`` runs as
many times as our preview stepped in that update (each reading that evaluation, as its own
frame_change_pre does), then Blender evaluates again and the joints' world positions are read.
The add-on simulates only VRM 1.0 data with Animation on: both are set for its run.

Prints ``spring-check: joints=J steps=N max_rel_error=X tip_motion=Y`` (error relative to the
avatar's height; tip_motion = largest movement of a tail joint in the frame of the bone that carries
its spring, relative to the height: a check that simulates nothing cannot pass).  Exit 0 only when
max_rel_error <= 1e-3, tip_motion > 1e-3 and N >= 120.  Negative controls (``--control``) break
our side on purpose (the setup our preview simulates); they must fail.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import pathlib
import sys
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from tools import _bootstrap  # noqa: E402

TOLERANCE = 1e-3
STEP = 1.0 / 60.0
ADDON_DIR = _bootstrap.ROOT.parent / "shared" / "vendor" / "vrm_addon"
SHAKE = "SpringCheckShake"


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


def _joint_bones(arm):
    """Names of every bone named by a spring joint, bone order."""
    from stylized_renderer.engine.features.springs import reader

    node_of, arm_node = reader.standalone_nodes(arm)
    spec = reader.read_character(arm, node_of, arm_node)
    if spec is None:
        raise RuntimeError(f"'{arm.name}' has no spring bones")
    names = [b.name for b in arm.data.bones]
    nodes = {j.node for s in spec.springs for j in s.joints if j.node >= 0}
    return [names[n] for n in sorted(nodes)]


def carrier_of(arm, joints) -> dict:
    """joint bone -> the bone that carries it: its nearest ancestor that is not a joint itself
    (Godette: head_Armature, chest_Armature).  Joints without one are left out."""
    js = set(joints)
    out = {}
    for nm in joints:
        b = arm.data.bones[nm].parent
        while b is not None and b.name in js:
            b = b.parent
        if b is not None:
            out[nm] = b.name
    return out


def shake_bones(arm, joints):
    """The carriers of the springs (``carrier_of``), bone order."""
    out = set(carrier_of(arm, joints).values())
    return [b.name for b in arm.data.bones if b.name in out]


def _motion(arm, joints, seconds, log):
    """The action to play: the armature's own when it covers ``seconds`` and keys no spring joint,
    else a generated head shake on the carrier bones (keyed on every frame)."""
    import bpy
    from mathutils import Quaternion

    scene = bpy.context.scene
    fps = scene.render.fps / scene.render.fps_base
    ad = arm.animation_data
    act = ad.action if ad is not None else None
    if act is not None:
        lo, hi = act.frame_range
        keyed = {fc.data_path.split('"')[1] for fc in _fcurves(act) if fc.data_path.startswith("pose.bones[")}
        if (hi - lo) / fps >= seconds and not keyed & set(joints):
            log(f"spring-check: '{arm.name}' plays its action '{act.name}'")
            return act
    carriers = [arm.pose.bones[b] for b in shake_bones(arm, joints)]
    if ad is None:
        ad = arm.animation_data_create()
    ad.action = None
    frames = int(math.ceil(seconds * fps)) + 2
    for pb in carriers:
        pb.rotation_mode = "QUATERNION"
    for f in range(frames + 1):
        yaw = math.radians(40.0) * math.sin(2.0 * math.pi * (f / fps) / (37.0 / 60.0))
        for i, pb in enumerate(carriers):        # the first carrier yaws, the others sway
            pb.rotation_quaternion = Quaternion((0.0, 0.0, 1.0), yaw if i == 0 else 0.5 * yaw)
            pb.keyframe_insert("rotation_quaternion", frame=scene.frame_start + f)
    for pb in carriers:
        pb.rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    shake: Any = ad.action          # the action keyframe_insert made (ad.action was None above)
    shake.name = SHAKE
    log(f"spring-check: '{arm.name}' plays a generated head shake of {', '.join(p.name for p in carriers)}")
    return shake


def _fcurves(action):
    """F-curves of an action (Blender 4.4+: layered actions; older: action.fcurves)."""
    fcs = getattr(action, "fcurves", None)
    if fcs is not None:
        return list(fcs)
    out = []
    for layer in action.layers:
        for strip in layer.strips:
            for bag in strip.channelbags:
                out += list(bag.fcurves)
    return out


def _control(scene_asset, control):
    """A negative control: the setup our preview simulates (of ``scene_asset``), broken on purpose."""
    from stylized_renderer.engine.core.animation import spring_rig as core
    from stylized_renderer.engine.features.springs import runtime as springs_runtime

    chars, warnings, names = springs_runtime.read_characters(scene_asset)
    for ch in chars:
        for s in ch.springs:
            if control == "no-collisions":
                s.colliders = []
            elif control == "no-gravity":
                for j in s.joints:
                    j.gravity_power = 0.0
    order = "listed" if control == "wrong-order" else "addon"
    return springs_runtime.SpringsRuntime(core.SpringRig(chars, order), warnings, springs_runtime.toggles(names))


@contextlib.contextmanager
def _preview_clock():
    """The session's clock driven by hand (the preview advances by exactly what the check says)."""
    import time as _time

    from stylized_renderer.engine.blender import session as session_mod

    class Clock:
        now = 1000.0

        def perf_counter(self):
            return self.now

        def __getattr__(self, name):
            return getattr(_time, name)

    clock = Clock()
    saved = session_mod.time
    session_mod.time = clock
    try:
        yield clock
    finally:
        session_mod.time = saved


def _worlds(rt):
    """(N,4,4) the world matrices of the runtime ``rt`` after an update (its pose is clean then)."""
    w = rt.pose.world_matrices
    if w is None:
        raise RuntimeError("the preview's pose has no world matrices after the update (dirty)")
    return w


def play_preview(arms, updates, dt, control="none"):
    """Our side: play the first armature's clip in the preview (one PreviewState: the first
    armature's; with several armatures the crowd plays that clip on all), ``updates`` updates of ``dt``
    seconds.  Returns ({armature: (updates+1, J, 3) world positions of its joints}, steps per
    update, the carriers' (updates+1, J, 4, 4) world matrices, the 60 Hz steps of each update, the
    clip time reached) -- index 0 is the shown pose before the first step."""
    import bpy
    import numpy as np

    from stylized_renderer.engine.blender import session as session_mod
    from stylized_renderer.engine.features.preview import control as preview
    from stylized_renderer.engine.gpu import util as gpu_util

    scene = bpy.context.scene
    preview.clear_states()
    st = preview.get_state(scene, arms[0][0])
    st.clip_name = arms[0][2].name
    st.crowd = len(arms) > 1
    st.active = True
    with _preview_clock() as clock, preview.timeline_handback_suspended():
        s = session_mod.StylizedSession(viewport=True)
        dg = bpy.context.evaluated_depsgraph_get()

        def update():
            def task():
                s.ensure_gpu()
                s.ensure_runtime(dg)
                return s.update_frame(dg, st)
            if not gpu_util.run_in_gpu_context(task) or st.last_error:
                raise RuntimeError(f"preview update failed: {st.last_error or s.update_error}")
            if s.runtime is None:
                raise RuntimeError("the preview update left the session without a runtime")
            return s.runtime

        try:
            rt = update()
            st.push("play")
            rt = update()
            sr = s.springs.of(rt)
            if sr is None or not sr.rig.chain_count:
                raise RuntimeError("the preview simulates no spring bones (Animate Spring Bones off?)")
            if control != "none":
                s.springs.state = sr = _control(rt.scene, control)
            index = {n.name: i for i, n in enumerate(rt.scene.nodes)}
            nodes = {arm.name: np.array([index[f"{arm.name}/{b}"] for b in joints]) for arm, joints, _ in arms}
            cnodes = {}
            for arm, joints, _ in arms:
                car = carrier_of(arm, joints)       # a root joint without a parent: the armature
                cnodes[arm.name] = np.array([index[f"{arm.name}/{car[b]}" if b in car else arm.name] for b in joints])
            out = {k: [_worlds(rt)[v][:, :3, 3].copy()] for k, v in nodes.items()}
            cm = {k: [_worlds(rt)[v].copy()] for k, v in cnodes.items()}
            steps = []
            for _ in range(updates):
                assert s.springs.state is not None      # the preview simulates springs (checked above)
                before = s.springs.state.steps_total
                clock.now += dt
                rt = update()
                steps.append(s.springs.state.steps_total - before)
                for k, v in nodes.items():
                    out[k].append(_worlds(rt)[v][:, :3, 3].copy())
                    cm[k].append(_worlds(rt)[cnodes[k]].copy())
            times = float(rt.player.current_time)
        finally:
            gpu_util.run_in_gpu_context(s.free)
            preview.clear_states()
    return ({k: np.array(v) for k, v in out.items()}, {k: np.array(v) for k, v in cm.items()}, steps, times)


@contextlib.contextmanager
def _addon_handlers_removed():
    """The add-on's frame/depsgraph handlers out of the way: the check runs its step itself."""
    import bpy

    lists = [bpy.app.handlers.frame_change_pre, bpy.app.handlers.frame_change_post,
             bpy.app.handlers.depsgraph_update_pre, bpy.app.handlers.depsgraph_update_post]
    removed = []
    for hl in lists:
        for fn in list(hl):
            if getattr(fn, "__module__", "").startswith("io_scene_vrm"):
                hl.remove(fn)
                removed.append((hl, fn))
    try:
        yield
    finally:
        for hl, fn in removed:
            hl.append(fn)


def play_addon(arms, steps_per_update, dt):
    """The add-on's side: per update, Blender evaluates the clip at the preview's time, then the
    add-on steps as often as the preview did, then Blender evaluates again.  Same return shape as
    ``play_preview``."""
    import bpy
    import numpy as np
    from io_scene_vrm.editor.spring_bone1.handler import update_pose_bone_rotations

    ctx = bpy.context
    scene = ctx.scene
    fps = scene.render.fps / scene.render.fps_base
    for arm, _j, _a in arms:
        ext = arm.data.vrm_addon_extension
        ext.spec_version = "1.0"
        ext.spring_bone1.enable_animation = True         # also clears the joints' state

    def read():
        return {arm.name: np.array([(np.array(arm.matrix_world) @ np.array(arm.pose.bones[b].matrix))[:3, 3]
                                    for b in joints]) for arm, joints, _a in arms}

    out = {arm.name: [] for arm, _j, _a in arms}
    start = arms[0][2].frame_range[0]
    with _addon_handlers_removed():
        def at(t):
            f = start + t * fps
            scene.frame_set(int(math.floor(f)), subframe=f - math.floor(f))

        at(0.0)
        for k, v in read().items():
            out[k].append(v)
        t = 0.0
        for n in steps_per_update:
            t += dt
            at(t)
            for _ in range(n):
                update_pose_bone_rotations(ctx, STEP)
            ctx.view_layer.update()
            for k, v in read().items():
                out[k].append(v)
    return {k: np.array(v) for k, v in out.items()}


def run(path: str, steps: int = 120, dt: float = STEP, control: str = "none", log=print) -> dict:
    import bpy
    import numpy as np

    from stylized_renderer.engine.features.springs import reader

    bpy.ops.wm.open_mainfile(filepath=str(path))
    scene = bpy.context.scene
    arms = [o for o in bpy.data.objects if reader.has_springs(o)]
    if not arms:
        raise SystemExit(f"spring-check: {path} has no armature with VRM spring bones")
    updates = int(math.ceil(steps * STEP / dt - 1e-9))
    seconds = updates * dt + 0.1
    plan = []
    for arm in arms:
        joints = _joint_bones(arm)
        plan.append((arm, joints, _motion(arm, joints, seconds, log) if not plan else plan[0][2]))
    if len(plan) > 1:           # the preview's crowd plays the first armature's clip on every armature
        log(f"spring-check: the crowd plays '{plan[0][2].name}' on {', '.join(a.name for a, _j, _c in plan)}")
    scene.frame_set(int(plan[0][2].frame_range[0]))
    for arm, _j, act in plan:
        (arm.animation_data or arm.animation_data_create()).action = act
    ours, carriers, per_update, t_end = play_preview(plan, updates, dt, control)
    theirs = play_addon(plan, per_update, dt)
    max_err = tip = 0.0
    joints_n = 0
    per_arm = {}
    for arm, joints, _a in plan:
        bones = arm.data.bones
        height = float(np.ptp(np.array([b.head_local for b in bones] + [b.tail_local for b in bones]), axis=0).max())
        a, b = ours[arm.name], theirs[arm.name]
        err = float(np.abs(a - b).max()) / height
        motion = _carrier_motion(arm, joints, a, carriers[arm.name]) / height
        per_arm[arm.name] = {"joints": len(joints), "max_rel_error": err, "tip_motion": motion}
        max_err = max(max_err, err)
        joints_n += len(joints)
        tip = max(tip, motion)
    return {"joints": joints_n, "steps": int(sum(per_update)), "max_rel_error": max_err, "tip_motion": tip,
            "updates": updates, "clip_time": t_end, "armatures": per_arm}


def _carrier_motion(arm, joints, pos, carrier_mats) -> float:
    """Largest movement of a joint (our positions ``pos``: T, J, 3) in the frame of the bone that
    carries its spring (``carrier_mats``: T, J, 4, 4, animated by the clip, not simulated), from the
    first shown pose: zero for a rigid chain however the clip moves the carrier."""
    import numpy as np

    inv = np.linalg.inv(carrier_mats)
    local = (inv[..., :3, :3] @ pos[..., None])[..., 0] + inv[..., :3, 3]
    return float(np.linalg.norm(local - local[:1], axis=-1).max()) if local.size else 0.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--dt", type=float, default=STEP)
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
