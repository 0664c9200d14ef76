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
from ..finite import affine_inv
from . import inherit as _inh
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


def _quadratic_form() -> np.ndarray:
    """(a, b, C): R.ravel() = (q[a] * q[b]) @ C (10 products, C (10, 9)) for a wxyz quaternion q,
    the homogeneous form R = (w^2 - v.v) I + 2 v v^T + 2 w [v]x of assets.types.quat_to_matrix."""
    c = np.zeros((4, 4, 3, 3))
    for i in range(3):
        c[0, 0, i, i] += 1.0
        for k in range(3):
            c[k + 1, k + 1, i, i] -= 1.0
        for j in range(3):
            c[i + 1, j + 1, i, j] += 2.0
    # 2 w [v]x: [[0,-z,y],[z,0,-x],[-y,x,0]]
    for (i, j, k, sign) in ((0, 1, 3, -1.0), (1, 0, 3, 1.0), (0, 2, 2, 1.0), (2, 0, 2, -1.0),
                            (1, 2, 1, -1.0), (2, 1, 1, 1.0)):
        c[0, k, i, j] += sign * 2.0
    c = c.reshape(16, 9)
    # the 10 distinct products q_a q_b (a <= b): off-diagonal pairs carry both coefficients
    pairs = [(a, b) for a in range(4) for b in range(a, 4)]
    form = np.array([c[4 * a + b] + (c[4 * b + a] if a != b else 0.0) for a, b in pairs])
    return np.array([a for a, _ in pairs]), np.array([b for _, b in pairs]), form


_QA, _QB, _QFORM = _quadratic_form()
_S9 = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2])
_S12 = np.array([0, 1, 2, 3] * 3)    # (s, 1) per column of a 3x4 block


def compose_trs_fast(t: np.ndarray, q: np.ndarray, s: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
    """T @ R @ S for (N,3), unit (N,4) wxyz, (N,3) -> (N,4,4), as ``compose_trs(.., normalized=True)``
    but with the rotation made by one matrix product of the quaternions' outer products."""
    n = q.shape[0]
    if out is None:
        out = np.zeros((n, 4, 4))
        out[:, 3, 3] = 1.0
    qq = np.take(q, _QA, axis=1)
    qq *= np.take(q, _QB, axis=1)
    r = np.dot(qq, _QFORM)
    r *= np.take(s, _S9, axis=1)
    out[:, :3, :3] = r.reshape(n, 3, 3)
    out[:, :3, 3] = t
    return out


def pre_rotation_forms(pre: np.ndarray) -> np.ndarray:
    """(N,14,12): for each affine ``pre``, the linear map from ``x = (q_a q_b (10), t (3), 1)`` to
    the top three rows of ``pre @ T @ R(q)`` (row-major 3x4): the quaternion's quadratic form
    (``compose_trs_fast``) carried through pre's 3x3 block, then ``pre3 @ t + pre_t``.  So
    ``pre @ T @ R @ S`` takes one (1,14) x (14,12) product per row (``compose_pre_trs``)."""
    pre = np.asarray(pre, np.float64)
    n = pre.shape[0]
    p3 = pre[:, :3, :3]
    f = np.zeros((n, 14, 3, 4))
    f[:, :10, :, :3] = np.einsum("nij,kjl->nkil", p3, _QFORM.reshape(10, 3, 3))
    f[:, 10:13, :, 3] = p3.transpose(0, 2, 1)      # row 10 + j, entry (i, 3): pre3[i, j]
    f[:, 13, :, 3] = pre[:, :3, 3]
    return f.reshape(n, 14, 12)


def compose_pre_trs(pre: np.ndarray, forms: np.ndarray, t: np.ndarray, q: np.ndarray, s: np.ndarray,
                    out: np.ndarray, bottom: bool = True) -> None:
    """``out = pre @ T @ R @ S`` for affine (N,4,4) ``pre`` with ``forms = pre_rotation_forms(pre)``,
    (N,3) ``t``, unit (N,4) wxyz ``q`` and (N,3) ``s`` (None: all ones): the top three rows are one batched
    (1,14) x (14,12) product per row (rotation and translation together), then the columns of the
    rotation block are scaled.  ``bottom=False``: ``out``'s last rows already equal pre's."""
    n = q.shape[0]
    x = np.empty((n, 1, 14))
    np.multiply(np.take(q, _QA, axis=1), np.take(q, _QB, axis=1), out=x[:, 0, :10])
    x[:, 0, 10:13] = t
    x[:, 0, 13] = 1.0
    top = np.matmul(x, forms).reshape(n, 12)     # contiguous: numpy's strided loops are slow
    if s is not None:
        s4 = np.ones((n, 4))
        s4[:, :3] = s
        top *= np.take(s4, _S12, axis=1)           # column l of the rotation block times s[l]
    out[:, :3] = top.reshape(n, 3, 4)
    if bottom:
        out[:, 3] = pre[:, 3]


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
        self.shortcut_updates = 0  # world updates that took a set_world_shortcut (tests, profiling)
        self._pending = None       # (nodes, make) of defer_local_matrices: locals made when read
        self._pending_mask = np.zeros(0, dtype=bool)
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
        self._pending = None
        self._pending_mask = np.zeros(n, dtype=bool)
        self._flat_plans = {}
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
        self._drop_pending()
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
        if self._shortcut is not None and self._shortcut_mask[idx].any():
            self._clear_shortcut()
        if self._pending is not None:
            self._materialize()
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
        if self._pending is not None and self._pending_mask[nodes].any():
            self._materialize()
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
        forms = self._pre_forms
        if forms is None:
            pre = self._pre
            affine = bool(np.array_equal(pre[:, 3], np.broadcast_to([0.0, 0.0, 0.0, 1.0], pre[:, 3].shape)))
            forms = self._pre_forms = pre_rotation_forms(pre) if affine else False
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
        if self._pending is not None:
            self._materialize()
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
        if self._pending is not None:
            self._materialize()
        self._local[nodes] = matrices
        self._trs_stale[nodes] = True
        self._from_matrix[nodes] = True
        self._matrix_marks = True
        self._dirty = True

    def defer_local_matrices(self, nodes: np.ndarray, make) -> None:
        """``write_local_matrices(nodes, make())``, with ``make()`` called only when something
        reads or writes the locals (or chains worlds from them) before the next write of
        ``nodes`` replaces them: a preview bake whose worlds come from ``set_world_shortcut``
        does not pay for locals nobody reads.  ``nodes`` a valid intp array; ``make()`` returns
        (k,4,4) finite float64 matrices."""
        self._clear_shortcut()
        if self._pending is not None:
            if self._pending[0] is nodes:
                self._pending = None                  # replaced before anyone read it
            else:
                self._materialize()
        self._pending = (nodes, make)
        self._pending_mask[nodes] = True
        self._trs_stale[nodes] = True
        self._from_matrix[nodes] = True
        self._matrix_marks = True
        self._dirty = True

    def _materialize(self) -> None:
        nodes, make = self._pending
        self._pending = None
        self._pending_mask[:] = False
        self._local[nodes] = make()

    def _drop_pending(self) -> None:
        if self._pending is not None:
            self._pending = None
            self._pending_mask[:] = False

    def set_world_shortcut(self, nodes, anchors, relative_t) -> bool:
        """For the next ``update_world_matrices`` only: ``world[nodes] = world[anchors] @ relative``
        instead of chaining their locals, ``relative_t`` being the (k,4,4) *transposed* relative
        matrices (a preview bake: every baked bone relative to its root bone, Blender's
        ``inverse(root pose) @ pose``).  The worlds then take one step per level of a flat
        hierarchy, and a run of at least 8 consecutive nodes with the same anchor one matrix
        product (``relative^T @ anchor^T`` as one (4k,4) x (4,4) product).  ``anchors`` must be
        proper ancestors of ``nodes`` and not in ``nodes``; nodes below ``nodes`` (bone-parented
        objects) chain as usual.  The locals of ``nodes`` are not changed: the caller writes the
        same pose there (``set_local_matrices``) first.  Dropped by any later write to ``nodes``
        (or ``set_local_matrices``, ``reset_to_bind_pose``), and ignored while bones with
        non-default inheritance take the inheritance path.  False on bad input (no shortcut
        then); the matrices are the caller's finite values (not checked per call)."""
        self._clear_shortcut()
        hit = self._flat_plans.get((id(nodes), id(anchors)))
        if hit is not None and hit[0] is nodes and hit[1] is anchors:
            idx, plan = hit[2], hit[3]        # the same arrays as before (a bake's, per frame)
        else:
            idx = self._valid_nodes(nodes)
            anc = self._valid_nodes(anchors)
            if idx is None or anc is None or anc.shape != idx.shape:
                return False
            plan = self._build_flat_plan(idx, anc) if idx.size else None
            if plan is None:
                return idx.size == 0
            if len(self._flat_plans) > 8:
                self._flat_plans.clear()
            self._flat_plans[(id(nodes), id(anchors))] = (nodes, anchors, idx, plan)
        rel_t = relative_t
        if not isinstance(rel_t, np.ndarray) or rel_t.shape != (idx.shape[0], 4, 4) or rel_t.dtype != np.float64:
            try:
                rel_t = np.asarray(relative_t, dtype=np.float64).reshape(idx.shape[0], 4, 4)
            except ValueError:
                return False
        self._shortcut = (plan, rel_t)
        self._shortcut_mask[idx] = True
        self._dirty = True
        return True

    def _clear_shortcut(self) -> None:
        if self._shortcut is not None:
            self._shortcut = None
            self._shortcut_mask[:] = False

    def _build_flat_plan(self, idx: np.ndarray, anc: np.ndarray):
        """The hierarchy where each shortcut node hangs from its anchor, level by level:
        ``(order, positions of the chained shortcut nodes in it, their rows in the input,
        levels)``, each level ``(start, stop, parent positions, runs)``: positions start..stop of
        the order are chained (``parent world @ local``), each run ``(dst start, dst stop, anchor
        position, src start, src stop)`` is one product from the input rows src start..stop.
        None when an anchor is not a proper ancestor of its node or is itself a shortcut node.
        Once per set of nodes."""
        n = self._n
        k = idx.shape[0]
        par = np.array(self._parents, np.int64)
        par[(par < 0) | (par >= n)] = -1
        inset = np.zeros(n, bool)
        inset[idx] = True
        if inset[anc].any() or np.unique(idx).size != k:
            return None
        up = par[idx].copy()                      # anchors must be proper ancestors
        found = np.zeros(k, bool)
        for _ in range(n):
            found |= up == anc
            live = (up >= 0) & ~found
            if not live.any():
                break
            up[live] = par[up[live]]
        if not found.all():
            return None
        par[idx] = anc
        depth = np.full(n, -1, np.int64)
        depth[par < 0] = 0
        for d in range(1, n + 1):                 # init only: one step per flat level
            nxt = (depth < 0) & (par >= 0)
            nxt[nxt] = depth[par[nxt]] == d - 1
            if not nxt.any():
                break
            depth[nxt] = d
        if (depth < 0).any():
            return None
        # runs: >= 32 consecutive input rows with one anchor (one product each; shorter ones
        # cost less as rows of their level's batched product)
        brk = np.flatnonzero(np.diff(anc)) + 1
        starts = np.concatenate([[0], brk])
        stops = np.concatenate([brk, [k]])
        long_runs = [(int(a), int(b)) for a, b in zip(starts, stops) if b - a >= 8]
        in_run = np.zeros(n, bool)
        for a, b in long_runs:
            in_run[idx[a:b]] = True
        # order: by depth; in each level the chained nodes, then the runs' nodes in input order
        run_key = np.full(n, -1, np.int64)
        for r, (a, b) in enumerate(long_runs):
            run_key[idx[a:b]] = r
        within = np.zeros(n, np.int64)
        within[idx] = np.arange(k)
        perm = np.lexsort((within, run_key, depth)).astype(np.intp)
        pos = np.empty(n, np.intp)
        pos[perm] = np.arange(n)
        ds = depth[perm]
        levels = []
        for d in range(1, int(ds.max()) + 1 if n else 1):
            lo, hi = int(np.searchsorted(ds, d, "left")), int(np.searchsorted(ds, d, "right"))
            if hi <= lo:
                continue
            chained = perm[lo:hi][~in_run[perm[lo:hi]]]
            c = chained.size
            runs = []
            for a, b in long_runs:
                if depth[idx[a]] == d:
                    runs.append((int(pos[idx[a]]), int(pos[idx[a]]) + b - a, int(pos[anc[a]]), a, b))
            levels.append((lo, lo + c, pos[par[chained]], runs))
        chained_sc = ~in_run[idx]
        return perm, pos[idx[chained_sc]], np.flatnonzero(chained_sc), levels

    # ---------------------------------------------------------------- reads
    def _refresh_trs(self, idx: np.ndarray) -> None:
        stale = idx[self._trs_stale[idx]]
        if stale.size == 0:
            return
        if self._pending is not None:
            self._materialize()
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
        if self._pending is not None:
            self._materialize()
        return LocalTransform(self._t[i].copy(), self._q[i].copy(), self._s[i].copy(), self._local[i].copy())

    @property
    def local_matrices(self) -> np.ndarray:
        if self._pending is not None:
            self._materialize()
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
            self._world_plan = None
            self._inh_levels = None
        if self._pending is not None and (self._shortcut is None
                                          or (self._pending_mask & ~self._shortcut_mask).any()):
            self._materialize()      # locals that the shortcut does not replace are chained
        if self._any_special:
            active = self._special & ~self._from_matrix
            if active.any():
                self._clear_shortcut()
                if self._pending is not None:
                    self._materialize()
                self._update_with_inheritance(active)
                self._dirty = False
                self._version = next_version(self._version)
                return True
        if self._shortcut is not None:
            (perm, at, src, levels), rel_t = self._shortcut
            self._clear_shortcut()
            w = self._local[perm]
            if src.size:
                w[at] = rel_t[src].transpose(0, 2, 1)
            for a, b, parents, runs in levels:     # parents lie in earlier levels: no overlap
                if b > a:
                    np.matmul(w[parents], w[a:b], out=w[a:b])
                for da, db, p, sa, sb in runs:     # world^T = relative^T @ anchor^T, one product
                    w[da:db] = np.dot(rel_t[sa:sb].reshape(-1, 4), w[p].T).reshape(-1, 4, 4).transpose(0, 2, 1)
            self._world[perm] = w
            self.shortcut_updates += 1
            self._dirty = False
            self._version = next_version(self._version)
            return True
        # The plan was resolved (and checked for cycles, with the three resolution states) when
        # it was built.  Worlds by segments (_build_world_plan): about 2 matrix products per node
        # in about 2 * sqrt(depth) vectorised steps.
        wp = self._world_plan
        if wp is None:
            wp = self._world_plan = self._build_world_plan()
        perm, seg_steps, roots, anchor_steps, rest = wp
        local = self._local[perm]   # plan order: every step below works on one slice
        seg = local.copy()
        for a, b, parents in seg_steps:     # reads other blocks of seg: no overlap, no temporary
            np.matmul(seg[parents], local[a:b], out=seg[a:b])
        world = np.empty_like(seg)
        world[roots[0]:roots[1]] = seg[roots[0]:roots[1]]
        for a, b, anchors in anchor_steps:
            np.matmul(world[anchors], seg[a:b], out=world[a:b])
        a, b, anchors = rest
        if b > a:
            np.matmul(world[anchors], seg[a:b], out=world[a:b])
        self._world[perm] = world
        self._dirty = False
        self._version = next_version(self._version)
        return True

    def _build_world_plan(self):
        """Segments of K levels (K ~ sqrt(depth)): nodes at depths 0, K, 2K, ... are checkpoints.
        ``seg[i]`` = the product of the locals from below i's anchor (nearest checkpoint
        ancestor) down to i, made level by level inside the segments (all segments at once:
        K - 1 steps); checkpoint worlds follow anchor to anchor (depth / K steps); every other
        node is ``world[anchor] @ seg`` in one step.  The nodes are put in an order where each
        step is one slice: depth residue classes 1, 2, ..., K - 1, then the checkpoints (roots
        first) by depth.  Returns (order, seg steps, root count, anchor steps, rest step), the
        steps as (start, stop, positions of the parents / anchors).  Once per hierarchy."""
        n = self._n
        depth = np.zeros(n, np.int64)
        for d, (nodes, _parents) in enumerate(self._plan):
            depth[nodes] = d
        dmax = int(depth.max()) if n else 0
        # the segment length with the lowest estimated cost (numpy calls and matrix products,
        # measured orders of magnitude: ~1.6 us a call, ~0.09 us a gathered 4x4 product);
        # K = 1 is level by level (best for shallow hierarchies with many nodes, e.g. crowds)
        best = None
        for k in sorted({1, 2, max(2, int(round(np.sqrt(dmax + 1)))), max(2, int(round(np.sqrt(dmax + 1)))) + 1}):
            plan = self._segment_plan(depth, dmax, k)
            steps = len(plan[1]) + len(plan[3]) + 1
            products = sum(b - a for a, b, _ in plan[1]) + sum(b - a for a, b, _ in plan[3]) + plan[4][1]
            cost = 3.2 * steps + 0.09 * products
            if best is None or cost < best[0]:
                best = (cost, plan)
        return best[1]

    def _segment_plan(self, depth: np.ndarray, dmax: int, k: int):
        n = self._n
        par = self._parents_safe
        res = depth % k
        rank = np.where(res == 0, k - 1, res - 1)
        perm = np.lexsort((depth, rank)).astype(np.intp)
        pos = np.empty(n, np.intp)
        pos[perm] = np.arange(n)
        # anchor = nearest checkpoint ancestor (exclusive), resolved level by level (init only)
        anchor = np.full(n, -1, np.int64)
        for nodes, _parents in self._plan[1:]:
            p = par[nodes]
            anchor[nodes] = np.where(depth[p] % k == 0, p, anchor[p])
        r_sorted = rank[perm]
        d_sorted = depth[perm]

        def block(mask):
            idx = np.flatnonzero(mask)
            return (int(idx[0]), int(idx[-1]) + 1) if idx.size else None

        seg_steps = []
        for r in range(2, k):                          # residue r: parents of residue r - 1
            blk = block(r_sorted == r - 1)
            if blk is not None:
                seg_steps.append(blk + (pos[par[perm[blk[0]:blk[1]]]],))
        blk = block((r_sorted == k - 1) & (d_sorted > 0)) if k > 1 else None   # checkpoints below the roots
        if blk is not None:
            seg_steps.append(blk + (pos[par[perm[blk[0]:blk[1]]]],))
        roots = int(np.count_nonzero(depth == 0))
        first_ck = int(np.count_nonzero(rank < k - 1))
        anchor_steps = []
        for d in range(k, dmax + 1, k):
            blk = block((r_sorted == k - 1) & (d_sorted == d))
            if blk is not None:
                anchor_steps.append(blk + (pos[anchor[perm[blk[0]:blk[1]]]],))
        rest = (0, first_ck, pos[anchor[perm[:first_ck]]])
        # the roots (depth 0) are the first checkpoints
        return perm, seg_steps, (first_ck, first_ck + roots), anchor_steps, rest

    # ---------------------------------------------------------------- bone inheritance
    def _update_with_inheritance(self, active: np.ndarray) -> None:
        """Level by level: world = parent_world @ local, and for the ``active`` bones (non-default
        inheritance, local from a TRS write) Blender's parent transform in armature space.

        ``ap`` holds each bone's armature-space pose matrix (pose_mat); a root bone's parent (its
        armature object) counts as identity there, so no armature world is ever inverted.  One
        batched step per hierarchy depth (plus one per depth holding active bones)."""
        n = self._n
        world = np.empty((n + 1, 4, 4))
        world[n] = np.eye(4)               # index -1: identity (roots, bones without armature)
        ap = np.empty((n + 1, 4, 4))
        ap[n] = np.eye(4)
        local = self._local
        for nodes, par, b, bp, s, bps, arm, pre_s, arm_rest_s, flags in self._inheritance_levels(active):
            world[nodes] = np.matmul(world[par], local[nodes])
            if b is None:
                continue
            ap[b] = np.matmul(ap[bp], local[b])
            if s is None:
                continue
            chan = compose_trs_fast(self._t[s], self._q[s], self._s[s])
            rs, loc, post = _inh.parent_transforms(pre_s, arm_rest_s, ap[bps], *flags)
            pose = _inh.apply_parent_transforms(rs, loc, post, chan)
            ap[s] = pose
            world[s] = np.matmul(world[arm], pose)
        self._world[:] = world[:n]

    def _inheritance_levels(self, active: np.ndarray) -> list:
        """Per hierarchy level, what ``_update_with_inheritance`` indexes with (cached per set of
        active bones): nodes, parents (-1: the identity row), bones and their bone parents, the
        active bones, their bone parents, armature nodes, rest offsets, parents' rest and flags."""
        key = active.tobytes()
        cache = self._inh_levels
        if cache is not None and cache[0] == key:
            return cache[1]
        n = self._n
        is_bone = self._is_bone
        bpar = np.where(self._bone_parent, self._parents, -1)
        levels = []
        for nodes, parents in self._plan:
            par = np.where((parents >= 0) & (parents < n), parents, -1)
            b = nodes[is_bone[nodes]]
            s = b[active[b]] if b.size else b
            if s.size:
                flags = (self._bone_parent[s], self._inh_rot[s], self._inh_mode[s], self._inh_loc[s])
                levels.append((nodes, par, b, bpar[b], s, bpar[s], self._arm_node[s], self._pre[s],
                               self._arm_rest[bpar[s]], flags))
            else:
                levels.append((nodes, par, b if b.size else None, bpar[b], None, None, None, None, None, None))
        self._inh_levels = (key, levels)
        return levels

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
        inv_ext = _safe_inv(ext)
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


def _safe_inv(m: np.ndarray) -> np.ndarray:   # a singular parent: affine pseudo-inverse
    return affine_inv(m)
