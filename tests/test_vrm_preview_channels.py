"""VRM expression curves as channels of preview-player clips (docs/vrm.md, "Expression curves in
preview clips").

The VRM Add-on keys an expression by keying its ``preview`` on the armature DATA; Blender 4.4+
puts those F-Curves in the object's action, in an ARMATURE slot of their own (or in an action of
the data alone).  The importer turns each one into a morph weight channel of the armature
object's node (``vrm:`` names), the preview player samples and crossfades it like a shape-key
channel, and the VRM morph source takes the player's values for the expressions the clip keys.

* the real avatar (../shared/testdata/vrm/Godette_vrm0.blend) with the VRM Add-on: two clips made
  the way a user makes them (bones + Joy, bones + Angry); ``session.update_frame`` with a
  PreviewState (the real path) gives the face of the expressions' values AT THE PLAYER'S TIME
  (Blender's evaluation of the F-Curve at that frame, turned into shape-key values by the
  add-on's own preview code), the crossfade blends the two clips' expressions, a clip without
  expression curves leaves the panel's values;
* without the add-on (the ID properties it leaves): the curves are baked, a curve naming a
  missing blend-shape group is reported and left out, and the reader maps the channels;
* a VRM 1.0 avatar (presets and a custom expression).
Negative controls: the scene-frame evaluation (no channels) does not give these faces.
"""
from __future__ import annotations

import bpy
import numpy as np
import pytest

import conftest as C
from stylized_renderer.engine.features.preview import control as preview
from support.preview_sessions import clocked_session
from support.vrm_scenes import ANGRY, make_vrm1, needs_godette, open_godette
from tools import deform_checker

JOY, SORROW, FUN = 7, 9, 10          # Godette's blend-shape groups (Joy: oh 0.5, look_up 0.25; Fun: uu 0.5, look_up 0.25)
FACE_KEYS = ("ah", "ih", "uu", "ee", "oh", "blink_left", "blink_right", "look_up", "look_down", "look_left",
             "look_right", "angled_eyebrows", "HideBlush")
TOL = 1e-5


def _groups_rna(arm):
    return arm.data.vrm_addon_extension.vrm0.blend_shape_master.blend_shape_groups


def _preview_path(index: int) -> str:
    return f"vrm_addon_extension.vrm0.blend_shape_master.blend_shape_groups[{index}].preview"


def _make_clip(arm, name, group, bone_angle):
    """An action made as a user makes it with the add-on: a head turn keyed on the pose bone and
    the expression ``group`` keyed 0 (frame 1) -> 1 (frame 25) on the armature data (Blender puts
    both in one action, the expression in the data's slot).  Unassigned afterwards."""
    pb = arm.pose.bones["head_Armature"]
    pb.rotation_mode = "XYZ"
    grp = _groups_rna(arm)[group]
    for frame, value, angle in ((1, 0.0, 0.0), (25, 1.0, bone_angle)):
        pb.rotation_euler = (0.0, 0.0, angle)
        pb.keyframe_insert("rotation_euler", frame=frame)
        grp.preview = value
        grp.keyframe_insert("preview", frame=frame)
    action = arm.animation_data.action
    assert arm.data.animation_data.action == action            # one action, two slots
    assert {s.target_id_type for s in action.slots} == {"OBJECT", "ARMATURE"}
    action.name = name
    arm.animation_data.action = None
    arm.data.animation_data.action = None
    grp.preview = 0.0
    return action


def _fcurve(action, path):
    from stylized_renderer.engine.blender.importer.actions import slot_fcurves

    for slot in action.slots:
        for fc in slot_fcurves(action, slot):
            if fc.data_path == path:
                return fc
    raise AssertionError(f"no F-Curve {path} in '{action.name}'")


def addon_face(arm, previews: dict, face: str = "Face") -> dict:
    """The add-on's own shape-key values of the mesh object ``face`` for the blend-shape group
    previews ``previews`` ({group: value}; every other group at its current value); the previews
    are restored after."""
    groups = _groups_rna(arm)
    old = {i: float(groups[i].preview) for i in previews}
    try:
        for i, v in previews.items():
            groups[i].preview = float(v)
        keys = bpy.data.objects[face].data.shape_keys.key_blocks
        return {k: float(keys[k].value) for k in FACE_KEYS}
    finally:
        for i, v in old.items():
            groups[i].preview = v


def face_weights(rt, face: str = "Face") -> dict:
    """The morph weights of the mesh object ``face`` in the runtime (what the GPU draws), per
    shape-key name."""
    node = rt.scene.node_index(face, None)
    inst = rt.mesh_instances[node]
    out = {}
    for p in inst.primitives:
        if p.morph_state is None:
            continue
        for k, t in enumerate(p.primitive.morph_targets):
            out[t.key_name or t.name] = float(p.morph_state.weights[k])
    return {k: out[k] for k in FACE_KEYS}


def assert_face(got: dict, want: dict, what: str):
    bad = {k: (got[k], want[k]) for k in FACE_KEYS if abs(got[k] - want[k]) > TOL}
    assert not bad, f"{what}: (engine, add-on) differ: {bad}"


def differs(a: dict, b: dict) -> bool:
    return any(abs(a[k] - b[k]) > 0.05 for k in FACE_KEYS)


@pytest.fixture
def preview_session(monkeypatch):
    """A viewport session whose preview clock is driven by hand."""
    yield from clocked_session(monkeypatch)


# ------------------------------------------------------------------------------------------------
# with the VRM Add-on: the real user path
# ------------------------------------------------------------------------------------------------

def _godette_two_clips():
    """Godette with HappyClip (a head turn and Joy) and AngryClip (a head turn and Angry): (scene,
    armature, Joy's F-Curve, Angry's F-Curve, ``frame(t)``: the scene frame of clip time t)."""
    scene = open_godette()
    arm = bpy.data.objects["Armature"]
    happy = _make_clip(arm, "HappyClip", JOY, 0.5)
    angry = _make_clip(arm, "AngryClip", ANGRY, -0.5)
    fps = scene.render.fps / scene.render.fps_base
    return (scene, arm, _fcurve(happy, _preview_path(JOY)), _fcurve(angry, _preview_path(ANGRY)),
            lambda t: 1.0 + t * fps)


def _play_happy(scene, arm, session):
    """The preview playing HappyClip from 0.25 s with a 0.5 s Fade: (state, runtime)."""
    st = preview.get_state(scene, arm)
    st.active = True
    st.push("fade", 0.5)
    st.push("clip", "HappyClip")
    st.push("seek", 0.25)
    st.push("play")
    return st, session.update(st)


@needs_godette
def test_preview_face_follows_the_clip_and_crossfades(vrm_addon, preview_session):
    scene, arm, fc_joy, fc_angry, frame = _godette_two_clips()
    _groups_rna(arm)[FUN].preview = 0.6                 # the panel's value of an expression no clip keys

    # the importer: the expression curve is a morph channel of the ARMATURE's node
    from stylized_renderer.engine.blender import importer
    from stylized_renderer.engine.features.vrm.driver import VrmDriver

    asset = importer.import_scene(bpy.context.evaluated_depsgraph_get(), expression_check=VrmDriver.preview_problem)
    clip = {c.name: c for c in asset.animations}["HappyClip"]
    arm_node = asset.node_index("Armature", None)
    assert [(m.node_index, m.target_name) for m in clip.morph_channels] == [
        (arm_node, "vrm:vrm0.blend_shape_master.blend_shape_groups[7]")]
    assert clip.channels and clip.is_valid(asset.node_count)

    st, rt = _play_happy(scene, arm, preview_session)
    assert st.clip_name == "HappyClip" and st.playing and st.time == pytest.approx(0.25)
    want = addon_face(arm, {JOY: fc_joy.evaluate(frame(0.25))})
    assert_face(face_weights(rt), want, "HappyClip at 0.25 s")
    stored = addon_face(arm, {})                          # the panel's values: Joy 0, Fun 0.6
    assert differs(want, stored)                          # the check is not vacuous

    rt = preview_session.update(st, 0.25)                 # plays on: the face follows the clip's time
    assert st.time == pytest.approx(0.5)
    want = addon_face(arm, {JOY: fc_joy.evaluate(frame(0.5))})
    assert fc_joy.evaluate(frame(0.5)) > 0.3
    assert_face(face_weights(rt), want, "HappyClip at 0.5 s")
    # negative control: the scene-frame evaluation (no clip channels) gives the panel's face
    reader = preview_session.session.reader
    node = rt.scene.node_index("Face", None)
    scene_frame = dict(zip(rt.morph_key_names(node), reader.read_morph_weights(None)[node]))
    assert differs(scene_frame, want)

    # another clip while playing: a 0.5 s crossfade; at its half both clips' expressions at half
    st.push("clip", "AngryClip")
    preview_session.update(st)
    assert st.fading
    rt = preview_session.update(st, 0.25)
    assert st.fading and rt.player.fade_weights == pytest.approx((0.5, 0.5))
    joy = 0.5 * fc_joy.evaluate(frame(0.75))             # the old clip played on to 0.75 s
    ang = 0.5 * fc_angry.evaluate(frame(0.25))           # the new one is at 0.25 s
    assert joy > 0.2 and ang > 0.05
    want = addon_face(arm, {JOY: joy, ANGRY: ang})
    assert_face(face_weights(rt), want, "crossfade at its half")
    assert differs(want, addon_face(arm, {ANGRY: fc_angry.evaluate(frame(0.25))}))
    # paused mid-fade: frozen, nothing resampled or uploaded, the same face
    st.push("pause")
    preview_session.update(st, 0.1)
    rt = preview_session.update(st, 0.1)
    assert st.fading and not st.playing and st.last_morph_uploads == 0 and st.last_palette_uploads == 0
    assert_face(face_weights(rt), want, "paused crossfade")
    st.push("play")
    preview_session.update(st, 0.3)       # resume: from the shown time (the idle 0.3 s is not clip time)

    # settled: the new clip alone; Joy, keyed by no clip now, is the panel's value again
    rt = preview_session.update(st, 0.5)
    assert not st.fading and st.time == pytest.approx(0.75)
    want = addon_face(arm, {ANGRY: fc_angry.evaluate(frame(0.75))})
    assert_face(face_weights(rt), want, "AngryClip after the fade")

    # a clip without expression curves leaves the panel's values (Fun 0.6, the rest 0)
    st.push("clip", "T-Pose")
    preview_session.update(st, 0.1)
    rt = preview_session.update(st, 0.6)
    assert not st.fading and st.clip_name == "T-Pose"
    assert_face(face_weights(rt), addon_face(arm, {}), "T-Pose (no expression curves)")
    _groups_rna(arm)[FUN].preview = 0.2                  # a slider moved while it plays
    rt = preview_session.update(st, 0.1)
    assert_face(face_weights(rt), addon_face(arm, {}), "T-Pose after a slider change")


@needs_godette
def test_paused_seek_shows_the_face_of_that_time_at_once(vrm_addon, preview_session):
    """A paused preview redraws only when asked: one update after a seek shows its face."""
    scene = open_godette()
    arm = bpy.data.objects["Armature"]
    happy = _make_clip(arm, "HappyClip", JOY, 0.5)
    fc_joy = _fcurve(happy, _preview_path(JOY))
    fps = scene.render.fps / scene.render.fps_base
    st = preview.get_state(scene, arm)
    st.active = True
    st.push("clip", "HappyClip")
    st.push("seek", 0.1)
    preview_session.update(st)
    for t in (0.875, 0.375):                              # frames 22 and 10
        st.push("seek", t)
        rt = preview_session.update(st, 0.3)             # paused: the clock does not move the clip
        assert not st.playing and st.time == pytest.approx(t)
        assert_face(face_weights(rt), addon_face(arm, {JOY: fc_joy.evaluate(1.0 + t * fps)}), f"seek {t}")


@needs_godette
def test_an_expression_one_side_of_a_fade_keys_fades_to_its_panel_value(vrm_addon, preview_session):
    """The sides of a crossfade are blended in one place, the preview's morph mixer, for the VRM
    expressions as for the shape keys: the player only exposes its sides (keys, values, weight).
    HappyClip keys Joy, AngryClip keys Angry, the panel holds Joy 0.4 and Angry 0.3: half way
    through the fade each expression is half its clip's value and half the panel's (the panel
    fills what the clips leave), which the add-on turns into the face; after the fade Joy is the
    panel's value, with no jump.  Before: the player blended the expression channels itself,
    an expression one side keys fading to 0 (Joy 0.5 x clip, the panel's 0.4 ignored until the fade
    ended and the face jumped to it)."""
    scene, arm, fc_joy, fc_angry, frame = _godette_two_clips()
    groups = _groups_rna(arm)
    groups[JOY].preview, groups[ANGRY].preview = 0.4, 0.3      # the panel's values
    st, _rt = _play_happy(scene, arm, preview_session)
    rt = preview_session.update(st, 0.25)
    assert_face(face_weights(rt), addon_face(arm, {JOY: fc_joy.evaluate(frame(0.5)), ANGRY: 0.3}),
                "HappyClip alone: Joy the clip's, Angry the panel's")
    st.push("clip", "AngryClip")
    preview_session.update(st)
    rt = preview_session.update(st, 0.25)                 # half the fade
    assert st.fading and rt.player.fade_weights == pytest.approx((0.5, 0.5))
    sides = rt.player.morph_sides                         # what the player gives: its sides, unblended
    assert [w for _k, _v, w in sides] == pytest.approx([0.5, 0.5])
    joy = 0.5 * fc_joy.evaluate(frame(0.75)) + 0.5 * 0.4
    ang = 0.5 * fc_angry.evaluate(frame(0.25)) + 0.5 * 0.3
    want = addon_face(arm, {JOY: joy, ANGRY: ang})
    assert_face(face_weights(rt), want, "crossfade at its half (the panel fills what each clip leaves)")
    faded_out = addon_face(arm, {JOY: 0.5 * fc_joy.evaluate(frame(0.75)), ANGRY: ang})
    assert differs(want, faded_out) or abs(want["look_up"] - faded_out["look_up"]) > 0.02
    rt = preview_session.update(st, 0.5)                  # settled: Joy is the panel's value
    assert not st.fading
    assert_face(face_weights(rt), addon_face(arm, {JOY: 0.4, ANGRY: fc_angry.evaluate(frame(0.75))}),
                "AngryClip after the fade")


def _twin(arm):
    """A second avatar sharing ``arm``'s skeleton: the armature and its Face copied with their own
    data (the VRM data goes with the armature data; its binds renamed to the copy's Face), placed
    1.5 m to the side, the copy's Face deformed by the copy."""
    twin = arm.copy()
    twin.data = arm.data.copy()
    twin.location.x += 1.5
    bpy.context.scene.collection.objects.link(twin)
    face = bpy.data.objects["Face"]
    face2 = face.copy()
    face2.data = face.data.copy()
    face2.parent = twin
    for m in face2.modifiers:
        if m.type == "ARMATURE":
            m.object = twin
    bpy.context.scene.collection.objects.link(face2)
    for grp in _groups_rna(twin):
        for b in grp.binds:
            if b.mesh.mesh_object_name == "Face":
                b.mesh.mesh_object_name = face2.name
    bpy.context.view_layer.update()
    return twin, face2.name


@needs_godette
def test_a_crowds_shared_clip_drives_every_members_expressions(vrm_addon, preview_session):
    """A crowd of two avatars (Play on All Characters) sharing HappyClip, which keys Joy: each
    member's face takes the clip's Joy at the player's time, as the add-on makes that face for
    that member (its own binds, the docs/vrm.md rules), with the other expressions at each
    member's panel values (Fun 0.6 on the twin only).  Before: the clip's expression channels
    drove the previewed avatar only; the twin kept its panel's face."""
    scene = open_godette()
    arm = bpy.data.objects["Armature"]
    happy = _make_clip(arm, "HappyClip", JOY, 0.5)
    fc_joy = _fcurve(happy, _preview_path(JOY))
    twin, face2 = _twin(arm)
    _groups_rna(twin)[FUN].preview = 0.6
    fps = scene.render.fps / scene.render.fps_base
    st = preview.get_state(scene, arm)
    st.active = True
    preview_session.update(st)
    with bpy.context.temp_override(active_object=arm, object=arm):
        scene.stylized_preview.crowd = True
    st.push("clip", "HappyClip")
    for t in (0.5, 0.875):
        st.push("seek", t)
        rt = preview_session.update(st)
        assert st.crowd_count == 2 and rt.crowd_targets == ["Armature", twin.name]
        joy = fc_joy.evaluate(1.0 + t * fps)
        assert joy > 0.3
        for avatar, face in ((arm, "Face"), (twin, face2)):
            want = addon_face(avatar, {JOY: joy}, face)
            assert_face(face_weights(rt, face), want, f"{face} at {t} s")
            assert differs(want, addon_face(avatar, {}, face))      # not the panel's face


# ------------------------------------------------------------------------------------------------
# without the add-on: the ID properties it leaves
# ------------------------------------------------------------------------------------------------

@needs_godette
def test_without_the_addon_curves_are_baked_bad_ones_named_and_mapped(ext):
    assert not hasattr(bpy.types.Armature, "vrm_addon_extension")
    open_godette()
    arm = bpy.data.objects["Armature"]
    from stylized_renderer.engine.blender import importer
    from stylized_renderer.engine.blender.importer.actions import slot_fcurves
    from stylized_renderer.engine.blender.sources.timeline import TimelineReader
    from stylized_renderer.engine.features.vrm import expressions as vx
    from stylized_renderer.engine.features.vrm.driver import VrmDriver
    from support.vrm_scenes import runtime_for_scene

    s = vx.expression_set_of(arm)
    assert s is not None
    angry = s.by_name("Angry")
    assert angry is not None
    grp = vx.group_at(vx.extension_props(arm.data), angry.location)
    assert grp is not None
    for frame, value in ((1, 0.0), (13, 1.0)):           # the panel's key button without the add-on
        grp["preview"] = value
        vx.keyframe_preview(arm, angry, frame)
    grp["preview"] = 0.0
    action = arm.data.animation_data.action
    slot = arm.data.animation_data.action_slot
    ensure = getattr(action, "fcurve_ensure_for_datablock", None)
    bad = ensure(arm.data, _preview_path(40)) if ensure is not None else action.fcurves.new(_preview_path(40))
    bad.keyframe_points.insert(1, 1.0)
    assert len(slot_fcurves(action, slot)) == 2
    action.name = "FaceOnly"
    asset, problems = importer.import_scene_with_problems(bpy.context.evaluated_depsgraph_get(),
                                                          expression_check=VrmDriver.preview_problem)
    clip = {c.name: c for c in asset.animations if c.target_object == "Armature"}["FaceOnly"]
    assert not clip.channels                                 # a face clip: expressions only
    (ch,) = clip.morph_channels
    assert ch.node_index == asset.node_index("Armature", None) and ch.target_name == angry.channel_key
    fc = _fcurve(action, angry.data_path)
    frames = clip.frame_start + ch.times * clip.fps
    assert np.allclose(ch.values, [fc.evaluate(f) for f in frames], atol=1e-6)
    msg = ("action 'FaceOnly': channel " + _preview_path(40) + " of armature 'Armature': blend shape group #40 "
           "does not exist (the avatar has 17); left out of the clip")
    assert msg in problems, problems

    # the reader: the player's channel replaces the stored preview of Angry only
    rt = runtime_for_scene()
    rt.set_clip(clip)
    assert rt.player.seek(clip.duration_seconds) and rt.update(0.0)
    mix = rt.morph_mix                                      # the runtime's one morph mixer
    assert mix.extra_keys == ((ch.node_index, ch.target_name),)
    assert mix.apply(np.array([mix.key_count])) == pytest.approx([1.0])
    # a channel on the armature's node binds to no mesh: the runtime alone leaves the face as it is
    assert not any(face_weights(rt).values())
    reader = TimelineReader(rt.scene, rt, expressions=VrmDriver())
    node = rt.scene.node_index("Face", None)
    names = rt.morph_key_names(node)
    keys = [(ch.node_index, ch.target_name), (node, "angled_eyebrows")]
    w = dict(zip(names, reader.read_morph_weights(None, expression_values=(keys, np.array([0.8, 0.1])))[node]))
    assert w["angled_eyebrows"] == pytest.approx(0.8) and w["ah"] == pytest.approx(0.2)
    assert w["blink_left"] == pytest.approx(0.2)
    plain = dict(zip(names, reader.read_morph_weights(None)[node]))   # scene frame 1: Angry keyed 0
    assert plain["angled_eyebrows"] == 0.0 and plain["ah"] == 0.0


# ------------------------------------------------------------------------------------------------
# a VRM 1.0 avatar
# ------------------------------------------------------------------------------------------------

@needs_godette
def test_vrm1_presets_and_custom_expressions_are_channels(vrm_addon):
    open_godette()
    arm = bpy.data.objects["Armature"]
    ex = make_vrm1(arm)
    for frame, value in ((1, 0.0), (11, 1.0)):
        for expr in (ex.preset.happy, ex.custom[0], ex.preset.blink):
            expr.preview = value
            expr.keyframe_insert("preview", frame=frame)
    for expr in (ex.preset.happy, ex.custom[0], ex.preset.blink):
        expr.preview = 0.0
    arm.data.animation_data.action.name = "Vrm1Face"
    arm.data.animation_data.action = None
    from stylized_renderer.engine.blender import importer
    from stylized_renderer.engine.blender.sources.timeline import TimelineReader
    from stylized_renderer.engine.features.vrm.driver import VrmDriver
    from support.vrm_scenes import runtime_for_scene

    asset = importer.import_scene(bpy.context.evaluated_depsgraph_get(), expression_check=VrmDriver.preview_problem)
    clip = {c.name: c for c in asset.animations}["Vrm1Face"]
    names = sorted(m.target_name for m in clip.morph_channels)
    assert names == ["vrm:vrm1.expressions.custom[0]", "vrm:vrm1.expressions.preset.blink",
                     "vrm:vrm1.expressions.preset.happy"]
    action = bpy.data.actions["Vrm1Face"]
    one = importer.import_action(action, asset, arm, bpy.context.scene,       # the public one-action path
                                 expression_check=VrmDriver.preview_problem)
    assert sorted(m.target_name for m in one.morph_channels) == names and not one.channels
    rt = runtime_for_scene()
    reader = TimelineReader(rt.scene, rt, expressions=VrmDriver())
    node = rt.scene.node_index("Face", None)
    arm_node = rt.scene.node_index("Armature", None)
    keys = [(arm_node, n) for n in names]
    # custom wink 1, blink 1, happy 1: happy blocks the blink (custom expressions are not overridden)
    w = dict(zip(rt.morph_key_names(node),
                 reader.read_morph_weights(None, expression_values=(keys, np.ones(3)))[node]))
    assert w["blink_left"] == pytest.approx(1.0) and w["blink_right"] == 0.0 and w["look_up"] == pytest.approx(0.5)
    # happy 0: the blink is not blocked
    w = dict(zip(rt.morph_key_names(node),
                 reader.read_morph_weights(None, expression_values=(keys, np.array([0.0, 1.0, 0.0])))[node]))
    assert w["blink_left"] == pytest.approx(1.0) and w["blink_right"] == pytest.approx(1.0) and w["look_up"] == 0.0


@needs_godette
def test_check_deform_player_mode_plays_the_face_slot(vrm_addon, capsys, monkeypatch):
    """tools/check_deform.py in player mode on a clip that keys an expression: Blender's side
    evaluates the action's ARMATURE slot on the armature data too (the add-on turns the preview
    into shape-key values), so the keyed face matches; without that slot the check fails."""

    open_godette()
    arm = bpy.data.objects["Armature"]
    _make_clip(arm, "HappyClip", JOY, 0.5)

    def run():
        rc, out, f = C.run_deform_check(capsys, "1-25:12", "player", player_step=12)
        return rc, f, out

    rc, f, out = run()
    assert rc == 0 and float(f["max_rel_error"]) <= deform_checker.TOLERANCE, out
    assert "frames=4" in out, out                       # HappyClip, the only clip: 2 objects x 2 frames
    from stylized_renderer.engine.blender.bake import isolate as bake_isolate

    monkeypatch.setattr(bake_isolate, "_isolate_data_slot", lambda owner, action: None)
    rc, f, out = run()
    assert rc != 0 and float(f["max_rel_error"]) > deform_checker.TOLERANCE, out
