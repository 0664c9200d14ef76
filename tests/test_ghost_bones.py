"""An action that keys bones its armature lacks (issue 38 item 2: the glTF robot's clips key
``pose.bones["Body"]``, a node that became no bone): Blender ignores such channels, and so do
the Scene preview, the clip player and tools/check_deform.py in every mode (the Scene check
crashed on ``path_resolve``).  The scene (``tools/scenes.build_ghost_bone_action``) also blends a
quaternion near the identity in a Combine strip, where Blender's single precision shows
(``animation.nla.qpow``), and keys a quaternion in part (a Scene bake's signature must not see
its other components move)."""
from __future__ import annotations

import bpy
import pytest

import conftest as C
from tools import check_scene, scenes


@pytest.fixture
def ghost(empty_scene):
    return scenes.build_ghost_bone_action(empty_scene)


FRAMES = [(1, 0.25), (1, 0.5), (4, 0.0), (9, 0.8), (20, 0.0)]


def test_the_scene_check_ignores_channels_of_missing_bones(ghost, capsys):
    rc = check_scene.run(bpy.context.scene, FRAMES)
    out = capsys.readouterr().out
    assert rc == 0, out
    from stylized_renderer.engine.blender.sources.nla import SceneAnimation

    anim = SceneAnimation(bpy.context.scene, sample=False)
    (rig,) = anim.ids
    assert not any("Ghost" in p or "Head.R" in p for p, _i in rig.keys), rig.keys
    assert any('pose.bones["Ghost"].location' in n and "ignored" in n for n in rig.notes), rig.notes


def test_a_combine_quaternion_near_the_identity_rounds_as_blender(ghost):
    """Blender blends a Combine strip's quaternion in single precision (normalise, then the
    arccosine of w): a keyed x of 9.1e-4 at frame 1.25 comes out as 8.5e-4.  In double precision
    the preview erred 6.3e-5 there."""
    from stylized_renderer.engine.blender.sources.nla import SceneAnimation

    scene = bpy.context.scene
    err, lines = check_scene.compare(scene, SceneAnimation(scene, sample=False), FRAMES[:2])
    assert err < 2e-6, "\n".join(lines)


@pytest.mark.parametrize("constrained", [False, True], ids=["plain", "baked"])
def test_the_scene_preview_draws_what_blender_draws(empty_scene, constrained, capsys):
    scenes.build_ghost_bone_action(empty_scene, constrained=constrained)
    rc = check_scene.run_deform(empty_scene, FRAMES)
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "refused" not in out and "scene Hat: verts=9" in out, out
    assert ("baked (tolerance" in out) == constrained, out


def test_check_deform_timeline_then_player_passes(ghost, capsys):
    """The default mode: the timeline check imports at its first frame; the player check then
    holds what a clip does not key at that frame's pose on both sides (GhostNod keys Head only,
    the active action and the NLA move Spine)."""
    rc, out, fields = C.run_deform_check(capsys, "1,7,20", "both")
    assert rc == 0, out
    assert int(fields["clips_checked"]) == 2 and float(fields["max_rel_error"]) < 1e-4, out
    assert "channel(s) of bones 'Ghost', 'Head.R' ignored" in out, out


def test_qpow_is_the_plain_formula_in_single_precision():
    """``nla.qpow`` (Blender's normalise + ``pow_qt_fl_normalized`` in float32) against the
    plain double-precision formula: within float32 rounding away from the identity; a zero
    quaternion normalises to (0, 1, 0, 0) as Blender's ``normalize_qt``."""
    import numpy as np

    from stylized_renderer.engine.core.animation.nla import qpow

    rng = np.random.default_rng(3)
    q = rng.normal(size=(64, 4)) * rng.uniform(0.5, 3.0, size=(64, 1))
    q[q[:, 0] > 0.9 * np.linalg.norm(q, axis=1)] *= -1.0        # none within ~25 degrees of the identity
    w = rng.uniform(-1.0, 2.0, size=64)
    u = q / np.linalg.norm(q, axis=1, keepdims=True)
    a = w * np.arccos(u[:, 0])
    axis = u[:, 1:] / np.linalg.norm(u[:, 1:], axis=1, keepdims=True)
    plain = np.concatenate([np.cos(a)[:, None], axis * np.sin(a)[:, None]], axis=1)
    assert np.abs(qpow(q, w) - plain).max() < 1e-5
    assert np.allclose(qpow(np.zeros((1, 4)), 1.0), [[0.0, 1.0, 0.0, 0.0]], atol=1e-6)
