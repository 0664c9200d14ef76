"""Reference checks of the importer (test_importer, test_importer_testdata): ``world_check`` (node
bind worlds against Blender's evaluated worlds), ``sample`` / ``channel_matrix`` (baked keys read
back), ``rel_close``, ``cpu_skin`` (linear blend skinning of a primitive with Blender's current
pose) and ``evaluated_positions`` (Blender's evaluated vertices).  Importing this module also
imports the repository root as the package ``stylized_renderer`` when conftest has not
(test_importer_fcurve relies on that set-up)."""
from __future__ import annotations

import importlib.util
import pathlib
import sys

import bpy
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if "stylized_renderer" not in sys.modules:  # conftest normally did this already
    _spec = importlib.util.spec_from_file_location("stylized_renderer", ROOT / "__init__.py",
                                                   submodule_search_locations=[str(ROOT)])
    assert _spec is not None and _spec.loader is not None, ROOT / "__init__.py"
    _m = importlib.util.module_from_spec(_spec)
    sys.modules["stylized_renderer"] = _m
    _spec.loader.exec_module(_m)

from stylized_renderer.engine.blender import importer  # noqa: E402
from stylized_renderer.engine.core.assets import compose_trs  # noqa: E402


def world_check(asset, tol=1e-5):
    """Node bind worlds equal Blender's evaluated object worlds and armature_world @ the pose
    bone's matrix (the bind pose is the rig's own pose: what Blender shows)."""
    W = importer.node_world_matrices(asset)
    dg = bpy.context.evaluated_depsgraph_get()
    for i, nd in enumerate(asset.nodes):
        ob = bpy.data.objects[nd.object_name].evaluated_get(dg)
        ref = np.array(ob.matrix_world)
        if nd.bone_name is not None:
            ref = ref @ np.array(ob.pose.bones[nd.bone_name].matrix)
        assert np.allclose(W[i], ref, atol=tol), nd.name


def sample(times, values, t):
    """Test-local sampler: linear interpolation of baked keys (identity at the key times)."""
    if len(times) == 1:
        return values[0]
    i = int(np.clip(np.searchsorted(times, t, side="right") - 1, 0, len(times) - 2))
    f = 0.0 if times[i + 1] == times[i] else np.clip((t - times[i]) / (times[i + 1] - times[i]), 0, 1)
    return values[i] * (1 - f) + values[i + 1] * f


def channel_matrix(node, ch, t):
    tr = sample(ch.translation_times, ch.translation_values, t) if len(ch.translation_times) else node.bind_translation
    rq = sample(ch.rotation_times, ch.rotation_values, t) if len(ch.rotation_times) else node.bind_rotation
    sc = sample(ch.scale_times, ch.scale_values, t) if len(ch.scale_times) else node.bind_scale
    return compose_trs(tr, rq, sc)[0]


def rel_close(a, b, rel=1e-5):
    return np.all(np.abs(np.asarray(a) - np.asarray(b)) <= rel * np.maximum(1.0, np.abs(np.asarray(b))))


def cpu_skin(asset, mesh_obj, prim, depsgraph):
    """Reference linear blend skinning of a primitive with the current Blender pose."""
    mesh_world = np.array(mesh_obj.matrix_world)
    skin = prim.skin
    arm = bpy.data.objects[asset.nodes[skin.armature_node].object_name]
    mats = []
    for j, ni in enumerate(skin.joint_node_indices):
        pb = arm.pose.bones[asset.nodes[ni].bone_name]
        mats.append(np.linalg.inv(mesh_world) @ np.array(arm.matrix_world) @ np.array(pb.matrix)
                    @ skin.inverse_bind_matrices[j])
    mats = np.array(mats)
    p = np.hstack([prim.positions.astype(np.float64), np.ones((prim.vertex_count, 1))])
    out = np.zeros((prim.vertex_count, 4))
    for k in range(prim.influences):
        w = prim.weights[:, k].astype(np.float64)
        out += w[:, None] * np.einsum("vij,vj->vi", mats[prim.joints[:, k]], p)
    zero = prim.weights.sum(axis=1) == 0
    out[zero] = p[zero]
    return out[:, :3]


def evaluated_positions(obj, depsgraph):
    ev = obj.evaluated_get(depsgraph)
    me = ev.to_mesh()
    try:
        co = np.empty(len(me.vertices) * 3, np.float32)
        me.vertices.foreach_get("co", co)
    finally:
        ev.to_mesh_clear()
    return co.reshape(-1, 3)
