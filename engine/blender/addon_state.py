"""What the add-on keeps while it is enabled, in one owner (issue 24: no module-level state).

``AddonState`` is made by ``render_engine.register()`` and held by the registered engine class
(``StylizedRenderEngine.addon``: the add-on's registration object, which Blender holds while the
add-on is enabled); ``unregister()`` frees it.  It owns

* ``final_sessions``: the F12 session kept between the renders of the last rendered scene
  (``FinalSessionKeeper``; see render_engine.py for why F12 shares one);
* ``previews``: the viewport preview's state of each scene (``preview.driver.PreviewStates``),
  which the UI (operators, panels, handlers) reaches through ``features/preview/control.py``;
* ``bakes``: the preview's bakes (``bake/cache.py: BakeCache``) that the operators make and the
  viewport sessions it makes play (a session made without the add-on has its own);
* the most recent viewport session (weakly: the Stats panel reads it).
"""
from __future__ import annotations

import weakref

from ..features.preview.driver import PreviewStates
from .bake.cache import BakeCache


class FinalSessionKeeper:
    """The final-render session kept between the F12s of the last rendered scene."""

    def __init__(self):
        self.key = None
        self.session = None

    def session_for(self, scene):
        """The shared final-render session of ``scene`` (created, or replacing another scene's)."""
        from .session import StylizedSession

        key = (getattr(scene, "session_uid", None), scene.as_pointer())
        if self.key != key or self.session is None:
            self.free()
            self.key = key
            self.session = StylizedSession()
        return self.session

    def free(self) -> None:
        """Release the kept session (GPU streams, targets, runtime)."""
        s, self.key, self.session = self.session, None, None
        if s is not None:
            try:
                s.free()
            except Exception:
                pass


class AddonState:
    """The add-on's owner of the state that outlives one frame (see the module docstring)."""

    def __init__(self):
        self.final_sessions = FinalSessionKeeper()
        self.previews = PreviewStates()
        # a bake's frame changes are not the user scrubbing: they do not hand the preview back
        self.bakes = BakeCache(quiet=self.previews.handback_suspended)
        self._viewport = None
        self.render_complete = None   # the engine's render_complete handler (render_engine.register)

    def note_viewport_session(self, session) -> None:
        """``session`` is the most recent viewport session (kept weakly)."""
        self._viewport = weakref.ref(session)

    def viewport_session(self):
        """The most recent viewport session still alive, or None."""
        return self._viewport() if self._viewport is not None else None

    def forget_viewport_session(self) -> None:
        self._viewport = None

    def forget_file(self) -> None:
        """A file was loaded: the previous file's preview states and bakes go."""
        self.previews.clear()
        self.bakes.clear()

    def free(self) -> None:
        """Release everything (unregister, interpreter exit)."""
        self.final_sessions.free()
        self.previews.clear()
        self.bakes.clear()
        self._viewport = None
