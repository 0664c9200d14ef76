"""Shape-key deltas: positions from the keys, normal/tangent deltas recomputed with numpy.

Normal and tangent deltas are ``numpy(shaped) - numpy(basis)`` with the same formula on both
sides, computed incrementally over the triangles a key actually moves, so unmoved regions get
exactly zero deltas and a key touching a small region costs little.
"""
from __future__ import annotations

import numpy as np


def _tri_corner_normals(p: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """(T,3,3) angle-weighted unit face normal of each triangle corner."""
    a, b, c = p[tris[:, 0]], p[tris[:, 1]], p[tris[:, 2]]
    n = np.cross(b - a, c - a)
    ln = np.linalg.norm(n, axis=1, keepdims=True)
    n = np.where(ln > 1e-30, n / np.where(ln > 1e-30, ln, 1.0), 0.0)
    out = np.empty((tris.shape[0], 3, 3))
    for k, (o, x, y) in enumerate(((a, b, c), (b, c, a), (c, a, b))):
        e1, e2 = x - o, y - o
        l1 = np.linalg.norm(e1, axis=1)
        l2 = np.linalg.norm(e2, axis=1)
        cosang = np.einsum("ij,ij->i", e1, e2) / np.maximum(l1 * l2, 1e-30)
        ang = np.arccos(np.clip(cosang, -1.0, 1.0))
        out[:, k] = n * ang[:, None]
    return out


def _accumulate(groups: np.ndarray, values: np.ndarray, count: int) -> np.ndarray:
    out = np.empty((count, values.shape[1]))
    for c in range(values.shape[1]):
        out[:, c] = np.bincount(groups, weights=values[:, c], minlength=count)
    return out


def _normalize(v: np.ndarray) -> np.ndarray:
    ln = np.linalg.norm(v, axis=1, keepdims=True)
    return np.where(ln > 1e-30, v / np.where(ln > 1e-30, ln, 1.0), 0.0)


class NormalDeltaSolver:
    """Per split vertex (CornerSplit vertex) normal deltas for per-Blender-vertex position deltas."""

    def __init__(self, split_positions, split_normals, source_vertices, tri_vertices):
        self.pos = np.asarray(split_positions, np.float64)
        self.src = np.asarray(source_vertices, np.int64)
        self.tris = np.asarray(tri_vertices, np.int64).reshape(-1, 3)
        nv = self.pos.shape[0]
        # smoothing groups: split vertices sharing a Blender vertex and a basis normal
        key = np.hstack([self.src[:, None].astype(np.float64), np.asarray(split_normals, np.float64)])
        if nv:
            row = np.dtype((np.void, key.dtype.itemsize * key.shape[1]))
            _, ginv = np.unique(np.ascontiguousarray(key).view(row).ravel(), return_inverse=True)
            self.group = ginv.ravel().astype(np.int64)
        else:
            self.group = np.zeros(0, np.int64)
        self.ngroups = int(self.group.max()) + 1 if nv else 0
        self.corner_groups = self.group[self.tris]                 # (T,3)
        self.contrib0 = _tri_corner_normals(self.pos, self.tris)  # (T,3,3)
        self.gsum0 = _accumulate(self.corner_groups.ravel(), self.contrib0.reshape(-1, 3), self.ngroups)
        self.gnorm0 = _normalize(self.gsum0)
        self.tri_src = self.src[self.tris]                        # (T,3)

    def deltas(self, vertex_deltas: np.ndarray):
        """(split_normal_deltas (V,3) float64, moved_split_mask (V,), affected tri mask (T,))."""
        nv = self.pos.shape[0]
        d = np.asarray(vertex_deltas, np.float64)
        moved_v = np.any(d != 0.0, axis=1)
        out = np.zeros((nv, 3))
        if not moved_v.any() or self.tris.shape[0] == 0:
            return out, np.zeros(nv, bool), np.zeros(self.tris.shape[0], bool)
        aff = np.any(moved_v[self.tri_src], axis=1)
        at = self.tris[aff]
        shaped = self.pos.copy()
        msplit = moved_v[self.src]
        shaped[msplit] += d[self.src[msplit]]
        c1 = _tri_corner_normals(shaped, at)
        diff = (c1 - self.contrib0[aff]).reshape(-1, 3)
        cg = self.corner_groups[aff].ravel()
        ug, li = np.unique(cg, return_inverse=True)
        gs = self.gsum0[ug] + _accumulate(li.ravel(), diff, ug.size)
        gdelta = np.zeros((self.ngroups, 3))
        gdelta[ug] = _normalize(gs) - self.gnorm0[ug]
        out = gdelta[self.group]
        return out, msplit, aff


class TangentDeltaSolver:
    """Tangent deltas of one primitive (same formula as mesh.compute_tangents, incremental)."""

    def __init__(self, positions, normals, uv, tris):
        self.pos = np.asarray(positions, np.float64)
        self.nor = np.asarray(normals, np.float64)
        self.uv = np.asarray(uv, np.float64)
        self.tris = np.asarray(tris, np.int64).reshape(-1, 3)
        self.sdir0, self.tdir0 = self._tri_dirs(self.pos, self.tris)
        v = self.pos.shape[0]
        self.tan0 = self._scatter(self.tris, self.sdir0, v)
        self.bit0 = self._scatter(self.tris, self.tdir0, v)
        self.t0 = _normalize(self.tan0 - self.nor * np.sum(self.nor * self.tan0, axis=1, keepdims=True))

    def _tri_dirs(self, pos, tris):
        p0, p1, p2 = pos[tris[:, 0]], pos[tris[:, 1]], pos[tris[:, 2]]
        w0, w1, w2 = self.uv[tris[:, 0]], self.uv[tris[:, 1]], self.uv[tris[:, 2]]
        e1, e2 = p1 - p0, p2 - p0
        d1, d2 = w1 - w0, w2 - w0
        det = d1[:, 0] * d2[:, 1] - d2[:, 0] * d1[:, 1]
        r = np.where(np.abs(det) > 1e-20, 1.0 / np.where(det == 0, 1, det), 0.0)[:, None]
        return (e1 * d2[:, 1:2] - e2 * d1[:, 1:2]) * r, (e2 * d1[:, 0:1] - e1 * d2[:, 0:1]) * r

    @staticmethod
    def _scatter(tris, vals, v):
        idx = tris.ravel()
        rep = np.repeat(vals, 3, axis=0)
        return _accumulate(idx, rep, v)

    def deltas(self, position_deltas: np.ndarray, normal_deltas: np.ndarray) -> np.ndarray:
        v = self.pos.shape[0]
        pd = np.asarray(position_deltas, np.float64)
        nd = np.asarray(normal_deltas, np.float64)
        moved = np.any(pd != 0.0, axis=1)
        nmoved = np.any(nd != 0.0, axis=1)
        out = np.zeros((v, 3))
        if not (moved.any() or nmoved.any()):
            return out
        aff_t = np.any(moved[self.tris], axis=1)
        tan = self.tan0
        affected_v = nmoved.copy()
        if aff_t.any():
            at = self.tris[aff_t]
            s1, _ = self._tri_dirs(self.pos + pd, at)
            diff = s1 - self.sdir0[aff_t]
            uv_, li = np.unique(at.ravel(), return_inverse=True)
            tan = self.tan0.copy()
            tan[uv_] += _accumulate(li.ravel(), np.repeat(diff, 3, axis=0), uv_.size)
            affected_v[uv_] = True
        ids = np.nonzero(affected_v)[0]
        n1 = _normalize(self.nor[ids] + nd[ids])
        t = tan[ids]
        t1 = _normalize(t - n1 * np.sum(n1 * t, axis=1, keepdims=True))
        good = np.linalg.norm(t1, axis=1) > 0.5
        dd = t1 - self.t0[ids]
        dd[~good] = 0.0
        out[ids] = dd
        return out


def read_key_coords(key_block, vertex_count: int) -> np.ndarray:
    a = np.empty(vertex_count * 3, np.float32)
    if vertex_count:
        key_block.data.foreach_get("co", a)
    return a.reshape(vertex_count, 3)


def fallback_key_name(index: int, taken: set) -> str:
    name = f"Key {index}"
    n = 1
    while name in taken:
        name = f"Key {index}.{n:03d}"
        n += 1
    return name
