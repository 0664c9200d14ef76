"""Preview bake of constraint / IK / driver / B-Bone rigs (issue 11 item 3, engine/blender/bake/cache.py):
the preview player, as the viewport session drives it (tools/check_deform.py player mode: GPU
read-back of the skinned vertices), against Blender's evaluated mesh at integer frames, on a
small IK + Copy Rotation + driver rig and on a generated Rigify character; the bake cache, the
exact restore of the scene and the frame_change_pre guard."""
from __future__ import annotations

import math

import bpy
import numpy as np
import pytest

import conftest as C  # noqa: F401  (registers the extension fixtures)
from support.deform_rigs import run_bbone_check
from support.preview_sessions import action_preview_session
from tools import deform_checker, scenes


def _run(capsys, frames="1-10", mode="player"):
    return run_bbone_check(capsys, frames, mode)


def _scene_state(arm):
    """Everything a bake must leave as it was: frame, subframe, every animated ID's action, slot
    and NLA mute flags, every pose value (and custom property) of the armature."""
    sc = bpy.context.scene
    anim = []
    for idb in list(bpy.data.objects) + list(bpy.data.armatures) + list(bpy.data.shape_keys):
        ad = getattr(idb, "animation_data", None)
        if ad is not None:
            anim.append((idb.name, ad.action.name if ad.action else None,
                         ad.action_slot.handle if getattr(ad, "action_slot", None) is not None else None,
                         tuple(tr.mute for tr in ad.nla_tracks)))
    pbs = arm.pose.bones
    vals = {}
    for prop, width in (("location", 3), ("rotation_quaternion", 4), ("rotation_euler", 3), ("scale", 3)):
        buf = np.empty(len(pbs) * width, np.float32)
        pbs.foreach_get(prop, buf)
        vals[prop] = buf
    custom = tuple((pb.name, k, pb[k]) for pb in pbs for k in pb.keys() if isinstance(pb[k], (int, float)))
    return sc.frame_current, sc.frame_subframe, tuple(anim), vals, custom


def _assert_same_state(a, b):
    assert a[:3] == b[:3]
    for prop in a[3]:
        np.testing.assert_array_equal(a[3][prop], b[3][prop], err_msg=prop)
    assert a[4] == b[4]


# ------------------------------------------------------------------------------------------------
# the small rig: IK + Copy Rotation + a driver
# ------------------------------------------------------------------------------------------------

def test_constraint_rig_needs_bake(crig, bakes):
    arm, _ob, _act = crig
    reasons = bakes.bake_reasons(arm)
    text = "; ".join(reasons)
    assert "IK on bone 'lower'" in text and "'arm2'" in text and "driver" in text, reasons
    plain = bpy.data.objects.new("Plain", bpy.data.armatures.new("Plain"))
    assert bakes.bake_reasons(plain) == []


def test_constraint_rig_preview_matches_timeline(crig, capsys):
    """The preview player plays the baked clip: every integer frame within 1e-4 of the object size
    of Blender's timeline playback of that action; half frames are reported (linear
    interpolation of the bake)."""
    rc, out, f = _run(capsys)
    assert rc == 0, out
    assert int(f["baked"]) == 1 and int(f["skipped"]) == 0 and int(f["fallbacks"]) == 0, out
    assert int(f["frames"]) == 10, out
    assert float(f["max_rel_error"]) <= deform_checker.TOLERANCE, out
    assert "baked-between" in out and float(f["baked_between_max_rel_error"]) <= deform_checker.BETWEEN_TOLERANCE, out


def test_constraint_rig_without_bake_fails(crig, capsys, monkeypatch, bakes):
    """Negative control: the player's own evaluation of the keyed controls (no bake) is far off."""
    monkeypatch.setattr(bakes, "bake_reasons", lambda arm: [])
    rc, out, f = _run(capsys)
    assert rc == 1, out
    assert int(f["baked"]) == 0 and float(f["max_rel_error"]) > 1e-2, out


def test_constraint_rig_wrong_frame_bake_fails(crig, capsys, monkeypatch, bakes):
    """Negative control: a bake one frame late exceeds the tolerance."""
    real = bakes.bake_action

    def late(*a, **k):
        b = real(*a, **k)
        b.pose = np.concatenate([b.pose[:1], b.pose[:-1]])
        return b

    monkeypatch.setattr(bakes, "bake_action", late)
    rc, out, f = _run(capsys)
    assert rc == 1 and int(f["baked"]) == 1, out
    assert float(f["max_rel_error"]) > deform_checker.TOLERANCE, out


def test_preview_refuses_clip_without_bake(crig, bakes):
    """No current bake: the session keeps timeline mode and says why (never a wrong pose)."""
    arm, _ob, act = crig
    s, st, frame = action_preview_session(arm, act, 0.1)
    try:
        assert frame()[0]
        assert not st.active, st
        assert st.last_error and f"clip '{act.name}' needs a bake" in st.last_error and "IK" in st.last_error
        # after the bake the same state plays
        bakes.cache.ensure(arm, act.name)
        st.active = True
        ok, clip, _t = frame()
        assert ok and st.active and st.last_error is None
        roots = {b.name for b in arm.data.bones if b.parent is None}
        assert clip is not None and s.scene_asset is not None
        assert {s.scene_asset.nodes[c.node_index].bone_name for c in clip.channels} == roots
    finally:
        s.free()


def _at_frames(b):
    """The bake's poses at its integer frames (the adaptive bake adds its own sub-frames)."""
    return b.pose[np.isin(b.frames, np.arange(1.0, 11.0))]


def test_bake_cache_hits_and_rebakes(crig, bakes):
    arm, _ob, act = crig
    cache = bakes.cache
    b1 = cache.ensure(arm, act.name)
    assert cache.bake_count == 1 and b1.frame_count - b1.added == 10
    assert cache.ensure(arm, act.name) is b1 and cache.bake_count == 1 and cache.hits == 1
    assert cache.lookup(arm.name, act.name) == (b1, "")
    # a constraint edit re-bakes
    arm.pose.bones["arm2"].constraints[0].influence = 0.3
    cache.mark_dirty()
    got, why = cache.lookup(arm.name, act.name)
    assert got is None and "changed" in why
    b2 = cache.ensure(arm, act.name)
    assert b2 is not b1 and cache.bake_count == 2
    assert not np.allclose(_at_frames(b1), _at_frames(b2))
    # a key edit re-bakes
    fc = next(fc for fc in rigify_rig_fcurves(act) if fc.data_path.endswith('"ctrl"].rotation_euler'))
    fc.keyframe_points[1].co.y += 0.2
    fc.update()
    b3 = cache.ensure(arm, act.name)
    assert b3 is not b2 and cache.bake_count == 3
    # an unrelated pose value the action keys does not (the bake overwrites it)
    arm.pose.bones["ctrl"].location.x += 0.5
    assert cache.ensure(arm, act.name) is b3 and cache.bake_count == 3


def rigify_rig_fcurves(action):
    from stylized_renderer.engine.blender.importer import actions

    return [fc for slot in action.slots for fc in actions.slot_fcurves(action, slot)]


def test_bake_restores_scene_exactly(crig, bakes):
    """Frame, subframe, actions, slots, NLA mute flags and pose values as they were, after baking an
    action that is not the armature's active one (NLA tracks and another object's action exist)."""
    arm, _ob, act = crig
    other = act.copy()
    other.name = "OtherAction"
    for fc in rigify_rig_fcurves(other):
        for kp in fc.keyframe_points:
            kp.co.y = -kp.co.y
    ad = arm.animation_data
    tr = ad.nla_tracks.new()
    nla = act.copy()
    nla.name = "NlaAction"
    tr.strips.new("strip", 1, nla)
    tr.mute = False
    tr2 = ad.nla_tracks.new()
    tr2.mute = True
    prop = bpy.data.objects.new("Prop", None)
    bpy.context.scene.collection.objects.link(prop)
    prop.location = (1, 2, 3)
    prop.keyframe_insert("location", frame=1)
    assert prop.animation_data.action is not None
    # a channel no other action keys: only the bake's own restore puts it back
    cb = other.layers[0].strips[0].channelbag(other.slots[0])
    scenes.add_curve(cb, 'pose.bones["root"].location', 0, [1, 10], [0.5, 0.9])
    arm.pose.bones["upper"]["IK_FK"] = 0.25
    arm.pose.bones["root"].location = (0.1, 0.0, 0.0)      # an unkeyed pose value
    bpy.context.scene.frame_set(3, subframe=0.25)
    before = _scene_state(arm)
    b = bakes.cache.ensure(arm, other.name)
    assert b is not None and b.action_name == "OtherAction"
    _assert_same_state(before, _scene_state(arm))
    assert tuple(prop.location) == (1.0, 2.0, 3.0)


def test_bake_error_reports_and_leaves_scene(crig, bakes):
    """A bad action (a non-finite key) is reported with its name; nothing in the scene changes;
    the Play operator reports it and cancels."""
    arm, _ob, act = crig
    bad = act.copy()
    bad.name = "BadAction"
    fc = rigify_rig_fcurves(bad)[0]
    fc.keyframe_points[1].co.y = float("nan")
    bpy.context.scene.frame_set(2)
    before = _scene_state(arm)
    with pytest.raises(bakes.BakeError, match="BadAction"):
        bakes.cache.ensure(arm, bad.name)
    _assert_same_state(before, _scene_state(arm))
    with pytest.raises(bakes.BakeError, match="does not exist"):
        bakes.cache.ensure(arm, "NoSuchAction")
    # the operator path: reported, cancelled
    from stylized_renderer.engine.features.preview import control as preview

    st = preview.get_state(bpy.context.scene, arm)
    st.armature, st.clip_name = arm.name, bad.name
    st.commands.clear()
    with pytest.raises(RuntimeError, match="BadAction"):
        bpy.ops.stylized.preview_play(armature=arm.name)
    assert "BadAction" in (st.last_error or "")
    _assert_same_state(before, _scene_state(arm))
    assert bakes.cache.bake_count == 0


def test_play_operator_bakes_and_panel_says_so(crig, bakes):
    arm, _ob, act = crig
    from stylized_renderer.engine.features.preview import control as preview

    preview.clear_states()
    st = preview.get_state(bpy.context.scene, arm)
    assert st.clip_name == act.name
    lines = bakes.describe(bakes.cache, arm.name, act.name)
    assert lines and lines[0].startswith("Needs a bake"), lines
    assert bpy.ops.stylized.preview_play(armature=arm.name) == {"FINISHED"}
    assert bakes.cache.bake_count == 1 and st.active and st.playing
    lines = bakes.describe(bakes.cache, arm.name, act.name)
    b = bakes.cache.lookup(arm.name, act.name)[0]
    assert lines[0].startswith(f"Baked through Blender: {b.frame_count} samples ({b.added} sub-frame)"), lines
    assert lines[1].strip().startswith("largest error between samples"), lines
    assert any("IK on bone 'lower'" in ln for ln in lines), lines
    assert bpy.ops.stylized.preview_stop(armature=arm.name) == {"FINISHED"}
    assert bakes.cache.bake_count == 1        # the second operator reuses the bake
    # the panel's "Bake Samples" re-bakes what plays
    bpy.context.scene.stylized_preview.bake_substeps = 2
    assert bpy.context.scene.stylized_preview.bake_substeps == 2 and bakes.cache.bake_count == 2
    lines = bakes.describe(bakes.cache, arm.name, act.name)
    b = bakes.cache.lookup(arm.name, act.name)[0]
    assert b.frame_count - b.added == 19, lines
    assert lines[0].startswith(f"Baked through Blender: {b.frame_count} samples ({b.added} sub-frame), 2 per frame"), lines
    preview.clear_states()


def test_bake_keeps_preview_active(crig, bakes):
    """The frame_change_pre guard: a bake's frame_set calls do not hand the preview back to the
    timeline (a plain frame_set does: the handler is live)."""
    arm, _ob, act = crig
    from stylized_renderer.engine.features.preview import control as preview

    preview.clear_states()
    st = preview.get_state(bpy.context.scene, arm)
    st.active = True
    bakes.cache.ensure(arm, act.name)
    assert st.active
    bpy.context.scene.frame_set(5)
    assert not st.active      # negative control: scrubbing hands back
    preview.clear_states()


def test_clip_choice_bakes(crig, bakes):
    """Choosing the clip in the Animation panel (the clip property) bakes it."""
    arm, _ob, act = crig
    from stylized_renderer.engine.features.preview import control as preview

    preview.clear_states()
    bpy.context.view_layer.objects.active = arm
    bpy.context.scene.stylized_preview.clip = act.name
    st = preview.peek_state(bpy.context.scene)
    assert st is not None and st.clip_name == act.name and st.active
    assert bakes.cache.bake_count == 1 and bakes.cache.lookup(arm.name, act.name)[0] is not None
    preview.clear_states()


def test_rebake_while_playing_switches_the_player(crig, bakes):
    """A re-bake (the rig was edited) replaces the clip the preview plays, at the same time."""
    arm, _ob, act = crig
    bakes.cache.ensure(arm, act.name)
    s, st, frame = action_preview_session(arm, act, 0.2)
    try:
        ok, first, _t = frame()
        assert ok and st.active, st.last_error
        arm.pose.bones["arm2"].constraints[0].influence = 0.2
        bakes.cache.mark_dirty()
        assert frame()[0]
        assert not st.active and "changed" in (st.last_error or "")      # stale: refused, timeline mode
        bakes.cache.ensure(arm, act.name)
        st.active = True
        ok, clip, t = frame()
        assert ok and st.active and clip is not first
        assert math.isclose(t, 0.2, abs_tol=1e-9)
    finally:
        s.free()


def test_loading_a_file_forgets_bakes(crig, bakes):
    arm, _ob, act = crig
    bakes.cache.ensure(arm, act.name)
    assert bakes.cache.entries
    bpy.ops.wm.read_factory_settings(use_empty=True)
    assert not bakes.cache.entries


def test_bakes_belong_to_their_owner(crig, bakes):
    """Issue 24: a session made without the add-on (a tool, a script) bakes into a cache of its
    own that no other session, operator or viewport sees, and that goes when it is freed; a
    viewport session made by the add-on plays the add-on's bakes (the operators') and freeing it
    leaves them to the add-on's other viewports.  (One module-level cache was shared by all.)"""
    from stylized_renderer.engine.blender.session import StylizedSession

    arm, _ob, act = crig
    a, b = StylizedSession(), StylizedSession()
    try:
        assert a.bakes.ensure(arm, act.name) is not None
        assert a.bakes.lookup(arm.name, act.name)[0] is not None
        assert b.bakes.lookup(arm.name, act.name)[0] is None           # another session's bake
        assert bakes.cache.lookup(arm.name, act.name)[0] is None       # nor the add-on's
    finally:
        a.free()
        b.free()
    assert not a.bakes.entries                                          # freed with its session
    bakes.cache.ensure(arm, act.name)
    addon = C.addon()
    assert addon is not None
    v = StylizedSession(viewport=True, addon=addon)
    assert v.bakes is bakes.cache and addon.viewport_session() is v
    v.free()
    assert bakes.cache.lookup(arm.name, act.name)[0] is not None        # still the add-on's
    addon.forget_viewport_session()


def test_substeps_keep_the_adaptive_bake(crig, capsys, bakes):
    """``substeps`` 2 bakes two samples per frame interval before the adaptive ones; between
    frames both stay within the baked tolerance and integer frames exact."""
    bakes.cache.substeps = 2
    rc, out, f = _run(capsys)
    assert rc == 0, out
    b = bakes.cache.lookup("CRig", "RigAction")[0]
    assert b.frame_count - b.added == 19 and float(f["max_rel_error"]) <= deform_checker.TOLERANCE
    assert float(f["baked_between_max_rel_error"]) <= deform_checker.BETWEEN_TOLERANCE, out


def test_unknown_clip_is_reported_as_such(crig, bakes):
    """A clip name the armature has no clip for is reported as not compatible, not as a bake."""
    arm, _ob, act = crig
    s, st, frame = action_preview_session(arm, act, 0.0)
    st.commands[:] = [("clip", "NoSuchClip")]
    try:
        assert frame()[0] is not None
        assert st.last_error == f"clip 'NoSuchClip' is not compatible with '{arm.name}'", st.last_error
        assert bakes.cache.bake_count == 0
    finally:
        s.free()


def test_playing_writes_the_bake_at_the_sampled_time(crig, bakes):
    """While playing, the bone matrices written before the player's sample are those of the time
    it sampled (the clock prediction), frame after frame."""
    import time as _time

    arm, _ob, act = crig
    bakes.cache.ensure(arm, act.name)
    s, st, frame = action_preview_session(arm, act, 0.0)
    st.commands.append(("loop", True))
    st.commands.append(("play",))
    try:
        seen = set()
        for _ in range(6):
            ok, clip, t = frame()
            assert ok and st.active and st.playing, st.last_error
            assert s.runtime is not None
            baked = s.preview.baked
            assert baked is not None
            feed = baked[1][(arm.name, act.name)][2]
            want = feed.baked.local_matrices(t, inner_only=True)
            got = np.asarray(s.runtime.pose.local_matrices)[feed.baked.inner_nodes]
            np.testing.assert_allclose(got, want, atol=1e-12)
            seen.add(round(t, 6))
            _time.sleep(0.01)
        assert len(seen) >= 5       # the clock moved
        # paused: nothing is written, recomputed or uploaded
        st.commands.append(("pause",))
        frame()
        assert s.runtime is not None
        version = s.runtime.pose.version
        frame()
        assert s.runtime.stats.palette_uploads == 0 and s.runtime.pose.version == version
    finally:
        s.free()


def test_session_sync_marks_bakes_dirty(crig, bakes):
    """The viewport session's sync (Blender's depsgraph updates) makes the next lookup re-check:
    a constraint edited after the bake is seen as stale without calling ensure."""
    from stylized_renderer.engine.blender.session import StylizedSession

    arm, _ob, act = crig
    bakes.cache.ensure(arm, act.name)
    assert bakes.cache.lookup(arm.name, act.name)[0] is not None
    s = StylizedSession(viewport=True, addon=C.addon())
    seen = []

    def on_update(scene, depsgraph):
        seen.append(len(depsgraph.updates))
        s.sync(depsgraph, depsgraph.updates)

    bpy.app.handlers.depsgraph_update_post.append(on_update)
    try:
        s.imports.synced_frame = (bpy.context.scene.frame_current, 0.0)
        arm.pose.bones["arm2"].constraints[0].influence = 0.25
        bpy.context.view_layer.update()
    finally:
        bpy.app.handlers.depsgraph_update_post.remove(on_update)
        s.free()
    assert seen, "no depsgraph update was reported"
    got, why = bakes.cache.lookup(arm.name, act.name)
    assert got is None and "changed" in why, why


def test_check_fails_when_a_bake_fails(crig, capsys, monkeypatch, bakes):
    """tools/check_deform.py: a clip whose bake fails is a failure, with the message."""
    def broken(*a, **k):
        raise bakes.BakeError("baking action 'RigAction' on 'CRig' failed: test")

    monkeypatch.setattr(bakes, "bake_action", broken)
    rc, out, f = _run(capsys)
    assert rc == 1 and "bake failed: clip 'RigAction' on 'CRig'" in out, out
