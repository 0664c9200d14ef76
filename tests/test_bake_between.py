"""Baked clips exact between frames (issue 22 items 2 and 3, engine/blender/bake/):
tools/check_deform.py player mode compares the preview of baked clips with Blender's evaluation at
0.25, 0.5 and 0.75 past a few frames and fails above 1e-3 of the object size ("baked-between");
the bake interpolates each bone's parent-relative matrix by translation lerp, rotation slerp and
stretch lerp (bake/tables.py) and adds sub-frame samples where that is not close to Blender
(bake/adaptive.py).  Negative controls: a matrix lerp, and no sub-frame samples on a fast IK rig."""
from __future__ import annotations

import math

import bpy
import numpy as np
import pytest

import conftest as C  # noqa: F401  (registers the extension fixtures)
from stylized_renderer.engine.blender.bake.baked_pose import baked_clip
from support import fcurve_rigs
from tools import deform_checker, rigify_rig, scenes


def _run(capsys, frames="1-12"):
    return C.run_deform_check(capsys, frames, "player")


def _spin_rig():
    """A bone turning 30 degrees a frame at constant speed (linear Euler keys) on a rig baked for
    a constraint on another bone: slerp is exact between frames there, a matrix lerp shrinks the
    arm by 1 - cos(15 deg) half-way."""
    arm = scenes.make_armature("SpinRig", [
        ("root", None, (0, 0, 0), (0, 0, 0.3)),
        ("spin", "root", (0, 0, 0.3), (1.5, 0, 0.3)),
        ("ctrl", None, (0, 2, 0), (0, 2, 0.5), False),
        ("follow", None, (0, 3, 0), (0, 3, 0.5), False),
    ])
    pb = arm.pose.bones
    c = pb["follow"].constraints.new("COPY_LOCATION")
    c.target, c.subtarget = arm, "ctrl"
    ob = rigify_rig._skin_by_distance("SpinBody", arm, ["root", "spin"], per_vertex=1,
                                      radius_scale=0.1, rings=6, sides=6)
    pb["spin"].rotation_mode = "XYZ"
    for f in range(1, 13):
        pb["spin"].rotation_euler = (0.0, 0.0, math.radians(30.0 * (f - 1)))
        pb["spin"].keyframe_insert("rotation_euler", frame=f)
    from stylized_renderer.engine.blender.importer import actions as _actions

    for fc in _actions.slot_fcurves(arm.animation_data.action, getattr(arm.animation_data, "action_slot", None)):
        for kp in fc.keyframe_points:
            kp.interpolation = "LINEAR"
    return fcurve_rigs.finish_clip(arm, "SpinAction", 1, 12), ob


def test_constraint_rig_exact_between_frames(empty_scene, capsys, bakes):
    """The IK + Copy Rotation + driver rig (fast motion: 4.4e-2 of its size half-way between frames
    with one sample a frame): within 1e-3 at 0.25/0.3/0.5/0.62/0.75 past 4 frames, with the
    sub-frame samples the adaptive bake added, and the bake states the error it left."""
    arm, _ob, act = rigify_rig.build_constraint_rig()
    rc, out, f = _run(capsys, "1-10")
    assert rc == 0, out
    assert "baked-between CBody" in out, out
    assert float(f["baked_between_max_rel_error"]) <= deform_checker.BETWEEN_TOLERANCE, out
    b = bakes.cache.lookup(arm.name, act.name)[0]
    assert b.added > 0 and b.checked >= b.added, (b.added, b.checked)
    # what the bake measured and left: the IK chain snapping straight within a few hundredths
    # of a frame (frames ~2.2 and ~9.1, a jump in Blender's own evaluation) stays in its figure
    assert np.isfinite(b.between_error) and b.between_error > 0.0, b.between_error
    assert np.diff(b.frames).min() <= 1.0 / 32.0, b.frames


def test_without_subframe_samples_a_fast_ik_rig_fails(empty_scene, capsys, bakes, monkeypatch):
    """Negative control: the same rig baked at its frames only (no adaptive samples) fails."""
    from stylized_renderer.engine.blender.bake import adaptive as bake_adaptive

    rigify_rig.build_constraint_rig()
    monkeypatch.setattr(bake_adaptive, "MAX_DEPTH", 0)
    rc, out, f = _run(capsys, "1-10")
    assert rc == 1, out
    assert float(f["baked_between_max_rel_error"]) > deform_checker.BETWEEN_TOLERANCE, out
    assert float(f["max_rel_error"]) <= deform_checker.TOLERANCE, out      # integer frames still exact


def test_spinning_bone_exact_between_frames(empty_scene, capsys, bakes):
    """Constant-speed rotation: slerp of the baked locals is exact between frames, no sub-frame
    sample is needed."""
    arm, _ob = _spin_rig()
    assert bakes.bake_reasons(arm)
    rc, out, f = _run(capsys)
    assert rc == 0, out
    assert float(f["baked_between_max_rel_error"]) <= deform_checker.BETWEEN_TOLERANCE, out
    b = bakes.cache.lookup(arm.name, "SpinAction")[0]
    assert b.added == 0 and b.between_error <= 1e-4, (b.added, b.between_error)


def test_matrix_lerp_fails(empty_scene, capsys, bakes, monkeypatch):
    """Negative control: interpolating the baked matrices element-wise shrinks the turning arm."""
    from stylized_renderer.engine.blender.bake import tables as bake_tables

    def lerp_at(self, i, a, rows=None):
        m = self.all_frames()
        return m[i] if a <= 0.0 else m[i] * (1.0 - a) + m[i + 1] * a

    _spin_rig()
    monkeypatch.setattr(bake_tables.MatrixTable, "at", lerp_at)
    rc, out, f = _run(capsys)
    assert rc == 1, out
    assert float(f["baked_between_max_rel_error"]) > 5 * deform_checker.BETWEEN_TOLERANCE, out


def test_sample_is_exact_at_the_samples_and_slerps_between(empty_scene, bakes):
    """BakedPose.sample(t): at a baked sample the bone matrices are Blender's (float32 storage);
    half-way between two samples of the spinning bone the local keeps its length and angle."""
    from stylized_renderer.engine.blender import importer

    arm, _ob = _spin_rig()
    b = bakes.cache.ensure(arm, "SpinAction")
    asset = importer.import_scene(bpy.context.evaluated_depsgraph_get())
    _clip, bp = baked_clip(b, asset)
    spin = asset.node_index(arm.name, "spin")
    k = int(np.flatnonzero(bp.inner_nodes == spin)[0])
    fps = b.fps
    for f, _deg in ((3.0, 60.0), (3.5, 75.0), (7.25, 187.5)):
        m = bp.sample((f - b.frame_start) / fps).locals[k]
        sc = bpy.context.scene
        sc.frame_set(int(f), subframe=f - int(f))
        pbm = np.array(arm.evaluated_get(bpy.context.evaluated_depsgraph_get()).pose.bones["spin"].matrix_basis)
        rest = np.array(arm.data.bones["spin"].matrix_local)
        parent_rest = np.array(arm.data.bones["root"].matrix_local)
        want = np.linalg.inv(parent_rest) @ rest @ pbm
        np.testing.assert_allclose(m, want, atol=2e-6, err_msg=f"frame {f}")
        assert abs(np.linalg.norm(m[:3, 1]) - 1.0) < 1e-6


def _twist_rig(amp=0.9, step=3):
    """A deform bone along +Z (head and tail never move) rolling about its own axis, keyed every
    ``step`` frames between +-``amp`` radians (Bezier), a wide strip weighted to it; a Copy
    Location on another bone makes the rig baked."""
    arm = scenes.make_armature("TwistRig", [
        ("twist", None, (0, 0, 0), (0, 0, 2)),
        ("ctrl", None, (0, 2, 0), (0, 2, 0.5), False),
        ("follow", None, (0, 3, 0), (0, 3, 0.5), False),
    ])
    pb = arm.pose.bones
    c = pb["follow"].constraints.new("COPY_LOCATION")
    c.target, c.subtarget = arm, "ctrl"
    verts, quads, _uv = scenes.grid(5, 9, size=(1.6, 2.0), origin=(-0.8, 0.0, 0.0))
    ob = scenes.make_mesh("TwistStrip", verts, quads)
    scenes.skin_to(ob, arm, {"twist": (np.arange(len(verts)), np.ones(len(verts)))})
    pb["twist"].rotation_mode = "XYZ"
    for k, f in enumerate(range(1, 11, step)):
        pb["twist"].rotation_euler = (0.0, amp * (1.0 if k % 2 == 0 else -1.0), 0.0)
        pb["twist"].keyframe_insert("rotation_euler", frame=f)
    return fcurve_rigs.finish_clip(arm, "TwistAction", 1, 10), ob


def test_a_rolling_bone_is_measured_between_frames(empty_scene, capsys, bakes):
    """A bone turning about its own axis moves neither its head nor its tail, only the skin
    around it: the adaptive bake measures a point off each deform bone's axis too (its roll), adds
    the sub-frame samples the roll needs, and the preview is within 1e-3 between frames (with
    heads and tails only the bake saw no error and the strip erred 2.4e-2; 3.0e-4 now)."""
    arm, _ob = _twist_rig()
    rc, out, f = _run(capsys, "1-10")
    assert rc == 0, out
    assert "baked-between TwistStrip" in out, out
    assert float(f["baked_between_max_rel_error"]) <= deform_checker.BETWEEN_TOLERANCE, out
    b = bakes.cache.lookup(arm.name, "TwistAction")[0]
    assert b.added > 0 and b.between_error > 0.0, (b.frames, b.checked, b.between_error)


MALE = C.TESTDATA / "rigs" / "Quaternius_MaleCasual.blend"


@pytest.mark.skipif(not MALE.is_file(), reason="../shared/testdata/rigs is absent (only in the project workspace)")
def test_a_measured_interval_that_converges_slowly_is_measured_again(ext, capsys, monkeypatch):
    """Quaternius MaleCasual's Death (IK legs): half-way through frames 37-38 the cubic is off by
    3 times the bake's tolerance, and halving the interval shrinks that only 1.7 times (not the
    ~16 of smooth motion): the halves of an interval measured more than twice the tolerance off are
    measured too (CONVERGE 4), so the preview stays within 1e-3 at a quarter past every frame (with
    CONVERGE 8 they were assumed fine: 1.3e-3 at 37.25)."""
    bpy.ops.wm.open_mainfile(filepath=str(MALE))
    for act in [a for a in bpy.data.actions if a.name != "Man_Death"]:
        bpy.data.actions.remove(act)
    monkeypatch.setattr(deform_checker, "BETWEEN_FRAMES", 60)
    monkeypatch.setattr(deform_checker, "BETWEEN_SUBFRAMES", (0.25, 0.75))
    rc, out, f = C.run_deform_check(capsys, mode="player", player_step=25)
    assert int(f["clips_checked"]) == 1 and int(f["baked"]) == 1, out
    assert float(f["baked_between_max_rel_error"]) <= deform_checker.BETWEEN_TOLERANCE, out
    assert rc == 0, out


def test_playing_makes_each_intervals_polynomial_once(empty_scene, bakes, monkeypatch):
    """The player's frame is one gather and a polynomial: a short bake's intervals are made once
    (the first frame played) and kept, so a second loop through every interval builds nothing
    (no rotation logarithm, ``bake_interp._logs``) and plays the same poses."""
    from stylized_renderer.engine.blender import importer
    from stylized_renderer.engine.blender.bake import interp as bake_interp

    arm, _ob = _spin_rig()
    b = bakes.cache.ensure(arm, "SpinAction")
    asset = importer.import_scene(bpy.context.evaluated_depsgraph_get())
    _clip, bp = baked_clip(b, asset)
    times = (b.frames[:-1] + 0.37 * np.diff(b.frames) - b.frame_start) / b.fps
    assert times.size >= 10
    first = [bp.sample(t).locals.copy() for t in times]
    calls = []
    real = bake_interp._logs
    monkeypatch.setattr(bake_interp, "_logs", lambda *a: calls.append(1) or real(*a))
    again = [bp.sample(t + 1e-9).locals for t in times]     # (not the last sample reused)
    assert not calls, f"{len(calls)} intervals rebuilt while looping over {times.size}"
    for x, y in zip(first, again):
        np.testing.assert_allclose(x, y, atol=1e-5)


@pytest.fixture(scope="module")
def rigify_250(tmp_path_factory, rigify_generated):
    """The Rigify character of tools/rigify_rig.py with its keys spread over 250 frames."""
    C.rigify_character(rigify_generated, frames=(1, 84, 167, 250))
    path = tmp_path_factory.mktemp("rigify250") / "rigify250.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


def test_rigify_250_frame_bake_is_compact(rigify_250, ext, bakes):
    """A 250-frame Rigify bake (706 bones, 52 weighted B-Bones) holds under 20 MB (float32
    translation / rotation / stretch, matrices that never change once; 120 MB as (F,B,4,4)
    float64 pose, locals and root-relative copies before), and the session's BakedPose shares
    the bake's tables instead of copying them."""
    from stylized_renderer.engine.blender import importer

    bpy.ops.wm.open_mainfile(filepath=str(rigify_250))
    rig = bpy.data.objects["rig"]
    b = bakes.cache.ensure(rig, rig.animation_data.action.name)
    assert b.frame_count - b.added == 250
    assert b.nbytes < 20 * 2**20, b.nbytes / 2**20
    _clip, bp = baked_clip(b, importer.import_scene(bpy.context.evaluated_depsgraph_get()))
    assert bp.table is b.locals and bp.bbone_table is b.bbone_table
    # played through every interval, the polynomials it keeps stay bounded (tables.COEF_BYTES)
    for t in (b.frames[:-1] + 0.5 * np.diff(b.frames) - b.frame_start) / b.fps:
        bp.sample(float(t))
    assert b.nbytes < 20 * 2**20, b.nbytes / 2**20
    line = bakes.describe(bakes.cache, rig.name, rig.animation_data.action.name)[1]
    assert "largest error between samples" in line and "MB" in line, line


def _stepped_rig():
    """The IK + Copy Rotation + driver rig with every key CONSTANT: the controls jump at frames 4,
    7 and 10 and hold in between, so the deform bones (baked: constraints) do too."""
    from stylized_renderer.engine.blender.importer import actions as _actions

    arm, ob, act = rigify_rig.build_constraint_rig()
    for fc in _actions.slot_fcurves(act, getattr(arm.animation_data, "action_slot", None)):
        for kp in fc.keyframe_points:
            kp.interpolation = "CONSTANT"
    bpy.context.scene.frame_set(1)
    return arm, ob, act


def test_stepped_keys_switch_where_blender_switches(empty_scene, capsys, bakes, monkeypatch):
    """A constraint-driven clip whose source keys are CONSTANT: the baked pose holds until the
    next key and switches exactly there, as Blender's does.  check_deform compares at 0.99 and
    0.999 past the frames before the steps (3, 6, 9: 1/100 and 1/1000 of a frame before the
    switch) as well as at its usual fractions, all within 1e-3."""
    arm, _ob, act = _stepped_rig()
    monkeypatch.setattr(deform_checker, "BETWEEN_SUBFRAMES", (0.25, 0.5, 0.75, 0.99, 0.999))
    rc, out, f = _run(capsys, "1-10")
    assert rc == 0, out
    assert "baked-between CBody" in out, out
    assert float(f["baked_between_max_rel_error"]) <= deform_checker.BETWEEN_TOLERANCE, out
    b = bakes.cache.lookup(arm.name, act.name)[0]
    assert b.between_error <= deform_checker.BETWEEN_TOLERANCE, b.between_error
    # the steps checked: the frames compared lie just before a switch
    from stylized_renderer.engine.blender.bake import interp as bake_interp

    assert (b.locals.modes == bake_interp.HOLD).any(), b.locals.modes


def test_stepped_keys_lerped_at_the_step_fail(empty_scene, capsys, bakes, monkeypatch):
    """Negative control: the same clip with no interval held (a step lerped over the last sub-frame
    interval the adaptive bake reaches: the discontinuity near, not at, Blender's) fails just
    before the switch."""
    from stylized_renderer.engine.blender.bake import interp as bake_interp

    _stepped_rig()
    monkeypatch.setattr(deform_checker, "BETWEEN_SUBFRAMES", (0.25, 0.5, 0.75, 0.99, 0.999))
    monkeypatch.setattr(bake_interp, "HOLD", bake_interp.LINEAR)
    rc, out, f = _run(capsys, "1-10")
    assert rc == 1, out
    assert float(f["baked_between_max_rel_error"]) > deform_checker.BETWEEN_TOLERANCE, out
