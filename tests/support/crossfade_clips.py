"""Two hand-built clips on the skinned-arm scene of support/rigs.py and a player fading from one to
the other (test_player_crossfade, test_mixer): ``clip_a`` / ``clip_b``, ``start_fade`` (a player
switched from A to B mid-play with a crossfade), ``sample_alone`` (one clip's pose and morph
weights at a time, fresh player), ``trs`` (a node's local translation, rotation, scale) and
``morph_weights`` (the player's morph sides blended through the mixer).  bpy-free."""
from __future__ import annotations

import numpy as np

from stylized_renderer.engine.core.animation import AnimationPlayer, ScenePose
from stylized_renderer.engine.core.animation.mixer import MorphMixer
from stylized_renderer.engine.core.assets import MorphWeightChannelAsset, NodeAnimationChannelAsset
from support import rigs as R

ZA = [0.0, 0.0, 1.0]


def clip_a():
    """Node 1 walks +x (0 -> 2 m over 2 s) turning 0 -> 0.6 rad; node 2 scales 1 -> 2; Smile 0.2."""
    return R.clip([
        NodeAnimationChannelAsset(1, translation_times=np.array([0.0, 2.0]),
                                  translation_values=np.array([[0, 0, 0], [2, 0, 0]]),
                                  rotation_times=np.array([0.0, 2.0]),
                                  rotation_values=np.array([R.quat_axis_angle(ZA, 0.0), R.quat_axis_angle(ZA, 0.6)])),
        NodeAnimationChannelAsset(2, scale_times=np.array([0.0, 2.0]), scale_values=np.array([[1, 1, 1], [2, 2, 2]])),
    ], 2.0, [MorphWeightChannelAsset(3, "Smile", times=np.array([0.0]), values=np.array([0.2]))], name="A")


def clip_b():
    """Node 1 at y = 3 turned 1.6 rad (node 2 untouched: bind); Blink 0 -> 1 over 1 s."""
    return R.clip([
        NodeAnimationChannelAsset(1, translation_times=np.array([0.0]), translation_values=np.array([[0, 3, 0]]),
                                  rotation_times=np.array([0.0, 1.0]),
                                  rotation_values=np.array([R.quat_axis_angle(ZA, 1.6), R.quat_axis_angle(ZA, 1.2)])),
    ], 1.0, [MorphWeightChannelAsset(3, "Blink", times=np.array([0.0, 1.0]), values=np.array([0.0, 1.0]))], name="B")


def morph_weights(p):
    """{(node, key): weight} of the player's morph sides through the mixer (the player itself only
    exposes its sides; a runtime blends them in its one morph mixer, engine/core/world/clip_morphs.py)."""
    keys = list(p.morph_keys)
    pos = {k: i for i, k in enumerate(keys)}
    mix = MorphMixer(len(keys))
    for side_keys, vals, w in p.morph_sides:
        mix.accumulate([pos[k] for k in side_keys], vals, w)
    return {k: float(v) for k, v in zip(keys, mix.apply())}


def sample_alone(scene, clip, time):
    """The pose and morph weights of ``clip`` alone at ``time`` (a fresh player and pose)."""
    pose = ScenePose()
    assert pose.initialize(scene)
    p = AnimationPlayer()
    p.set_clip(clip)
    p.seek(time)
    assert p.update(0.0, scene, pose)
    return pose, morph_weights(p)


def trs(pose, node):
    lt = pose.local_transform(node)
    return lt.translation, lt.rotation, lt.scale


def start_fade(fade=0.5, t_switch=0.4):
    scene = R.skinned_arm_scene()
    pose = ScenePose()
    assert pose.initialize(scene)
    p = AnimationPlayer()
    assert p.set_crossfade(fade)
    a, b = clip_a(), clip_b()
    p.set_clip(a)
    p.play()
    assert p.update(t_switch, scene, pose)
    p.set_clip(b)
    assert p.is_fading and p.current_time == 0.0
    return scene, pose, p, a, b
