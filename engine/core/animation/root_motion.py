"""Root motion "In place" for the preview player (``AnimationPlayer.set_in_place``): the clip's
root node keeps its start position in the parent's horizontal plane.  numpy only."""
from __future__ import annotations

from typing import Callable

import numpy as np


class RootMotion:
    """The player's root-motion steps (a mixin: it reads the player's clip tables)."""

    # AnimationPlayer's clip tables read here (set in its __init__ / _flatten; declarations only)
    _nodes: np.ndarray
    _t_slot: np.ndarray
    _rows: Callable[[float], tuple]

    def _find_root(self, scene) -> None:
        """The clip's root: the translated node nearest the scene root; its start translation
        (computed once per clip)."""
        self._root_slot = -2
        if self._t_slot.size == 0:
            return
        parents = np.asarray(scene.parents, np.int64)
        depth = np.zeros(parents.shape[0], np.int64)
        p = parents.copy()
        for _ in range(parents.shape[0]):       # one step per hierarchy level, all nodes at once
            up = p >= 0
            if not up.any():
                break
            depth += up
            p = np.where(up, parents[np.clip(p, 0, None)], -1)
        moved = self._nodes[self._t_slot]
        k = int(np.argmin(depth[moved]))
        self._root_track = k
        self._root_slot = int(self._t_slot[k])
        self._root_start = self._rows(0.0)[0][k].copy()
        pre = np.asarray(scene.pre_matrices, np.float64)[int(self._nodes[self._root_slot])][:3, :3]
        self._root_pre = pre
        try:
            self._root_pre_inv = np.linalg.inv(pre)
        except np.linalg.LinAlgError:
            self._root_pre_inv = np.linalg.pinv(pre)

    def _in_place_rows(self, tv, scene) -> None:
        """``_keep_root_in_place`` on the sampled translation rows (one per translation track)."""
        self._keep_root_in_place(tv, scene, by_track=True)

    def _keep_root_in_place(self, t, scene, by_track: bool = False) -> None:
        """Remove the root's horizontal travel since time 0: the parent-space X/Y of
        ``pre @ T`` are held at their start values (Z, rotation and scale play as keyed).
        ``t``: rows aligned with ``_nodes``, or with the translation tracks (``by_track``)."""
        if self._root_slot == -1:
            self._find_root(scene)
        if self._root_slot < 0:
            return
        r = self._root_track if by_track else self._root_slot
        travel = self._root_pre @ (t[r] - self._root_start)
        travel[2] = 0.0
        t[r] = t[r] - self._root_pre_inv @ travel
