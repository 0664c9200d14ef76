"""A hook tests and tools install on the Stylized engine to read what its final renders produced.

Blender's own "Render Result" image cannot be read back in background mode, so ``install`` wraps
``StylizedRenderEngine.render``: after each F12 (or each frame of an animation render) the
instance's ``last_result`` (linear float pixels, size, frame, stats, the render log, pipeline
stats; or ``error``) is copied into ``LAST_RENDER``.  The engine keeps nothing at module level;
this dict belongs to the test/tool process that installed the hook.
"""
from __future__ import annotations

LAST_RENDER: dict = {}


def install(engine_class) -> None:
    """Wrap ``engine_class.render`` once (a second call changes nothing)."""
    original = engine_class.render
    if getattr(original, "_captures_last_render", False):
        return

    def render(self, depsgraph):
        LAST_RENDER.clear()
        try:
            original(self, depsgraph)
        finally:
            LAST_RENDER.update(getattr(self, "last_result", None) or {})

    render._captures_last_render = True
    render.__wrapped__ = original
    engine_class.render = render
