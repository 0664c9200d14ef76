"""The preview's saved settings: ``Scene.stylized_preview`` (``StylizedPreviewProps``: the clip,
loop, speed, time, fade, bake samples, In Place and Play on All Characters of the Animation panel).
Stored in the scene (saved, undoable); each value is a view over the scene's ``PreviewState``
(control.py), whose setters queue the transport commands the viewport session drains.  The
helpers the preview operators share (``state_for``, ``ensure_bake``, ``seek``) are here too."""
from __future__ import annotations

import bpy
from bpy.props import BoolProperty, EnumProperty, FloatProperty, IntProperty, PointerProperty

from ...blender.bake import cache as bake
from . import control as preview
from . import follow as preview_follow
from .state import (
    DEFAULT_FADE,
    armature_of,
    compatible_clips_for,
    pending_clip_name,
    select_armature,
    set_crowd,
)

# Blender does not keep dynamic EnumProperty item strings alive: keep them referenced here.
_CLIP_ITEMS: list = []
_NO_CLIP = ("NONE", "(no compatible clip)", "No action of this armature's bones was found", 0)


def target_armature(context, armature_name: str = ""):
    """The armature an operator/property acts on: ``armature_name`` or the active object's."""
    if armature_name:
        ob = bpy.data.objects.get(armature_name)
        return ob if ob is not None and ob.type == "ARMATURE" else None
    return armature_of(getattr(context, "active_object", None))


def state_for(context, armature_name: str = ""):
    """The scene's PreviewState, pointed at the target armature (switching clip when it changes)."""
    scene = context.scene
    arm = target_armature(context, armature_name)
    st = preview.get_state(scene, arm)
    preview_follow.follow(st)          # a renamed armature is the same one (never reset to time 0)
    if arm is not None and arm.name != st.armature:
        select_armature(st, arm, compatible_clips_for(arm.name))
    return st, arm


def ensure_bake(context, st, report=None, trust_clean: bool = False) -> bool:
    """Bake the clip the preview is about to play when its armature needs Blender's evaluation
    (constraints, IK, drivers, B-Bones: ``engine.blender.bake.cache``), with the window manager's
    progress; a current bake is reused.  False (reported, and kept in ``st.last_error``) when
    the bake failed.  ``trust_clean``: reuse a bake no depsgraph update marked dirty without
    re-reading the rig (the time slider, called while dragging)."""
    arm = bpy.data.objects.get(st.armature) if st.armature else None
    name = pending_clip_name(st)
    cache = preview.bake_cache()      # the add-on's: what its viewport sessions play
    if arm is None or arm.type != "ARMATURE" or not name or cache is None:
        return True
    if trust_clean and cache.lookup(arm.name, name)[0] is not None:
        return True
    try:
        made = bake.ensure_with_progress(cache, getattr(context, "window_manager", None), arm, name)
        if made is not None and made.unmeasured and report is not None:
            report({"WARNING"}, f"clip '{name}' on '{arm.name}': {bake.budget_line(made)}")
    except bake.BakeError as ex:
        msg = f"clip '{name}' could not be baked: {ex}"
        st.last_error = msg
        if report is not None:
            report({"ERROR"}, msg)
        return False
    if st.last_error and st.last_error.startswith(f"clip '{name}'"):
        st.last_error = None
    return True


def redraw():
    try:
        preview._tag_view3d()
    except Exception:
        pass


# ------------------------------------------------------------------------------------------------
# Scene.stylized_preview: a view over PreviewState (get/set, nothing stored)
# ------------------------------------------------------------------------------------------------

def _clip_list(context):
    arm = target_armature(context) if context is not None else None
    if arm is None:
        st = preview.peek_state(context.scene) if context is not None and context.scene else None
        arm = bpy.data.objects.get(st.armature) if st is not None and st.armature else None
    return compatible_clips_for(arm.name) if arm is not None else []


def _clip_items(self, context):
    clips = _clip_list(context)
    items = [(c.name, c.name, f"{c.duration_seconds:.2f} s, {c.channel_count} channels", i)
             for i, c in enumerate(clips)]
    _CLIP_ITEMS[:] = items or [_NO_CLIP]
    return _CLIP_ITEMS


def _get_clip(self):
    st = preview.peek_state(self.id_data)
    names = [c.name for c in _clip_list(bpy.context)]
    if st is not None and st.clip_name in names:
        return names.index(st.clip_name)
    return 0


def _set_clip(self, value):
    st, arm = state_for(bpy.context)
    clips = _clip_list(bpy.context)
    if not 0 <= value < len(clips):
        return
    clip = clips[value]
    st.clip_name = clip.name
    st.duration = float(clip.duration_seconds)
    st.time = 0.0
    st.active = True
    st.push("clip", clip.name)
    ensure_bake(bpy.context, st)      # a failure is in st.last_error; the session refuses the clip
    redraw()


def _get_loop(self):
    st = preview.peek_state(self.id_data)
    return True if st is None else bool(st.looping)


def _set_loop(self, value):
    st, _ = state_for(bpy.context)
    st.looping = bool(value)
    st.push("loop", bool(value))


def _get_speed(self):
    st = preview.peek_state(self.id_data)
    return 1.0 if st is None else float(st.speed)


def _set_speed(self, value):
    st, _ = state_for(bpy.context)
    st.speed = max(0.0, float(value))
    st.push("speed", st.speed)


def _get_fade(self):
    st = preview.peek_state(self.id_data)
    return DEFAULT_FADE if st is None else float(st.fade)


def _set_fade(self, value):
    st, _ = state_for(bpy.context)
    st.fade = max(0.0, float(value))
    st.push("fade", st.fade)


def _get_in_place(self):
    st = preview.peek_state(self.id_data)
    return False if st is None else bool(st.in_place)


def _set_in_place(self, value):
    st, _ = state_for(bpy.context)
    st.in_place = bool(value)
    st.push("in_place", st.in_place)
    redraw()


def _update_crowd(self, context):
    st, _ = state_for(context)
    set_crowd(st, self.crowd)
    redraw()


def _get_time(self):
    st = preview.peek_state(self.id_data)
    return 0.0 if st is None else float(st.time)


def _set_time(self, value):
    st, _ = state_for(bpy.context)
    ensure_bake(bpy.context, st, trust_clean=True)
    seek(st, value)
    redraw()


def seek(st, seconds: float) -> float:
    t = max(0.0, float(seconds))
    if st.duration > 0.0:
        t = min(t, st.duration)
    st.time = t
    st.active = True
    st.push("seek", t)
    return t


def _get_substeps(self):
    cache = preview.bake_cache()
    return int(cache.substeps) if cache is not None else 1


def _set_substeps(self, value):
    cache = preview.bake_cache()
    if cache is not None:
        cache.substeps = max(1, int(value))
    st = preview.peek_state(self.id_data)
    if st is not None and st.active:
        ensure_bake(bpy.context, st)      # re-bake what plays (the signature holds the substeps)
    redraw()


class StylizedPreviewProps(bpy.types.PropertyGroup):
    # stored in the scene (saved, undoable); the viewport state follows it (update callback,
    # engine.features.preview.control's undo/redo handler)
    crowd: BoolProperty(
        name="Play on All Characters", default=False, update=_update_crowd,
        description="Play the clip on every armature that shares this armature's skeleton (linked "
                    "duplicates), in one batched update")
    clip: EnumProperty(
        name="Clip", items=_clip_items, get=_get_clip, set=_set_clip,
        description="Action previewed on this armature (only actions whose channels match its bones)")
    loop: BoolProperty(
        name="Loop", get=_get_loop, set=_set_loop,
        description="Restart the clip at its end; off: the preview pauses on the last frame")
    speed: FloatProperty(
        name="Speed", min=0.0, soft_max=4.0, get=_get_speed, set=_set_speed, step=10,
        description="Playback speed multiplier of the preview (0 freezes the clock)")
    time: FloatProperty(
        name="Time", min=0.0, unit="TIME_ABSOLUTE", get=_get_time, set=_set_time, step=1,
        description="Preview time in seconds; dragging seeks, also while paused")
    fade: FloatProperty(
        name="Fade", min=0.0, soft_max=2.0, unit="TIME_ABSOLUTE", get=_get_fade, set=_set_fade, step=5,
        description="Crossfade duration in seconds: choosing another clip while the preview plays blends "
                    "from the current pose to the new clip over this time (0: switch at once)")
    bake_substeps: IntProperty(
        name="Bake Samples", min=1, soft_max=4, max=16, get=_get_substeps, set=_set_substeps,
        description="Samples per frame when a rig with constraints, IK, drivers or B-Bones is baked for the "
                    "preview: the preview is exact at the samples and interpolates linearly between them "
                    "(1: every frame; more: closer between frames, a longer bake)")
    in_place: BoolProperty(
        name="In Place", get=_get_in_place, set=_set_in_place,
        description="Root motion: keep the root's horizontal travel out of the preview (a walk cycle walks "
                    "on the spot); height and rotation still play.  Off: the preview equals the clip")


def register():
    bpy.utils.register_class(StylizedPreviewProps)
    bpy.types.Scene.stylized_preview = PointerProperty(
        type=StylizedPreviewProps, description="Viewport preview playback controls (Stylized sidebar tab)")


def unregister():
    if hasattr(bpy.types.Scene, "stylized_preview"):
        del bpy.types.Scene.stylized_preview
    bpy.utils.unregister_class(StylizedPreviewProps)
    _CLIP_ITEMS.clear()
