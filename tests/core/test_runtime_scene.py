"""SceneRuntime: frame order, player and timeline sources, morph channel push, stats."""
from __future__ import annotations

import numpy as np

from stylized_renderer.engine.core.animation import MorphState
from stylized_renderer.engine.core.assets import MorphWeightChannelAsset
from stylized_renderer.engine.core.runtime.backend import CpuBackend
from stylized_renderer.engine.core.world import SceneRuntime
from support import rigs as R
from support.morph_meshes import stream_of


def runtime(scene=None):
    rt = SceneRuntime(scene or R.skinned_arm_scene(morph=True), CpuBackend())
    assert rt.initialize(), rt.last_error
    return rt


def morph_state(rt: SceneRuntime, node: int, primitive: int = 0) -> MorphState:
    """The MorphState of the node's primitive, which the test expects (a mesh with shape keys)."""
    inst = rt.mesh_instances[node]
    assert inst is not None, node
    st = inst.morph_state(primitive)
    assert st is not None, (node, primitive)
    return st


def rot_clip(with_morph=True):
    mc = ([MorphWeightChannelAsset(3, "Smile", times=np.array([0.0, 1.0]), values=np.array([0.0, 1.0]))]
          if with_morph else [])
    return R.clip([R.vec_channel(2, [0, 1], [R.QI, R.quat_axis_angle([0, 0, 1], 1.0)], "rotation")], 1.0, mc)


def test_initialize_builds_everything():
    rt = runtime()
    assert rt.pose.is_for_scene(rt.scene) and not rt.pose.is_dirty
    assert len(rt.runtime_meshes) == len(rt.scene.meshes)
    assert len(rt.mesh_instances) == rt.scene.node_count
    assert rt.mesh_instances[3] is not None and rt.mesh_instances[4] is None
    assert rt.morph_key_names(3) == ["Smile"]
    assert rt.stats.palette_count == 1 and rt.stats.joint_matrix_count == 2


def test_player_frame_then_paused_frame_counts():
    rt = runtime()
    rt.set_clip(rot_clip())
    rt.player.play()
    assert rt.update(0.5)
    assert rt.stats.palette_uploads == 1
    assert rt.stats.morph_uploads == 1                        # Smile sampled to 0.5
    assert np.isclose(morph_state(rt, 3).weight(0), 0.5)
    rt.player.pause()
    assert rt.update(0.5)
    assert rt.stats.palette_uploads == 0 and rt.stats.morph_uploads == 0
    assert rt.stats.morph_uploads_total == 2                  # initial + one rebuild
    rt.player.seek(0.25)
    assert rt.update(0.0)
    assert rt.stats.palette_uploads == 1 and rt.stats.morph_uploads == 1


def test_timeline_mode_matrices_and_morph_values():
    rt = runtime()
    m = rt.scene.pre_matrices[2].copy()
    m[:3, :3] = [[0, -1, 0], [1, 0, 0], [0, 0, 1]]
    assert rt.update_timeline([2], m[None], {3: [0.25]})
    assert rt.stats.palette_uploads == 1 and rt.stats.morph_uploads == 1
    pal = rt.palette_set.find(3, 0)
    assert pal is not None
    assert np.allclose(pal.matrices[1] @ [2, 0, 0, 1], [1, 1, 0, 1], atol=1e-6)
    # same frame again: the session's timeline reader hands over the same locals and values
    # (it never passes None), and nothing uploads
    assert rt.update_timeline([2], m[None].copy(), {3: [0.25]})
    assert rt.stats.morph_uploads == 0 and rt.stats.palette_uploads == 0
    assert rt.update_timeline([2], m[None].copy(), {3: [0.25]})
    assert rt.stats.morph_uploads == 0 and rt.stats.palette_uploads == 0


def test_set_morph_weight_by_name_reaches_every_primitive():
    rt = runtime()
    assert rt.set_morph_weight(3, "Smile", 2.0)               # clamped to the key's max 1.0
    assert morph_state(rt, 3).weight(0) == 1.0
    assert not rt.set_morph_weight(3, "Nope", 1.0)
    rt.reset_morphs()
    assert morph_state(rt, 3).active_count == 0


def test_release_frees_backend_resources():
    rt = runtime()
    be = rt.backend
    rt.update(0.0)
    rt.release()
    assert be.palettes_released == be.palette_buffers_created
    assert be.streams_released == be.streams_created and not be.live_streams


def test_settled_morph_instances_are_skipped_until_a_weight_changes():
    """Instances whose primitives all settled are not looked at again (the runtime's idle list)
    until some weight changes; the change is then picked up, and the stats stay whole."""
    rt = runtime()
    inst = rt.mesh_instances[3]
    assert inst is not None
    assert rt.set_morph_weight(3, "Smile", 0.4)
    for _ in range(4):
        assert rt.update_timeline()
    assert inst.idle and rt._hot == [] and rt.stats.active_target_count == 1
    total = rt.stats.morph_uploads_total
    calls = []
    real = inst.update
    inst.update = lambda: calls.append(1) or real()
    assert rt.update_timeline() and calls == []                     # skipped
    assert rt.stats.active_target_count == 1 and rt.stats.morph_uploads_total == total
    assert rt.set_morph_weight(3, "Smile", 0.9)
    assert rt.update_timeline() and calls == [1] and rt.stats.morph_uploads == 1
    prim = rt.scene.meshes[0].primitives[0]
    assert np.allclose(stream_of(inst.primitives[0]).positions, prim.positions + 0.9 * prim.morph_targets[0].dense_positions(),
                       atol=1e-6)
    rt.set_morph_policy("rebuild")
    assert rt.update_timeline() and len(calls) == 2                 # a policy change: looked at again


def test_a_weight_change_in_one_runtime_does_not_wake_another_runtimes_idle_instances():
    """The morph epoch belongs to its runtime (issue 24): a weight changed in one session's
    runtime leaves another runtime's settled instances skipped (a shared class counter woke them)."""
    a, b = runtime(), runtime()
    for rt in (a, b):
        assert rt.set_morph_weight(3, "Smile", 0.4)
        for _ in range(4):
            assert rt.update_timeline()
        assert rt.mesh_instances[3] is not None and rt.mesh_instances[3].idle and rt._hot == []
    calls = []
    inst = b.mesh_instances[3]
    assert inst is not None
    real = inst.update
    inst.update = lambda: calls.append(1) or real()
    assert a.set_morph_weight(3, "Smile", 0.9)
    assert a.update_timeline() and b.update_timeline()
    assert calls == []                                              # b: nothing of its own changed
    assert b.set_morph_weight(3, "Smile", 0.7)
    assert b.update_timeline() and calls == [1]                     # its own change is picked up


def test_a_non_finite_weight_is_refused_by_the_primitives_that_hold_its_key_alone():
    """Weights with one NaN: the primitive holding that key keeps its weights, a primitive with
    only finite keys takes its own; the call reports False."""
    from dataclasses import replace

    from stylized_renderer.engine.core.assets import MeshAsset, MorphTargetAsset, SceneAsset

    sc = R.skinned_arm_scene(morph=True)
    body = sc.meshes[0]
    frown = MorphTargetAsset("Frown", position_deltas=np.tile([0, 0, -0.5], (4, 1)), normal_deltas=None,
                             tangent_deltas=None, key_name="Frown")
    prims = [body.primitives[0], replace(body.primitives[1], morph_targets=(frown,))]
    rt = runtime(SceneAsset(sc.nodes, [MeshAsset(body.name, body.mesh_name, tuple(prims))] + list(sc.meshes[1:])))
    assert rt.morph_key_names(3) == ["Smile", "Frown"]
    assert not rt.set_node_morph_weights(3, [0.5, np.nan])
    assert morph_state(rt, 3, 0).weight(0) == 0.5    # Smile: finite, taken
    assert morph_state(rt, 3, 1).weight(0) == 0.0    # Frown: NaN, refused
    assert rt.set_node_morph_weights(3, [0.25, 0.75])
    assert morph_state(rt, 3, 1).weight(0) == 0.75


def test_the_singular_inverse_rule_comes_from_whoever_makes_the_runtime():
    """Issue 24: ``finite.object_inv`` no longer asks bpy which Blender runs; the session tells the
    runtime (``SceneRuntime(zero_singular_inverse=...)``: Blender 4.x zeroes the inverse of a
    singular mesh matrix, so the skinned mesh collapses onto its origin; 5.x keeps the axes that
    still have a scale).  The mesh node scaled to 0 along y through the timeline's matrices."""
    flat = np.diag([1.0, 0.0, 1.0, 1.0])
    out = {}
    for rule in (False, True):
        rt = SceneRuntime(R.skinned_arm_scene(extra_static=False), CpuBackend(), zero_singular_inverse=rule)
        assert rt.initialize(), rt.last_error
        assert rt.update_timeline(np.array([3]), flat[None])
        out[rule] = [np.array(g.palette.matrices) for g in rt.palette_set.palette_groups]
    assert all(np.abs(m).max() == 0.0 for m in out[True])                      # 4.x: collapsed
    assert all(np.isfinite(m).all() and np.abs(m[:, 0, 0]).min() > 0.5 for m in out[False])  # 5.x: x kept
