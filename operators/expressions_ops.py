"""The Expressions feature's operators (engine/features/expressions): stylized.expression_set /
_reset_all / _keyframe on a character's shape keys, stylized.vrm_expression_set / _keyframe on its
VRM expressions."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import bpy
from bpy.props import FloatProperty, StringProperty

from ..engine.features.expressions.character import (
    character_of,
    expression_groups,
    linked_problem,
    reset_all,
    reset_vrm,
    set_expression,
    tag_redraw,
    vrm_set,
)
from ..engine.features.vrm import expressions as vx

# ------------------------------------------------------------------------------------------------
# operators
# ------------------------------------------------------------------------------------------------

class _ExpressionOp:
    character: StringProperty(
        name="Character", default="", options={"SKIP_SAVE"},
        description="Armature or mesh of the character (empty: the active object's character)")

    if TYPE_CHECKING:   # given by bpy.types.Operator, which the operators below also derive from
        def report(self, type: set[str], message: str) -> set[str]: ...

    def _meshes(self, context):
        ob = bpy.data.objects.get(self.character) if self.character else getattr(context, "active_object", None)
        return character_of(ob, context.scene)

    def _refuse_linked(self, root, meshes, vrm: bool = True) -> bool:
        """Report and return True when the edit would touch linked data (``linked_problem``)."""
        why = linked_problem(root, meshes, vrm)
        if why:
            self.report({"ERROR"}, f"Nothing changed: {why}")
        return bool(why)


class STYLIZED_OT_expression_set(_ExpressionOp, bpy.types.Operator):
    bl_idname = "stylized.expression_set"
    bl_label = "Set Expression"
    bl_description = "Set every shape key with this name on all meshes of the character"
    bl_options = {"REGISTER", "UNDO"}

    name: StringProperty(name="Name", description="Shape key name")
    value: FloatProperty(name="Value", min=-10.0, max=10.0, soft_min=0.0, soft_max=1.0,
                         description="Weight (clamped to each key's slider range)")

    def execute(self, context):
        if not math.isfinite(self.value):
            self.report({"ERROR"}, f"Expression '{self.name}': the value {self.value} is not a finite number; "
                                   "nothing was changed")
            return {"CANCELLED"}
        root, meshes = self._meshes(context)
        if self._refuse_linked(root, meshes, vrm=False):
            return {"CANCELLED"}
        n = set_expression(meshes, self.name, self.value)
        if n == 0:
            self.report({"ERROR"}, f"No shape key named '{self.name}' on this character")
            return {"CANCELLED"}
        tag_redraw()
        self.report({"INFO"}, f"'{self.name}' = {self.value:.3f} on {n} shape key(s)")
        return {"FINISHED"}


class STYLIZED_OT_expression_reset_all(_ExpressionOp, bpy.types.Operator):
    bl_idname = "stylized.expression_reset_all"
    bl_label = "Reset All"
    bl_description = ("Set every shape key of the character to 0, and every VRM expression of its "
                      "armature (the VRM Add-on's previews)")
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context):
        root, meshes = self._meshes(context)
        if root is None:
            self.report({"ERROR"}, "No character: select an armature or a mesh with shape keys")
            return {"CANCELLED"}
        es = vrm_set(root)
        if self._refuse_linked(root, meshes, vrm=es is not None):
            return {"CANCELLED"}
        nv = reset_vrm(root, es)      # first: with the add-on installed this rewrites the keys
        n = reset_all(meshes)
        tag_redraw()
        extra = f" and {nv} VRM expression(s)" if es is not None else ""
        self.report({"INFO"}, f"Reset {n} shape key(s){extra} of '{root.name}'")
        return {"FINISHED"}


class STYLIZED_OT_expression_keyframe(_ExpressionOp, bpy.types.Operator):
    bl_idname = "stylized.expression_keyframe"
    bl_label = "Insert Expression Keyframe"
    bl_description = "Insert a keyframe at the current frame on every shape key with this name"
    bl_options = {"REGISTER", "UNDO"}

    name: StringProperty(name="Name", description="Shape key name")

    def execute(self, context):
        root, meshes = self._meshes(context)
        blocks = expression_groups(meshes).get(self.name, [])
        if not blocks:
            self.report({"ERROR"}, f"No shape key named '{self.name}' on this character")
            return {"CANCELLED"}
        if self._refuse_linked(root, meshes, vrm=False):
            return {"CANCELLED"}
        frame = context.scene.frame_current
        for kb in blocks:
            kb.keyframe_insert("value", frame=frame)
        self.report({"INFO"}, f"Keyed '{self.name}' on {len(blocks)} shape key(s) at frame {frame}")
        return {"FINISHED"}


class _VrmExpressionOp(_ExpressionOp):
    name: StringProperty(name="Name", description="VRM expression name (preset, custom name or VRM 0.x group)")

    def _expression(self, context):
        """(armature, ExpressionSet, Expression) or None after reporting why not."""
        root, _meshes = self._meshes(context)
        es = vrm_set(root)
        if es is None or root is None:     # (vrm_set(None) is None)
            who = f"'{root.name}'" if root is not None else "the active object"
            self.report({"ERROR"}, f"No VRM expressions on {who}: select an avatar imported with the VRM Add-on")
            return None
        e = es.by_name(self.name)
        if e is None:
            self.report({"ERROR"}, f"No VRM expression named '{self.name}' on '{root.name}'")
            return None
        if self._refuse_linked(root, _meshes):
            return None
        return root, es, e


class STYLIZED_OT_vrm_expression_set(_VrmExpressionOp, bpy.types.Operator):
    bl_idname = "stylized.vrm_expression_set"
    bl_label = "Set VRM Expression"
    bl_description = "Set a VRM expression's value (the VRM Add-on's preview) on the character's armature"
    bl_options = {"REGISTER", "UNDO"}

    value: FloatProperty(name="Value", min=0.0, max=1.0, subtype="FACTOR",
                         description="Expression value, 0 to 1")

    def execute(self, context):
        if not math.isfinite(self.value):
            self.report({"ERROR"}, f"VRM expression '{self.name}': the value {self.value} is not a finite number; "
                                   "nothing was changed")
            return {"CANCELLED"}
        got = self._expression(context)
        if got is None:
            return {"CANCELLED"}
        root, _es, e = got
        vx.set_preview(root, e, self.value)
        tag_redraw()
        self.report({"INFO"}, f"VRM expression '{e.name}' of '{root.name}' = {self.value:.3f}")
        return {"FINISHED"}


class STYLIZED_OT_vrm_expression_keyframe(_VrmExpressionOp, bpy.types.Operator):
    bl_idname = "stylized.vrm_expression_keyframe"
    bl_label = "Insert VRM Expression Keyframe"
    bl_description = "Insert a keyframe of this VRM expression's value (the VRM Add-on's preview) at the current frame"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context):
        got = self._expression(context)
        if got is None:
            return {"CANCELLED"}
        root, _es, e = got
        frame = context.scene.frame_current
        vx.keyframe_preview(root, e, frame)
        self.report({"INFO"}, f"Keyed VRM expression '{e.name}' of '{root.name}' at frame {frame}")
        return {"FINISHED"}


classes = (STYLIZED_OT_expression_set, STYLIZED_OT_expression_reset_all, STYLIZED_OT_expression_keyframe,
           STYLIZED_OT_vrm_expression_set, STYLIZED_OT_vrm_expression_keyframe)


register, unregister = bpy.utils.register_classes_factory(classes)
