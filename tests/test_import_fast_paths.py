"""The import's bulk paths (issue 23) give exactly what the general / per-item paths give:
the corner split's row grouping (``unique_rows``) against ``np.unique`` over the byte rows, the
skin's per-vertex row sort against the sort over every triple, and the bones' bulk targets and
bind values against the per-bone reads, on the kinds of input each takes (ties, signed zeros,
NaNs, every rotation mode, connected bones, non-finite channels)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tools import scenes


def _numpy_rows(key):
    row = np.dtype((np.void, key.dtype.itemsize * key.shape[1]))
    _, first, inverse = np.unique(np.ascontiguousarray(key).view(row).ravel(), return_index=True,
                                  return_inverse=True)
    return first, inverse.reshape(-1)


@pytest.mark.parametrize("seed", range(6))
def test_unique_rows_is_numpys_unique_over_the_byte_rows(ext, seed):
    from stylized_renderer.engine.blender.importer.morph import unique_rows

    rng = np.random.default_rng(seed)
    n, groups = 4000, 700
    g = rng.integers(0, groups, n)
    # few distinct values per column, so rows repeat within a group (seams: a few differ)
    vals = np.array([0.0, -0.0, 0.5, 1.0, np.nan, 1e-30, -2.0])
    key = np.empty((n, 4))
    key[:, 0] = g
    key[:, 1:] = vals[rng.integers(0, 2 if seed % 2 else len(vals), (n, 3))]
    first, inverse = unique_rows(key, g, groups)
    want_first, want_inverse = _numpy_rows(key)
    assert first.dtype == want_first.dtype and inverse.dtype == want_inverse.dtype
    assert np.array_equal(first, want_first)
    assert np.array_equal(inverse, want_inverse)


def _triples(rng, vertices, most, uniform):
    counts = np.full(vertices, most) if uniform else rng.integers(0, most + 1, vertices)
    vi = np.repeat(np.arange(vertices), counts)
    gi = np.concatenate([rng.choice(40, c, replace=False) for c in counts]) if vi.size else np.zeros(0, np.int64)
    # ties, tiny totals near the zero-contribution threshold, and zeros (dropped)
    wi = rng.choice([0.0, 0.25, 0.5, 2.5e-5, 5e-5, 0.1, 0.7], vi.size)
    return vi, gi.astype(np.int64), wi


@pytest.mark.parametrize("most,uniform", [(1, True), (3, False), (4, True), (4, False), (6, False), (8, True)])
def test_skin_row_sort_is_the_general_sort(ext, monkeypatch, most, uniform):
    from stylized_renderer.engine.blender.importer import skin

    rng = np.random.default_rng(most * 10 + uniform)
    vi, gi, wi = _triples(rng, 3000, most, uniform)
    got = skin.select_influences(vi, gi, wi, 3000)
    keep = wi > 0.0
    assert skin._rows_per_vertex(vi[keep], gi[keep], wi[keep], 3000, skin.ZERO_CONTRIB) is not None
    monkeypatch.setattr(skin, "_rows_per_vertex", lambda *a: None)
    want = skin.select_influences(vi, gi, wi, 3000)
    assert (got.k, got.max_influences) == (want.k, want.max_influences)
    assert got.joints.dtype == want.joints.dtype and got.weights.dtype == want.weights.dtype
    assert np.array_equal(got.joints, want.joints)
    assert got.weights.tobytes() == want.weights.tobytes()


def test_skin_row_sort_leaves_repeated_pairs_and_unsorted_triples_to_the_general_path(ext):
    from stylized_renderer.engine.blender.importer import skin

    v = np.array([0, 0, 1], np.int64)
    w = np.array([0.5, 0.25, 1.0])
    assert skin._rows_per_vertex(v, np.array([3, 3, 1]), w, 2, skin.ZERO_CONTRIB) is None   # (0, 3) twice
    assert skin._rows_per_vertex(v[::-1].copy(), np.array([1, 2, 3]), w, 2, skin.ZERO_CONTRIB) is None
    merged = skin.select_influences(v, np.array([3, 3, 1]), w, 2)
    assert merged.joints[0, 0] == 3 and merged.weights[0, 0] == 1.0 and merged.max_influences == 1


def test_bone_targets_and_binds_in_bulk_are_the_per_bone_ones(empty_scene):
    import bpy

    from stylized_renderer.engine.blender.importer import nodes

    modes = ["QUATERNION", "XYZ", "ZXY", "YZX", "AXIS_ANGLE", "XZY", "YXZ", "ZYX", "QUATERNION", "QUATERNION"]
    specs: list[tuple[str, str | None, tuple[float, float, float], tuple[float, float, float]]] = [
        ("b0", None, (0, 0, 0), (0, 0, 1))]
    for i in range(1, len(modes)):
        specs.append((f"b{i}", f"b{(i - 1) // 2}", (0.1 * i, 0, i), (0.1 * i, 0.2, i + 1)))
    arm = scenes.make_armature("Rig", specs)
    bpy.context.view_layer.objects.active = arm
    bpy.ops.object.mode_set(mode="EDIT")
    arm.data.edit_bones["b3"].use_connect = True      # its location is ignored (read as zero)
    bpy.ops.object.mode_set(mode="OBJECT")
    assert arm.data.bones["b3"].use_connect
    rng = np.random.default_rng(7)
    for i, mode in enumerate(modes):
        pb = arm.pose.bones[f"b{i}"]
        pb.rotation_mode = mode
        pb.location = rng.normal(size=3)
        pb.scale = rng.uniform(0.5, 2.0, 3)
        pb.rotation_quaternion = rng.normal(size=4)
        pb.rotation_euler = rng.normal(size=3) * 3
        pb.rotation_axis_angle = rng.normal(size=4)
    arm.pose.bones["b8"].rotation_quaternion = (0.0, 0.0, 0.0, 0.0)      # a zero quaternion
    arm.pose.bones["b9"].rotation_quaternion = (math.nan, 0.0, 1.0, 0.0)  # bound as identity
    arm.pose.bones["b9"].location = (math.inf, 1.0, 2.0)
    arm.pose.bones["b9"].scale = (math.nan, 1.0, 2.0)

    names = [b.name for b in arm.data.bones] + ["missing"]
    got = nodes.bone_targets(arm, names, list(range(len(names))))
    want = [nodes.bone_target(arm.pose.bones.get(n), i) for i, n in enumerate(names)]
    for g, w in zip(got, want):
        assert (g.index, g.rotation_mode, g.ignore_location) == (w.index, w.rotation_mode, w.ignore_location)
        for a, b in [(g.location, w.location), (g.scale, w.scale)] + [(g.rotation[k], w.rotation[k]) for k in w.rotation]:
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    bt, br, bs = nodes._bone_binds(got)
    for k, w in enumerate(want):
        t, r, s, _ref = nodes._finite_bind(w.location, nodes.normalize_quat(nodes._rot_of(w.rotation_mode, w.rotation)),
                                           w.scale)
        assert bt[k].tobytes() == t.tobytes() and br[k].tobytes() == r.tobytes() and bs[k].tobytes() == s.tobytes()
    assert br[names.index("b9")].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert br[names.index("b8")].tolist() == [0.0, 1.0, 0.0, 0.0]
    assert got[names.index("b3")].ignore_location and not got[names.index("b3")].location.any()
