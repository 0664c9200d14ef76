"""RuntimeMesh / RuntimeMeshInstance rules (seed: RuntimeMeshInstance)."""
from __future__ import annotations

import numpy as np

from stylized_renderer.engine.core.assets import MeshAsset
from stylized_renderer.engine.core.runtime.backend import CpuBackend
from stylized_renderer.engine.core.runtime.mesh_instance import RuntimeMesh, RuntimeMeshInstance
from support import rigs as R
from support.morph_meshes import RIGHT, UP, build, instances, mesh_with, state_of, stream_of, target


def test_runtime_mesh_has_one_stream_per_primitive():
    mesh, rm, inst, be = build([target("a", UP)])
    assert rm.primitive_count == 2
    s0 = rm.stream(0)
    assert s0 is not None and s0.positions is mesh.primitives[0].positions
    assert rm.stream(5) is None


def test_primitives_parallel_and_only_morph_primitives_get_state_and_stream():
    mesh, rm, inst, be = build([target("a", UP)])
    assert len(inst.primitives) == len(mesh.primitives)
    assert inst.morph_primitive_count == 1
    assert inst.morph_state(0) is not None and inst.primitives[0].stream is not None
    assert inst.morph_state(1) is None and inst.primitives[1].stream is None
    assert inst.total_upload_count == 1               # initial upload counted


def test_initialize_requires_matching_primitive_counts():
    mesh = mesh_with([target("a", UP)])
    be = CpuBackend()
    rm = RuntimeMesh()
    rm.initialize(MeshAsset("x", "x", (mesh.primitives[0],)), be)
    assert not RuntimeMeshInstance().initialize(mesh, rm, be)


def test_update_only_when_version_changes():
    mesh, rm, inst, be = build([target("a", UP)])
    created = be.streams_created
    assert inst.update()
    assert inst.last_upload_count == 0 and be.streams_created == created
    state_of(inst, 0).set_weight(0, 0.5)
    assert inst.update()
    assert inst.last_upload_count == 1 and inst.total_upload_count == 2
    assert be.streams_created == created + 1
    assert inst.update()
    assert inst.last_upload_count == 0 and inst.total_upload_count == 2


def test_sum_of_active_targets_bounds_and_max_delta():
    mesh, rm, inst, be = build([target("a", UP), target("b", RIGHT, hi=2.0), target("c", UP * 7)])
    st = state_of(inst, 0)
    st.set_weight(0, 0.5)
    st.set_weight(1, 2.0)
    inst.update()
    p = inst.primitives[0]
    base = mesh.primitives[0].positions
    expected = base + 0.5 * UP + 2.0 * RIGHT
    assert np.allclose(stream_of(p).positions, expected)
    assert np.allclose(p.local_bounds.minimum, expected.min(0)) and np.allclose(p.local_bounds.maximum, expected.max(0))
    assert np.isclose(p.maximum_position_delta, np.sqrt(0.25 + 4.0))


def test_rebuild_is_from_the_base_never_incremental():
    third = np.full((4, 3), 1.0 / 3.0)
    mesh, rm, inst, be = build([target("t", third)])
    st = state_of(inst, 0)
    snapshots = []
    for w in (0.1, 0.7, 0.3, 0.9, 0.6):
        st.set_weight(0, w)
        inst.update()
        snapshots.append(np.array(stream_of(inst.primitives[0]).positions))
    base = mesh.primitives[0].positions
    d = mesh.primitives[0].morph_targets[0].dense_positions()
    # bit-exact float32 result of base + w*d: an incremental update would drift
    assert np.array_equal(stream_of(inst.primitives[0]).positions, base + d * np.float32(0.6))
    assert np.array_equal(snapshots[0], base + d * np.float32(0.1))   # earlier streams untouched

    mesh, rm, inst, be = build([target("a", UP)])
    st = state_of(inst, 0)
    for w in (0.3, 0.9, 0.6):
        st.set_weight(0, w)
        inst.update()
    p = inst.primitives[0]
    assert np.allclose(stream_of(p).positions, mesh.primitives[0].positions + 0.6 * UP)
    assert np.isclose(p.maximum_position_delta, 0.6)
    st.set_weight(0, 0.0)
    inst.update()
    assert np.allclose(stream_of(p).positions, mesh.primitives[0].positions)
    assert p.maximum_position_delta == 0.0
    assert np.allclose(p.local_bounds.maximum, mesh.primitives[0].bounds.maximum)


def test_muted_targets_are_ignored():
    mesh, rm, inst, be = build([target("a", UP, mute=True), target("b", RIGHT)])
    st = state_of(inst, 0)
    st.set_weight(0, 1.0)
    st.set_weight(1, 1.0)
    inst.update()
    assert np.allclose(stream_of(inst.primitives[0]).positions, mesh.primitives[0].positions + RIGHT)


def test_each_rebuild_creates_a_new_stream_and_releases_the_old():
    mesh, rm, inst, be = build([target("a", UP)])
    old = stream_of(inst.primitives[0])
    state_of(inst, 0).set_weight(0, 1.0)
    inst.update()
    new = stream_of(inst.primitives[0])
    assert new is not old and old.released and not new.released


def test_failed_upload_does_not_advance_applied_version():
    mesh, rm, inst, be = build([target("a", UP)])
    p = inst.primitives[0]
    old_stream = p.stream
    applied = p.applied_morph_version
    state_of(inst, 0).set_weight(0, 1.0)
    be.fail_stream_create = True
    assert not inst.update()
    assert p.applied_morph_version == applied and p.stream is old_stream
    assert inst.last_upload_count == 0 and inst.total_upload_count == 1
    be.fail_stream_create = False
    assert inst.update()                                  # retried next frame
    assert p.applied_morph_version == state_of(inst, 0).version
    assert inst.last_upload_count == 1


def test_normals_and_tangents_renormalised_with_base_fallback():
    nd = np.array([[1.0, 0, 0], [0, 0, -1.0], [0, 0, 0], [0, 0, 0]])   # v1 degenerates (0,0,1)-(0,0,1)=0
    td = np.array([[0, 1.0, 0], [-1.0, 0, 0], [0, 0, 0], [0, 0, 0]])   # v1 tangent degenerates too
    mesh, rm, inst, be = build([target("a", np.zeros((4, 3)), nd, td)])
    state_of(inst, 0).set_weight(0, 1.0)
    inst.update()
    s = stream_of(inst.primitives[0])
    assert np.allclose(s.normals[0], np.array([1, 0, 1]) / np.sqrt(2))
    assert np.allclose(s.normals[1], [0, 0, 1])           # fallback to base
    assert np.allclose(np.linalg.norm(s.normals, axis=1), 1.0)
    assert s.tangents.shape == (4, 4)
    assert np.allclose(s.tangents[0, :3], np.array([1, 1, 0]) / np.sqrt(2))
    assert np.allclose(s.tangents[1, :3], [1, 0, 0])      # fallback to base
    assert np.all(s.tangents[:, 3] == 1.0)                # handedness kept


def test_sparse_and_dense_targets_give_the_same_result():
    rng = np.random.default_rng(1)
    dense = rng.normal(size=(4, 3))
    sparse = np.zeros((4, 3))
    sparse[2] = (0.5, -0.25, 1.0)
    mesh, rm, inst, be = build([target("d", dense), target("s", sparse, nrm=sparse)])
    st = state_of(inst, 0)
    st.set_weights([0, 1], [0.3, 0.8])
    inst.update()
    s = stream_of(inst.primitives[0])
    assert np.allclose(s.positions, mesh.primitives[0].positions + 0.3 * dense + 0.8 * sparse, atol=1e-6)
    n = mesh.primitives[0].normals + 0.8 * sparse
    assert np.allclose(s.normals, n / np.linalg.norm(n, axis=1, keepdims=True), atol=1e-6)


def test_primitives_with_the_same_shape_keys_share_one_morph_state():
    """A mesh split by material whose primitives carry the same shape keys (names, order, ranges,
    mutes) has one MorphState for them: a frame sets their weights once, and each primitive
    still follows it (its own stream, its own deltas).  A primitive with other keys keeps its own."""
    prims = [R.quad_primitive(0, "Skin", morphs=(target("a", UP), target("b", RIGHT))),
             R.quad_primitive(1, "Lips", offset=(0, 0, 1), morphs=(target("a", RIGHT), target("b", UP))),
             R.quad_primitive(2, "Brow", offset=(0, 0, 2), morphs=(target("a", UP),))]
    inst, = instances(MeshAsset("Head", "HeadMesh", tuple(prims)))
    assert inst.morph_state(0) is inst.morph_state(1)
    assert inst.morph_state(2) is not inst.morph_state(0)
    state_of(inst, 0).set_weights([0, 1], np.array([0.5, 1.0]))
    assert inst.update() and inst.last_upload_count == 2      # both primitives of the shared state
    p0, p1 = (stream_of(inst.primitives[i]).positions for i in (0, 1))
    assert np.allclose(p0, prims[0].positions + 0.5 * UP + RIGHT)
    assert np.allclose(p1, prims[1].positions + 0.5 * RIGHT + UP)
    assert np.allclose(stream_of(inst.primitives[2]).positions, prims[2].positions)   # its own state: 0


def test_effective_weights_are_one_frozen_array_per_version():
    """What a stream keeps of the weights (the shader path keeps it without a copy) never changes
    under it: one read-only array that owns its memory per weights version, shared by the
    primitives of one state; a new version gives a new array and leaves the old one as it was."""
    prims = [R.quad_primitive(0, "Skin", morphs=(target("a", UP),)),
             R.quad_primitive(1, "Lips", offset=(0, 0, 1), morphs=(target("a", RIGHT),))]
    inst, = instances(MeshAsset("Head", "HeadMesh", tuple(prims)))
    st = inst.morph_state(0)
    st.set_weight(0, 0.25)
    a, b = inst.primitives[0], inst.primitives[1]
    w = a.effective_weights()
    assert w is a.effective_weights() is b.effective_weights()
    assert not w.flags.writeable and w.base is None
    st.set_weight(0, 0.75)
    w2 = a.effective_weights()
    assert w2 is not w and float(w[0]) == 0.25 and float(w2[0]) == 0.75


def test_linked_duplicates_at_the_same_weights_share_one_cpu_rebuild():
    """Instances of one mesh (linked duplicates: a crowd's faces settling at the same expression)
    rebuild a primitive once for the same weights: the second takes the first's arrays; other
    weights rebuild anew, and each instance draws its own weights' shape."""
    mesh = mesh_with([target("a", UP), target("b", RIGHT)])
    insts = a, b, c = instances(mesh, 3, policy="rebuild")
    for inst, w in ((a, (0.5, 1.0)), (b, (0.5, 1.0)), (c, (0.25, 0.0))):
        inst.morph_state(0).set_weights([0, 1], np.array(w))
        assert inst.update() and inst.last_upload_count == 1
    pa, pb, pc = (i.primitives[0].stream.positions for i in insts)
    base = mesh.primitives[0].positions
    assert pb is pa and np.allclose(pa, base + 0.5 * UP + RIGHT)
    assert pc is not pa and np.allclose(pc, base + 0.25 * UP)


def test_instances_at_the_same_weights_hand_out_one_frozen_array():
    """The MorphStates of one runtime (one MorphEpoch) at the same weights give the same frozen
    array (linked duplicates at one expression): bounds, weight textures and rebuilds keyed by
    its identity are found once for all of them; other weights give another array."""
    from stylized_renderer.engine.core.animation.morph import MorphEpoch

    a, b, c = instances(mesh_with([target("a", UP), target("b", RIGHT)]), 3, epoch=MorphEpoch())
    for inst, w in ((a, (0.5, 1.0)), (b, (0.5, 1.0)), (c, (0.5, 0.0))):
        inst.morph_state(0).set_weights([0, 1], np.array(w))
    wa, wb, wc = (i.primitives[0].effective_weights() for i in (a, b, c))
    assert wa is wb and wc is not wa
    assert wa.tolist() == [0.5, 1.0] and wc.tolist() == [0.5, 0.0]
