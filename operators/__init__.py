"""Operators (each feature registers its own classes here)."""
from __future__ import annotations

from ..engine.blender.registry import register_modules, unregister_modules

_modules = []

from . import materials_ops  # noqa: E402  (MToon material operators)

_modules.append(materials_ops)

from . import expressions_ops, preview_ops  # noqa: E402  (viewport preview + expressions)

_modules.extend((preview_ops, expressions_ops))


def register():
    register_modules(_modules)


def unregister():
    unregister_modules(_modules)
