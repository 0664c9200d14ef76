"""ScenePose rules (seed: ScenePose)."""
from __future__ import annotations

import numpy as np
import pytest

from stylized_renderer.engine.core.animation import RESOLVED, RESOLVING, ScenePose
from stylized_renderer.engine.core.animation.pose import next_version
from stylized_renderer.engine.core.assets import SceneAsset
from support import rigs as R


def make_pose(scene=None):
    scene = scene or R.skinned_arm_scene()
    pose = ScenePose()
    assert pose.initialize(scene)
    return scene, pose


def world(pose: ScenePose, node: int) -> np.ndarray:
    """The node's world matrix, which the test expects (the pose is clean)."""
    w = pose.world_matrix(node)
    assert w is not None, node
    return w


def test_initialize_copies_bind_pose_and_starts_dirty():
    scene, pose = make_pose()
    assert pose.is_dirty and pose.version == 0
    assert pose.world_matrix(0) is None and pose.world_matrices is None
    assert scene.bind_locals is not None
    assert np.allclose(pose.local_matrices, scene.bind_locals)
    assert pose.update_world_matrices()
    assert np.allclose(world(pose, 2), R.translation(1, 0, 0))


def test_initialize_rejects_invalid_scene_deeply():
    bad = SceneAsset([R.node("a", parent=1), R.node("b", parent=0)])   # parent cycle
    pose = ScenePose()
    assert not pose.initialize(bad)
    assert "cycle" in (pose.last_error or "")
    nan = SceneAsset([R.node("a", t=(np.nan, 0, 0))])
    assert not ScenePose().initialize(nan)


def test_world_is_parent_world_times_local_with_pre_matrix():
    # child listed before its parent: resolution order must not depend on array order
    nodes = [R.node("child", parent=1, pre=R.translation(0, 2, 0), t=(1, 0, 0)),
             R.node("root", t=(0, 0, 3), q=R.quat_axis_angle([0, 0, 1], np.pi / 2))]
    scene = SceneAsset(nodes)
    _, pose = make_pose(scene)
    assert pose.update_world_matrices()
    root = R.translation(0, 0, 3) @ np.block([[np.array([[0, -1, 0], [1, 0, 0], [0, 0, 1]]), np.zeros((3, 1))],
                                                [np.zeros((1, 3)), np.ones((1, 1))]])
    expected_child = root @ R.translation(0, 2, 0) @ R.translation(1, 0, 0)
    assert np.allclose(world(pose, 1), root)
    assert np.allclose(world(pose, 0), expected_child)
    assert np.all(pose.resolution_states == RESOLVED)


def test_set_local_transform_marks_dirty_and_withholds_world():
    scene, pose = make_pose()
    assert pose.update_world_matrices()
    v = pose.version
    assert pose.set_local_transform(1, (0, 1, 0), R.QI, (1, 1, 1))
    assert pose.is_dirty
    assert pose.world_matrix(2) is None and pose.world_matrices is None
    assert pose.version == v                     # a write alone makes no consumable version
    assert pose.update_world_matrices()
    assert pose.version == v + 1
    w2 = pose.world_matrix(2)
    assert w2 is not None and np.allclose(w2[:3, 3], (1, 1, 0))


def test_set_local_transform_rejects_bad_input():
    _, pose = make_pose()
    assert not pose.set_local_transform(99, (0, 0, 0), R.QI, (1, 1, 1))
    assert not pose.set_local_transform(-1, (0, 0, 0), R.QI, (1, 1, 1))
    assert not pose.set_local_transform(1, (np.inf, 0, 0), R.QI, (1, 1, 1))
    assert ScenePose().set_local_transform(0, (0, 0, 0), R.QI, (1, 1, 1)) is False


def test_batch_trs_matches_pre_matrix_times_trs():
    scene, pose = make_pose()
    q = R.quat_axis_angle([0, 1, 0], 0.3)
    assert pose.set_local_trs([1, 2], [[0, 0, 1], [1, 0, 0]], [R.QI, q], [[1, 1, 1], [2, 2, 2]])
    lt = pose.local_transform(2)
    assert lt is not None
    expected = scene.pre_matrices[2] @ R.translation(1, 0, 0)
    rot = np.eye(4)
    from stylized_renderer.engine.core.assets import quat_to_matrix
    rot[:3, :3] = quat_to_matrix(q) * 2.0
    expected = expected @ rot
    assert np.allclose(lt.matrix, expected)
    assert np.allclose(lt.translation, (1, 0, 0)) and np.allclose(lt.scale, 2)


def test_set_local_matrices_writes_full_local_and_trs_is_recovered():
    scene, pose = make_pose()
    q = R.quat_axis_angle([1, 1, 0], 0.7)
    from stylized_renderer.engine.core.assets import compose_trs
    basis = compose_trs(np.array([[0.5, 0, 0]]), np.array([q]), np.array([[1.5, 1.5, 1.5]]))[0]
    m = scene.pre_matrices[2] @ basis
    assert pose.set_local_matrices([2], m[None])
    assert pose.is_dirty
    assert np.allclose(pose.local_matrices[2], m)
    lt = pose.local_transform(2)
    assert lt is not None
    assert np.allclose(lt.translation, (0.5, 0, 0)) and np.allclose(lt.scale, 1.5)
    assert np.allclose(np.abs(np.dot(lt.rotation, q)), 1.0)
    assert pose.update_world_matrices()
    assert np.allclose(world(pose, 2), m)   # parents are identity


def test_reset_to_bind_pose_restores_every_node():
    scene, pose = make_pose()
    pose.set_local_trs([1, 2], [[0, 3, 0], [0, 0, 3]], [R.QI, R.QI], [[1, 1, 1], [1, 1, 1]])
    pose.set_local_matrices([3], R.translation(9, 9, 9)[None])
    assert pose.reset_to_bind_pose()
    assert pose.is_dirty
    assert scene.bind_locals is not None
    assert np.allclose(pose.local_matrices, scene.bind_locals)


def test_cycle_fails_with_resolving_state_and_keeps_dirty():
    scene, pose = make_pose()
    assert pose.update_world_matrices()
    v = pose.version
    pose.set_local_transform(1, (0, 0, 1), R.QI, (1, 1, 1))
    # corrupt the hierarchy the pose resolves (the asset itself is immutable and validated)
    pose._parents = np.array([-1, 2, 1, 0, -1])
    pose._plan = None
    assert not pose.update_world_matrices()
    assert pose.is_dirty and pose.world_matrices is None
    assert pose.version == v
    st = pose.resolution_states
    assert st[1] == RESOLVING and st[2] == RESOLVING
    assert st[0] == RESOLVED and st[3] == RESOLVED


def test_version_skips_zero_on_wrap():
    assert next_version(0xFFFFFFFFFFFFFFFF) == 1
    assert next_version(0xFFFFFFFFFFFFFFFE) == 0xFFFFFFFFFFFFFFFF
    _, pose = make_pose()
    pose._version = 0xFFFFFFFFFFFFFFFF
    assert pose.update_world_matrices()
    assert pose.version == 1


def test_is_for_scene_is_identity_not_equality():
    a = R.skinned_arm_scene()
    b = R.skinned_arm_scene()      # same node count and content
    _, pose = make_pose(a)
    assert pose.is_for_scene(a)
    assert not pose.is_for_scene(b)
    assert not ScenePose().is_for_scene(a)


def test_world_matrices_are_read_only_views():
    _, pose = make_pose()
    pose.update_world_matrices()
    w, w0 = pose.world_matrices, pose.world_matrix(0)
    assert w is not None and w0 is not None
    with pytest.raises(ValueError):
        w[0, 0, 0] = 5.0
    with pytest.raises(ValueError):
        w0[0, 0] = 5.0


@pytest.mark.parametrize("depth", [1, 3, 9, 40])
def test_world_matrices_equal_the_chain_products_of_a_shuffled_forest(depth):
    """Several trees (a long chain with branches, nodes listed in a shuffled order, children
    before parents): every world equals the plain product of the locals along its chain,
    whatever the segment plan does with the depth."""
    rng = np.random.default_rng(depth)
    parents = []
    for i in range(3 * depth + 7):
        parents.append(-1 if i % (depth + 3) == 0 else (i - 1 if i % 4 else int(rng.integers(0, i))))
    n = len(parents)
    order = rng.permutation(n)
    where = np.empty(n, np.int64)
    where[order] = np.arange(n)
    nodes = [R.node(f"n{k}", parent=-1 if parents[order[k]] < 0 else int(where[parents[order[k]]]))
             for k in range(n)]
    scene = SceneAsset(nodes)
    pose = ScenePose()
    assert pose.initialize(scene), pose.last_error
    q = rng.normal(size=(n, 4))
    assert pose.set_local_trs(np.arange(n), rng.normal(size=(n, 3)), q, rng.uniform(0.5, 1.5, (n, 3)))
    assert pose.update_world_matrices()
    local = pose.local_matrices
    for i in range(n):
        m, k = np.eye(4), i
        while k >= 0:
            m = local[k] @ m
            k = scene.parents[k]
        assert np.allclose(world(pose, i), m, atol=1e-12 * max(1.0, np.abs(m).max())), i


def test_pre_trs_without_a_4x4_product_equals_pre_at_trs():
    """write_sampled's compose (pre's 3x3 carried through the quaternion's quadratic form, the
    translation through pre) equals pre @ T @ R @ S for sheared, scaled, translated rests and
    non-uniform scales."""
    from stylized_renderer.engine.core.animation.pose import compose_pre_trs, compose_trs_fast, pre_rotation_forms

    rng = np.random.default_rng(2)
    n = 50
    pre = np.tile(np.eye(4), (n, 1, 1))
    pre[:, :3, :3] = rng.normal(size=(n, 3, 3))
    pre[:, :3, 3] = rng.normal(size=(n, 3))
    t = rng.normal(size=(n, 3))
    q = rng.normal(size=(n, 4))
    q /= np.linalg.norm(q, axis=1)[:, None]
    s = rng.uniform(0.2, 3.0, size=(n, 3))
    out = np.full((n, 4, 4), np.nan)
    compose_pre_trs(pre, pre_rotation_forms(pre), t, q, s, out)
    assert np.allclose(out, pre @ compose_trs_fast(t, q, s), atol=1e-12)
    compose_pre_trs(pre, pre_rotation_forms(pre), t, q, None, out)
    assert np.allclose(out, pre @ compose_trs_fast(t, q, np.ones((n, 3))), atol=1e-12)


def test_update_world_below_matches_the_full_update_after_a_subset_write():
    """The spring bones' write (write_rotations) and world update (update_world_below): after
    writing the rotations of some nodes of a clean pose, their locals equal write_sampled's, and
    their worlds and their descendants' (a chain through several written nodes, a prop below one)
    equal a full update_world_matrices; the other worlds are kept."""
    turned = R.translation(0, 1, 0)
    turned[:3, :3] = [[1, 0, 0], [0, 0.6, -0.8], [0, 0.8, 0.6]]
    nodes = [R.node("root", t=(0, 0, 1)),
             R.node("a", parent=0, pre=turned, t=(0.1, 0, 0)),
             R.node("b", parent=1, t=(0, 0.5, 0), s=(1.2, 0.8, 1.0)), R.node("c", parent=2, t=(0, 0.5, 0)),
             R.node("d", parent=3, t=(0, 0.5, 0)), R.node("prop", parent=4, t=(0.2, 0, 0)),
             R.node("side", parent=0, t=(1, 0, 0)), R.node("side2", parent=6, t=(0, 1, 0))]
    scene = SceneAsset(nodes)
    below, full = ScenePose(), ScenePose()
    for p in (below, full):
        assert p.initialize(scene) and p.update_world_matrices()
    written = np.array([2, 4, 1], np.intp)
    q = np.array([R.quat_axis_angle((0, 0, 1), a) for a in (0.3, -0.7, 1.1)])
    for _step in range(3):
        below.write_rotations(written, q)
        full.write_sampled(written, q_nodes=written, q=q)
        assert np.allclose(below.local_matrices, full.local_matrices, atol=1e-15)
        v = below.version
        assert below.update_world_below(written) and full.update_world_matrices()
        assert not below.is_dirty and below.version != v
        assert below.world_matrices is not None and full.world_matrices is not None
        assert np.allclose(below.world_matrices, full.world_matrices, atol=1e-12)
        q = q[[1, 2, 0]]
    moved = ~np.isclose(below.world_matrices, ScenePose_bind_worlds(scene)).all(axis=(1, 2))  # pyright: ignore[reportCallIssue, reportArgumentType]  (world_matrices: set by initialize)
    assert moved[[1, 2, 3, 4, 5]].all() and not moved[[0, 6, 7]].any()


def ScenePose_bind_worlds(scene):
    p = ScenePose()
    assert p.initialize(scene) and p.update_world_matrices()
    return p.world_matrices
