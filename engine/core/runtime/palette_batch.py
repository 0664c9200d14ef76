"""The batched palette update (SkinningPaletteSet's per-frame path): every linear-blend palette
group of a scene in one vectorised step.  No bpy/gpu."""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from ..assets.types import Bounds, bounds_of
from ..finite import affine_solve, object_inv


class PaletteBatch:
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

    def __init__(self, groups, zero_singular: bool = False):
        self.groups = groups
        self.zero_singular = zero_singular     # Blender 4.x's singular inverse (finite.object_inv)
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
        self._skin_t = np.zeros((0, 4, 4))     # (T,4,4) float64 skin^T of the last update
        self._scales = None
        self.texels = None                       # (T,4,4) float32 texel rows of the last update
        # per group: (palette, first row, end row), plain Python values
        self._slots = [(g.palette, int(o), int(o + c)) for g, o, c in zip(groups, self.offsets, self.counts)]
        self._slot_rows = [(a, b) for _p, a, b in self._slots]
        self._slot_pals = [s[0] for s in self._slots]
        self.attached = False                    # the palettes read this batch's results (_view)
        self._batch_upload = None                # the backend's upload_palette_slices, when usable
        self._handles = None
        # the last update's results, read through the palettes' views (none until the first)
        self._mats = np.zeros((0, 4, 4), np.float32)
        self._lo = self._hi = np.zeros((0, 3))
        self._ok: list = []
        self._bounds: list = []
        self._mesh_cache: Optional[Tuple[np.ndarray, np.ndarray]] = None   # last mesh worlds, their inverses
        self._minv_rows = None
        # the worlds that decide the mesh inverses and the relations, compared in one step
        self.watch = np.concatenate([self.mesh_nodes, self.rel_arm, self.rel_mesh]).astype(np.intp)
        self._watched = None                     # their worlds at the last update that used them
        self._ibm_ext = None                     # (epoch, (T,5,4) ibm_t_eff with each box centre row)
        self._rel_key = None                     # last armature and mesh worlds of the relations
        self.ibm_epoch = 0                       # bumped whenever ibm_t_eff changes (_extended redoes)
        self._runs = None                        # (anchors, runs) of _baked_runs
        # each row's joint-box centre (1 in w; zero for rows without a box): the baked path's
        # centres come out of K^T with it (_fold_joints)
        self._c4 = np.zeros((self.joints.shape[0], 4))
        self._c4[:, 3] = 1.0
        self._c4[self.box_rows, :3] = self.box_center

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

    def _fold_segments(self, relations: np.ndarray) -> np.ndarray:
        """(T,4,4) ``(segment relation @ ibm @ corr)^T`` of every palette row for the B-Bone
        segment relations ``relations`` ((R,4,4), rows of the set's ``segment_keys``); rows
        without a segment slot hold ``(ibm @ corr)^T``."""
        out = self.ibm_t_eff.copy()
        rows = self.seg_rows_global
        if rows.size:
            out[rows] = np.matmul(self.ibm_t_eff[rows], relations[self.seg_table_rows].transpose(0, 2, 1))
        return out

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

    def _fold_joints(self, eff, joints_t):
        """(K^T (T,4,4), joint-box centres through K (T,4)) from folded segment rows ``eff``
        (``_fold_segments``; None: no segment rows) and the (T,4,4) transposed joint matrices
        relative to their anchors: ``K^T = (jointRelative @ segment relation @ ibm @ corr)^T``."""
        out = np.matmul(self.ibm_t_eff if eff is None else eff, joints_t)
        return out, np.einsum("tk,tki->ti", self._c4, out)

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
               baked=None) -> Optional[list]:
        """Compute every group's palette, bounds and (lazily) scale bound; upload each.  Returns
        the per-group upload results, or None when a singular matrix needs the per-group path.
        ``segment_table``: the B-Bone segment relations ((R,4,4); None: the rest relation).
        ``baked``: ``(joints_t, anchors)`` ((T,4,4) transposed joint matrices relative to their
        anchors, ``SkinningPaletteSet.set_baked_joints``): the skin matrices from them and the
        anchors' worlds (the segment relations folded in), one product per run of rows sharing a
        mesh and an anchor; the other joints' worlds are not read."""
        watched = world[self.watch]
        cache = self._mesh_cache                 # set whenever _watched is
        if cache is not None and self._watched is not None and (watched == self._watched).all():   # same shapes
            mesh_inv = cache[1]                  # the meshes and the armature relations did not move
        else:
            mesh_w = watched[:self.mesh_nodes.shape[0]]
            if cache is not None and (mesh_w == cache[0]).all():
                mesh_inv = cache[1]
            else:
                mesh_inv = object_inv(mesh_w, self.zero_singular)   # singular (scaled to 0): engine/core/finite.py
                self._mesh_cache = (mesh_w, mesh_inv)
                # inverse(meshWorld)^T per joint row (crowds), C-contiguous: numpy's batched
                # matmul walks a strided operand (the transposed gather) about 3x slower
                self._minv_rows = (np.ascontiguousarray(mesh_inv.transpose(0, 2, 1)[self.group_of_joint])
                                   if len(self.groups) > 1 else None)
            if not self._relations(world):
                return None
            self._watched = watched
        assert mesh_inv is not None   # the first update computes it (_watched and _mesh_w are set with it)
        if baked is None:
            # jointWorld^T, C-contiguous (T,4,4): one copy (a run of joints) or gather costs less
            # than the strided products below would
            jt = np.ascontiguousarray(world[self.joint_run if self.joint_run is not None else self.joints]
                                      .transpose(0, 2, 1))
        centres = None
        if baked is not None:
            joints_t, anchors = baked
            eff = self._fold_segments(segment_table) if segment_table is not None and self.seg_rows_global.size else None
            kt, ck = self._fold_joints(eff, joints_t)
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
            assert self._minv_rows is not None   # made with the mesh inverses when there are several groups
            skin_t = np.matmul(x, self._minv_rows)
        if skin_t.shape[1] == 5:
            centres = skin_t[:, 4, :3]
            skin_t = skin_t[:, :4]
        self._skin_t = skin_t
        self._scales = None
        # bounds: centre c = R @ centre + t, half h = |R| @ half, per non-empty joint box
        boxes = None                                   # (lo, hi) per group with boxes
        if self.box_rows.shape[0]:
            m = skin_t if self.all_boxes else skin_t[self.box_rows]
            if centres is not None:                    # the baked path's (same centres, linear)
                c = centres if self.all_boxes else centres[self.box_rows]
            else:
                c = np.einsum("nk,nki->ni", self.box_center1, m[:, :, :3])   # R @ centre + t
            h = np.einsum("nk,nki->ni", self.box_half, np.abs(m)[:, :3, :3])   # abs of the whole block: faster
            boxes = (np.minimum.reduceat(c - h, self.box_starts, axis=0),
                     np.maximum.reduceat(c + h, self.box_starts, axis=0))
        g_count = len(self.groups)
        if boxes is not None and boxes[0].shape[0] == g_count:
            lo, hi = boxes
        else:
            lo = np.full((g_count, 3), np.inf)
            hi = np.full((g_count, 3), -np.inf)
            if boxes is not None:
                lo[self.box_groups] = boxes[0]
                hi[self.box_groups] = boxes[1]
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
        self._bounds = [None] * len(pals)                     # slot_bounds, made on first read
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
        b = self._bounds[k]                  # (read only while attached: set by update)
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
