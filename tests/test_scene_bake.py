"""Scene playback bakes what only Blender evaluates (engine/blender/bake/scene.py,
engine/features/preview/scene_bake.py): an IK rig (Quaternius) and a Rigify character playing NLA stacks
are baked over the scene's range as the timeline shows them and drawn from the bake; every drawn
vertex is compared with Blender's evaluated mesh after frame_set at integer and fractional frames
(1e-4 of the object's size at integer frames, 1e-3 between them).  Negative controls: a bake
played two frames late, a bake made from the active action alone (the clip bakes' isolation) and
a stale bake after an NLA edit must fail or be refused."""
from __future__ import annotations

import pathlib
import re

import bpy
import pytest

import conftest as C
from tools import check_scene

TESTDATA = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "testdata"
QUATERNIUS = TESTDATA / "rigs" / "Quaternius_MaleCasual.blend"


def _errors(out: str) -> dict:
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"scene (\S+): verts=\d+ max_rel_error=(\S+)", out)}


@pytest.fixture
def ik_nla_scene(ext):
    """The Quaternius character (IK on both legs) with an NLA stack: its Walk stash unmuted and
    repeated twice, a Punch strip combined over it with blend in / out, no active action."""
    if not QUATERNIUS.exists():
        pytest.skip(f"{QUATERNIUS} is absent (../shared/testdata is not in a user's clone)")
    bpy.ops.wm.open_mainfile(filepath=str(QUATERNIUS))
    scene = bpy.context.scene
    scene.render.engine = "STYLIZED"
    ad = bpy.data.objects["HumanArmature"].animation_data
    ad.action = None
    walk = ad.nla_tracks["[Action Stash].001"]
    walk.mute = False
    walk.strips[0].repeat = 2.0
    st = ad.nla_tracks.new().strips.new("punch", 10, bpy.data.actions["Man_Punch"])
    st.blend_type = "COMBINE"
    st.blend_in = st.blend_out = 3.0
    st.extrapolation = "NOTHING"
    scene.frame_start, scene.frame_end = 0, 30
    scene.frame_set(0)
    yield scene
    bpy.ops.wm.read_factory_settings(use_empty=True)


INTEGERS = [(f, 0.0) for f in range(0, 31, 3)]
BETWEEN = [(f, s) for f in (1, 8, 9, 11, 12, 13, 20, 24, 29) for s in (0.25, 0.5, 0.8)]


def test_an_ik_rig_playing_nla_is_baked_and_drawn_as_the_timeline_shows_it(ik_nla_scene, capsys):
    rc = check_scene.run_deform(ik_nla_scene, INTEGERS)
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "baked (tolerance 0.001)" in out and "path=gpu" in out, out
    assert "'HumanArmature' baked through Blender (IK on bone 'LowerLeg.L', 'LowerLeg.R')" in out, out
    assert _errors(out)["BaseHuman"] <= 1e-4, out          # at the bake's own frames: as plain playback
    rc = check_scene.run_deform(ik_nla_scene, BETWEEN)
    out = capsys.readouterr().out
    assert rc == 0, out
    assert _errors(out)["BaseHuman"] <= check_scene.BAKED_TOL, out


def test_a_scene_bake_played_late_or_without_the_nla_fails(ik_nla_scene, capsys, monkeypatch):
    from stylized_renderer.engine.blender.bake import scene as bake_scene
    from stylized_renderer.engine.features.preview import scene_bake as preview_scene_bake

    orig = preview_scene_bake.SceneBakeFeed.write
    with monkeypatch.context() as m:
        m.setattr(preview_scene_bake.SceneBakeFeed, "write", lambda self, f, rt: orig(self, f - 2.0, rt))
        assert check_scene.run_deform(ik_nla_scene, INTEGERS) == 1, capsys.readouterr().out
    # a bake of the active action alone (what a clip bake isolates), not the timeline's NLA
    ad = bpy.data.objects["HumanArmature"].animation_data
    record = bake_scene.bake_in_scene

    def without_nla(armature, scene, frames, progress=None, reasons=None, quiet=None):
        muted = [(t, t.mute) for t in ad.nla_tracks]
        ad.action = bpy.data.actions["Man_Walk"]
        for t, _m in muted:
            t.mute = True
        try:
            return record(armature, scene, frames, progress, reasons, quiet)
        finally:
            ad.action = None
            for t, mu in muted:
                t.mute = mu

    monkeypatch.setattr(bake_scene, "bake_in_scene", without_nla)
    rc = check_scene.run_deform(ik_nla_scene, INTEGERS)
    out = capsys.readouterr().out
    assert rc == 1 and _errors(out)["BaseHuman"] > 1e-2, out


@pytest.fixture(scope="module")
def rigify_file(tmp_path_factory, rigify_generated):
    """A generated Rigify character whose action plays through an NLA stack: the action twice
    (repeat 2, scale 1.5) and again over it, combined at half influence from frame 6."""
    rig, _body, action = C.rigify_character(rigify_generated, face=False)
    ad = rig.animation_data
    ad.action = None
    s = ad.nla_tracks.new().strips.new("base", 1, action)
    s.scale, s.repeat = 1.5, 2.0
    s2 = ad.nla_tracks.new().strips.new("over", 6, action)
    s2.blend_type = "COMBINE"
    s2.use_animated_influence = True
    s2.influence = 0.5
    s2.extrapolation = "HOLD_FORWARD"
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 28
    scene.frame_set(1)
    path = tmp_path_factory.mktemp("rigify_nla") / "rigify_nla.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


@pytest.fixture
def rigify_scene(rigify_file, ext):
    bpy.ops.wm.open_mainfile(filepath=str(rigify_file))
    bpy.context.scene.render.engine = "STYLIZED"
    yield bpy.context.scene
    bpy.ops.wm.read_factory_settings(use_empty=True)


def test_rigify_scene_play_bakes_draws_and_rebakes_after_an_nla_edit(rigify_scene, capsys):
    """Play (the operator) bakes the Rigify rig with its NLA over the scene's range; the panel
    names the bake and its reasons; the drawn body matches Blender's timeline at integer and
    fractional frames; an NLA edit makes the bake stale: the session refuses (never a wrong
    pose) until Play bakes again, after which it matches the edited timeline."""
    from stylized_renderer.engine.blender.bake.scene import SceneBakes
    from stylized_renderer.engine.features.preview import control as preview
    from stylized_renderer.panels import preview_panel
    from support.panels import Ctx, draw_panel

    scene = rigify_scene
    preview.clear_states()
    try:
        assert bpy.ops.stylized.preview_scene(action="PLAY") == {"FINISHED"}
        st = preview.get_state(scene)
        assert isinstance(st.scene_bakes, SceneBakes) and set(st.scene_bakes.bakes) == {"rig"}
        assert st.scene_bakes.range == (1, 28)
        assert bpy.ops.stylized.preview_scene(action="PAUSE") == {"FINISHED"}
        frames = [(f, 0.0) for f in (1, 5, 9, 14, 20, 27)] + [(f, 0.5) for f in (3, 7, 12, 19)] + [(10, 0.3)]
        rc = check_scene.run_deform(scene, frames, state=st, seek=True)
        out = capsys.readouterr().out
        assert rc == 0, out
        assert "scene RigifyBody:" in out and "baked (tolerance 0.001)" in out, out
        notes = " ".join(st.scene_notes)
        assert "'rig' baked through Blender (" in notes and "IK on bone" in notes and "B-Bones" in notes, notes
        lay = draw_panel(preview_panel.STYLIZED_PT_viewport_scene, Ctx(scene, None))
        assert any("'rig' baked through Blender" in t for t in lay.labels()), lay.labels()
        # an NLA edit: the bake no longer shows the timeline; the session refuses it
        strip = bpy.data.objects["rig"].animation_data.nla_tracks[1].strips[0]
        strip.blend_type = "ADD"
        st.push("scene_reload")
        rc = check_scene.run_deform(scene, [(9, 0.0)], state=st, seek=True)
        out = capsys.readouterr().out
        assert rc == 1 and "refused: Scene playback needs a bake: the scene's animation or a baked rig changed" in out, out
        st.active = st.scene_mode = False
        assert bpy.ops.stylized.preview_scene(action="PLAY") == {"FINISHED"}
        assert st.scene_bakes.bake_count == 2
        assert bpy.ops.stylized.preview_scene(action="PAUSE") == {"FINISHED"}
        rc = check_scene.run_deform(scene, [(9, 0.0), (16, 0.5)], state=st, seek=True)
        out = capsys.readouterr().out
        assert rc == 0, out
    finally:
        preview.stop_timer()
        preview.clear_states()


def test_a_scene_bake_follows_what_needs_blender(ik_nla_scene):
    """A bake is current while the scene needs exactly it: a rig that loses its IK makes the bake
    stale (never drawn: its NLA plays it), a frame before the baked ones too; ensure bakes again."""
    from stylized_renderer.engine.blender.bake import scene as bake_scene

    bakes = bake_scene.SceneBakes()
    why = bakes.stale(ik_nla_scene)
    assert why is not None and why.startswith("armature 'HumanArmature' needs a bake through Blender (IK on bone"), why
    assert bakes.ensure(ik_nla_scene) and set(bakes.bakes) == {"HumanArmature"} and bakes.range == (0, 30)
    assert bakes.stale(ik_nla_scene) is None and not bakes.ensure(ik_nla_scene)
    ik_nla_scene.frame_set(-2)
    assert "before the baked frames" in (bakes.stale(ik_nla_scene) or "")
    ik_nla_scene.frame_set(0)
    arm = bpy.data.objects["HumanArmature"]
    for pb in arm.pose.bones:
        for c in list(pb.constraints):
            pb.constraints.remove(c)
    assert bakes.stale(ik_nla_scene) == "the baked armatures changed"
    assert bakes.ensure(ik_nla_scene) and bakes.bakes == {} and bakes.stale(ik_nla_scene) is None


def test_a_baked_armature_deforming_no_mesh_is_checked_on_its_baked_frames(empty_scene, capsys):
    """29_armature_use_current_pose.blend: a constrained armature (baked by Play) deforms no
    mesh; the check skips the frames before the bake (never played) as it does for a rig that
    deforms one, instead of seeking there and failing on the refusal."""
    from tools import scenes

    arm = scenes.make_armature("Lonely", [("Bone", None, (0, 0, 0), (0, 0, 1))], empty_scene)
    arm.pose.bones["Bone"].constraints.new("LIMIT_ROTATION").use_limit_x = True
    scenes.make_mesh("Cube", [(0, 0, 0), (1, 0, 0), (0, 1, 0)], [(0, 1, 2)], empty_scene)
    empty_scene.frame_start, empty_scene.frame_end = 1, 5
    scenes.finish()
    rc = check_scene.run_deform(empty_scene, [(-2, 0.0), (1, 0.0), (3, 0.5)])
    out = capsys.readouterr().out
    assert rc == 0 and "1 frame(s) outside the baked frames 1..5" in out and "scene Cube:" in out, out
