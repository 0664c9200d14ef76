"""Vertex-shader morph composition (the seed's extension for animated morphs): sparse packing,
the auto policy (animated -> shader, still -> rebuilt once), failure handling and conservative
bounds.  The GPU side is checked against Blender in test_deform.py."""
from __future__ import annotations

import numpy as np
import pytest

from stylized_renderer.engine.core.runtime.backend import CpuBackend, CpuMorphStream
from stylized_renderer.engine.core.runtime.morph_table import pack_morph_entries
from support import morph_meshes as M

UP, RIGHT, target = M.UP, M.RIGHT, M.target


def shader_backend():
    be = CpuBackend()
    be.supports_shader_morph = True
    return be


def compose_like_the_shader(prim, span, entries, weights):
    """numpy transcription of glsl/skinning.glsl morph_vertex over the packed entries."""
    v = prim.vertex_count
    dp = np.zeros((v, 3))
    for vert in range(v):
        first, count = span[vert]
        for e in entries[first:first + count]:
            dp[vert] += weights[int(e[0, 3])] * e[0, :3]
    return prim.positions + dp


def test_pack_groups_sparse_entries_by_vertex_and_target():
    d0 = np.zeros((4, 3)); d0[1] = (0, 0, 1); d0[3] = (1, 0, 0)
    d1 = np.zeros((4, 3)); d1[1] = (0, 2, 0)
    n1 = np.zeros((4, 3)); n1[2] = (1, 0, 0)                    # a normal-only change counts too
    mesh = M.mesh_with([target("a", d0), target("b", d1, nrm=n1)])
    span, entries = pack_morph_entries(mesh.primitives[0])
    assert span.dtype == np.uint32 and entries.shape == (4, 4, 4)
    assert span.tolist() == [[0, 0], [0, 2], [2, 1], [3, 1]]
    assert entries[:, 0, 3].tolist() == [0, 1, 1, 0]             # vertex-major, then target
    assert np.allclose(entries[1, 0, :3], (0, 2, 0)) and np.allclose(entries[2, 1, :3], (1, 0, 0))


def test_outline_smooth_normals_follow_the_morph_in_both_paths():
    """Regression: the outline hull expanded along the unmorphed smooth normal.  Both paths now
    compose the smooth normal's deltas: the shader's entries (4th texel) and the CPU rebuild
    agree, and differ from the base where the expression turns the surface."""
    nrm = np.zeros((4, 3))
    nrm[1] = (0.0, 0.0, -1.6)          # vertex 1's normal flips under the key
    nrm[2] = (0.9, 0.0, -1.0)
    mesh = M.mesh_with([target("turn", np.zeros((4, 3)), nrm=nrm)])
    prim = mesh.primitives[0]
    span, entries = pack_morph_entries(prim)
    _m, _rm, inst, be = M.build([target("turn", np.zeros((4, 3)), nrm=nrm)])
    M.state_of(inst, 0).set_weights([0], np.array([1.0], np.float32))
    inst.update()
    cpu = M.stream_of(inst.primitives[0]).smooth_normals
    ds = np.zeros((4, 3))
    for vert in range(4):
        first, count = span[vert]
        for e in entries[first:first + count]:
            ds[vert] += e[3, :3]
    base = prim.smooth_normals if prim.smooth_normals is not None else prim.normals
    s = base + ds
    shader = s / np.linalg.norm(s, axis=1, keepdims=True)
    assert np.allclose(shader, cpu, atol=1e-6)
    assert np.abs(cpu - base).max() > 0.5


def test_packed_entries_reproduce_the_cpu_rebuild():
    rng = np.random.default_rng(3)
    ds = []
    for _k in range(3):
        d = rng.normal(size=(4, 3))
        d[rng.random(4) < 0.5] = 0.0
        ds.append(d)
    mesh = M.mesh_with([target(f"t{k}", d, lo=-1.0) for k, d in enumerate(ds)])
    prim = mesh.primitives[0]
    span, entries = pack_morph_entries(prim)
    w = np.array([0.3, -0.7, 0.9], np.float32)
    _m, _rm, inst, _be = M.build([target(f"t{k}", d, lo=-1.0) for k, d in enumerate(ds)])
    M.state_of(inst, 0).set_weights([0, 1, 2], w)
    inst.update()
    assert np.allclose(compose_like_the_shader(prim, span, entries, w), M.stream_of(inst.primitives[0]).positions,
                       atol=1e-6)


def test_auto_policy_animated_weights_go_to_the_shader_and_settle_when_still():
    mesh, rm, inst, be = M.build([target("a", UP), target("b", RIGHT, mute=True)], shader_backend())
    p = inst.primitives[0]
    st = M.state_of(inst, 0)
    st.set_weight(0, 0.2)
    inst.update()                                   # one change: an edit -> CPU rebuild
    assert not p.shader_morph and not isinstance(p.stream, CpuMorphStream)
    st.set_weight(0, 0.4)
    st.set_weight(1, 1.0)
    inst.update()                                   # changed again next update: animated
    assert p.shader_morph and isinstance(p.stream, CpuMorphStream)
    assert p.stream.base is rm.stream(0)            # draws the shared base stream
    assert p.stream.weights.tolist() == pytest.approx([0.4, 0.0])   # muted target sends 0
    assert inst.last_upload_count == 1 and inst.shader_morph_count == 1
    st.set_weight(0, 0.6)
    inst.update()
    assert p.shader_morph and p.stream.weights[0] == pytest.approx(0.6)
    inst.update()                                   # weights held still: rebuilt once on the CPU
    assert not p.shader_morph and inst.last_upload_count == 1
    assert np.allclose(p.stream.positions, mesh.primitives[0].positions + 0.6 * UP)
    assert p.maximum_position_delta == pytest.approx(0.6)
    inst.update()
    assert inst.last_upload_count == 0              # still: nothing more
    s0, s1 = rm.stream(0), rm.stream(1)
    assert p.stream is not None and s0 is not None and s1 is not None
    assert be.live_streams == {p.stream.id, s0.id, s1.id}   # old streams released


def test_policies_rebuild_and_shader():
    mesh, rm, inst, be = M.build([target("a", UP)], shader_backend())
    p = inst.primitives[0]
    inst.morph_policy = "rebuild"
    for w in (0.1, 0.2, 0.3):
        M.state_of(inst, 0).set_weight(0, w)
        inst.update()
        assert not p.shader_morph
    inst.morph_policy = "shader"
    inst.update()                                   # forced: even still weights compose in the shader
    assert p.shader_morph and inst.last_upload_count == 1
    inst.update()
    assert p.shader_morph and inst.last_upload_count == 0


def test_backend_without_shader_morph_always_rebuilds():
    mesh, rm, inst, be = M.build([target("a", UP)])
    inst.morph_policy = "shader"
    for w in (0.1, 0.2, 0.3):
        M.state_of(inst, 0).set_weight(0, w)
        inst.update()
        assert not inst.primitives[0].shader_morph


def test_failed_weight_upload_does_not_advance_applied_version():
    mesh, rm, inst, be = M.build([target("a", UP)], shader_backend())
    p = inst.primitives[0]
    st = M.state_of(inst, 0)
    st.set_weight(0, 0.2)
    inst.update()
    applied, stream = p.applied_morph_version, p.stream
    st.set_weight(0, 0.5)
    be.fail_stream_create = True
    assert not inst.update()
    assert p.applied_morph_version == applied and p.stream is stream and inst.last_upload_count == 0
    be.fail_stream_create = False
    st.set_weight(0, 0.7)
    assert inst.update() and p.shader_morph and p.applied_morph_version == st.version


class RefreshingBackend(CpuBackend):
    """A backend that gives a shader-morph stream new weights in place (as GpuBackend does),
    or raises there (``fail``)."""

    def __init__(self, fail=False):
        super().__init__()
        self.supports_shader_morph = True
        self.fail = fail
        self.refreshed = 0

    def refresh_morph_stream(self, stream, base_stream, weights):
        if self.fail:
            raise RuntimeError("texture allocation failed")
        if stream.base is not base_stream:
            return False
        stream.weights = np.array(weights, np.float32)
        self.refreshed += 1
        return True


@pytest.mark.parametrize("fail", [False, True])
def test_animated_weights_refresh_the_shader_stream_or_make_a_new_one(fail):
    """Frame to frame, a shader-composed primitive's stream takes the new weights in place; when
    the backend's refresh raises, a new stream is made and the update still succeeds."""
    mesh, rm, inst, be = M.build([target("a", UP), target("b", RIGHT)], RefreshingBackend(fail))
    inst.morph_policy = "shader"
    p = inst.primitives[0]
    st = M.state_of(inst, 0)
    st.set_weights([0, 1], np.array([0.2, 0.0], np.float32))
    assert inst.update() and p.shader_morph
    first = M.stream_of(p)
    for w in (0.4, 0.6):
        st.set_weights([0, 1], np.array([w, 1.0 - w], np.float32))
        assert inst.update() and p.shader_morph and inst.last_upload_count == 1
        assert np.allclose(M.stream_of(p).weights, [w, 1.0 - w]) and not M.stream_of(p).released
        assert p.applied_morph_version == st.version
    assert (p.stream is first) == (not fail)
    assert be.refreshed == (0 if fail else 2)
    assert first.released == fail


def test_shader_mode_bounds_and_max_delta_are_conservative():
    rng = np.random.default_rng(7)
    ds = [rng.normal(size=(4, 3)) for _ in range(4)]
    targets = [target(f"t{k}", d, lo=-1.0, hi=2.0) for k, d in enumerate(ds)]
    mesh, rm, inst, be = M.build(targets, shader_backend())
    inst.morph_policy = "shader"
    p = inst.primitives[0]
    base = mesh.primitives[0].positions
    for _ in range(20):
        w = rng.uniform(-1.0, 2.0, 4).astype(np.float32)
        w[rng.random(4) < 0.3] = 0.0
        M.state_of(inst, 0).set_weights(range(4), w)
        inst.update()
        assert p.shader_morph
        exact = base + sum(w[k] * ds[k] for k in range(4))
        assert np.all(p.local_bounds.minimum <= exact.min(0) + 1e-6)
        assert np.all(p.local_bounds.maximum >= exact.max(0) - 1e-6)
        assert p.maximum_position_delta >= np.linalg.norm(exact - base, axis=1).max() - 1e-6


def test_linked_duplicates_share_bounds_only_at_the_same_weights():
    """Two instances of one primitive's shape keys (linked duplicates: a crowd's faces) share the
    conservative-bounds product through the runtime's dict: at the same weights the second takes
    the first's result, at other weights each gets bounds containing its own exact shape."""
    from stylized_renderer.engine.core.runtime.mesh_instance import RuntimeMesh, RuntimeMeshInstance

    rng = np.random.default_rng(3)
    ds = [rng.normal(size=(4, 3)) for _ in range(3)]
    targets = [target(f"t{k}", d, lo=-1.0, hi=2.0) for k, d in enumerate(ds)]
    be = shader_backend()
    mesh = M.mesh_with(targets)
    shared = {}
    insts = []
    for _ in range(2):
        rm = RuntimeMesh()
        assert rm.initialize(mesh, be)
        inst = RuntimeMeshInstance()
        assert inst.initialize(mesh, rm, be, shared_bounds=shared)
        inst.morph_policy = "shader"
        insts.append(inst)
    assert len(shared) == 1
    base = mesh.primitives[0].positions
    for step in range(12):
        ws = [rng.uniform(-1.0, 2.0, 3).astype(np.float32) for _ in insts]
        if step % 3 == 0:
            ws[1] = ws[0].copy()
        for inst, w in zip(insts, ws):
            inst.morph_state(0).set_weights(range(3), w)
            assert inst.update()
        for inst, w in zip(insts, ws):
            p = inst.primitives[0]
            assert p.shader_morph
            exact = base + sum(w[k] * ds[k] for k in range(3))
            assert np.all(p.local_bounds.minimum <= exact.min(0) + 1e-6), step
            assert np.all(p.local_bounds.maximum >= exact.max(0) - 1e-6), step
            assert p.maximum_position_delta >= np.linalg.norm(exact - base, axis=1).max() - 1e-6
        a, b = (inst.primitives[0].local_bounds for inst in insts)
        assert (a is b) == (step % 3 == 0), step


def test_a_primitive_the_shader_path_cannot_hold_is_rebuilt_instead():
    be = shader_backend()

    def too_big(primitive, base_stream, weights):
        raise ValueError("deltas exceed the largest texture")
    be.create_morph_stream = too_big
    mesh, rm, inst, _ = M.build([target("a", UP)], be)
    p = inst.primitives[0]
    for w in (0.1, 0.2, 0.3):
        M.state_of(inst, 0).set_weight(0, w)
        assert inst.update()
        assert not p.shader_morph and inst.last_upload_count == 1
    assert p.shader_unavailable
    assert np.allclose(M.stream_of(p).positions, mesh.primitives[0].positions + 0.3 * UP)
    assert inst.update() and inst.last_upload_count == 0
