"""Big static meshes drawn in spatial chunks (issue 37: a set's terrain is not drawn whole into
every shadow tile, cube face and coverage sample).

At upload, a static primitive (neither skin nor morph targets) with at least
``MIN_CHUNKS * CHUNK_TRIANGLES`` triangles has its triangles put in the order of a grid over its
bounds (``chunk_order``): each grid cell's triangles are one run of its index buffer, a *chunk*,
with the box of its vertices.  A draw that knows what it can see (``Cull``: a frustum's planes
and, for a local lamp, the sphere of its reach) draws only the runs of the chunks whose boxes,
through the item's world matrix, it may see (``ChunkTable.visible_ranges``), with
``GPUBatch.draw_range``; any other draw (outline hulls, instanced duplicates, the Vector pass)
draws the whole buffer.  Leaving out a chunk that lies outside a frustum or a lamp's reach
changes no pixel: its triangles would be clipped, and a caster beyond a lamp's reach can only
block light the lamp does not give.  Reordering the triangles changes nothing either, but the
order of triangles at exactly equal depth.

The index buffer holds the reordered triangles, nothing more: the chunks cost no GPU memory.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..core.assets import Bounds

#: triangles a chunk aims at (cells of the grid hold about this many on an even mesh)
CHUNK_TRIANGLES = 16384
#: a primitive is chunked from this many chunks' worth of triangles on
MIN_CHUNKS = 4
#: triangles gathered at once while ordering (bounds the scratch memory: ~40 bytes a triangle)
_BLOCK = 1 << 18


@dataclass(frozen=True)
class Cull:
    """What one draw can see: ``planes`` (P,4) (a, b, c, d), inside where a x + b y + c z + d >= 0
    (engine/core/world/extractor.frustum_planes), and optionally the sphere of a lamp's reach."""
    planes: np.ndarray
    centre: Optional[np.ndarray] = None
    radius: float = float("inf")


@dataclass(frozen=True)
class ChunkTable:
    """``starts`` (K+1,): each chunk's first triangle in the index buffer (the last entry: the
    triangle count); ``lo`` / ``hi`` (K,3): the box of each chunk's vertices, mesh-local;
    ``digests`` (K,) uint64: CRC-32 and Adler-32 of each chunk's corner positions in order (what
    an opaque caster's depth is drawn from: the static depth cache keys a tile by the digests of
    the chunks it draws, so an edit redraws only the tiles that see a changed chunk);
    ``cells`` (T,): the grid cell of each triangle of the primitive's own order and ``cell_ids``
    (K,) each chunk's cell (``moved`` finds a moved vertex's chunks with them: 2 or 4 bytes a
    triangle)."""
    starts: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    digests: np.ndarray
    cells: Optional[np.ndarray] = None
    cell_ids: Optional[np.ndarray] = None

    @property
    def count(self) -> int:
        return int(self.lo.shape[0])

    def visible(self, world: np.ndarray, cull: Cull) -> np.ndarray:
        """(K,) True for the chunks whose world box (the local box through ``world``, 4x4
        row-major) ``cull`` may see."""
        from ..core.world.extractor import bounds_outside_many

        m = np.asarray(world, np.float64).reshape(4, 4)
        centre = 0.5 * (self.lo + self.hi)
        half = 0.5 * (self.hi - self.lo)
        wc = centre @ m[:3, :3].T + m[:3, 3]
        wh = half @ np.abs(m[:3, :3]).T
        wh = wh + 1e-5 * (1.0 + np.abs(wc))              # float32 vertices against float64 planes
        keep = ~bounds_outside_many(np.asarray(cull.planes, np.float64), wc - wh, wc + wh)
        if cull.centre is not None and np.isfinite(cull.radius):
            gap = np.maximum(np.abs(wc - np.asarray(cull.centre, np.float64)) - wh, 0.0)
            keep &= np.einsum("ij,ij->i", gap, gap) <= float(cull.radius) ** 2
        return keep

    def visible_ranges(self, world: np.ndarray, cull: Cull) -> tuple:
        """(ranges, culled): the (first element, element count) runs of the index buffer to
        draw (consecutive visible chunks merged) and how many chunks were left out."""
        keep = self.visible(world, cull)
        edges = np.diff(np.concatenate(([0], keep.astype(np.int8), [0])))
        first, end = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        s = self.starts
        ranges = [(3 * int(s[a]), 3 * int(s[b] - s[a])) for a, b in zip(first, end)]
        return ranges, int(keep.size - np.count_nonzero(keep))


def _grid(lo: np.ndarray, hi: np.ndarray, chunks: int) -> np.ndarray:
    """Cells per axis of a grid over the box (lo, hi) with about ``chunks`` cells, square-ish
    (a flat terrain gets one cell across its height)."""
    ext = np.maximum(hi - lo, 0.0)
    big = ext > 1e-6 * max(float(ext.max()), 1e-30)
    if not big.any():
        return np.ones(3, np.int64)
    side = 1.0
    for _axis in range(3):          # an axis shorter than a cell's side gets one cell
        side = (float(np.prod(ext[big])) / chunks) ** (1.0 / int(big.sum()))
        thin = big & (ext < side)
        if not thin.any() or thin.sum() == big.sum():
            break
        big &= ~thin
    n = np.where(big, np.maximum(np.round(ext / max(side, 1e-30)), 1.0), 1.0)
    return np.clip(n, 1, 1024).astype(np.int64)


def chunk_order(positions, indices, per_chunk: int = CHUNK_TRIANGLES):
    """(triangles, table) for a mesh of ``positions`` (V,3) and triangles ``indices`` (T,3):
    ``triangles`` (T,3) int32, the triangles in chunk order (grid cells in row-major order, each
    triangle in the cell of its first vertex), ``table`` their ChunkTable; None when the mesh has
    fewer than ``MIN_CHUNKS * per_chunk`` triangles (drawn whole)."""
    tris = np.asarray(indices).reshape(-1, 3)
    t = int(tris.shape[0])
    if per_chunk <= 0 or t < MIN_CHUNKS * per_chunk:
        return None
    pos = np.asarray(positions, np.float32).reshape(-1, 3)
    box = Bounds.from_points(pos)
    lo, hi = np.array(box.minimum), np.array(box.maximum)
    if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
        return None                       # (the importer drops such meshes; nothing to gain)
    n = _grid(lo, hi, -(-t // per_chunk))
    scale = n / np.maximum(hi - lo, 1e-30)
    cells = int(np.prod(n))
    cell = np.empty(t, np.int16 if cells < 32768 else np.int32)
    for b in range(0, t, _BLOCK):
        # (np.take: fancy indexing is ~3x slower here)
        q = np.clip(((np.take(pos, tris[b:b + _BLOCK, 0], axis=0) - lo) * scale).astype(np.int64), 0, n - 1)
        cell[b:b + _BLOCK] = (q[:, 0] * n[1] + q[:, 1]) * n[2] + q[:, 2]
    order = np.argsort(cell, kind="stable")
    sorted_cell = cell[order]
    first = np.flatnonzero(np.concatenate(([True], sorted_cell[1:] != sorted_cell[:-1])))
    k = int(first.shape[0])
    cell_ids = sorted_cell[first]
    del sorted_cell
    # (vertex indices are below 2**31: uint32 rows read as int32, taken in one copy)
    src = np.ascontiguousarray(tris).view(np.int32) if tris.dtype == np.uint32 else np.asarray(tris, np.int32)
    ordered = np.take(src, order, axis=0)
    del order
    clo = np.full((k, 3), np.inf)
    chi = np.full((k, 3), -np.inf)
    crc, adler = [0] * k, [1] * k
    for b in range(0, t, _BLOCK):
        v = np.take(pos, ordered[b:b + _BLOCK].ravel(), axis=0)                 # (3B,3): corners
        ids = np.searchsorted(first, np.arange(b, b + v.shape[0] // 3), side="right") - 1
        seg = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
        np.minimum.at(clo, ids[seg], np.minimum.reduceat(v, 3 * seg, axis=0))
        np.maximum.at(chi, ids[seg], np.maximum.reduceat(v, 3 * seg, axis=0))
        # (a chunk split across blocks continues its checksums: zlib's running value)
        for c, a, e in zip(ids[seg].tolist(), (3 * seg).tolist(), (3 * np.append(seg[1:], ids.size)).tolist()):
            crc[c], adler[c] = _checksums(v[a:e], crc[c], adler[c])
    digests = (np.array(crc, np.uint64) << np.uint64(32)) | np.array(adler, np.uint64)
    return ordered, ChunkTable(starts=np.concatenate((first, [t])).astype(np.int64), lo=clo, hi=chi,
                               digests=digests, cells=cell, cell_ids=cell_ids)


def _checksums(corners: np.ndarray, crc: int = 0, adler: int = 1) -> tuple:
    """(CRC-32, Adler-32) of the (N,3) float32 ``corners`` in order, going on from ``crc``, ``adler``."""
    part = np.ascontiguousarray(corners).data.cast("B")
    return zlib.crc32(part, crc), zlib.adler32(part, adler)


def moved(table: ChunkTable, old_positions, positions, indices) -> Optional[ChunkTable]:
    """``table`` for the same triangles (``indices`` (T,3), in the order the table was made
    from: ``chunk_order``'s input) after their vertices moved from ``old_positions`` to
    ``positions`` (both (V,3) float32): the boxes and digests of the chunks holding a moved
    vertex made again (exactly as ``chunk_order`` makes them), the others' kept, the triangle
    order (and so the index buffer) unchanged.  A moved triangle stays in its chunk, whose box
    grows with it.  None when the table holds no cells (made before they were kept)."""
    if table.cells is None or table.cell_ids is None:
        return None
    old = np.asarray(old_positions, np.float32).reshape(-1, 3)
    new = np.asarray(positions, np.float32).reshape(-1, 3)
    if old.shape != new.shape:
        return None
    # (column by column: an axis-1 reduction of a million rows is several times slower)
    hit = (old[:, 0] != new[:, 0]) | (old[:, 1] != new[:, 1]) | (old[:, 2] != new[:, 2])
    if not hit.any():
        return table
    tris = np.asarray(indices).reshape(-1, 3)
    touched = np.zeros(tris.shape[0], bool)
    for b in range(0, tris.shape[0], _BLOCK):
        r = tris[b:b + _BLOCK]
        touched[b:b + _BLOCK] = hit[r[:, 0]] | hit[r[:, 1]] | hit[r[:, 2]]
    chunks = np.searchsorted(table.cell_ids, np.unique(table.cells[touched]))
    lo, hi, digests = table.lo.copy(), table.hi.copy(), table.digests.copy()
    for c in chunks.tolist():
        own = np.flatnonzero(table.cells == table.cell_ids[c])     # (ascending: chunk_order's stable order)
        v = np.take(new, tris[own].ravel(), axis=0)
        lo[c], hi[c] = v.min(axis=0), v.max(axis=0)
        crc, adler = _checksums(v)
        digests[c] = (np.uint64(crc) << np.uint64(32)) | np.uint64(adler)
    return ChunkTable(starts=table.starts, lo=lo, hi=hi, digests=digests, cells=table.cells, cell_ids=table.cell_ids)


def camera_cull(view_projection) -> Cull:
    """The frustum of a camera's (jittered) view-projection matrix."""
    from ..core.world.extractor import frustum_planes

    return Cull(frustum_planes(view_projection))


def sun_tile_cull(matrix) -> Cull:
    """A sun cascade's window: its sides and its far plane (casters nearer the sun than its near
    plane are flattened onto it by the shadow vertex shader, so that side culls nothing)."""
    from ..core.world.extractor import frustum_planes

    planes = frustum_planes(matrix)
    return Cull(planes[[0, 1, 2, 3, 5]])


def lamp_face_cull(matrix, position, reach: float) -> Cull:
    """A local lamp's cube face or spot map: its frustum and the lamp's reach."""
    from ..core.world.extractor import frustum_planes

    return Cull(frustum_planes(matrix), np.asarray(position, np.float64), float(reach))
