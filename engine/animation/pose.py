"""ScenePose: the runtime copy of the scene's node transforms (seed: ScenePose). numpy only.

Blender mapping: a node's local matrix is ``pre_matrix @ T @ R @ S`` for TRS writes (the animated
"basis" values), or Blender's evaluated local matrix written directly by the timeline mode
(``set_local_matrices``).  World matrices follow ``world = parent_world @ local`` and are resolved
level by level (one batched matmul per hierarchy depth).
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from ..assets.types import compose_trs
from .sampling import decompose_matrices, normalize_quaternions

UNRESOLVED = 0
RESOLVING = 1
RESOLVED = 2

_U64 = 0xFFFFFFFFFFFFFFFF


def next_version(v: int) -> int:
    """64-bit wrap that skips 0 (0 means 'initial / cleared')."""
    v = (int(v) + 1) & _U64
    if v == 0:
        v = 1
    return v


class LocalTransform(NamedTuple):
    translation: np.ndarray   # (3,)
    rotation: np.ndarray      # (4,) wxyz
    scale: np.ndarray         # (3,)
    matrix: np.ndarray        # (4,4) full local matrix (pre_matrix @ TRS, or the written matrix)


def _ro_view(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v


class ScenePose:
    def __init__(self):
        self._scene = None
        self._n = 0
        self._parents = np.zeros(0, dtype=np.int64)
        self._pre = np.zeros((0, 4, 4))
        self._pre_inv = None
        self._t = np.zeros((0, 3))
        self._q = np.zeros((0, 4))
        self._s = np.zeros((0, 3))
        self._trs_stale = np.zeros(0, dtype=bool)   # True where a matrix write left the TRS unknown
        self._local = np.zeros((0, 4, 4))
        self._world = np.zeros((0, 4, 4))
        self._resolution_states = np.zeros(0, dtype=np.uint8)
        self._dirty = True
        self._version = 0
        self._plan = None          # cached [(level_nodes, level_parents), ...]
        self._parents_safe = np.zeros(0, dtype=np.int64)   # parents, -1 for roots (set with the plan)
        self.last_error: Optional[str] = None

    # ---------------------------------------------------------------- lifecycle
    def initialize(self, scene_asset) -> bool:
        """Deep validation (scene.validation_error()) and a bind-pose copy. False on invalid input."""
        self._scene = None
        err = scene_asset.validation_error() if scene_asset is not None else "no scene"
        if err is not None:
            self.last_error = err
            return False
        n = scene_asset.node_count
        self._n = n
        self._parents = np.array(scene_asset.parents, dtype=np.int64)
        self._pre = np.array(scene_asset.pre_matrices, dtype=np.float64)
        self._pre_inv = None
        self._world = np.tile(np.eye(4), (n, 1, 1))
        self._resolution_states = np.zeros(n, dtype=np.uint8)
        self._plan = None
        self._scene = scene_asset
        self.last_error = None
        self.reset_to_bind_pose()
        return True

    def reset_to_bind_pose(self) -> bool:
        sc = self._scene
        if sc is None:
            return False
        self._t = np.array(sc.bind_translations, dtype=np.float64)
        self._q = normalize_quaternions(np.array(sc.bind_rotations, dtype=np.float64)) if self._n else np.zeros((0, 4))
        self._s = np.array(sc.bind_scales, dtype=np.float64)
        self._local = np.array(sc.bind_locals, dtype=np.float64)
        self._trs_stale = np.zeros(self._n, dtype=bool)
        self._dirty = True
        return True

    # ---------------------------------------------------------------- identity & state
    def is_for_scene(self, scene_asset) -> bool:
        return self._scene is not None and self._scene is scene_asset

    @property
    def scene(self):
        return self._scene

    @property
    def node_count(self) -> int:
        return self._n

    @property
    def is_dirty(self) -> bool:
        return self._dirty

    @property
    def version(self) -> int:
        return self._version

    @property
    def resolution_states(self) -> np.ndarray:
        return _ro_view(self._resolution_states)

    # ---------------------------------------------------------------- writes
    def _valid_nodes(self, nodes) -> Optional[np.ndarray]:
        idx = np.asarray(nodes, dtype=np.int64).reshape(-1)
        if self._scene is None:
            return None
        if idx.size and (idx.min() < 0 or idx.max() >= self._n):
            return None
        return idx

    def set_local_transform(self, node: int, translation, rotation, scale) -> bool:
        return self.set_local_trs([node], np.reshape(translation, (1, 3)), np.reshape(rotation, (1, 4)),
                                  np.reshape(scale, (1, 3)))

    def set_local_trs(self, nodes, translations, rotations, scales) -> bool:
        """Batch TRS write: local = pre_matrix @ T @ R @ S. Rotations are wxyz (normalised here)."""
        idx = self._valid_nodes(nodes)
        if idx is None:
            return False
        k = idx.shape[0]
        try:
            t = np.asarray(translations, dtype=np.float64).reshape(k, 3)
            q = np.asarray(rotations, dtype=np.float64).reshape(k, 4)
            s = np.asarray(scales, dtype=np.float64).reshape(k, 3)
        except ValueError:
            return False
        if k == 0:
            return True
        if not (np.isfinite(t).all() and np.isfinite(q).all() and np.isfinite(s).all()):
            return False
        q = normalize_quaternions(q)
        self._t[idx] = t
        self._q[idx] = q
        self._s[idx] = s
        self._trs_stale[idx] = False
        self._local[idx] = np.matmul(self._pre[idx], compose_trs(t, q, s, normalized=True))
        self._dirty = True
        return True

    def set_local_matrices(self, nodes, matrices) -> bool:
        """Batch write of full local matrices (Blender's evaluated parent-relative matrices)."""
        idx = self._valid_nodes(nodes)
        if idx is None:
            return False
        k = idx.shape[0]
        try:
            m = np.asarray(matrices, dtype=np.float64).reshape(k, 4, 4)
        except ValueError:
            return False
        if k == 0:
            return True
        if not np.isfinite(m).all():
            return False
        if np.array_equal(self._local[idx], m):
            return True     # nothing changed: the pose stays clean, its version (and uploads) too
        self._local[idx] = m
        self._trs_stale[idx] = True
        self._dirty = True
        return True

    # ---------------------------------------------------------------- reads
    def _refresh_trs(self, idx: np.ndarray) -> None:
        stale = idx[self._trs_stale[idx]]
        if stale.size == 0:
            return
        stale = np.unique(stale)
        if self._pre_inv is None:
            try:
                self._pre_inv = np.linalg.inv(self._pre)
            except np.linalg.LinAlgError:
                self._pre_inv = np.linalg.pinv(self._pre)
        basis = np.matmul(self._pre_inv[stale], self._local[stale])
        t, q, s = decompose_matrices(basis)
        self._t[stale] = t
        self._q[stale] = q
        self._s[stale] = s
        self._trs_stale[stale] = False

    def local_trs(self, nodes):
        """(T, Q, S) copies of the current TRS basis of ``nodes`` (decomposed after matrix writes)."""
        idx = np.asarray(nodes, dtype=np.int64).reshape(-1)
        self._refresh_trs(idx)
        return self._t[idx].copy(), self._q[idx].copy(), self._s[idx].copy()

    def local_transform(self, node: int) -> Optional[LocalTransform]:
        if self._scene is None or not (0 <= int(node) < self._n):
            return None
        i = int(node)
        self._refresh_trs(np.array([i]))
        return LocalTransform(self._t[i].copy(), self._q[i].copy(), self._s[i].copy(), self._local[i].copy())

    @property
    def local_matrices(self) -> np.ndarray:
        return _ro_view(self._local)

    def world_matrix(self, node: int) -> Optional[np.ndarray]:
        """The node's world matrix, or None while the pose is dirty (or the index is invalid)."""
        if self._dirty or self._scene is None or not (0 <= int(node) < self._n):
            return None
        return _ro_view(self._world[int(node)])

    @property
    def world_matrices(self) -> Optional[np.ndarray]:
        """(N,4,4) world matrices, or None while dirty."""
        if self._dirty or self._scene is None:
            return None
        return _ro_view(self._world)

    # ---------------------------------------------------------------- hierarchy
    def _build_plan(self):
        """Resolve the hierarchy level by level; None (states left 1 = resolving) on a cycle."""
        n = self._n
        parents = self._parents
        states = self._resolution_states
        states[:] = UNRESOLVED
        plan = []
        has_parent = (parents >= 0) & (parents < n)
        safe_parent = np.where(has_parent, parents, 0)
        self._parents_safe = np.where(has_parent, parents, -1)
        frontier = np.flatnonzero(~has_parent)
        while frontier.size:
            states[frontier] = RESOLVED
            plan.append((frontier, parents[frontier]))
            frontier = np.flatnonzero((states == UNRESOLVED) & has_parent & (states[safe_parent] == RESOLVED))
        left = states == UNRESOLVED
        if left.any():
            states[left] = RESOLVING   # stuck while resolving: a parent cycle
            bad = int(np.flatnonzero(left)[0])
            name = self._scene.nodes[bad].name if self._scene is not None else str(bad)
            self.last_error = f"parent cycle through node '{name}'"
            return None
        return plan

    def update_world_matrices(self) -> bool:
        """world = parent_world @ local for every node; clears dirty and bumps version on success."""
        if self._scene is None:
            return False
        if self._plan is None:
            plan = self._build_plan()
            if plan is None:
                return False
            self._plan = plan
        # The plan was resolved (and checked for cycles, with the three resolution states) when
        # it was built.  Worlds by pointer jumping: m[i] maps node i's space to the space of its
        # ancestor anc[i]; m[i] = m[anc[i]] @ m[i] doubles the covered chain, so a hierarchy of
        # depth D needs ceil(log2(D + 1)) vectorised steps instead of D level-by-level steps.
        m = self._local.copy()
        anc = self._parents_safe.copy()
        has = anc >= 0
        while True:
            idx = np.flatnonzero(has)
            if idx.size == 0:
                break
            a = anc[idx]
            m[idx] = np.matmul(m[a], m[idx])
            anc[idx] = anc[a]
            has[idx] = anc[idx] >= 0
        self._world[:] = m
        self._dirty = False
        self._version = next_version(self._version)
        return True
