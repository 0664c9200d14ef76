"""A hook tests and tools install on the Stylized engine to read what its final renders produced.

Blender's own "Render Result" image cannot be read back in background mode, so ``install`` wraps
``StylizedRenderEngine.render``: after each F12 (or each frame of an animation render) the
instance's ``last_result`` (linear float pixels, size, frame, stats, the render log, pipeline
stats; or ``error``) is copied into ``LAST_RENDER``.  The engine keeps nothing at module level;
this dict belongs to the test/tool process that installed the hook.  (A tool imported both as
``render_capture`` and as ``tools.render_capture`` in one process gets both dicts filled.)
"""
from __future__ import annotations

LAST_RENDER: dict = {}


def install(engine_class) -> None:
    """Wrap ``engine_class.render`` once; a later install (another copy of this module) adds its
    ``LAST_RENDER`` to the dicts the wrapper fills."""
    current = engine_class.render
    sinks = getattr(current, "_render_sinks", None)
    if sinks is not None:
        if not any(d is LAST_RENDER for d in sinks):
            sinks.append(LAST_RENDER)
        return
    original = current
    sinks = [LAST_RENDER]

    def render(self, depsgraph):
        for d in sinks:
            d.clear()
        try:
            original(self, depsgraph)
        finally:
            for d in sinks:
                d.update(getattr(self, "last_result", None) or {})

    render._render_sinks = sinks
    render.__wrapped__ = original
    engine_class.render = render
