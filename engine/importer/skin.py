"""Vertex-group weights -> per-vertex joint influences (seed rules), vectorised numpy.

Only ``read_vertex_groups`` touches bpy (the per-vertex walk over ``vertex.groups`` has no bulk
accessor in Blender 5.0; it is the slowest read of an import and of a content fingerprint).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Blender's armature deform leaves a vertex in place when its deform weights sum to <= this.
ZERO_CONTRIB = 1e-4


def read_vertex_groups(mesh):
    """All (vertex, group, weight) triples of ``mesh`` as numpy arrays (int64, int64, float64)."""
    vi, gi, wi = [], [], []
    ap_v, ap_g, ap_w = vi.append, gi.append, wi.append
    for v in mesh.vertices:
        gg = v.groups
        if gg:
            idx = v.index
            for g in gg:
                ap_v(idx)
                ap_g(g.group)
                ap_w(g.weight)
    out = (np.array(vi, dtype=np.int64), np.array(gi, dtype=np.int64), np.array(wi, dtype=np.float64))
    return out


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


def select_influences(vertex, joint, weight, vertex_count: int, zero_contrib: float = ZERO_CONTRIB) -> Influences:
    """Seed weight rules: merge duplicate (vertex, joint) pairs, keep the largest 4 (or 8 when any
    vertex has more than 4 nonzero influences), normalise. Vertices whose total weight is
    <= ``zero_contrib`` keep all-zero weights (they stay in place, as in Blender).  When a vertex
    has more than 8, every influence is kept (K = the largest count), normalised by the sum of
    all of them: exactly Blender's Armature modifier (the GPU reads them as per-vertex spans)."""
    vertex = np.asarray(vertex, np.int64).ravel()
    joint = np.asarray(joint, np.int64).ravel()
    weight = np.asarray(weight, np.float64).ravel()
    keep = weight > 0.0
    vertex, joint, weight = vertex[keep], joint[keep], weight[keep]
    if vertex.size:
        # merge duplicates
        jmax = int(joint.max()) + 1
        key = vertex * jmax + joint
        uk, inv = np.unique(key, return_inverse=True)
        weight = np.bincount(inv.ravel(), weights=weight, minlength=uk.size)
        vertex, joint = uk // jmax, uk % jmax
    counts = np.bincount(vertex, minlength=vertex_count) if vertex.size else np.zeros(vertex_count, np.int64)
    max_inf = int(counts.max()) if counts.size else 0
    k = 4 if max_inf <= 4 else (8 if max_inf <= 8 else max_inf)
    joints = np.zeros((vertex_count, k), np.int64)
    weights = np.zeros((vertex_count, k), np.float64)
    if vertex.size:
        total = np.bincount(vertex, weights=weight, minlength=vertex_count)
        # sort by vertex, then weight descending, then joint (stable tie-break)
        order = np.lexsort((joint, -weight, vertex))
        v, j, w = vertex[order], joint[order], weight[order]
        start = np.concatenate([[0], np.cumsum(counts)[:-1]])
        rank = np.arange(v.size) - start[v]
        sel = rank < k
        joints[v[sel], rank[sel]] = j[sel]
        weights[v[sel], rank[sel]] = w[sel]
        s = weights.sum(axis=1)
        live = (total > zero_contrib) & (s > 0.0)
        weights[live] /= s[live, None]
        weights[~live] = 0.0
        joints[~live] = 0
    return Influences(joints, weights.astype(np.float32), max_inf, k)


def joint_bounds(positions: np.ndarray, joints: np.ndarray, weights: np.ndarray, joint_count: int):
    """Per joint (J,3) min/max of the positions of vertices it influences with nonzero weight."""
    lo = np.full((joint_count, 3), np.inf)
    hi = np.full((joint_count, 3), -np.inf)
    nz = weights > 0.0
    if nz.any():
        vv, kk = np.nonzero(nz)
        jj = joints[vv, kk]
        p = np.asarray(positions, np.float64)[vv]
        np.minimum.at(lo, jj, p)
        np.maximum.at(hi, jj, p)
    return lo, hi
