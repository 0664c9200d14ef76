"""Crowds (issue 15 item 4): one clip played on several armatures that share a skeleton, sampled
once and written to every instance in one step, with the palettes of all characters computed in
one batched step.  Checked against each character updated alone (its own clip, the single-armature
API) and against Blender's evaluated pose with the action assigned to every rig copy."""
from __future__ import annotations

import copy

import bpy
import numpy as np
import pytest

from stylized_renderer.engine.blender import importer
from stylized_renderer.engine.core.runtime.backend import CpuBackend
from stylized_renderer.engine.core.runtime.palette import SkinningPalette
from stylized_renderer.engine.core.world.scene_runtime import SceneRuntime
from support.crowds import COPIES, build_crowd, clip_of, seek_frame, skinned_nodes
from tools import bench_common, scenes

FRAMES = (4, 13)


def test_crowd_matches_each_character_alone_and_blender(empty_scene):
    scene = empty_scene
    names = build_crowd(scene)
    asset = importer.import_scene(bpy.context.evaluated_depsgraph_get())
    clip = clip_of(asset, names[0])
    rt = SceneRuntime(asset, CpuBackend())
    assert rt.initialize(), rt.last_error
    assert rt.set_clip(clip, targets=names), rt.last_error
    assert rt.crowd_targets == names and rt.player.target_count == COPIES
    alone = []
    for name in names:                                  # each character alone: its own clip
        r = SceneRuntime(asset, CpuBackend())
        assert r.initialize(), r.last_error
        assert r.set_clip(clip_of(asset, name))
        alone.append(r)
    pairs = {name: skinned_nodes(asset, name) for name in names}
    assert all(len(v) == 3 for v in pairs.values())      # Body (2 materials) and Hat of each
    bind_worlds = np.array(rt.pose.world_matrices)
    for frame in FRAMES:
        seek_frame(rt, clip, frame)
        # one batched step: every palette is a view of one array computed for all characters
        bases = {id(g.palette.matrices.base) for g in rt.palette_set.palette_groups}
        assert len(bases) == 1 and rt.stats.palette_uploads == 2 * COPIES
        texels = rt.palette_set.texel_rows()              # that array, as one texture's rows
        assert texels is not None
        rows, first = texels
        for g in rt.palette_set.palette_groups:
            j = g.skin.joint_count
            got = rows[16 * first[id(g.palette)]:16 * (first[id(g.palette)] + j)]
            assert np.array_equal(got, g.palette.matrices.transpose(0, 2, 1).ravel())
        moved = 0
        for name, r in zip(names, alone):
            seek_frame(r, clip_of(asset, name), frame)
            for node, pi in pairs[name]:
                got = rt.palette_set.find(node, pi)
                ref = r.palette_set.find(node, pi)
                assert got is not None and ref is not None, (name, node)
                assert np.allclose(got.matrices, ref.matrices, atol=1e-6), (name, node, frame)
                assert np.allclose(got.current_local_bounds.minimum, ref.current_local_bounds.minimum, atol=1e-9)
                assert np.allclose(got.current_local_bounds.maximum, ref.current_local_bounds.maximum, atol=1e-9)
                assert np.isclose(got.max_linear_scale, ref.max_linear_scale, atol=1e-9)
            for i, nd in enumerate(asset.nodes):
                if nd.object_name == name and nd.bone_name is not None:
                    w, w_alone = rt.pose.world_matrix(i), r.pose.world_matrix(i)
                    assert w is not None and w_alone is not None       # both poses are clean after the seek
                    assert np.allclose(w, w_alone, atol=1e-9)
                    moved += not np.allclose(w, bind_worlds[i], atol=1e-4)
        assert moved >= 2 * COPIES                       # every character really plays the clip
        # Blender, with the action on every rig: armature world @ pose bone matrix per joint
        scene.frame_set(frame)
        dg = bpy.context.evaluated_depsgraph_get()
        for name in names:
            arm = bpy.data.objects[name].evaluated_get(dg)
            aw = np.array(arm.matrix_world)
            for i, nd in enumerate(asset.nodes):
                if nd.object_name == name and nd.bone_name is not None:
                    ref = aw @ np.array(arm.pose.bones[nd.bone_name].matrix)
                    w = rt.pose.world_matrix(i)
                    assert w is not None and np.allclose(w, ref, atol=1e-4), (name, nd.bone_name, frame)
            for node, pi in pairs[name]:
                skin = asset.meshes[asset.nodes[node].mesh_index].primitives[pi].skin
                mw = np.array(bpy.data.objects[asset.nodes[node].object_name].evaluated_get(dg).matrix_world)
                ref = np.array([np.linalg.inv(mw) @ aw @ np.array(arm.pose.bones[asset.nodes[j].bone_name].matrix)
                                @ skin.inverse_bind_matrices[k] for k, j in enumerate(skin.joint_node_indices)])
                pal = rt.palette_set.find(node, pi)
                assert pal is not None and np.allclose(pal.matrices, ref, atol=1e-4), (name, node, frame)
    for r in alone:
        r.release()
    rt.release()


def test_batched_palettes_equal_the_per_group_path(empty_scene):
    """SkinningPaletteSet's batched step against SkinningPaletteGroup.update (the reference
    per-group path) for every group of a crowd: matrices, bounds and the linear-scale bound."""
    names = build_crowd(empty_scene, 4)
    asset = importer.import_scene(bpy.context.evaluated_depsgraph_get())
    rt = SceneRuntime(asset, CpuBackend())
    assert rt.initialize(), rt.last_error
    clip = clip_of(asset, names[0])
    assert rt.set_clip(clip, targets=names[1:])         # the first character keeps its bind pose
    seek_frame(rt, clip, 7)
    world = rt.pose.world_matrices
    assert world is not None
    be = CpuBackend()
    for g in rt.palette_set.palette_groups:
        ref = copy.copy(g)
        ref.palette = SkinningPalette()
        assert ref.palette.initialize(be, g.skin.joint_count)
        assert ref.update(world)
        assert np.allclose(g.palette.matrices, ref.palette.matrices, atol=1e-6)
        assert np.allclose(g.palette.current_local_bounds.minimum, ref.palette.current_local_bounds.minimum,
                           atol=1e-9)
        assert np.allclose(g.palette.current_local_bounds.maximum, ref.palette.current_local_bounds.maximum,
                           atol=1e-9)
        assert np.isclose(g.palette.max_linear_scale, ref.palette.max_linear_scale, rtol=1e-9)
    rt.release()


def test_crowd_bad_targets_are_refused_with_a_clear_message(empty_scene):
    scene = empty_scene
    names = build_crowd(scene, 2)
    other, _ob = scenes.make_armature("OtherRig", [("Root", None, (0, 0, 0), (0, 0, 0.5)),
                                                   ("Tail", "Root", (0, 0, 0.5), (0, 0, 1.0))], scene), None
    scenes.finish()
    asset = importer.import_scene(bpy.context.evaluated_depsgraph_get())
    clip = clip_of(asset, names[0])
    rt = SceneRuntime(asset, CpuBackend())
    assert rt.initialize(), rt.last_error
    assert not rt.set_clip(clip, targets=[names[0], "NoSuchRig"])
    assert "'NoSuchRig'" in (rt.last_error or "") and rt.player.clip is None
    assert not rt.set_clip(clip, targets=[names[1], names[1]])
    err = rt.last_error or ""
    assert "listed twice" in err and f"'{names[1]}'" in err
    assert not rt.set_clip(clip, targets=[names[0], other.name])
    err = rt.last_error or ""
    assert f"'{other.name}'" in err and "skeleton" in err
    assert not rt.player.set_targets(np.zeros((2, 1), np.int64))      # wrong width
    # the targets a UI would offer: every rig with the clip's skeleton, the clip's own first
    assert rt.armatures_sharing_skeleton(names[1]) == [names[1], names[0]]
    assert rt.armatures_sharing_skeleton(other.name) == [other.name]
    assert rt.armatures_sharing_skeleton("Body") == []
    # a good selection after the refusals plays; a plain set_clip drops the targets
    assert rt.set_clip(clip, targets=names) and rt.player.target_count == 2
    assert rt.set_clip(clip) and rt.player.target_count == 1 and rt.crowd_targets == []
    rt.release()


@pytest.mark.parametrize("in_place", [False, True])
def test_crowd_root_motion_in_place_matches_alone(empty_scene, in_place):
    """Root motion 'In place' on a crowd equals it on each character alone."""
    names = build_crowd(empty_scene, 3)
    arm = bpy.data.objects[names[0]]
    cb = scenes.new_action("Walk", arm, assign=False)[1]    # offered to every copy of the rig
    scenes.add_curve(cb, 'pose.bones["Root"].location', 0, [1, 20], [0.0, 2.0])
    scenes.add_curve(cb, 'pose.bones["Root"].location', 2, [1, 20], [0.0, 0.5])
    scenes.add_curve(cb, 'pose.bones["Spine"].rotation_quaternion', 1, [1, 20], [0.0, 0.4])
    scenes.finish()
    asset = importer.import_scene(bpy.context.evaluated_depsgraph_get())
    walk = [c for c in asset.animations if c.action_name == "Walk"]
    clip = next(c for c in walk if c.target_object == names[0])
    rt = SceneRuntime(asset, CpuBackend())
    assert rt.initialize() and rt.set_clip(clip, targets=names)
    bind = np.array(rt.pose.world_matrices)
    rt.player.set_in_place(in_place)
    seek_frame(rt, clip, 12)
    for name in names[1:]:
        r = SceneRuntime(asset, CpuBackend())
        assert r.initialize() and r.set_clip(next(c for c in walk if c.target_object == name))
        r.player.set_in_place(in_place)
        seek_frame(r, clip, 12)
        for bone in ("Root", "Spine", "Head"):
            node = asset.node_index(name, bone)
            w, w_alone = rt.pose.world_matrix(node), r.pose.world_matrix(node)
            assert w is not None and w_alone is not None and np.allclose(w, w_alone, atol=1e-9), (name, bone)
        spine = asset.node_index(name, "Spine")
        w = rt.pose.world_matrix(spine)
        assert w is not None and not np.allclose(w, bind[spine], atol=1e-3)    # it plays
        r.release()
    rt.release()


def test_duplicate_character_keeps_bone_parents():
    """bench_common.duplicate_character keeps a bone-parented part on its bone (parent type, bone
    and parent inverse), against Blender's evaluated world matrices of the original, per rig."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    arm, sword, gem = scenes.build_bone_parented_prop(scene)
    arm.pose.bones["Hand"].rotation_mode = "XYZ"
    arm.pose.bones["Hand"].rotation_euler = (0.4, -0.2, 0.6)
    a2 = bench_common.duplicate_character(scene, arm, (sword, gem), (3.0, -1.0, 0.5))
    bpy.context.view_layer.update()
    s2 = next(o for o in a2.children if o.data is sword.data)
    g2 = next(o for o in s2.children if o.data is gem.data)
    assert (s2.parent_type, s2.parent_bone) == ("BONE", "Hand")
    rel = lambda rig, ob: np.linalg.inv(np.array(rig.matrix_world)) @ np.array(ob.matrix_world)
    for orig, dup in ((sword, s2), (gem, g2)):
        assert np.allclose(rel(a2, dup), rel(arm, orig), atol=1e-5), orig.name
    assert np.allclose(np.array(a2.matrix_world.translation), (3.0, -1.0, 0.5))


def test_batched_palettes_are_read_through_views_every_frame(empty_scene):
    """The batched step leaves no per-palette work: each palette reads its matrices, bounds and
    upload flag from the batch, and each GPU buffer its texel rows from one shared upload.  Every
    frame (and after a frame on the per-group path, which takes the palettes back) they equal
    the per-group reference, and a palette texture made after an upload holds that upload."""
    from stylized_renderer.engine.gpu import util as gpu_util
    from stylized_renderer.engine.gpu.backend import GpuBackend, palette_texture

    names = build_crowd(empty_scene, 4)
    asset = importer.import_scene(bpy.context.evaluated_depsgraph_get())

    def check(rt):
        world = rt.pose.world_matrices
        be = CpuBackend()
        for g in rt.palette_set.palette_groups:
            ref = copy.copy(g)
            ref.palette = SkinningPalette()
            assert ref.palette.initialize(be, g.skin.joint_count) and ref.update(world)
            pal = g.palette
            assert pal.uploaded and pal.is_gpu_ready()
            assert np.allclose(pal.matrices, ref.palette.matrices, atol=1e-6)
            assert np.allclose(pal.current_local_bounds.minimum, ref.palette.current_local_bounds.minimum, atol=1e-9)
            assert np.allclose(pal.current_local_bounds.maximum, ref.palette.current_local_bounds.maximum, atol=1e-9)
            assert np.isclose(pal.max_linear_scale, ref.palette.max_linear_scale, rtol=1e-9)
            ptex = palette_texture(pal)
            assert ptex is not None
            tex = np.array(ptex.read().to_list(), np.float32).reshape(-1, 4, 4)
            assert np.allclose(tex.transpose(0, 2, 1), ref.palette.matrices, atol=1e-6)

    def task():
        be = GpuBackend()
        rt = SceneRuntime(asset, be)
        assert rt.initialize(), rt.last_error
        clip = clip_of(asset, names[0])
        assert rt.set_clip(clip, targets=names)
        groups = rt.palette_set.palette_groups
        for frame in (3, 9):
            before = be.palette_uploads
            seek_frame(rt, clip, frame)
            assert be.palette_uploads - before == len(groups)
            assert all(g.palette._view is not None for g in groups)       # read through the batch
            check(rt)
        batch = rt.palette_set._batch
        assert batch is not None
        real = batch.update
        batch.update = lambda *a, **k: None                               # a frame on the per-group path
        seek_frame(rt, clip, 5)
        assert all(g.palette._view is None for g in groups)
        check(rt)
        batch.update = real
        seek_frame(rt, clip, 11)                                          # back to the batch
        assert all(g.palette._view is not None for g in groups)
        check(rt)
        rt.release()

    gpu_util.run_in_gpu_context(task)
