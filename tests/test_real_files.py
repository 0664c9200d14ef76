"""Third-party characters (../shared/testdata/real: glTF imports with their muted NLA tracks;
../shared/testdata/vrm: a VRM 0.x avatar imported with the VRM Add-on, read here without it):
the deformation check in both modes, every clip through the preview player as it really runs,
and an F12 render of each; ../shared/testdata/rigs (Quaternius characters: a native rig with IK,
its clips baked, and an FBX import; issue 22): the deformation check in both modes, between
frames included.  Skipped with a reason where ../shared is absent (a user's clone)."""
from __future__ import annotations

import bpy
import numpy as np
import pytest

import conftest as C
from tools import check_deform, deform_checker

REAL = sorted((C.TESTDATA / "real").glob("*.blend")) + sorted((C.TESTDATA / "vrm").glob("*.blend")) \
    if C.TESTDATA.is_dir() else []
RIGS = sorted((C.TESTDATA / "rigs").glob("*.blend")) if C.TESTDATA.is_dir() else []


_fields = check_deform.summary_fields


def _deform_check(capsys, path):
    """check_deform in both modes every 12th frame (player: every clip, between frames at a few
    frames spread over each clip): (output, summary fields), asserted within tolerance."""
    bpy.ops.wm.open_mainfile(filepath=str(path))
    scene = bpy.context.scene
    rc = check_deform.run_checks(f"{scene.frame_start}-{scene.frame_end}:12", "both", player_step=12)
    out = capsys.readouterr().out
    f = _fields(out)
    assert rc == 0, out
    assert float(f["max_rel_error"]) <= deform_checker.TOLERANCE, out
    assert int(f["skipped"]) == 0, out                  # no clip skipped: NLA tracks are muted, not a reason
    assert "player " in out and "path=gpu" in out, out
    return out, f


@pytest.mark.skipif(not RIGS, reason="../shared/testdata/rigs is absent (only in the project workspace)")
@pytest.mark.parametrize("path", RIGS, ids=lambda p: p.name)
def test_rig_character_deforms_as_blender_between_frames(ext, capsys, path):
    """Every clip of the Quaternius characters through the player, plain (FBX import: 1e-4 between
    frames) and baked (IK: 1e-3 between frames)."""
    out, f = _deform_check(capsys, path)
    assert int(f["clips_checked"]) >= 10, out
    if int(f["baked"]):
        assert "baked-between" in out, out
    else:
        assert "fraction" in out, out


@pytest.mark.skipif(not REAL, reason="../shared/testdata/real and vrm are absent (only in the project workspace)")
@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_character_deforms_as_blender_and_renders(ext, capsys, path):
    _deform_check(capsys, path)
    scene = bpy.context.scene
    scene.render.resolution_x, scene.render.resolution_y, scene.render.resolution_percentage = 160, 120, 100
    scene.render.engine = "STYLIZED"
    px = C.render_scene(scene)
    from tools.render_capture import LAST_RENDER as last_render

    st = last_render["stats"]
    assert st["gpu_items"] >= 1 and st["import_error"] is None and st["update_error"] is None, st
    # nothing the GPU path draws is drawn again as an instance (the VRM outline modifier's output)
    assert not [f for f in st["fallbacks"] if f[1] == "instance"], st["fallbacks"]
    assert np.isfinite(px).all()
    bg = px[0, 0, :3]
    assert (np.abs(px[..., :3] - bg).max(axis=2) > 0.02).sum() > 150      # the character is on screen
