"""Spring bones on one session: ``SpringsDriver`` keeps the simulation of the session's current
runtime (``state``: a ``runtime.SpringsRuntime``) and gives the runtime its pose steps
(docs/architecture.md).

The session makes one driver (``session.springs``), hands ``after_mixer`` / ``after_timeline`` to
every ``SceneRuntime`` it builds (the runtime calls them after the mixer / after Blender's pose,
before the palettes), reads ``report`` for the Stats panel and the render log and calls
``reset`` when it drops its runtime.
"""
from __future__ import annotations

from typing import Optional

from ...core.animation import spring_rig as core
from ..vrm.read import addon_registered
from . import timeline as _timeline
from .runtime import SpringsRuntime, build, toggles


class SpringsDriver:
    """The spring bones of one session's runtime (see the module docstring)."""

    def __init__(self):
        self.runtime = None
        self.state: Optional[SpringsRuntime] = None     # the simulation of ``runtime``

    def reset(self) -> None:
        """Forget the simulation (the session dropped its runtime)."""
        self.runtime = None
        self.state = None

    def of(self, runtime) -> Optional[SpringsRuntime]:
        """The simulation of ``runtime`` (None before its first frame, or for another runtime)."""
        return self.state if runtime is not None and runtime is self.runtime else None

    def ensure(self, runtime) -> SpringsRuntime:
        """The runtime's SpringsRuntime, built on first use and again when a toggle changed (a
        frame reads the toggles of the armatures with springs found at build, not the whole
        scene)."""
        sr = self.of(runtime)
        if sr is None or (sr.key and sr.key != toggles(k[0] for k in sr.key)):
            try:
                sr = build(runtime.scene)
            except Exception as ex:           # bad data: reported, the preview plays without springs
                sr = SpringsRuntime(core.SpringRig([]), [f"spring bones: {ex}"])
                runtime.last_error = f"spring bones: {ex}"
            self.runtime, self.state = runtime, sr
        return sr

    def report(self, runtime) -> list:
        """The spring bone warnings of ``runtime`` (a joint naming no bone, a collider without
        its Empty, a pre-roll that could not read the scene's animation), for the Stats panel's
        problems and the render log (session stats ``problems``)."""
        sr = self.of(runtime)
        return list(sr.warnings) if sr is not None else []

    def after_mixer(self, runtime, delta_time: float) -> bool:
        """The hook of SceneRuntime.update: springs after the mixer, before the palettes."""
        sr = self.ensure(runtime)
        if not sr.rig.chain_count:
            return True
        return sr.update(runtime.player, runtime.pose, delta_time)

    def after_timeline(self, runtime, frame=None) -> bool:
        """The hook of SceneRuntime.update_timeline (timeline.py); ``frame``: the scene time
        shown (None: the scene's current frame)."""
        sr = self.of(runtime)
        if sr is not None and not sr.key and not sr.rig.chain_count:
            return True                   # a scene without spring bones (no toggle to watch): nothing per frame
        if addon_registered():            # Blender's evaluated pose already holds the add-on's result
            return True
        return _timeline.after_timeline(runtime, self.ensure(runtime), frame)
