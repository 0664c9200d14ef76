"""Bone inheritance flags (Bone.use_inherit_rotation, inherit_scale, use_local_location) in ScenePose,
checked against Blender's own evaluated pose of a rig covering every mode.

Rig: the armature object is rotated and non-uniformly scaled; a root bone (use_local_location off,
posed with location, rotation and non-uniform scale) carries a rotated, non-uniformly scaled
``Parent`` (so the parent's armature-space pose has shear), whose children cover every
inherit_scale mode with and without rotation inheritance and use_local_location off; each child has
a default child and a flagged grandchild below it.
"""
from __future__ import annotations

import bpy
import numpy as np
import pytest

from stylized_renderer.engine.blender import importer
from stylized_renderer.engine.core.animation import ScenePose
from stylized_renderer.engine.core.animation import inherit as inh
from tools import scenes

MODES = inh.INHERIT_SCALE_MODES
ROT_MODES = ("QUATERNION", "XYZ", "ZXY", "AXIS_ANGLE")


def _specs():
    """[(name, parent, head, tail, inherit_rotation, inherit_scale, local_location)]."""
    out = [("Root", None, (0.1, 0.2, 0.0), (0.1, 0.2, 1.0), True, "FULL", False),
           ("Parent", "Root", (0.1, 0.3, 1.2), (0.4, 0.3, 2.0), True, "FULL", True)]
    k = 0
    for mode in MODES:
        for rot in (True, False):
            for lloc in (True, False):
                x = 0.3 * k - 3.0
                name = f"{mode}_{'rot' if rot else 'hinge'}_{'loc' if lloc else 'noloc'}"
                out.append((name, "Parent", (x, 0.5, 2.2), (x + 0.2, 0.7, 3.0), rot, mode, lloc))
                out.append((name + "_kid", name, (x, 0.6, 3.1), (x, 0.8, 3.7), True, "FULL", True))
                out.append((name + "_tip", name + "_kid", (x, 0.8, 3.8), (x + 0.1, 0.9, 4.3),
                            not rot, MODES[(k + 2) % len(MODES)], lloc))
                k += 1
    return out


def build_rig():
    bpy.ops.wm.read_factory_settings(use_empty=True)
    specs = _specs()
    ob = scenes.make_armature("Rig", [s[:4] for s in specs])
    ob.rotation_euler = (0.4, -0.3, 0.7)
    ob.scale = (1.3, 0.7, 1.1)
    ob.location = (0.5, -1.0, 0.25)
    for name, _p, _h, _t, rot, mode, lloc in specs:
        b = ob.data.bones[name]
        b.use_inherit_rotation = rot
        b.inherit_scale = mode
        b.use_local_location = lloc
    scenes.finish()
    return ob, specs


def pose_rig(ob, seed):
    """Random loc / rot (mixed rotation modes) / non-uniform scale on every pose bone."""
    rng = np.random.default_rng(seed)
    for i, pb in enumerate(ob.pose.bones):
        pb.rotation_mode = ROT_MODES[i % len(ROT_MODES)]
        pb.location = rng.uniform(-0.3, 0.3, 3)
        ang = rng.uniform(-0.9, 0.9, 3)
        if pb.rotation_mode == "QUATERNION":
            q = rng.normal(size=4)
            pb.rotation_quaternion = q / np.linalg.norm(q)
        elif pb.rotation_mode == "AXIS_ANGLE":
            pb.rotation_axis_angle = (float(ang[0]), *rng.normal(size=3))
        else:
            pb.rotation_euler = ang
        pb.scale = rng.uniform(0.6, 1.6, 3)
    bpy.context.view_layer.update()


def blender_worlds(asset, ob):
    """Blender's evaluated worlds: armature matrix_world @ pose_bone.matrix (the reference)."""
    dg = bpy.context.evaluated_depsgraph_get()
    ev = ob.evaluated_get(dg)
    aw = np.array(ev.matrix_world)
    out = np.empty((asset.node_count, 4, 4))
    for i, nd in enumerate(asset.nodes):
        o = bpy.data.objects[nd.object_name].evaluated_get(dg)
        out[i] = np.array(o.matrix_world)
        if nd.bone_name is not None:
            out[i] = aw @ np.array(ev.pose.bones[nd.bone_name].matrix)
    return out


def pose_bone_basis(asset, ob):
    """The pose bones' basis values as the preview writes them: (nodes, T, Q wxyz, S)."""
    nodes, t, q, s = [], [], [], []
    for i, nd in enumerate(asset.nodes):
        if nd.bone_name is None:
            continue
        pb = ob.pose.bones[nd.bone_name]
        nodes.append(i)
        t.append(np.array(pb.location))
        if pb.rotation_mode == "QUATERNION":
            qq = pb.rotation_quaternion.normalized()
        elif pb.rotation_mode == "AXIS_ANGLE":
            from mathutils import Quaternion, Vector
            a = pb.rotation_axis_angle
            qq = Quaternion(Vector(a[1:]).normalized(), a[0])
        else:
            qq = pb.rotation_euler.to_quaternion()
        q.append(np.array(qq))
        s.append(np.array(pb.scale))
    return np.array(nodes), np.array(t), np.array(q), np.array(s)


def rel_err(a, b, size):
    return float(np.max(np.abs(a - b)) / size)


@pytest.fixture
def rig():
    ob, specs = build_rig()
    pose_rig(ob, 7)
    return ob, specs


def _size(ref):
    return float(np.ptp(ref[:, :3, 3], axis=0).max())


def _worlds(pose) -> np.ndarray:
    """The pose's (N,4,4) world matrices (it must not be dirty)."""
    w = pose.world_matrices
    assert w is not None, "the pose is dirty"
    return w


def test_importer_reads_the_flags(rig):
    ob, specs = rig
    asset = importer.import_scene(bpy.context.scene)
    for name, _p, _h, _t, rot, mode, lloc in specs:
        nd = asset.nodes[asset.node_index("Rig", name)]
        assert (nd.inherit_rotation, nd.inherit_scale, nd.local_location) == (rot, mode, lloc), name


def test_every_mode_matches_blender_bind_and_set_local_trs(rig):
    ob, specs = rig
    asset = importer.import_scene(bpy.context.scene)
    pose = ScenePose()
    assert pose.initialize(asset), pose.last_error
    assert pose.update_world_matrices()
    ref = blender_worlds(asset, ob)
    size = _size(ref)
    errs = {asset.nodes[i].name: rel_err(_worlds(pose)[i], ref[i], size) for i in range(asset.node_count)}
    bad = {k: v for k, v in errs.items() if v > 1e-5}
    assert not bad, bad                                   # bind pose = the rig's own pose
    # a second pose, written through set_local_trs as the preview does
    pose_rig(ob, 11)
    nodes, t, q, s = pose_bone_basis(asset, ob)
    assert pose.set_local_trs(nodes, t, q, s)
    assert pose.update_world_matrices()
    ref = blender_worlds(asset, ob)
    errs = {asset.nodes[i].name: rel_err(_worlds(pose)[i], ref[i], size) for i in range(asset.node_count)}
    bad = {k: v for k, v in errs.items() if v > 1e-5}
    assert not bad, bad
    # every mode was really exercised: the flagged bones differ from a plain parent chain
    plain = asset.parents
    naive = np.array(pose.world_matrices)
    for i in range(asset.node_count):
        if plain[i] >= 0:
            naive[i] = naive[plain[i]] @ pose.local_matrices[i]
    for name, _p, _h, _t, rot, mode, lloc in specs:
        if (rot, mode, lloc) != (True, "FULL", True) and _p is not None:
            i = asset.node_index("Rig", name)
            assert rel_err(naive[i], ref[i], size) > 1e-3, name


def test_matrix_writes_bypass_the_flags(rig):
    ob, _ = rig
    asset = importer.import_scene(bpy.context.scene)
    pose = ScenePose()
    assert pose.initialize(asset)
    ref = blender_worlds(asset, ob)
    par = asset.parents
    bones = np.array([i for i, nd in enumerate(asset.nodes) if nd.bone_name is not None])
    local = np.array([np.linalg.inv(ref[par[i]]) @ ref[i] for i in bones])   # timeline-mode locals
    assert pose.set_local_matrices(bones, local)
    assert pose.update_world_matrices()
    w = _worlds(pose)
    size = _size(ref)
    for i, j in enumerate(bones):
        assert np.allclose(w[j], w[par[j]] @ local[i], atol=1e-12), asset.nodes[j].name
        assert rel_err(w[j], ref[j], size) <= 1e-5, asset.nodes[j].name


def test_basis_from_worlds_round_trips_blender(rig):
    ob, _ = rig
    asset = importer.import_scene(bpy.context.scene)
    pose = ScenePose()
    assert pose.initialize(asset)
    pose_rig(ob, 23)
    ref = blender_worlds(asset, ob)
    t, q, s = pose.basis_from_worlds(ref)
    assert t.shape == (asset.node_count, 3) and q.shape == (asset.node_count, 4) and s.shape == t.shape
    assert pose.set_local_trs(np.arange(asset.node_count), t, q, s)
    assert pose.update_world_matrices()
    size = _size(ref)
    errs = [rel_err(_worlds(pose)[i], ref[i], size) for i in range(asset.node_count)]
    assert max(errs) <= 1e-5, max(errs)
    # and the recovered basis is the pose bones' own (scale exactly; rotation up to sign)
    nodes, bt, bq, bs = pose_bone_basis(asset, ob)
    assert np.allclose(t[nodes], bt, atol=1e-5)
    assert np.allclose(np.abs(s[nodes]), np.abs(bs), atol=1e-5)
    with pytest.raises(ValueError):
        pose.basis_from_worlds(ref[:-1])


def test_player_clip_matches_blender(rig):
    """The preview player plays a keyed action through the flags exactly like Blender."""
    from stylized_renderer.engine.core.animation import AnimationPlayer

    ob, _ = rig
    act, cb = scenes.new_action("Wave", ob)
    for pb in ob.pose.bones:
        pb.keyframe_insert("location", frame=1)
        pb.keyframe_insert("scale", frame=1)
    pose_rig(ob, 5)
    for pb in ob.pose.bones:
        pb.keyframe_insert("location", frame=9)
        pb.keyframe_insert("scale", frame=9)
    asset = importer.import_scene(bpy.context.scene)
    clip = next(c for c in asset.animations if c.target_object == "Rig")
    pose = ScenePose()
    assert pose.initialize(asset)
    player = AnimationPlayer()
    player.set_clip(clip)
    scene = bpy.context.scene
    for f in (1, 4, 9):
        scene.frame_set(f)
        ref = blender_worlds(asset, ob)
        player.seek((f - clip.frame_start) / clip.fps)
        assert player.update(0.0, asset, pose), player.last_error
        size = _size(ref)
        err = max(rel_err(_worlds(pose)[i], ref[i], size) for i in range(asset.node_count))
        assert err <= 1e-5, (f, err)


def test_unknown_mode_is_rejected_with_the_bone_name():
    from stylized_renderer.engine.core.assets import NODE_BONE, SceneAsset, SceneNodeAsset
    from support import rigs as R

    good = R.skinned_arm_scene()
    nodes = list(good.nodes)
    nd = nodes[2]
    nodes[2] = SceneNodeAsset(name=nd.name, kind=NODE_BONE, parent=nd.parent, pre_matrix=nd.pre_matrix,
                              bind_translation=nd.bind_translation, bind_rotation=nd.bind_rotation,
                              bind_scale=nd.bind_scale, object_name=nd.object_name, bone_name=nd.bone_name,
                              mesh_index=nd.mesh_index, inherit_scale="SIDEWAYS")
    pose = ScenePose()
    assert not pose.initialize(SceneAsset(nodes, good.meshes))
    assert "Arm/B2" in (pose.last_error or "") and "SIDEWAYS" in (pose.last_error or "")


def test_connected_bone_location_is_ignored_like_blender(empty_scene):
    """Blender ignores a connected bone's location (keyed or set in the pose): the bind pose and
    the preview player's clip must too.  Without it the forearm below flies 0.5 off."""
    from stylized_renderer.engine.core.animation import AnimationPlayer

    ob = scenes.make_armature("Conn", [("upper", None, (0, 0, 0), (0, 0, 1)),
                                        ("lower", "upper", (0, 0, 1), (0, 0, 2)),
                                        ("hand", "lower", (0, 0, 2.2), (0, 0, 2.6))])
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode="EDIT")
    ob.data.edit_bones["lower"].use_connect = True      # hand stays unconnected (a 0.2 gap)
    bpy.ops.object.mode_set(mode="OBJECT")
    assert ob.data.bones["lower"].use_connect and not ob.data.bones["hand"].use_connect
    scenes.new_action("Reach", ob)
    lower, hand = ob.pose.bones["lower"], ob.pose.bones["hand"]
    lower.rotation_mode = hand.rotation_mode = "XYZ"
    for f, loc, ang in ((1, (0, 0, 0), 0.0), (9, (0.5, 0.3, 0.2), 0.8)):
        for pb in (lower, hand):
            pb.location = loc
            pb.rotation_euler = (ang, 0, 0)
            pb.keyframe_insert("location", frame=f)
            pb.keyframe_insert("rotation_euler", frame=f)
    scene = bpy.context.scene
    scene.frame_set(5)                                   # the pose the import reads: mid-clip
    asset = importer.import_scene(scene)
    clip = next(c for c in asset.animations if c.target_object == "Conn")
    pose = ScenePose()
    assert pose.initialize(asset) and pose.update_world_matrices()
    ref = blender_worlds(asset, ob)
    assert max(rel_err(_worlds(pose)[i], ref[i], 2.6) for i in range(asset.node_count)) <= 1e-5
    player = AnimationPlayer()
    player.set_clip(clip)
    for f in (1, 4, 9):
        scene.frame_set(f)
        ref = blender_worlds(asset, ob)
        player.seek((f - clip.frame_start) / clip.fps)
        assert player.update(0.0, asset, pose), player.last_error
        err = max(rel_err(_worlds(pose)[i], ref[i], 2.6) for i in range(asset.node_count))
        assert err <= 1e-5, (f, err)
    # the unconnected hand's location is honoured (Blender moves it)
    assert np.abs(ref[asset.node_index("Conn", "hand")][:3, 3]
                  - (np.array(ob.matrix_world) @ np.array(ob.data.bones["hand"].matrix_local))[:3, 3]).max() > 0.1
