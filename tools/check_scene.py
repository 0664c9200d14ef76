"""``check_deform.py --mode scene``: the Scene preview's animation (``engine.blender.sources.nla`` +
``engine.core.animation.nla``) against Blender's timeline evaluation (``scene.frame_set(f,
subframe=s)``) of the same time, on every animated channel of every Object and shape-key
datablock: object transforms, pose-bone transforms, shape-key values.

    .venv/bin/python tools/check_deform.py FILE.blend --mode scene
    .venv/bin/python tools/check_scene.py --generated      # the generated NLA scenes

Prints one line per ID (channels, max error, worst channel) and
``scene: ids=N channels=M frames=F max_err=E`` and exits 0 only when every channel is within
1e-4 (relative to the object's size for locations) at integer and fractional frames.  A curve
the preview does not evaluate itself (a Noise modifier, ...) is never filled from Blender here:
it evaluates to NaN, is listed as ``unsupported: ...`` and fails the check (the preview plays
such a curve sampled through ``FCurve.evaluate``; comparing that with Blender would compare
Blender with itself at integer frames).
``build_nla_scene()`` makes the generated scenes: several characters with every strip option
(action sub-range, scale, repeat, reverse, Hold / Hold Forward / Nothing, blend in / out,
animated influence and strip time, mute and solo) and every blend type (Replace, Combine with
quaternions, axis-angle and scale, Add, Subtract, Multiply), shape-key NLA and object actions.
"""
from __future__ import annotations

import argparse
import math
import sys
from typing import TYPE_CHECKING, cast

import numpy as np

if TYPE_CHECKING:
    from stylized_renderer.engine.blender.bake.scene import SceneBakes

TOL = 1e-4
BAKED_TOL = 1e-3      # objects deformed by a Scene bake (engine/blender/bake/scene.py), at any frame
FRACTIONS = (0.0, 0.25, 0.5, 0.8)


def _read(idb, keys):
    """Blender's values of ``keys``; NaN where a path does not resolve (a VRM expression preview
    without the VRM Add-on, which the preview evaluates itself: ``compare`` leaves those out)."""
    out = np.empty(len(keys))
    for j, (path, i) in enumerate(keys):
        try:
            v = idb.path_resolve(path)
        except ValueError:
            out[j] = np.nan
            continue
        out[j] = float(v[i]) if hasattr(v, "__len__") else float(v)
    return out


def _sizes(a):
    """Per channel tolerance scale: the object's size for locations, 1 otherwise."""
    ob = a.id
    size = 1.0
    if hasattr(ob, "dimensions"):
        size = max(1.0, float(max(ob.dimensions)))
    return np.array([size if p.endswith("location") else 1.0 for p, _ in a.keys])


def scene_frames(scene, fractions=FRACTIONS, step: int = 1) -> list:
    lo, hi = scene.frame_start - 3, scene.frame_end + 3
    return [(f, s) for f in range(lo, hi + 1, step) for s in fractions]


def compare(scene, anim, frames, mutate=None, verbose=False):
    """Max tolerance-relative error over ``frames`` [(frame, subframe)] between ``anim``
    (a SceneAnimation, read before) and Blender; ``mutate(anim)`` alters our stacks first (the
    negative controls).  Returns (max relative error, per-ID lines)."""
    if mutate is not None:
        mutate(anim)
    worst = {}
    for f, sub in frames:
        scene.frame_set(f, subframe=sub)
        t = f + sub
        for a, vals, _written in anim.evaluate(t):
            if not a.keys:
                continue
            ref = _read(a.id, a.keys)
            err = np.abs(vals - ref) / _sizes(a)
            err = np.where(np.isfinite(err), err, np.inf)
            err[np.isnan(ref)] = 0.0          # no Blender value to compare with (see _read)
            k = int(np.argmax(err))
            e = float(err[k])
            if e > worst.get(a.name, (-1.0,))[0]:
                worst[a.name] = (e, a.keys[k], t, float(vals[k]), float(ref[k]))
    lines = []
    for a in anim.ids:
        e, key, t, v, r = worst.get(a.name, (0.0, None, None, 0.0, 0.0))
        lines.append(f"  {a.name}: channels={len(a.keys)} max_err={e:.3g}"
                     + (f" worst {key[0]}[{key[1]}] at {t:g}: ours {v:.6g} blender {r:.6g}" if key else ""))
    m = max((w[0] for w in worst.values()), default=0.0)
    return m, lines


def run(scene, frames=None, out=print) -> int:
    from stylized_renderer.engine.blender.sources.nla import SceneAnimation

    anim = SceneAnimation(scene, sample=False)      # never Blender's values in what is checked
    frames = frames if frames is not None else scene_frames(scene)
    m, lines = compare(scene, anim, frames)
    for line in lines:
        out(line)
    bad = unsupported_lines(anim)
    for line in bad:
        out(line)
    chans = sum(len(a.keys) for a in anim.ids)
    out(f"scene: ids={len(anim.ids)} channels={chans} frames={len(frames)} max_err={m:.3g}"
        + (f" unsupported={len(bad)}" if bad else ""))
    return 0 if m <= TOL and not bad else 1


def unsupported_lines(anim) -> list:
    """One failing line per curve the preview does not evaluate itself (``IdAnimation.unsupported``)."""
    return [f"  unsupported: {n} (not evaluated by the preview: the check fails)" for a in anim.ids for n in a.unsupported]


def baked_objects(scene, state) -> set:
    """Objects deformed by an armature Scene playback draws from a bake (``state.scene_bakes``),
    or whose driven shape keys it draws from one: compared within BAKED_TOL (the bake
    interpolates Blender's pose or values between its samples)."""
    bakes = getattr(state.scene_bakes, "bakes", None) or {}
    keys = set(getattr(state.scene_bakes, "keys", None) or {})
    out = {ob.name for ob in scene.objects
           if getattr(getattr(getattr(ob, "data", None), "shape_keys", None), "name", None) in keys}
    for ob in scene.objects:
        arms = {m.object.name for m in getattr(ob, "modifiers", ()) if m.type == "ARMATURE" and m.object is not None}
        if ob.parent is not None and ob.parent_type in ("ARMATURE", "BONE"):
            arms.add(ob.parent.name)
        if arms & set(bakes):
            out.add(ob.name)
    return out


def run_deform(scene, frames=None, out=print, state=None, seek=None, reference=None) -> int:
    """The preview's Scene playback as the viewport drives it (``StylizedSession.update_frame``
    with a Scene-mode PreviewState seeked to each time, no depsgraph read by the playback) against
    Blender's evaluated meshes after ``frame_set`` at the same time: every GPU-drawn vertex, read
    back through check_deform's readback, within 1e-4 of the object's size (BAKED_TOL for an
    object deformed by an armature Play bakes through Blender: the check bakes it as Play does).  ``state``: a
    PreviewState the operators set up (its queued commands and frame are used as they are, unless
    ``seek``: then it is seeked to each frame, as it is without ``state``).  ``reference(f, sub)``:
    called after each ``frame_set`` to set Blender's side up where Blender cannot evaluate what
    the timeline shows itself (a VRM expression without the VRM Add-on: its shape keys typed in)."""
    import bpy

    from stylized_renderer.engine.features.preview import control as preview
    from stylized_renderer.engine.features.preview.control import PreviewState
    from stylized_renderer.engine.gpu import util as gpu_util
    from tools import deform_checker as cd

    scene.render.engine = "STYLIZED"
    checker = cd.Checker()
    refused = []
    given = state is not None
    state = state if given else PreviewState(active=True, scene_mode=True)
    if not given:
        from stylized_renderer.engine.features.preview import scene_bake as preview_scene_bake

        # what Play bakes (armatures only Blender evaluates)
        preview_scene_bake.prepare(scene, state, quiet=preview.timeline_handback_suspended)
    baked = baked_objects(scene, state)
    frames = frames if frames is not None else scene_frames(scene)
    if getattr(state.scene_bakes, "bakes", None) or getattr(state.scene_bakes, "keys", None):
        # a bake holds the frames Scene playback shows (bake_scene.played_range); the check's
        # extrapolation frames outside them are never played (also where the baked armature
        # deforms no mesh: Scene playback refuses them all the same)
        lo, hi = cast("SceneBakes", state.scene_bakes).range
        kept = [(f, s_) for f, s_ in frames if lo <= f + s_ <= hi]
        if len(kept) < len(frames):
            out(f"  {len(frames) - len(kept)} frame(s) outside the baked frames {lo}..{hi} (never played) skipped")
        frames = kept
    for f, sub in frames:
        with preview.timeline_handback_suspended():     # the check's frame_set, not the user scrubbing
            scene.frame_set(f, subframe=sub)
            if reference is not None:
                reference(f, sub)
        dg = bpy.context.evaluated_depsgraph_get()
        if not state.scene_mode:
            raise RuntimeError("the preview state is not in Scene mode: nothing to compare")
        if seek if seek is not None else not given:
            state.push("scene_seek", f + sub)
            state.push("pause")

        def task():
            s = checker.session
            s.ensure_gpu()
            s.ensure_runtime(dg)
            if not s.update_frame(dg, state):
                rt = s.runtime
                why = s.update_error or (rt.last_failure() if rt is not None else "the session has no runtime")
                raise RuntimeError(f"Scene preview update failed: {why}")
            if not state.active:
                refused.append(state.last_error)      # a failure, never Blender compared with itself
                return
            checker._compare("scene", dg)

        with preview.timeline_handback_suspended():     # the harness's render is not the user either
            gpu_util.run_in_gpu_context(task)
        if refused:
            out(f"  refused: {refused[0]}")
            checker.session.free()
            out(f"scene-deform: refused frames={len(frames)}")
            return 1
    pb = checker.session.preview.scene_playback
    bad = unsupported_lines(pb.anim) if pb is not None else []
    for line in bad:
        out(line)
    worst = ratio = 0.0
    for (name, _m), r in sorted(checker.results.items()):
        tol = BAKED_TOL if name in baked else TOL
        if r["path"] == "gpu":
            worst = max(worst, r["err"])
            ratio = max(ratio, r["err"] / tol)        # each object against its own tolerance
        out(f"  scene {name}: verts={r['verts']} max_rel_error={r['err']:.3e} path={r['path']}"
            + (f" baked (tolerance {tol:g})" if name in baked else ""))
    for n in state.scene_notes:
        out(f"  note: {n}")
    checker.session.free()
    out(f"scene-deform: objects={len(checker.results)} frames={len(frames)} max_rel_error={worst:.3e}"
        + (f" baked={len(baked)}" if baked else "") + (f" unsupported={len(bad)}" if bad else ""))
    return 0 if ratio <= 1.0 and not bad else 1


# ------------------------------------------------------------------ generated scenes
def _assign(idb, act, curves, interp="BEZIER"):
    """Key ``curves`` into ``act`` through ``idb`` (so the action gets ``idb``'s slot), then
    unassign it."""
    ad = idb.animation_data_create()
    ad.action = act
    for (path, index), keys in curves.items():
        for f, v in keys:
            owner_path, _, prop = path.rpartition(".")
            owner = idb.path_resolve(owner_path) if owner_path else idb
            arr = getattr(owner, prop)
            if hasattr(arr, "__len__"):
                arr[index] = v
            else:
                setattr(owner, prop, v)
            idb.keyframe_insert(path, index=index if hasattr(arr, "__len__") else -1, frame=f)
    for fc in _fcurves(act):
        for kp in fc.keyframe_points:
            kp.interpolation = interp
    ad.action = None
    return act


def _fcurves(act):
    out = []
    for layer in act.layers:
        for st in layer.strips:
            for cb in st.channelbags:
                out.extend(cb.fcurves)
    return out


def build_nla_scene(seed: int = 0):
    """Several characters with NLA stacks (see the module docstring) added to the context scene
    (the one ``frame_set`` evaluates headless); returns it."""
    import bpy

    rng = np.random.default_rng(seed)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 60
    objs = []
    blends = ["REPLACE", "COMBINE", "ADD", "SUBTRACT", "MULTIPLY"]
    modes = ["QUATERNION", "AXIS_ANGLE", "XYZ"]
    from tools import scenes

    cube_v = [(x, y, z) for x in (-0.3, 0.3) for y in (-0.3, 0.3) for z in (0.0, 0.6)]
    cube_f = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    for c in range(5):
        ob = scenes.make_mesh(f"Char{c}_{seed}", cube_v, cube_f, scene=scene)
        ob.rotation_mode = modes[c % 3]
        objs.append(ob)
    # a rig: pose bones in each rotation mode, one per character track layout below
    specs = [(f"B{i}", None if i == 0 else f"B{i - 1}", (0, 0, i * 0.5), (0, 0, (i + 1) * 0.5)) for i in range(3)]
    rig = scenes.make_armature(f"Rig_{seed}", specs, scene=scene, location=(3, 0, 0))
    verts, quads, _uv = scenes.grid(3, 7, size=(0.4, 1.5), origin=(-0.2, 0.0, 0.0))
    skin = scenes.make_mesh(f"RigSkin_{seed}", verts, quads, scene=scene)
    z = np.asarray(verts)[:, 2]
    weights = {}
    for i in range(3):
        w = np.clip(1.0 - np.abs(z - (i + 0.5) * 0.5) / 0.5, 0.0, 1.0)
        sel = np.flatnonzero(w > 0)
        weights[f"B{i}"] = (sel, w[sel])
    scenes.skin_to(skin, rig, weights)
    skin.location = (3, 0, 0)
    for i, pb in enumerate(rig.pose.bones):
        pb.rotation_mode = modes[i % 3]
    objs.append(rig)
    rot = {"QUATERNION": ("rotation_quaternion", 4), "AXIS_ANGLE": ("rotation_axis_angle", 4),
           "XYZ": ("rotation_euler", 3)}
    for c, ob in enumerate(objs):
        owners = ([(f'pose.bones["{pb.name}"].', pb.rotation_mode) for pb in ob.pose.bones]
                  if ob.type == "ARMATURE" else [("", ob.rotation_mode)])

        def curves(lo, hi):
            d = {}
            for pre, mode in owners:
                rp, rn = rot[mode]
                for i in range(3):
                    d[(pre + "location", i)] = [(lo, float(rng.uniform(-1, 1))), (0.5 * (lo + hi), float(rng.uniform(-1, 1))),
                                                (hi, float(rng.uniform(-1, 1)))]
                    d[(pre + "scale", i)] = [(lo, float(rng.uniform(0.5, 1.5))), (hi, float(rng.uniform(0.5, 1.5)))]
                for i in range(rn):
                    d[(pre + rp, i)] = [(lo, float(rng.uniform(-1, 1))), (hi, float(rng.uniform(-1, 1)))]
            return d

        acts = [_assign(ob, bpy.data.actions.new(f"{ob.name}_A{k}"), curves(1.0, 11.0 + 2 * k)) for k in range(4)]
        active = _assign(ob, bpy.data.actions.new(f"{ob.name}_ACT"), curves(1.0, 21.0))
        ad = ob.animation_data
        # track 0: two strips, sub-range + scale + repeat, reverse; extrapolations vary
        t0 = ad.nla_tracks.new()
        s = t0.strips.new("a", 5, acts[0])
        s.action_frame_start, s.action_frame_end = 2.0, 9.0
        s.scale = 1.5
        s.repeat = 2.0 if c % 2 == 0 else 1.5
        s.extrapolation = ["HOLD", "HOLD_FORWARD", "NOTHING"][c % 3]
        s2 = t0.strips.new("b", int(math.ceil(s.frame_end)) + 4, acts[1])
        s2.use_reverse = c % 2 == 1
        s2.extrapolation = ["NOTHING", "HOLD", "HOLD_FORWARD"][c % 3]
        s2.blend_in, s2.blend_out = 2.0, 3.0
        # track 1: the character's blend type, animated influence
        t1 = ad.nla_tracks.new()
        s3 = t1.strips.new("c", 8, acts[2])
        s3.blend_type = blends[c % 5] if ob.type != "ARMATURE" else "COMBINE"
        s3.extrapolation = "HOLD"
        s3.use_animated_influence = True
        s3.influence = 0.2
        s3.keyframe_insert("influence", frame=8)
        s3.influence = 0.9
        s3.keyframe_insert("influence", frame=30)
        # track 2: another blend type, animated strip time (cyclic on odd characters); muted on char 3
        t2 = ad.nla_tracks.new()
        s4 = t2.strips.new("d", 20, acts[3])
        s4.blend_type = blends[(c + 2) % 5]
        s4.extrapolation = "HOLD_FORWARD"
        s4.use_animated_time = True
        s4.use_animated_time_cyclic = c % 2 == 1
        s4.strip_time = 2.0
        s4.keyframe_insert("strip_time", frame=20)
        s4.strip_time = 16.0
        s4.keyframe_insert("strip_time", frame=40)
        t2.mute = c == 3
        t1.is_solo = c == 4 and ob.type != "ARMATURE"
        ad.action = active
        ad.action_blend_type = blends[(c + 1) % 5]
        ad.action_influence = 0.6
        ad.action_extrapolation = ["HOLD", "HOLD_FORWARD", "NOTHING"][(c + 1) % 3]
    # a mesh with shape-key NLA and an object action
    me = bpy.data.meshes.new("Face")
    me.from_pydata([(0, 0, 0), (1, 0, 0), (0, 1, 0)], [], [(0, 1, 2)])
    face = bpy.data.objects.new("Face", me)
    scene.collection.objects.link(face)
    face.shape_key_add(name="Basis")
    for j, n in enumerate(("Smile", "Blink")):
        k = face.shape_key_add(name=n)
        k.slider_max = 0.9
        for i, p in enumerate(k.data):
            p.co = (p.co[0] + 0.3 * (i == j), p.co[1], p.co[2] + 0.5 * (i == 2 - j))
    key = me.shape_keys
    kacts = [_assign(key, bpy.data.actions.new(f"KA{k}"), {
        ('key_blocks["Smile"].value', 0): [(1, 0.1 * k), (10, 0.5 + 0.1 * k)],
        ('key_blocks["Blink"].value', 0): [(1, 0.7), (10, 0.2 * k)]}) for k in range(3)]
    kad = key.animation_data
    for k, blend in enumerate(("REPLACE", "ADD", "COMBINE")):
        tr = kad.nla_tracks.new()
        st = tr.strips.new(f"k{k}", 1 + 12 * k, kacts[k])
        st.blend_type = blend
        st.repeat = 1.0 + 0.5 * k
        st.extrapolation = "HOLD" if k == 0 else "HOLD_FORWARD"
    fact = _assign(face, bpy.data.actions.new("FaceMove"), {("location", 2): [(1, 0.0), (30, 2.0)],
                                                              ("rotation_euler", 0): [(1, 0.0), (30, 1.0)]})
    face.animation_data.action = fact
    return scene


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("blend", nargs="?")
    ap.add_argument("--generated", action="store_true")
    args = ap.parse_args(argv)
    import pathlib

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))   # run as a script: the repository root
    from tools import _bootstrap

    _bootstrap.load()
    import bpy

    if args.blend:
        bpy.ops.wm.open_mainfile(filepath=args.blend)
        return run(bpy.context.scene) | run_deform(bpy.context.scene)
    rc = 0
    for seed in (0, 1):
        bpy.ops.wm.read_homefile(use_empty=True)
        scene = build_nla_scene(seed)
        print(f"generated scene {seed}:")
        rc |= run(scene) | run_deform(scene)
    return rc


if __name__ == "__main__":
    sys.exit(main())
