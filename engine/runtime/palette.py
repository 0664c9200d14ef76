"""Skinning palettes (seed: SkinningPalette, SkinningPaletteGroup, SkinningPaletteSet). No bpy/gpu.

skinMatrix[j] = inverse(meshWorld) @ jointWorld[j] @ inverseBind[j], batched over joints, with the
dynamic local bounds = union_j skinMatrix[j] * jointBounds[j] (each joint box transformed exactly as
centre and |R| * half extents, vectorised).
Palettes only read ``ScenePose.world_matrices``, so they work the same whether the local
transforms came from the AnimationPlayer or from Blender's evaluated pose (timeline mode).
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from ..assets.types import Bounds, SkinAsset, bounds_of
from ..finite import affine_solve, object_inv
from . import dquat as _dquat

# bytes of one mat4; the seed checks jointCount * sizeof(mat4) for overflow
MATRIX_BYTES = 64
_MAX_BUFFER_BYTES = (1 << 63) - 1

_NO_MATRICES = np.zeros((0, 4, 4), dtype=np.float32)
_NO_MATRICES.flags.writeable = False
_EMPTY_BOUNDS = Bounds.empty()


class SkinningPalette:
    """One skin's palette: the last computed (and uploaded) matrices, their local bounds and the
    upload flag.  While a batched update (``_PaletteBatch``) computes it, those are read from
    the batch's arrays (``_view``: (batch, slot)), so a frame makes no per-palette Python step;
    any other write takes the palette's own copies back first (``_detach``)."""

    def __init__(self):
        self._view = None             # (batch, slot) while a _PaletteBatch holds the results
        self._matrices = np.zeros((0, 4, 4), dtype=np.float32)
        self._bounds = Bounds.empty()
        self._uploaded = False
        self.gpu_buffer = None
        self.joint_capacity = 0
        self._max_linear_scale = 0.0  # upper bound of ||skinMatrix[j][:3,:3]||_2 over joints
        self._backend = None

    def _detach(self) -> None:
        """Stop reading the batch: its current results become the palette's own values."""
        v = self._view
        if v is not None:
            self._view = None
            b, k = v
            b.attached = False            # the batch re-attaches its palettes on its next update
            self._matrices = b.slot_matrices(k)
            self._bounds = b.slot_bounds(k)
            self._uploaded = b.slot_uploaded(k)
            self._max_linear_scale = b.linear_scale(k)

    @property
    def matrices(self) -> np.ndarray:
        """(J,4,4) float32 skin matrices of the last update (read-only after a batched one)."""
        v = self._view
        return self._matrices if v is None else v[0].slot_matrices(v[1])

    @matrices.setter
    def matrices(self, value) -> None:
        self._detach()
        self._matrices = value

    @property
    def current_local_bounds(self) -> Bounds:
        v = self._view
        return self._bounds if v is None else v[0].slot_bounds(v[1])

    @current_local_bounds.setter
    def current_local_bounds(self, value: Bounds) -> None:
        self._detach()
        self._bounds = value

    @property
    def uploaded(self) -> bool:
        v = self._view
        return self._uploaded if v is None else v[0].slot_uploaded(v[1])

    @uploaded.setter
    def uploaded(self, value: bool) -> None:
        self._detach()
        self._uploaded = bool(value)

    @property
    def max_linear_scale(self) -> float:
        """Upper bound of the spectral norm of every joint's skin matrix (3x3 part), for the
        morph reach in bounds.  After a batched update it is computed on first read (only
        morphed primitives need it), for every group of the batch at once."""
        v = self._view
        return self._max_linear_scale if v is None else v[0].linear_scale(v[1])

    @max_linear_scale.setter
    def max_linear_scale(self, value: float) -> None:
        self._detach()
        self._max_linear_scale = float(value)

    # ---------------------------------------------------------------- lifecycle
    def initialize(self, backend, joint_count: int) -> bool:
        j = int(joint_count)
        if j <= 0 or j * MATRIX_BYTES > _MAX_BUFFER_BYTES:
            return False
        if self.gpu_buffer is not None and self.joint_capacity == j and self._backend is backend:
            self.clear()
            return True
        self.release()
        try:
            buf = backend.create_palette_buffer(j)
        except Exception:
            buf = None
        if buf is None:
            return False
        self._backend = backend
        self.gpu_buffer = buf
        self.joint_capacity = j
        self.clear()
        return True

    def clear(self) -> None:
        """Drop CPU results, bounds and the uploaded flag; keeps the GPU buffer."""
        self.matrices = _NO_MATRICES
        self.current_local_bounds = _EMPTY_BOUNDS
        self.max_linear_scale = 0.0
        self.uploaded = False

    def release(self) -> None:
        if self.gpu_buffer is not None and self._backend is not None:
            self._backend.release_palette(self.gpu_buffer)
        self.gpu_buffer = None
        self.joint_capacity = 0
        self.clear()

    def is_gpu_ready(self) -> bool:
        return (self.gpu_buffer is not None and self._backend is not None
                and bool(self._backend.is_palette_valid(self.gpu_buffer))
                and self.joint_capacity > 0 and self.uploaded)

    # ---------------------------------------------------------------- frame
    def update(self, mesh_world: np.ndarray, joint_worlds: np.ndarray, inverse_binds: np.ndarray,
               box_center: Optional[np.ndarray] = None, box_half: Optional[np.ndarray] = None,
               box_joints: Optional[np.ndarray] = None, still_bounds: Optional[Bounds] = None) -> bool:
        """Compute and upload the palette.

        ``joint_worlds`` (J,4,4) world matrices of the joints in palette order, ``inverse_binds``
        (J,4,4); ``box_center``/``box_half`` (K,3) the non-empty joint bounds as centre and half
        extents and ``box_joints`` (K,) the palette slots they belong to (None: no bounds);
        ``still_bounds``: the mesh-local bounds of vertices no joint moves (unioned as they are).
        """
        self.clear()
        j = joint_worlds.shape[0]
        if j != self.joint_capacity or inverse_binds.shape[0] != j:
            return False
        mesh_inv = object_inv(mesh_world)      # a mesh scaled to 0: collapses as in Blender
        skin = np.matmul(mesh_inv, np.matmul(joint_worlds, inverse_binds))   # (J,4,4) float64
        if box_center is not None and box_center.shape[0]:
            m = skin[box_joints]
            r = m[:, :3, :3]
            c = np.matmul(r, box_center[:, :, None])[:, :, 0] + m[:, :3, 3]
            h = np.matmul(np.abs(r), box_half[:, :, None])[:, :, 0]   # exact AABB of the moved box
            self.current_local_bounds = Bounds((c - h).min(axis=0), (c + h).max(axis=0))
        lin = skin[:, :3, :3]
        gram = np.matmul(np.transpose(lin, (0, 2, 1)), lin)
        # spectral norm^2 <= max absolute row sum of the Gram matrix (exact for similarities)
        self.max_linear_scale = float(np.sqrt(np.abs(gram).sum(axis=2).max())) if j else 0.0
        if still_bounds is not None:
            # vertices without weights stay where they are (identity): bounds and morph reach
            self.current_local_bounds = self.current_local_bounds.union(still_bounds)
            self.max_linear_scale = max(self.max_linear_scale, 1.0)
        self.matrices = np.ascontiguousarray(skin, dtype=np.float32)
        return self.upload()

    def upload(self) -> bool:
        ok = self._push()
        self.uploaded = ok
        return ok

    def _push(self) -> bool:
        """Hand the matrices to the backend; True on success (the flag is the caller's)."""
        if self.gpu_buffer is None or self._backend is None:
            return False
        if self.matrices.shape[0] != self.joint_capacity:
            return False
        try:
            return bool(self._backend.upload_palette(self.gpu_buffer, self.matrices))
        except Exception:
            return False


def _segments(skin) -> Optional[np.ndarray]:
    seg = getattr(skin, "joint_segments", None)
    return None if seg is None or not (np.asarray(seg) >= 0).any() else np.asarray(seg, np.int64)


def skin_definitions_equal(a: SkinAsset, b: SkinAsset) -> bool:
    """Exact joint-index sequence, B-Bone segment slots and element-wise inverse-bind equality
    (no epsilon)."""
    sa, sb = _segments(a), _segments(b)
    return (bool(getattr(a, "preserve_volume", False)) == bool(getattr(b, "preserve_volume", False))
            and (sa is None) == (sb is None)
            and (sa is None or (sa.shape == sb.shape and bool(np.array_equal(sa, sb))))
            and a.joint_node_indices.shape == b.joint_node_indices.shape
            and bool(np.array_equal(a.joint_node_indices, b.joint_node_indices))
            and a.inverse_bind_matrices.shape == b.inverse_bind_matrices.shape
            and bool(np.array_equal(a.inverse_bind_matrices, b.inverse_bind_matrices)))


def merge_joint_bounds(a: SkinAsset, b: SkinAsset) -> SkinAsset:
    """The same skin with per-joint bounds = union(a[j], b[j])."""
    ua, ub = a.unweighted_bounds, b.unweighted_bounds
    still = ua if ub is None else (ub if ua is None else ua.union(ub))
    return SkinAsset(a.joint_node_indices, a.inverse_bind_matrices,
                     np.minimum(a.joint_bounds_min, b.joint_bounds_min),
                     np.maximum(a.joint_bounds_max, b.joint_bounds_max),
                     armature_node=a.armature_node, unweighted_bounds=still,
                     armature_relation=a.armature_relation, joint_segments=a.joint_segments,
                     preserve_volume=a.preserve_volume)


class SkinningPaletteGroup:
    """Primitives of one mesh node sharing one skin definition, and their single palette.

    Blender's Armature modifier deforms in the armature object's space using the *current* mesh
    and armature transforms.  When the skin names its armature node, the inverse binds are
    corrected every update by ``inverse(rel_bind) @ rel_now`` with ``rel = inverse(armatureWorld)
    @ meshWorld``: moving an armature that is not the mesh's parent leaves the mesh in place, as
    in Blender (identity while the relation is the bind relation)."""

    def __init__(self, mesh_node_index: int, skin: SkinAsset, bind_worlds: Optional[np.ndarray] = None):
        self.mesh_node_index = int(mesh_node_index)
        self.skin = skin
        self.palette = SkinningPalette()
        self.members: List[tuple] = []   # (node_index, primitive_index)
        self.armature_node = int(getattr(skin, "armature_node", -1))
        self.dq = bool(getattr(skin, "preserve_volume", False))   # Preserve Volume: engine/runtime/dquat.py
        self.rel_bind_inv = None
        rel = getattr(skin, "armature_relation", None)
        if self.armature_node >= 0 and rel is None and bind_worlds is not None:
            rel = np.linalg.inv(bind_worlds[self.armature_node]) @ bind_worlds[self.mesh_node_index]
        if self.armature_node >= 0 and rel is not None:
            self.rel_bind_inv = np.linalg.inv(rel)
        self._prepare()

    def merge(self, skin: SkinAsset) -> None:
        self.skin = merge_joint_bounds(self.skin, skin)
        self._prepare()

    def _prepare(self) -> None:
        sk = self.skin
        lo, hi = sk.joint_bounds_min, sk.joint_bounds_max
        nonempty = np.flatnonzero(np.all(lo <= hi, axis=1) & np.all(np.isfinite(lo), axis=1)
                                  & np.all(np.isfinite(hi), axis=1))
        self.joint_nodes = np.asarray(sk.joint_node_indices, dtype=np.int64)
        self.inverse_binds = np.asarray(sk.inverse_bind_matrices, dtype=np.float64)
        self.box_center = 0.5 * (lo[nonempty] + hi[nonempty])
        self.box_half = 0.5 * (hi[nonempty] - lo[nonempty])
        self.box_joints = nonempty
        ub = getattr(sk, "unweighted_bounds", None)
        self.still_bounds = ub if ub is not None and not ub.is_empty else None
        seg = _segments(sk)
        self.seg_slots = np.flatnonzero(seg >= 0) if seg is not None else np.zeros(0, np.int64)
        self.seg_keys = (np.stack([self.joint_nodes[self.seg_slots], seg[self.seg_slots]], axis=1)
                         if seg is not None else np.zeros((0, 2), np.int64))
        self.seg_rows = np.zeros(0, np.int64)   # set by SkinningPaletteSet.initialize

    def update(self, world_matrices: np.ndarray, segment_table: Optional[np.ndarray] = None) -> bool:
        """``segment_table``: (R,4,4) B-Bone segment deform relations of the palette set (rows
        ``seg_rows`` belong to this group's segment slots ``seg_slots``); None: the rest relation
        (identity: each segment slot moves rigidly with its bone)."""
        ibm = self.inverse_binds
        if self.rel_bind_inv is not None:
            rel_now = affine_solve(world_matrices[self.armature_node], world_matrices[self.mesh_node_index])
            ibm = np.matmul(ibm, self.rel_bind_inv @ rel_now)
        joints = world_matrices[self.joint_nodes]
        if segment_table is not None and self.seg_slots.size:
            # jointWorld @ bbone_pose[a] @ inverse(bbone_rest[a]) (Blender's b_bone_mats[a + 1]
            # = chan_mat @ arm_mat @ b_bone[a] @ inv(b_bone_rest[a]) @ inv(arm_mat))
            joints[self.seg_slots] = np.matmul(joints[self.seg_slots], segment_table[self.seg_rows])
        if self.dq:
            return _dquat.update_group(self, world_matrices, joints, ibm)
        return self.palette.update(world_matrices[self.mesh_node_index], joints,
                                   ibm, self.box_center, self.box_half, self.box_joints, self.still_bounds)


class _PaletteBatch:
    """Every group of a SkinningPaletteSet computed in one vectorised step (the per-frame path).

    The joints of all groups are concatenated (T rows, group ``g`` at ``offsets[g]``), and the
    skin matrices are computed transposed: ``skin^T = (ibm @ corr)^T @ jointWorld^T @
    inverse(meshWorld)^T``.  For a single group the last factor is one matrix product over all
    T rows; for several (a crowd) one batched product with the group's matrix per row.  The
    transposed float32 result is what the palette texture holds (texel c of row j = column c),
    and ``SkinningPalette.matrices`` is its (J,4,4) transposed view.  Bounds: every non-empty
    joint box moved exactly (centre and |R| half extents), reduced per group with ``reduceat``;
    the linear-scale bound is made on first read (``linear_scale``).  Rigs whose groups have an
    armature relation keep ``ibm @ corr`` cached and recompute it only when the relation changed."""

    def __init__(self, groups):
        self.groups = groups
        counts = np.array([g.joint_nodes.shape[0] for g in groups], np.int64)
        self.counts = counts
        self.offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        self.joints = np.concatenate([g.joint_nodes for g in groups]).astype(np.intp)
        j = self.joints
        self.joint_run = (slice(int(j[0]), int(j[-1]) + 1) if j.size and int(j[-1]) - int(j[0]) == j.size - 1
                          and (np.diff(j) == 1).all() else None)     # consecutive joints: a view
        self.group_of_joint = np.repeat(np.arange(len(groups), dtype=np.intp), counts)
        self.mesh_nodes = np.array([g.mesh_node_index for g in groups], np.intp)
        # (ibm @ corr)^T of every joint; the corrections of groups with an armature relation are
        # folded in by _relations (from the groups' own inverse binds, no second copy kept)
        self.ibm_t_eff = np.ascontiguousarray(np.concatenate([g.inverse_binds for g in groups]).transpose(0, 2, 1))
        self.rel = np.array([gi for gi, g in enumerate(groups) if g.rel_bind_inv is not None], np.intp)
        self.rel_arm = np.array([groups[gi].armature_node for gi in self.rel], np.intp)
        self.rel_mesh = self.mesh_nodes[self.rel]
        self.rel_bind_inv = (np.stack([groups[gi].rel_bind_inv for gi in self.rel]) if self.rel.size
                             else np.zeros((0, 4, 4)))
        self.corr = None                       # (R,4,4) relation corrections folded into ibm_t_eff
        # joint boxes, in group order: global joint rows, centres and half extents
        self.box_rows = np.concatenate([g.box_joints + off for g, off in zip(groups, self.offsets)]).astype(np.intp)
        self.box_center = np.concatenate([g.box_center for g in groups]).reshape(-1, 3)
        self.box_center1 = np.concatenate([self.box_center, np.ones((self.box_center.shape[0], 1))], axis=1)
        self.box_half = np.concatenate([g.box_half for g in groups]).reshape(-1, 3)
        box_counts = np.array([g.box_joints.shape[0] for g in groups], np.int64)
        self.box_groups = np.flatnonzero(box_counts)
        self.box_starts = (np.concatenate([[0], np.cumsum(box_counts)[:-1]])[self.box_groups]).astype(np.intp)
        self.all_boxes = bool(self.box_rows.shape[0] == self.joints.shape[0]
                              and np.array_equal(self.box_rows, np.arange(self.joints.shape[0])))
        still = [g.still_bounds for g in groups]
        self.still_groups = np.array([i for i, b in enumerate(still) if b is not None], np.intp)
        self.still_min = np.array([still[i].minimum for i in self.still_groups]).reshape(-1, 3)
        self.still_max = np.array([still[i].maximum for i in self.still_groups]).reshape(-1, 3)
        self.seg_rows_global = np.concatenate([g.seg_slots + off for g, off in zip(groups, self.offsets)]).astype(np.intp)
        self.seg_table_rows = np.concatenate([g.seg_rows for g in groups]).astype(np.intp)
        self._skin_t = None
        self._scales = None
        self.texels = None                       # (T,4,4) float32 texel rows of the last update
        # per group: (palette, first row, end row), plain Python values
        self._slots = [(g.palette, int(o), int(o + c)) for g, o, c in zip(groups, self.offsets, self.counts)]
        self._slot_rows = [(a, b) for _p, a, b in self._slots]
        self._slot_pals = [s[0] for s in self._slots]
        self.attached = False                    # the palettes read this batch's results (_view)
        self._batch_upload = None                # the backend's upload_palette_slices, when usable
        self._handles = None
        self._mats = self._lo = self._hi = self._ok = self._bounds = None
        self._mesh_w = self._mesh_inv = self._minv_rows = None     # last mesh worlds, their inverses
        # the worlds that decide the mesh inverses and the relations, compared in one step
        self.watch = np.concatenate([self.mesh_nodes, self.rel_arm, self.rel_mesh]).astype(np.intp)
        self._watched = None                     # their worlds at the last update that used them
        self._ibm_ext = None                     # (epoch, (T,5,4) ibm_t_eff with each box centre row)
        self._rel_key = None                     # last armature and mesh worlds of the relations
        self.ibm_epoch = 0                       # bumped whenever ibm_t_eff changes (folds redo)
        self._fold = None                        # (relation frames, epoch, (F,T,4,4) folded rows)
        self._fold_j = None                      # (relation frames, joint frames, epoch, folded_joints)
        self._fold_c = None                      # (F,T,4) joint-box centres through folded_joints
        self._prev_epoch = -1                    # ibm_epoch at the previous update
        self._epoch_stable = False               # ibm_epoch unchanged since the previous update
        self._runs = None                        # (anchors, runs) of _baked_runs

    def refresh_segments(self) -> None:
        self.seg_table_rows = np.concatenate([g.seg_rows for g in self.groups]).astype(np.intp)

    def _relations(self, world: np.ndarray) -> bool:
        """Fold the armature relation corrections into ``ibm_t_eff`` when they changed (the
        armature and mesh worlds are compared with the last frame's first: usually unchanged)."""
        if not self.rel.size:
            return True
        key = np.concatenate([world[self.rel_arm], world[self.rel_mesh]])
        if self._rel_key is not None and (key == self._rel_key).all():   # same shapes: one comparison
            return True
        rel_now = affine_solve(world[self.rel_arm], world[self.rel_mesh])
        self._rel_key = key
        corr = np.matmul(self.rel_bind_inv, rel_now)
        if self.corr is not None and np.array_equal(corr, self.corr):
            return True
        eff = self.ibm_t_eff
        for k, gi in enumerate(self.rel):           # groups with a relation, on a change only
            o, c = self.offsets[gi], self.counts[gi]
            eff[o:o + c] = np.matmul(self.groups[gi].inverse_binds, corr[k]).transpose(0, 2, 1)   # (ibm @ corr)^T
        self.corr = corr
        self.ibm_epoch += 1
        return True

    def folded(self, frames: np.ndarray) -> np.ndarray:
        """(F,T,4,4) ``(segment relation @ ibm @ corr)^T`` of every palette row for each frame of
        ``frames`` ((F,R,4,4) segment relations, rows of the set's ``segment_keys``); rows without
        a segment slot hold ``(ibm @ corr)^T``.  A lerp of these is the fold of the lerped
        relations (linear).  Made once per relation table and armature relation."""
        f = self._fold
        if f is not None and f[0] is frames and f[1] == self.ibm_epoch:
            return f[2]
        out = self._fold_segments(frames)
        self._fold = (frames, self.ibm_epoch, out)
        return out

    def _fold_segments(self, frames: np.ndarray) -> np.ndarray:
        out = np.broadcast_to(self.ibm_t_eff, (frames.shape[0],) + self.ibm_t_eff.shape).copy()
        rows = self.seg_rows_global
        if rows.size:
            out[:, rows] = np.matmul(self.ibm_t_eff[rows][None], frames[:, self.seg_table_rows].transpose(0, 1, 3, 2))
        return out

    def _fold_stale(self, cached, *tables) -> bool:
        """True when ``cached`` (a fold entry) is of these tables but an older armature relation
        and that relation also changed at the previous update (it moves frame to frame): fold
        the frame's lerped inputs alone then, instead of every baked frame each time."""
        return (cached is not None and all(c is t for c, t in zip(cached, tables))
                and cached[len(tables)] != self.ibm_epoch and not self._epoch_stable)

    def _baked_runs(self, anchors: np.ndarray):
        """Runs of consecutive rows with one (group, anchor): ``[(start, stop, anchor node,
        group)]``, cached per anchors array."""
        c = self._runs
        if c is not None and c[0] is anchors:
            return c[1]
        key = anchors.astype(np.int64) * (len(self.groups) + 1) + self.group_of_joint
        brk = np.flatnonzero(np.diff(key)) + 1
        starts = np.concatenate([[0], brk]).astype(np.int64)
        stops = np.concatenate([brk, [key.shape[0]]]).astype(np.int64)
        runs = [(int(a), int(b), int(anchors[a]), int(self.group_of_joint[a])) for a, b in zip(starts, stops)]
        self._runs = (anchors, runs)
        return runs

    def folded_joints(self, frames, joints_t) -> np.ndarray:
        """(F,T,4,4) ``K^T = (jointRelative @ segment relation @ ibm @ corr)^T`` per baked frame
        and palette row (``joints_t``: (F,T,4,4) transposed joint matrices relative to their
        anchors; ``frames``: segment relations as for ``folded``, or None): the skin matrix of a
        row is then ``inverse(meshWorld) @ anchorWorld @ K``.  Linear in the baked matrices, so a
        lerp of these is the fold of the lerped inputs.  Once per table and armature relation."""
        f = self._fold_j
        if f is not None and f[0] is frames and f[1] is joints_t and f[2] == self.ibm_epoch:
            return f[3]
        # the segment fold is an intermediate here (not kept: a crossfade's path makes its own)
        out, self._fold_c = self._fold_joints(self._fold_segments(frames) if frames is not None else None, joints_t)
        self._fold_j = (frames, joints_t, self.ibm_epoch, out)
        return out

    def _fold_joints(self, eff, joints_t):
        """(K^T (F,T,4,4), joint-box centres through K (F,T,4)) from folded segment rows
        ``eff`` (None: no segment rows) and the joint table."""
        if eff is None:
            eff = np.broadcast_to(self.ibm_t_eff, (joints_t.shape[0],) + self.ibm_t_eff.shape)
        out = np.matmul(eff, joints_t)
        # each row's joint-box centre (1 in w) through K: the box centres per frame, linear in K
        c4 = np.zeros((out.shape[1], 4))
        c4[:, 3] = 1.0
        c4[self.box_rows, :3] = self.box_center
        return out, np.einsum("tk,ftki->fti", c4, out)

    def _extended(self) -> np.ndarray:
        """(T,5,4): ``ibm_t_eff`` with a fifth row per joint, its box centre (1 in w) through
        ``(ibm @ corr)^T`` (zero for joints without a box).  Remade when ``ibm_t_eff`` changed."""
        e = self._ibm_ext
        if e is not None and e[0] == self.ibm_epoch:
            return e[1]
        ext = np.zeros((self.ibm_t_eff.shape[0], 5, 4))
        ext[:, :4] = self.ibm_t_eff
        ext[self.box_rows, 4] = np.einsum("nk,nki->ni", self.box_center1, self.ibm_t_eff[self.box_rows])
        self._ibm_ext = (self.ibm_epoch, ext)
        return ext

    def update(self, world: np.ndarray, segment_table: Optional[np.ndarray],
               frames=None, baked=None) -> Optional[np.ndarray]:
        """Compute every group's palette, bounds and (lazily) scale bound; upload each.  Returns
        the per-group upload results, or None when a singular matrix needs the per-group path.
        ``frames``: ``(relation frames, i, a)`` instead of ``segment_table``: the relations are
        ``lerp(frames[i], frames[i + 1], a)``, taken from the folded rows (``folded``) in one
        product per row.  ``baked``: ``(joints_t, anchors)`` (``folded_joints``; ``i``, ``a``
        from ``frames``, which holds None as its table when there are no segment rows): the skin
        matrices from the baked joint matrices and the anchors' worlds, one product per run of
        rows sharing a mesh and an anchor; the other joints' worlds are not read."""
        watched = world[self.watch]
        if self._watched is not None and (watched == self._watched).all():   # same shapes
            mesh_inv = self._mesh_inv        # the meshes and the armature relations did not move
        else:
            mesh_w = watched[:self.mesh_nodes.shape[0]]
            if self._mesh_w is not None and (mesh_w == self._mesh_w).all():
                mesh_inv = self._mesh_inv
            else:
                mesh_inv = object_inv(mesh_w)      # singular (scaled to 0): engine/finite.py
                self._mesh_w, self._mesh_inv = mesh_w, mesh_inv
                self._minv_rows = (mesh_inv.transpose(0, 2, 1)[self.group_of_joint] if len(self.groups) > 1
                                   else None)         # inverse(meshWorld)^T per joint row (crowds)
            if not self._relations(world):
                return None
            self._watched = watched
        self._epoch_stable = self.ibm_epoch == self._prev_epoch
        self._prev_epoch = self.ibm_epoch
        if baked is None:
            if self.joint_run is not None:
                jt = world[self.joint_run].transpose(0, 2, 1)  # jointWorld^T, a view
            else:
                jt = world[self.joints].transpose(0, 2, 1)    # jointWorld^T, a fresh (T,4,4) gather
        centres = None
        if baked is not None:
            table, i, a = frames
            joints_t, anchors = baked
            if self._fold_stale(self._fold_j, table, joints_t):
                one, ck = self._fold_joints(None if table is None else self._fold_segments(_lerp1(table, i, a)),
                                            _lerp1(joints_t, i, a))
                kt, ck = one[0], ck[0]
            else:
                fold = self.folded_joints(table, joints_t)
                cfold = self._fold_c
                if a <= 0.0 or fold.shape[0] == 1:
                    kt, ck = fold[i], cfold[i]
                else:
                    kt = fold[i] * (1.0 - a)
                    kt += fold[i + 1] * a
                    ck = cfold[i] * (1.0 - a) + cfold[i + 1] * a
            runs = self._baked_runs(anchors)
            if len(runs) <= 32:
                skin_t = np.empty_like(kt)
                centres = np.empty((kt.shape[0], 3))
                for r0, r1, anchor, gi in runs:            # per (mesh, root bone): a few
                    pt = np.dot(world[anchor].T, mesh_inv[gi].T)       # (meshInv @ anchorWorld)^T
                    np.dot(kt[r0:r1].reshape(-1, 4), pt, out=skin_t[r0:r1].reshape(-1, 4))
                    np.dot(ck[r0:r1], pt[:, :3], out=centres[r0:r1])
            else:                                          # many short runs: one product a row
                pt = np.matmul(world[anchors].transpose(0, 2, 1),
                               mesh_inv.transpose(0, 2, 1)[self.group_of_joint])
                skin_t = np.matmul(kt, pt)
                centres = None
            x = None
        elif frames is not None:
            table, i, a = frames
            if self._fold_stale(self._fold, table):
                fold, i, a = self._fold_segments(_lerp1(table, i, a)), 0, 0.0
            else:
                fold = self.folded(table)
            if a <= 0.0 or fold.shape[0] == 1:
                eff = fold[i]
            elif a >= 1.0:
                eff = fold[i + 1]
            else:
                eff = fold[i] * (1.0 - a)
                eff += fold[i + 1] * a
            x = np.matmul(eff, jt)                        # (jointWorld @ rel @ ibm @ corr)^T
        else:
            if segment_table is not None and self.seg_rows_global.size:
                jt = jt.copy()
                rows = self.seg_rows_global
                jt[rows] = np.matmul(segment_table[self.seg_table_rows].transpose(0, 2, 1), jt[rows])
            # (jointWorld @ ibm)^T, and in a fifth row each joint box's centre (1 in w) through
            # it: the centres come out of the same products (the box rows of _extended)
            x = np.matmul(self._extended(), jt)
        if x is None:
            pass
        elif len(self.groups) == 1:
            skin_t = np.dot(x.reshape(-1, 4), mesh_inv[0].T).reshape(x.shape)
        else:
            skin_t = np.matmul(x, self._minv_rows)
        if skin_t.shape[1] == 5:
            centres = skin_t[:, 4, :3]
            skin_t = skin_t[:, :4]
        self._skin_t = skin_t
        self._scales = None
        # bounds: centre c = R @ centre + t, half h = |R| @ half, per non-empty joint box
        lo = hi = None
        if self.box_rows.shape[0]:
            m = skin_t if self.all_boxes else skin_t[self.box_rows]
            if centres is not None:                    # the baked path's (same centres, linear)
                c = centres if self.all_boxes else centres[self.box_rows]
            else:
                c = np.einsum("nk,nki->ni", self.box_center1, m[:, :, :3])   # R @ centre + t
            h = np.einsum("nk,nki->ni", self.box_half, np.abs(m)[:, :3, :3])   # abs of the whole block: faster
            lo = np.minimum.reduceat(c - h, self.box_starts, axis=0)
            hi = np.maximum.reduceat(c + h, self.box_starts, axis=0)
        g_count = len(self.groups)
        if lo is None or lo.shape[0] != g_count:
            glo = np.full((g_count, 3), np.inf)
            ghi = np.full((g_count, 3), -np.inf)
            if lo is not None:
                glo[self.box_groups] = lo
                ghi[self.box_groups] = hi
            lo, hi = glo, ghi
        if self.still_groups.size:
            lo[self.still_groups] = np.minimum(lo[self.still_groups], self.still_min)
            hi[self.still_groups] = np.maximum(hi[self.still_groups], self.still_max)
        lo.flags.writeable = False
        hi.flags.writeable = False
        texels = skin_t.astype(np.float32)             # (T,4,4): row j = the 4 columns of palette row j
        self.texels = texels
        self._mats = texels.transpose(0, 2, 1)
        self._lo, self._hi = lo, hi
        pals = self._slot_pals
        self._bounds = [None] * len(pals)               # slot_bounds, made on first read
        if not self.attached:
            # the palettes read their matrices, bounds and upload flag from this batch from now
            # on (until one of them is written otherwise: _detach); their buffers are checked
            # here once, as a palette's buffer changes only through a write that detaches it
            backend = pals[0]._backend if pals else None
            for k, (pal, _a, _b) in enumerate(self._slots):
                pal._detach()
                pal._view = (self, k)
            self._batch_upload = getattr(backend, "upload_palette_slices", None)
            if any(p._backend is not backend or p.gpu_buffer is None or p.joint_capacity != b - a
                   for p, a, b in self._slots):
                self._batch_upload = None
            self._handles = [p.gpu_buffer for p in pals]
            self.attached = True
        batch = self._batch_upload
        if batch is None:                               # palette by palette
            self._ok = [p._push() for p in pals]
            return self._ok
        # one backend call: every palette's buffer takes its rows of the one texel array
        try:
            ok = batch(self._handles, texels, self._slot_rows)
        except Exception:
            ok = [False] * len(pals)
        self._ok = ok                                   # a list of bools, one per palette
        return self._ok

    # a palette's results while attached (SkinningPalette reads these through its _view)
    def slot_matrices(self, k: int) -> np.ndarray:
        a, b = self._slot_rows[k]
        return self._mats[a:b]

    def slot_bounds(self, k: int) -> Bounds:
        b = self._bounds[k]
        if b is None:
            b = self._bounds[k] = bounds_of(self._lo[k], self._hi[k])
        return b

    def slot_uploaded(self, k: int) -> bool:
        return bool(self._ok[k])

    def linear_scale(self, gi: int) -> float:
        """Spectral norm^2 <= max absolute row sum of the Gram matrix (exact for similarities),
        for every group of the last update at once (cached until the next update)."""
        if self._scales is None:
            lin = self._skin_t[:, :3, :3]                 # lin^T
            gram = np.abs(np.matmul(lin, lin.transpose(0, 2, 1)))
            rows = gram[:, :, 0] + gram[:, :, 1] + gram[:, :, 2]
            per_joint = np.maximum(np.maximum(rows[:, 0], rows[:, 1]), rows[:, 2])
            scales = np.sqrt(np.maximum.reduceat(per_joint, self.offsets))
            if self.still_groups.size:
                scales[self.still_groups] = np.maximum(scales[self.still_groups], 1.0)
            self._scales = scales
        return float(self._scales[gi])


def _lerp1(table: np.ndarray, i: int, a: float) -> np.ndarray:
    """(1, ...) ``table[i]`` lerped toward ``table[i + 1]`` by ``a``."""
    return (table[i] if a <= 0.0 else table[i] * (1.0 - a) + table[i + 1] * a)[None]


def _bind_worlds(scene) -> np.ndarray:
    """(N,4,4) bind world matrices (once per initialisation; any node order, no cycles: the
    scene was validated)."""
    n = scene.node_count
    out = np.empty((n, 4, 4))
    done = np.zeros(n, bool)
    parents = scene.parents
    for i in range(n):
        chain = []
        k = i
        while k >= 0 and not done[k]:
            chain.append(k)
            k = int(parents[k])
        for k in reversed(chain):
            p = int(parents[k])
            out[k] = scene.bind_locals[k] if p < 0 else out[p] @ scene.bind_locals[k]
            done[k] = True
    return out


class SkinningPaletteSet:
    """Every palette group of a scene.

    B-Bones (``SkinAsset.joint_segments``): the segment slots of all groups share one table of
    segment deform relations ``bbone_pose[a] @ inverse(bbone_rest[a])`` (bone space, one row per
    (bone node, segment matrix index)), which the pose source sets before a palette update with
    ``set_bbone_segments``.  The table is a per-frame input: a recompute (a new pose version)
    not preceded by a ``set_bbone_segments`` since the previous one uses the *rest segment relation*
    (identity: every segment slot moves rigidly with its bone, as a non-bendy bone would).  The
    timeline reader (engine/timeline.py) sets it every frame from Blender's evaluated segments;
    a preview bake gives its relations per baked frame (``set_bbone_relation_frame``), or the
    whole palette rows from its baked joints (``set_baked_joints``: per baked frame the rows
    relative to the joints' root bones, inverse binds folded in once; per frame one lerp and one
    product per run of rows sharing a mesh and a root bone).  Rigs without B-Bones have no table
    and pay nothing."""

    def __init__(self):
        self.segment_keys = np.zeros((0, 2), np.int64)   # (R,2) bone node, segment index
        self.segment_table = np.zeros((0, 4, 4))         # (R,4,4) deform relations (identity: rest)
        self.segment_fresh = False
        self._segment_frames = None                      # (relation frames, i, a) of set_bbone_relation_frame
        self._checked_frames = None                      # the last relation frames that passed the checks
        self._baked_joints = None                        # (joints_t, anchors) of set_baked_joints
        self.baked_updates = 0                           # batched updates made from baked joints
        self._checked_joints = None                      # the last joint frames that passed the checks
        self._segment_rows = {}                          # bone node -> (S+1,) rows of the table
        self.palette_lookup: List[List[Optional[SkinningPalette]]] = []
        self.palette_groups: List[SkinningPaletteGroup] = []
        self.palette_count = 0
        self.joint_matrix_count = 0
        self.last_upload_count = 0
        self.last_pose_version = 0
        self.last_error: Optional[str] = None
        self._scene = None
        self._batch: Optional[_PaletteBatch] = None
        self._dq_groups: List[SkinningPaletteGroup] = []
        self._applied_seg = None

    # ---------------------------------------------------------------- lifecycle
    def initialize(self, scene, backend) -> bool:
        """Deep checks (scene.validation_error) and grouping; creates one buffer per group."""
        self.clear()
        err = scene.validation_error()
        if err is not None:
            self.last_error = err
            return False
        n = scene.node_count
        bind_worlds = _bind_worlds(scene)
        lookup: List[List[Optional[SkinningPalette]]] = [[] for _ in range(n)]
        groups: List[SkinningPaletteGroup] = []
        member_groups = []   # parallel: (node, prim, group)
        for node in range(n):
            mi = int(scene.mesh_indices[node])
            if mi < 0:
                continue
            mesh = scene.meshes[mi]
            node_groups: List[SkinningPaletteGroup] = []
            lookup[node] = [None] * len(mesh.primitives)
            for pi, prim in enumerate(mesh.primitives):
                if prim.skin is None:
                    continue
                g = next((g for g in node_groups if skin_definitions_equal(g.skin, prim.skin)), None)
                if g is None:
                    g = SkinningPaletteGroup(node, prim.skin, bind_worlds)
                    node_groups.append(g)
                    groups.append(g)
                else:
                    g.merge(prim.skin)
                g.members.append((node, pi))
                member_groups.append((node, pi, g))
        for g in groups:
            rows = _dquat.palette_rows(g.skin.joint_count) if g.dq else g.skin.joint_count
            if not g.palette.initialize(backend, rows):
                self.last_error = f"palette buffer creation failed for node '{scene.nodes[g.mesh_node_index].name}'"
                for h in groups:
                    h.palette.release()
                return False
        for node, pi, g in member_groups:
            lookup[node][pi] = g.palette
        self._init_segments(groups)
        self.palette_lookup = lookup
        self.palette_groups = groups
        self._dq_groups = [g for g in groups if g.dq]            # Preserve Volume: per group
        linear = [g for g in groups if not g.dq]
        self._batch = _PaletteBatch(linear) if linear else None
        self.palette_count = len(groups)
        self.joint_matrix_count = int(sum(g.skin.joint_count for g in groups))
        self._scene = scene
        return True

    def clear(self) -> None:
        for g in self.palette_groups:
            g.palette.release()
        self.palette_lookup = []
        self.palette_groups = []
        self.palette_count = 0
        self.joint_matrix_count = 0
        self.last_upload_count = 0
        self.last_pose_version = 0
        self._scene = None
        self._batch = None
        self._dq_groups = []
        self._applied_seg = None       # the segment table the palettes were last computed with

    release = clear

    # ---------------------------------------------------------------- B-Bones
    def _init_segments(self, groups) -> None:
        keys = [g.seg_keys for g in groups if g.seg_keys.shape[0]]
        self._segment_rows = {}
        self.segment_fresh = False
        if not keys:
            self.segment_keys = np.zeros((0, 2), np.int64)
            self.segment_table = np.zeros((0, 4, 4))
            return
        uk = np.unique(np.concatenate(keys), axis=0)   # sorted by node, then segment
        self.segment_keys = uk
        self.segment_table = np.tile(np.eye(4), (uk.shape[0], 1, 1))
        code = uk[:, 0] * (1 << 20) + uk[:, 1]
        for g in groups:
            if g.seg_keys.shape[0]:
                g.seg_rows = np.searchsorted(code, g.seg_keys[:, 0] * (1 << 20) + g.seg_keys[:, 1])
        for node in np.unique(uk[:, 0]):
            self._segment_rows[int(node)] = (uk[:, 0] == node, uk[uk[:, 0] == node, 1])

    @property
    def bbone_nodes(self) -> List[int]:
        """Bone nodes whose B-Bone segment slots some palette uses (what a pose source must
        provide to ``set_bbone_segments``)."""
        return sorted(self._segment_rows)

    def bbone_segment_indices(self, node: int) -> np.ndarray:
        """The segment matrix indices (0..segments) of bone ``node`` that palettes use."""
        hit = self._segment_rows.get(int(node))
        return np.zeros(0, np.int64) if hit is None else hit[1]

    def set_bbone_segments(self, pose_segments: dict, rest_segments: dict) -> bool:
        """Entry point for pose sources (timeline reader, a preview bake): the B-Bone segment
        matrices of this frame, ``{bone node: (S+1,4,4)}`` each for pose and rest, in the bone's
        local space exactly as ``PoseBone.bbone_segment_matrix(a, rest=False / True)`` returns
        them (index a = 0..segments).  Applies to the next ``update`` only (see the class
        docstring); bones not given keep the rest relation.  False (and ``last_error``) when a
        matrix is missing, malformed or not finite; the table then stays at the rest relation."""
        table = np.tile(np.eye(4), (self.segment_keys.shape[0], 1, 1))
        for node, (mask, segs) in self._segment_rows.items():
            pose = pose_segments.get(node)
            if pose is None:
                continue
            rest = rest_segments.get(node)
            pose = np.asarray(pose, np.float64)
            rest = np.asarray(rest, np.float64) if rest is not None else None
            if (rest is None or pose.ndim != 3 or pose.shape[1:] != (4, 4) or rest.shape != pose.shape
                    or pose.shape[0] <= int(segs.max())):
                self.last_error = f"B-Bone segment matrices of bone node {node}: expected (S+1,4,4) pose and rest"
                self.segment_fresh = False
                return False
            try:
                rel = np.matmul(pose[segs], np.linalg.inv(rest[segs]))
            except np.linalg.LinAlgError:
                rel = None
            if rel is None or not np.isfinite(rel).all():
                self.last_error = f"B-Bone segment matrices of bone node {node} are singular or not finite"
                self.segment_fresh = False
                return False
            table[mask] = rel
        self.segment_table = table
        self._segment_frames = None
        self.segment_fresh = True
        if self._applied_seg is None or not np.array_equal(self._applied_seg, table):
            self.last_pose_version = -1   # force the next update to recompute (same segments: no upload)
        return True

    def set_bbone_relations(self, table) -> bool:
        """This frame's segment deform relations ``bbone_pose[a] @ inverse(bbone_rest[a])``
        directly, one (4,4) per row of ``segment_keys`` ((R,4,4)): the entry point for pose
        sources that have them ready (a preview bake).  Applies to the next ``update`` only, as
        ``set_bbone_segments``.  False (and ``last_error``) on a wrong shape or non-finite
        values; the table then stays at the rest relation."""
        t = np.asarray(table, np.float64)
        if t.shape != (self.segment_keys.shape[0], 4, 4) or not np.isfinite(t).all():
            self.last_error = (f"B-Bone segment relations: expected finite ({self.segment_keys.shape[0]}, 4, 4), "
                               f"got {t.shape}")
            self.segment_fresh = False
            return False
        self.segment_table = t
        self._segment_frames = None
        self.segment_fresh = True
        self.last_pose_version = -1   # force the next update to recompute
        return True

    def set_bbone_relation_frame(self, frames, i: int, a: float) -> bool:
        """Like ``set_bbone_relations`` with ``lerp(frames[i], frames[i + 1], a)``, ``frames`` being
        (F,R,4,4) relations per baked frame (a preview bake's ``relation_table``): the batched
        update folds the inverse binds into the frames once per table (and armature relation) and
        then makes each palette row in one product.  Checked once per table: False (and
        ``last_error``) on a wrong shape, non-finite values or a frame out of range."""
        if frames is not self._checked_frames:
            f = np.asarray(frames)
            if (f.ndim != 4 or f.shape[1:] != (self.segment_keys.shape[0], 4, 4)
                    or f.dtype != np.float64 or not np.isfinite(f).all()):
                self.last_error = (f"B-Bone segment relation frames: expected finite float64 (F, "
                                   f"{self.segment_keys.shape[0]}, 4, 4), got {f.shape}")
                self.segment_fresh = False
                return False
            self._checked_frames = frames
        i = int(i)
        if not (0 <= i < frames.shape[0]) or (a > 0.0 and i + 1 >= frames.shape[0]):
            self.last_error = f"B-Bone segment relation frames: frame {i} (+{a:g}) out of range"
            self.segment_fresh = False
            return False
        self._segment_frames = (frames, i, float(a))
        self._baked_joints = None
        self.segment_fresh = True
        self.last_pose_version = -1   # force the next update to recompute
        return True

    @property
    def joint_rows(self) -> Optional[np.ndarray]:
        """(T,) the joint node of each row of the batched update (every linear-blend palette's
        rows, in palette order): the rows ``set_baked_joints`` takes; None without a batch."""
        return None if self._batch is None else self._batch.joints

    def set_baked_joints(self, joints_t, anchors, frames, i: int, a: float) -> bool:
        """For the next update only, with the B-Bone relations of ``set_bbone_relation_frame``
        (``frames`` may be None where there are no segment rows): the batched palettes straight
        from baked joint matrices, ``joints_t`` (F,T,4,4) per baked frame and row of
        ``joint_rows`` the *transposed* joint matrix relative to its anchor (``anchors`` (T,): a
        node whose world the pose computes, e.g. the joint's root bone), lerped between frames
        i and i + 1 at ``a``.  The skin matrix of a row is ``inverse(meshWorld) @ anchorWorld @
        lerp(relative @ segment relation @ ibm @ corr)``: exact at the baked frames (the inverse
        binds folded in once per table and armature relation).  Checked once per table: False
        (and ``last_error``) on a wrong shape or non-finite values; nothing is set then."""
        b = self._batch
        if b is None:
            self.last_error = "baked joints: no batched palettes"
            return False
        if joints_t is not self._checked_joints:
            j = np.asarray(joints_t)
            an = np.asarray(anchors)
            if (j.ndim != 4 or j.shape[1:] != (b.joints.shape[0], 4, 4) or j.dtype != np.float64
                    or not np.isfinite(j).all() or an.shape != (b.joints.shape[0],)
                    or (an.size and (an.min() < 0 or an.max() >= len(self.palette_lookup)))
                    or (frames is not None and frames.shape[0] != j.shape[0])):
                self.last_error = (f"baked joints: expected finite float64 (F, {b.joints.shape[0]}, 4, 4) and "
                                   f"({b.joints.shape[0]},) anchors, got {j.shape} and {an.shape}")
                return False
            self._checked_joints = joints_t
        if frames is not None:
            if not self.set_bbone_relation_frame(frames, i, a):
                return False
        else:
            i = int(i)
            if not (0 <= i < joints_t.shape[0]) or (a > 0.0 and i + 1 >= joints_t.shape[0]):
                self.last_error = f"baked joints: frame {i} (+{a:g}) out of range"
                return False
            self._segment_frames = (None, i, float(a))
            self.segment_fresh = True
            self.last_pose_version = -1
        self._baked_joints = (joints_t, anchors)
        return True

    def texel_rows(self):
        """Every palette of the last batched update in one float32 array and where each starts:
        ``(rows (T*16,), {id(palette): first row})``, row j holding the 4 columns of a skin
        matrix (the layout of a palette texture, ``gpu_backend.matrix_rows``).  For a pass that
        draws many palettes from one texture (grouped draws) without concatenating them again.
        None before the first update or after a per-group (fallback) update."""
        b = self._batch
        if b is None or b.texels is None or self._dq_groups or any(g.palette.matrices.base is not b.texels for g in b.groups):
            return None
        return b.texels.reshape(-1), {id(g.palette): int(o) for g, o in zip(b.groups, b.offsets)}

    # ---------------------------------------------------------------- queries
    def find(self, node_index: int, primitive_index: int) -> Optional[SkinningPalette]:
        if not (0 <= node_index < len(self.palette_lookup)):
            return None
        row = self.palette_lookup[node_index]
        if not (0 <= primitive_index < len(row)):
            return None
        return row[primitive_index]

    def group_of(self, palette: SkinningPalette) -> Optional[SkinningPaletteGroup]:
        return next((g for g in self.palette_groups if g.palette is palette), None)

    # ---------------------------------------------------------------- frame
    def update(self, pose) -> bool:
        """Recompute and upload every group when the pose version changed."""
        self.last_upload_count = 0
        if self._scene is None or not pose.is_for_scene(self._scene):
            self.last_error = "pose does not belong to the palette set's scene"
            return False
        if pose.node_count != len(self.palette_lookup):
            self.last_error = "pose node count does not match the palette lookup"
            return False
        version = pose.version
        if version != 0 and version == self.last_pose_version:
            return True
        world = pose.world_matrices
        if world is None:
            self.last_error = "pose world matrices are dirty"
            return False
        ok = True
        frames = self._segment_frames if self.segment_fresh else None
        baked = self._baked_joints if frames is not None else None
        self._segment_frames = self._baked_joints = None
        seg = None
        if frames is None and self.segment_fresh and self.segment_table.shape[0]:
            seg = self.segment_table
        self.segment_fresh = False
        done = self._batch.update(world, seg, frames, baked) if self._batch is not None else None
        if baked is not None and done is not None:
            self.baked_updates += 1
        if frames is not None and frames[0] is None:
            frames = None                       # baked joints without segment rows
        if frames is not None and done is None:
            tab, i, a = frames                  # the per-group path below takes the lerped table
            seg = self.segment_table = tab[i] if a <= 0.0 else tab[i] * (1.0 - a) + tab[i + 1] * a
        if done is not None:
            self.last_upload_count += sum(done)
            ok = all(done)
            if self._dq_groups and frames is not None:   # Preserve Volume groups: the lerped table
                tab, i, a = frames
                seg = tab[i] if a <= 0.0 else tab[i] * (1.0 - a) + tab[i + 1] * a
            for g in self._dq_groups:
                if g.update(world, seg):
                    self.last_upload_count += 1
                else:
                    ok = False
        else:
            # a singular mesh world or armature relation: group by group (those groups fail)
            for g in self.palette_groups:
                if g.update(world, seg):
                    self.last_upload_count += 1
                else:
                    ok = False
        if ok:
            self.last_pose_version = version
            self._applied_seg = seg if frames is None else None
        return ok
