"""Deformation against Blender: GPU-skinned/morphed vertices read back from the GPU vs Blender's
evaluated meshes (tools/check_deform.py), on ../shared/testdata and on generated rigs."""
from __future__ import annotations

import math

import bpy
import numpy as np
import pytest

import conftest as C
from tools import check_deform, deform_checker, scenes

TESTDATA_FILES = sorted(C.TESTDATA.glob("*.blend")) if C.TESTDATA.is_dir() else []


def _run(capsys, frames=None, mode="both"):
    return C.run_deform_check(capsys, frames, mode)


@pytest.mark.skipif(not TESTDATA_FILES, reason="../shared/testdata is absent (a user's clone does not have it)")
@pytest.mark.parametrize("path", TESTDATA_FILES, ids=lambda p: p.name)
def test_check_deform_on_testdata(ext, capsys, path):
    bpy.ops.wm.open_mainfile(filepath=str(path))
    rc, out, fields = _run(capsys, frames=None)
    assert rc == 0, out
    assert float(fields["max_rel_error"]) <= deform_checker.TOLERANCE, out
    drawable = any(len(o.data.polygons) for o in bpy.context.scene.objects if o.type == "MESH")
    # (32_weights_influence_4 holds only face-less single-vertex meshes: nothing is drawn)
    assert int(fields["objects"]) >= 1 or not drawable, out
    assert int(fields["fallbacks"]) == 0 or "fallback:" in out, out


def _animate_bones(arm, frames=(1, 10, 20), angle=0.8):
    """Key every bone with a distinct rotation so the skin really deforms."""
    for k, pb in enumerate(arm.pose.bones):
        pb.rotation_mode = "XYZ"
        for j, f in enumerate(frames):
            pb.rotation_euler = (angle * math.sin(j + k), 0.3 * j * ((k % 3) - 1), angle * 0.5 * math.cos(k + j))
            pb.location = (0.0, 0.05 * j * (k % 2), 0.0)
            pb.keyframe_insert("rotation_euler", frame=f)
            pb.keyframe_insert("location", frame=f)


def _check_generated(capsys, frames="1-20:3"):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 20
    rc, out, fields = _run(capsys, frames=frames, mode="both")
    assert rc == 0, out
    assert "path=gpu" in out, out
    return out, fields


def test_shared_armature_meshes_share_palette(empty_scene, capsys):
    arm, body, hat, ring = scenes.build_character()
    _animate_bones(arm)
    out, fields = _check_generated(capsys)
    for name in (body.name, hat.name, ring.name):
        assert f"{name}:" in out
    # the two material primitives of the body have identical skins: they share one palette
    from stylized_renderer.engine.blender import importer
    from stylized_renderer.engine.core.runtime.backend import CpuBackend
    from stylized_renderer.engine.core.world.scene_runtime import SceneRuntime

    asset = importer.import_scene(bpy.context.evaluated_depsgraph_get())
    rt = SceneRuntime(asset, CpuBackend())
    assert rt.initialize(), rt.last_error
    node = asset.node_index(body.name)
    prims = asset.meshes[int(asset.mesh_indices[node])].primitives
    assert len(prims) >= 2
    pals = {id(rt.palette_set.find(node, i)) for i in range(len(prims))}
    assert len(pals) == 1
    skinned_nodes = {i for i in range(asset.node_count) if int(asset.mesh_indices[i]) >= 0
                     and any(p.skin is not None for p in asset.meshes[int(asset.mesh_indices[i])].primitives)}
    assert rt.palette_set.palette_count == len(skinned_nodes)


def test_five_to_eight_influences(empty_scene, capsys):
    arm, ob = scenes.build_many_influences(counts=(1, 5, 6, 7, 8))
    _animate_bones(arm)
    out, fields = _check_generated(capsys)
    assert f"{ob.name}:" in out and "path=gpu" in out


def test_any_number_of_influences_on_the_gpu(empty_scene, capsys, monkeypatch):
    """Vertices with 9, 12 and 20 influences: every weight, normalised by their sum, exactly as
    Blender's Armature modifier (no fallback for the count).  Negative control: keeping only the
    largest 8 (renormalised) fails the check."""
    arm, ob = scenes.build_many_influences(counts=(1, 9, 12, 20))
    _animate_bones(arm)
    rc, out, fields = _run(capsys, frames="1-20:5")
    assert rc == 0, out
    assert "path=gpu" in out and int(fields["fallbacks"]) == 0, out
    from stylized_renderer.engine.blender.importer import skin

    real = skin.select_influences

    def top8(*args, **kw):
        infl = real(*args, **kw)
        if infl.k > 8:
            w = infl.weights.copy()
            w[:, 8:] = 0.0
            s = w.sum(axis=1, keepdims=True)
            infl.weights = np.where(s > 0, w / np.maximum(s, 1e-12), 0.0).astype(np.float32)
        return infl

    monkeypatch.setattr(skin, "select_influences", top8)
    rc, out, fields = _run(capsys, frames="10", mode="timeline")
    assert rc == 1 and float(fields["max_rel_error"]) > 1e-4, out


def test_bone_parented_props(empty_scene, capsys):
    arm, sword, gem = scenes.build_bone_parented_prop()
    _animate_bones(arm)
    out, _ = _check_generated(capsys)
    assert f"{sword.name}:" in out


def test_driven_shape_keys(empty_scene, capsys):
    arm, ob = scenes.build_driven_shape_keys()
    _animate_bones(arm, angle=1.2)
    out, _ = _check_generated(capsys)
    assert f"{ob.name}:" in out


def test_vertex_group_masked_shape_keys(empty_scene, capsys):
    ob, basis, keys = scenes.build_shape_key_mesh()
    for k, kb in enumerate(ob.data.shape_keys.key_blocks[1:]):
        kb.value = 0.3 + 0.1 * k if kb.slider_max >= 1.0 else kb.slider_max
    out, _ = _check_generated(capsys, frames="1-20:4")
    assert f"{ob.name}:" in out


def test_check_deform_detects_wrong_skinning(empty_scene, capsys, monkeypatch):
    """The check must fail when the GPU path is wrong (here: skinning disabled)."""
    arm, ob = scenes.build_many_influences(counts=(1, 5))
    _animate_bones(arm)
    from stylized_renderer.engine.gpu import backend as gpu_backend

    real = gpu_backend.bind_skinning
    monkeypatch.setattr(check_deform, "bind_skinning_override", None, raising=False)

    def no_skinning(shader, palette, influences, identity):
        real(shader, None, 0, identity)

    monkeypatch.setattr(gpu_backend, "bind_skinning", no_skinning)
    rc, out, fields = _run(capsys, frames="10", mode="timeline")
    assert rc == 1 and float(fields["max_rel_error"]) > 1e-3, out


def _morph_paths(out):
    return {k: int(v) for k, v in check_deform.summary_fields(out, "morph-paths:").items()}


@pytest.mark.parametrize("policy", ["shader", "rebuild"])
def test_both_morph_paths_match_blender(empty_scene, capsys, policy):
    """Vertex-group-masked keys with animated values, skinned driven keys: both the CPU rebuild
    and the vertex-shader composition reproduce Blender's evaluated mesh."""
    ob, basis, keys = scenes.build_shape_key_mesh()
    for k, kb in enumerate(ob.data.shape_keys.key_blocks[1:]):
        for f, v in ((1, 0.0), (10, 0.9), (20, 0.2 + 0.1 * k)):
            kb.value = min(v, kb.slider_max)
            kb.keyframe_insert("value", frame=f)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 20
    rc, out, fields = _run_policy(capsys, "1-20:3", policy)
    assert rc == 0, out
    paths = _morph_paths(out)
    assert paths[policy] > 0 and paths["shader" if policy == "rebuild" else "rebuild"] == 0, out


def _run_policy(capsys, frames, policy, mode="both"):
    return C.run_deform_check(capsys, frames, mode, policy)


def test_shader_morph_on_skinned_driven_keys(empty_scene, capsys):
    arm, ob = scenes.build_driven_shape_keys()
    _animate_bones(arm, angle=1.2)
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, 20
    rc, out, fields = _run_policy(capsys, "1-20:4", "shader")
    assert rc == 0 and _morph_paths(out)["shader"] > 0, out


@pytest.mark.skipif(not (C.TESTDATA / "28_shapekeys_anim.blend").is_file(), reason="../shared/testdata is absent")
def test_auto_policy_composes_animated_keys_in_the_shader(ext, capsys):
    """Animated shape keys (a frame sequence) switch to shader composition under "auto"."""
    bpy.ops.wm.open_mainfile(filepath=str(C.TESTDATA / "28_shapekeys_anim.blend"))
    rc, out, fields = _run_policy(capsys, None, "auto", mode="timeline")
    assert rc == 0, out
    paths = _morph_paths(out)
    assert paths["shader"] > 0 and paths["rebuild"] > 0, out


def test_check_deform_detects_wrong_shader_morph(empty_scene, capsys, monkeypatch):
    """The check must fail when the shader composition is wrong (here: deltas not applied)."""
    ob, basis, keys = scenes.build_shape_key_mesh()
    for kb in ob.data.shape_keys.key_blocks[1:]:
        kb.value = min(0.8, kb.slider_max)
    from stylized_renderer.engine.gpu import backend as gpu_backend

    real = gpu_backend.bind_morph

    def no_morph(shader, stream, identity):
        real(shader, None, identity)

    monkeypatch.setattr(gpu_backend, "bind_morph", no_morph)
    rc, out, fields = _run_policy(capsys, "1", "shader", mode="timeline")
    assert rc == 1 and float(fields["max_rel_error"]) > 1e-3, out
