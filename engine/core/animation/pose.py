"""ScenePose: the runtime copy of the scene's node transforms (seed: ScenePose). numpy only.

Blender mapping: a node's local matrix is ``pre_matrix @ T @ R @ S`` for TRS writes (the animated
"basis" values), or Blender's evaluated local matrix written directly by the timeline mode
(``set_local_matrices``).  World matrices follow ``world = parent_world @ local``, resolved by
pointer jumping (log2(depth) batched matmuls).

Bone inheritance (``SceneNodeAsset.inherit_rotation`` / ``inherit_scale`` / ``local_location``,
Blender's Bone.use_inherit_rotation / inherit_scale / use_local_location): a bone with a
non-default flag whose local came from a TRS write is composed as Blender's
``BKE_bone_parent_transform_calc_from_matrices`` + ``_apply`` do (animation/inherit.py), in the
armature's space (the bone chain's armature object world is taken off and put back on).  Rigs that
have such bones resolve level by level (one batched step per depth); rigs without them keep the
pointer-jumping path.  Matrix writes (timeline mode: Blender's evaluated ``inv(parent_pose) @
pose``, which already holds the inheritance) always compose as ``parent_world @ local``.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from ..assets.types import NODE_BONE
from . import inherit as _inh
from .hierarchy import RESOLVED, RESOLVING, UNRESOLVED, WorldHierarchy, next_version, readonly_view, safe_inverse  # noqa: F401
from .sampling import decompose_matrices, normalize_quaternions
from .trs import QUAT_PAIR_A, QUAT_PAIR_B, QUAT_PAIR_FORM, compose_pre_trs, compose_trs_fast, pre_rotation_forms  # noqa: F401


class LocalTransform(NamedTuple):
    translation: np.ndarray   # (3,)
    rotation: np.ndarray      # (4,) wxyz
    scale: np.ndarray         # (3,)
    matrix: np.ndarray        # (4,4) full local matrix (pre_matrix @ TRS, or the written matrix)


class ScenePose(WorldHierarchy):
    """The scene's node transforms: locals (TRS or matrices) and the worlds made from them
    (hierarchy.WorldHierarchy), with a version bumped by every world update."""

    def __init__(self):
        self._scene = None
        self._n = 0
        self._parents = np.zeros(0, dtype=np.int64)
        self._pre = np.zeros((0, 4, 4))
        self._crowd_pre = None      # _write_crowd: (nodes, pre, every column shares one rest)
        self._pre_forms = None
        self._pre_inv = None
        self._t = np.zeros((0, 3))
        self._q = np.zeros((0, 4))
        self._s = np.zeros((0, 3))
        self._unit_scale = None     # every scale is (1, 1, 1): True / False, None = not known
        self._trs_stale = np.zeros(0, dtype=bool)   # True where a matrix write left the TRS unknown
        self._matrix_marks = False                   # some _trs_stale / _from_matrix entry may be True
        self._from_matrix = np.zeros(0, dtype=bool)  # True where the local came from set_local_matrices
        self._special = np.zeros(0, dtype=bool)      # bones with non-default inheritance flags
        self._any_special = False
        self._local = np.zeros((0, 4, 4))
        self._world = np.zeros((0, 4, 4))
        self._resolution_states = np.zeros(0, dtype=np.uint8)
        self._dirty = True
        self._version = 0
        self._plan = None          # cached [(level_nodes, level_parents), ...]
        self._world_plan = None    # cached segment plan of update_world_matrices (_build_world_plan)
        self._inh_levels = None    # (active bones, per-level indices) of _update_with_inheritance
        self._parents_safe = np.zeros(0, dtype=np.int64)   # parents, -1 for roots (set with the plan)
        self._shortcut = None      # (nodes, anchors, rel) of set_world_shortcut, for the next world update
        self._shortcut_mask = np.zeros(0, dtype=bool)
        self._flat_plans = {}      # (id(nodes), id(anchors)) -> (nodes, anchors, indices, flat plan)
        self._below_plans = {}     # id(nodes) -> (nodes, plan, levels) of update_world_below
        self.shortcut_updates = 0  # world updates that took a set_world_shortcut (tests, profiling)
        self.last_error: Optional[str] = None

    # ---------------------------------------------------------------- lifecycle
    def initialize(self, scene_asset) -> bool:
        """Deep validation (scene.validation_error()) and a bind-pose copy. False on invalid input."""
        self._scene = None
        err = scene_asset.validation_error() if scene_asset is not None else "no scene"
        if err is not None or scene_asset is None:
            self.last_error = err
            return False
        n = scene_asset.node_count
        self._n = n
        self._parents = np.array(scene_asset.parents, dtype=np.int64)
        self._pre = np.asarray(scene_asset.pre_matrices, dtype=np.float64)   # the asset's (read-only)
        self._pre_forms = None      # write_sampled: pre_rotation_forms(pre), or False (not affine)
        self._pre_inv = None
        self._world = np.tile(np.eye(4), (n, 1, 1))
        self._resolution_states = np.zeros(n, dtype=np.uint8)
        self._plan = None
        self._world_plan = None
        self._inh_levels = None
        self._shortcut = None
        self._shortcut_mask = np.zeros(n, dtype=bool)
        self._flat_plans = {}
        self._below_plans = {}
        err = self._init_inheritance(scene_asset)
        if err is not None:
            self.last_error = err
            return False
        self._scene = scene_asset
        self.last_error = None
        self.reset_to_bind_pose()
        return True

    def _init_inheritance(self, sc) -> Optional[str]:
        """Flags, armature nodes and rest (arm_mat) matrices of the bones with non-default
        inheritance; None, or a message naming the bone with an unknown inherit_scale."""
        n = self._n
        nodes = sc.nodes
        codes = {m: i for i, m in enumerate(_inh.INHERIT_SCALE_MODES)}
        mode = np.zeros(n, np.int64)
        use_rot = np.ones(n, bool)
        local_loc = np.ones(n, bool)
        is_bone = np.zeros(n, bool)
        for i, nd in enumerate(nodes):      # once per scene, not per frame
            if nd.kind != NODE_BONE:
                continue
            is_bone[i] = True
            m = codes.get(str(nd.inherit_scale))
            if m is None:
                return (f"bone node '{nd.name}': unknown inherit_scale '{nd.inherit_scale}' "
                        f"(expected one of {', '.join(_inh.INHERIT_SCALE_MODES)})")
            mode[i] = m
            use_rot[i] = bool(nd.inherit_rotation)
            local_loc[i] = bool(nd.local_location)
        par = self._parents
        valid_par = (par >= 0) & (par < n)
        bone_parent = is_bone & valid_par & is_bone[np.where(valid_par, par, 0)]
        special = is_bone & ((bone_parent & (~use_rot | (mode != _inh.FULL))) | ~local_loc)
        self._inh_mode = mode
        self._inh_rot = use_rot
        self._inh_loc = local_loc
        self._is_bone = is_bone
        self._bone_parent = bone_parent
        self._special = special
        self._any_special = bool(special.any())
        self._arm_node = np.full(n, -1, np.int64)
        # rest arm_mat per node: only rigs with flagged bones use it
        self._arm_rest = np.tile(np.eye(4), (n, 1, 1)) if self._any_special else np.zeros((0, 4, 4))
        if self._any_special:
            # armature node and rest arm_mat of every bone, root bones first (parents-first order
            # is not assumed: iterate until every bone is resolved; once per scene)
            done = ~is_bone
            root_bone = is_bone & ~bone_parent
            self._arm_node[root_bone] = np.where(valid_par[root_bone], par[root_bone], -1)
            self._arm_rest[root_bone] = self._pre[root_bone]
            done |= root_bone
            while not done.all():
                ready = ~done & done[np.where(valid_par, par, 0)] & valid_par
                if not ready.any():
                    break     # a cycle: reported by the plan
                r = np.flatnonzero(ready)
                self._arm_node[r] = self._arm_node[par[r]]
                self._arm_rest[r] = self._arm_rest[par[r]] @ self._pre[r]
                done[r] = True
        return None

    def reset_to_bind_pose(self) -> bool:
        sc = self._scene
        if sc is None:
            return False
        self._t = np.array(sc.bind_translations, dtype=np.float64)
        self._q = normalize_quaternions(np.array(sc.bind_rotations, dtype=np.float64)) if self._n else np.zeros((0, 4))
        self._s = np.array(sc.bind_scales, dtype=np.float64)
        self._unit_scale = None
        self._local = np.array(sc.bind_locals, dtype=np.float64)
        self._trs_stale = np.zeros(self._n, dtype=bool)
        self._from_matrix = np.zeros(self._n, dtype=bool)
        self._matrix_marks = True        # (the bind locals' last rows are written once more)
        self._clear_shortcut()
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
        return readonly_view(self._resolution_states)

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
        if self._shortcut is not None and self._shortcut_mask[idx].any():
            self._clear_shortcut()
        self._t[idx] = t
        self._q[idx] = q
        self._s[idx] = s
        self._unit_scale = None
        self._trs_stale[idx] = False
        self._from_matrix[idx] = False
        self._local[idx] = np.matmul(self._pre[idx], compose_trs_fast(t, q, s))
        self._dirty = True
        return True

    def write_sampled(self, nodes: np.ndarray, t_nodes=None, t=None, q_nodes=None, q=None, s_nodes=None,
                      s=None, targets: int = 1) -> None:
        """The preview player's per-frame write: the sampled tracks of a clip, already checked
        (finite keys of a validated clip; ``q`` unit quaternions from the sampler), into the TRS of
        ``t_nodes`` / ``q_nodes`` / ``s_nodes`` (each a subset of ``nodes``, the clip's animated
        nodes: intp arrays, or slices for runs of consecutive nodes), then ``local = pre @ T @ R @ S``
        for ``nodes``.  Same result as ``local_trs`` + ``set_local_trs``, without the copies and
        checks."""
        marks = self._matrix_marks          # no matrix write since the marks were last clear
        if marks and self._trs_stale[nodes].any():
            self._refresh_trs(np.arange(self._n)[nodes])
        if self._shortcut is not None and self._shortcut_mask[nodes].any():
            self._clear_shortcut()
        if t is not None:
            self._t[t_nodes] = t
        if q is not None:
            self._q[q_nodes] = q
        if s is not None:
            self._s[s_nodes] = s
            self._unit_scale = None
        if marks:
            self._trs_stale[nodes] = False
            self._from_matrix[nodes] = False
            self._matrix_marks = bool(self._trs_stale.any() or self._from_matrix.any())
        if targets > 1 and not isinstance(nodes, slice) and self._write_crowd(nodes, targets):
            self._dirty = True
            return
        forms = self._rotation_forms()
        if forms is not False and isinstance(nodes, slice):
            if self._unit_scale is None:
                self._unit_scale = bool((self._s == 1.0).all())
            compose_pre_trs(self._pre[nodes], forms[nodes], self._t[nodes], self._q[nodes],
                            None if self._unit_scale else self._s[nodes], self._local[nodes],
                            bottom=marks)    # no matrix write: every last row is pre's already
        else:
            trs = compose_trs_fast(self._t[nodes], self._q[nodes], self._s[nodes])
            if isinstance(nodes, slice):
                np.matmul(self._pre[nodes], trs, out=self._local[nodes])
            else:
                self._local[nodes] = np.matmul(self._pre[nodes], trs)
        self._dirty = True

    def _rotation_forms(self):
        """``pre_rotation_forms`` of the rest matrices (once), or False when one is not affine."""
        forms = self._pre_forms
        if forms is None:
            pre = self._pre
            affine = bool(np.array_equal(pre[:, 3], np.broadcast_to([0.0, 0.0, 0.0, 1.0], pre[:, 3].shape)))
            forms = self._pre_forms = pre_rotation_forms(pre) if affine else False
        return forms

    def write_rotations(self, nodes: np.ndarray, q: np.ndarray) -> None:
        """``write_sampled(nodes, q_nodes=nodes, q=q)`` for rotations only (the spring bones' write:
        ``nodes`` a valid intp array, ``q`` unit wxyz): when no matrix write or bake shortcut is
        pending and the rest matrices are affine, only the 3x3 blocks ``pre3 @ R(q) @ diag(s)`` of
        the locals are made again (their translations do not depend on the rotation)."""
        forms = self._rotation_forms()
        if self._matrix_marks or self._shortcut is not None or forms is False:
            self.write_sampled(nodes, q_nodes=nodes, q=q)
            return
        self._q[nodes] = q
        r = np.dot(q.take(QUAT_PAIR_A, axis=1) * q.take(QUAT_PAIR_B, axis=1), QUAT_PAIR_FORM).reshape(-1, 3, 3)
        r *= self._s[nodes][:, None, :]
        self._local[nodes, :3, :3] = np.matmul(self._pre[nodes, :3, :3], r)
        self._dirty = True

    def _write_crowd(self, nodes: np.ndarray, targets: int) -> bool:
        """``write_sampled`` of a crowd: ``nodes`` = ``targets`` rows of the same clip nodes.  When
        every column (one clip node on each target) has one rest (``pre``) and one TRS, the local
        matrices are composed for the first target and copied to the others (one set of products
        instead of one per target); False (nothing written) otherwise."""
        if nodes.shape[0] % targets:
            return False
        grid = nodes.reshape(targets, -1)
        hit = self._crowd_pre
        if hit is None or hit[0] is not nodes or hit[1] is not self._pre:
            pre = self._pre[grid]
            hit = self._crowd_pre = (nodes, self._pre, bool((pre == pre[0]).all()))
        if not hit[2]:
            return False
        t, q, s = self._t[grid], self._q[grid], self._s[grid]
        if not ((t == t[0]).all() and (q == q[0]).all() and (s == s[0]).all()):
            return False
        first = grid[0]
        self._local[grid] = np.matmul(self._pre[first], compose_trs_fast(t[0], q[0], s[0]))
        return True

    def set_local_matrices(self, nodes, matrices) -> bool:
        """Batch write of full local matrices (Blender's evaluated parent-relative matrices).

        These nodes compose as ``world = parent_world @ local`` whatever their bone inheritance
        flags (Blender's ``inv(parent_pose) @ pose`` already holds the inheritance) until a TRS
        write (set_local_trs, reset_to_bind_pose) takes them back."""
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
        self._clear_shortcut()
        if np.array_equal(self._local[idx], m) and (not self._any_special or self._from_matrix[idx].all()):
            return True     # nothing changed: the pose stays clean, its version (and uploads) too
        self._local[idx] = m
        self._trs_stale[idx] = True
        self._from_matrix[idx] = True
        self._matrix_marks = True
        self._dirty = True
        return True

    def write_local_matrices(self, nodes: np.ndarray, matrices: np.ndarray) -> None:
        """``set_local_matrices`` for a per-frame source whose matrices were checked once (a
        preview bake's finite matrices): ``nodes`` a valid intp array, ``matrices`` (k,4,4)
        float64; no copies, checks or equality test (the pose always turns dirty)."""
        self._clear_shortcut()
        self._local[nodes] = matrices
        self._trs_stale[nodes] = True
        self._from_matrix[nodes] = True
        self._matrix_marks = True
        self._dirty = True

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
        self._unit_scale = None
        self._trs_stale[stale] = False

    def local_trs(self, nodes):
        """(T, Q, S) copies of the current TRS basis of ``nodes`` (decomposed after matrix writes:
        ``inv(pre) @ local``, which for a bone with non-default inheritance flags is its
        parent-relative transform, not Blender's basis; basis_from_worlds gives that one)."""
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
        return readonly_view(self._local)

    def basis_from_worlds(self, worlds: np.ndarray):
        """The TRS basis per node that reproduces ``worlds`` (N,4,4, every node's world matrix,
        e.g. Blender's evaluated pose at a frame: ``armature.matrix_world @ pose_bone.matrix``).

        Returns ``(T (N,3), Q (N,4) wxyz, S (N,3))`` such that ``set_local_trs(range(N), T, Q, S)``
        then ``update_world_matrices()`` gives back ``worlds``.  Default nodes:
        ``decompose(inv(pre) @ inv(parent_world) @ world)``; bones with non-default inheritance:
        Blender's inverse parent transform (``BKE_armature_mat_pose_to_bone``) of the bone's
        armature-space pose, given its parent's, then decomposed.  Vectorised, no state changes.

        Exact wherever the recovered channel matrix has no shear (always the case for worlds that
        Blender evaluated from loc/rot/scale values, every inherit_scale mode included).  A world
        that no TRS can reach (shear left in the channel, e.g. from constraints under a
        non-uniformly scaled parent) comes back as its closest rotation x axis-scale
        (``decompose_matrices``: column lengths and the orthonormalised rotation), so the shear is
        lost; a parent with a zero scale axis is inverted with the pseudo-inverse.
        Raises ValueError on a wrong shape or non-finite input."""
        n = self._n
        w = np.asarray(worlds, dtype=np.float64)
        if self._scene is None:
            raise ValueError("basis_from_worlds: the pose has no scene")
        if w.shape != (n, 4, 4):
            raise ValueError(f"basis_from_worlds: expected ({n}, 4, 4) world matrices, got {w.shape}")
        if not np.isfinite(w).all():
            bad = int(np.flatnonzero(~np.isfinite(w.reshape(n, -1)).all(axis=1))[0])
            raise ValueError(f"basis_from_worlds: non-finite world matrix of node '{self._scene.nodes[bad].name}'")
        ext = np.concatenate([w, np.eye(4)[None]], axis=0)      # index -1: identity
        par = np.where((self._parents >= 0) & (self._parents < n), self._parents, -1)
        if self._pre_inv is None:
            try:
                self._pre_inv = np.linalg.inv(self._pre)
            except np.linalg.LinAlgError:
                self._pre_inv = np.linalg.pinv(self._pre)
        inv_ext = safe_inverse(ext)
        basis = self._pre_inv @ inv_ext[par] @ w
        s = np.flatnonzero(self._special)
        if s.size:
            arm = self._arm_node[s]
            bpar = np.where(self._bone_parent[s], self._parents[s], -1)
            pose = inv_ext[arm] @ w[s]                     # armature space
            ppose = inv_ext[arm] @ ext[bpar]
            rs, loc, post = _inh.parent_transforms(self._pre[s], self._arm_rest[bpar], ppose,
                                                   self._bone_parent[s], self._inh_rot[s], self._inh_mode[s],
                                                   self._inh_loc[s])
            basis[s] = _inh.invert_parent_transforms(rs, loc, post, pose)
        t, q, sc = decompose_matrices(basis)
        return t, q, sc
