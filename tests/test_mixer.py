"""The one mixer (engine/core/animation/mixer.py): weighted accumulation of TRS (shortest-path
quaternions), baked local matrices and morph weights, checked against Blender's own
interpolation (mathutils: Quaternion.slerp, Vector.lerp), and the player's crossfade
going through it."""
from __future__ import annotations

import numpy as np
from mathutils import Quaternion, Vector

from stylized_renderer.engine.core.animation.mixer import MatrixMixer, MorphMixer, TRSMixer

RNG = np.random.default_rng(7)


def unit_quats(n):
    q = RNG.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=1)[:, None]


def bl_slerp(a, b, w):
    return np.array(Quaternion(a).slerp(Quaternion(b), w))


def same_rot(a, b, tol=1e-6):
    return abs(abs(float(np.dot(a, b))) - 1.0) < tol


def test_two_sources_are_blenders_slerp_and_lerp_at_the_fade_weight():
    n = 16
    ta, tb = RNG.normal(size=(n, 3)), RNG.normal(size=(n, 3))
    qa, qb = unit_quats(n), unit_quats(n)
    sa, sb = RNG.uniform(0.5, 2, (n, 3)), RNG.uniform(0.5, 2, (n, 3))
    rows = np.arange(n)
    for a in (0.0, 0.25, 0.6, 1.0):
        m = TRSMixer(n)
        m.accumulate(rows, ta, qa, sa, 1.0 - a)
        m.accumulate(rows, tb, qb, sb, a)
        t, q, s = m.apply(rows, np.zeros((n, 3)), np.tile([1.0, 0, 0, 0], (n, 1)), np.ones((n, 3)))
        for i in range(n):
            assert np.allclose(t[i], Vector(ta[i]).lerp(Vector(tb[i]), a), atol=1e-6)
            assert np.allclose(s[i], Vector(sa[i]).lerp(Vector(sb[i]), a), atol=1e-6)
            assert same_rot(q[i], bl_slerp(qa[i], qb[i], a)), (a, i, q[i], bl_slerp(qa[i], qb[i], a))


def test_shortest_path_a_negated_quaternion_is_the_same_rotation():
    n = 8
    qa = unit_quats(n)
    qb = unit_quats(n)
    rows = np.arange(n)
    m = TRSMixer(n)
    m.accumulate(rows, np.zeros((n, 3)), qa, np.ones((n, 3)), 0.7)
    m.accumulate(rows, np.zeros((n, 3)), -qb, np.ones((n, 3)), 0.3)    # -q: the same rotation
    _, q, _ = m.apply(rows, np.zeros((n, 3)), qa, np.ones((n, 3)))
    for i in range(n):
        ref = bl_slerp(qa[i], qb[i], 0.3)     # Blender's slerp takes the short way
        assert same_rot(q[i], ref), (i, q[i], ref)


def test_three_sources_accumulate_progressively_and_a_partial_weight_fades_from_the_bind():
    n = 5
    q = [unit_quats(n) for _ in range(3)]
    t = [RNG.normal(size=(n, 3)) for _ in range(3)]
    w = (0.2, 0.3, 0.5)
    rows = np.arange(n)
    m = TRSMixer(n)
    for k in range(3):
        m.accumulate(rows, t[k], q[k], np.ones((n, 3)), w[k])
    tt, qq, _ = m.apply(rows, np.zeros((n, 3)), np.tile([1.0, 0, 0, 0], (n, 1)), np.ones((n, 3)))
    for i in range(n):
        ref = bl_slerp(bl_slerp(q[0][i], q[1][i], 0.3 / 0.5), q[2][i], 0.5)
        assert same_rot(qq[i], ref)
        assert np.allclose(tt[i], w[0] * t[0][i] + w[1] * t[1][i] + w[2] * t[2][i], atol=1e-9)
    # one source alone at 0.4 on rows 0..2: 40 % of the way from the bind pose; row 3, 4: bind
    bind_q = unit_quats(n)
    m = TRSMixer(n)
    m.accumulate(rows[:3], t[0][:3], q[0][:3], np.full((3, 3), 2.0), 0.4)
    tt, qq, ss = m.apply(rows, np.ones((n, 3)), bind_q, np.ones((n, 3)))
    for i in range(3):
        assert same_rot(qq[i], bl_slerp(bind_q[i], q[0][i], 0.4))
        assert np.allclose(tt[i], Vector((1, 1, 1)).lerp(Vector(t[0][i]), 0.4), atol=1e-6)
        assert np.allclose(ss[i], 1.4)
    assert np.allclose(qq[3:], bind_q[3:]) and np.allclose(tt[3:], 1.0)
    m.reset()
    assert not m.weight.any()


def test_matrices_and_morph_weights():
    n = 4
    ma = RNG.normal(size=(n, 4, 4))
    mb = RNG.normal(size=(n, 4, 4))
    rows = np.arange(n)
    m = MatrixMixer(n)
    m.accumulate(rows, ma, 0.75)
    m.accumulate(rows, mb, 0.25)
    out = m.apply(rows, np.zeros((n, 4, 4)))
    # linear, element-wise, as the baked clip's crossfade always blended (mathutils' Matrix.lerp
    # decomposes, which a bake's sheared locals cannot)
    assert np.allclose(out, 0.75 * ma + 0.25 * mb, atol=1e-12)
    m.reset()
    m.accumulate(rows[:2], ma[:2], 0.5)           # alone at 0.5: half-way from the original
    orig = np.broadcast_to(np.eye(4), (n, 4, 4))
    assert np.allclose(m.apply(rows, orig), np.concatenate([0.5 * ma[:2] + 0.5 * orig[:2], orig[2:]]))
    # morphs: keys 0, 1 from the incoming clip (a), keys 1, 2 from the outgoing one (1 - a)
    mm = MorphMixer(3)
    mm.accumulate([0, 1], [0.8, 0.4], 0.3)
    mm.accumulate([1, 2], [1.0, 0.5], 0.7)
    assert np.allclose(mm.apply(), [0.3 * 0.8, 0.3 * 0.4 + 0.7 * 1.0, 0.7 * 0.5])


def test_the_player_crossfade_goes_through_the_mixer():
    """Half-way through a fade the pose equals the mixer fed with both clips alone at their
    times and the fade's weights (and Blender's slerp of the two rotations)."""
    from stylized_renderer.engine.core.animation import player as player_mod
    from support.crossfade_clips import sample_alone, start_fade, trs

    calls = []
    orig = player_mod.TRSMixer.accumulate

    def spy(self, rows, t, q, s, weight=1.0):
        calls.append(float(np.asarray(weight).max()))
        return orig(self, rows, t, q, s, weight)

    player_mod.TRSMixer.accumulate = spy
    try:
        scene, pose, p, ca, cb = start_fade(fade=0.5, t_switch=0.4)
        assert p.update(0.25, scene, pose)
    finally:
        player_mod.TRSMixer.accumulate = orig
    assert calls and abs(calls[-1] + calls[-2] - 1.0) < 1e-12, calls
    a = p.fade_weights[1]
    pa, _ = sample_alone(scene, ca, 0.4 + 0.25)
    pb, _ = sample_alone(scene, cb, 0.25)
    q = trs(pose, 1)[1]
    ref = bl_slerp(trs(pa, 1)[1], trs(pb, 1)[1], a)
    assert same_rot(q, ref), (q, ref)


def test_a_baked_clip_is_sampled_with_the_player_once_per_frame(crig, bakes, monkeypatch):
    """A bake's local matrices are a source the player samples with its clip: a frame that
    restarts the clip (bind-pose reset, then the sample) writes the bake once, at the player's
    time, and makes the palettes once (before: the bake was written after the player as well and
    the palettes made twice)."""
    from stylized_renderer.engine.blender.bake import baked_pose
    from stylized_renderer.engine.core.runtime import palette
    from support.preview_sessions import action_preview_session

    arm, _ob, act = crig
    bakes.cache.ensure(arm, act.name)
    s, st, frame = action_preview_session(arm, act, 0.2)
    try:
        ok, clip, _t = frame()
        assert ok and st.active, st.last_error
        calls = {"sample": [], "palettes": 0}
        orig_sample = baked_pose.BakedPose.sample
        orig_update = palette.SkinningPaletteSet.update

        def sample(self, t):
            calls["sample"].append(float(t))
            return orig_sample(self, t)

        def update(self, pose):
            calls["palettes"] += 1
            return orig_update(self, pose)

        monkeypatch.setattr(baked_pose.BakedPose, "sample", sample)
        monkeypatch.setattr(palette.SkinningPaletteSet, "update", update)
        st.push("clip", act.name)       # the same clip again: time 0, bind pose, sample
        st.push("seek", 0.35)
        ok, clip2, t = frame()
        assert ok and st.active and clip2 is clip and t == 0.35
        assert calls["sample"] == [0.35], calls
        assert calls["palettes"] == 1, calls
    finally:
        s.free()


def test_a_crossfade_makes_its_mixers_once_not_every_frame(monkeypatch):
    """The fade's TRS mixer is made at its first sample and reused by every later frame (before: a
    mixer was made every frame); the weights still follow the fade.  The fade makes no morph
    mixer: its morph sides are blended by the runtime's one morph mixer (clip_morphs.py)."""
    from stylized_renderer.engine.core.animation import crossfade as fade_mod
    from support.crossfade_clips import start_fade

    made = []

    def counting(cls):
        class Counted(cls):
            def __init__(self, count):
                made.append(cls.__name__)
                super().__init__(count)
        return Counted

    monkeypatch.setattr(fade_mod, "TRSMixer", counting(TRSMixer))
    scene, pose, p, _ca, _cb = start_fade(fade=0.5, t_switch=0.4)
    weights = []
    for _ in range(4):
        assert p.update(0.1, scene, pose)
        weights.append(p.fade_weights[1])
    assert p.is_fading and weights == sorted(weights) and weights[0] < weights[-1]
    assert made == ["TRSMixer"], made
    assert np.allclose([w for _k, _v, w in p.morph_sides], [1.0 - weights[-1], weights[-1]])
