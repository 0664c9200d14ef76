"""Vertex-group weights -> per-vertex joint influences (seed rules), vectorised numpy.

Only ``read_vertex_groups`` touches bpy (the per-vertex walk over ``vertex.groups`` has no bulk
accessor in Blender 5.0; it is the slowest read of an import and of a content fingerprint).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.assets import AssetError

# Blender's armature deform leaves a vertex in place when its deform weights sum to <= this.
ZERO_CONTRIB = 1e-4


def read_vertex_groups(mesh):
    """All (vertex, group, weight) triples of ``mesh`` as numpy arrays (int64, int64, float64).
    One ``foreach_get`` per vertex and field into slices of preallocated arrays (about 1.5x
    faster than reading each element's attributes; the float32 weights convert exactly)."""
    verts = mesh.vertices
    n = len(verts)
    groups = [v.groups for v in verts]
    counts = np.fromiter(map(len, groups), np.int64, n)
    ends = np.cumsum(counts)
    total = int(ends[-1]) if n else 0
    g = np.empty(total, np.int32)
    w = np.empty(total, np.float32)
    start = 0
    for gg, end in zip(groups, ends.tolist()):
        if end > start:
            gg.foreach_get("group", g[start:end])
            gg.foreach_get("weight", w[start:end])
            start = end
    return np.repeat(np.arange(n, dtype=np.int64), counts), g.astype(np.int64), w.astype(np.float64)


def group_weights(vi, gi, wi, group_index: int, vertex_count: int) -> np.ndarray:
    """Dense (V,) weights of one vertex group (0 where a vertex is not in it)."""
    out = np.zeros(vertex_count, np.float64)
    sel = gi == group_index
    out[vi[sel]] = wi[sel]
    return out


@dataclass
class Influences:
    joints: np.ndarray        # (V,K) int64 indices into the caller's joint space (0 where unused)
    weights: np.ndarray       # (V,K) float32 normalised; all-zero rows for unweighted vertices
    max_influences: int       # largest count of nonzero influences of any vertex (after merge)
    k: int                    # 4, 8, or the largest count (> 8: every influence is kept)


def select_influences(vertex, joint, weight, vertex_count: int, zero_contrib: float = ZERO_CONTRIB,
                      order=None) -> Influences:
    """Seed weight rules: merge duplicate (vertex, joint) pairs, keep the largest 4 (or 8 when any
    vertex has more than 4 nonzero influences), normalise. Vertices whose total weight is
    <= ``zero_contrib`` keep all-zero weights (they stay in place, as in Blender).  When a vertex
    has more than 8, every influence is kept (K = the largest count), normalised by the sum of
    all of them: exactly Blender's Armature modifier (the GPU reads them as per-vertex spans).
    ``order`` (one key per triple, e.g. ``source_order``): the slots of a vertex follow it
    instead of descending weight (Preserve Volume: Blender sums the dual quaternions in the
    vertex's own group order, and that sum depends on the order; K >= the largest count, so no
    influence is ever dropped either way)."""
    vertex = np.asarray(vertex, np.int64).ravel()
    joint = np.asarray(joint, np.int64).ravel()
    weight = np.asarray(weight, np.float64).ravel()
    keep = weight > 0.0
    vertex, joint, weight = vertex[keep], joint[keep], weight[keep]
    if order is None:
        rows = _rows_per_vertex(vertex, joint, weight, vertex_count, zero_contrib)
        if rows is not None:
            return rows
    if order is not None:
        order = np.asarray(order, np.int64).ravel()[keep]
    if vertex.size:
        # merge duplicates
        jmax = int(joint.max()) + 1
        key = vertex * jmax + joint
        uk, inv = np.unique(key, return_inverse=True)
        weight = np.bincount(inv.ravel(), weights=weight, minlength=uk.size)
        vertex, joint = uk // jmax, uk % jmax
        if order is not None:
            first = np.full(uk.size, np.iinfo(np.int64).max)
            np.minimum.at(first, inv.ravel(), order)
            order = first
    counts = np.bincount(vertex, minlength=vertex_count) if vertex.size else np.zeros(vertex_count, np.int64)
    max_inf = int(counts.max()) if counts.size else 0
    k = 4 if max_inf <= 4 else (8 if max_inf <= 8 else max_inf)
    joints = np.zeros((vertex_count, k), np.int64)
    weights = np.zeros((vertex_count, k), np.float64)
    if vertex.size:
        total = np.bincount(vertex, weights=weight, minlength=vertex_count)
        # sort by vertex, then weight descending, then joint (stable tie-break)
        srt = np.lexsort((joint, -weight, vertex)) if order is None else np.lexsort((joint, order, vertex))
        v, j, w = vertex[srt], joint[srt], weight[srt]
        start = np.concatenate([[0], np.cumsum(counts)[:-1]])
        rank = np.arange(v.size) - start[v]
        sel = rank < k
        joints[v[sel], rank[sel]] = j[sel]
        weights[v[sel], rank[sel]] = w[sel]
        _normalise(joints, weights, total, zero_contrib)
    return Influences(joints, weights.astype(np.float32), max_inf, k)


def _normalise(joints, weights, total, zero_contrib: float) -> None:
    """Each row's kept weights over their sum, in place; a vertex whose total weight is <=
    ``zero_contrib`` (or whose kept weights sum to 0) gets all-zero weights and joints."""
    s = weights.sum(axis=1)
    live = (total > zero_contrib) & (s > 0.0)
    weights[live] /= s[live, None]
    weights[~live] = 0.0
    joints[~live] = 0


def _rows_per_vertex(vertex, joint, weight, vertex_count: int, zero_contrib: float):
    """``select_influences`` (no ``order``) of triples grouped by vertex (ascending, as
    ``read_vertex_groups`` gives them) with no repeated (vertex, joint) pair and at most 8 per
    vertex: each vertex's influences sorted within its own row (by joint, then stably by
    descending weight) instead of the sorts over every triple; the same arrays.  None where
    the triples are not of that form (the general path then)."""
    n = vertex.shape[0]
    if n == 0 or (n > 1 and bool(np.any(vertex[1:] < vertex[:-1]))):
        return None
    counts = np.bincount(vertex, minlength=vertex_count)
    c = int(counts.max())
    if c > 8:
        return None
    big = np.iinfo(np.int64).max
    if n == vertex_count * c:                           # every vertex has c influences: rows as read
        jr, wr = joint.reshape(vertex_count, c).copy(), weight.reshape(vertex_count, c).copy()
    else:
        start = np.cumsum(counts) - counts
        at = vertex * c + (np.arange(n) - start[vertex])
        jr = np.full(vertex_count * c, big, np.int64)   # a vertex's joints in one row, unused slots last
        wr = np.zeros(vertex_count * c, np.float64)
        jr[at] = joint
        wr[at] = weight
        jr, wr = jr.reshape(vertex_count, c), wr.reshape(vertex_count, c)
    by_joint = np.argsort(jr, axis=1, kind="stable")
    jr = np.take_along_axis(jr, by_joint, axis=1)
    if c > 1 and bool(np.any((jr[:, 1:] == jr[:, :-1]) & (jr[:, 1:] != big))):
        return None                                     # a repeated pair: merged by the general path
    wr = np.take_along_axis(wr, by_joint, axis=1)
    # the total in (vertex, joint) order, from 0 (np.bincount's sum over the merged pairs)
    total = np.zeros(vertex_count)
    for i in range(c):
        total += wr[:, i]
    srt = np.argsort(-wr, axis=1, kind="stable")        # descending weight, then joint
    jr = np.take_along_axis(jr, srt, axis=1)
    wr = np.take_along_axis(wr, srt, axis=1)
    k = 4 if c <= 4 else 8
    joints = np.zeros((vertex_count, k), np.int64)
    weights = np.zeros((vertex_count, k), np.float64)
    joints[:, :c] = np.where(jr == big, 0, jr)
    weights[:, :c] = wr
    _normalise(joints, weights, total, zero_contrib)
    return Influences(joints, weights.astype(np.float32), c, k)


def joint_bounds(positions: np.ndarray, joints: np.ndarray, weights: np.ndarray, joint_count: int):
    """Per joint (J,3) min/max of the positions of vertices it influences with nonzero weight."""
    lo = np.full((joint_count, 3), np.inf)
    hi = np.full((joint_count, 3), -np.inf)
    nz = weights > 0.0
    if nz.any():
        vv, kk = np.nonzero(nz)
        jj = joints[vv, kk]
        # grouped by joint and reduced per group (the same values as np.minimum.at /
        # np.maximum.at: a min or max does not depend on the order; those are several times slower)
        order = np.argsort(jj, kind="stable")
        js = jj[order]
        p = np.asarray(positions, np.float64)[vv[order]]
        starts = np.flatnonzero(np.concatenate([[True], js[1:] != js[:-1]]))
        u = js[starts]
        lo[u] = np.minimum.reduceat(p, starts, axis=0)
        hi[u] = np.maximum.reduceat(p, starts, axis=0)
    return lo, hi


def split_bbone_weights(obj, arm, base_co, vertex, joint, weight):
    """B-Bones (bendy bones, ``bbone_segments > 1``) -> two palette influences per weight.

    Blender's Armature modifier (armature_deform.cc, ``b_bone_deform``) deforms a vertex weighted
    w to a B-Bone with the two adjacent segment deform matrices ``index`` and ``index + 1``
    (weights w*(1-blend) and w*blend), where (index, blend) come from the vertex position along
    the bone's *rest* shape (``BKE_pchan_bbone_deform_segment_index``: straight or curved
    mapping, from the bone's rest arm matrix and rest segment matrices).  Linear blend skinning
    is linear in the matrices, so this is exactly two ordinary influences.

    (index, blend) are taken from Blender itself, ``PoseBone.bbone_segment_index(point)`` with
    the point in armature space (inverse(armature world) @ mesh world @ co, the space the
    modifier works in), once per (vertex, B-Bone) pair at import: that is Blender's own
    function, so the straight and the curved mapping (``bbone_mapping_mode``), the segment
    count and the rest ease/handles all come out exactly as the modifier computes them.  It is
    a Python call per weighted (vertex, B-Bone) pair (no bulk accessor exists) and runs only at
    import; the per-frame path never sees it.

    Shape keys: Blender computes the index from the *shape-keyed* position of the frame (the
    modifier runs after the keys).  Here it comes from the base (rest) positions, once; a key
    that moves a vertex along a B-Bone across a segment boundary therefore blends other
    segments than Blender would (exact again when the keys are at 0, and whenever the keyed
    position stays within the same segment pair and blend changes are small -- the error is
    the difference of the two neighbouring segment matrices times the change in blend).

    ``vertex, joint, weight``: the (vertex, bone index, weight) triples of the deform groups.
    Returns (vertex, joint, weight, seg_keys): the triples with every B-Bone triple replaced by
    two whose joint ids are ``len(bones) + row`` of ``seg_keys`` ((R,2) int64: bone index,
    segment matrix index 0..segments).  Bones without B-Bones are untouched (seg_keys empty)."""
    bones = arm.data.bones
    nb = len(bones)
    seg_keys = np.zeros((0, 2), np.int64)
    if vertex.size == 0:
        return vertex, joint, weight, seg_keys
    used = np.unique(joint)
    bendy = [int(b) for b in used if bones[int(b)].bbone_segments > 1]
    if not bendy:
        return vertex, joint, weight, seg_keys
    to_arm = np.linalg.inv(np.array(arm.matrix_world, np.float64)) @ np.array(obj.matrix_world, np.float64)
    keys = []
    key_row = {}
    for b in bendy:
        s = bones[b].bbone_segments
        for a in range(s + 1):
            key_row[(b, a)] = len(keys)
            keys.append((b, a))
    seg_keys = np.array(keys, np.int64)
    is_bb = np.isin(joint, np.array(bendy, np.int64))
    keep = ~is_bb
    out_v, out_j, out_w = [vertex[keep]], [joint[keep]], [weight[keep]]
    bv, bj, bw = vertex[is_bb], joint[is_bb], weight[is_bb]
    pts = (np.asarray(base_co, np.float64)[bv] @ to_arm[:3, :3].T) + to_arm[:3, 3]
    idx = np.empty(bv.size, np.int64)
    blend = np.empty(bv.size, np.float64)
    pbones = arm.pose.bones
    for b in bendy:
        pb = pbones.get(bones[b].name)
        if pb is None:
            raise AssetError(f"mesh '{obj.name}' armature '{arm.name}': B-Bone '{bones[b].name}' has no pose bone")
        rows = np.flatnonzero(bj == b)
        if not rows.size:
            continue
        try:
            pb.bbone_segment_index(tuple(float(c) for c in pts[rows[0]]))
        except RuntimeError:
            # the original's B-Bone data is only kept by the active depsgraph (out of date after
            # an edit not yet evaluated, or never evaluated in a background render): evaluate
            pb = _evaluated_pose_bone(obj, arm, bones[b].name)
        for r in rows:
            i, t = pb.bbone_segment_index(tuple(float(c) for c in pts[r]))
            idx[r] = i
            blend[r] = t
        s = bones[b].bbone_segments
        if rows.size and not ((idx[rows] >= 0).all() and (idx[rows] < s).all()):
            raise AssetError(f"mesh '{obj.name}' armature '{arm.name}': B-Bone '{bones[b].name}' returned a segment index "
                             f"outside 0..{s - 1}")
    base_row = np.array([key_row[(b, 0)] if (b, 0) in key_row else 0 for b in range(nb)], np.int64)
    lo = nb + base_row[bj] + idx
    out_v += [bv, bv]
    out_j += [lo, lo + 1]
    out_w += [bw * (1.0 - blend), bw * blend]
    return np.concatenate(out_v), np.concatenate(out_j), np.concatenate(out_w), seg_keys


def source_order(arm, joint) -> np.ndarray:
    """One order key per triple that ``split_bbone_weights`` returns for these ``joint`` (bone
    index) triples given in the vertices' own group order: the triple's position there, a
    B-Bone's pair as two consecutive keys (lower segment first), following the layout of that
    function's output (kept triples, then the lower, then the upper segment triples).  Blender's
    Preserve Volume sums in this order (armature_deform.cc: the vertex's groups in order, a
    B-Bone adding segment ``index`` then ``index + 1``)."""
    joint = np.asarray(joint, np.int64)
    rank = 2 * np.arange(joint.size, dtype=np.int64)
    bones = arm.data.bones
    bendy = [int(b) for b in np.unique(joint) if bones[int(b)].bbone_segments > 1]
    if not bendy:
        return rank
    is_bb = np.isin(joint, np.array(bendy, np.int64))
    return np.concatenate([rank[~is_bb], rank[is_bb], rank[is_bb] + 1])


def _evaluated_pose_bone(obj, arm, bone_name):
    """``arm``'s pose bone ``bone_name`` from the view layer's evaluated depsgraph (B-Bone
    segment data up to date), or an AssetError naming it (the object then falls back)."""
    import bpy

    try:
        dg = bpy.context.evaluated_depsgraph_get()
        pb = arm.evaluated_get(dg).pose.bones.get(bone_name)
        if pb is not None:
            pb.bbone_segment_index((0.0, 0.0, 0.0))
            return pb
    except (RuntimeError, AttributeError, ReferenceError):
        pass
    raise AssetError(f"mesh '{obj.name}': bendy bones (B-Bone segments > 1): Blender has no up-to-date B-Bone "
                     f"segment data for bone '{bone_name}' of armature '{arm.name}' (a depsgraph update is needed)")
