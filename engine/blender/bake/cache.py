"""Bake constraint / IK / driver rigs through Blender's own evaluation for the preview player
(issue 11 item 3).

The preview player evaluates keyed TRS channels itself; only Blender can evaluate constraints,
IK, drivers and B-Bone curves (a Rigify rig keys its control bones and drives the deform bones
through all of those).  For such an armature the selected clip is baked once, the way the glTF
exporter samples constraint-driven animation: the action is assigned to the armature alone (every
other action unassigned, every NLA track muted), the scene is set to each frame of
``actions.sample_frames(action)`` and Blender's evaluated armature-space pose of every bone (and
the armature's world matrix, and the B-Bone segment matrices of deforming B-Bones) is recorded.
The scene's frame, subframe, actions, slots, NLA mute flags and the pose values the bake wrote are
restored exactly afterwards, also on error.  ``baked_clip`` turns a bake into the LINEAR
AnimationClipAsset the player plays (local TRS of every bone per frame, through
``ScenePose.basis_from_worlds``, so the bones' inheritance flags are honoured).

``BakeCache`` (one per owner: the add-on's ``AddonState.bakes`` for the operators and the viewport
sessions it makes; a session made alone has its own, ``StylizedSession.bakes``) keys bakes by (armature, clip) and by a signature of
the rig and the action (rest matrices, pose values the action does not key, custom properties,
constraint settings, drivers, constraint/driver target transforms, the armature's world matrix,
the action's keys).  Lookups are free while nothing was marked dirty (``StylizedSession.sync``
marks it on armature/object/action updates); the next lookup then re-checks the signature once.

The code lives in sibling modules (``reasons``, ``isolate``, ``signature``, ``record``,
``adaptive``, ``tables``, ``baked_pose``); this module keeps the cache.  bpy is used here (an importer-layer module); ``baked_clip``/``BakedPose`` are numpy only.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

from ..importer import actions as _actions
from .reasons import BakeError, bake_reasons
from .record import Bake, bake_action
from .signature import bake_signature

# ------------------------------------------------------------------------------------------------
# the cache
# ------------------------------------------------------------------------------------------------

class BakeCache:
    """Bakes by (armature name, clip name), re-baked when the action or the rig changes.

    ``mark_dirty()`` (StylizedSession.sync on armature/object/action updates) makes the next
    ``lookup`` of each entry re-check its signature once; until then lookups are a dict access
    (the per-frame path).  ``ensure`` always re-checks and bakes when needed.  ``substeps``:
    samples per frame interval (1: the action's frames; part of the signature).  ``quiet``: a
    context manager factory the bakes run in (the owner's: its frame changes are not the user
    scrubbing the timeline; ``preview.driver.PreviewStates.handback_suspended``)."""

    def __init__(self, substeps: int = 1, quiet: Optional[Callable] = None):
        self.substeps = max(1, int(substeps))
        self.quiet = quiet
        self.entries: Dict[Tuple[str, str], Bake] = {}
        self._checked: Dict[Tuple[str, str], bool] = {}
        self._reasons: Dict[str, List[str]] = {}
        self.bake_count = 0
        self.hits = 0
        self._version = 0
        self.reasons_generation = 0   # bumped whenever the cached reasons are dropped

    def clear(self) -> None:
        """Forget every bake (and the counters)."""
        self.entries.clear()
        self._checked.clear()
        self._reasons.clear()
        self.reasons_generation += 1
        self.bake_count = 0
        self.hits = 0

    def mark_dirty(self) -> None:
        self._checked = dict.fromkeys(self._checked, False)
        self._reasons.clear()
        self.reasons_generation += 1

    def reasons(self, armature_name: str) -> List[str]:
        """``bake_reasons`` of the armature (cached until ``mark_dirty``)."""
        hit = self._reasons.get(armature_name)
        if hit is None:
            import bpy

            hit = bake_reasons(bpy.data.objects.get(armature_name))
            self._reasons[armature_name] = hit
        return hit

    @staticmethod
    def _action_for(armature, clip_name: str, action_name: Optional[str] = None):
        import bpy

        action = bpy.data.actions.get(action_name or clip_name)
        if action is None:
            raise BakeError(f"clip '{clip_name}' of '{armature.name}': action "
                            f"'{action_name or clip_name}' does not exist")
        slot = _actions.pick_slot(action, "OBJECT", armature.animation_data, armature.name)
        return action, slot

    def _current(self, key, armature, action, slot) -> Optional[Bake]:
        e = self.entries.get(key)
        if e is None:
            return None
        import bpy

        fps = _actions.scene_fps(bpy.context.scene)
        if e.signature != bake_signature(armature, action, slot, fps, self.substeps):
            return None
        self._checked[key] = True
        return e

    def lookup(self, armature_name: str, clip_name: str) -> Tuple[Optional[Bake], str]:
        """(bake, "") when a current bake exists, else (None, why).  Free unless marked dirty."""
        key = (armature_name, clip_name)
        e = self.entries.get(key)
        if e is None:
            return None, "not baked yet (press Play)"
        if self._checked.get(key):
            return e, ""
        import bpy

        arm = bpy.data.objects.get(armature_name)
        try:
            if arm is None:
                return None, f"armature '{armature_name}' is gone"
            action, slot = self._action_for(arm, clip_name, e.action_name)
            if self._current(key, arm, action, slot) is None:
                return None, "the rig or the action changed since the bake (press Play to re-bake)"
        except (BakeError, ReferenceError) as ex:
            return None, str(ex)
        return e, ""

    def ensure(self, armature, clip_name: str, action_name: Optional[str] = None,
               progress: Optional[Callable[[int, int], None]] = None) -> Optional[Bake]:
        """The current bake of ``clip_name`` on ``armature`` (baked now when missing or stale);
        None when the armature needs no bake.  Raises BakeError."""
        reasons = bake_reasons(armature)
        self._reasons[armature.name] = reasons
        if not reasons:
            return None
        key = (armature.name, clip_name)
        action, slot = self._action_for(armature, clip_name, action_name)
        hit = self._current(key, armature, action, slot)
        if hit is not None:
            self.hits += 1
            return hit
        b = bake_action(armature, action, slot, clip_name=clip_name, progress=progress, reasons=reasons,
                        substeps=self.substeps, quiet=self.quiet)
        self._version += 1
        b.version = self._version
        self.entries[key] = b
        self._checked[key] = True
        self.bake_count += 1
        return b


def describe(cache: BakeCache, armature_name: str, clip_name: Optional[str]) -> List[str]:
    """Lines for the Animation panel: why the armature's clips are baked, and the bake of
    ``clip_name`` in ``cache`` (frames, time) or that it still needs one.  Empty when no bake is
    needed."""
    reasons = cache.reasons(armature_name) if armature_name else []
    if not reasons:
        return []
    b, why = cache.lookup(armature_name, clip_name) if clip_name else (None, "no clip")
    if b is None:
        return [f"Needs a bake through Blender: {why}"] + [f"  {r}" for r in reasons]
    return [f"Baked through Blender: {l}" if k == 0 else f"  {l}" for k, l in enumerate(bake_lines(b))] \
        + [f"  {r}" for r in reasons]


def bake_lines(b: Bake) -> List[str]:
    """What a bake holds: its samples (the sub-frame ones the adaptive bake added), its time, the
    largest error between samples it measured against Blender and its memory."""
    per = b.seconds / max(b.frame_count - b.added, 1) * 1e3
    what = f"{b.frame_count} samples ({b.added} sub-frame)"
    if b.substeps > 1:
        what += f", {b.substeps} per frame"
    out = [f"{what} in {b.seconds:.2f} s ({per:.1f} ms a frame)",
           f"largest error between samples {b.between_error:.1e} of {b.worst or 'the rig' + chr(39) + 's size'} "
           f"({b.checked} mid-points checked), {b.nbytes / 2**20:.1f} MB"]
    if b.unmeasured:
        out.append(budget_line(b))
    return out


def budget_line(b: Bake) -> str:
    """The line naming the adaptive bake's sample budget when a bake spent it."""
    from .adaptive import BUDGET

    return (f"sample budget reached: {b.budget} mid-point evaluations ({BUDGET:g} per frame, "
            f"bake.adaptive.BUDGET); {b.unmeasured} mid-point(s) left at their estimated error")


def with_progress(window_manager, run):
    """``run(progress)`` with the window manager's progress indicator (operators): ``progress(done,
    total)`` begins it on its first call and moves it; it ends however ``run`` ends."""
    begun = []

    def progress(done, total):
        if window_manager is None:
            return
        if not begun:
            window_manager.progress_begin(0, total)
            begun.append(True)
        window_manager.progress_update(done)

    try:
        return run(progress)
    finally:
        if begun:
            window_manager.progress_end()


def ensure_with_progress(cache: BakeCache, window_manager, armature, clip_name: str,
                         action_name: Optional[str] = None):
    """``cache.ensure`` with the window manager's progress indicator (operators)."""
    return with_progress(window_manager, lambda p: cache.ensure(armature, clip_name, action_name, progress=p))
