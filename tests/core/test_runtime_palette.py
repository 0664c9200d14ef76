"""SkinningPalette / SkinningPaletteGroup / SkinningPaletteSet rules."""
from __future__ import annotations

import numpy as np

from stylized_renderer.engine.core.animation import AnimationPlayer, ScenePose
from stylized_renderer.engine.core.assets import MeshAsset, SceneAsset
from stylized_renderer.engine.core.runtime.backend import CpuBackend
from stylized_renderer.engine.core.runtime.palette import SkinningPalette, SkinningPaletteSet
from support import rigs as R


def build(scene=None, backend=None):
    scene = scene or R.skinned_arm_scene()
    backend = backend or CpuBackend()
    pose = ScenePose()
    assert pose.initialize(scene)
    assert pose.update_world_matrices()
    ps = SkinningPaletteSet()
    assert ps.initialize(scene, backend), ps.last_error
    return scene, pose, ps, backend


def palette(ps: SkinningPaletteSet, node: int, primitive: int) -> SkinningPalette:
    """The primitive's palette, which the test expects (a skinned primitive)."""
    pal = ps.find(node, primitive)
    assert pal is not None, (node, primitive)
    return pal


def bend(pose, angle=np.pi / 2):
    pose.set_local_transform(2, (0, 0, 0), R.quat_axis_angle([0, 0, 1], angle), (1, 1, 1))
    assert pose.update_world_matrices()


def test_skin_matrix_is_inverse_mesh_world_joint_world_inverse_bind():
    scene, pose, ps, be = build()
    # move the mesh node and the armature to make inverse(meshWorld) matter
    pose.set_local_transform(3, (0, 0, 2), R.QI, (1, 1, 1))
    pose.set_local_transform(0, (3, 0, 0), R.quat_axis_angle([0, 1, 0], 0.4), (1, 1, 1))
    bend(pose)
    assert ps.update(pose)
    w = pose.world_matrices
    assert w is not None
    pal = palette(ps, 3, 0)
    sk = scene.meshes[0].primitives[0].skin
    for j, jn in enumerate(sk.joint_node_indices):
        expected = np.linalg.inv(w[3]) @ w[jn] @ sk.inverse_bind_matrices[j]
        assert np.allclose(pal.matrices[j], expected, atol=1e-6)
    assert pal.matrices.dtype == np.float32 and pal.matrices.shape == (2, 4, 4)
    handle = pal.gpu_buffer
    assert handle is not None
    assert np.array_equal(handle.matrices, pal.matrices)   # what the backend received


def test_bind_pose_gives_identity_palette():
    scene, pose, ps, be = build()
    assert ps.update(pose)
    assert np.allclose(palette(ps, 3, 0).matrices, np.eye(4)[None], atol=1e-6)


def test_identical_skins_share_one_palette_with_merged_bounds():
    scene, pose, ps, be = build()
    assert ps.palette_count == 1 and ps.joint_matrix_count == 2
    assert ps.find(3, 0) is ps.find(3, 1)
    assert be.palette_buffers_created == 1
    g = ps.palette_groups[0]
    assert g.members == [(3, 0), (3, 1)]
    # joint 0: A [0,0,0]-[1,1,0] U B [0,-1,0]-[0.5,1,0]; joint 1: A [1,0,0]-[2,1,0] U B [1,0,0]-[2,2,0]
    assert np.allclose(g.skin.joint_bounds_min, [[0, -1, 0], [1, 0, 0]])
    assert np.allclose(g.skin.joint_bounds_max, [[1, 1, 0], [2, 2, 0]])
    assert ps.update(pose)
    b = palette(ps, 3, 0).current_local_bounds
    assert np.allclose(b.minimum, [0, -1, 0]) and np.allclose(b.maximum, [2, 2, 0])


def _scene_with_second_skin(modify):
    base = R.skinned_arm_scene(extra_static=False)
    prims = list(base.meshes[0].primitives)
    sk = prims[1].skin
    jn, ibm = modify(np.array(sk.joint_node_indices), np.array(sk.inverse_bind_matrices))
    from stylized_renderer.engine.core.assets import SkinAsset
    sk2 = SkinAsset(jn, ibm, sk.joint_bounds_min, sk.joint_bounds_max)
    p = prims[1]
    prims[1] = R.quad_primitive(1, "B", skin=sk2, joints=p.joints, weights=p.weights)
    return SceneAsset(base.nodes, [MeshAsset("Body", "BodyMesh", tuple(prims))])


def test_grouping_requires_exact_joint_indices():
    def swap(jn, ibm):
        return jn[::-1].copy(), ibm[::-1].copy()
    _, _, ps, _ = build(_scene_with_second_skin(swap))
    assert ps.palette_count == 2 and ps.find(3, 0) is not ps.find(3, 1)


def test_grouping_requires_exact_inverse_bind_equality():
    def nudge(jn, ibm):
        ibm = ibm.copy()
        ibm[1, 0, 3] = np.nextafter(ibm[1, 0, 3], 1.0)   # one ulp: not the same skin
        return jn, ibm
    _, _, ps, _ = build(_scene_with_second_skin(nudge))
    assert ps.palette_count == 2 and ps.joint_matrix_count == 4


def test_same_skin_on_different_mesh_nodes_is_not_shared():
    base = R.skinned_arm_scene(extra_static=False)
    nodes = list(base.nodes) + [R.node("Body2", parent=0, mesh=1)]
    scene = SceneAsset(nodes, [base.meshes[0], base.meshes[0]])
    _, _, ps, _ = build(scene)
    assert ps.palette_count == 2
    assert ps.find(3, 0) is not ps.find(4, 0)


def test_lookup_mirrors_nodes_and_primitives():
    scene, pose, ps, be = build()
    assert len(ps.palette_lookup) == scene.node_count
    assert ps.palette_lookup[4] == [None]               # static prop
    assert ps.palette_lookup[0] == []                   # armature, no mesh
    assert ps.find(4, 0) is None and ps.find(3, 7) is None and ps.find(99, 0) is None


def test_pose_version_skip_with_upload_count_reset_first():
    scene, pose, ps, be = build()
    assert ps.update(pose)
    assert ps.last_upload_count == 1 and ps.last_pose_version == pose.version
    uploads = be.palette_uploads
    assert ps.update(pose)                               # same version: skip
    assert ps.last_upload_count == 0
    assert be.palette_uploads == uploads
    bend(pose)
    assert ps.update(pose)
    assert ps.last_upload_count == 1 and be.palette_uploads == uploads + 1


def test_version_zero_is_never_skipped():
    scene, pose, ps, be = build()
    ps.last_pose_version = 0
    pose._version = 0
    assert ps.update(pose)
    assert ps.last_upload_count == 1


def test_failed_group_does_not_advance_cached_version():
    base = R.skinned_arm_scene(extra_static=False)
    nodes = list(base.nodes) + [R.node("Body2", parent=0, mesh=1)]
    scene = SceneAsset(nodes, [base.meshes[0], base.meshes[0]])
    scene, pose, ps, be = build(scene)
    assert ps.palette_count == 2
    be.fail_palette_upload = {ps.palette_groups[1].palette.gpu_buffer}
    bend(pose)
    assert not ps.update(pose)
    assert ps.last_pose_version != pose.version
    assert ps.last_upload_count == 1
    assert not ps.palette_groups[1].palette.is_gpu_ready()
    be.fail_palette_upload = False
    assert ps.update(pose)                               # retried: same version, not skipped
    assert ps.last_upload_count == 2 and ps.last_pose_version == pose.version


def test_dirty_or_foreign_pose_is_rejected_cheaply():
    scene, pose, ps, be = build()
    pose.set_local_transform(1, (0, 1, 0), R.QI, (1, 1, 1))
    assert not ps.update(pose)                            # dirty
    other = ScenePose()
    other.initialize(R.skinned_arm_scene())
    other.update_world_matrices()
    assert not ps.update(other)


def test_initialize_rejects_invalid_scene():
    bad = SceneAsset([R.node("a", parent=1), R.node("b", parent=0)])
    ps = SkinningPaletteSet()
    assert not ps.initialize(bad, CpuBackend())


def test_palette_ready_state_and_clear_keeps_buffer():
    be = CpuBackend()
    pal = SkinningPalette()
    assert not pal.is_gpu_ready()
    assert pal.initialize(be, 2)
    assert not pal.is_gpu_ready()                          # nothing uploaded yet
    eye = np.tile(np.eye(4), (2, 1, 1))
    assert pal.update(np.eye(4), eye, eye)
    assert pal.is_gpu_ready()
    buf = pal.gpu_buffer
    assert buf is not None
    pal.clear()
    assert pal.gpu_buffer is buf and pal.joint_capacity == 2
    assert not pal.is_gpu_ready() and pal.matrices.shape[0] == 0 and pal.current_local_bounds.is_empty
    assert pal.initialize(be, 2) and pal.gpu_buffer is buf   # same capacity: buffer reused
    assert pal.initialize(be, 3) and pal.gpu_buffer is not buf
    assert buf.released
    assert not pal.update(np.eye(4), eye, eye)              # joint count != capacity
    assert not SkinningPalette().initialize(be, 0)


def test_failed_upload_leaves_palette_not_ready():
    be = CpuBackend()
    pal = SkinningPalette()
    pal.initialize(be, 1)
    be.fail_palette_upload = True
    assert not pal.update(np.eye(4), np.eye(4)[None], np.eye(4)[None])
    assert not pal.is_gpu_ready()


def test_dynamic_bounds_follow_the_pose():
    scene, pose, ps, be = build(R.skinned_arm_scene(two_prims_same_skin=False))
    bend(pose, np.pi / 2)      # bone 2 turns +90 deg about z at x=1: [1,2]x[0,1] -> [0,1]x[0,1] rotated
    assert ps.update(pose)
    b = palette(ps, 3, 0).current_local_bounds
    # joint 1 box corners (1..2, 0..1) rotated about (1,0): x in [0,1], y in [0,1]
    assert np.allclose(b.minimum, [0, 0, 0]) and np.allclose(b.maximum, [1, 1, 0])
    # a linear-scale bound used for morph expansion: rigid motion -> 1
    assert np.isclose(palette(ps, 3, 0).max_linear_scale, 1.0)


def test_timeline_matrices_drive_palettes_without_a_player():
    scene, pose, ps, be = build()
    m = scene.pre_matrices[2] @ np.diag([1, 1, 1, 1.0])
    m = m.copy()
    m[:3, :3] = [[0, -1, 0], [1, 0, 0], [0, 0, 1]]
    assert pose.set_local_matrices([2], m[None])
    assert pose.update_world_matrices()
    assert ps.update(pose)
    pal = palette(ps, 3, 0)
    assert np.allclose(pal.matrices[1] @ [2, 0, 0, 1], [1, 1, 0, 1], atol=1e-6)


def test_player_paused_frame_uploads_nothing():
    scene, pose, ps, be = build()
    p = AnimationPlayer()
    p.set_clip(R.clip([R.vec_channel(2, [0, 1], [R.QI, R.quat_axis_angle([0, 0, 1], 1.0)], "rotation")], 1.0))
    p.play()
    p.update(0.1, scene, pose)
    assert ps.update(pose) and ps.last_upload_count == 1
    p.pause()
    p.update(0.1, scene, pose)
    assert ps.update(pose) and ps.last_upload_count == 0
