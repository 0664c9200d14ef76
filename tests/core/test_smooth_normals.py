"""``geometry.smooth_normals`` (the importer's outline normals, worked on a block of rows at a
time) against the plain whole-array formula: bit for bit, across block edges."""
from __future__ import annotations

import numpy as np
import pytest

from stylized_renderer.engine.core import geometry


def plain_smooth_normals(normals, source_vertices, vertex_count):
    """The formula in one piece: the per-source-vertex sum of the float64 normals (a vertex's
    own normal where each source vertex has one split vertex), normalised; a vanishing sum keeps
    the split vertex's own normal."""
    n = np.asarray(normals, np.float64)
    src = np.asarray(source_vertices, np.int64)
    size = max(int(vertex_count), int(src.max()) + 1 if src.size else 0, 1)
    if src.size < 2 or bool((src[1:] > src[:-1]).all()):
        out = n + 0.0
    else:
        out = np.stack([np.bincount(src, weights=n[:, k], minlength=size) for k in range(3)], axis=1)[src]
    ln = np.linalg.norm(out, axis=1)[:, None]
    good = ln > 1e-12
    out = out / np.where(good, ln, 1.0)
    out[~good[:, 0]] = n[~good[:, 0]]
    return out.astype(np.float32)


@pytest.mark.parametrize("split", [False, True])
def test_blocks_give_the_plain_formula_s_values(monkeypatch, split):
    rng = np.random.default_rng(7)
    count = 1000
    if split:       # split vertices: several per source vertex, two pairs cancelling to zero
        src = np.sort(rng.integers(0, 400, count))
        normals = rng.normal(size=(count, 3)).astype(np.float32)
        normals[[0, 1]] = [[0.0, 0.0, 1.0], [0.0, 0.0, -1.0]]
        src[[0, 1]] = src[0]
        src[2:] = np.maximum(src[2:], src[0] + 1)
    else:           # one split vertex per source vertex (a big static mesh), a zero normal in it
        src = np.arange(count)
        normals = rng.normal(size=(count, 3)).astype(np.float32)
        normals[5] = 0.0
    want = plain_smooth_normals(normals, src, 400 if split else count)
    monkeypatch.setattr(geometry, "SMOOTH_BLOCK", 37)      # many blocks, a short last one
    got = geometry.smooth_normals(normals, src, 400 if split else count)
    assert got.dtype == np.float32 and got.shape == (count, 3)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
