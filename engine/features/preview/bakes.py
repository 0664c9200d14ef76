"""The preview's baked clips (``engine.blender.bake.cache``): the clips a bake replaces and the matrix
source the player samples for them (``BakeFeed``)."""
from __future__ import annotations

import numpy as np

from ...blender.bake.baked_pose import baked_clip
from ...blender.bake.reasons import BakeError
from ...core.animation.mixer import MatrixMixer
from . import state as _preview


class BakeFeed:
    """A baked clip's matrix source (``bake.BakedPose``): the exact local matrices of the non-root
    bones and the B-Bone segments at the time the player samples.  The player calls ``write``
    right after its clock set that time (``AnimationPlayer.set_matrix_source``), so the pose and
    palettes are made once per frame; while crossfading, the matrices of the fade's start and the
    bake's go through the mixer (``animation.mixer.MatrixMixer``) with the player's fade weights."""

    def __init__(self, baked, clip, runtime):
        self.baked = baked
        self.clip = clip
        self.runtime = runtime
        self.fade_from = None
        self.mixer = None
        self.joints: tuple | bool | None = None   # bake.joint_table for the palette set's rows, False: not every joint baked
        self.checked = None      # the pose that accepted the bake's nodes (later writes skip the checks)

    def write(self, t: float, player) -> bool:
        b = self.baked
        pose = self.runtime.pose
        smp = b.sample(t)            # the clip's exact matrices at t (bake.BakedPose.sample)
        fast = not player.is_fading and b.anchors is not None
        m = smp.locals
        if player.is_fading:
            if self.fade_from is None or self.fade_from.shape != m.shape:
                self.fade_from = np.array(pose.local_matrices[b.inner_nodes])
            if self.mixer is None or self.mixer.count != m.shape[0]:
                self.mixer = MatrixMixer(m.shape[0])
            w_out, w_in = player.fade_weights
            rows = np.arange(m.shape[0])
            self.mixer.reset()
            self.mixer.accumulate(rows, self.fade_from, w_out)
            self.mixer.accumulate(rows, m, w_in)
            m = self.mixer.apply(rows, self.fade_from)
        else:
            self.fade_from = None
        if self.checked is not pose:      # the bake's nodes and matrices, once per pose
            ok = pose.set_local_matrices(b.inner_nodes, m)
            self.checked = pose if ok and b.finite else None
        else:
            pose.write_local_matrices(b.inner_nodes, m)
            ok = True
        if ok and fast:
            # the same pose as root-relative matrices: the worlds in one step per flat level
            pose.set_world_shortcut(b.inner_nodes, b.anchors, smp.relative_t)
        ps = self.runtime.palette_set
        rel = b.relations(smp, ps.segment_keys) if b.bbone_nodes else None
        if self.joints is None:
            self.joints = b.joint_map(ps.joint_rows) or False
        if self.joints and not player.is_fading:
            # the palettes straight from the sampled joints and their root bones' worlds
            ok = ps.set_baked_joints(b.joints(smp, self.joints)[0], self.joints[2], rel) and ok  # pyright: ignore[reportIndexIssue]  (joints is the joint_map tuple here)
        elif rel is not None:
            ok = ps.set_bbone_relations(rel) and ok
        return ok


def baked_clips(driver, state, clips: dict):
    """``(clips, before_update)`` for the preview (``driver``: the session's ``PreviewDriver``):
    ``clips`` unchanged when the armature needs no bake; otherwise the clips with the bakes of
    ``session.bakes`` substituted (converted once per bake and scene asset, kept in
    ``driver.baked``) and a hook that feeds the bake's B-Bone segments.  None
    (``state.last_error`` says why) when the clip about to play needs a bake it lacks."""
    session = driver.session
    arm = state.armature
    reasons = session.bakes.reasons(arm)
    if not reasons:
        return clips, None
    name = _preview.pending_clip_name(state)
    if name is None or name not in clips:
        return clips, None      # no clip, or one the player reports as not compatible
    b, why = session.bakes.lookup(arm, name)
    if b is None:
        state.last_error = f"clip '{name}' needs a bake: {why}; it is driven by {'; '.join(reasons)}"
        return None
    conv = driver.baked
    if conv is None or conv[0] is not session.scene_asset or conv[2] is not session.runtime:
        conv = driver.baked = (session.scene_asset, {}, session.runtime)
    hit = conv[1].get((arm, name))
    if hit is None or hit[0] is not b:
        template = clips.get(name)
        try:
            clip, bbones = baked_clip(b, session.scene_asset, template)
        except BakeError as ex:
            state.last_error = f"clip '{name}' needs a bake: {ex}"
            return None
        old = hit[1] if hit is not None else None
        hit = (b, clip, BakeFeed(bbones, clip, session.runtime))
        conv[1][(arm, name)] = hit
        player = session.runtime.player
        if old is not None and player.clip is old and not state.commands:
            # re-baked while it plays: the new bake at the same time
            state.commands[:0] = [("clip", name), ("seek", float(player.current_time))]
    if state.last_error and state.last_error.startswith(f"clip '{name}' needs a bake"):
        state.last_error = None
    out = dict(clips)
    out[name] = hit[1]
    return out, hit[2]
