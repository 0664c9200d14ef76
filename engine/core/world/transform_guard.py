"""Objects whose transform cannot be drawn: skipped alone, and named (issue 27 items 5, 6).

Blender's evaluated matrices can hold NaN or infinity (a script wrote ``location.x = nan``, a
scale of ``inf``) or values no 32-bit shader can draw (a scale of 1e20: ``finite.DRAW_LIMIT``).
One such object must not stop the frame: its local matrices are replaced by the identity before
they reach ``ScenePose`` (which refuses non-finite input), and every mesh node that would be
drawn through a bad matrix is skipped this frame with a reason naming the object or bone:

* its own world matrix (or an ancestor's) is not finite or beyond the limit;
* it is skinned and a joint or the armature of its skin is.

The rest of the scene stays on the GPU path and keeps moving.  Per frame, with nothing wrong:
one ``isfinite`` over the written locals and a min / max over the worlds of a new pose version.
Owned by a SceneRuntime; no module state.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np

from ..finite import DRAW_LIMIT, undrawable

NOT_FINITE = "{what} is not finite (a NaN or infinite location, rotation or scale)"
TOO_LARGE = "{what} exceeds {limit:g} (a scale or location too large for 32-bit floats)"


class TransformGuard:
    def __init__(self, scene, palette_set=None):
        self.scene = scene
        self._parents = np.asarray(scene.parents, dtype=np.int64)
        mi = np.asarray(scene.mesh_indices)
        # the mesh nodes the GPU path draws (the others are Blender's evaluated mesh: split_drawable)
        self._mesh_nodes = [int(n) for n in np.flatnonzero(mi >= 0) if not scene.meshes[int(mi[n])].fallback_reason]
        gpu = set(self._mesh_nodes)
        groups = getattr(palette_set, "palette_groups", None) or []
        # (mesh node, joint nodes, armature node) per skin group
        self._skins = [(int(g.mesh_node_index), np.asarray(g.joint_nodes, np.int64), int(g.armature_node))
                       for g in groups if int(g.mesh_node_index) in gpu]
        self._bad_locals: Optional[np.ndarray] = None     # nodes whose locals were replaced
        self._version = None                               # pose version the skip set is of
        self._held = None                                  # (not finite, too large) nodes: hold_undrawable
        self.skipped: Dict[int, str] = {}                  # mesh node -> why it is not drawn

    def clean_locals(self, nodes, matrices):
        """``matrices`` with every non-finite (4,4) replaced by the identity (the nodes are
        remembered for ``check``); the input itself when all are finite."""
        m = np.asarray(matrices, dtype=np.float64)
        if m.ndim != 3 or m.shape[1:] != (4, 4) or np.isfinite(m).all():
            self.forget_locals()          # (an object back to finite values is checked again)
            return matrices
        bad = ~np.isfinite(m).all(axis=(1, 2))
        m = m.copy()
        m[bad] = np.eye(4)
        self._bad_locals = np.asarray(nodes, dtype=np.int64)[bad]
        self._version = None
        return m

    def forget_locals(self) -> None:
        """A frame whose locals did not come from Blender's matrices (the preview player)."""
        if self._bad_locals is not None:
            self._bad_locals = None
            self._version = None

    def hold_undrawable(self, held) -> None:
        """Preview frames: ``(not finite, too large)`` node arrays of the objects Blender's own
        matrices cannot draw (``TimelineReader.undrawable_objects``); None: none."""
        if held is not None and not (held[0].size or held[1].size):
            held = None
        if held is not self._held:
            self._held = held
            self._version = None

    def check(self, world: np.ndarray, version) -> None:
        """Recompute ``skipped`` for the pose's worlds (once per pose version)."""
        if version == self._version:
            return
        self._version = version
        if not world.size:          # no node (a scene of cameras, text, instances): nothing to skip
            self.skipped = {}
            return
        if self._bad_locals is None and self._held is None:
            lo, hi = world.min(), world.max()          # NaN propagates: the comparison fails
            if -DRAW_LIMIT <= lo and hi <= DRAW_LIMIT:
                self.skipped = {}
                return
        n = world.shape[0]
        nonfinite = np.zeros(n, bool)
        if self._bad_locals is not None:
            nonfinite[self._bad_locals] = True
        nonfinite |= ~np.isfinite(world.reshape(n, 16)).all(axis=1)
        large = undrawable(world) & ~nonfinite
        if self._held is not None:
            nonfinite[self._held[0]] = True
            large[self._held[1]] = True
        nonfinite = self._below(nonfinite)
        large = self._below(large) & ~nonfinite
        self.skipped = self._reasons(nonfinite, large)

    def _below(self, mask: np.ndarray) -> np.ndarray:
        """``mask`` spread to every descendant (one vectorised step per hierarchy level)."""
        par = self._parents
        has = par >= 0
        while True:
            grown = mask.copy()
            grown[has] |= mask[par[has]]
            if (grown == mask).all():
                return grown
            mask = grown

    def _reasons(self, nonfinite: np.ndarray, large: np.ndarray) -> Dict[int, str]:
        nodes = self.scene.nodes
        out: Dict[int, str] = {}

        def why(node: int, what: str) -> Optional[str]:
            if nonfinite[node]:
                return NOT_FINITE.format(what=what)
            if large[node]:
                return TOO_LARGE.format(limit=DRAW_LIMIT, what=what)
            return None

        for m in self._mesh_nodes:          # per mesh object, only when something is wrong
            r = why(m, "its transform")
            if r is not None:
                out[m] = r
        for mesh, joints, arm in self._skins:
            if mesh in out:
                continue
            cand = ([arm] if arm >= 0 else []) + [int(j) for j in joints[nonfinite[joints] | large[joints]][:1]]
            for c in cand:
                nd = nodes[c]
                what = f"bone '{nd.bone_name}' of armature '{nd.object_name}'" if nd.bone_name else \
                    f"armature '{nd.object_name}'"
                r = why(c, f"the transform of {what}, which deforms it,")
                if r is not None:
                    out[mesh] = r
                    break
        return out


def skip_message(name: str, reason: str) -> str:
    """The log / Stats line of an object that is not drawn."""
    return f"object '{name}' cannot be drawn and is skipped: {reason}"


def split_drawable(items: list) -> Tuple[list, Dict[str, str]]:
    """(the items whose world matrix can be drawn, {object name: why not} of the others): for the
    draws of Blender's evaluated mesh (``fallback.FallbackItem.world``), per frame one stack of
    their matrices."""
    if not items:
        return items, {}
    worlds = np.array([it.world for it in items], dtype=np.float64)
    bad = undrawable(worlds)
    if not bad.any():
        return items, {}
    skipped: Dict[str, str] = {}
    for it, b, w in zip(items, bad, worlds):
        if b:
            skipped[it.object_name] = (NOT_FINITE if not np.isfinite(w).all() else TOO_LARGE).format(
                limit=DRAW_LIMIT, what="its transform")
    return [it for it, b in zip(items, bad) if not b], skipped
