"""The adaptive bake measures B-Bone segments (issue 22): a B-Bone whose head and tail never move
but whose custom end handle swings fast bends only its segments; the bake must find that motion
between frames (engine/blender/bake/adaptive.py ``Measure``: deform bones' heads and tails and
every weighted B-Bone segment's head, tail and X axis) and add what it needs, so the preview is
within 1e-3 of Blender between frames (tools/check_deform.py player mode, baked-between)."""
from __future__ import annotations

import numpy as np
import pytest

import conftest as C  # noqa: F401  (registers the extension fixtures)
from support import fcurve_rigs
from tools import deform_checker, scenes


def _swinging_handle_rig(amp=0.3, step=3, parented=True):
    """One 8-segment deform B-Bone along +Z (never moving) with an ABSOLUTE custom end handle bone
    keyed every ``step`` frames between +-``amp`` (Bezier), a strip weighted to it.
    ``parented``: the B-Bone is the child of a still root bone (else the rig has root bones only)."""
    arm = scenes.make_armature("SwingRig", [
        ("root", None, (0, 0, -0.5), (0, 0, 0), False),
        ("bend", "root" if parented else None, (0, 0, 0), (0, 0, 2)),
        ("handle", None, (0, 0, 2.3), (0, 0.3, 2.3), False),
    ])
    bones = arm.data.bones
    bones["bend"].bbone_segments = 8
    bones["bend"].bbone_easein, bones["bend"].bbone_easeout = 1.5, 1.5
    bones["bend"].bbone_handle_type_end = "ABSOLUTE"
    bones["bend"].bbone_custom_handle_end = bones["handle"]
    verts, quads, _uv = scenes.grid(4, 41, size=(0.6, 2.0), origin=(-0.3, 0.0, 0.0))
    ob = scenes.make_mesh("SwingStrip", verts, quads)
    scenes.skin_to(ob, arm, {"bend": (np.arange(len(verts)), np.ones(len(verts)))})
    pb = arm.pose.bones["handle"]
    for k, f in enumerate(range(1, 11, step)):
        s = 1.0 if k % 2 == 0 else -1.0
        pb.location = (amp * s, 0.0, 0.5 * amp * s)
        pb.keyframe_insert("location", frame=f)
    return fcurve_rigs.finish_clip(arm, "SwingAction", 1, 10), ob


@pytest.mark.parametrize("parented", [True, False])
def test_bbone_segments_exact_between_frames(empty_scene, capsys, bakes, parented):
    """The bake adds the sub-frame samples the bending segments need; also on a rig of root
    bones only (no inner bone: the palettes take every joint from its root)."""
    arm, _ob = _swinging_handle_rig(parented=parented)
    assert any("B-Bones" in r for r in bakes.bake_reasons(arm)), bakes.bake_reasons(arm)
    rc, out, f = C.run_deform_check(capsys, "1-10", "player")
    assert rc == 0, out
    assert "baked-between SwingStrip" in out, out
    assert float(f["baked_between_max_rel_error"]) <= deform_checker.BETWEEN_TOLERANCE, out
    b = bakes.cache.lookup(arm.name, "SwingAction")[0]
    assert b.added > 0, (b.frames, b.checked)


def test_bbone_segments_unmeasured_fail(empty_scene, capsys, bakes, monkeypatch):
    """Negative control: the bake measuring bone heads and tails only (the segments and the
    deformed meshes' corners left out) adds
    nothing for the swinging handle and fails between frames."""
    from stylized_renderer.engine.blender.bake import adaptive as bake_adaptive

    _swinging_handle_rig()
    init = bake_adaptive.Measure.__init__

    def bones_only(self, lengths, size, *_segments_and_meshes):
        init(self, lengths, size)

    monkeypatch.setattr(bake_adaptive.Measure, "__init__", bones_only)
    rc, out, f = C.run_deform_check(capsys, "1-10", "player")
    assert rc == 1, out
    assert float(f["baked_between_max_rel_error"]) > deform_checker.BETWEEN_TOLERANCE, out
