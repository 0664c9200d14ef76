"""The preview's state and its per-frame command drain (no registry, no handlers: ``control.py``
is the UI's entry point, ``driver.PreviewStates`` the per-scene owner it reaches through the
add-on).

The UI never touches the runtime: operators and panel properties write a ``PreviewState`` (one
per scene, kept by ``PreviewStates``, which the add-on's ``AddonState`` owns) and queue transport
commands; the viewport session drains them once per ``view_draw`` through ``apply_commands`` into
``SceneRuntime.player`` and writes the clock back.

Commands (FIFO ``state.commands``):
    ("clip", name) ("play",) ("pause",) ("stop",) ("seek", seconds) ("speed", s) ("loop", bool)
    ("fade", seconds): crossfade duration of the next clip change while playing (0: switch at once)
    ("in_place", bool): root motion "In place" (the root's horizontal travel kept out)
    ("crowd", bool): play the clip on every armature sharing the previewed armature's skeleton
        (linked duplicates: ``SceneRuntime.armatures_sharing_skeleton``), in one batched update;
        off: only the previewed armature plays (the others keep their bind pose).  The clip
        keeps its time.  ``state.crowd`` is the wish (the Scene property mirrors it),
        ``state.crowd_count`` the characters the player drives after the last drain.

``state.active`` True = the preview player drives the pose (the scene timeline does not move and
the depsgraph is not re-evaluated per frame); False = timeline mode.  ``play``/``stop``/``seek``/
``clip`` activate the preview; scrubbing or playing the timeline (frame_change_pre) hands control
back to the timeline (``PreviewStates.timeline_frame_changed``).
"""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field
from typing import Callable, Optional

DEFAULT_FADE = 0.25      # seconds of crossfade when another clip is chosen while playing


@dataclass
class PreviewState:
    armature: str = ""
    clip_name: Optional[str] = None
    active: bool = False
    playing: bool = False
    looping: bool = True
    speed: float = 1.0
    fade: float = DEFAULT_FADE
    in_place: bool = False
    crowd: bool = False
    crowd_count: int = 0
    fading: bool = False
    time: float = 0.0
    duration: float = 0.0
    commands: list = field(default_factory=list)
    last_palette_uploads: int = 0
    last_morph_uploads: int = 0
    last_error: Optional[str] = None
    timeline_frame: Optional[tuple] = None   # the scene frame last seen (frame_change_pre compares)
    rendering: bool = False                   # a render of this scene runs (render_init .. complete)
    armature_ref: tuple = ()                  # (name, session_uid) of the armature (preview_follow)
    action_ref: tuple = ()                    # (name, session_uid) of the clip's action (preview_follow)
    scene_mode: bool = False                  # Scene: every animated object plays (engine/features/preview/scene.py)
    scene_frame: float = 0.0                  # Scene: the scene time shown (frames, fractional)
    scene_notes: list = field(default_factory=list)   # Scene: what the playback does not evaluate
    scene_bakes: object = field(default=None, repr=False, compare=False)   # Scene: blender/bake/scene.py SceneBakes
    _crowd_cache: tuple = field(default=(None, None, None), repr=False, compare=False)
    _conflict_cache: tuple = field(default=(None, None, None), repr=False, compare=False)

    def push(self, *command) -> None:
        self.commands.append(tuple(command))


# ------------------------------------------------------------------------------------------------
# armature / clip helpers (bpy imported lazily)
# ------------------------------------------------------------------------------------------------

def armature_of(obj):
    """The armature of ``obj``: itself, the target of its first enabled Armature modifier, or an
    armature parent; None otherwise."""
    if obj is None:
        return None
    if obj.type == "ARMATURE":
        return obj
    for md in getattr(obj, "modifiers", ()):
        if md.type == "ARMATURE" and md.object is not None and md.show_viewport:
            return md.object
    p = obj.parent
    while p is not None:
        if p.type == "ARMATURE":
            return p
        p = p.parent
    return None


def _first_armature(scene):
    for ob in scene.objects:
        if ob.type == "ARMATURE":
            return ob
    return None


def compatible_clips_for(armature_name: str, depsgraph=None) -> list:
    """Clips (AnimationClipAsset) the importer offers for ``armature_name`` (CPU only, cached)."""
    if not armature_name:
        return []
    import bpy

    from ...blender.importer import compatible_clips, import_scene
    from ..vrm.driver import VrmDriver

    try:
        dg = depsgraph if depsgraph is not None else bpy.context.evaluated_depsgraph_get()
        asset = import_scene(dg, expression_check=VrmDriver.preview_problem)   # as the session imports
    except Exception:  # an import problem must not break a panel
        return []
    return compatible_clips(asset, armature_name)


def clips_by_name(scene_asset, armature_name: str) -> dict:
    """{clip name: clip} of the compatible clips of ``armature_name`` in ``scene_asset``."""
    from ...blender.importer import compatible_clips

    return {c.name: c for c in compatible_clips(scene_asset, armature_name)}


def default_clip_name(armature, clips=None) -> Optional[str]:
    """The armature's active action name when compatible (or when clips are unknown), else the
    first compatible clip."""
    if armature is None:
        return None
    ad = armature.animation_data
    active = ad.action.name if ad is not None and ad.action is not None else None
    if clips is None:
        if active is not None:     # no import needed (get_state may run inside view_draw)
            return active
        clips = compatible_clips_for(armature.name)
    names = [c.name for c in clips]
    if active is not None and active in names:
        return active
    return names[0] if names else None


def select_armature(state: PreviewState, armature, clips=None) -> None:
    """Point ``state`` at ``armature`` (an Object or None); preselects its default clip."""
    name = armature.name if armature is not None else ""
    if name == state.armature and (state.clip_name is not None or armature is None):
        return
    state.armature = name
    clip = default_clip_name(armature, clips)
    state.clip_name = clip
    state.time = 0.0
    state.playing = False
    state.duration = 0.0
    for c in clips if clips is not None else ():
        if c.name == clip:
            state.duration = float(c.duration_seconds)
    state.push("fade", state.fade)
    state.push("in_place", state.in_place)
    state.push("clip", clip)
    state.push("loop", state.looping)
    state.push("speed", state.speed)


def scene_frame(scene) -> tuple:
    """(frame, subframe) of ``scene``: what ``frame_change_pre`` compares to tell a frame change
    (scrubbing, timeline playback) from the same frame evaluated again (F12 evaluates and restores
    the current frame)."""
    return (int(scene.frame_current), round(float(scene.frame_subframe), 6))


def scene_crowd_flag(scene) -> bool:
    """The scene's stored "Play on All Characters" choice (``Scene.stylized_preview.crowd``;
    False where the property is not registered)."""
    return bool(getattr(getattr(scene, "stylized_preview", None), "crowd", False))


def set_crowd(state: PreviewState, flag: bool) -> bool:
    """Ask for crowd mode on or off (queues ``("crowd", flag)`` when it changes).  Returns
    whether it changed; turning it off clears a crowd refusal message."""
    flag = bool(flag)
    if not flag and state.last_error and state.last_error.startswith(CROWD_ERROR_PREFIX):
        state.last_error = None
    if state.crowd == flag:
        return False
    state.crowd = flag
    state.push("crowd", flag)
    return True


# ------------------------------------------------------------------------------------------------
# the per-frame command drain (shared by the session and the tests)
# ------------------------------------------------------------------------------------------------

def pending_clip_name(state: PreviewState) -> Optional[str]:
    """The clip the player will hold once the queued commands are drained."""
    for cmd in reversed(state.commands):
        if cmd and cmd[0] == "clip":
            return cmd[1] if len(cmd) > 1 else None
    return state.clip_name


CROWD_ERROR_PREFIX = "Play on All Characters"


def crowd_targets(state: PreviewState, runtime) -> Optional[list]:
    """The armatures a clip of ``state.armature`` plays on: None when ``state.crowd`` is off,
    else ``runtime.armatures_sharing_skeleton(state.armature)`` (the previewed armature first),
    computed once per runtime, scene asset and armature (set-up work, not per frame)."""
    if not state.crowd:
        return None
    ref, key, names = state._crowd_cache
    if ref is None or ref() is not runtime or key != (id(runtime.scene), state.armature):
        names = list(runtime.armatures_sharing_skeleton(state.armature))
        state._crowd_cache = (weakref.ref(runtime), (id(runtime.scene), state.armature), names)
    return list(names) or None


def crowd_bake_conflict(state: PreviewState, runtime, reasons_of: Callable, generation=None) -> Optional[str]:
    """Why crowd mode cannot play (a message), or None: a crowd writes the clip's sampled
    tracks to every target, while a rig that needs Blender's evaluation (``reasons_of(name)``:
    constraints, IK, drivers, B-Bones; ``engine.blender.bake.cache``) is previewed from a bake of its
    own armature only, so no character of such a crowd would get its exact pose.
    ``generation``: a counter the source of ``reasons_of`` bumps whenever its reasons may have
    changed (``BakeCache.reasons_generation``); the answer is kept for the same characters until
    it moves (None: asked every time)."""
    names = crowd_targets(state, runtime)
    if not names:
        return None
    kept = state._crowd_cache[2]                 # the cached character list (same object while valid)
    hit = state._conflict_cache
    if generation is not None and hit[0] is kept and hit[1] == generation:
        return hit[2]
    out = None
    for name in names:          # cached reasons: one dict lookup per character
        why = reasons_of(name)
        if why:
            out = (f"{CROWD_ERROR_PREFIX}: '{name}' needs a baked preview ({'; '.join(why)}); a bake "
                   f"plays on its own armature only. Turn Play on All Characters off to preview "
                   f"'{state.armature}' alone")
            break
    state._conflict_cache = (kept, generation, out)
    return out


def apply_commands(state: PreviewState, runtime, clips_by_name: dict, delta_time: float,
                   before_update: Optional[Callable] = None, after_sample: Optional[Callable] = None,
                   fills_morphs: bool = False) -> None:
    """Drain ``state.commands`` into ``runtime.player`` (set_clip through ``runtime.set_clip``),
    then, when the preview drives the pose (``state.active``), run ``runtime.update(delta)`` with
    ``delta`` = ``delta_time`` while playing (0 otherwise: nothing is resampled or uploaded unless
    a seek/stop/clip change asks for it) and write the clock and upload counts back.
    ``before_update(player, delta)``, when given, runs after the drain and before the update
    (the session feeds a bake's B-Bone segments for the time about to be sampled).
    ``after_sample()``, when given, runs inside the update after the player sampled and before
    the uploads (the session pushes the morph weights there: VRM expressions from the player's
    channels, the same frame); ``fills_morphs``: it pushes every morph weight from the runtime's
    mixer (``SceneRuntime.update(fills_morphs=...)``)."""
    player = runtime.player
    while state.commands:
        cmd = state.commands.pop(0)
        op = cmd[0]
        if op == "clip":
            name = cmd[1] if len(cmd) > 1 else None
            clip = clips_by_name.get(name) if name is not None else None
            if not runtime.set_clip(clip, targets=crowd_targets(state, runtime) if clip is not None else None):
                state.last_error = runtime.last_error
            state.clip_name = clip.name if clip is not None else None
            if name is not None and clip is None:
                state.last_error = f"clip '{name}' is not compatible with '{state.armature}'"
        elif op == "crowd":
            # the same clip on the new set of characters, at the same time
            t = float(player.current_time)
            clip = player.clip
            targets = crowd_targets(state, runtime) if bool(cmd[1]) and clip is not None else None
            if not runtime.set_clip(clip, targets=targets):
                state.last_error = runtime.last_error
            elif clip is not None:
                player.seek(t)
        elif op == "play":
            player.play()
            state.active = True
        elif op == "pause":
            player.pause()
        elif op == "stop":
            player.stop()
            state.active = True
        elif op == "seek":
            if player.seek(cmd[1]):
                state.active = True
        elif op == "speed":
            player.set_playback_speed(cmd[1])
        elif op == "loop":
            player.set_looping(bool(cmd[1]))
        elif op == "fade":
            if not player.set_crossfade(cmd[1]):
                state.last_error = f"crossfade duration {cmd[1]!r} must be a finite number >= 0"
        elif op == "in_place":
            player.set_in_place(bool(cmd[1]))
        else:
            state.last_error = f"unknown preview command {cmd!r}"
    if state.active:
        dt = float(delta_time) if player.is_playing else 0.0
        if not math.isfinite(dt) or dt < 0.0:
            dt = 0.0
        if before_update is not None:
            before_update(player, dt)
        ok = runtime.update(dt) if after_sample is None else runtime.update(dt, after_sample=after_sample,
                                                                            fills_morphs=fills_morphs)
        if not ok:
            state.last_error = runtime.last_error or player.last_error
    state.time = float(player.current_time)
    state.duration = float(player.duration)
    state.playing = bool(player.is_playing)
    state.looping = bool(player.is_looping)
    state.speed = float(player.playback_speed)
    state.fading = bool(player.is_fading)
    state.crowd_count = len(runtime.crowd_targets) if runtime.crowd_targets else int(player.clip is not None)
    st = runtime.stats
    state.last_palette_uploads = int(st.palette_uploads) if state.active else 0
    state.last_morph_uploads = int(st.morph_uploads) if state.active else 0


def scene_key(scene):
    """What a scene's preview state is kept under: its ``session_uid`` (the same while Blender
    runs, whatever the scene is renamed to; a file load starts anew: ``AddonState.forget_file``),
    its name where there is none."""
    uid = getattr(scene, "session_uid", None)
    return ("uid", int(uid)) if uid is not None else ("name", getattr(scene, "name", None))
