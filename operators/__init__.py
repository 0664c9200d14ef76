"""Operators (each feature registers its own classes here)."""
from __future__ import annotations

import bpy

_modules = []
_classes = []

from . import mtoon_ops  # noqa: E402  (MToon material operators)

_modules.append(mtoon_ops)

from . import preview_ops, expression_ops  # noqa: E402  (viewport preview + expressions)

_modules.extend((preview_ops, expression_ops))


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
