"""Keep a ``preview.PreviewState`` true when the user renames or deletes what it plays (issue 27,
item 9).

The state names its armature and its clip (a clip is named after its action).  Blender keeps an
ID's ``session_uid`` through a rename, so the state remembers the uids of the armature and of
the action it plays and follows a rename: the same clip plays on, at the same time, under the
new name, and the panel shows the new names.  When the armature or the action was deleted, the
preview stops with a message naming it (``state.last_error``, shown by the Animation panel) and
the viewport shows Blender's pose (timeline mode); a deleted action's armature gets its default
clip (paused, at 0).

``follow(state)`` is cheap (two name look-ups; a scan of ``bpy.data`` only after a rename or a
deletion): the session's preview driver calls it after each depsgraph sync
(``PreviewDriver.follow``), the Animation panel when it draws and the preview operators before
they act.  ``restore_player`` puts a state's clip back on a
player that lost it (a new runtime after a re-import).
"""
from __future__ import annotations

from typing import Optional

from . import state as preview


def _track(collection, ref: tuple, name: str, ok=None):
    """(ref, new name or None, deleted) for the ID ``name`` of ``collection`` that ``ref``
    ((name, session_uid), or () before the first look-up) remembers.  A name other than the
    remembered one is a new choice: remembered, never taken for a rename."""
    idb = collection.get(name)
    fits = idb is not None and (ok is None or ok(idb))
    if not ref or ref[0] != name:
        return ((name, idb.session_uid) if fits and idb is not None else ()), None, False
    if fits and idb is not None and idb.session_uid == ref[1]:
        return ref, None, False
    for other in collection:           # renamed or deleted: only then a scan
        if other.session_uid == ref[1] and (ok is None or ok(other)):
            return (other.name, ref[1]), other.name, False
    return (), None, True


def _rename_queued(state, old: str, new: str) -> None:
    state.commands[:] = [("clip", new) if c[:1] == ("clip",) and c[1:2] == (old,) else c for c in state.commands]


def _stop(state, message: str) -> None:
    state.active = False
    state.playing = False
    state.last_error = message
    state.push("pause")


def follow(state) -> bool:
    """Follow a rename of the previewed armature or of the clip's action; stop with a message
    after a deletion.  Returns whether the state changed."""
    import bpy

    changed = False
    if state.armature:
        ref, new, gone = _track(bpy.data.objects, state.armature_ref, state.armature,
                                lambda ob: ob.type == "ARMATURE")
        state.armature_ref = ref
        if new is not None:
            state.armature = new
            changed = True
        elif gone:
            _stop(state, f"Armature '{state.armature}' was deleted: the preview stopped")
            state.armature = ""
            state.clip_name = None
            state.action_ref = ()
            state.duration = 0.0
            state.time = 0.0
            return True
    name = preview.pending_clip_name(state)
    if name:
        ref, new, gone = _track(bpy.data.actions, state.action_ref, name)
        state.action_ref = ref
        if new is not None:
            _rename_queued(state, name, new)
            if state.clip_name == name:
                state.clip_name = new
            changed = True
        elif gone:
            _clip_deleted(state, name)
            changed = True
    return changed


def _clip_deleted(state, name: str) -> None:
    import bpy

    _stop(state, f"Action '{name}' was deleted: the preview stopped")
    message = state.last_error
    arm = bpy.data.objects.get(state.armature) if state.armature else None
    state.commands[:] = [c for c in state.commands if c[:1] != ("clip",)]
    state.clip_name = None
    state.action_ref = ()
    state.time = 0.0
    state.duration = 0.0
    if arm is not None:
        clips = preview.compatible_clips_for(arm.name)
        state.armature = ""          # select_armature picks the default clip again
        preview.select_armature(state, arm, clips)
    state.active = False
    state.last_error = message


def restore_player(state, runtime, clip) -> bool:
    """Put ``clip`` (the state's clip) back on ``runtime.player``, which lost it (a new runtime
    after a re-import, or the clip imported anew under a new name): the state's time, transport
    and settings, as if the preview had never stopped.  Returns whether the clip was set."""
    player = runtime.player
    player.set_crossfade(0.0)           # no fade from the bind pose of a new runtime
    if not runtime.set_clip(clip, targets=preview.crowd_targets(state, runtime)):
        state.last_error = runtime.last_error
        return False
    player.set_crossfade(state.fade)
    player.set_looping(state.looping)
    player.set_playback_speed(state.speed)
    player.set_in_place(state.in_place)
    player.seek(state.time)
    if state.playing:
        player.play()
    return True


def lost_clip(state, runtime, clips: dict, new_runtime: bool) -> Optional[object]:
    """The clip of ``clips`` the player should hold but does not (None: nothing to restore):
    no clip command is queued and the player holds no clip although the runtime is new to this
    state (a re-import), or holds the clip under its name before a rename."""
    name = state.clip_name
    if not name or any(c[:1] == ("clip",) for c in state.commands):
        return None
    held = runtime.player.clip
    if held is None:
        return clips.get(name) if new_runtime else None
    return clips.get(name) if held.name != name else None
