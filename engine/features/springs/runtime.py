"""Spring bones in the preview: one ``SpringsRuntime`` per SceneRuntime (kept by the session's
``SpringsDriver``, driver.py), run after the mixer (``AnimationPlayer.update``) and before the
palettes (``SpringsDriver.after_mixer``).

All characters' springs form one ``core.SpringRig``; the simulation advances in fixed 1/60 s steps
of clip time (the add-on's rate), so playback speed and frame rate do not change the motion; it is
reset on a clip change, a seek and Stop.  The per-armature toggle ``Object.stylized_spring_bones``
("Animate Spring Bones") switches it off.
"""
from __future__ import annotations

import math
import time
from typing import Optional

import numpy as np

from ...core.animation import spring_rig as core
from ...core.animation import spring_solver as solver
from . import reader as _reader

STEP = 1.0 / 60.0
MAX_STEPS_PER_FRAME = 12          # a long hitch does not stall the preview (the rest is dropped)
PROP = "stylized_spring_bones"


def _enabled(obj) -> bool:
    return obj is not None and bool(getattr(obj, PROP, True))


class SpringsRuntime:
    def __init__(self, rig: core.SpringRig, warnings, key=()):
        self.rig = rig
        self.key = key                    # ((armature, Animate Spring Bones), ...) it was built for
        self.state = rig.new_state()
        self.warnings = list(warnings)
        self.nodes = np.asarray(rig.out_nodes, np.intp)
        self.rotations: Optional[np.ndarray] = None
        self.acc = 0.0
        self._clip = None
        self._time = None
        self.last_ms = 0.0
        self.steps_total = 0
        self._sample_count = -1
        self.timeline = None              # timeline.TimelineSprings: the F12 / timeline pre-roll

    @property
    def joint_count(self) -> int:
        return self.rig.joint_count

    def reset(self) -> None:
        """Seek, clip change, Stop: a new simulation; the joints go back to their rest rotation."""
        self.state.reset()
        if self.rotations is not None:
            self.rotations = np.zeros_like(self.rotations)
            self.rotations[:, 0] = 1.0
        self.acc = 0.0

    def _discontinuous(self, player, delta_time: float) -> bool:
        clip, t = player.clip, float(player.current_time)
        jumped = False
        if clip is not self._clip:
            jumped = True
        elif self._time is not None:
            expect = self._time + (delta_time * player.playback_speed if player.is_playing else 0.0)
            d = player.duration
            err = abs(t - expect)
            if d > 0.0:
                err = min(err, abs(t - math.fmod(expect, d)), abs(t - d))
            jumped = err > 1e-6
        self._clip, self._time = clip, t
        return jumped

    def update(self, player, pose, delta_time: float) -> bool:
        t0 = time.perf_counter()
        if self._discontinuous(player, delta_time):
            self.reset()
        n = 0
        if player.is_playing and math.isfinite(delta_time):
            self.acc += max(delta_time * player.playback_speed, 0.0)
            n = int(self.acc / STEP + 1e-9)
            self.acc -= n * STEP
            n = min(n, MAX_STEPS_PER_FRAME)
        sampled = player.sample_count != self._sample_count      # the mixer rewrote the pose
        self._sample_count = player.sample_count
        if n:
            ok = self.simulate(pose, n)
        elif self.rotations is not None and sampled:
            ok = self.write(pose)
        else:
            ok = True
        self.last_ms = (time.perf_counter() - t0) * 1000.0
        return ok

    def simulate(self, pose, n: int) -> bool:
        """``n`` fixed steps on the pose's evaluation (every step of a frame reads the frame's
        pose, as the add-on's frame handler's steps do), the last one's rotations written into the
        pose (``write``).  What bench-springs times against the add-on's step."""
        if pose.is_dirty and not pose.update_world_matrices():
            return False
        self.rotations = solver.advance(self.rig, self.state, solver.prepare(self.rig, pose.world_matrices, STEP), n)
        self.steps_total += n
        return self.write(pose)

    def write(self, pose, worlds: bool = True, rotations=None) -> bool:
        """The joints' rotations (``rotations``, else the preview's last) into the pose's local TRS
        (the player's write for rotations), then (``worlds``) its world matrices; False on a
        non-finite rotation (nothing written)."""
        q = self.rotations if rotations is None else rotations
        if not len(self.nodes):
            return True
        if q is None:
            raise RuntimeError("SpringsRuntime.write: no rotations given and none simulated yet")
        if not math.isfinite(float(q.sum())):          # a NaN anywhere (unit quaternions: no overflow)
            return False
        clean = not pose.is_dirty
        pose.write_rotations(self.nodes, q)
        if not worlds:
            return True
        # only the joints changed since the last world update: their subtrees' worlds
        return pose.update_world_below(self.nodes) if clean else pose.update_world_matrices()


def read_characters(scene_asset):
    """(characters, warnings, armature names): the springs of every armature of ``scene_asset``
    whose Blender object has VRM spring bones and Animate Spring Bones on (bpy-side)."""
    import bpy

    index = {n.name: i for i, n in enumerate(scene_asset.nodes)}
    chars, warnings, names = [], [], []
    for i, node in enumerate(scene_asset.nodes):
        if node.bone_name is not None:
            continue
        obj = bpy.data.objects.get(node.object_name)
        if obj is None or not _reader.has_springs(obj):
            continue
        names.append(obj.name)
        if not _enabled(obj):
            continue
        spec = _reader.read_character(obj, lambda b, a=obj.name: index.get(f"{a}/{b}", -1), i, warn=warnings.append)
        if spec is not None:
            chars.append(spec)
    return chars, warnings, tuple(names)


def build(scene_asset, joint_order: str = "addon") -> SpringsRuntime:
    """One SpringsRuntime for all characters of ``scene_asset`` (``read_characters``)."""
    chars, warnings, names = read_characters(scene_asset)
    return SpringsRuntime(core.SpringRig(chars, joint_order), warnings, toggles(names))


def toggles(names) -> tuple:
    """(armature, Animate Spring Bones) of the armatures ``names`` (those with spring bones)."""
    import bpy

    objs = bpy.data.objects
    return tuple((n, _enabled(objs.get(n))) for n in names)
