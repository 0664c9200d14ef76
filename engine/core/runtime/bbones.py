"""B-Bone segments and baked joints: the per-frame inputs a pose source gives the palettes besides
the pose (the palette side's API for them; ``SkinningPaletteSet`` inherits it).  No bpy/gpu.

B-Bones (``SkinAsset.joint_segments``): the segment slots of all palette groups share one table of
segment deform relations ``bbone_pose[a] @ inverse(bbone_rest[a])`` (bone space, one row per (bone
node, segment matrix index)), which the pose source sets before a palette update.  The table is a
per-frame input: a recompute (a new pose version) not preceded by one of the setters since the
previous one uses the *rest segment relation* (identity: every segment slot moves rigidly with its
bone, as a non-bendy bone would).  The timeline reader (engine/blender/sources/timeline.py) gives Blender's
evaluated segments every frame (``set_bbone_segments``); a preview bake its relations at the
player's time (``set_bbone_relations``), or the whole palette rows from its baked joints
(``set_baked_joints``: the rows relative to the joints' root bones, one product per run of rows
sharing a mesh and a root bone).  Rigs without B-Bones have no table and pay nothing.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional

import numpy as np

if TYPE_CHECKING:
    from .palette_batch import PaletteBatch


class BBoneInputs:
    """The B-Bone segment table and the baked joints of a palette set (see the module
    docstring).  The set calls ``_init_segments`` when it groups its palettes, reads
    ``segment_fresh`` / ``segment_table`` / ``_baked_joints`` in its update, and provides
    ``_batch`` (the batched update, whose ``joints`` are the rows baked joints are given for),
    ``palette_lookup`` and ``last_pose_version``."""

    # the set's fields read here (set in SkinningPaletteSet.__init__; declarations only)
    _batch: Optional[PaletteBatch]
    palette_lookup: List[List[Optional[Any]]]     # SkinningPalette (palette.py imports this module)

    def _init_bbone_inputs(self) -> None:
        self.segment_keys = np.zeros((0, 2), np.int64)   # (R,2) bone node, segment index
        self.segment_table = np.zeros((0, 4, 4))         # (R,4,4) deform relations (identity: rest)
        self.segment_fresh = False
        self._baked_joints = None                        # (joints_t, anchors) of set_baked_joints
        self.baked_updates: int = 0                      # batched updates made from baked joints
        self._segment_rows = {}                          # bone node -> (S+1,) rows of the table
        self._applied_seg = None       # the segment table the palettes were last computed with

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
        them (index a = 0..segments).  Applies to the next ``update`` only (see the module
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
        self._baked_joints = None
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
        self._baked_joints = None
        self.segment_fresh = True
        self.last_pose_version = -1   # force the next update to recompute
        return True

    @property
    def joint_rows(self) -> Optional[np.ndarray]:
        """(T,) the joint node of each row of the batched update (every linear-blend palette's
        rows, in palette order): the rows ``set_baked_joints`` takes; None without a batch."""
        return None if self._batch is None else self._batch.joints

    def set_baked_joints(self, joints_t, anchors, relations=None) -> bool:
        """For the next update only: the batched palettes straight from baked joint matrices,
        ``joints_t`` (T,4,4) per row of ``joint_rows`` the *transposed* joint matrix relative to
        its anchor (``anchors`` (T,): a node whose world the pose computes, e.g. the joint's root
        bone), with the B-Bone segment relations ``relations`` ((R,4,4) as ``set_bbone_relations``;
        None where there are no segment rows).  The skin matrix of a row is ``inverse(meshWorld)
        @ anchorWorld @ relative @ segment relation @ ibm @ corr``.  False (and ``last_error``) on
        a wrong shape or non-finite values; nothing is set then."""
        b = self._batch
        if b is None:
            self.last_error = "baked joints: no batched palettes"
            return False
        j = np.asarray(joints_t)
        an = np.asarray(anchors)
        if (j.shape != (b.joints.shape[0], 4, 4) or j.dtype != np.float64 or not np.isfinite(j).all()
                or an.shape != (b.joints.shape[0],)
                or (an.size and (an.min() < 0 or an.max() >= len(self.palette_lookup)))):
            self.last_error = (f"baked joints: expected finite float64 ({b.joints.shape[0]}, 4, 4) and "
                               f"({b.joints.shape[0]},) anchors, got {j.shape} and {an.shape}")
            return False
        if relations is not None:
            if not self.set_bbone_relations(relations):
                return False
        else:
            if self.segment_keys.shape[0]:
                self.segment_table = np.tile(np.eye(4), (self.segment_keys.shape[0], 1, 1))   # rest relation
            self.segment_fresh = True
            self.last_pose_version = -1
        self._baked_joints = (j, an)
        return True
