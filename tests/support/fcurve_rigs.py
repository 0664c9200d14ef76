"""Rigs whose clips use every F-Curve feature the preview evaluates itself (issue 22): every
interpolation and easing (Auto, In, Out, In-Out, with back / amplitude / period settings), every
handle type (Auto, Auto Clamped, Vector, Aligned, Free), constant and linear extrapolation and
the Cycles modifier's modes, counts and offsets, on bones in every rotation mode.

``build_fcurve_rig()`` makes an armature of a chain of bones skinning a ribbon mesh, with one
action ("Features") keyed from frame 1 to 25 (curves reach before and after that range, so the
clip's start and end show the extrapolation and cycles).  tools/check_deform.py plays it.
"""
from __future__ import annotations

import numpy as np

from tools import scenes

EASINGS = ("SINE", "QUAD", "CUBIC", "QUART", "QUINT", "EXPO", "CIRC", "BACK", "BOUNCE", "ELASTIC")
EASE_TYPES = ("AUTO", "EASE_IN", "EASE_OUT", "EASE_IN_OUT")
HANDLES = ("AUTO", "AUTO_CLAMPED", "VECTOR", "ALIGNED", "FREE")
CYCLES = (("REPEAT", 0, "REPEAT", 0), ("REPEAT_OFFSET", 0, "REPEAT_OFFSET", 0), ("MIRROR", 0, "MIRROR", 0),
          ("NONE", 0, "REPEAT", 2), ("MIRROR", 1, "REPEAT_OFFSET", 1))
ROTATION_MODES = ("QUATERNION", "XYZ", "ZXY", "YZX", "AXIS_ANGLE")


def _set_keys(fc, rng, interpolation, easing=None, handles=None, spread=0.6):
    for k in fc.keyframe_points:
        k.interpolation = interpolation
        if easing is not None:
            k.easing = easing
        k.back = float(rng.uniform(0.5, 2.5))
        k.amplitude = float(rng.choice([0.0, 0.05, 0.8, 3.0]))
        k.period = float(rng.choice([0.0, 2.0, 4.1]))
        if handles is not None:
            k.handle_left_type = k.handle_right_type = handles
    fc.update()
    if handles in ("ALIGNED", "FREE"):
        for k in fc.keyframe_points:
            k.handle_left = (k.co[0] - rng.uniform(0.5, 9.0), k.co[1] + rng.normal() * spread)
            k.handle_right = (k.co[0] + rng.uniform(0.5, 9.0), k.co[1] + rng.normal() * spread)
        fc.update()


def build_fcurve_rig(seed: int = 0, bones: int = 30):
    """Armature 'CurveRig' (a chain of ``bones`` short bones) skinning 'CurveRibbon'; action
    'Features' keys every bone.  Returns (armature, mesh, action)."""
    rng = np.random.default_rng(seed)
    specs = []
    for i in range(bones):
        specs.append((f"B{i:02d}", None if i == 0 else f"B{i - 1:02d}", (0, 0, i * 0.1), (0, 0, (i + 1) * 0.1)))
    arm = scenes.make_armature("CurveRig", specs)
    verts, quads, _uv = scenes.grid(4, bones * 2 + 1, size=(0.2, bones * 0.1), origin=(-0.1, 0.0, 0.0))
    ob = scenes.make_mesh("CurveRibbon", verts, quads)
    z = np.asarray(verts)[:, 2]
    weights = {}
    for i in range(bones):
        w = np.clip(1.0 - np.abs(z - (i + 0.5) * 0.1) / 0.1, 0.0, 1.0)
        sel = np.flatnonzero(w > 0)
        weights[f"B{i:02d}"] = (sel, w[sel])
    scenes.skin_to(ob, arm, weights)
    act, cb = scenes.new_action("Features", arm)
    features = []
    for e in EASINGS:
        for t in EASE_TYPES:
            features.append(("ease", e, t))
    for h in HANDLES:
        features.append(("bezier", h, None))
    features += [("linear", None, None), ("constant", None, None)]
    for c in CYCLES:
        features.append(("cycles", c, None))
    for i in range(bones):
        pb = arm.pose.bones[f"B{i:02d}"]
        pb.rotation_mode = ROTATION_MODES[i % len(ROTATION_MODES)]
        path = f'pose.bones["{pb.name}"]'
        prop = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}.get(pb.rotation_mode,
                                                                                            "rotation_euler")
        width = 4 if prop != "rotation_euler" else 3
        channels = [("location", j) for j in range(3)] + [(prop, j) for j in range(width)] + [("scale", j) for j in range(3)]
        for ch, (p, j) in enumerate(channels):
            kind, a, b = features[(i * 7 + ch * 3) % len(features)]
            if p == "scale" and kind == "ease" and a in ("BACK", "ELASTIC"):
                a = "QUAD"      # no overshoot through zero scale (a mirrored limb's normals differ by design)
            n = int(rng.integers(2, 6))
            frames = np.sort(rng.choice(np.arange(1, 26), n, replace=False)).astype(float)
            frames[0], frames[-1] = max(frames[0] - 1.0, 1.0) if i % 3 else frames[0], frames[-1]
            if p == "scale":
                values = 1.0 + rng.normal(size=n) * 0.15
            elif p == "location":
                values = rng.normal(size=n) * 0.05
            elif p == "rotation_quaternion":
                values = (1.0 if j == 0 else 0.0) + rng.normal(size=n) * 0.3
            elif p == "rotation_axis_angle":
                values = rng.normal(size=n) * (0.6 if j == 0 else 1.0) + (0.0 if j == 0 else 0.5)
            else:
                values = rng.normal(size=n) * 0.5
            fc = scenes.add_curve(cb, f"{path}.{p}", j, frames, values)
            if kind == "ease":
                _set_keys(fc, rng, a, easing=b)
            elif kind == "bezier":
                _set_keys(fc, rng, "BEZIER", handles=a, spread=0.1 if p == "scale" else 0.6)
            elif kind == "linear":
                _set_keys(fc, rng, "LINEAR")
            elif kind == "constant":
                _set_keys(fc, rng, "CONSTANT")
            else:
                _set_keys(fc, rng, "BEZIER", handles="AUTO_CLAMPED")
                m = fc.modifiers.new("CYCLES")
                m.mode_before, m.cycles_before, m.mode_after, m.cycles_after = a
            if (i + ch) % 4 == 0 and p != "scale":
                fc.extrapolation = "LINEAR"
                fc.update()
    act.use_frame_range = True
    act.frame_start, act.frame_end = 1.0, 25.0
    scenes.finish()
    return arm, ob, act


def key_uniform_action(arm, seed: int = 1, name: str = "Uniform"):
    """An action keying every bone's location, rotation and scale at the same frames, each key's
    interpolation the same across curves (Bezier, Linear, Constant, Sine, Elastic, Bezier...): the
    curves share one timing, the player's one-group path (``CurveEvaluator._evaluate_one``)."""
    rng = np.random.default_rng(seed)
    act, cb = scenes.new_action(name, arm)
    frames = np.array([1.0, 4.0, 9.0, 12.0, 16.0, 21.0, 25.0])
    kinds = ("BEZIER", "LINEAR", "CONSTANT", "SINE", "ELASTIC", "BEZIER", "BEZIER")
    for pb in arm.pose.bones:
        path = f'pose.bones["{pb.name}"]'
        prop = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}.get(pb.rotation_mode,
                                                                                            "rotation_euler")
        width = 4 if prop != "rotation_euler" else 3
        for p, w, base, sd in (("location", 3, 0.0, 0.05), (prop, width, None, 0.4), ("scale", 3, 1.0, 0.1)):
            for j in range(w):
                b = base if base is not None else (1.0 if (p == "rotation_quaternion" and j == 0) else 0.3)
                fc = scenes.add_curve(cb, f"{path}.{p}", j, frames, b + rng.normal(size=frames.size) * sd)
                for k, kind in zip(fc.keyframe_points, kinds):
                    k.interpolation = kind
                    k.amplitude, k.period = 0.0, 0.0
                fc.update()
    return act


def finish_clip(arm, action_name: str, start: int, end: int):
    """Name the armature's action, set the scene's range to it, go to its start and finish the
    scene (tools/scenes.finish); returns the armature."""
    import bpy

    from tools import scenes

    arm.animation_data.action.name = action_name
    sc = bpy.context.scene
    sc.frame_start, sc.frame_end = start, end
    sc.frame_set(start)
    scenes.finish()
    return arm
