"""AnimationPlayer rules (seed: AnimationPlayer, track sampling)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from stylized_renderer.engine.blender.importer.rotation import quat_mul
from stylized_renderer.engine.core.animation import AnimationPlayer, LocalTransform, ScenePose, TrackSet, slerp
from stylized_renderer.engine.core.assets import AnimationClipAsset, MorphWeightChannelAsset, NodeAnimationChannelAsset
from stylized_renderer.engine.core.assets.types import compose_trs
from support import rigs as R


def setup(channels, duration=2.0, morph_channels=()):
    scene = R.skinned_arm_scene()
    pose = ScenePose()
    assert pose.initialize(scene)
    player = AnimationPlayer()
    player.set_clip(R.clip(channels, duration, morph_channels))
    return scene, pose, player


def local(pose: ScenePose, node: int) -> LocalTransform:
    """The node's local transform, which the test expects (the node exists)."""
    lt = pose.local_transform(node)
    assert lt is not None, node
    return lt


def tx(pose, node=1):
    return pose.local_transform(node).translation[0]


def ramp():
    # node 1 translation x goes 0 -> 2 over 2 s
    return [R.vec_channel(1, [0.0, 2.0], [[0, 0, 0], [2, 0, 0]])]


# ------------------------------------------------------------------------- clock
def test_play_advances_time_by_dt_times_speed():
    scene, pose, p = setup(ramp())
    p.set_playback_speed(2.0)
    p.play()
    assert p.update(0.25, scene, pose)
    assert math.isclose(p.current_time, 0.5)
    assert math.isclose(tx(pose), 0.5)
    assert not pose.is_dirty


def test_loop_wraps_by_fmod():
    scene, pose, p = setup(ramp(), duration=2.0)
    p.set_looping(True)
    p.play()
    p.update(1.5, scene, pose)
    p.update(1.0, scene, pose)
    assert math.isclose(p.current_time, 0.5)
    p.update(4.25, scene, pose)          # more than a whole period
    assert math.isclose(p.current_time, math.fmod(4.75, 2.0))
    assert p.is_playing


def test_non_loop_clamps_to_duration_and_pauses():
    scene, pose, p = setup(ramp(), duration=2.0)
    p.set_looping(False)
    p.play()
    assert p.update(3.0, scene, pose)
    assert p.current_time == 2.0
    assert not p.is_playing
    assert math.isclose(tx(pose), 2.0)   # the last frame was sampled


def test_speed_rejects_non_finite_and_negative():
    p = AnimationPlayer()
    assert p.set_playback_speed(0.5)
    for bad in (-1.0, float("nan"), float("inf"), -float("inf")):
        assert not p.set_playback_speed(bad)
        assert p.playback_speed == 0.5
    assert p.set_playback_speed(0.0)


def test_seek_clamps_and_resamples_while_paused():
    scene, pose, p = setup(ramp(), duration=2.0)
    assert p.update(0.0, scene, pose)            # initial sample (clip set)
    assert not p.sample_pending
    assert p.seek(5.0) and p.current_time == 2.0
    assert p.seek(-1.0) and p.current_time == 0.0
    assert p.seek(1.0)
    assert p.sample_pending and not p.is_playing
    v = pose.version
    assert p.update(0.0, scene, pose)
    assert math.isclose(tx(pose), 1.0)
    assert pose.version == v + 1
    assert not p.seek(float("nan"))


def test_paused_update_without_pending_sample_changes_nothing():
    scene, pose, p = setup(ramp())
    p.update(0.0, scene, pose)
    v = pose.version
    pose_locals = np.array(pose.local_matrices)
    assert p.update(0.5, scene, pose)
    assert pose.version == v
    assert np.array_equal(pose.local_matrices, pose_locals)
    # a local write by someone else is not overwritten by a paused player
    pose.set_local_transform(1, (7, 0, 0), R.QI, (1, 1, 1))
    assert p.update(0.5, scene, pose)
    assert tx(pose) == 7.0


def test_stop_resets_time_and_restores_bind_pose_before_sampling():
    # clip animates node 1 only; node 2 was moved by someone else -> back to bind after stop
    scene, pose, p = setup(ramp())
    p.play()
    p.update(1.0, scene, pose)
    pose.set_local_transform(2, (0, 5, 0), R.QI, (1, 1, 1))
    p.stop()
    assert p.current_time == 0.0 and not p.is_playing and p.sample_pending
    assert p.update(0.3, scene, pose)
    assert p.current_time == 0.0
    assert np.allclose(local(pose, 2).translation, 0.0)
    assert math.isclose(tx(pose), 0.0)


def test_seek_does_not_reset_the_pose():
    scene, pose, p = setup(ramp())
    p.update(0.0, scene, pose)
    pose.set_local_transform(2, (0, 5, 0), R.QI, (1, 1, 1))
    p.seek(1.0)
    p.update(0.0, scene, pose)
    assert np.allclose(local(pose, 2).translation, (0, 5, 0))


def test_set_clip_resets_bind_pose_time_and_validation():
    scene, pose, p = setup(ramp())
    p.play()
    p.update(1.0, scene, pose)
    assert p.validated_scene is scene
    other = R.clip([R.vec_channel(2, [0.0], [[0, 0, 4]])], 1.0)
    p.set_clip(other)
    assert p.current_time == 0.0 and p.validated_scene is None
    assert p.update(0.0, scene, pose)
    assert math.isclose(tx(pose, 1), 0.0)           # left over from the old clip -> bind
    assert np.allclose(local(pose, 2).translation, (0, 0, 4))


def test_clip_validation_is_lazy_and_cached_per_scene():
    scene, pose, _ = setup(ramp())
    calls = []

    class CountingClip:
        def __init__(self, c):
            self._c = c
            self.name = c.name
            self.duration_seconds = c.duration_seconds
            self.channels = c.channels
            self.morph_channels = c.morph_channels

        def is_valid(self, n):
            calls.append(n)
            return self._c.is_valid(n)

    p = AnimationPlayer()
    p.set_clip(CountingClip(R.clip(ramp(), 2.0)))
    assert calls == []                   # not validated at set_clip
    p.play()
    for _ in range(3):
        assert p.update(0.1, scene, pose)
    assert calls == [scene.node_count]   # validated once for this scene
    scene2 = R.skinned_arm_scene()
    pose2 = ScenePose()
    pose2.initialize(scene2)
    assert p.update(0.1, scene2, pose2)
    assert len(calls) == 2 and p.validated_scene is scene2


def test_invalid_clip_for_scene_fails_and_leaves_pose():
    scene, pose, p = setup([R.vec_channel(40, [0.0], [[1, 0, 0]])])
    pose.update_world_matrices()
    v = pose.version
    assert not p.update(0.0, scene, pose)
    assert p.validated_scene is None and pose.version == v


def test_pose_of_another_scene_is_rejected():
    scene, pose, p = setup(ramp())
    assert not p.update(0.0, R.skinned_arm_scene(), pose)


# ------------------------------------------------------------------------- sampling
def test_linear_interpolation_endpoints_and_single_key():
    chans = [NodeAnimationChannelAsset(1, translation_times=np.array([1.0, 2.0]),
                                       translation_values=np.array([[0, 0, 0], [4, 0, 0]]),
                                       scale_times=np.array([0.5]), scale_values=np.array([[3, 3, 3]]))]
    scene, pose, p = setup(chans, duration=3.0)
    for t, x in ((0.0, 0.0), (1.0, 0.0), (1.25, 1.0), (2.0, 4.0), (3.0, 4.0)):
        p.seek(t)
        p.update(0.0, scene, pose)
        assert math.isclose(tx(pose), x, abs_tol=1e-12), (t, tx(pose))
        assert np.allclose(local(pose, 1).scale, 3.0)   # single key holds


def test_missing_tracks_keep_current_pose_values():
    chans = [NodeAnimationChannelAsset(1, rotation_times=np.array([0.0]),
                                       rotation_values=np.array([R.quat_axis_angle([0, 0, 1], 0.5)]))]
    scene, pose, p = setup(chans)
    pose.set_local_transform(1, (1, 2, 3), R.QI, (2, 2, 2))
    p._reset_pose_on_next_sample = False      # keep our manual TRS for this check
    p.update(0.0, scene, pose)
    lt = local(pose, 1)
    assert np.allclose(lt.translation, (1, 2, 3)) and np.allclose(lt.scale, 2.0)
    assert np.allclose(np.abs(lt.rotation @ R.quat_axis_angle([0, 0, 1], 0.5)), 1.0)


def test_tiny_interval_uses_right_key():
    chans = [R.vec_channel(1, [0.0, 1.0, 1.0 + 1e-9, 2.0], [[0, 0, 0], [1, 0, 0], [5, 0, 0], [5, 0, 0]])]
    scene, pose, p = setup(chans)
    p.seek(1.0 + 5e-10)
    p.update(0.0, scene, pose)
    assert math.isclose(tx(pose), 5.0)


def test_slerp_takes_the_shortest_path_and_normalises():
    qa = R.quat_axis_angle([0, 0, 1], 0.0)
    qb = -R.quat_axis_angle([0, 0, 1], np.pi / 2)   # same rotation as +q, opposite hemisphere
    chans = [NodeAnimationChannelAsset(1, rotation_times=np.array([0.0, 1.0]), rotation_values=np.array([qa, qb]))]
    scene, pose, p = setup(chans, duration=1.0)
    p.seek(0.5)
    p.update(0.0, scene, pose)
    q = local(pose, 1).rotation
    expected = R.quat_axis_angle([0, 0, 1], np.pi / 4)
    assert math.isclose(abs(np.dot(q, expected)), 1.0, abs_tol=1e-12)
    assert math.isclose(np.linalg.norm(q), 1.0)
    # true slerp (constant angular velocity), not nlerp: a quarter of a 160 degree turn is 40 degrees
    a = np.deg2rad(160)
    out = slerp(np.array([qa]), np.array([R.quat_axis_angle([0, 0, 1], a)]), np.array([0.25]))[0]
    assert math.isclose(2 * math.acos(min(1.0, abs(out[0]))), a / 4, abs_tol=1e-9)


def test_trackset_searches_all_tracks_at_once_and_matches_a_reference():
    rng = np.random.default_rng(3)
    times_list, values_list = [], []
    for _ in range(40):
        k = int(rng.integers(1, 7))
        t = np.sort(rng.uniform(-1.0, 3.0, k))
        times_list.append(t)
        values_list.append(rng.normal(size=(k, 3)))
    ts = TrackSet(times_list, values_list, 3)
    for time in np.linspace(-2.0, 4.0, 61):
        got = ts.sample_linear(time)
        for c in range(40):
            t, v = times_list[c], values_list[c]
            i = int(np.searchsorted(t, time, side="left"))
            if i == 0:
                ref = v[0]
            elif i == len(t):
                ref = v[-1]
            else:
                dt = t[i] - t[i - 1]
                a = 1.0 if dt < 1e-6 else min(max((time - t[i - 1]) / dt, 0.0), 1.0)
                ref = v[i - 1] + (v[i] - v[i - 1]) * a
            assert np.allclose(got[c], ref), (time, c)


def _reference_tracks(times_list, values_list, time, rotation):
    """Per track, the seed's lower_bound sample: the key itself outside the range, else the
    lerp (or ``slerp``) of the two keys around ``time``."""
    out = []
    for t, v in zip(times_list, values_list):
        i = int(np.searchsorted(t, time, side="left"))
        if i == 0 or i == len(t):
            q = v[0] if i == 0 else v[-1]
            out.append(q / np.linalg.norm(q) if rotation else q)
            continue
        dt = t[i] - t[i - 1]
        a = 1.0 if dt < 1e-6 else min(max((time - t[i - 1]) / dt, 0.0), 1.0)
        if rotation:
            out.append(slerp(v[i - 1][None], v[i][None], np.array([a]))[0])
        else:
            out.append(v[i - 1] + (v[i] - v[i - 1]) * a)
    return np.array(out)


@pytest.mark.parametrize("uniform", [True, False])
def test_trackset_rotation_and_linear_sampling_match_the_per_track_reference(uniform):
    """Tracks keyed at one set of times (one search for all, the slerp terms of each key pair
    made once) and tracks with their own times sample as the per-track slerp / lerp, at keys,
    between keys, before the first and after the last; opposite-hemisphere and nearly equal
    neighbours included."""
    rng = np.random.default_rng(11)
    shared = np.array([0.0, 0.25, 0.25 + 1e-9, 0.7, 1.0, 2.0])
    times_list, rot_list, lin_list = [], [], []
    for c in range(30):
        t = shared if uniform else np.sort(rng.uniform(0.0, 2.0, int(rng.integers(1, 7))))
        q = rng.normal(size=(len(t), 4))
        q /= np.linalg.norm(q, axis=1)[:, None]
        if len(t) > 2:
            q[2] = -q[1] if c % 3 == 0 else q[1] + 1e-5     # flipped / nearly equal neighbours
            q[2] /= np.linalg.norm(q[2])
        times_list.append(t)
        rot_list.append(q)
        lin_list.append(rng.normal(size=(len(t), 3)))
    rot = TrackSet(times_list, rot_list, 4)
    lin = TrackSet(times_list, lin_list, 3)
    assert (rot._uniform is not None) == uniform      # the path under test is the one taken
    for time in list(np.linspace(-0.5, 2.5, 49)) + list(shared) + [0.25 + 5e-10]:
        assert np.allclose(rot.sample_rotation(time), _reference_tracks(times_list, rot_list, time, True),
                           atol=1e-12), time
        assert np.allclose(lin.sample_linear(time), _reference_tracks(times_list, lin_list, time, False),
                           atol=1e-12), time
        left, right, alpha = rot.locate(time)
        assert np.allclose(rot.slerp_at(left, right, alpha), rot.sample_rotation(time), atol=1e-12)
    assert np.allclose(rot.times, np.concatenate(times_list))


@pytest.mark.parametrize("uniform", [True, False])
def test_sampled_rotations_turn_at_a_constant_rate_and_stay_unit_at_every_angle(uniform):
    """Key pairs from 1e-10 rad to nearly 180 degrees apart (opposite hemispheres included)
    sample as the rotation by alpha times their angle, about their axis (true slerp, also where
    the keys are so close that an arccos of their dot product loses half its digits), and unit
    without a normalisation; keys that are not unit are normalised before the slerp."""
    rng = np.random.default_rng(21)
    angles = [1e-10, 3e-9, 1e-6, 1e-4, 0.01, 0.03, 0.3, 1.0, 2.0, 3.1]
    times_list, rot_list, axes, bases = [], [], [], []
    for c, ang in enumerate(angles):
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        base = rng.normal(size=4)
        base /= np.linalg.norm(base)
        turn = R.quat_axis_angle(axis, ang)
        right = quat_mul(turn, base) * (-1.0 if c % 2 else 1.0)      # odd tracks: other hemisphere
        times_list.append(np.array([0.0, 1.0]) if uniform else np.array([0.0, 1.0 + 0.1 * c]))
        rot_list.append(np.array([base, right]))
        axes.append(axis)
        bases.append(base)
    rot = TrackSet(times_list, rot_list, 4)
    assert (rot._uniform is not None) == uniform
    assert rot._pair_table()[1] is rot.values          # unit keys: slerped as they are, no copy
    for a in (0.1, 0.25, 0.5, 0.9):
        got = rot.sample_rotation(a * np.array([t[-1] for t in times_list]).min() if uniform else a)
        for c, ang in enumerate(angles):
            alpha = a if uniform else a / times_list[c][-1]
            want = quat_mul(R.quat_axis_angle(axes[c], alpha * ang), bases[c])
            assert abs(abs(np.dot(got[c], want)) - 1.0) < 1e-15, (c, a)
            assert np.allclose(got[c], want, atol=2e-16 + 1e-15 * ang), (c, a, np.abs(got[c] - want).max())
            assert abs(np.dot(got[c], got[c]) - 1.0) < 1e-14, (c, a)
    # keys that are not unit (here of different lengths within a pair) are normalised first
    scaled = TrackSet(times_list, [r * np.array([[2.0], [0.3]]) for r in rot_list], 4)
    assert scaled._pair_table()[1] is not scaled.values
    for time in (0.0, 0.3, 0.5, 1.0):
        assert np.allclose(scaled.sample_rotation(time), rot.sample_rotation(time), atol=1e-15), time
    q = R.quat_axis_angle([0, 1, 0], 1.2)               # a zero key is the identity
    zero = TrackSet([np.array([0.0, 1.0])], [np.array([[0.0, 0.0, 0.0, 0.0], q])], 4)
    assert np.allclose(zero.sample_rotation(0.0)[0], [1.0, 0.0, 0.0, 0.0])
    assert np.allclose(zero.sample_rotation(0.5)[0], R.quat_axis_angle([0, 1, 0], 0.6), atol=1e-15)


def _turning_at_a_quarter():
    """Node 1 turning 1 rad about z over a 1 s clip, played to 0.25 s."""
    chans = [NodeAnimationChannelAsset(1, rotation_times=np.array([0.0, 1.0]),
                                       rotation_values=np.array([R.quat_axis_angle([0, 0, 1], 0.0),
                                                                 R.quat_axis_angle([0, 0, 1], 1.0)]))]
    scene, pose, p = setup(chans, duration=1.0)
    p.play()
    assert p.update(0.25, scene, pose)
    return scene, pose, p


def test_a_rotation_clip_keeps_a_scale_written_between_frames():
    """The player's write skips the scale columns while every scale is one; a scale written
    between frames (here by set_local_trs) is in the next frame's local matrix."""
    scene, pose, p = _turning_at_a_quarter()
    assert np.allclose(np.linalg.norm(pose.local_matrices[1][:3, :3], axis=0), 1.0)
    t, q, _s = pose.local_trs(np.array([1]))
    assert pose.set_local_trs(np.array([1]), t, q, np.array([[2.0, 3.0, 0.5]]))
    assert p.update(0.25, scene, pose)
    m = pose.local_matrices[1]
    pre = np.asarray(scene.pre_matrices[1])
    want = pre @ compose_trs(t, R.quat_axis_angle([0, 0, 1], 0.5)[None], np.array([[2.0, 3.0, 0.5]]))[0]
    assert np.allclose(m, want, atol=1e-12)


def test_a_sampled_frame_replaces_a_local_matrix_written_between_frames():
    """A matrix written between frames (set_local_matrices, here with a projective last row) is
    replaced whole by the next sampled frame, its last row included."""
    scene, pose, p = _turning_at_a_quarter()
    sampled = pose.local_matrices[1].copy()
    odd = sampled.copy()
    odd[3] = [0.1, 0.2, 0.0, 1.5]          # its top rows (and so its TRS) are the sampled ones
    assert pose.set_local_matrices(np.array([1]), odd[None])
    assert pose.update_world_matrices()
    assert np.allclose(pose.local_matrices[1], odd)
    p.seek(0.25)
    assert p.update(0.0, scene, pose)
    assert np.allclose(pose.local_matrices[1], sampled, atol=1e-12)


def test_clip_tracks_are_packed_and_the_player_views_them():
    """An AnimationClipAsset keeps each kind of key values in one array (the channels hold
    views of it, with the same values), and the player's flattened tracks view that array
    instead of copying it."""
    rng = np.random.default_rng(5)
    qs = [rng.normal(size=(3, 4)) for _ in range(4)]
    qs = [q / np.linalg.norm(q, axis=1)[:, None] for q in qs]
    chans = [NodeAnimationChannelAsset(i + 1, rotation_times=np.array([0.0, 0.5, 1.0]), rotation_values=q)
             for i, q in enumerate(qs)]
    clip = AnimationClipAsset("c", 1.0, tuple(chans))
    base = clip.channels[0].rotation_values.base
    assert base is not None and not base.flags.writeable
    for c, q in zip(clip.channels, qs):
        assert c.rotation_values.base is base and np.array_equal(c.rotation_values, q)
    player = AnimationPlayer()
    player._flatten(clip)
    assert player._r_tracks is not None
    assert player._r_tracks.values.base is base
    assert np.array_equal(player._r_tracks.values, np.concatenate(qs))
    # tracks that are not consecutive rows of one array are copied
    other = TrackSet([c.rotation_times for c in clip.channels[::-1]],
                     [c.rotation_values for c in clip.channels[::-1]], 4)
    assert other.values.base is not base and np.array_equal(other.values, np.concatenate(qs[::-1]))


def test_morph_channels_are_sampled_into_weights():
    mc = [MorphWeightChannelAsset(3, "Smile", times=np.array([0.0, 1.0]), values=np.array([0.0, 1.0]))]
    scene, pose, p = setup(ramp(), duration=2.0, morph_channels=mc)
    p.seek(0.25)
    p.update(0.0, scene, pose)
    assert p.morph_keys == [(3, "Smile")]
    (keys, values, weight), = p.morph_sides          # one side, unblended: the clip at its weight
    assert keys == ((3, "Smile"),) and weight == 1.0
    assert math.isclose(values[0], 0.25)


def test_no_clip_keeps_bind_pose():
    scene = R.skinned_arm_scene()
    pose = ScenePose()
    pose.initialize(scene)
    p = AnimationPlayer()
    assert p.update(0.1, scene, pose) is True
    p.set_clip(None)
    assert p.update(0.1, scene, pose)
    assert scene.bind_locals is not None
    assert not pose.is_dirty and np.allclose(pose.local_matrices, scene.bind_locals)
