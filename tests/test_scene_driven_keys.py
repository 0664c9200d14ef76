"""Scene playback of shape keys whose values drivers set (the glTF test files 12 and 28 drive a
cube's key from a bone; Scene mode refused them): Play bakes the driven values through Blender
over the played range (engine/blender/bake/scene_keys.py, adaptive half-way samples) and the
playback draws them from the bake over the key's own NLA.  Every drawn vertex against Blender's
evaluated mesh at integer and fractional frames (tools/check_scene.run_deform)."""
from __future__ import annotations

import numpy as np
import pytest

import conftest as C  # noqa: F401  (registers the extension fixtures)
from tools import check_scene, scenes

FRAMES = [(f, s) for f in (1, 3, 6, 9, 12) for s in (0.0, 0.3, 0.5)]


@pytest.fixture
def driven(empty_scene):
    """DrivenFace's 'Open' key driven by the Jaw's X rotation, the Jaw keyed (Bezier) 1 -> 12."""
    arm, face = scenes.build_driven_shape_keys(empty_scene)
    pb = arm.pose.bones["Jaw"]
    pb.rotation_mode = "XYZ"
    for f, v in ((1, 0.0), (6, 0.9), (12, 0.2)):
        pb.rotation_euler.x = v
        pb.keyframe_insert("rotation_euler", index=0, frame=f)
    empty_scene.frame_start, empty_scene.frame_end = 1, 12
    scenes.finish()
    return empty_scene, arm, face


def test_driven_shape_keys_play_in_scene_mode_from_a_bake(driven, capsys):
    scene, _arm, face = driven
    rc = check_scene.run_deform(scene, FRAMES)
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "scene DrivenFace: verts=9" in out and "baked (tolerance 0.001)" in out, out
    assert "shape keys 'Key' (Open) driven, baked through Blender" in out, out


def test_without_the_key_bake_the_driven_face_fails_the_check(driven, capsys, monkeypatch):
    """Negative control: the bake's values not written (the key held where Play started)."""
    from stylized_renderer.engine.features.preview import scene_bake

    monkeypatch.setattr(scene_bake.KeyFeed, "write", lambda self, frame, weights, base: None)
    scene = driven[0]
    assert check_scene.run_deform(scene, FRAMES) == 1, capsys.readouterr().out


def test_a_driver_edit_makes_the_key_bake_stale(driven):
    from stylized_renderer.engine.blender.bake.scene import SceneBakes

    scene, _arm, face = driven
    bakes = SceneBakes()
    why = bakes.stale(scene)
    assert why is not None and why.startswith("shape keys 'Key' are driven"), why
    assert bakes.ensure(scene) and bakes.stale(scene) is None
    kb = bakes.keys["Key"]
    assert kb.times[0] == 1.0 and kb.times[-1] == 12.0 and kb.added > 0
    scene.frame_set(7, subframe=0.5)
    assert abs(float(kb.at(7.5)[0]) - face.data.shape_keys.key_blocks["Open"].value) < 2.5e-4
    face.data.shape_keys.animation_data.drivers[0].driver.expression = "var * 0.5"
    assert bakes.stale(scene) == "the scene's animation or a baked rig changed since the bake"
    assert np.isfinite(kb.values).all()
