"""Small vectorised geometry helpers shared by the importer and the runtime (numpy only)."""
from __future__ import annotations

import numpy as np


def smooth_normals(normals: np.ndarray, source_vertices: np.ndarray, vertex_count: int) -> np.ndarray:
    """Average split-vertex normals over the Blender vertex they came from (outline expansion);
    a vertex whose average vanishes keeps its own normal."""
    n = np.asarray(normals, np.float64)
    src = np.asarray(source_vertices, np.int64)
    size = max(int(vertex_count), int(src.max()) + 1 if src.size else 0, 1)
    acc = np.stack([np.bincount(src, weights=n[:, k], minlength=size) for k in range(3)], axis=1)
    out = acc[src]
    ln = np.linalg.norm(out, axis=1, keepdims=True)
    good = ln[:, 0] > 1e-12
    out[good] /= ln[good]
    out[~good] = n[~good]
    return out.astype(np.float32)


def smooth_normal_deltas(primitive) -> list:
    """Per morph target of ``primitive``: (rows, (R,3) float32) where the target changes the
    outline's smooth normal, as ``smooth(normals + normal delta) - smooth(normals)`` averaged over
    the primitive's split vertices.  Composed like the normal deltas (sum of weight x delta, then
    renormalised), so a strong expression moves the outline hull with the surface."""
    targets = primitive.morph_targets
    if not targets:
        return [(np.zeros(0, np.int64), np.zeros((0, 3), np.float32)) for _ in targets]
    src = primitive.source_vertices
    count = int(src.max()) + 1 if src.size else 0
    base = smooth_normals(primitive.normals, src, count)
    out = []
    for t in targets:
        if t.normal_deltas is None or not np.any(t.normal_deltas):
            out.append((np.zeros(0, np.int64), np.zeros((0, 3), np.float32)))
            continue
        d = smooth_normals(primitive.normals + t.normal_deltas, src, count) - base
        rows = np.flatnonzero(np.any(d != 0.0, axis=1))
        out.append((rows, np.ascontiguousarray(d[rows], np.float32)))
    return out
