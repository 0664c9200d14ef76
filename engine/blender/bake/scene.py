"""Scene bakes (issue 24 item 3): what the timeline shows for the armatures only Blender can
evaluate, for the preview's *Scene* playback.

Scene playback evaluates every object's actions and NLA stacks itself (``engine.blender.sources.nla``);
an armature whose pose also needs Blender (constraints, IK, drivers, weighted B-Bones:
``bake_reasons``) is baked first: the scene *as it is* (every action and NLA stack, nothing
isolated or muted) is set to each frame of its range and the armature's evaluated pose is
recorded with the clip bakes' machinery (``bake_record.record``: every bone's parent-relative
matrix, the weighted B-Bones' segments, adaptive sub-frame samples wherever the interpolation
half-way between two samples is not within the bake's tolerance of Blender).  The scene's frame
is restored afterwards, also on error.  ``bake_record.Bake`` holds the result (its frames are
scene frames, ``frame_start`` the scene's first frame); Scene playback draws the baked bones from
it (``preview_scene_bake.SceneBakeFeed``).

``SceneBakes`` keeps the bakes of one scene (the scene's preview state holds it) with a
signature of what they depend on that does not change with the frame: the scene's range and
rate, every action and NLA setting of the scene, each baked rig's bones, constraints, drivers
and the pose values nothing animates (``rig_signature(static=True)``).  Play bakes again when it
changed; Scene playback refuses a stale bake instead of drawing a wrong pose.
"""
from __future__ import annotations

import time
from typing import Callable, Dict, List, Optional

import numpy as np

from ..importer import actions as _actions
from . import adaptive as _adaptive
from .reasons import BakeError, bake_reasons, weighted_bbones
from .record import Bake, Evaluator, bone_parents, record_in, tables
from .scene_keys import KeyBake, bake_keys, driven_keys, key_users, keys_signature  # noqa: F401 (key_users: the preview's)
from .signature import rig_signature

_STRIP_FIELDS = ("name", "frame_start", "frame_end", "action_frame_start", "action_frame_end", "scale", "repeat",
                 "use_reverse", "extrapolation", "blend_type", "blend_in", "blend_out", "mute",
                 "use_animated_influence", "use_animated_time", "use_animated_time_cyclic")


def played_range(scene) -> tuple:
    """(first, last) integer frames Scene playback shows when Play starts now: the scene's range,
    from the current frame when that is before it (playback runs from there to the end, then
    wraps to the first frame or stops)."""
    return min(int(scene.frame_start), int(scene.frame_current)), int(scene.frame_end)


def candidates(scene) -> Dict[str, List[str]]:
    """{armature name: why it needs Blender's evaluation} for the scene's armatures that do."""
    out = {}
    for ob in scene.objects:
        if ob.type == "ARMATURE":
            why = bake_reasons(ob)
            if why:
                out[ob.name] = why
    return out


def _animated(scene) -> list:
    ids = []
    for ob in scene.objects:
        data = getattr(ob, "data", None)
        for idb in (ob, data, getattr(data, "shape_keys", None)):
            if idb is not None and getattr(idb, "animation_data", None) is not None and idb not in ids:
                ids.append(idb)
    return ids


def _curve_keys(fcurves) -> tuple:
    out = []
    for fc in fcurves:
        n = len(fc.keyframe_points)
        co = np.empty(n * 2, np.float32)
        if n:
            fc.keyframe_points.foreach_get("co", co)
        out.append((fc.data_path, fc.array_index, fc.mute, co.tobytes()))
    return tuple(out)


def _anim_signature(idb):
    """(keyed (data path, index) pairs, a signature of the ID's actions and NLA settings)."""
    ad = idb.animation_data
    id_type = "KEY" if idb.bl_rna.identifier == "Key" else idb.bl_rna.identifier.upper()
    uses = []
    if ad.action is not None:
        uses.append((ad.action, _actions.pick_slot(ad.action, id_type, ad, idb.name)))
    tracks = []
    for tr in ad.nla_tracks:
        strips = []
        for st in tr.strips:
            strips.append(tuple(getattr(st, f, None) for f in _STRIP_FIELDS)
                          + (getattr(st.action, "name_full", None), _curve_keys(getattr(st, "fcurves", ()))))
            if st.action is not None:
                uses.append((st.action, getattr(st, "action_slot", None)))
        tracks.append((tr.name, tr.mute, tr.is_solo, tuple(strips)))
    keyed = set()
    acts = []
    for act, slot in uses:
        fcs = _actions.slot_fcurves(act, slot) if slot is not None else []
        keyed |= {(fc.data_path, fc.array_index) for fc in fcs}
        # a quaternion keyed in part is written whole where the NLA blends it (every component,
        # normalised): its other components change with the frame too
        keyed |= {(fc.data_path, i) for fc in fcs if fc.data_path.endswith("rotation_quaternion") for i in range(4)}
        acts.append((act.name_full, getattr(slot, "handle", None), _curve_keys(fcs)))
    sig = (idb.name_full, getattr(ad.action, "name_full", None), ad.action_blend_type, ad.action_influence,
           ad.action_extrapolation, ad.use_nla, ad.use_tweak_mode, tuple(tracks), tuple(acts))
    return keyed, sig


def signature(scene, names) -> tuple:
    """What the Scene bakes of the armatures ``names`` depend on that does not change with the
    frame (the module docstring)."""
    import bpy

    keyed = {}
    anim = []
    for idb in _animated(scene):
        k, sig = _anim_signature(idb)
        keyed[idb.as_pointer()] = k
        anim.append(sig)
    rigs = []
    for n in sorted(names):
        arm = bpy.data.objects.get(n)
        if arm is None:
            rigs.append((n, None))
            continue
        rigs.append(rig_signature(arm, keyed=keyed.get(arm.as_pointer(), set()), static=True))
    return (int(scene.frame_start), int(scene.frame_end), _actions.scene_fps(scene), tuple(anim), tuple(rigs))


def bake_in_scene(armature, scene, frames: np.ndarray, progress: Optional[Callable[[int, int], None]] = None,
                  reasons=None, quiet=None) -> Bake:
    """Blender's evaluated pose of ``armature`` at ``frames`` of ``scene`` as the timeline shows
    it (nothing isolated), with the adaptive sub-frame samples.  The scene's frame and subframe
    are restored, also on error; the frame changes run in ``quiet()`` (``bake_record.record_in``).
    Raises BakeError naming the armature."""
    if armature.mode == "EDIT" or getattr(armature.data, "is_editmode", False):
        raise BakeError(f"cannot bake armature '{armature.name}' for Scene playback: it is in Edit Mode")
    t0 = time.perf_counter()
    names, parents = bone_parents(armature)
    lengths, size = _adaptive.rig_extent(armature)
    ev = Evaluator(armature, names, weighted_bbones(armature), False)
    label = f"baking the scene's timeline on '{armature.name}'"
    # every sample a knot: the timeline's motion changes at NLA strip edges and blends the bake does
    # not know, so no tangent reads across a sample (translation lerp, rotation slerp between them)
    rec = record_in(scene, ev, frames, parents, lengths, size, label, progress, quiet=quiet,
                    knots=lambda first: np.ones(len(first), bool))
    out, table, world, _pw, btable = tables(ev, rec, parents, label)
    ref = rec[1]
    return Bake(armature=armature.name, clip_name="Scene", action_name="", frames=out,
                frame_start=float(scene.frame_start), fps=_actions.scene_fps(scene), bone_names=names,
                parents=parents, locals=table, world=world, parent_world=None, object_channel=False,
                bbone_table=btable, bbone_slices=dict(ev.bbone_slices), bbone_rest=dict(ev.bbone_rest),
                reasons=list(reasons or ()), seconds=time.perf_counter() - t0, added=ref.added,
                checked=ref.checked, between_error=ref.residual, size=size, worst=ref.worst,
                budget=ref.budget, unmeasured=ref.unmeasured)


class SceneBakes:
    """The Scene bakes of one scene: {armature name: Bake} and the signature they were made for."""

    def __init__(self):
        self.bakes: Dict[str, Bake] = {}
        self.keys: Dict[str, KeyBake] = {}        # driven shape keys (``bake.scene_keys``)
        self.reasons: Dict[str, List[str]] = {}
        self.signature: Optional[tuple] = None
        self.range = (0, -1)          # the baked scene frames (first, last)
        self.bake_count = 0

    def stale(self, scene) -> Optional[str]:
        """None when the bakes are what the scene needs now, else why not (for the panel)."""
        need = candidates(scene)
        kneed = driven_keys(scene)
        if not need and not self.bakes and not kneed and not self.keys:
            return None
        if set(need) != set(self.bakes):         # a rig gained or lost what needs Blender
            missing = sorted(set(need) - set(self.bakes))
            return (f"armature {', '.join(repr(n) for n in missing)} needs a bake through Blender "
                    f"({'; '.join(need[missing[0]])})" if missing else "the baked armatures changed")
        if {k: tuple(b) for k, b in kneed.items()} != {k: tuple(kb.blocks) for k, kb in self.keys.items()}:
            missing = sorted(set(kneed) - set(self.keys))
            return (f"shape keys {', '.join(repr(n) for n in missing)} are driven: they need a bake through "
                    "Blender" if missing else "the driven shape keys changed")
        if signature(scene, need) + keys_signature(scene, kneed) != self.signature:
            return "the scene's animation or a baked rig changed since the bake"
        if played_range(scene)[0] < self.range[0]:
            return f"the shown frame {scene.frame_current} is before the baked frames"
        return None

    def ensure(self, scene, progress: Optional[Callable[[int, int], None]] = None, quiet=None) -> bool:
        """Bake every armature of ``scene`` that needs it over the scene's range (when the bakes
        are missing or stale; ``quiet``: see ``bake_in_scene``).  True when it baked.  Raises
        BakeError (the old bakes are kept)."""
        import bpy

        need = candidates(scene)
        kneed = driven_keys(scene)
        if self.stale(scene) is None:
            return False
        sig = signature(scene, need) + keys_signature(scene, kneed)
        lo, hi = played_range(scene)
        frames = np.arange(lo, hi + 1, dtype=np.float64)
        if not frames.size:
            raise BakeError(f"scene '{scene.name}': its frame range {scene.frame_start}..{scene.frame_end} is empty")
        total = len(need) * int(frames.size)
        bakes = {}
        for k, name in enumerate(sorted(need)):
            def step(done, _n, k=k):
                if progress is not None:
                    progress(min(k * int(frames.size) + done, total), total)
            bakes[name] = bake_in_scene(bpy.data.objects[name], scene, frames, step, need[name], quiet)
        try:
            keys = bake_keys(scene, kneed, frames, quiet) if kneed else {}
        except Exception as ex:
            raise BakeError(f"baking the driven shape keys of scene '{scene.name}' failed: "
                            f"{type(ex).__name__}: {ex}") from ex
        self.bakes, self.reasons, self.signature, self.range = bakes, need, sig, (lo, hi)
        self.keys = keys
        self.bake_count += 1
        return True

    def lines(self) -> List[str]:
        """What the panel says: each baked armature, why, and its bake's figures."""
        from .cache import bake_lines

        out = []
        for name, b in sorted(self.bakes.items()):
            out.append(f"'{name}' baked through Blender ({'; '.join(self.reasons.get(name, ()))}): "
                       + "; ".join(bake_lines(b)))
        out += [kb.line() for _k, kb in sorted(self.keys.items())]
        return out


def ensure_with_progress(window_manager, scene, bakes: SceneBakes, quiet=None) -> bool:
    """``bakes.ensure(scene)`` with the window manager's progress indicator (the Play operator)."""
    from .cache import with_progress

    return with_progress(window_manager, lambda p: bakes.ensure(scene, p, quiet))
