"""The viewport preview's owners (docs/architecture.md): ``PreviewDriver`` owns what the preview
keeps between the frames of one ``StylizedSession`` and is the session's one entry into the
preview; ``PreviewStates`` holds the preview states of every scene for the add-on's
``AddonState``.

The session makes one driver (``session.preview``) and calls ``update(depsgraph, state, dt)`` as
its frame's update step; ``reset()`` when it is freed.  The driver reads the session's shared
frame data (``runtime``, ``reader``, ``scene_asset``, ``bakes``) and asks it through its public
methods (``update_timeline``, ``reimport``, ``import_clips``); it never writes a session field.

Per frame, with a ``PreviewState``:

* a renamed armature or action is followed, a deleted one stops (``follow``);
* Scene mode: every animated object of the scene plays (``scene.update``);
* clip mode: the clip's bake when the armature needs one (``bakes.baked_clips``), the pose the
  rest of the scene holds (``hold``), the commands drained into the player and the runtime's
  update (``state.apply_commands``), the shape keys through the morph mixer (``morphs``);
* otherwise, or when the clip cannot play exactly: Blender's pose (timeline mode).
"""
from __future__ import annotations

import contextlib
from typing import Callable, Dict, Optional

from . import bakes as _bakes
from . import follow as _follow
from . import hold as _hold
from . import morphs as _morphs
from . import scene as _scene
from . import state as _preview


class PreviewDriver:
    """The preview's state on one session (see the module docstring)."""

    def __init__(self, session):
        self.session = session
        self.reset()

    def reset(self) -> None:
        """Forget every frame's state (the session was freed: a new runtime starts anew)."""
        self.hold: Optional[_hold.PreviewHold] = None             # the pose the rest of the scene holds
        self.scene_playback: Optional[_scene.ScenePlayback] = None  # the Scene preview's playback
        self.followed = None          # follow: (reader, its sync token, state) last followed
        self.renamed = None           # follow: (armature, clip) re-imported after a rename
        self.played_runtime = None    # follow: the runtime the preview last played on
        self.baked: Optional[tuple] = None   # bakes.baked_clips: (scene asset, {(arm, clip): ...}, runtime)
        self.morph_source: Optional[_morphs.PreviewMorphs] = None  # the preview's morph source

    # ------------------------------------------------------------------------------------------
    def update(self, depsgraph, state, dt: float) -> bool:
        """The session's frame update (``StylizedSession.update_frame``; its runtime exists):
        the preview of ``state`` (None: no preview) when it drives the pose, else the timeline."""
        s = self.session
        if state is not None:
            self.follow(state)          # a renamed armature or action is followed, a deleted one stops
        if state is None or not state.active:
            return self.timeline(depsgraph)
        # Play / resume starts from the shown time: the clock's time since the last redraw (an
        # idle viewport: seconds) is neither clip nor scene time
        playing = s.runtime.player.is_playing and not state.scene_mode
        if not playing and ("play",) in state.commands:
            dt = 0.0
        if state.scene_mode:
            return _scene.update(self, depsgraph, state, dt)   # Scene: every animated object
        return self._play_clip(depsgraph, state, dt)

    def timeline(self, depsgraph) -> bool:
        """Timeline mode: Blender's pose (the next preview frame starts anew)."""
        self.hold = None
        return self.session.update_timeline(depsgraph)

    def follow(self, state) -> None:
        """``follow.follow`` once per depsgraph sync of the session (a rename or a deletion always
        comes with one: ``TimelineReader.sync_token``), per runtime and per state, not on every
        frame of an unchanged scene."""
        reader = self.session.reader
        key = (id(reader), getattr(reader, "sync_token", None), id(state))
        if self.followed != key:
            self.followed = key
            _follow.follow(state)

    def morphs(self) -> _morphs.PreviewMorphs:
        """The preview's morph source on the session's current runtime (a new runtime starts a
        new one)."""
        m = self.morph_source
        if m is None or m.runtime is not self.session.runtime:
            m = self.morph_source = _morphs.PreviewMorphs(self.session.runtime)
        return m

    # ------------------------------------------------------------------------------------------
    def _play_clip(self, depsgraph, state, dt: float) -> bool:
        s = self.session
        if not s.import_clips(depsgraph):
            # the first clip preview of a viewport session imports its clips now (the meshes
            # come from the asset cache), so a Rendered viewport that never plays a clip never
            # reads an action
            return False
        clips = {c.name: c for c in s.scene_asset.animations if c.target_object == state.armature}
        self._reimport_renamed(state, clips)
        before = None
        if clips:
            baked = _bakes.baked_clips(self, state, clips)
            if baked is None:
                # the clip needs Blender's evaluation and has no current bake: never play a
                # wrong pose; timeline mode until the bake is made (Play / clip choice)
                state.active = False
                state.playing = False
                return self.timeline(depsgraph)
            clips, before = baked
            if state.crowd:
                why = _preview.crowd_bake_conflict(state, s.runtime, s.bakes.reasons, s.bakes.reasons_generation)
                if why is not None:
                    # a bake drives its own armature's bones only: never play a wrong pose
                    # on the other characters; timeline mode until crowd mode is turned off
                    state.last_error = why
                    state.active = False
                    state.playing = False
                    return self.timeline(depsgraph)
        runtime = s.runtime
        self._resume(state, clips)      # a re-import or a rename: the clip plays on
        # what the clip does not play holds the pose shown when the preview started
        # a baked clip's matrices are a source the player samples with its clip (no write before or after it)
        runtime.player.set_matrix_source(before.clip if before is not None else None,
                                         before.write if before is not None else None)
        # after the player sampled, before the uploads: the shape keys through the morph mixer
        # (the clip's channels, the panel's values filling the rest: morphs.py)
        before_update, after_sample = _hold.hooks(self, depsgraph, state,
                                                   lambda: self.morphs().push(s.reader))
        if s.reader is not None and runtime.guard is not None:
            # what Blender's own matrices cannot draw (NaN, 1e20) is skipped here too
            runtime.guard.hold_undrawable(s.reader.undrawable_objects(depsgraph))
        # (that push fills every morph from the mixer: the runtime does not push the clip's keys first)
        _preview.apply_commands(state, runtime, clips, dt, before_update,
                                after_sample=after_sample if s.reader is not None else None,
                                fills_morphs=True)
        return True

    def _reimport_renamed(self, state, clips: dict) -> None:
        """A clip renamed (``follow``) that the session's import still knows by its old name: the
        player plays on meanwhile and the next frame imports anew (asked once per name)."""
        name = state.clip_name
        if name and name not in clips and self.renamed != (state.armature, name):
            self.renamed = (state.armature, name)
            self.session.reimport(f"the preview's clip '{name}' of '{state.armature}' was renamed")

    def _resume(self, state, clips: dict) -> None:
        """A player that lost the state's clip (a new runtime after a re-import, or the clip
        imported anew under a new name) gets it back at the state's time and transport
        (``follow.restore_player``)."""
        runtime = self.session.runtime
        lost = _follow.lost_clip(state, runtime, clips, self.played_runtime is not runtime)
        if lost is not None:
            _follow.restore_player(state, runtime, lost)
        self.played_runtime = runtime


class PreviewStates:
    """The preview states of every scene (by ``state.scene_key``: a renamed scene keeps its state)
    and the timeline hand-back rule: owned by the add-on's ``AddonState`` (made by
    ``register()``, held by the registered engine class, freed with it), reached by the UI
    through ``control.py``.  Nothing here is process-wide."""

    def __init__(self):
        self.states: Dict[tuple, _preview.PreviewState] = {}
        self.suspended = 0        # >0 while frame changes are a bake's / a check's, not the user's
        self.sidebar_redrawn_at = 0.0   # time.monotonic() when the redraw timer last tagged the sidebars

    def get(self, scene, context_object=None) -> _preview.PreviewState:
        """The PreviewState of ``scene`` (created on demand: armature of ``context_object`` or the
        first armature of the scene, its active action or first compatible clip, loop on, paused)."""
        key = _preview.scene_key(scene)
        st = self.states.get(key)
        if st is None:
            st = self.states[key] = _preview.PreviewState()
            st.crowd = _preview.scene_crowd_flag(scene)
            st.timeline_frame = _preview.scene_frame(scene)
            arm = _preview.armature_of(context_object) or _preview._first_armature(scene)
            if arm is not None:
                _preview.select_armature(st, arm)
        return st

    def peek(self, scene) -> Optional[_preview.PreviewState]:
        return self.states.get(_preview.scene_key(scene))

    def clear(self) -> None:
        self.states.clear()

    def any_playing(self) -> bool:
        return any(s.active and s.playing for s in self.states.values())

    @contextlib.contextmanager
    def handback_suspended(self):
        """While active, frame changes do not hand the preview back to the timeline (a bake sets
        the scene's frame many times and restores it; that is not the user scrubbing)."""
        self.suspended += 1
        try:
            yield
        finally:
            self.suspended -= 1

    def hand_back(self, scene) -> bool:
        """Timeline mode for ``scene``: the preview stops driving the pose. Returns whether it did
        (never while ``handback_suspended``)."""
        if self.suspended:
            return False
        st = self.states.get(_preview.scene_key(scene))
        if st is None or not st.active:
            return False
        st.active = False
        if st.playing:
            st.playing = False
            st.push("pause")
        return True

    def rendering(self, scene, flag: bool) -> None:
        """A render of ``scene`` starts (render_init) or ends (render_complete / render_cancel).
        Meanwhile its frame changes are the render's (Ctrl+F12 steps through the frames and
        restores the current one at the end), not the user's: the preview keeps playing."""
        st = self.states.get(_preview.scene_key(scene)) if scene is not None else None
        if st is not None:
            st.rendering = bool(flag)

    def timeline_frame_changed(self, scene, hand_back: Optional[Callable] = None) -> bool:
        """``frame_change_pre``: hand the preview back to the timeline when the user changed the
        frame (scrubbing, timeline playback).  The same frame evaluated again (F12 sets the
        current frame and restores it) and frames set by a render or a bake are not a change.
        ``hand_back(scene)``: the hand-back step (default ``self.hand_back``).  Returns whether
        control was handed back."""
        st = self.states.get(_preview.scene_key(scene))
        if st is None or st.rendering or self.suspended:
            return False
        frame = _preview.scene_frame(scene)
        if frame == st.timeline_frame:
            return False
        st.timeline_frame = frame
        return (hand_back or self.hand_back)(scene)

    def sync_crowd(self, scenes) -> None:
        """Undo/redo restored the scenes' stored "Play on All Characters" values (their update
        callbacks do not run): queue the matching ``crowd`` command for every state that differs.
        ``scenes``: bpy.data.scenes."""
        for scene in scenes:
            st = self.states.get(_preview.scene_key(scene))
            if st is not None:
                _preview.set_crowd(st, _preview.scene_crowd_flag(scene))
