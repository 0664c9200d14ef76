"""A primitive's shape keys packed for the vertex shader (no bpy/gpu): every target's sparse delta
rows grouped by vertex (``pack_morph_entries``) and the per-vertex spans into them
(``pack_morph_span``), which the GPU backend uploads once (engine/gpu/backend.py) and the shaders
sum with the frame's weights (``mesh_instance``: shader-composed morphs)."""
from __future__ import annotations

import numpy as np

from ..geometry import smooth_normal_deltas


def touched_rows(target) -> np.ndarray:
    """Vertex indices whose position, normal or tangent delta is non-zero: the sparse target's
    own ``indices`` (no copy)."""
    return target.indices


def pack_morph_entries(primitive, smooth=None, texels_multiple: int = 1):
    """Sparse delta entries of every target, grouped by vertex (for shader composition).

    Returns ``(span, entries)``: ``span`` (V,2) uint32 = (first entry, entry count) per vertex;
    ``entries`` (E,4,4) float32 = (dpos, target index), (dnor, 0), (dtan, 0), (d smooth normal, 0),
    sorted by vertex and then by target.  Built straight from each target's sparse rows
    (``MorphTargetAsset.indices`` / ``*_rows``) and ``smooth`` (``smooth_normal_deltas``, computed
    here when None); ``entries`` is the only full-size array made.  ``texels_multiple``: the
    entries array gets zero rows at its end so that its 4*E texels are a multiple of it (a texture
    upload then needs no padded copy); ``entries[E:]`` are those padding rows, E = span's total.
    Runs once per primitive (a loop over targets at initialisation only).
    """
    v = primitive.vertex_count
    snor = smooth_normal_deltas(primitive) if smooth is None else smooth
    targets = primitive.morph_targets
    verts, tids = [], []
    for t, target in enumerate(targets):
        rows = target.indices if snor[t][0].size == 0 else np.union1d(target.indices, snor[t][0])
        verts.append(rows)
        tids.append(np.full(rows.shape[0], t, np.int64))
    all_v = np.concatenate(verts) if verts else np.zeros(0, np.int64)
    all_t = np.concatenate(tids) if tids else np.zeros(0, np.int64)
    order = np.lexsort((all_t, all_v))
    e = all_v.shape[0]
    m = max(1, int(texels_multiple))
    padded = -(-(4 * e) // m) * m // 4 if (m % 4 == 0 and 4 * e > m) else e
    entries = np.zeros((padded, 4, 4), np.float32)
    # position of every (target, row) of the concatenation above in the vertex-major order
    slot = np.empty(e, np.int64)
    slot[order] = np.arange(e)
    entries[slot, 0, 3] = all_t
    start = 0
    for t, target in enumerate(targets):
        rows = verts[t]
        sl = slot[start:start + rows.shape[0]]
        start += rows.shape[0]
        own = sl if rows is target.indices else sl[np.searchsorted(rows, target.indices)]
        entries[own, 0, :3] = target.position_rows
        if target.normal_rows is not None:
            entries[own, 1, :3] = target.normal_rows
        if target.tangent_rows is not None and primitive.tangents is not None:
            entries[own, 2, :3] = target.tangent_rows
        srows, svals, on_normals = snor[t]
        if on_normals:
            entries[own, 3, :3] = target.normal_rows
        if srows.size:
            at = sl[np.searchsorted(rows, srows)]
            if on_normals:
                entries[at, 3, :3] += svals
            else:
                entries[at, 3, :3] = svals
    counts = np.bincount(all_v, minlength=v).astype(np.int64)
    span = np.zeros((v, 2), np.uint32)
    span[:, 0] = np.cumsum(counts) - counts
    span[:, 1] = counts
    return span, entries


def pack_morph_span(primitive, smooth) -> np.ndarray:
    """The (V,2) uint32 ``span`` of ``pack_morph_entries(primitive, smooth)`` alone (what the
    static buffer needs), counted from the targets' rows without packing the entries."""
    v = primitive.vertex_count
    rows = [t.indices if s[0].size == 0 else np.union1d(t.indices, s[0])
            for t, s in zip(primitive.morph_targets, smooth)]
    counts = (np.bincount(np.concatenate(rows), minlength=v).astype(np.int64) if rows
              else np.zeros(v, np.int64))
    span = np.zeros((v, 2), np.uint32)
    span[:, 0] = np.cumsum(counts) - counts
    span[:, 1] = counts
    return span
