"""The Expressions panel's saved state: ``Scene.stylized_expressions`` (``StylizedExpressionProps``:
the character, the filter, one item per shape-key name and per VRM expression; each item's value
is a view over the shape keys / the expression's preview).  Identifiers and RNA paths are those
saved .blend files use."""
from __future__ import annotations

import bpy
from bpy.props import BoolProperty, CollectionProperty, FloatProperty, PointerProperty, StringProperty

from ..vrm import expressions as vx
from .character import character_meshes, linked_problem, set_expression, tag_redraw

# ------------------------------------------------------------------------------------------------
# Scene.stylized_expressions: one item per key name (the value is a view over the shape keys)
# ------------------------------------------------------------------------------------------------

def _item_meshes(item):
    return character_meshes(item.id_data.stylized_expressions.character, item.id_data)


def _get_value(self):
    for ob in _item_meshes(self):
        kb = ob.data.shape_keys.key_blocks.get(self.name)
        if kb is not None:
            return float(kb.value)
    return 0.0


def _set_value(self, value):
    # The UI pushes the undo step of a Scene property edit (the shape keys are in that step).
    meshes = _item_meshes(self)
    if linked_problem(None, meshes):
        return          # linked: nothing is written (the panel says why)
    set_expression(meshes, self.name, value)
    tag_redraw()


class StylizedExpressionItem(bpy.types.PropertyGroup):
    # name: the shape key name (PropertyGroup.name)
    value: FloatProperty(
        name="Weight", min=-10.0, max=10.0, soft_min=0.0, soft_max=1.0, get=_get_value, set=_set_value,
        description="Weight of every shape key with this name on all meshes of the character "
                    "(clamped to the key's slider range)")
    slider_min: FloatProperty(name="Slider Min", description="Lowest slider value of these shape keys")
    slider_max: FloatProperty(name="Slider Max", default=1.0,
                              description="Highest slider value of these shape keys")
    mesh: StringProperty(name="Mesh", description="Mesh node this name is listed under")


def _vrm_handle(item):
    arm = bpy.data.objects.get(item.id_data.stylized_expressions.character)
    if arm is None or arm.type != "ARMATURE":
        return None, None
    key = item.key if item.kind == "preset" else int(item.key or 0)
    return arm, vx.Expression.at(item.name, item.kind, key)


def _get_vrm_value(self):
    arm, e = _vrm_handle(self)
    if arm is None or e is None:
        return 0.0
    try:
        return vx.get_preview(arm, e)
    except Exception:
        return 0.0


def _set_vrm_value(self, value):
    arm, e = _vrm_handle(self)
    if arm is None or e is None or linked_problem(arm, _item_meshes(self)):
        return          # linked: nothing is written (the panel says why)
    vx.set_preview(arm, e, value)
    tag_redraw()


class StylizedVrmExpressionItem(bpy.types.PropertyGroup):
    # name: the expression's name (VRM 1.0 preset / custom name, VRM 0.x group name)
    value: FloatProperty(
        name="Expression", min=0.0, max=1.0, subtype="FACTOR", get=_get_vrm_value, set=_set_vrm_value,
        description="Value of this VRM expression (the VRM Add-on's preview): its bound shape keys, "
                    "material colours and UVs follow it, with isBinary and the override rules applied")
    preset: StringProperty(name="Preset", description="VRM 1.0 preset this expression stands for (empty: custom)")
    kind: StringProperty(name="Kind", description="Where the expression is stored: vrm0, preset or custom")
    key: StringProperty(name="Key", description="The expression's preset property name or list index")
    bound: BoolProperty(name="Bound", description="The avatar binds this expression to something "
                                                  "(shape keys, material colours or UVs)")


class StylizedExpressionProps(bpy.types.PropertyGroup):
    character: StringProperty(
        name="Character", description="Armature (or mesh) whose shape keys the sliders below drive")
    filter: StringProperty(
        name="Filter", options={"TEXTEDIT_UPDATE"},
        description="Show only the expressions whose name contains this text (case-insensitive)")
    items: CollectionProperty(type=StylizedExpressionItem,
                              description="One entry per shape key name of the character")
    vrm_items: CollectionProperty(type=StylizedVrmExpressionItem,
                                  description="One entry per VRM expression of the character's armature")


# registered before ``CLASSES`` (StylizedExpressionProps refers to it)
ITEM_CLASSES = (StylizedVrmExpressionItem,)
CLASSES = (StylizedExpressionItem, StylizedExpressionProps)


def register():
    for c in ITEM_CLASSES + CLASSES:
        bpy.utils.register_class(c)
    bpy.types.Scene.stylized_expressions = PointerProperty(
        type=StylizedExpressionProps, description="Expression sliders of the Stylized sidebar tab")


def unregister():
    if hasattr(bpy.types.Scene, "stylized_expressions"):
        del bpy.types.Scene.stylized_expressions
    for c in reversed(ITEM_CLASSES + CLASSES):
        bpy.utils.unregister_class(c)
