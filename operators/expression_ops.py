"""Expressions: shape keys of a character grouped by name (stylized.expression_*) and the
Scene.stylized_expressions mirror the Expressions panel draws its sliders from.

A character is an armature with every mesh it deforms (Armature modifier or parenting), or a
single mesh with shape keys.  One name = every same-named key block of all its meshes.  Values are
written to the shape keys themselves (undoable, keyframable, saved); the engine mirrors them
through MorphState versions.
"""
from __future__ import annotations

import math
from collections import OrderedDict

import bpy
from bpy.props import CollectionProperty, FloatProperty, PointerProperty, StringProperty

from ..engine.preview import armature_of


def _key_blocks(ob):
    key = ob.data.shape_keys if ob is not None and ob.type == "MESH" else None
    if key is None or len(key.key_blocks) < 2:
        return []
    ref = key.reference_key
    return [kb for kb in key.key_blocks if kb != ref]


def _deformed_by(ob, arm) -> bool:
    for md in ob.modifiers:
        if md.type == "ARMATURE" and md.object == arm:
            return True
    p = ob.parent
    while p is not None:
        if p == arm:
            return True
        p = p.parent
    return False


def character_of(obj, scene=None):
    """(root object, [meshes with shape keys]) of the character of ``obj``; (None, []) if none."""
    if obj is None:
        return None, []
    scene = scene or bpy.context.scene
    arm = armature_of(obj)
    if arm is not None:
        meshes = [o for o in scene.objects if o.type == "MESH" and _deformed_by(o, arm) and _key_blocks(o)]
        if meshes or obj.type == "ARMATURE":
            return arm, meshes
    if obj.type == "MESH" and _key_blocks(obj):
        return obj, [obj]
    return None, []


def character_meshes(root_name: str, scene=None):
    ob = bpy.data.objects.get(root_name) if root_name else None
    return character_of(ob, scene)[1] if ob is not None else []


def expression_groups(meshes) -> "OrderedDict[str, list]":
    """{key name: [key blocks of every mesh with that name]} in first-seen order."""
    groups: "OrderedDict[str, list]" = OrderedDict()
    for ob in meshes:
        for kb in _key_blocks(ob):
            groups.setdefault(kb.name, []).append(kb)
    return groups


def names_by_mesh(meshes) -> "OrderedDict[str, list]":
    """{mesh object name: key names listed under it} (each name under the first mesh having it)."""
    seen = set()
    out: "OrderedDict[str, list]" = OrderedDict()
    for ob in meshes:
        names = []
        for kb in _key_blocks(ob):
            if kb.name not in seen:
                seen.add(kb.name)
                names.append(kb.name)
        out[ob.name] = names
    return out


def slider_range(blocks) -> tuple:
    return (min(kb.slider_min for kb in blocks), max(kb.slider_max for kb in blocks))


def set_expression(meshes, name: str, value: float) -> int:
    """Write ``value`` (clamped to each key's slider range) to every key named ``name``.
    A non-finite value raises ValueError (nothing is written)."""
    if not math.isfinite(float(value)):
        raise ValueError(f"shape key '{name}': value {value} is not a finite number")
    n = 0
    for kb in expression_groups(meshes).get(name, []):
        kb.value = min(max(float(value), kb.slider_min), kb.slider_max)
        n += 1
    return n


def reset_all(meshes) -> int:
    n = 0
    for blocks in expression_groups(meshes).values():
        for kb in blocks:
            kb.value = 0.0
            n += 1
    return n


def counts(meshes) -> tuple:
    """(target total, active count) of the character's key blocks."""
    blocks = [kb for bl in expression_groups(meshes).values() for kb in bl]
    return len(blocks), sum(1 for kb in blocks if abs(kb.value) > 1e-6 and not kb.mute)


def _tag_redraw():
    try:
        for win in bpy.context.window_manager.windows:
            for area in win.screen.areas:
                if area.type == "VIEW_3D":
                    area.tag_redraw()
    except Exception:
        pass


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
    set_expression(_item_meshes(self), self.name, value)
    _tag_redraw()


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


class StylizedExpressionProps(bpy.types.PropertyGroup):
    character: StringProperty(
        name="Character", description="Armature (or mesh) whose shape keys the sliders below drive")
    filter: StringProperty(
        name="Filter", options={"TEXTEDIT_UPDATE"},
        description="Show only the expressions whose name contains this text (case-insensitive)")
    items: CollectionProperty(type=StylizedExpressionItem,
                              description="One entry per shape key name of the character")


def items_stale(scene, root, meshes) -> bool:
    props = scene.stylized_expressions
    want = [(n, m) for m, names in names_by_mesh(meshes).items() for n in names]
    have = [(it.name, it.mesh) for it in props.items]
    return props.character != (root.name if root else "") or want != have


def sync_items(scene, obj=None) -> bool:
    """Rebuild scene.stylized_expressions for the character of ``obj`` (default: active object)
    when its key names changed. Not callable from draw(): the panel defers it to a timer."""
    obj = obj if obj is not None else getattr(bpy.context, "active_object", None)
    root, meshes = character_of(obj, scene)
    if not items_stale(scene, root, meshes):
        return False
    props = scene.stylized_expressions
    props.character = root.name if root is not None else ""
    props.items.clear()
    groups = expression_groups(meshes)
    for mesh_name, names in names_by_mesh(meshes).items():
        for n in names:
            it = props.items.add()
            it.name = n
            it.mesh = mesh_name
            it.slider_min, it.slider_max = slider_range(groups[n])
    return True


_pending = {}


def _deferred_sync():
    scene = bpy.data.scenes.get(_pending.pop("scene", ""), None)
    obj = bpy.data.objects.get(_pending.pop("object", ""), None)
    if scene is not None:
        try:
            if sync_items(scene, obj):
                _tag_redraw()
        except Exception:
            pass
    return None


def request_sync(scene, obj) -> None:
    """Called from the panel's draw(): rebuild the items just after drawing."""
    _pending["scene"] = scene.name
    _pending["object"] = obj.name if obj is not None else ""
    if not bpy.app.timers.is_registered(_deferred_sync):
        bpy.app.timers.register(_deferred_sync, first_interval=0.0)


# ------------------------------------------------------------------------------------------------
# operators
# ------------------------------------------------------------------------------------------------

class _ExpressionOp:
    character: StringProperty(
        name="Character", default="", options={"SKIP_SAVE"},
        description="Armature or mesh of the character (empty: the active object's character)")

    def _meshes(self, context):
        ob = bpy.data.objects.get(self.character) if self.character else getattr(context, "active_object", None)
        return character_of(ob, context.scene)


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
        n = set_expression(meshes, self.name, self.value)
        if n == 0:
            self.report({"ERROR"}, f"No shape key named '{self.name}' on this character")
            return {"CANCELLED"}
        _tag_redraw()
        self.report({"INFO"}, f"'{self.name}' = {self.value:.3f} on {n} shape key(s)")
        return {"FINISHED"}


class STYLIZED_OT_expression_reset_all(_ExpressionOp, bpy.types.Operator):
    bl_idname = "stylized.expression_reset_all"
    bl_label = "Reset All"
    bl_description = "Set every shape key of the character to 0"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context):
        root, meshes = self._meshes(context)
        if root is None:
            self.report({"ERROR"}, "No character: select an armature or a mesh with shape keys")
            return {"CANCELLED"}
        n = reset_all(meshes)
        _tag_redraw()
        self.report({"INFO"}, f"Reset {n} shape key(s) of '{root.name}'")
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
        frame = context.scene.frame_current
        for kb in blocks:
            kb.keyframe_insert("value", frame=frame)
        self.report({"INFO"}, f"Keyed '{self.name}' on {len(blocks)} shape key(s) at frame {frame}")
        return {"FINISHED"}


classes = (StylizedExpressionItem, StylizedExpressionProps, STYLIZED_OT_expression_set,
           STYLIZED_OT_expression_reset_all, STYLIZED_OT_expression_keyframe)


def register():
    for c in classes:
        bpy.utils.register_class(c)
    bpy.types.Scene.stylized_expressions = PointerProperty(
        type=StylizedExpressionProps, description="Expression sliders of the Stylized sidebar tab")


def unregister():
    if bpy.app.timers.is_registered(_deferred_sync):
        bpy.app.timers.unregister(_deferred_sync)
    _pending.clear()
    if hasattr(bpy.types.Scene, "stylized_expressions"):
        del bpy.types.Scene.stylized_expressions
    for c in reversed(classes):
        bpy.utils.unregister_class(c)
