"""Preview bake of a generated Rigify character (constraints, IK, drivers, B-Bones; engine/blender/bake):
the baked preview against Blender's evaluated mesh (tools/check_deform.py), its negative controls,
and the baked preview's fast paths against the general path (test_bake has the small constraint rig)."""
from __future__ import annotations

import bpy
import numpy as np
import pytest

import conftest as C
from support.deform_rigs import run_bbone_check
from support.preview_sessions import action_preview_session
from tools import deform_checker

# ------------------------------------------------------------------------------------------------
# a generated Rigify character
# ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def rigify_file(tmp_path_factory, rigify_generated):
    C.rigify_character(rigify_generated)
    path = tmp_path_factory.mktemp("rigify") / "rigify.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


@pytest.fixture
def rigify_scene(rigify_file, ext, bakes):
    bpy.ops.wm.open_mainfile(filepath=str(rigify_file))
    bpy.context.scene.render.engine = "STYLIZED"
    return bpy.data.objects["rig"], bpy.data.objects["RigifyBody"]


def test_rigify_preview_matches_timeline(rigify_scene, capsys, bakes):
    """A Rigify character (constraints, IK, drivers, B-Bones; keys on FK/IK controls): no fallback,
    no skipped clip, the baked preview within 1e-4 of the object size of Blender at every frame."""
    rig, body = rigify_scene
    assert max(len(v.groups) for v in body.data.vertices) == 5      # many influences (B-Bones: x2)
    reasons = "; ".join(bakes.bake_reasons(rig))
    assert "IK on bone" in reasons and "B-Bones" in reasons and "drivers" in reasons, reasons
    rc, out, f = run_bbone_check(capsys, "1-10", "both")
    assert rc == 0, out
    assert int(f["fallbacks"]) == 0 and int(f["skipped"]) == 0 and int(f["baked"]) == 1, out
    assert float(f["max_rel_error"]) <= deform_checker.TOLERANCE, out
    assert "player   RigifyBody" in out, out


def test_rigify_without_bbone_segments_fails(rigify_scene, capsys, monkeypatch, bakes):
    """Negative control: a bake without the B-Bone segments (rest relation) exceeds the tolerance."""
    from stylized_renderer.engine.blender.bake import record as bake_record

    monkeypatch.setattr(bake_record, "weighted_bbones", lambda arm: [])
    rc, out, f = run_bbone_check(capsys, "1-10", "player")
    assert rc == 1 and int(f["baked"]) == 1, out
    assert float(f["max_rel_error"]) > deform_checker.TOLERANCE, out


def test_rigify_trs_only_fails(rigify_scene, capsys, monkeypatch, bakes):
    """Negative control: the baked TRS tracks alone (no exact local matrices) lose the shear of
    the stretched limbs."""
    from stylized_renderer.engine.features.preview import bakes as preview_bakes

    monkeypatch.setattr(preview_bakes.BakeFeed, "write", lambda self, t, player: True)
    rc, out, f = run_bbone_check(capsys, "1-10", "player")
    assert rc == 1, out
    assert float(f["max_rel_error"]) > deform_checker.TOLERANCE, out


# ------------------------------------------------------------------------------------------------
# the baked preview's fast paths (issue 11, Speed): root-relative worlds, palettes from the bake
# ------------------------------------------------------------------------------------------------

def _reference_frame(s, feed):
    """The same pose by the general path: worlds chained from the locals the feed wrote, palettes
    from those worlds with the B-Bone relations of the same baked interval."""
    pose, ps = s.runtime.pose, s.runtime.palette_set
    t = float(s.runtime.player.current_time)
    pose._dirty = True
    assert pose.update_world_matrices()
    world = np.array(pose.world_matrices)
    rel = feed.baked.relations(feed.baked.sample(t), ps.segment_keys)
    assert ps.set_bbone_relations(rel)        # per-row segment products, nothing folded
    assert ps.update(pose)
    g = ps.palette_groups[0]
    b = g.palette.current_local_bounds
    return world, np.array(g.palette.matrices, np.float64), np.array([b.minimum, b.maximum])


def _rigify_playing(rigify_scene, bakes):
    """(session, state, frame, feed, fps, size) of a preview showing the baked Rigify clip (its
    first frame already made); ``size``: a length scale of the rig for tolerances."""
    rig, _body = rigify_scene
    act = rig.animation_data.action
    bakes.cache.ensure(rig, act.name)
    fps = bpy.context.scene.render.fps / bpy.context.scene.render.fps_base
    s, st, frame = action_preview_session(rig, act, 0.0)
    try:
        assert frame()[0] and st.active, st.last_error
    except BaseException:
        s.free()
        raise
    baked = s.preview.baked
    assert baked is not None
    feed = baked[1][(rig.name, act.name)][2]
    return s, st, frame, feed, fps, float(np.abs(feed.baked.table.static[..., :3, 3]).max()) + 1.0


def test_rigify_fast_paths_match_the_general_path(rigify_scene, bakes):
    """Playing a baked Rigify clip takes the fast paths (worlds from root-relative baked matrices,
    palettes straight from the baked joints) and, at the baked frames, gives the worlds, skin
    matrices and bounds of the general path (chained locals, per-row segment relations); between
    frames both are interpolations of the same bake and stay close."""
    from stylized_renderer.engine.gpu import util as gpu_util

    s, st, frame, feed, fps, size = _rigify_playing(rigify_scene, bakes)
    rt = s.runtime
    assert rt is not None and s.scene_asset is not None     # the first frame was made
    pose, ps = rt.pose, rt.palette_set
    try:
        for seek, exact in ((2.0 / fps, True), (5.0 / fps, True), (3.5 / fps, False)):
            st.push("seek", seek)
            before = (pose.shortcut_updates, ps.baked_updates)
            ok, _clip, t = frame()
            assert ok and abs(t - seek) < 1e-9
            assert pose.shortcut_updates > before[0] and ps.baked_updates > before[1]   # the fast paths ran
            g = ps.palette_groups[0]
            fast_world = np.array(pose.world_matrices)
            fast_skin = np.array(g.palette.matrices, np.float64)
            b = g.palette.current_local_bounds
            fast_box = np.array([b.minimum, b.maximum])
            world, skin, box = gpu_util.run_in_gpu_context(lambda: _reference_frame(s, feed))
            tol = 1e-9 * size if exact else 0.05 * size
            assert np.abs(fast_world - world).max() <= tol, (seek, np.abs(fast_world - world).max())
            assert np.abs(fast_skin - skin).max() <= (2e-6 * size if exact else 0.05 * size)
            if exact:
                assert np.abs(fast_box - box).max() <= 2e-6 * size
    finally:
        s.free()


def test_world_shortcut_checks_its_input(crig):
    """ScenePose.set_world_shortcut: anchors that are not ancestors are refused; a later write to
    a shortcut node drops it (the chained locals win); the result equals the chained worlds."""
    from stylized_renderer.engine.blender import importer
    from stylized_renderer.engine.core.animation.pose import ScenePose

    arm, _ob, _act = crig
    bpy.context.scene.frame_set(3)
    asset = importer.import_scene(bpy.context.evaluated_depsgraph_get())
    pose = ScenePose()
    assert pose.initialize(asset) and pose.update_world_matrices()
    bones = [asset.node_index(arm.name, b.name) for b in arm.data.bones]
    roots = [asset.node_index(arm.name, b.name) for b in arm.data.bones if b.parent is None]
    root_of = {}
    for b in arm.data.bones:
        top = b
        while top.parent is not None:
            top = top.parent
        root_of[asset.node_index(arm.name, b.name)] = asset.node_index(arm.name, top.name)
    inner = np.array([n for n in bones if n not in roots], np.intp)
    anchors = np.array([root_of[int(n)] for n in inner], np.intp)
    # a posed local for every inner bone, then the chained worlds as reference
    rng = np.random.default_rng(3)
    locals_ = np.array(pose.local_matrices)[inner]
    locals_[:, :3, 3] += rng.normal(scale=0.1, size=(inner.size, 3))
    assert pose.set_local_matrices(inner, locals_) and pose.update_world_matrices()
    want = np.array(pose.world_matrices)
    rel_t = (np.linalg.inv(want[anchors]) @ want[inner]).transpose(0, 2, 1)
    pose.set_local_matrices(inner, np.array(pose.local_matrices)[inner] * 1.0)
    # wrong anchors (a bone as its own anchor, a non-ancestor) are refused
    assert not pose.set_world_shortcut(inner, inner, rel_t)
    assert not pose.set_world_shortcut(inner[:1].copy(), inner[-1:].copy(), rel_t[:1])
    # a shifted relative matrix shows up in the worlds, so the shortcut is really used
    shifted = rel_t.copy()
    shifted[:, 3, :3] += 1.0
    n0 = pose.shortcut_updates
    assert pose.set_world_shortcut(inner, anchors, shifted) and pose.update_world_matrices()
    assert pose.shortcut_updates == n0 + 1
    assert np.abs(np.array(pose.world_matrices)[inner] - want[inner]).max() > 0.5
    # the true relatives give the chained worlds
    assert pose.set_world_shortcut(inner, anchors, rel_t) and pose.update_world_matrices()
    np.testing.assert_allclose(np.array(pose.world_matrices), want, atol=1e-12)
    # a TRS write to a shortcut node drops it: the chained locals again
    assert pose.set_world_shortcut(inner, anchors, shifted)
    t, q, sc = pose.local_trs(inner[:1])
    assert pose.set_local_trs(inner[:1], t, q, sc) and pose.update_world_matrices()
    assert pose.shortcut_updates == n0 + 2
    np.testing.assert_allclose(np.array(pose.world_matrices), want, atol=1e-9)


def test_rigify_fast_paths_follow_a_moving_mesh(rigify_scene, bakes):
    """The armature relation (mesh against armature) changing frame after frame: the baked
    palettes follow it (each frame folds its own inputs) and equal the general path."""
    from stylized_renderer.engine.gpu import util as gpu_util

    s, st, frame, feed, fps, size = _rigify_playing(rigify_scene, bakes)
    rt = s.runtime
    assert rt is not None and s.scene_asset is not None     # the first frame was made
    pose, ps = rt.pose, rt.palette_set
    try:
        mesh = s.scene_asset.node_index(rigify_scene[1].name)
        base = np.array(pose.local_matrices[mesh])
        for k, f in enumerate((2, 3, 4, 5)):
            moved = base.copy()
            moved[:3, 3] += (0.1 * (k + 1), -0.05 * k, 0.02)
            assert pose.set_local_matrices([mesh], moved)
            st.push("seek", f / fps)
            n0 = ps.baked_updates
            assert frame()[0]
            assert ps.baked_updates == n0 + 1
            fast = np.array(ps.palette_groups[0].palette.matrices, np.float64)
            _w, skin, _box = gpu_util.run_in_gpu_context(lambda: _reference_frame(s, feed))
            assert np.abs(fast - skin).max() <= 2e-6 * size, (f, np.abs(fast - skin).max())
    finally:
        s.free()
