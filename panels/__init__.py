"""UI panels (N-panel tab "Stylized", material and scene panels)."""
from __future__ import annotations

import bpy

_modules = []
_classes = []

from . import material_panel, render_panel  # noqa: E402  (MToon material + render settings panels)

_modules.extend((material_panel, render_panel))

from . import viewport_panels  # noqa: E402  (3D viewport sidebar tab "Stylized")

_modules.append(viewport_panels)


def register():
    for c in _classes:
        bpy.utils.register_class(c)
    for m in _modules:
        m.register()


def unregister():
    for m in reversed(_modules):
        m.unregister()
    for c in reversed(_classes):
        bpy.utils.unregister_class(c)
