"""RenderExtractor rules: the four-row table, world bounds, cheap per-frame preconditions."""
from __future__ import annotations

import numpy as np
import pytest

from stylized_renderer.engine.core.assets import MeshAsset, MorphTargetAsset, SceneAsset
from stylized_renderer.engine.core.runtime.backend import CpuBackend
from stylized_renderer.engine.core.world import ExtractionError, RenderExtractor, SceneRuntime, frustum_planes
from support import rigs as R

UP = np.tile([0.0, 0.0, 1.0], (4, 1))


def four_row_scene():
    """node 3: skinned mesh (prim 0 morph+skin, prim 1 skin only); node 4: static; node 5: morph only."""
    base = R.skinned_arm_scene(morph=True)
    morph_only = MeshAsset("Face", "FaceMesh", (R.quad_primitive(0, "F", morphs=(
        MorphTargetAsset("Blink", position_deltas=UP * 2, normal_deltas=None, tangent_deltas=None, key_name="Blink"),)),))
    nodes = list(base.nodes) + [R.node("Face", mesh=2, t=(0, 10, 0))]
    return SceneAsset(nodes, list(base.meshes) + [morph_only])


def runtime(scene=None):
    scene = scene or four_row_scene()
    rt = SceneRuntime(scene, CpuBackend())
    assert rt.initialize(), rt.last_error
    return rt


def by_key(items):
    return {(i.node_index, i.primitive_index): i for i in items}


def test_four_row_table():
    rt = runtime()
    rt.set_morph_weight(3, "Smile", 1.0)
    rt.set_morph_weight(5, "Blink", 0.5)
    rt.pose.set_local_transform(2, (0, 0, 0), R.quat_axis_angle([0, 0, 1], np.pi / 2), (1, 1, 1))
    rt.pose.update_world_matrices()
    assert rt.update(0.0)
    items = by_key(rt.extract())
    assert set(items) == {(3, 0), (3, 1), (4, 0), (5, 0)}
    pal = rt.palette_set.find(3, 0)
    assert pal is not None and rt.mesh_instances[3] is not None and rt.mesh_instances[5] is not None
    inst3 = rt.mesh_instances[3].primitives[0]
    inst5 = rt.mesh_instances[5].primitives[0]
    # static
    st = items[(4, 0)]
    assert rt.runtime_meshes[1] is not None
    assert st.stream is rt.runtime_meshes[1].stream(0) and st.palette is None and st.influences == 0
    assert st.local_bounds is rt.scene.meshes[1].primitives[0].bounds
    # morph only
    mo = items[(5, 0)]
    assert mo.stream is inst5.stream and mo.palette is None and mo.morphed
    assert mo.local_bounds is inst5.local_bounds and np.isclose(mo.local_bounds.maximum[2], 1.0)
    # skin only
    sk = items[(3, 1)]
    assert rt.runtime_meshes[0] is not None
    assert sk.stream is rt.runtime_meshes[0].stream(1) and sk.palette is pal and sk.influences == 4
    assert sk.local_bounds is pal.current_local_bounds
    # morph + skin: skin bounds expanded by maxDelta * max linear scale
    ms = items[(3, 0)]
    assert ms.stream is inst3.stream and ms.palette is pal and ms.morphed
    r = inst3.maximum_position_delta * pal.max_linear_scale
    assert r > 0
    assert np.allclose(ms.local_bounds.minimum, pal.current_local_bounds.minimum - r)
    assert np.allclose(ms.local_bounds.maximum, pal.current_local_bounds.maximum + r)


def test_world_matrix_and_world_bounds_from_the_pose():
    rt = runtime()
    rt.update(0.0)
    items = by_key(rt.extract())
    face = items[(5, 0)]
    w5 = rt.pose.world_matrix(5)
    assert w5 is not None
    assert np.allclose(face.world, w5)
    assert np.allclose(face.world_bounds.minimum, [0, 10, 0]) and np.allclose(face.world_bounds.maximum, [1, 11, 0])
    assert face.object_name == "Face" and face.material_name == "F" and face.cast_shadow is True
    assert face.object_id == 6


def test_morph_skin_bounds_are_conservative_for_scaled_joints():
    rt = runtime()
    rt.set_morph_weight(3, "Smile", 1.0)
    rt.pose.set_local_transform(1, (0, 0, 0), R.QI, (3, 3, 3))   # joint scale 3
    rt.pose.update_world_matrices()
    rt.update(0.0)
    pal = rt.palette_set.find(3, 0)
    assert pal is not None
    assert np.isclose(pal.max_linear_scale, 3.0)
    item = by_key(rt.extract())[(3, 0)]
    # CPU-skin the morphed vertices and check they are inside the bounds
    prim = rt.scene.meshes[0].primitives[0]
    mi3 = rt.mesh_instances[3]
    assert mi3 is not None and mi3.primitives[0].stream is not None
    pos = mi3.primitives[0].stream.positions
    m = pal.matrices[prim.joints[:, 0]]
    skinned = np.einsum("vij,vj->vi", m, np.c_[pos, np.ones(4)])[:, :3]
    assert np.all(skinned >= item.local_bounds.minimum - 1e-5) and np.all(skinned <= item.local_bounds.maximum + 1e-5)
    assert not np.all(skinned <= pal.current_local_bounds.maximum + 1e-5)   # expansion was needed


def test_dirty_pose_gives_no_items_or_a_clear_error():
    rt = runtime()
    rt.update(0.0)
    rt.pose.set_local_transform(1, (0, 1, 0), R.QI, (1, 1, 1))
    assert rt.extract() == []
    assert "dirty" in (rt.extractor.last_error or "")
    with pytest.raises(ExtractionError):
        rt.extract(strict=True)


def test_pose_of_another_scene_is_rejected():
    rt = runtime()
    other = runtime(four_row_scene())
    rt.update(0.0)
    other.update(0.0)
    ex = RenderExtractor()
    assert ex.extract(rt.scene, other.pose, rt.palette_set, rt.mesh_instances, rt.runtime_meshes) == []
    assert "scene" in (ex.last_error or "")


def test_count_mismatches_are_rejected():
    rt = runtime()
    rt.update(0.0)
    ex = RenderExtractor()
    assert ex.extract(rt.scene, rt.pose, rt.palette_set, rt.mesh_instances[:-1], rt.runtime_meshes) == []
    assert "instance" in (ex.last_error or "")
    assert ex.extract(rt.scene, rt.pose, rt.palette_set, rt.mesh_instances, rt.runtime_meshes[:-1]) == []
    assert ex.extract(rt.scene, rt.pose, rt.palette_set, rt.mesh_instances, rt.runtime_meshes)


def test_frustum_culling():
    rt = runtime()
    rt.update(0.0)
    # orthographic box x,y in [-2, 2], z in [-2, 2] (clip = identity scaled)
    vp = np.diag([0.5, 0.5, 0.5, 1.0])
    items = rt.extract(frustum=frustum_planes(vp))
    nodes = {i.node_index for i in items}
    assert 3 in nodes and 4 not in nodes and 5 not in nodes
    assert rt.extractor.culled_count == 2


def test_world_bounds_of_every_item_are_its_local_box_moved_by_its_world():
    """The batched world boxes equal each item's local box moved corner by corner
    (Bounds.transformed) under rotated, scaled and translated worlds, and the frustum keeps
    exactly the items whose box reaches into it."""
    rt = runtime()
    rt.set_morph_weight(3, "Smile", 1.0)
    rt.pose.set_local_transform(3, (0.3, -2, 1), R.quat_axis_angle([1, 2, 3], 0.7), (1.5, 0.5, 2.0))
    rt.pose.set_local_transform(4, (4, 1, 0), R.quat_axis_angle([0, 1, 0], 2.1), (0.2, 3.0, 1.0))
    rt.pose.set_local_transform(5, (-1, 10, 2), R.quat_axis_angle([1, 0, 0], -1.2), (1, 1, 1))
    rt.pose.update_world_matrices()
    assert rt.update(0.0)
    items = rt.extract()
    assert len(items) == 4
    for it in items:
        ref = it.local_bounds.transformed(it.world)
        assert np.allclose(it.world_bounds.minimum, ref.minimum, atol=1e-12)
        assert np.allclose(it.world_bounds.maximum, ref.maximum, atol=1e-12)
    vp = np.diag([0.4, 0.4, 0.4, 1.0])
    planes = frustum_planes(vp)
    kept = {(i.node_index, i.primitive_index) for i in rt.extract(frustum=planes)}
    from stylized_renderer.engine.core.world.extractor import bounds_outside
    expect = {(i.node_index, i.primitive_index) for i in items if not bounds_outside(planes, i.world_bounds)}
    assert kept == expect and 0 < len(kept) < 4
    assert rt.extractor.culled_count == 4 - len(kept)


def test_static_scene_without_palettes():
    scene = SceneAsset([R.node("Box", mesh=0)], [MeshAsset("Box", "Box", (R.quad_primitive(),))])
    rt = runtime(scene)
    assert rt.palette_set.palette_count == 0
    rt.update(0.0)
    items = rt.extract()
    assert len(items) == 1 and items[0].palette is None
