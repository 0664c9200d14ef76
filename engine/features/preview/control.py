"""The viewport preview's entry points for the UI (operators, panels, Blender's handlers).

The state itself and its per-frame drain are in ``state.py``; the
per-scene states belong to the add-on's ``AddonState`` (``addon_state.py``: made by
``register()``, held by the registered engine class), which the functions below reach through
``render_engine.addon_state()``.  Without the add-on registered, ``get_state`` makes a state that
nothing keeps.  While a state plays, a ``bpy.app.timers`` timer tags every 3D viewport for redraw
at display rate and stops itself when nothing plays.
"""
from __future__ import annotations

import contextlib
import time
from typing import Dict, List, Optional

from .driver import PreviewStates
from .state import (
    PreviewState,
)

REDRAW_INTERVAL = 1.0 / 60.0
# The sidebar (Time readout, Stats) follows the preview once a second. Timeline playback does not
# redraw the 3D view's sidebar at all (Blender redraws only the main region of 3D views while it
# plays); the preview redrew every region of the area on every tick, and a software-GL window spent
# most of its frame on the sidebar. make bench-gui (OpenGL/llvmpipe, 1600x900, sidebar open, at a
# load of ~13 on 2 cores): preview Play 0.34 redraws/s against 0.96 for timeline playback; 0.98
# with the sidebar closed; 0.54 with the sidebar at 4 Hz; at 1 Hz (now) 0.92 against 1.24 (1.53
# against 1.67 with the sidebar closed). Slow frames under that load mean few frames a second:
# unloaded, the issue counted 3.7 against 7.2.
UI_REDRAW_INTERVAL = 1.0


def _addon():
    from ...blender.render_engine import addon_state

    return addon_state()


def _states() -> PreviewStates:
    """The add-on's preview states (a throwaway set when the add-on is not registered)."""
    a = _addon()
    return a.previews if a is not None else PreviewStates()


def bake_cache():
    """The add-on's preview bakes (``engine/blender/bake/cache.py: BakeCache``: what the operators bake and the
    viewport sessions play), or None when the add-on is not registered."""
    a = _addon()
    return a.bakes if a is not None else None


def get_state(scene, context_object=None) -> PreviewState:
    """The PreviewState of ``scene`` (created on demand: armature of ``context_object`` or the
    first armature of the scene, its active action or first compatible clip, loop on, paused)."""
    return _states().get(scene, context_object)


def peek_state(scene) -> Optional[PreviewState]:
    return _states().peek(scene)


def all_states() -> Dict[tuple, PreviewState]:
    return dict(_states().states)


def clear_states() -> None:
    _states().clear()


def any_playing() -> bool:
    return _states().any_playing()


# ------------------------------------------------------------------------------------------------
# redraw timer and handlers
# ------------------------------------------------------------------------------------------------

def _tag_view3d(sidebar: bool = True) -> int:
    """Tag the main region of every 3D view for redraw (and its sidebar when ``sidebar``);
    returns how many 3D views were tagged."""
    import bpy

    n = 0
    wm = bpy.context.window_manager
    for win in (wm.windows if wm is not None else ()):
        for area in win.screen.areas:
            if area.type == "VIEW_3D":
                for region in area.regions:
                    if region.type == "WINDOW" or (sidebar and region.type == "UI"):
                        region.tag_redraw()
                n += 1
    return n


def _redraw_tick():
    """Timer body: redraw the 3D viewports while a preview plays (their sidebars at
    UI_REDRAW_INTERVAL); stop otherwise."""
    if not any_playing():
        return None
    try:
        states = _states()
        now = time.monotonic()
        sidebar = now - states.sidebar_redrawn_at >= UI_REDRAW_INTERVAL
        if sidebar:
            states.sidebar_redrawn_at = now
        _tag_view3d(sidebar=sidebar)
    except Exception:
        pass
    return REDRAW_INTERVAL


def ensure_timer() -> bool:
    """Start the redraw timer (no-op when already running). Returns whether it runs."""
    import bpy

    if not bpy.app.timers.is_registered(_redraw_tick):
        bpy.app.timers.register(_redraw_tick, first_interval=0.0)
    return bpy.app.timers.is_registered(_redraw_tick)


def stop_timer() -> None:
    import bpy

    if bpy.app.timers.is_registered(_redraw_tick):
        bpy.app.timers.unregister(_redraw_tick)


def timers_active() -> List[object]:
    import bpy

    return [f for f in (_redraw_tick,) if bpy.app.timers.is_registered(f)]


def timeline_handback_suspended():
    """While active, frame changes do not hand the preview back to the timeline (a bake sets
    the scene's frame many times and restores it; that is not the user scrubbing)."""
    a = _addon()
    return a.previews.handback_suspended() if a is not None else contextlib.nullcontext()


def handback_suspended() -> bool:
    a = _addon()
    return a is not None and a.previews.suspended > 0


def hand_back_to_timeline(scene) -> bool:
    """Timeline mode for ``scene``: the preview stops driving the pose. Returns whether it did
    (never while ``timeline_handback_suspended``)."""
    return _states().hand_back(scene)


def _make_handlers():
    import bpy

    @bpy.app.handlers.persistent
    def stylized_preview_load_post(*_args):
        a = _addon()
        if a is not None:
            a.forget_file()     # the previous file's preview states and the bakes of its rigs
        stop_timer()

    @bpy.app.handlers.persistent
    def stylized_preview_frame_change_pre(scene, *_args):
        timeline_frame_changed(scene)

    @bpy.app.handlers.persistent
    def stylized_preview_render_init(scene, *_args):
        rendering(scene, True)

    @bpy.app.handlers.persistent
    def stylized_preview_render_done(scene, *_args):
        rendering(scene, False)

    @bpy.app.handlers.persistent
    def stylized_preview_undo_post(*_args):
        sync_crowd_from_scenes()

    return (stylized_preview_load_post, stylized_preview_frame_change_pre, stylized_preview_undo_post,
            stylized_preview_render_init, stylized_preview_render_done)


def rendering(scene, flag: bool) -> None:
    """A render of ``scene`` starts (render_init) or ends (render_complete / render_cancel):
    ``PreviewStates.rendering``."""
    _states().rendering(scene, flag)


def timeline_frame_changed(scene) -> bool:
    """``frame_change_pre``: hand the preview back to the timeline when the user changed the
    frame (``PreviewStates.timeline_frame_changed``).  Returns whether control was handed back."""
    return _states().timeline_frame_changed(scene, hand_back_to_timeline)


def sync_crowd_from_scenes() -> None:
    """Undo/redo restored the scenes' stored "Play on All Characters" values (their update
    callbacks do not run): queue the matching ``crowd`` command for every state that differs."""
    import bpy

    _states().sync_crowd(bpy.data.scenes)


_handlers: list = []


def register() -> None:
    import bpy

    load_post, frame_pre, undo_post, render_init, render_done = _make_handlers()
    h = bpy.app.handlers
    _handlers[:] = [(h.load_post, load_post), (h.frame_change_pre, frame_pre),
                    (h.undo_post, undo_post), (h.redo_post, undo_post), (h.render_init, render_init),
                    (h.render_complete, render_done), (h.render_cancel, render_done)]
    for lst, fn in _handlers:
        lst.append(fn)


def unregister() -> None:
    stop_timer()
    while _handlers:
        lst, fn = _handlers.pop()
        if fn in lst:
            lst.remove(fn)
    clear_states()
