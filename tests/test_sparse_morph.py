"""Sparse morph deltas (issue 14, Memory): MorphTargetAsset keeps only the rows a key changes, and
the CPU rebuild and the vertex-shader composition both work from those rows; both are checked
against Blender's evaluated mesh (tools/check_deform.py) on a grid whose keys move a small patch."""
from __future__ import annotations

import numpy as np
import pytest

from stylized_renderer.engine.blender.importer.morph import read_key_coords
from stylized_renderer.engine.core.assets import AssetError, MorphTargetAsset
from stylized_renderer.engine.core.runtime.morph_table import pack_morph_entries
from support.bump_grid import bump_grid, morph_targets_of
from tools import check_deform, deform_checker


def test_asset_stores_only_the_rows_a_key_changes(empty_scene):
    ob = bump_grid()
    prim, targets = morph_targets_of(ob)
    v = prim.vertex_count
    dense = v * 3 * 4 * 3                     # positions + normals + tangents, (V,3) float32 each
    basis = read_key_coords(ob.data.shape_keys.key_blocks["Basis"], len(ob.data.vertices))
    for name in ("Bump", "Dent"):
        t = targets[name]
        kc = read_key_coords(ob.data.shape_keys.key_blocks[name], len(ob.data.vertices))
        moved = np.flatnonzero(np.any(kc != basis, axis=1))                  # Blender vertices
        moved_split = np.flatnonzero(np.isin(prim.source_vertices, moved))  # their primitive rows
        assert 10 <= moved_split.size < v // 10
        # every moved vertex is stored, plus only the ring whose normals/tangents change
        assert np.all(np.isin(moved_split, t.indices))
        assert t.row_count < 3 * moved_split.size
        assert t.nbytes < dense / 10, (t.nbytes, dense)
        assert not t.indices.flags.writeable and not t.position_rows.flags.writeable
        assert np.all(np.diff(t.indices) > 0)
        # the stored rows are Blender's key offsets (float32 deltas of its key coordinates)
        np.testing.assert_allclose(t.dense_positions()[moved_split],
                                   (kc - basis)[prim.source_vertices[moved_split]], atol=1e-6)
    nothing = targets["Nothing"]
    assert nothing.row_count == 0 and nothing.position_rows.shape == (0, 3)
    assert nothing.nbytes == 0
    assert not np.any(nothing.dense_positions())
    # the shader's entries are packed from the same rows: one entry per stored row, plus the few
    # rows where only the outline's smooth normal changes
    span, entries = pack_morph_entries(prim)
    rows = sum(t.row_count for t in prim.morph_targets)
    assert int(span[:, 1].sum()) == entries.shape[0]
    assert rows <= entries.shape[0] < rows + rows // 10


@pytest.mark.parametrize("policy", ["rebuild", "shader"])
def test_sparse_morph_paths_match_blender(empty_scene, capsys, policy):
    """The CPU rebuild and the vertex-shader composition, both from the sparse rows, reproduce
    Blender's evaluated mesh vertex by vertex (GPU readback, tools/check_deform.py)."""
    ob = bump_grid()
    rc = check_deform.run_checks("1-20:3", "both", policy)
    out = capsys.readouterr().out
    assert rc == 0, out
    assert f"{ob.name}:" in out, out
    paths = {k: int(v) for k, v in check_deform.summary_fields(out, "morph-paths:").items()}
    assert paths[policy] > 0, out
    fields = check_deform.summary_fields(out)
    assert float(fields["max_rel_error"]) <= deform_checker.TOLERANCE, out


def test_dense_and_sparse_constructors_agree_and_bad_rows_are_named():
    d = np.zeros((6, 3))
    d[1] = (0.0, 0.0, 1.0)
    n = np.zeros((6, 3))
    n[4] = (0.5, 0.0, 0.0)                     # a normal-only change keeps its row too
    a = MorphTargetAsset("Smile", position_deltas=d, normal_deltas=n, tangent_deltas=None, key_name="Smile")
    assert a.indices.tolist() == [1, 4] and a.tangent_rows is None and a.vertex_count == 6
    b = MorphTargetAsset("Smile", vertex_count=6, indices=[1, 4], position_rows=d[[1, 4]], normal_rows=n[[1, 4]])
    np.testing.assert_array_equal(a.dense_positions(), b.dense_positions())
    np.testing.assert_array_equal(a.dense_normals(), n.astype(np.float32))
    assert a.dense_positions() is not a.dense_positions()       # built on demand, never cached
    with pytest.raises(AssetError, match="Smile"):
        MorphTargetAsset("Smile", vertex_count=6, indices=[4, 1], position_rows=d[[1, 4]])
    with pytest.raises(AssetError, match="Smile"):
        MorphTargetAsset("Smile", vertex_count=6, indices=[1, 9], position_rows=d[[1, 4]])
    with pytest.raises(AssetError, match="Smile"):
        MorphTargetAsset("Smile", vertex_count=6, indices=[1, 4], position_rows=d[[1]])
    with pytest.raises(AssetError, match="Smile"):
        MorphTargetAsset("Smile", position_deltas=d, normal_deltas=n[:3])
