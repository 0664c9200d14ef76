"""Meshes with shape keys on the CPU backend, built by hand for the runtime tests (``from support
import morph_meshes as M``).  bpy-free."""
from __future__ import annotations

import numpy as np

from stylized_renderer.engine.core.animation import MorphState
from stylized_renderer.engine.core.assets import MeshAsset, MorphTargetAsset
from stylized_renderer.engine.core.runtime.backend import CpuBackend
from stylized_renderer.engine.core.runtime.mesh_instance import PrimitiveInstance, RuntimeMesh, RuntimeMeshInstance
from support import rigs as R


def target(name, pos, nrm=None, tan=None, lo=0.0, hi=1.0, mute=False):
    return MorphTargetAsset(name, position_deltas=np.asarray(pos, float), normal_deltas=None if nrm is None else
                            np.asarray(nrm, float), tangent_deltas=None if tan is None else np.asarray(tan, float),
                            weight_min=lo, weight_max=hi, mute=mute, key_name=name)


def mesh_with(targets, static_second=True):
    prims = [R.quad_primitive(0, "Face", morphs=tuple(targets))]
    if static_second:
        prims.append(R.quad_primitive(1, "Cloth", offset=(0, 0, 1)))
    return MeshAsset("Head", "HeadMesh", tuple(prims))


def build(targets, backend=None):
    be = backend or CpuBackend()
    mesh = mesh_with(targets)
    rm = RuntimeMesh()
    assert rm.initialize(mesh, be)
    inst = RuntimeMeshInstance()
    assert inst.initialize(mesh, rm, be)
    return mesh, rm, inst, be


def instances(mesh, n=1, policy="auto", epoch=None):
    """``n`` instances of ``mesh`` (linked duplicates) on one RuntimeMesh and CPU backend."""
    be = CpuBackend()
    rm = RuntimeMesh()
    assert rm.initialize(mesh, be)
    out = []
    for _ in range(n):
        inst = RuntimeMeshInstance()
        inst.morph_policy = policy
        assert inst.initialize(mesh, rm, be, epoch)
        out.append(inst)
    return out


def state_of(inst: RuntimeMeshInstance, primitive_index: int = 0) -> MorphState:
    """The primitive's MorphState, which the test expects (the primitive has shape keys)."""
    st = inst.morph_state(primitive_index)
    assert st is not None, primitive_index
    return st


def stream_of(p: PrimitiveInstance):
    """The primitive instance's current stream, which the test expects (uploaded)."""
    s = p.stream
    assert s is not None
    return s


UP = np.tile([0.0, 0.0, 1.0], (4, 1))
RIGHT = np.array([[1.0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]])
