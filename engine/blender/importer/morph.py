"""Shape-key deltas: positions from the keys, normal/tangent deltas recomputed with numpy.

Normal and tangent deltas are ``numpy(shaped) - numpy(basis)`` with the same formula on both
sides, computed incrementally over the triangles a key actually moves, so unmoved regions get
exactly zero deltas and a key touching a small region costs little.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ...core.geometry import cross3, dot3, norm3


def _csr(tris: np.ndarray, count: int):
    """vertex -> incident triangle lists as (ptr (count+1,), tri ids)."""
    flat = tris.ravel()
    order = np.argsort(flat, kind="stable")
    ptr = np.zeros(count + 1, np.int64)
    np.cumsum(np.bincount(flat, minlength=count), out=ptr[1:])
    return ptr, order // 3


def sorted_unique(size: int, *arrays: np.ndarray) -> np.ndarray:
    """Sorted unique values of the non-negative ints in ``arrays`` (all < ``size``): one
    boolean mask instead of a sort (the same result as ``np.unique`` / ``np.union1d``)."""
    mark = np.zeros(size, bool)
    for a in arrays:
        mark[a] = True
    return np.flatnonzero(mark)


def unique_inverse(values: np.ndarray, size: int):
    """(sorted unique values, inverse) of non-negative ints < ``size``, as
    ``np.unique(values, return_inverse=True)`` gives them, without a sort."""
    u = sorted_unique(size, values)
    lut = np.empty(size, np.int64)
    lut[u] = np.arange(u.shape[0])
    return u, lut[values]


def unique_rows(key: np.ndarray, groups: np.ndarray, size: int):
    """(first, inverse) of the rows of the float64 (n, w) ``key`` as
    ``np.unique(rows as bytes, return_index=True, return_inverse=True)`` gives them, where two
    rows can only be equal when their ``groups`` (ints < ``size``, e.g. the Blender vertex the
    row starts with) are: a row equal to its group's first row takes that row's place, and only
    the others are sorted (most corners of a mesh repeat their vertex's first corner)."""
    n = key.shape[0]
    key = np.ascontiguousarray(key, np.float64)
    at = np.arange(n)
    head = np.full(max(int(size), 1), n, np.int64)
    np.minimum.at(head, groups, at)
    r = head[groups]
    bits = key.view(np.uint64)
    same = (bits[r] == bits).all(axis=1) & (r != at)
    keep = np.flatnonzero(~same)
    row = np.dtype((np.void, key.dtype.itemsize * key.shape[1]))
    _, first, inv = np.unique(np.ascontiguousarray(key[keep]).view(row).ravel(), return_index=True,
                              return_inverse=True)
    inverse = np.empty(n, np.int64)
    inverse[keep] = inv.reshape(-1)
    inverse[same] = inverse[r[same]]
    return keep[first], inverse


def incident(ptr: np.ndarray, tri_ids: np.ndarray, verts: np.ndarray) -> np.ndarray:
    """Sorted unique triangles touching any of ``verts``."""
    return sorted_unique(tri_ids.shape[0], gather(ptr, tri_ids, verts))


def gather(ptr: np.ndarray, ids: np.ndarray, verts: np.ndarray) -> np.ndarray:
    """``ids[ptr[v]:ptr[v + 1]]`` of every vertex in ``verts``, concatenated (CSR rows)."""
    if verts.size == 0:
        return np.zeros(0, np.int64)
    starts = ptr[verts]
    counts = ptr[verts + 1] - starts
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    offs = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    return ids[offs + np.arange(total)]


def _accumulate(groups: np.ndarray, values: np.ndarray, count: int) -> np.ndarray:
    out = np.empty((count, values.shape[1]))
    for c in range(values.shape[1]):
        out[:, c] = np.bincount(groups, weights=values[:, c], minlength=count)
    return out


def _normalize(v: np.ndarray) -> np.ndarray:
    ln = norm3(v)[:, None]
    return np.where(ln > 1e-30, v / np.where(ln > 1e-30, ln, 1.0), 0.0)


class NormalDeltaSolver:
    """Per split vertex (CornerSplit vertex) normal deltas for per-Blender-vertex position deltas.

    Blender's method: polygon normals (Newell) weighted by the polygon's corner angle, summed over
    the corners of one smooth fan. A fan is approximated by the corners that share a Blender vertex
    and a basis corner normal (custom normals keep their basis direction + this delta).
    """

    def __init__(self, split_normals, source_vertices, corner_to_split, base_co, loop_vert, poly_start, poly_total):
        # held for the keys made later: only what ``deltas`` reads, loop-sized indices as int32
        # (the split vertices' groups, the loops' next / previous loops and the groups' base
        # normals are not kept: ``deltas`` makes what it needs of them for the loops a key moves)
        src = np.asarray(source_vertices, np.int64)
        nsplit = src.shape[0]
        if nsplit:
            key = np.empty((nsplit, 4))
            key[:, 0] = src
            key[:, 1:] = split_normals
            group = unique_rows(key, src, int(src.max()) + 1)[1]
        else:
            group = np.zeros(0, np.int64)
        self.ngroups = int(group.max()) + 1 if nsplit else 0
        self.gsplit = np.argsort(group, kind="stable").astype(np.int32)
        self.gptr = np.zeros(self.ngroups + 1, np.int64)
        np.cumsum(np.bincount(group, minlength=self.ngroups), out=self.gptr[1:])
        self.co = np.asarray(base_co, np.float64)
        lv = np.asarray(loop_vert, np.int64)
        self.ps = np.asarray(poly_start, np.int64)
        self.pt = np.asarray(poly_total, np.int64)
        nl = lv.shape[0]
        npoly = self.ps.shape[0]
        lp = np.repeat(np.arange(npoly), self.pt)                 # loop -> polygon
        pos_in = np.arange(nl) - self.ps[lp]
        lnext = self.ps[lp] + (pos_in + 1) % self.pt[lp]
        lprev = self.ps[lp] + (pos_in - 1) % self.pt[lp]
        self.lv, self.lp = lv.astype(np.int32), lp.astype(np.int32)
        self.lv_next = self.lv[lnext]          # the vertex after / before each loop's, once
        self.lv_prev = self.lv[lprev]
        c2s = np.asarray(corner_to_split, np.int64)
        self.lgroup = np.where(c2s >= 0, group[np.maximum(c2s, 0)] if nsplit else -1, -1).astype(np.int32)
        self.used = self.lgroup >= 0
        self.contrib0 = self._contrib(np.arange(nl), self.co)
        self.gsum0 = _accumulate(self.lgroup[self.used], self.contrib0[self.used], self.ngroups)
        nsrc = self.co.shape[0]
        order = np.argsort(lv, kind="stable")
        self.vptr = np.zeros(nsrc + 1, np.int64)
        np.cumsum(np.bincount(lv, minlength=nsrc), out=self.vptr[1:])
        self.vloops = order.astype(np.int32)

    def _contrib(self, loops: np.ndarray, co: np.ndarray, d: Optional[np.ndarray] = None) -> np.ndarray:
        """Angle-weighted polygon normal of each loop in ``loops`` (whole polygons expected),
        with vertex positions ``co`` (+ ``d``)."""
        if loops.size == 0:
            return np.zeros((0, 3))
        ic, inx, ipv = self.lv[loops], self.lv_next[loops], self.lv_prev[loops]
        pc, pn, pp = co[ic], co[inx], co[ipv]
        if d is not None:
            pc, pn, pp = pc + d[ic], pn + d[inx], pp + d[ipv]
        polys, pinv = unique_inverse(self.lp[loops], self.ps.shape[0])
        newell = _accumulate(pinv, cross3(pc, pn), polys.size)
        n = _normalize(newell)[pinv]
        e1, e2 = pp - pc, pn - pc
        l1 = norm3(e1)
        l2 = norm3(e2)
        cosang = np.einsum("ij,ij->i", e1, e2) / np.maximum(l1 * l2, 1e-30)
        ang = np.arccos(np.clip(cosang, -1.0, 1.0))
        return n * ang[:, None]

    def deltas(self, vertex_deltas: np.ndarray, moved_v: Optional[np.ndarray] = None):
        """Sparse normal deltas: (split vertex ids (K,), deltas (K,3) float64) for per-Blender-vertex
        position deltas; ``moved_v`` (nv,) bool marks vertices with a nonzero delta."""
        d = vertex_deltas
        if moved_v is None:
            moved_v = any3(d != 0.0)
        empty = (np.zeros(0, np.int64), np.zeros((0, 3)))
        mv = np.flatnonzero(moved_v)
        if self.lv.size == 0 or mv.size == 0 or self.ngroups == 0:
            return empty
        touched = gather(self.vptr, self.vloops, mv)     # loops of the moved vertices
        polys = sorted_unique(self.ps.shape[0], self.lp[touched])
        counts = self.pt[polys]
        total = int(counts.sum())
        offs = np.repeat(self.ps[polys] - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
        loops = offs + np.arange(total)
        loops = loops[self.used[loops]] if not self.used[loops].all() else loops
        if loops.size == 0:
            return empty
        c1 = self._contrib(loops, self.co, d)
        diff = c1 - self.contrib0[loops]
        cg = self.lgroup[loops]
        ug, li = unique_inverse(cg, self.ngroups)
        gs = self.gsum0[ug] + _accumulate(li.ravel(), diff, ug.size)
        gd = _normalize(gs) - _normalize(self.gsum0[ug])      # row-wise: the base normals of those groups
        nz = any3(gd != 0.0)
        ug, gd = ug[nz], gd[nz]
        if ug.size == 0:
            return empty
        starts = self.gptr[ug]
        counts = self.gptr[ug + 1] - starts
        total = int(counts.sum())
        offs = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
        ids = self.gsplit[offs + np.arange(total)]
        vals = np.repeat(gd, counts, axis=0)
        order = np.argsort(ids)
        return ids[order].astype(np.int64), vals[order]


def any3(m: np.ndarray) -> np.ndarray:
    return m[:, 0] | m[:, 1] | m[:, 2]


def _tri_corner_normals_p(pts: np.ndarray) -> np.ndarray:
    """(T,3,3) angle-weighted unit face normal of each triangle corner, from (T,3,3) corner positions."""
    a, b, c = pts[:, 0], pts[:, 1], pts[:, 2]
    n = np.cross(b - a, c - a)
    ln = np.linalg.norm(n, axis=1, keepdims=True)
    n = np.where(ln > 1e-30, n / np.where(ln > 1e-30, ln, 1.0), 0.0)
    out = np.empty((pts.shape[0], 3, 3))
    for k, (o, x, y) in enumerate(((a, b, c), (b, c, a), (c, a, b))):
        e1, e2 = x - o, y - o
        l1 = np.linalg.norm(e1, axis=1)
        l2 = np.linalg.norm(e2, axis=1)
        cosang = np.einsum("ij,ij->i", e1, e2) / np.maximum(l1 * l2, 1e-30)
        ang = np.arccos(np.clip(cosang, -1.0, 1.0))
        out[:, k] = n * ang[:, None]
    return out


class TangentDeltaSolver:
    """Tangent deltas of one primitive (same formula as mesh.compute_tangents, incremental).

    Held for the keys made later: only what ``sparse_deltas`` reads (indices as int32); the base
    tangent directions of the triangles a key moves and the base tangents of the rows it changes
    are made again for those rows (row-wise, so the same values as over the whole mesh)."""

    def __init__(self, positions, normals, uv, tris, source_vertices=None):
        self.src = None if source_vertices is None else np.asarray(source_vertices, np.int32)
        # the primitive's own arrays (float32), made float64 where rows are read
        self.pos = np.asarray(positions)
        self.nor = np.asarray(normals)
        uv = np.asarray(uv, np.float64)
        self.tris = np.asarray(tris, np.int32).reshape(-1, 3)
        # per triangle, what no shape key changes: its UV terms (the values _sdir computed from
        # the UVs for every key before)
        t = self.tris
        w0, w1, w2 = uv[t[:, 0]], uv[t[:, 1]], uv[t[:, 2]]
        d1, d2 = w1 - w0, w2 - w0
        det = d1[:, 0] * d2[:, 1] - d2[:, 0] * d1[:, 1]
        self._r = np.where(np.abs(det) > 1e-20, 1.0 / np.where(det == 0, 1, det), 0.0)[:, None]
        self._d1y, self._d2y = d1[:, 1:2].copy(), d2[:, 1:2].copy()
        v = self.pos.shape[0]
        self.tan0 = self._scatter(self.tris, self._sdir(slice(None)), v)
        ptr, tri_ids = _csr(self.tris, v)
        self.vptr, self.vtris = ptr, tri_ids.astype(np.int32)

    def _sdir(self, tri_ids, corner_deltas=None):
        """The tangent direction (Lengyel's sdir) of triangles ``tri_ids`` with their corners moved
        by ``corner_deltas`` ((T,3,3); None: not moved): mesh.compute_tangents' formula."""
        t = self.tris[tri_ids]
        p0, p1, p2 = (self.pos[t[:, k]].astype(np.float64) for k in range(3))
        if corner_deltas is not None:
            p0, p1, p2 = p0 + corner_deltas[:, 0], p1 + corner_deltas[:, 1], p2 + corner_deltas[:, 2]
        e1, e2 = p1 - p0, p2 - p0
        return (e1 * self._d2y[tri_ids] - e2 * self._d1y[tri_ids]) * self._r[tri_ids]

    def _base_tangents(self, ids) -> np.ndarray:
        """The unit base tangents of vertices ``ids`` (Gram-Schmidt against the normal)."""
        t, n = self.tan0[ids], self.nor[ids].astype(np.float64)
        return _normalize(t - n * dot3(n, t)[:, None])

    @staticmethod
    def _scatter(tris, vals, v):
        idx = tris.ravel()
        rep = np.repeat(vals, 3, axis=0)
        return _accumulate(idx, rep, v)

    def sparse_deltas(self, vertex_deltas: np.ndarray, moved_ids: np.ndarray, n_ids: np.ndarray,
                      n_deltas: np.ndarray):
        """The tangent deltas from per-Blender-vertex deltas ``vertex_deltas`` (nv,3) and
        ``moved_ids``: this primitive's vertices whose Blender vertex has a non-zero delta
        (ascending; the solver needs ``source_vertices``), returning only the rows that may
        change: (ids (K,) ascending, (K,3) float32)."""
        empty = (np.zeros(0, np.int64), np.zeros((0, 3), np.float32))
        if self.tris.shape[0] == 0 or not (moved_ids.size or n_ids.size):
            return empty
        aff_t = incident(self.vptr, self.vtris, moved_ids)
        if aff_t.size:
            if self.src is None:
                raise ValueError("TangentDeltaSolver.sparse_deltas: the solver was made without source_vertices")
            at = self.tris[aff_t]
            s1 = self._sdir(aff_t, vertex_deltas[self.src[at]])
            diff = s1 - self._sdir(aff_t)
            uv_, li = unique_inverse(at.ravel(), self.pos.shape[0])
            add = _accumulate(li, np.repeat(diff, 3, axis=0), uv_.size)
        else:
            uv_ = np.zeros(0, np.int64)
            add = np.zeros((0, 3))
        ids = sorted_unique(self.pos.shape[0], uv_, n_ids)
        return ids, self._finish(ids, uv_, add, n_ids, n_deltas)

    def _finish(self, ids, uv_, add, n_ids, n_deltas) -> np.ndarray:
        t = self.tan0[ids]                     # (fancy indexing: copies)
        if uv_.size:
            t[np.searchsorted(ids, uv_)] += add
        n = self.nor[ids].astype(np.float64)
        if n_ids.size:
            n[np.searchsorted(ids, n_ids)] += n_deltas
        n1 = _normalize(n)
        t1 = _normalize(t - n1 * dot3(n1, t)[:, None])
        good = norm3(t1) > 0.5
        dd = t1 - self._base_tangents(ids)
        dd[~good] = 0.0
        return dd.astype(np.float32)


def read_key_coords(key_block, vertex_count: int) -> np.ndarray:
    a = np.empty(vertex_count * 3, np.float32)
    if vertex_count:
        pts = getattr(key_block, "points", None)  # much faster bulk path than .data in Blender 5.0
        (pts if pts is not None else key_block.data).foreach_get("co", a)
    return a.reshape(vertex_count, 3)


def fallback_key_name(index: int, taken: set) -> str:
    name = f"Key {index}"
    n = 1
    while name in taken:
        name = f"Key {index}.{n:03d}"
        n += 1
    return name
