"""UI panels (N-panel tab "Stylized", material and scene panels)."""
from __future__ import annotations

from ..engine.blender.registry import register_modules, unregister_modules

_modules = []

from . import materials_panel, render_panel  # noqa: E402  (MToon material + render settings panels)

_modules.extend((materials_panel, render_panel))

# the sidebar tab "Stylized", in its order: Animation (+ Scene), Expressions, Stats
from . import expressions_panel, preview_panel, viewport_panels  # noqa: E402

_modules.extend((preview_panel, expressions_panel, viewport_panels))


def register():
    register_modules(_modules)


def unregister():
    unregister_modules(_modules)
