"""Synthetic rigs (built by hand with the asset types) shared by the runtime-core tests
(``from support import rigs as R``).  bpy-free: tests/core/ imports it without Blender."""
from __future__ import annotations

import pathlib

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]

from stylized_renderer.engine.core.assets import (
    NODE_BONE,
    NODE_OBJECT,
    AnimationClipAsset,
    MeshAsset,
    MorphTargetAsset,
    NodeAnimationChannelAsset,
    PrimitiveAsset,
    SceneAsset,
    SceneNodeAsset,
    SkinAsset,
)

I4 = np.eye(4)
QI = np.array([1.0, 0.0, 0.0, 0.0])


def translation(x, y, z):
    m = np.eye(4)
    m[:3, 3] = (x, y, z)
    return m


def quat_axis_angle(axis, angle):
    axis = np.asarray(axis, dtype=np.float64)
    axis = axis / np.linalg.norm(axis)
    return np.concatenate([[np.cos(angle / 2)], np.sin(angle / 2) * axis])


def node(name, parent=-1, kind=NODE_OBJECT, pre=None, t=(0, 0, 0), q=QI, s=(1, 1, 1), obj=None, bone=None, mesh=-1):
    return SceneNodeAsset(name=name, kind=kind, parent=parent, pre_matrix=I4 if pre is None else pre,
                          bind_translation=np.array(t, float), bind_rotation=np.array(q, float),
                          bind_scale=np.array(s, float), object_name=obj or name, bone_name=bone, mesh_index=mesh)


def quad_primitive(material_index=0, name="Mat", offset=(0.0, 0.0, 0.0), skin=None, joints=None, weights=None,
                   morphs=(), tangents=True):
    pos = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]], dtype=np.float32) + np.asarray(offset, np.float32)
    nrm = np.tile(np.array([0, 0, 1], np.float32), (4, 1))
    tan = np.tile(np.array([1, 0, 0, 1], np.float32), (4, 1)) if tangents else None
    return PrimitiveAsset(material_index=material_index, material_name=name, positions=pos, normals=nrm,
                          indices=np.array([[0, 1, 2], [0, 2, 3]], np.uint32), source_vertices=np.arange(4),
                          tangents=tan, uv0=pos[:, :2].copy(), joints=joints, weights=weights, skin=skin,
                          morph_targets=morphs)


def chain_skin(joint_nodes, joint_world_bind, mesh_world_bind=I4, bmin=None, bmax=None):
    """Skin with inverse binds = inv(jointWorldBind) @ meshWorldBind."""
    j = len(joint_nodes)
    ibm = np.array([np.linalg.inv(joint_world_bind[k]) @ mesh_world_bind for k in range(j)])
    if bmin is None:
        bmin = np.zeros((j, 3))
        bmax = np.ones((j, 3))
    return SkinAsset(joint_node_indices=np.array(joint_nodes), inverse_bind_matrices=ibm,
                     joint_bounds_min=np.array(bmin, float), joint_bounds_max=np.array(bmax, float))


def skinned_arm_scene(two_prims_same_skin=True, morph=False, extra_static=True):
    """Armature (node 0) -> bones 1 (root at origin) -> 2 (at x=1); mesh node 3 skinned to both.

    Mesh vertices x in [0,1] -> bone 1, x in [1,2] -> bone 2.
    """
    nodes = [
        node("Arm"),
        node("Arm/B1", parent=0, kind=NODE_BONE, obj="Arm", bone="B1"),
        node("Arm/B2", parent=1, kind=NODE_BONE, pre=translation(1, 0, 0), obj="Arm", bone="B2"),
        node("Body", parent=0, mesh=0),
    ]
    jwb = [I4, translation(1, 0, 0)]
    skin = chain_skin([1, 2], jwb, bmin=[[0, 0, 0], [1, 0, 0]], bmax=[[1, 1, 0], [2, 1, 0]])
    joints = np.array([[0, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]], np.uint32)
    weights = np.array([[1, 0, 0, 0]] * 4, np.float32)
    morphs = ()
    if morph:
        morphs = (MorphTargetAsset("Smile", position_deltas=np.tile([0, 0, 0.5], (4, 1)), normal_deltas=None,
                                   tangent_deltas=None, key_name="Smile"),)
    prims = [quad_primitive(0, "A", skin=skin, joints=joints, weights=weights, morphs=morphs)]
    if two_prims_same_skin:
        skin_b = chain_skin([1, 2], jwb, bmin=[[0, -1, 0], [1, 0, 0]], bmax=[[0.5, 1, 0], [2, 2, 0]])
        prims.append(quad_primitive(1, "B", offset=(0, 0, 0), skin=skin_b, joints=joints, weights=weights))
    meshes = [MeshAsset("Body", "BodyMesh", tuple(prims))]
    if extra_static:
        nodes.append(node("Prop", mesh=1, t=(5, 0, 0)))
        meshes.append(MeshAsset("Prop", "PropMesh", (quad_primitive(0, "P"),)))
    return SceneAsset(nodes, meshes)


def vec_channel(node_index, times, values, kind="translation"):
    kw = {f"{kind}_times": np.asarray(times, float), f"{kind}_values": np.asarray(values, float)}
    return NodeAnimationChannelAsset(node_index=node_index, **kw)


def clip(channels=(), duration=1.0, morph_channels=(), name="clip"):
    return AnimationClipAsset(name=name, duration_seconds=duration, channels=channels, morph_channels=morph_channels)
