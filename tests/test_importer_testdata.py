"""Importer on the real .blend files of ../shared/testdata: imports cleanly, node worlds match
Blender, and every node driven by its object's active action reproduces Blender's evaluation."""
from __future__ import annotations

import importlib.util
import math
import pathlib
import sys

import bpy
import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if "stylized_renderer" not in sys.modules:
    _spec = importlib.util.spec_from_file_location("stylized_renderer", ROOT / "__init__.py",
                                                   submodule_search_locations=[str(ROOT)])
    if _spec is None or _spec.loader is None:
        raise ImportError(f"cannot load the stylized_renderer package from {ROOT / '__init__.py'}")
    _m = importlib.util.module_from_spec(_spec)
    sys.modules["stylized_renderer"] = _m
    _spec.loader.exec_module(_m)

from stylized_renderer.engine.blender import importer  # noqa: E402
from stylized_renderer.engine.core.assets import NODE_BONE  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from support.importer_checks import channel_matrix, cpu_skin, evaluated_positions, rel_close, sample, world_check  # noqa: E402

TESTDATA = ROOT.parent / "shared" / "testdata"
FILES = sorted(TESTDATA.glob("*.blend")) if TESTDATA.is_dir() else []


def _driven_paths(id_data):
    ad = getattr(id_data, "animation_data", None)
    return {d.data_path for d in ad.drivers} if ad is not None else set()


def _free_of_overrides(ob, bone_name=None):
    """No constraint, driver or NLA strip acts on this node."""
    ad = ob.animation_data
    if ad is None or ad.action is None:
        return False
    if any(len(t.strips) for t in ad.nla_tracks) or ad.action_influence != 1.0 or ad.action_blend_type != "REPLACE":
        return False
    drv = _driven_paths(ob)
    if bone_name is None:
        return not len(ob.constraints) and not any(p.split(".")[0] in ("location", "rotation_quaternion",
                                                   "rotation_euler", "rotation_axis_angle", "scale") for p in drv)
    pb = ob.pose.bones[bone_name]
    prefix = pb.path_from_id()
    return not len(pb.constraints) and not any(p.startswith(prefix) for p in drv)


@pytest.mark.skipif(not FILES, reason=f"no test .blend files in {TESTDATA} (only in the project workspace)")
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_testdata_file(path):
    bpy.ops.wm.open_mainfile(filepath=str(path))
    scene = bpy.context.scene
    scene.frame_set(scene.frame_current)
    asset, problems = importer.import_scene_with_problems(scene)
    assert asset.is_valid()
    assert problems == []
    # bind worlds (rest pose for bones; objects parented to posed bones are excluded)
    posed = any(ob.type == "ARMATURE" and any(
        not np.allclose(np.array(pb.matrix_basis), np.eye(4), atol=1e-6) for pb in ob.pose.bones)
        for ob in scene.objects)
    if not posed:
        world_check(asset)
    checked = 0
    for ob in scene.objects:
        if (ob.name, None) not in asset._index:
            continue
        ad = ob.animation_data
        if ad is not None and ad.action is not None:
            clips = [c for c in importer.compatible_clips(asset, ob.name) if c.action_name == ad.action.name
                     and not c.morph_channels]
            assert clips, f"{ob.name}: active action {ad.action.name} not offered"
            checked += _compare(scene, asset, clips[0], ob)
        key = ob.data.shape_keys if ob.type == "MESH" else None
        if key is not None and key.animation_data is not None and key.animation_data.action is not None:
            kad = key.animation_data
            if not len(kad.drivers) and not any(len(t.strips) for t in kad.nla_tracks):
                clips = [c for c in importer.compatible_clips(asset, ob.name)
                         if c.action_name == kad.action.name and c.morph_channels]
                assert clips, f"{ob.name}: shape key action {kad.action.name} not offered"
                checked += _compare(scene, asset, clips[0], ob)
    has_actions = any(ob.animation_data and ob.animation_data.action for ob in scene.objects)
    if has_actions:
        assert checked > 0
    # skinned meshes deform like Blender at a few frames (no shape keys involved)
    dg = bpy.context.evaluated_depsgraph_get()
    for m in asset.meshes:
        ob = bpy.data.objects[m.name]
        if m.fallback_reason or not m.primitives or not m.primitives[0].is_skinned or ob.data.shape_keys:
            continue
        for f in (scene.frame_start, (scene.frame_start + scene.frame_end) // 2, scene.frame_end):
            scene.frame_set(f)
            for prim in m.primitives:
                ref = evaluated_positions(ob, dg)[prim.source_vertices]
                np.testing.assert_allclose(cpu_skin(asset, ob, prim, dg), ref, atol=1e-4)


def _compare(scene, asset, clip, ob) -> int:
    action = bpy.data.actions[clip.action_name]
    start, end = action.frame_range
    n = 0
    for f in range(math.ceil(start), math.floor(end) + 1):
        scene.frame_set(f)
        t = (f - clip.frame_start) / clip.fps
        for ch in clip.channels:
            nd = asset.nodes[ch.node_index]
            if not _free_of_overrides(ob, nd.bone_name):
                continue
            ref = np.array(ob.pose.bones[nd.bone_name].matrix_basis if nd.kind == NODE_BONE else ob.matrix_basis)
            got = channel_matrix(nd, ch, t)
            assert rel_close(got, ref), (clip.name, nd.name, f, got, ref)
            n += 1
        for mc in clip.morph_channels:
            kb = ob.data.shape_keys.key_blocks[mc.target_name]
            assert rel_close(sample(mc.times, mc.values[:, None], t)[0], kb.value), (clip.name, mc.target_name, f)
            n += 1
    return n
