"""Scene playback plays VRM expression previews (the VRM Add-on's ``preview`` keyed on the
armature's data) as the timeline shows them: engine/blender/sources/nla.py reads the armature data's
action and NLA, engine/features/preview/scene.py hands the evaluated previews to the session's
TimelineReader, which applies the VRM rules and binds to the face's shape keys.

* with the add-on: Blender evaluates the previews (an NLA strip repeated under a combined active
  action) and the add-on writes the face's shape keys; every drawn vertex of the face is compared
  with Blender's evaluated mesh at integer and fractional frames;
* without the add-on (the ID properties it leaves; Blender cannot resolve the preview path): the
  face Blender would show with the expression typed into its shape keys by hand (the Angry
  binds x the curve's value, FCurve.evaluate) is the reference.
Negative control: the expressions held at the frame Play started (no Scene evaluation) fail.
"""
from __future__ import annotations

import bpy
import numpy as np
import pytest

import conftest as C  # noqa: F401
from support.vrm_addon import disable_vrm_addon
from support.vrm_scenes import ANGRY, ANGRY_BINDS, GODETTE, key_preview, needs_godette, open_godette
from tools import check_scene

JOY = 7
FRAMES = [(f, s) for f in (1, 4, 8, 11, 15, 19, 23) for s in (0.0, 0.5)] + [(6, 0.3)]


def _take(arm):
    """The armature data's active action, unassigned (made by key_preview with the add-on)."""
    ad = arm.data.animation_data
    act = ad.action
    ad.action = None
    return act


@needs_godette
def test_vrm_expressions_play_in_scene_mode_with_the_addon(vrm_addon, capsys, monkeypatch):
    scene = open_godette()
    arm = bpy.data.objects["Armature"]
    key_preview(arm, ANGRY, [(1, 0.0), (6, 1.0), (11, 0.3)])
    angry = _take(arm)
    key_preview(arm, JOY, [(1, 0.0), (20, 0.8)])
    joy = _take(arm)
    grp = arm.data.vrm_addon_extension.vrm0.blend_shape_master.blend_shape_groups
    grp[ANGRY].preview = grp[JOY].preview = 0.0
    dad = arm.data.animation_data
    st = dad.nla_tracks.new().strips.new("angry", 1, angry)
    st.repeat = 2.0
    dad.action = joy
    dad.action_blend_type = "COMBINE"
    dad.action_influence = 0.6
    scene.frame_start, scene.frame_end = 1, 24
    scene.frame_set(1)
    rc = check_scene.run_deform(scene, FRAMES)
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "scene Face:" in out and "path=gpu" in out.split("scene Face:")[1].split("\n")[0], out
    # the control: the face the previews had when Play started, not Scene time
    from stylized_renderer.engine.features.preview import scene as preview_scene

    orig = preview_scene.ScenePlayback.__init__

    def held(self, *a, **k):
        orig(self, *a, **k)
        self._expr = None

    monkeypatch.setattr(preview_scene.ScenePlayback, "__init__", held)
    assert check_scene.run_deform(scene, FRAMES) == 1, capsys.readouterr().out


@pytest.fixture
def godette_without_addon(vrm_addon, tmp_path):
    """Godette with the Angry preview keyed on its data by the add-on, saved, then reopened
    without the add-on."""
    scene = open_godette()
    arm = bpy.data.objects["Armature"]
    key_preview(arm, ANGRY, [(1, 0.0), (6, 1.0), (11, 0.3), (20, 0.9)])
    arm.data.vrm_addon_extension.vrm0.blend_shape_master.blend_shape_groups[ANGRY].preview = 0.0
    scene.frame_start, scene.frame_end = 1, 24
    scene.frame_set(1)
    path = tmp_path / "godette_angry.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    disable_vrm_addon()
    scene = open_godette(path)
    yield scene
    bpy.ops.wm.read_factory_settings(use_empty=True)


@needs_godette
def test_vrm_expressions_play_in_scene_mode_without_the_addon(godette_without_addon, capsys):
    scene = godette_without_addon
    arm = bpy.data.objects["Armature"]
    assert not hasattr(arm.data, "vrm_addon_extension")
    arm.stylized_spring_bones = False     # the hair as Blender poses it (our springs: test_springs_*)
    fc = next(c for c in check_scene._fcurves(arm.data.animation_data.action) if c.data_path.endswith(
        f"blend_shape_groups[{ANGRY}].preview"))
    keys = bpy.data.objects["Face"].data.shape_keys.key_blocks

    def typed(f, sub):
        # the face Blender shows when the expression is typed into its shape keys by hand
        v = float(np.clip(fc.evaluate(f + sub), 0.0, 1.0))
        for name, w in ANGRY_BINDS.items():
            keys[name].value = w * v

    rc = check_scene.run_deform(scene, FRAMES, reference=typed)
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "scene Face:" in out, out
    # the channel check leaves out the previews Blender cannot resolve without the add-on (it
    # crashed in path_resolve on them)
    assert check_scene.run(scene, FRAMES[:2]) == 0, capsys.readouterr().out
    assert check_scene.run_deform(scene, [(6, 0.0)], reference=lambda f, s: typed(f - 5, s)) == 1, \
        capsys.readouterr().out            # the control: a reference at another time differs


@needs_godette
def test_check_deform_mode_scene_turns_our_spring_bones_off(ext, capsys):
    """Blender's pose has no spring bones: ``check_deform --mode scene`` compares with them off,
    as its other modes do (Godette's hair swung 1.6e-2 of the body's size off Blender's)."""
    from tools import check_deform

    bpy.ops.wm.open_mainfile(filepath=str(GODETTE))
    arm = bpy.data.objects["Armature"]
    assert arm.stylized_spring_bones
    rc = check_deform.run_scene(bpy.context.scene, [(1, 0.0), (12, 0.5), (30, 0.0)])
    out = capsys.readouterr().out
    assert rc == 0 and "scene Body: verts=" in out, out
    assert not arm.stylized_spring_bones
