"""A bake bound to one scene asset: the player's clip and the exact matrices it does not carry
(``baked_clip``, ``BakedPose``).  numpy only.  Issue 22 item 2: the
bake is interpolated between its samples in a space that does not shrink (``bake/tables.py``)."""
from __future__ import annotations

import bisect
from typing import List, NamedTuple, Optional

import numpy as np

from ...core.assets import AnimationClipAsset, NodeAnimationChannelAsset
from .reasons import BakeError
from .tables import MatrixTable, chain, continuous, levels


class BakedSample(NamedTuple):
    """What ``BakedPose.sample(t)`` returns (float64, finite when the bake is ``finite``):

    ``time``: the clamped time in seconds; ``locals`` (B',4,4): the parent-relative local matrix
    of every inner (non-root) baked bone, aligned with ``BakedPose.inner_nodes``;
    ``relative_t`` (B',4,4): the same bones' *transposed* matrices relative to their root bones
    (``BakedPose.anchors``; ``ScenePose.set_world_shortcut``);
    ``segments`` (S,4,4): the B-Bone segment matrices (bone space) of every weighted B-Bone,
    ``BakedPose.bbone_nodes`` in order, ``BakedPose.segment_slices`` giving each one's rows."""
    time: float
    locals: np.ndarray
    relative_t: np.ndarray
    segments: np.ndarray


class BakedPose:
    """A bake bound to the nodes of one scene asset: what the player's clip does not carry.

    The clip keeps TRS tracks for the root bones only (the player's clock, In Place and the
    crossfade act on them); every other baked bone's exact parent-relative local matrix (it can
    hold the shear constraints and stretching leave, which TRS cannot) and the weighted B-Bones'
    segment matrices come from ``sample(t)``, interpolated between the bake's samples by
    ``MatrixTable`` (translation lerp, rotation slerp, stretch/shear lerp: exact at the samples,
    no shrinking between them; the adaptive bake put extra samples where that was not close to
    Blender).  ``sample`` is the one per-frame entry point (the session's bake feed and the
    mixer call it); its signature is stable."""

    def __init__(self, times: np.ndarray, nodes: np.ndarray, table: MatrixTable, root: np.ndarray,
                 ppos: np.ndarray, bbone_nodes: List[int], bbone_table: Optional[MatrixTable],
                 bbone_slices: List[slice], bbone_rest: List[np.ndarray]):
        self.times = np.asarray(times, np.float64)
        self._times = self.times.tolist()
        self.nodes = np.asarray(nodes, np.int64)
        self.table = table
        self.root = np.asarray(root, bool)
        ppos = np.asarray(ppos, np.int64)
        inner = np.flatnonzero(~self.root)
        # each inner bone's root bone (its topmost baked ancestor)
        top = np.arange(self.nodes.size)
        for _ in range(self.nodes.size):        # one step per bone level, all bones at once
            up = ppos[top]
            if not (up >= 0).any():
                break
            top = np.where(up >= 0, up, top)
        anchors = self.nodes[top[inner]].astype(np.intp)
        order = np.argsort(anchors, kind="stable")      # each root's bones one run
        self._inner = inner[order]
        self.anchors = anchors[order]
        self.inner_nodes = self.nodes[self._inner].astype(np.intp)
        self._roots = np.flatnonzero(self.root)
        self.root_nodes = self.nodes[self._roots].astype(np.intp)
        where = np.full(self.nodes.size, -1, np.int64)
        where[self._inner] = np.arange(self._inner.size)
        par_inner = np.where(ppos[self._inner] >= 0, where[np.maximum(ppos[self._inner], 0)], -1)
        self._plan = levels(par_inner)
        self.bbone_nodes = list(bbone_nodes)
        self.segment_slices = list(bbone_slices)
        self.bbone_table = bbone_table
        self.rest = {n: r for n, r in zip(self.bbone_nodes, bbone_rest)}
        self._rest_inv = (np.linalg.inv(np.concatenate(bbone_rest)) if bbone_rest else np.zeros((0, 4, 4)))
        self.finite = bool(np.isfinite(table.static).all() and np.isfinite(table.t).all()
                           and np.isfinite(table.q).all() and np.isfinite(table.p).all())
        self._last = None
        self._keys = None
        self._rows = None

    @property
    def nbytes(self) -> int:
        """Bytes held by the baked matrices (the tables)."""
        return self.table.nbytes + (self.bbone_table.nbytes if self.bbone_table is not None else 0)

    def _where(self, time_seconds: float):
        """(interval index, blend) of ``time_seconds`` (clamped to the baked range)."""
        t = self._times
        n = len(t)
        if n == 1:
            return 0, 0.0
        x = min(max(float(time_seconds), t[0]), t[-1])
        i = min(max(bisect.bisect_right(t, x) - 1, 0), n - 2)
        a = (x - t[i]) / max(t[i + 1] - t[i], 1e-12)
        if a >= 1.0:
            return i + 1, 0.0
        return i, max(a, 0.0)

    def sample(self, time_seconds: float) -> BakedSample:
        """The clip's exact matrices at ``time_seconds`` (any time; clamped to the bake's range):
        a ``BakedSample`` (see there).  Vectorised over bones (one product per bone level for
        ``relative_t``); the last sample is reused for the same time."""
        hit = self._last
        if hit is not None and hit.time == float(time_seconds):
            return hit
        i, a = self._where(time_seconds)
        loc = self.table.at(i, a)[self._inner]
        rel = chain(loc, self._plan)
        segs = (self.bbone_table.at(i, a) if self.bbone_table is not None else np.zeros((0, 4, 4)))
        s = BakedSample(float(time_seconds), loc, np.ascontiguousarray(rel.transpose(0, 2, 1)), segs)
        self._last = s
        return s

    def root_locals(self, time_seconds: float) -> np.ndarray:
        """(R,4,4) the root bones' baked matrices (armature space) at ``time_seconds``, aligned with
        ``root_nodes`` (a clip plays them through its TRS tracks; Scene playback writes them)."""
        i, a = self._where(time_seconds)
        return self.table.at(i, a)[self._roots]

    def local_matrices(self, time_seconds: float, inner_only: bool = True) -> np.ndarray:
        """(B',4,4) local matrices of the inner bones at ``time_seconds`` (``sample(t).locals``)."""
        return self.sample(time_seconds).locals

    def relations(self, sample: BakedSample, segment_keys: np.ndarray) -> np.ndarray:
        """(R,4,4) segment deform relations ``pose[a] @ inverse(rest[a])`` of ``sample``, one per row
        of the palettes' ``segment_keys`` ((R,2) bone node, segment index); rows of bones not
        baked stay identity."""
        if self._keys is not segment_keys:
            keys = np.asarray(segment_keys, np.int64).reshape(-1, 2)
            start = {n: sl.start for n, sl in zip(self.bbone_nodes, self.segment_slices)}
            width = {n: sl.stop - sl.start for n, sl in zip(self.bbone_nodes, self.segment_slices)}
            ok = np.array([int(n) in start and 0 <= int(a) < width[int(n)] for n, a in keys], bool)
            cols = np.array([start[int(n)] + int(a) for n, a in keys[ok]], np.int64)
            self._keys, self._rows = segment_keys, (keys.shape[0], ok, cols)
        rows = self._rows
        assert rows is not None           # made above on the first call
        n, ok, cols = rows
        out = np.tile(np.eye(4), (n, 1, 1))
        if cols.size:
            out[ok] = sample.segments[cols] @ self._rest_inv[cols]
        return out

    def joint_map(self, joint_rows: Optional[np.ndarray]):
        """``(rows into the inner bones (T,), hit (T,), anchors (T,))`` for ``joints``: per palette
        row (``joint_rows``: each row's joint node) where its baked matrix is; None when a row's
        joint is not a baked bone (or there are no rows).  Once per palette set."""
        if joint_rows is None or not len(joint_rows):
            return None
        rows = np.asarray(joint_rows, np.int64)
        where = {int(n): k for k, n in enumerate(self.inner_nodes.tolist())}
        roots = set(self.nodes[self.root].tolist())
        if any(int(n) not in where and int(n) not in roots for n in rows.tolist()):
            return None
        inner = np.array([where.get(int(n), -1) for n in rows.tolist()], np.int64)
        hit = inner >= 0
        anchors = (np.where(hit, self.anchors[np.maximum(inner, 0)], rows) if self.anchors.size
                   else rows).astype(np.intp)       # (a rig of root bones only: no inner bone)
        return inner, hit, anchors

    @staticmethod
    def joints(sample: BakedSample, jmap) -> np.ndarray:
        """(1,T,4,4) transposed joint matrices relative to their anchors (``joint_map``) of
        ``sample``: a one-frame table for ``SkinningPaletteSet.set_baked_joints``."""
        inner, hit, _anchors = jmap
        out = np.tile(np.eye(4), (1, inner.size, 1, 1))
        out[0, hit] = sample.relative_t[inner[hit]]
        return out


def baked_clip(bake, scene_asset, template=None):
    """(AnimationClipAsset, BakedPose) for ``scene_asset``.  The clip has LINEAR local TRS
    tracks for the armature's root bones (and the armature object when ``bake.object_channel``)
    that reproduce the baked world matrices with the bones' inheritance flags
    (``ScenePose.basis_from_worlds``), quaternions on one hemisphere per track; every other
    bone's exact local matrix at any time is in the BakedPose.  The clip keeps ``template``'s
    name, target and morph channels.  Raises BakeError when the armature is not in the asset."""
    from ...core.animation.pose import ScenePose

    arm_node = scene_asset.node_index(bake.armature)
    if arm_node < 0:
        raise BakeError(f"armature '{bake.armature}' is not in the imported scene")
    idx = np.array([scene_asset.node_index(bake.armature, n) for n in bake.bone_names], np.int64)
    has = idx >= 0
    bones = idx[has]
    pos = {int(n): j for j, n in enumerate(bones.tolist())}
    ppos = np.array([pos.get(int(scene_asset.parents[n]), -1) for n in bones.tolist()], np.int64)
    root = ppos < 0
    sp = ScenePose()
    if not sp.initialize(scene_asset) or not sp.update_world_matrices():
        raise BakeError(f"baking '{bake.clip_name}': the scene pose could not be built: {sp.last_error}")
    base = np.array(sp.world_matrices, np.float64)
    parent = int(scene_asset.parents[arm_node])
    nf = bake.frame_count
    chan_nodes = np.concatenate([[arm_node], bones[root]]) if bake.object_channel else bones[root]
    T = np.empty((nf, chan_nodes.size, 3))
    Q = np.empty((nf, chan_nodes.size, 4))
    S = np.empty((nf, chan_nodes.size, 3))
    pose_all = bake.pose                       # (F,B,4,4) float64, transient (bake time)
    worlds = np.einsum("fij,fbjk->fbik", bake.world, pose_all[:, has])
    for k in range(nf):     # per baked sample (bake time, not per played frame)
        w = base.copy()
        w[arm_node] = bake.world[k]
        if bake.parent_world is not None and parent >= 0:
            w[parent] = bake.parent_world[k]
        w[bones] = worlds[k]
        try:
            t, q, s = sp.basis_from_worlds(w)
        except ValueError as ex:
            raise BakeError(f"baking '{bake.clip_name}' on '{bake.armature}' at frame {bake.frames[k]:g}: {ex}") from ex
        T[k], Q[k], S[k] = t[chan_nodes], q[chan_nodes], s[chan_nodes]
    Q = continuous(Q)
    times = (bake.frames - bake.frame_start) / bake.fps
    channels = [NodeAnimationChannelAsset(node_index=int(n), translation_times=times, translation_values=T[:, j],
                                          rotation_times=times, rotation_values=Q[:, j],
                                          scale_times=times, scale_values=S[:, j])
                for j, n in enumerate(chan_nodes.tolist())]
    clip = AnimationClipAsset(
        name=template.name if template is not None else bake.clip_name,
        duration_seconds=bake.duration_seconds, channels=tuple(channels),
        morph_channels=template.morph_channels if template is not None else (),
        frame_start=bake.frame_start, fps=bake.fps,
        target_object=template.target_object if template is not None else bake.armature,
        action_name=bake.action_name)
    # parent-relative locals (armature space for root bones): the bake's own table when the
    # asset's bone hierarchy is Blender's (no copy), else re-derived from the armature-space pose
    bpar = np.asarray(bake.parents, np.int64)
    sel = np.flatnonzero(has)
    remap = np.full(has.size, -1, np.int64)
    remap[sel] = np.arange(sel.size)
    same = bool(has.all()) and np.array_equal(np.where(bpar >= 0, remap[np.maximum(bpar, 0)], -1), ppos)
    if same:
        table = bake.locals
    else:
        pose_arm = pose_all[:, has]
        locals_ = pose_arm.copy()
        child = ~root
        if child.any():
            try:
                inv = np.linalg.inv(pose_arm[:, ppos[child]])
            except np.linalg.LinAlgError:
                inv = np.linalg.pinv(pose_arm[:, ppos[child]])
            locals_[:, child] = inv @ pose_arm[:, child]
        table = MatrixTable(locals_, times=bake.frames, modes=bake.locals.modes, knots=bake.locals.knots)
    del pose_all, worlds
    bnodes, brest, slices = [], [], []
    keep = []
    for name, sl in bake.bbone_slices.items():
        node = scene_asset.node_index(bake.armature, name)
        if node >= 0:
            bnodes.append(node)
            brest.append(bake.bbone_rest[name])
            keep.append((sl, node))
    btable = None
    if keep:
        if len(keep) == len(bake.bbone_slices):
            btable = bake.bbone_table
            slices = [sl for sl, _n in keep]
        else:
            mats = bake.bbone_table.all_frames()
            o = 0
            parts = []
            for sl, _n in keep:
                parts.append(mats[:, sl])
                slices.append(slice(o, o + sl.stop - sl.start))
                o += sl.stop - sl.start
            btable = MatrixTable(np.concatenate(parts, axis=1), times=bake.frames, modes=bake.bbone_table.modes,
                                 knots=bake.bbone_table.knots)
    return clip, BakedPose(times, bones, table, root, ppos, bnodes, btable, slices, brest)
