"""The pose the rest of the scene holds while the viewport preview plays a clip (issue 27, item 12).

When a preview starts, the session reads Blender's evaluated pose once (what the user sees at the
timeline's frame: ``TimelineReader.read``) and keeps every node's local matrix here.  The preview
player restores the runtime's bind pose (the pose at import) before it samples a new clip or
after Stop; nodes of objects the clip does not play (another character, a prop parented to a
bone with its own action, the skinned meshes' own transforms) then take the held matrices again,
so they stay where the user saw them instead of jumping to the pose of the last import.

Kept by the session's preview driver (``PreviewDriver.hold``, driver.py) for one ``PreviewState``
and one ``SceneRuntime``; a new runtime or another state starts a new hold, timeline mode drops it.
``hooks`` gives the driver's clip update its before/after-sample steps.
"""
from __future__ import annotations

import numpy as np


class PreviewHold:
    def __init__(self, state, runtime, local_matrices: np.ndarray):
        self.state = state
        self.runtime = runtime
        self.locals = np.array(local_matrices, dtype=np.float64)
        self._held = {}          # frozenset of played object names -> node indices held

    def matches(self, state, runtime) -> bool:
        return self.state is state and self.runtime is runtime

    def held_nodes(self, played) -> np.ndarray:
        """Node indices of every object not in ``played`` (object names; a bone belongs to its
        armature).  Computed once per set of played objects (set-up work, not per frame)."""
        key = frozenset(played)
        nodes = self._held.get(key)
        if nodes is None:
            held = [nd.object_name not in key for nd in self.runtime.scene.nodes]
            nodes = np.flatnonzero(np.asarray(held, dtype=bool)).astype(np.int64)
            self._held[key] = nodes
        return nodes

    def restore(self, pose, played) -> bool:
        """Write the held local matrices of every node not played; world matrices follow."""
        nodes = self.held_nodes(played)
        if not nodes.size:
            return True
        ok = pose.set_local_matrices(nodes, self.locals[nodes])
        return bool(pose.update_world_matrices()) and bool(ok)


def start(driver, depsgraph, state) -> PreviewHold:
    """The hold of ``state`` (kept in ``driver.hold``): at a start (a state, or a runtime, not
    seen by the last preview frame) Blender's evaluated pose is read once, as the timeline shows
    it, and the clip is sampled again over it (the palettes follow in the preview's update)."""
    session = driver.session
    runtime = session.runtime
    hold = driver.hold
    if hold is not None and hold.matches(state, runtime):
        return hold
    nodes, mats, _weights = session.reader.read(depsgraph)    # (the preview pushes its own weights)
    pose = runtime.pose
    if len(nodes) and pose.set_local_matrices(nodes, mats):
        pose.update_world_matrices()
    player = runtime.player
    if player.clip is not None:
        player.seek(player.current_time)
    driver.hold = PreviewHold(state, runtime, pose.local_matrices)
    return driver.hold


def hooks(driver, depsgraph, state, after):
    """(before_update, after_sample) for ``preview.apply_commands``: ``after`` (the morph push)
    runs after the player's sample; when the player restored the bind pose in between (a new
    clip, Stop), every node of an object the clip does not play takes the held matrix again
    first."""
    hold = start(driver, depsgraph, state)
    runtime = driver.session.runtime
    reset = [False]

    def before_update(player, _dt):
        reset[0] = player.reset_pose_on_next_sample

    def after_sample():
        if reset[0] and not runtime.player.reset_pose_on_next_sample:
            hold.restore(runtime.pose, runtime.crowd_targets or (state.armature,))
        after()

    return before_update, after_sample
