"""Spring bones on the timeline (viewport while the timeline plays, F12 / Ctrl+F12) when the VRM
Add-on is NOT installed (with it, Blender's evaluated pose already holds its result).

Frame N never depends on which frames the process drew before (a farm splits an animation over
workers): the simulation runs from the scene's start frame in fixed 1/60 s steps, step k reading
the scene's animation as the timeline evaluates it (every animated object's active action AND NLA
stack: ``preview_scene.ScenePlayback`` on ``nla_source``, bpy-free per step) at k/60 s after the
start frame, written into a scratch ScenePose (not Blender's evaluation); the state is cached on
the SpringsRuntime, so frames rendered in order cost one frame's steps (the start: the scene's
start frame, or the first frame of an armature's action or NLA strip when earlier), and a jump
back (or a change of action, NLA strips, start frame or fps) replays from the start.  The frame itself shows Blender's evaluated pose with our spring
rotations on the spring joints.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Optional

import numpy as np

from ...core.animation import spring_solver as solver

if TYPE_CHECKING:
    from ...core.animation.pose import ScenePose

STEP = 1.0 / 60.0


class TimelineSprings:
    """The pre-roll state of one SpringsRuntime (its own SpringState, separate from the preview's)."""

    def __init__(self, rig):
        self.state = rig.new_state()
        self.steps = 0
        self.key = None
        self.rotations: Optional[np.ndarray] = None
        self.pose: Optional[ScenePose] = None
        self.playback = None
        self.warnings = []


def _warn(tl, msg: str) -> None:
    if msg not in tl.warnings:
        tl.warnings.append(msg)


def _setup(tl, runtime, scene, key) -> bool:
    """Scratch pose and the scene's animation (actions and NLA stacks) read once."""
    from ...core.animation.pose import ScenePose
    from ..preview.scene import ScenePlayback

    tl.state.reset()
    tl.steps, tl.key, tl.rotations = 0, key, None
    tl.pose = ScenePose()
    if not tl.pose.initialize(runtime.scene):
        return False
    try:
        tl.playback = ScenePlayback(scene, runtime.scene, runtime)
    except Exception as ex:          # broken animation data: the springs pre-roll without it, said so
        tl.playback = None
        _warn(tl, f"spring bones: the scene's animation could not be read for the pre-roll ({ex}); "
                  "the springs simulate the rest pose")
    return True


def _nla_key(ad):
    """What of an object's NLA the pre-roll depends on (not the keys: an edited action re-imports)."""
    if ad is None:
        return ()
    return tuple((t.name, t.mute, t.is_solo, tuple(
        (st.name, st.action.name if st.action else "", st.frame_start, st.frame_end, st.action_frame_start,
         st.action_frame_end, st.scale, st.repeat, st.influence, st.use_animated_influence, st.mute,
         st.blend_type, st.extrapolation, st.use_reverse) for st in t.strips)) for t in ad.nla_tracks)


def _key(sr, scene):
    import bpy

    arms, starts = [], [int(scene.frame_start)]
    for name, _on in sr.key:
        obj = bpy.data.objects.get(name)
        ad = getattr(obj, "animation_data", None)
        act = getattr(ad, "action", None) if ad is not None else None
        arms.append((name, act.name if act is not None else "", id(act), _nla_key(ad)))
        # the start: a farm worker run with --frame-start 25 still simulates from where the
        # armature's animation starts (its action's first frame, its first NLA strip)
        if act is not None:
            starts.append(int(math.floor(act.frame_range[0])))
        for t in (ad.nla_tracks if ad is not None else ()):
            starts += [int(math.floor(st.frame_start)) for st in t.strips if not st.mute]
    fps = scene.render.fps / scene.render.fps_base
    return tuple(arms), min(starts), float(fps)


def after_timeline(runtime, sr, frame=None) -> bool:
    """Our springs on a timeline frame of ``runtime`` (its SpringsRuntime ``sr``), after Blender's
    pose is set and before the palettes; nothing when the VRM Add-on is registered.  ``frame``: the
    scene time shown (the Scene preview's clock, passed by its update), else the scene's frame."""
    import bpy

    scene = getattr(bpy.context, "scene", None)
    if not sr.rig.chain_count or scene is None:
        return True
    key = _key(sr, scene)
    fps = key[2]
    if frame is None:
        frame = scene.frame_current + scene.frame_subframe
    t = (frame - key[1]) / fps if fps > 0 else 0.0
    target = max(int(math.floor(t / STEP + 1e-9)), 0)
    tl = sr.timeline
    if tl is None:
        tl = sr.timeline = TimelineSprings(sr.rig)
        tl.warnings = sr.warnings         # shown by the Stats panel
    if tl.key != key or target < tl.steps:
        if not _setup(tl, runtime, scene, key):
            return False
    pose, rig = tl.pose, sr.rig
    assert pose is not None         # _setup sets it, and the first call sets up (tl.key starts None)
    start_frame = key[1]
    while tl.steps < target:
        k = tl.steps + 1
        if tl.playback is not None:
            ok, _ = tl.playback.write_pose(start_frame + k * STEP * fps, pose)
            if not ok:
                return False
        if tl.rotations is not None and not sr.write(pose, rotations=tl.rotations):
            return False
        if pose.is_dirty and not pose.update_world_matrices():
            return False
        world = pose.world_matrices
        assert world is not None        # clean: updated just above
        tl.rotations = solver.step(rig, tl.state, world, STEP)
        tl.steps = k
    if tl.rotations is None:
        return True
    return sr.write(runtime.pose, rotations=tl.rotations)
