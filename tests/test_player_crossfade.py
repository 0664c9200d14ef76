"""Clip crossfade and root motion "In place" in the preview player (engine/core/animation/player.py,
engine/features/preview/control.py commands, the Animation panel's Fade and In Place)."""
from __future__ import annotations

import bpy
import numpy as np
import pytest

from stylized_renderer.engine.core.animation import AnimationPlayer, ScenePose, slerp
from stylized_renderer.engine.features.preview import control as preview
from stylized_renderer.engine.features.preview.state import DEFAULT_FADE, apply_commands
from support import rigs as R
from support.crossfade_clips import ZA, clip_a, clip_b, morph_weights, sample_alone, start_fade, trs


def same_rotation(q1, q2, tol=1e-9):
    return abs(abs(float(np.dot(q1, q2))) - 1.0) < tol


def test_pose_at_half_the_fade_is_the_blend_of_both_clips():
    scene, pose, p, a, b = start_fade(fade=0.5, t_switch=0.4)
    assert p.update(0.25, scene, pose)                # half the fade: A at 0.65 s, B at 0.25 s
    assert p.fade_weights == pytest.approx((0.5, 0.5)) and sum(p.fade_weights) == 1.0
    pa, wa = sample_alone(scene, a, 0.65)
    pb, wb = sample_alone(scene, b, 0.25)
    for node in (1, 2):
        ta, qa, sa = trs(pa, node)
        tb, qb, sb = trs(pb, node)
        t, q, s = trs(pose, node)
        assert np.allclose(t, 0.5 * ta + 0.5 * tb), node
        assert np.allclose(s, 0.5 * sa + 0.5 * sb), node
        assert same_rotation(q, slerp(qa[None], qb[None], np.array([0.5]))[0]), node
    # node 2 is not animated by B: blended towards its bind scale
    assert np.allclose(trs(pose, 2)[2], 0.5 * trs(pa, 2)[2] + 0.5 * np.ones(3))
    # morph channels blend the same way (a key one clip does not drive counts as 0 there)
    w = morph_weights(p)
    assert w[(3, "Smile")] == pytest.approx(0.5 * wa[(3, "Smile")])
    assert w[(3, "Blink")] == pytest.approx(0.5 * wb[(3, "Blink")])
    # the world matrices follow the blended locals
    w1 = pose.world_matrix(1)
    assert w1 is not None and np.allclose(w1[:3, 3], trs(pose, 1)[0])


def test_fade_weights_sum_to_one_and_the_fade_settles_on_the_new_clip():
    scene, pose, p, a, b = start_fade(fade=0.3, t_switch=0.2)
    alphas = []
    for _ in range(12):
        assert p.update(1.0 / 30.0, scene, pose)
        w_out, w_in = p.fade_weights
        assert w_out + w_in == pytest.approx(1.0) and 0.0 <= w_in <= 1.0
        alphas.append(w_in)
        if not p.is_fading:
            break
    assert alphas == sorted(alphas) and alphas[-1] == 1.0 and not p.is_fading
    assert len(alphas) == 9           # 0.3 s at 30 fps (the ninth step reaches 1)
    pb, wb = sample_alone(scene, b, p.current_time)
    for node in (1, 2):
        assert np.allclose(trs(pose, node)[0], trs(pb, node)[0]) and np.allclose(trs(pose, node)[2], trs(pb, node)[2])
        assert same_rotation(trs(pose, node)[1], trs(pb, node)[1])
    assert morph_weights(p) == {(3, "Blink"): pytest.approx(wb[(3, "Blink")]), (3, "Smile"): 0.0}


def test_fade_starts_from_the_current_pose_and_uses_the_shortest_path():
    scene, pose, p, a, b = start_fade(fade=0.5, t_switch=0.4)
    before = {n: trs(pose, n) for n in (1, 2)}
    assert p.update(0.0, scene, pose)                 # the switch frame: alpha 0 = the pose before
    for n in (1, 2):
        assert np.allclose(trs(pose, n)[0], before[n][0]) and same_rotation(trs(pose, n)[1], before[n][1])
    # shortest path: a target stored with the opposite sign is the same rotation
    q = R.quat_axis_angle(ZA, 0.3)
    got = slerp(q[None], -R.quat_axis_angle(ZA, 0.5)[None], np.array([0.5]))[0]
    assert same_rotation(got, R.quat_axis_angle(ZA, 0.4))


def test_an_interrupted_fade_continues_from_the_blended_pose():
    scene, pose, p, a, b = start_fade(fade=0.5, t_switch=0.4)
    p.update(0.2, scene, pose)
    mid = {n: trs(pose, n) for n in (1, 2)}
    mid_w = dict(morph_weights(p))
    c = R.clip([R.vec_channel(1, [0.0], [[0, 0, 5]])], 1.0, name="C")
    p.set_clip(c)
    assert p.is_fading and p.update(0.0, scene, pose)
    for n in (1, 2):                                   # no pop
        assert np.allclose(trs(pose, n)[0], mid[n][0]) and same_rotation(trs(pose, n)[1], mid[n][1])
        assert np.allclose(trs(pose, n)[2], mid[n][2])
    assert morph_weights(p) == pytest.approx(mid_w)
    p.update(0.5, scene, pose)
    assert not p.is_fading and np.allclose(trs(pose, 1)[0], (0, 0, 5))


def test_no_fade_when_paused_or_zero():
    scene = R.skinned_arm_scene()
    pose = ScenePose()
    pose.initialize(scene)
    p = AnimationPlayer()
    p.set_clip(clip_a())
    p.play()
    p.update(0.4, scene, pose)
    p.set_clip(clip_b())                             # fade 0 (the player's default): at once
    assert not p.is_fading
    assert p.set_crossfade(0.5) and not p.set_crossfade(-1.0) and not p.set_crossfade(float("nan"))
    p.pause()
    p.set_clip(clip_a())                             # paused: at once
    assert not p.is_fading


# ------------------------------------------------------------------------------------------------
# root motion
# ------------------------------------------------------------------------------------------------

def walk_scene(pre=None):
    """Armature (node 0) -> root bone 1 (rest ``pre``) -> bone 2; a walk clip on bone 1."""
    nodes = [R.node("Arm"),
             R.node("Arm/Root", parent=0, kind=R.NODE_BONE, obj="Arm", bone="Root", pre=pre),
             R.node("Arm/Leg", parent=1, kind=R.NODE_BONE, obj="Arm", bone="Leg", pre=R.translation(0, 1, 0))]
    return R.SceneAsset(nodes, [])


def test_root_motion_off_equals_the_clip_and_in_place_keeps_the_height():
    scene = walk_scene()
    walk = R.clip([R.vec_channel(1, [0.0, 1.0, 2.0], [[0.5, 0, 1], [1.5, 2, 1.2], [2.5, 4, 1]]),
                   R.vec_channel(2, [0.0, 2.0], [[0, 0, 0], [0, 0, 1]])], 2.0)
    pose = ScenePose()
    pose.initialize(scene)
    p = AnimationPlayer()
    assert not p.in_place                            # off by default
    p.set_clip(walk)
    p.play()
    p.update(1.0, scene, pose)
    ref, _ = sample_alone(scene, walk, 1.0)
    assert np.allclose(pose.local_matrices, ref.local_matrices)     # off: exactly the clip
    p.set_in_place(True)
    p.update(0.0, scene, pose)                       # toggling resamples once
    assert np.allclose(trs(pose, 1)[0], (0.5, 0.0, 1.2))            # x/y at the start, z keyed
    assert np.allclose(trs(pose, 2)[0], trs(ref, 2)[0])             # only the root is held
    p.update(0.5, scene, pose)
    assert np.allclose(trs(pose, 1)[0], (0.5, 0.0, 1.1))


def test_in_place_measures_horizontal_travel_in_the_parent_space():
    """A bone whose rest is turned 90 deg about X (Blender bones point along their Y): its local Y
    is the armature's Z (height, kept), its local Z the armature's -Y (travel, removed)."""
    rot = np.eye(4)
    rot[:3, :3] = [[1, 0, 0], [0, 0, -1], [0, 1, 0]]
    scene = walk_scene(pre=rot)
    walk = R.clip([R.vec_channel(1, [0.0, 1.0], [[0, 0, 0], [1, 0.3, 2]])], 1.0)
    pose = ScenePose()
    pose.initialize(scene)
    p = AnimationPlayer()
    p.set_in_place(True)
    p.set_clip(walk)
    p.seek(1.0)
    p.update(0.0, scene, pose)
    w1 = pose.world_matrix(1)
    assert w1 is not None
    world = w1[:3, 3]
    assert np.allclose(world, (0.0, 0.0, 0.3))       # no horizontal travel, the height is kept


# ------------------------------------------------------------------------------------------------
# the preview: commands, uploads, the panel
# ------------------------------------------------------------------------------------------------

@pytest.fixture
def rig_runtime(ext):
    from stylized_renderer.engine.core.runtime.backend import CpuBackend
    from stylized_renderer.engine.core.world.scene_runtime import SceneRuntime

    preview.clear_states()
    scene = R.skinned_arm_scene(morph=True)
    rt = SceneRuntime(scene, CpuBackend())
    assert rt.initialize(), rt.last_error
    clips = {"A": clip_a(), "B": clip_b()}
    st = preview.PreviewState(armature="Arm")
    yield st, rt, clips
    preview.clear_states()


def drain(st, rt, clips, n=1, dt=1.0 / 30.0):
    uploads = []
    for _ in range(n):
        apply_commands(st, rt, clips, dt)
        uploads.append(st.last_palette_uploads)
    return uploads


def test_a_paused_settled_fade_uploads_nothing(rig_runtime):
    st, rt, clips = rig_runtime
    st.push("fade", 0.2)
    st.push("clip", "A")
    st.push("play")
    assert all(u > 0 for u in drain(st, rt, clips, 3))
    st.push("clip", "B")
    drain(st, rt, clips, 2)
    assert st.fading and rt.player.is_fading
    st.push("pause")                                 # paused mid-fade: frozen, nothing uploaded
    assert drain(st, rt, clips, 4) == [0, 0, 0, 0]
    assert rt.player.is_fading
    st.push("play")
    drain(st, rt, clips, 6)
    assert not st.fading
    st.push("pause")
    samples = rt.player.sample_count
    assert drain(st, rt, clips, 4) == [0, 0, 0, 0]   # settled and paused: no upload at all
    assert rt.player.sample_count == samples and rt.stats.morph_uploads == 0


def test_fade_and_in_place_commands_and_properties(rig_runtime):
    st, rt, clips = rig_runtime
    st.push("fade", 0.75)
    st.push("in_place", True)
    drain(st, rt, clips)
    assert rt.player.crossfade == 0.75 and rt.player.in_place
    st.push("fade", -2.0)
    drain(st, rt, clips)
    assert "crossfade" in st.last_error and rt.player.crossfade == 0.75
    from stylized_renderer.engine.features.preview import properties as preview_props

    rna = preview_props.StylizedPreviewProps.bl_rna
    for name in ("fade", "in_place"):
        assert rna.properties[name].description
    assert rna.properties["fade"].hard_min == 0.0


def test_animation_panel_shows_fade_and_in_place(empty_scene):
    from stylized_renderer.panels import preview_panel
    from support.panels import Ctx, draw_panel
    from tools import scenes

    preview.clear_states()
    try:
        arm, body, hat, ring = scenes.build_character(empty_scene)
        lay = draw_panel(preview_panel.STYLIZED_PT_viewport_animation, Ctx(empty_scene, body))
        assert {p[1] for p in lay.props()} >= {"clip", "fade", "in_place"}
        st = preview.get_state(empty_scene)
        assert ("fade", DEFAULT_FADE) in st.commands and ("in_place", False) in st.commands
        with bpy.context.temp_override(active_object=arm, object=arm):
            empty_scene.stylized_preview.fade = 0.5
            empty_scene.stylized_preview.in_place = True
            assert empty_scene.stylized_preview.fade == 0.5 and empty_scene.stylized_preview.in_place
        assert ("fade", 0.5) in st.commands and ("in_place", True) in st.commands
    finally:
        preview.clear_states()
