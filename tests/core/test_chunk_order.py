"""``chunks.chunk_order`` and ``ChunkTable.visible_ranges`` (big static meshes drawn in spatial
chunks, engine/gpu/chunks.py) against the plain formulas: every triangle in exactly one chunk,
each chunk's box the min / max of its triangles' vertices and its digest the checksums of its
corner positions (across the ordering's blocks), a
chunk is seen exactly when its transformed box is not outside a plane or the reach."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from stylized_renderer.engine.gpu import chunks


def grid(nx, ny, size=10.0, hills=0.5):
    x, y = np.meshgrid(np.linspace(-size / 2, size / 2, nx), np.linspace(-size / 2, size / 2, ny), indexing="xy")
    z = hills * np.sin(x) * np.cos(y)
    pos = np.stack([x, y, z], -1).reshape(-1, 3).astype(np.float32)
    v = np.arange(nx * ny).reshape(ny, nx)
    a, b, c, d = v[:-1, :-1].ravel(), v[:-1, 1:].ravel(), v[1:, 1:].ravel(), v[1:, :-1].ravel()
    tris = np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)]).astype(np.uint32)
    rng = np.random.default_rng(3)
    return pos, tris[rng.permutation(tris.shape[0])]          # scrambled: the order must come from space


@pytest.mark.parametrize("block", [1 << 18, 1000])
def test_order_and_boxes_match_the_plain_formula(monkeypatch, block):
    monkeypatch.setattr(chunks, "_BLOCK", block)
    pos, tris = grid(181, 151)
    made = chunks.chunk_order(pos, tris, per_chunk=2048)
    assert made is not None
    ordered, table = made
    t = tris.shape[0]
    assert ordered.dtype == np.int32 and ordered.shape == tris.shape
    # a permutation of the triangles (each row kept whole)
    assert np.array_equal(np.unique(ordered, axis=0), np.unique(tris.astype(np.int32), axis=0))
    assert table.starts[0] == 0 and table.starts[-1] == t and np.all(np.diff(table.starts) > 0)
    assert 8 <= table.count <= 64, table.count
    for k in range(table.count):                                          # the plain formula
        v = pos[ordered[table.starts[k]:table.starts[k + 1]]].reshape(-1, 3)
        assert np.array_equal(table.lo[k], v.min(0).astype(np.float64)), k
        assert np.array_equal(table.hi[k], v.max(0).astype(np.float64)), k
        data = np.ascontiguousarray(v, np.float32).tobytes()
        assert int(table.digests[k]) == (zlib.crc32(data) << 32) | zlib.adler32(data), k
    # spatial: a chunk covers a small part of the mesh (not a scattered sample of it)
    area = np.prod((table.hi - table.lo)[:, :2], axis=1)
    assert area.max() < 4.0 * 100.0 / table.count


def test_moved_vertices_remake_only_their_chunks_as_the_plain_formula():
    """``chunks.moved``: after some vertices moved (in height: every triangle keeps its cell),
    the table is ``chunk_order``'s of the new positions; the chunks without a moved vertex keep
    their boxes and digests.  Moved across cells, a triangle stays in its chunk, whose box is
    still the min / max of its triangles' vertices."""
    pos, tris = grid(181, 151)
    made = chunks.chunk_order(pos, tris, per_chunk=2048)
    assert made is not None
    ordered, table = made
    assert chunks.moved(table, pos, pos.copy(), tris) is table            # nothing moved
    new = pos.copy()
    moved = [100, 5000, 20000]
    new[moved, 2] += 0.25
    after = chunks.moved(table, pos, new, tris)
    made = chunks.chunk_order(new, tris, per_chunk=2048)
    assert made is not None and after is not None
    ordered2, built = made
    assert np.array_equal(ordered2, ordered)
    for f in ("starts", "lo", "hi", "digests", "cells", "cell_ids"):
        assert np.array_equal(getattr(after, f), getattr(built, f)), f
    hit = np.zeros(pos.shape[0], bool)
    hit[moved] = True
    own = np.searchsorted(after.starts, np.flatnonzero(hit[ordered].any(1)), side="right") - 1
    same = np.ones(table.count, bool)
    same[own] = False
    assert 3 <= np.count_nonzero(~same) <= 12
    assert np.array_equal(after.digests[same], table.digests[same])
    assert not np.any(after.digests[~same] == table.digests[~same])
    lifted = new.copy()
    new[moved[0], :2] += 3.0                                               # across cells
    far = chunks.moved(after, lifted, new, tris)
    assert far is not None
    assert np.array_equal(far.starts, table.starts)
    for k in range(far.count):
        v = new[ordered[far.starts[k]:far.starts[k + 1]]].reshape(-1, 3)
        assert np.array_equal(far.lo[k], v.min(0).astype(np.float64)), k
        assert np.array_equal(far.hi[k], v.max(0).astype(np.float64)), k


def test_small_meshes_and_bad_values_are_not_chunked():
    pos, tris = grid(20, 20)
    assert chunks.chunk_order(pos, tris) is None                           # 722 triangles
    pos, tris = grid(120, 120)
    assert chunks.chunk_order(pos, tris, per_chunk=0) is None
    pos[5, 2] = np.nan
    assert chunks.chunk_order(pos, tris, per_chunk=1024) is None


def _plain_visible(table, world, cull):
    out = []
    for k in range(table.count):
        corners = np.array([[x, y, z, 1.0] for x in (table.lo[k, 0], table.hi[k, 0])
                            for y in (table.lo[k, 1], table.hi[k, 1]) for z in (table.lo[k, 2], table.hi[k, 2])])
        w = corners @ np.asarray(world).T
        lo, hi = w[:, :3].min(0), w[:, :3].max(0)
        seen = all(any(p[:3] @ c + p[3] >= 0 for c in w[:, :3]) for p in cull.planes)
        if cull.centre is not None:
            nearest = np.clip(cull.centre, lo, hi)
            seen = seen and np.linalg.norm(nearest - cull.centre) <= cull.radius
        out.append(seen)
    return np.array(out)


def test_visible_ranges_match_the_plain_test():
    from stylized_renderer.engine.core.world.extractor import frustum_planes

    pos, tris = grid(181, 151)
    made = chunks.chunk_order(pos, tris, per_chunk=1024)
    assert made is not None
    _ordered, table = made
    world = np.eye(4)
    world[:3, 3] = (1.0, -2.0, 0.3)                                       # moved, not rotated
    near, far, t = 0.1, 30.0, 0.4
    proj = np.array([[1 / t, 0, 0, 0], [0, 1 / t, 0, 0],
                     [0, 0, -(far + near) / (far - near), -2 * far * near / (far - near)], [0, 0, -1, 0]])
    view = np.eye(4)
    view[:3, 3] = (0.0, 0.0, -8.0)                                        # looking down at the grid
    for cull in (chunks.Cull(frustum_planes(proj @ view)),
                 chunks.Cull(frustum_planes(proj @ view), np.array([2.0, -1.0, 1.0]), 2.5)):
        keep = table.visible(world, cull)
        plain = _plain_visible(table, world, cull)
        # an axis-aligned box: the transformed box is the box, so the tests agree exactly
        assert np.array_equal(keep, plain)
        assert 0 < keep.sum() < table.count
        ranges, culled = table.visible_ranges(world, cull)
        assert culled == table.count - keep.sum()
        drawn = np.concatenate([np.arange(s, s + c) for s, c in ranges])
        want = np.concatenate([np.arange(3 * table.starts[k], 3 * table.starts[k + 1])
                               for k in np.flatnonzero(keep)])
        assert np.array_equal(drawn, want)                                # merged runs, nothing else
