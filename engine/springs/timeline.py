"""Spring bones on the timeline (viewport while the timeline plays, F12 / Ctrl+F12) when the VRM
Add-on is NOT installed (with it, Blender's evaluated pose already holds its result).

Frame N never depends on which frames the process drew before (a farm splits an animation over
workers): the simulation runs from the scene's start frame in fixed 1/60 s steps, step k reading
the pose of the armatures' actions sampled by our own player at k/60 s after the start frame (a
scratch ScenePose, not Blender's evaluation); the state is cached on the SpringsRuntime, so frames
rendered in order cost one frame's steps (the start: the scene's start frame or the actions' first
frame when earlier), and a jump back (or a change of action, start frame or
fps) replays from the start.  The frame itself shows Blender's evaluated pose with our spring
rotations on the spring joints.
"""
from __future__ import annotations

import math

import numpy as np

from . import solver

STEP = 1.0 / 60.0


class TimelineSprings:
    """The pre-roll state of one SpringsRuntime (its own SpringState, separate from the preview's)."""

    def __init__(self, rig):
        self.state = rig.new_state()
        self.steps = 0
        self.key = None
        self.rotations = None
        self.pose = None
        self.players = []
        self.warnings = []


def _setup(tl, runtime, scene, key) -> bool:
    """Scratch pose and one player per armature with an action (its clip imported on demand)."""
    import bpy

    from ..animation.player import AnimationPlayer
    from ..animation.pose import ScenePose
    from ..importer.animations import import_action

    tl.state.reset()
    tl.steps, tl.key, tl.rotations = 0, key, None
    tl.pose = ScenePose()
    if not tl.pose.initialize(runtime.scene):
        return False
    tl.players = []
    for name, action_name, _ in key[0]:
        obj = bpy.data.objects.get(name)
        action = bpy.data.actions.get(action_name) if action_name else None
        if obj is None or action is None:
            continue
        try:
            clip = import_action(action, runtime.scene, obj, scene)
        except Exception as ex:          # a broken action: the springs pre-roll without it, said so
            msg = f"spring bones of '{name}': action '{action_name}' not sampled ({ex})"
            if msg not in tl.warnings:
                tl.warnings.append(msg)
            continue
        p = AnimationPlayer()
        p.set_clip(clip)
        tl.players.append(p)
    return True


def _key(sr, scene):
    import bpy

    arms = []
    for name, _on in sr.key:
        obj = bpy.data.objects.get(name)
        ad = getattr(obj, "animation_data", None)
        act = getattr(ad, "action", None) if ad is not None else None
        arms.append((name, act.name if act is not None else "", id(act)))
    fps = scene.render.fps / scene.render.fps_base
    # the start: the scene's start frame, or the actions' first frame when earlier (a farm worker
    # run with --frame-start 25 still simulates from where the animation starts)
    starts = [int(math.floor(bpy.data.actions[a].frame_range[0])) for _, a, _ in arms if a in bpy.data.actions]
    return tuple(arms), min([int(scene.frame_start)] + starts), float(fps)


def after_timeline(runtime, sr) -> bool:
    """Our springs on a timeline frame of ``runtime`` (its SpringsRuntime ``sr``), after Blender's
    pose is set and before the palettes; nothing when the VRM Add-on is registered."""
    import bpy

    scene = getattr(bpy.context, "scene", None)
    if not sr.rig.chain_count or scene is None:
        return True
    key = _key(sr, scene)
    fps = key[2]
    # the frame shown: the Scene preview's clock when it set one for this update, else the scene's
    frame = runtime.__dict__.pop("springs_frame", None)
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
    nodes = sr.nodes
    start_frame = key[1]
    while tl.steps < target:
        k = tl.steps + 1
        for p in tl.players:
            clip = p.clip
            # the action's clock: clip time 0 is the clip's first frame
            p.seek((start_frame + k * STEP * fps - clip.frame_start) / fps)
            p.update(0.0, runtime.scene, pose)
        if tl.rotations is not None:
            tt, _, ss = pose.local_trs(nodes)
            pose.set_local_trs(nodes, tt, tl.rotations, ss)
        if pose.is_dirty and not pose.update_world_matrices():
            return False
        tl.rotations = solver.step(rig, tl.state, pose.world_matrices, STEP)
        tl.steps = k
    if tl.rotations is None:
        return True
    tt, _, ss = runtime.pose.local_trs(nodes)
    return runtime.pose.set_local_trs(nodes, tt, tl.rotations, ss) and runtime.pose.update_world_matrices()
