"""Spring bones in the preview (engine/features/springs/driver.py via SceneRuntime.update): a generated VRM
avatar with a head-shake clip, played through the real path (Scene property -> PreviewState ->
session.update_frame), WITHOUT the VRM Add-on: the hair swings relative to the head; with
Animate Spring Bones off it stays rigid; a seek resets the simulation."""
from __future__ import annotations

import bpy
import numpy as np
import pytest

from stylized_renderer.engine.features.preview import control as preview
from support import springs_builder as B
from support.preview_sessions import clocked_session
from support.vrm_addon import ADDON_DIR, disable_vrm_addon


@pytest.fixture
def view(monkeypatch, ext, bakes):
    yield from clocked_session(monkeypatch, strict=False)


def _avatar_file(tmp_path):
    from tools import check_springs

    bpy.ops.wm.read_factory_settings(use_empty=True)
    assert check_springs.enable_addon(ADDON_DIR)
    arm = B.build_avatar()
    B.add_shake_action(arm)
    path = tmp_path / "springs_preview.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    disable_vrm_addon()
    bpy.ops.wm.open_mainfile(filepath=str(path))
    return bpy.data.objects["Avatar"]


def _tip_in_head(rt, asset, chain=1):
    idx = {n.name: i for i, n in enumerate(asset.nodes)}
    head = rt.pose.world_matrix(idx["Avatar/head"])
    tip = rt.pose.world_matrix(idx[f"Avatar/hair{chain}_8"])
    return (np.linalg.inv(head) @ tip)[:3, 3]


def _sim(view, rt):
    """The preview's spring simulation of ``rt`` (the session's SpringsDriver keeps it)."""
    return view.session.springs.of(rt)


def _play(view, arm, frames):
    scene = bpy.context.scene
    st = preview.get_state(scene, arm)
    st.active = True
    rt = view.update(st)
    st.push("play")
    rt = view.update(st, 0.0)
    path = [_tip_in_head(rt, view.session.scene_asset)]
    for _ in range(frames):
        rt = view.update(st, 1.0 / 24.0)
        path.append(_tip_in_head(rt, view.session.scene_asset))
    return st, rt, np.array(path)


def test_preview_swings_the_hair_and_the_toggle_stops_it(vrm_addon, view, tmp_path):
    arm = _avatar_file(tmp_path)
    st, rt, path = _play(view, arm, 24)
    assert _sim(view, rt) is not None and _sim(view, rt).joint_count == 6 * 9 + 8 * 5
    assert _sim(view, rt).steps_total == 60                      # 24 frames at 24 fps: 1 s of 60 Hz steps
    swing = np.linalg.norm(path - path[0], axis=1).max()
    assert swing > 0.05, swing                               # the tip moves relative to the head

    st.push("pause")
    view.update(st, 0.0)
    st.push("seek", 0.0)                                     # a seek resets the simulation: rest again
    rt = view.update(st, 0.0)
    assert np.allclose(_tip_in_head(rt, view.session.scene_asset), path[0], atol=1e-6)

    arm.stylized_spring_bones = False
    st.push("stop")
    view.update(st, 0.0)
    st2, rt2, path2 = _play(view, arm, 24)
    assert not _sim(view, rt2).rig.chain_count
    assert np.linalg.norm(path2 - path2[0], axis=1).max() < 1e-6   # rigid: only the clip moves it


def test_panels_show_the_toggle_and_the_joints_simulated(vrm_addon, view, tmp_path):
    from stylized_renderer.panels import preview_panel
    from stylized_renderer.panels import viewport_panels as vp
    from support.panels import Ctx, draw_panel

    arm = _avatar_file(tmp_path)
    _play(view, arm, 3)
    scene = bpy.context.scene
    lay = draw_panel(preview_panel.STYLIZED_PT_viewport_animation, Ctx(scene, arm))
    assert "stylized_spring_bones" in [p[1] for p in lay.props()]
    assert bpy.types.Object.bl_rna.properties["stylized_spring_bones"].description
    lay = draw_panel(vp.STYLIZED_PT_viewport_stats, Ctx(scene, arm))
    assert any(lbl.startswith("Spring bones: 94 joints | ") for lbl in lay.labels()), lay.labels()


def test_scene_preview_swings_the_hair_at_the_shown_frame(vrm_addon, view, tmp_path):
    """Animation > Scene (engine/features/preview/scene.py) plays the avatar's action; the springs follow the
    preview's frame (pre-roll from the start frame at 60 Hz), not the timeline's."""
    arm = _avatar_file(tmp_path)
    scene = bpy.context.scene
    scene.render.fps = 24
    scene.frame_set(1)
    assert bpy.ops.stylized.preview_scene(action="PLAY") == {"FINISHED"}
    st = preview.get_state(scene)
    rt = view.update(st, 0.0)
    asset = view.session.scene_asset
    path = [_tip_in_head(rt, asset)]
    for _ in range(12):
        rt = view.update(st, 1.0 / 24.0)
        path.append(_tip_in_head(rt, asset))
    assert st.scene_mode and st.scene_frame == pytest.approx(13.0) and scene.frame_current == 1
    assert _sim(view, rt).timeline.steps == 30                  # (13 - 1) / 24 s at 60 Hz
    assert np.linalg.norm(np.array(path) - path[0], axis=1).max() > 0.05
    assert arm.stylized_spring_bones


def test_an_armature_scaled_to_zero_still_plays_its_springs(vrm_addon, view, tmp_path):
    """Scaling the avatar's armature object to 0 (hiding it) must not stop the preview: the
    springs' world inverse of a singular armature matrix does not raise (finite.affine_inv)."""
    arm = _avatar_file(tmp_path)
    arm.scale = (0.0, 0.0, 0.0)
    st = preview.get_state(bpy.context.scene, arm)
    st.active = True
    view.update(st)
    st.push("play")
    rt = view.update(st, 0.0)
    for _ in range(6):
        rt = view.update(st, 1.0 / 24.0)
    assert st.last_error is None and rt.last_error is None, (st.last_error, rt.last_error)
    assert _sim(view, rt) is not None and _sim(view, rt).steps_total == 15     # 6 frames at 24 fps


def test_a_frame_reads_no_spring_setup_after_the_build(vrm_addon, view, tmp_path, monkeypatch):
    """Per frame the springs read only the toggles of the armatures found at build: no scan of the
    scene's objects for spring data (reader.has_springs) while playing; a toggle change still shows."""
    from stylized_renderer.engine.features.springs import reader

    arm = _avatar_file(tmp_path)
    st, rt, _ = _play(view, arm, 2)
    calls = []
    real = reader.has_springs
    monkeypatch.setattr(reader, "has_springs", lambda o: calls.append(o.name) or real(o))
    for _ in range(5):
        rt = view.update(st, 1.0 / 24.0)
    assert calls == [] and _sim(view, rt).rig.chain_count
    arm.stylized_spring_bones = False
    rt = view.update(st, 1.0 / 24.0)
    assert not _sim(view, rt).rig.chain_count and calls        # rebuilt once, reading the setup again


def test_a_frames_steps_share_its_world_terms(vrm_addon, view, tmp_path, monkeypatch):
    """At 24 fps a preview frame runs 2-3 steps on one evaluation: the world-only terms (first
    'before' matrices, colliders) are computed once per frame, not per step; the armature's
    inverse only when its world matrix changes."""
    from stylized_renderer.engine.core.animation import spring_solver as solver

    arm = _avatar_file(tmp_path)
    st, rt, _ = _play(view, arm, 1)
    inverses, prepared = [], []
    real_inv, real_prepare = solver.affine_inv, solver.prepare
    monkeypatch.setattr(solver, "affine_inv", lambda m: inverses.append(1) or real_inv(m))
    monkeypatch.setattr(solver, "prepare", lambda *a: prepared.append(1) or real_prepare(*a))
    before = _sim(view, rt).steps_total
    for _ in range(4):
        rt = view.update(st, 1.0 / 24.0)
    assert _sim(view, rt).steps_total - before == 10 and len(prepared) == 4 and not inverses
    rig, world = _sim(view, rt).rig, rt.pose.world_matrices.copy()
    f0 = real_prepare(rig, world, 1.0 / 60.0)
    arm_node = int(rig.arm_unique[0])
    moved = world.copy()
    moved[:, 0, 3] += 0.5                   # the whole avatar, armature included, moved: its terms follow
    f1 = real_prepare(rig, moved, 1.0 / 60.0)
    assert len(inverses) == 1 and arm_node >= 0
    assert np.allclose(f1.head0 - f0.head0, [0.5, 0.0, 0.0], atol=1e-12)
    assert np.allclose(f1.F0, f0.F0, atol=1e-12) and np.allclose(f1.E0, f0.E0, atol=1e-12)
