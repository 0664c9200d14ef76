"""Expressions: shape keys of a character grouped by name and the VRM expressions of its armature,
which the Expressions panel (panels/expressions_panel.py) draws as sliders and the stylized.expression_*
operators (operators/expressions_ops.py) set, reset and key.

A character is an armature with every mesh it deforms (Armature modifier or parenting), or a
single mesh with shape keys.  One name = every same-named key block of all its meshes.  Values are
written to the shape keys themselves (undoable, keyframable, saved); the engine mirrors them
through MorphState versions.

A character whose armature carries VRM expressions (the VRM Add-on's data, read with or without
the add-on: ``engine/features/vrm/expressions.py``) also gets one item per expression
(``Scene.stylized_expressions.vrm_items``): its value is the expression's ``preview`` (the add-on's
property when installed, else the ID property the add-on stores), keyed by
``stylized.vrm_expression_keyframe``.  Reset All zeroes the previews and the shape keys.

``character``: the character's meshes and keys, and the ``Scene.stylized_expressions`` mirror's
rebuild; ``properties``: that mirror's property groups (saved in .blend files).
"""
from __future__ import annotations


def register():
    from . import properties

    properties.register()


def unregister():
    from . import character, properties

    character.cancel_sync()
    properties.unregister()
