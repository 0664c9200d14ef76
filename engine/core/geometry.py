"""Small vectorised geometry helpers shared by the importer and the runtime (numpy only)."""
from __future__ import annotations

import numpy as np


def norm3(v: np.ndarray) -> np.ndarray:
    """Length of each (N,3) row: the same values as ``np.linalg.norm(v, axis=1)`` (x*x + y*y + z*z
    in that order), about 3x faster (no reduction over a length-3 axis)."""
    x, y, z = v[:, 0], v[:, 1], v[:, 2]
    return np.sqrt(x * x + y * y + z * z)


def dot3(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Row-wise dot product of (N,3) arrays: the same values as ``np.sum(u * v, axis=1)``."""
    return u[:, 0] * v[:, 0] + u[:, 1] * v[:, 1] + u[:, 2] * v[:, 2]


def cross3(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Row-wise cross product of (N,3) arrays: the same values as ``np.cross(u, v)``, about 3x faster."""
    out = np.empty(np.broadcast_shapes(u.shape, v.shape), np.result_type(u, v))
    out[:, 0] = u[:, 1] * v[:, 2] - u[:, 2] * v[:, 1]
    out[:, 1] = u[:, 2] * v[:, 0] - u[:, 0] * v[:, 2]
    out[:, 2] = u[:, 0] * v[:, 1] - u[:, 1] * v[:, 0]
    return out


SMOOTH_BLOCK = 1 << 16     # rows a block of smooth_normals works on (its float64 scratch stays small)


def smooth_normals(normals: np.ndarray, source_vertices: np.ndarray, vertex_count: int) -> np.ndarray:
    """Average split-vertex normals over the Blender vertex they came from (outline expansion);
    a vertex whose average vanishes keeps its own normal.  In float64, a block of rows at a time
    (a big mesh's import holds no full-size float64 copies; every row's arithmetic is the same)."""
    n_in = np.asarray(normals)
    src = np.asarray(source_vertices, np.int64)
    size = max(int(vertex_count), int(src.max()) + 1 if src.size else 0, 1)
    acc = None                  # None: one split vertex per source vertex, its sum is its own normal
    if not (src.size < 2 or bool((src[1:] > src[:-1]).all())):
        n64 = np.asarray(n_in, np.float64)
        acc = np.stack([np.bincount(src, weights=n64[:, k], minlength=size) for k in range(3)], axis=1)
        del n64
    out = np.empty((n_in.shape[0], 3), np.float32)
    for a in range(0, n_in.shape[0], SMOOTH_BLOCK):
        b = min(a + SMOOTH_BLOCK, n_in.shape[0])
        n = np.asarray(n_in[a:b], np.float64)
        o = n + 0.0 if acc is None else acc[src[a:b]]      # (-0 -> +0 as a sum)
        ln = norm3(o)[:, None]
        good = ln > 1e-12
        o /= np.where(good, ln, 1.0)     # in place (no gathered copy of the good rows)
        bad = ~good[:, 0]
        if bad.any():
            o[bad] = n[bad]
        out[a:b] = o                     # (float64 -> float32 as astype rounds)
    return out


def smooth_normal_deltas(primitive) -> list:
    """Per morph target of ``primitive``: ``(rows, (R,3) float32, on_normals)``: where the target
    changes the outline's smooth normal (``on_normals``: the target's normal deltas plus these
    rows, see ``_share_normal_rows``), as ``smooth(normals + normal delta) - smooth(normals)`` averaged over
    the primitive's split vertices.  Composed like the normal deltas (sum of weight x delta, then
    renormalised), so a strong expression moves the outline hull with the surface.  Only the
    source vertices a target touches are averaged again (O(touched) per target), reading the
    target's sparse rows (``MorphTargetAsset.indices`` / ``normal_rows``), never a dense array.
    Every target at once: ``SmoothNormalDeltas`` makes them one target at a time, on first use."""
    return list(SmoothNormalDeltas(primitive))


class SmoothNormalDeltas:
    """``smooth_normal_deltas(primitive)[t]`` made when target ``t`` is first asked for (and
    kept): a target whose weight never leaves 0 costs nothing (nor do its own deltas, when it is
    a ``MorphTargetAsset.deferred`` one).  Indexing and iteration as the list."""

    def __init__(self, primitive):
        self.primitive = primitive
        targets = primitive.morph_targets
        self._made: list = [None] * len(targets)
        if not targets:
            return
        src = np.asarray(primitive.source_vertices, np.int64)
        self.normals = np.asarray(primitive.normals)        # the primitive's own (float32): rows made float64
        self.count = int(src.max()) + 1 if src.size else 0
        self.src = src
        self.base = smooth_normals(self.normals, src, self.count)    # float32, as the primitive's
        # split vertices grouped by source vertex, once
        self.order = np.argsort(src, kind="stable")
        self.per_source = np.bincount(src, minlength=self.count)
        self.first = np.concatenate([[0], np.cumsum(self.per_source)[:-1]])

    def __len__(self) -> int:
        return len(self._made)

    def __iter__(self):
        return (self[t] for t in range(len(self._made)))

    def __getitem__(self, t: int) -> tuple:
        hit = self._made[t]
        if hit is None:
            hit = self._made[t] = self._target(self.primitive.morph_targets[t])
        return hit

    def _target(self, t) -> tuple:
        empty = (np.zeros(0, np.int32), np.zeros((0, 3), np.float32), False)
        nrows = t.normal_rows
        if nrows is None:
            return empty
        src, normals, count = self.src, self.normals, self.count
        order, per_source, first = self.order, self.per_source, self.first
        nverts = src.shape[0]
        nz = (nrows[:, 0] != 0.0) | (nrows[:, 1] != 0.0) | (nrows[:, 2] != 0.0)
        changed = t.indices[nz]
        if changed.size == 0:
            return empty
        sources = _sorted_unique(count, src[changed])
        c = per_source[sources]
        rows = order[np.repeat(first[sources], c) + (np.arange(c.sum()) - np.repeat(np.cumsum(c) - c, c))]
        # the sparse normal delta of each split vertex of those sources (zero where it has none)
        at = _positions(t.indices, nverts)[rows]
        hit = at >= 0
        moved = normals[rows].astype(np.float64)
        moved[hit] += nrows[at[hit]]
        group = np.repeat(np.arange(sources.size), c)
        acc = np.stack([np.bincount(group, weights=moved[:, k], minlength=sources.size) for k in range(3)], axis=1)
        new = acc[group]
        ln = norm3(new)[:, None]
        good = ln > 1e-12
        new = np.where(good, new / np.where(good, ln, 1.0), moved)
        d = new - self.base[rows].astype(np.float64)
        keep = (d[:, 0] != 0.0) | (d[:, 1] != 0.0) | (d[:, 2] != 0.0)
        rows, d = rows[keep], d[keep]
        if rows.size > 1 and not (rows[1:] > rows[:-1]).all():
            srt = _positions(rows, nverts)[_sorted_unique(nverts, rows)]     # rows are unique: no sort
            rows, d = rows[srt], d[srt]
        rows, d = rows.astype(np.int32), np.ascontiguousarray(d, np.float32)
        return _share_normal_rows(t, rows, d)


def _sorted_unique(size: int, *arrays) -> np.ndarray:
    """Sorted unique values of non-negative ints < ``size`` (as np.unique / np.union1d), from
    one boolean mask instead of a sort."""
    mark = np.zeros(size, bool)
    for a in arrays:
        mark[a] = True
    return np.flatnonzero(mark)


def _positions(values: np.ndarray, size: int) -> np.ndarray:
    """(size,) int64: the position of each value in ``values`` (unique ints < ``size``), -1 elsewhere."""
    out = np.full(size, -1, np.int64)
    out[values] = np.arange(values.shape[0])
    return out


#: Smooth-normal deltas within this of the target's own normal deltas are those deltas.
SHARE_TOLERANCE = 1e-6


def _share_normal_rows(target, rows: np.ndarray, d: np.ndarray) -> tuple:
    """``(rows, d, False)``: the smooth-normal deltas as they are; or ``(rows', d', True)``: the
    target's own normal deltas (its ``indices`` / ``normal_rows``, no copy) plus the correction
    ``d'`` at ``rows'`` (the rows where the two differ by more than SHARE_TOLERANCE).  Where a
    Blender vertex has one split vertex in the primitive (no seam), its smooth normal is its
    normal and the smooth delta is the normal delta up to float rounding, so the outline stores
    only the seams' rows.  Chosen when the corrections are fewer rows than the deltas."""
    idx, nrows = target.indices, target.normal_rows
    size = int(target.vertex_count)
    u = _sorted_unique(size, idx, rows)
    at = _positions(u, size)
    diff = np.zeros((u.shape[0], 3), np.float32)
    diff[at[rows]] = d
    diff[at[idx]] -= nrows
    a = np.abs(diff)
    bad = np.maximum(np.maximum(a[:, 0], a[:, 1]), a[:, 2]) > SHARE_TOLERANCE    # the largest of each row
    if int(bad.sum()) >= rows.shape[0]:
        return rows, d, False
    return u[bad].astype(np.int32), np.ascontiguousarray(diff[bad]), True
