"""Issue 22 (plain clips) and 27.11: the preview player evaluates a plain clip's F-Curves as
Blender does at any time (every interpolation, easing, handle type, extrapolation and Cycles
setting), check_deform compares plain clips between frames and fails there, and clips made for a
rig with extra bones are offered with the missing bones' channels ignored and named."""
from __future__ import annotations

import pathlib
import sys

import bpy
import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import conftest as C  # noqa: E402
from support import fcurve_rigs  # noqa: E402
from tools import scenes  # noqa: E402


def _player_check(capsys, step=4):
    return C.run_deform_check(capsys, mode="player", player_step=step)


@pytest.fixture
def feature_rig(empty_scene):
    arm, ob, act = fcurve_rigs.build_fcurve_rig()
    return arm, ob, act


def test_player_matches_blender_between_frames_on_every_fcurve_feature(feature_rig, capsys):
    """Every easing x easing type, handle type, extrapolation and Cycles setting: the player at
    0.25 / 0.5 / 0.75 past frames equals Blender's evaluation at that subframe within 1e-4 of the
    ribbon's size (the old integer-frame resampling erred by up to 1e-1 here)."""
    rc, out, fields = _player_check(capsys)
    assert "fraction" in out, out
    assert int(fields["clips_checked"]) == 1, out
    assert float(fields["fraction_max_rel_error"]) < 1e-4, out
    assert rc == 0, out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_curve_values_equal_blenders_at_every_eighth_frame(empty_scene, seed):
    """Each imported curve of the feature rig, evaluated by the player's evaluator every 1/8
    frame from 4 frames before the clip to 6 after (extrapolation and Cycles on both sides),
    equals Blender's FCurve.evaluate there (float32 rounding: 1e-4 absolute)."""
    from stylized_renderer.engine.blender import importer
    from stylized_renderer.engine.blender.importer.actions import slot_fcurves
    from stylized_renderer.engine.core.animation.curve_clip import CurveTracks

    arm, ob, act = fcurve_rigs.build_fcurve_rig(seed=seed)
    clip = importer.compatible_clips(importer.import_scene(bpy.context.evaluated_depsgraph_get()), arm.name)[0]
    assert not clip.notes
    tracks = CurveTracks(clip.curves, clip.frame_start, clip.fps)
    frames = np.arange(-3.0, 31.0, 0.125)
    ours = np.array([tracks.evaluator.evaluate(float(f)) for f in frames])
    fcs = slot_fcurves(act, act.slots[0])
    assert ours.shape[1] == len(fcs)
    ref = np.array([[fc.evaluate(f) for fc in fcs] for f in frames])
    err = np.abs(ours - ref)
    worst = np.unravel_index(np.argmax(err), err.shape)
    assert err.max() < 1e-4, (fcs[worst[1]].data_path, fcs[worst[1]].array_index, frames[worst[0]], err.max())


def test_player_matches_blender_between_frames_with_one_shared_timing(feature_rig, capsys):
    """Every curve keyed at the same frames (one timing group: located once per frame, the
    scalar path), Bezier, Linear, Constant, Sine and Elastic segments."""
    arm, ob, act = feature_rig
    bpy.data.actions.remove(act)
    fcurve_rigs.key_uniform_action(arm)
    rc, out, fields = _player_check(capsys, step=2)
    assert int(fields["clips_checked"]) == 1, out
    assert float(fields["fraction_max_rel_error"]) < 1e-4, out
    assert rc == 0, out


def test_check_fails_when_the_player_resamples_at_integer_frames(feature_rig, capsys, monkeypatch):
    """Negative control: the old player (the clip's samples at integer frames, lerped / slerped
    in between) fails the between-frames check."""
    from stylized_renderer.engine.core.animation import player as P

    monkeypatch.setattr(P.AnimationPlayer, "_flatten_curves",
                        lambda self, clip: P.AnimationPlayer._flatten(self, _without_curves(clip)))
    rc, out, fields = _player_check(capsys)
    assert float(fields["fraction_max_rel_error"]) > 1e-3, out
    assert rc != 0, out


def test_a_large_player_step_still_checks_between_frames(feature_rig, capsys, monkeypatch):
    """check_deform spreads its fractional frames over every frame of a clip, whatever integer
    frames --player-step keeps (test_real_files checks every 12th; a clip shorter than the step
    was compared at its first frame only, never between frames): the resampling player fails."""
    from stylized_renderer.engine.core.animation import player as P

    monkeypatch.setattr(P.AnimationPlayer, "_flatten_curves",
                        lambda self, clip: P.AnimationPlayer._flatten(self, _without_curves(clip)))
    rc, out, fields = _player_check(capsys, step=1000)
    assert float(fields["fraction_max_rel_error"]) > 1e-3, out
    assert rc != 0, out


def _without_curves(clip):
    import dataclasses

    return dataclasses.replace(clip, curves=None)


@pytest.mark.parametrize("missing", ["SINE", "ELASTIC", "BOUNCE"])
def test_check_fails_with_an_easing_mode_missing(feature_rig, capsys, monkeypatch, missing):
    """Negative control: an easing mode evaluated as linear fails the between-frames check."""
    from stylized_renderer.engine.core.animation import fcurves as F
    from stylized_renderer.engine.core.assets import curves as K

    code = getattr(K, f"IPO_{missing}")
    real_ease, real_elastic = F.ease, F.elastic

    def ease(ipo, easing, time, dur, back=None):
        if ipo == code:
            return np.asarray(time, np.float64) / dur
        return real_ease(ipo, easing, time, dur, back)

    def elastic(easing, time, begin, change, dur, amp, period):
        if code == K.IPO_ELASTIC:
            return begin + change * time / dur
        return real_elastic(easing, time, begin, change, dur, amp, period)

    monkeypatch.setattr(F, "ease", ease)
    monkeypatch.setattr(F, "elastic", elastic)
    rc, out, fields = _player_check(capsys)
    assert float(fields["fraction_max_rel_error"]) > 1e-4, out
    assert rc != 0, out


# ------------------------------------------------------------------------------------------------
# 27.11: an animation pack made for a rig with extra bones
# ------------------------------------------------------------------------------------------------

def _pack_character(scene):
    arm, body, hat, ring = scenes.build_character(scene)
    bpy.data.actions.remove(arm.animation_data.action)
    act, cb = scenes.new_action("PackWave", arm, assign=False)
    scenes.add_curve(cb, 'pose.bones["Spine"].rotation_quaternion', 0, [1, 9, 17], [1.0, 0.9, 1.0])
    scenes.add_curve(cb, 'pose.bones["Spine"].rotation_quaternion', 1, [1, 9, 17], [0.0, 0.4, 0.0])
    scenes.add_curve(cb, 'pose.bones["Head"].location', 2, [1, 17], [0.0, 0.2])
    for side in ("L", "R"):      # the pack's rig has hand-slot bones this character lacks
        scenes.add_curve(cb, f'pose.bones["HandSlot.{side}"].location', 0, [1, 17], [0.0, 1.0])
        scenes.add_curve(cb, f'pose.bones["HandSlot.{side}"].rotation_quaternion', 2, [1, 17], [0.0, 0.5])
    return arm, body, act


def test_pack_clip_with_extra_bones_is_offered_played_and_named(empty_scene, capsys):
    from stylized_renderer.engine.blender import importer
    from stylized_renderer.engine.features.preview import control as preview
    from stylized_renderer.panels import preview_panel
    from support.panels import Ctx, draw_panel

    arm, body, act = _pack_character(empty_scene)
    asset, problems = importer.import_scene_with_problems(bpy.context.evaluated_depsgraph_get())
    clips = importer.compatible_clips(asset, arm.name)
    assert [c.name for c in clips] == ["PackWave"], problems
    note = " ".join(clips[0].notes)
    assert "HandSlot.L" in note and "HandSlot.R" in note and "4 channel" in note, clips[0].notes
    # the Animation panel says which channels were ignored
    preview.clear_states()
    try:
        labels = draw_panel(preview_panel.STYLIZED_PT_viewport_animation, Ctx(empty_scene, arm)).labels()
    finally:
        preview.clear_states()
    assert any("HandSlot.L" in lab and "ignored" in lab for lab in labels), labels
    # played by the preview as Blender plays it (the missing bones ignored), between frames too
    rc, out, fields = _player_check(capsys, step=2)
    assert int(fields["clips_checked"]) == 1, out
    assert float(fields["max_rel_error"]) < 1e-4 and float(fields["fraction_max_rel_error"]) < 1e-4, out
    assert rc == 0, out


def test_check_fails_when_no_clip_of_the_file_is_checked(empty_scene, capsys):
    """An action animating the file that no clip plays (here: refused for a non-finite key) must
    fail the player check, not pass with nothing checked."""
    arm, body, act = _pack_character(empty_scene)
    fc = act.layers[0].strips[0].channelbag(act.slots[0]).fcurves[0]
    fc.keyframe_points[1].co = (9.0, float("nan"))
    rc, out, fields = _player_check(capsys)
    assert int(fields["clips_checked"]) == 0, out
    assert "not offered: action 'PackWave'" in out, out
    assert rc != 0, out


def test_noise_modifier_falls_back_to_frames_with_a_stated_reason(feature_rig, capsys):
    """A modifier the preview does not evaluate (Noise) is never a silent polyline: that curve is
    sampled at every frame, the clip's notes (and the Animation panel) name the curve and the
    reason, integer frames still match and between frames are reported, not claimed exact."""
    from stylized_renderer.engine.blender import importer

    arm, ob, act = feature_rig
    fc = next(f for f in act.layers[0].strips[0].channelbag(act.slots[0]).fcurves
              if f.data_path == 'pose.bones["B03"].location' and not len(f.modifiers))
    noise = fc.modifiers.new("NOISE")
    noise.strength = 0.2
    clip = importer.compatible_clips(importer.import_scene(bpy.context.evaluated_depsgraph_get()), arm.name)[0]
    assert any('pose.bones["B03"].location' in n and "Noise modifier" in n and "sampled at every frame" in n
               for n in clip.notes), clip.notes
    rc, out, fields = _player_check(capsys)
    assert "note: clip 'Features'" in out and "between" in out, out
    assert float(fields["fraction_max_rel_error"]) == 0.0, out     # not claimed exact between frames
    assert float(fields["max_rel_error"]) < 1e-4, out              # exact at the frames
    assert rc == 0, out


@pytest.mark.parametrize("mode", ["ZXY", "QUATERNION", "AXIS_ANGLE"])
def test_object_clip_with_delta_transforms_between_frames(empty_scene, capsys, mode):
    """An object's own action (location, rotation in ``mode``, scale; Back, Bounce, Bezier keys)
    over delta transforms: Blender's matrix_basis = T(loc + dloc) R(drot @ rot) S(scale * dscale)
    between frames too."""
    verts, faces = C.cube_geometry()
    ob = C.add_mesh_object(empty_scene, "Prop", verts, faces)
    ob.rotation_mode = mode
    ob.delta_location = (0.3, -0.2, 0.1)
    ob.delta_rotation_euler = (0.2, 0.4, -0.3)
    ob.delta_rotation_quaternion = (0.9, 0.1, 0.3, -0.2)
    ob.delta_scale = (1.2, 0.8, 1.1)
    act, cb = scenes.new_action("PropMove", ob)
    prop = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}.get(mode, "rotation_euler")
    rng = np.random.default_rng(3)
    for p, w, base, sd in (("location", 3, 0.0, 0.5), (prop, 4 if prop != "rotation_euler" else 3, 0.5, 0.6),
                           ("scale", 3, 1.0, 0.2)):
        for j in range(w):
            fc = scenes.add_curve(cb, p, j, [1, 6, 13, 20], base + rng.normal(size=4) * sd)
            for k, ipo in zip(fc.keyframe_points, ("BACK", "BOUNCE", "BEZIER", "BEZIER")):
                k.interpolation = ipo
                k.back = 1.7
            fc.update()
    rc, out, fields = _player_check(capsys, step=3)
    assert int(fields["clips_checked"]) == 1 and "fraction Prop: verts=" in out, out
    assert float(fields["fraction_max_rel_error"]) < 1e-4, out
    assert rc == 0, out
