"""Per-target runtime data of a morphed primitive (no bpy/gpu): ``morph_table`` (what a rebuild
or the shader's bounds read of each target, made on first use and shared by every instance of
the mesh) and the sparse entries the vertex shader composes (``pack_morph_entries``,
``pack_morph_span``), all from the asset's sparse rows (``MorphTargetAsset.indices`` / ``*_rows``)."""
from __future__ import annotations

from typing import List

import numpy as np

from ..assets.morph_target import position_extremes
from ..geometry import SmoothNormalDeltas, smooth_normal_deltas


def pack_morph_entries(primitive, smooth=None, texels_multiple: int = 1, live=None):
    """Sparse delta entries of every target, grouped by vertex (for shader composition).

    Returns ``(span, entries)``: ``span`` (V,2) uint32 = (first entry, entry count) per vertex;
    ``entries`` (E,4,4) float32 = (dpos, target index), (dnor, 0), (dtan, 0), (d smooth normal, 0),
    sorted by vertex and then by target.  Built straight from each target's sparse rows
    (``MorphTargetAsset.indices`` / ``*_rows``) and ``smooth`` (``smooth_normal_deltas``, computed
    here when None); ``entries`` is the only full-size array made.  ``texels_multiple``: the
    entries array gets zero rows at its end so that its 4*E texels are a multiple of it (a texture
    upload then needs no padded copy); ``entries[E:]`` are those padding rows, E = span's total.
    Runs once per primitive (a loop over targets at initialisation only).  ``live`` (T,) bool:
    only those targets get entries (the others are never read: their weights are 0), and only
    their rows are made (``MorphTargetAsset.deferred``).
    """
    v = primitive.vertex_count
    snor = smooth_normal_deltas(primitive) if smooth is None else smooth
    targets = primitive.morph_targets
    verts, tids = [], []
    for t, target in enumerate(targets):
        rows = _live_rows(target, snor, t, live)
        verts.append(rows)
        tids.append(np.full(rows.shape[0], t, np.int64))
    all_v = np.concatenate(verts) if verts else np.zeros(0, np.int64)
    all_t = np.concatenate(tids) if tids else np.zeros(0, np.int64)
    order = np.lexsort((all_t, all_v))
    e = all_v.shape[0]
    m = max(1, int(texels_multiple))
    padded = -(-(4 * e) // m) * m // 4 if (m % 4 == 0 and 4 * e > m) else e
    entries = np.zeros((max(padded, 1), 4, 4), np.float32)     # (one zero row: no entry at all)
    # position of every (target, row) of the concatenation above in the vertex-major order
    slot = np.empty(e, np.int64)
    slot[order] = np.arange(e)
    entries[slot, 0, 3] = all_t
    start = 0
    for t, target in enumerate(targets):
        rows = verts[t]
        if rows.shape[0] == 0:
            continue                   # no entry (a target that moves nothing, or not live)
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


def _live_rows(target, smooth, t: int, live) -> np.ndarray:
    """The vertices target ``t`` has entries for: its rows and its smooth-normal rows (none
    when ``live`` says it is not composed)."""
    if live is not None and not live[t]:
        return np.zeros(0, np.int64)
    s = smooth[t][0]
    return target.indices if s.size == 0 else np.union1d(target.indices, s)


def pack_morph_span(primitive, smooth, live=None) -> np.ndarray:
    """The (V,2) uint32 ``span`` of ``pack_morph_entries(primitive, smooth, live=live)`` alone
    (what the static buffer needs), counted from the targets' rows without packing the entries."""
    v = primitive.vertex_count
    rows = [_live_rows(t, smooth, i, live) for i, t in enumerate(primitive.morph_targets)]
    counts = (np.bincount(np.concatenate(rows), minlength=v).astype(np.int64) if rows
              else np.zeros(v, np.int64))
    span = np.zeros((v, 2), np.uint32)
    span[:, 0] = np.cumsum(counts) - counts
    span[:, 1] = counts
    return span


class TargetData:
    """What the runtime needs of one target beyond the asset: references to the asset's sparse
    rows (no copy), the extremes of its position deltas (conservative bounds in shader mode) and
    the outline's smooth-normal deltas (``smooth_normal_deltas``: rows ``snr_rows``, (R,3)
    ``snr``, added to the normal deltas when ``snr_on_normals``).  Made once per primitive and
    shared by every instance (``RuntimeMesh.morph_table``).  Everything is made on first read:
    the rows and smooth-normal deltas when a rebuild first composes the target (a deferred
    target's rows are made then), the extremes when the shader's bounds first need them."""

    __slots__ = ("target", "_smooth", "_t", "_rows", "_ext")

    def __init__(self, target, smooth, t: int):
        self.target, self._smooth, self._t = target, smooth, t
        self._rows = self._ext = None

    def _made(self) -> tuple:
        if self._rows is None:
            t = self.target
            if self._smooth is not None:
                rows, vals, on_normals = self._smooth[self._t]
            else:
                rows, vals, on_normals = np.zeros(0, np.int32), None, False
            self._rows = (t.indices, t.position_rows, t.normal_rows, t.tangent_rows,
                          rows if rows.size else None, vals if rows.size else None, bool(on_normals))
        return self._rows

    def extremes(self) -> tuple:
        """(dmin, dmax, max_length): ``position_extremes`` of the position rows (made once)."""
        if self._ext is None:
            self._ext = position_extremes(self._made()[1])
        return self._ext

    def __getattr__(self, name):
        # the rows (idx, pos, nrm, tan, snr_rows, snr, snr_on_normals) and the extremes (dmin,
        # dmax, max_length), read as attributes and made on first read
        if name in _ROW_NAMES:
            return self._made()[_ROW_NAMES.index(name)]
        if name in _EXTREME_NAMES:
            return self.extremes()[_EXTREME_NAMES.index(name)]
        raise AttributeError(name)


_ROW_NAMES = ("idx", "pos", "nrm", "tan", "snr_rows", "snr", "snr_on_normals")
_EXTREME_NAMES = ("dmin", "dmax", "max_length")


def morph_table(primitive, smooth=None) -> List[TargetData]:
    """One TargetData per morph target of ``primitive`` (init time, a loop over targets);
    ``smooth``: its ``SmoothNormalDeltas`` (or the list ``smooth_normal_deltas`` gives) when
    already made."""
    snor = SmoothNormalDeltas(primitive) if smooth is None else smooth
    return [TargetData(t, snor, i) for i, t in enumerate(primitive.morph_targets)]
