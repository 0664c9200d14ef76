"""The pose the rest of the scene holds while the viewport preview plays a clip (issue 27, item 12).

When a preview starts, the session reads Blender's evaluated pose once (what the user sees at the
timeline's frame: ``TimelineReader.read``) and keeps every node's local matrix here.  The preview
player restores the runtime's bind pose (the pose at import) before it samples a new clip or
after Stop; nodes of objects the clip does not play (another character, a prop parented to a
bone with its own action, the skinned meshes' own transforms) then take the held matrices again,
so they stay where the user saw them instead of jumping to the pose of the last import.

Owned by one ``StylizedSession`` for one ``PreviewState`` and one ``SceneRuntime``; a new runtime
or another state starts a new hold.  numpy only.
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
