"""Expressions: shape keys of a character grouped by name (stylized.expression_*) and the
Scene.stylized_expressions mirror the Expressions panel draws its sliders from.

A character is an armature with every mesh it deforms (Armature modifier or parenting), or a
single mesh with shape keys.  One name = every same-named key block of all its meshes.  Values are
written to the shape keys themselves (undoable, keyframable, saved); the engine mirrors them
through MorphState versions.

A character whose armature carries VRM expressions (the VRM Add-on's data, read with or without
the add-on: ``engine/features/vrm/expressions.py``) also gets one item per expression
(``Scene.stylized_expressions.vrm_items``): its value is the expression's ``preview`` (the add-on's
property when installed, else the ID property the add-on stores), keyed by
``stylized.vrm_expression_keyframe``.  Reset All zeroes the previews and the shape keys.
"""
from __future__ import annotations

import math
from collections import OrderedDict

import bpy
from bpy.props import BoolProperty, CollectionProperty, FloatProperty, PointerProperty, StringProperty

from ..engine.features.vrm import expressions as vx
from ..engine.features.preview.control import armature_of


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


def vrm_set(root):
    """The VRM ExpressionSet of a character root (an armature with VRM data), else None."""
    return vx.expression_set_of(root) if root is not None and root.type == "ARMATURE" else None


def vrm_bound_keys(expr_set) -> set:
    """Shape-key names some expression binds (their values come from the expressions)."""
    return {k for e in expr_set.expressions for _m, k, _w in e.morph_binds} if expr_set is not None else set()


def vrm_presets_and_custom(expr_set):
    """([(preset name, Expression or None)] in the VRM 1.0 preset order, [custom Expression])."""
    first = {}
    for e in expr_set.expressions:
        if e.preset and e.preset not in first:
            first[e.preset] = e
    presets = [(p, first.get(p)) for p in vx.PRESET_NAMES]
    custom = [e for e in expr_set.expressions if e.preset is None or first.get(e.preset) is not e]
    return presets, custom


def vrm_label(e) -> str:
    """Slider label: the preset name, with a VRM 0.x group's own name when it differs."""
    if e.preset and e.name != e.preset:
        return f"{e.preset} ({e.name})"
    return e.name


def reset_vrm(root, expr_set) -> int:
    n = 0
    for e in expr_set.expressions if expr_set is not None else ():
        if vx.get_preview(root, e) != 0.0:
            vx.set_preview(root, e, 0.0)
            n += 1
    return n


def counts(meshes) -> tuple:
    """(target total, active count) of the character's key blocks."""
    blocks = [kb for bl in expression_groups(meshes).values() for kb in bl]
    return len(blocks), sum(1 for kb in blocks if abs(kb.value) > 1e-6 and not kb.mute)


def _library_name(idb) -> str:
    lib = idb.library
    if lib is None and idb.override_library is not None:
        lib = idb.override_library.reference.library if idb.override_library.reference else None
    return bpy.path.basename(lib.filepath) if lib is not None else "a library"


def linked_problem(root, meshes, vrm: bool = True) -> str:
    """Why an expression edit of this character would not be kept (""; nothing in the way): a
    shape-key block of one of ``meshes``, or (``vrm``) the armature data holding the VRM
    expressions, is linked from another .blend (or a library override that is not editable).
    Blender keeps no edit of linked data in this file: written from Python it changes the render
    until the file is saved and reloaded, then it is gone."""
    ids = []
    if vrm and root is not None and root.type == "ARMATURE":
        ids.append((root.data, f"The VRM expressions of '{root.name}'", "armature"))
    for ob in meshes:
        key = ob.data.shape_keys if ob.type == "MESH" else None
        if key is not None:
            ids.append((key, f"The shape keys of '{ob.name}'", "mesh"))
    for idb, what, kind in ids:
        if not idb.is_editable:
            how = "are linked" if idb.library is not None else "belong to a library override that is not editable"
            return (f"{what} {how} from '{_library_name(idb)}': an edit would be lost when the file is saved; "
                    f"to edit them, override its {kind} data too (Outliner: right-click it > Library Override > "
                    f"Make > Selected & Content)")
    return ""


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
    meshes = _item_meshes(self)
    if linked_problem(None, meshes):
        return          # linked: nothing is written (the panel says why)
    set_expression(meshes, self.name, value)
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


def _vrm_handle(item):
    arm = bpy.data.objects.get(item.id_data.stylized_expressions.character)
    if arm is None or arm.type != "ARMATURE":
        return None, None
    key = item.key if item.kind == "preset" else int(item.key or 0)
    return arm, vx.Expression.at(item.name, item.kind, key)


def _get_vrm_value(self):
    arm, e = _vrm_handle(self)
    if arm is None:
        return 0.0
    try:
        return vx.get_preview(arm, e)
    except Exception:
        return 0.0


def _set_vrm_value(self, value):
    arm, e = _vrm_handle(self)
    if arm is None or linked_problem(arm, _item_meshes(self)):
        return          # linked: nothing is written (the panel says why)
    vx.set_preview(arm, e, value)
    _tag_redraw()


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


def _vrm_want(root):
    es = vrm_set(root)
    if es is None:
        return []
    return [(e.name, e.location[0], str(e.location[1]), e.preset or "", e.is_bound) for e in es.expressions]


def items_stale(scene, root, meshes) -> bool:
    props = scene.stylized_expressions
    want = [(n, m) for m, names in names_by_mesh(meshes).items() for n in names]
    have = [(it.name, it.mesh) for it in props.items]
    vrm_have = [(it.name, it.kind, it.key, it.preset, it.bound) for it in props.vrm_items]
    return props.character != (root.name if root else "") or want != have or _vrm_want(root) != vrm_have


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
    props.vrm_items.clear()
    for name, kind, key, preset, bound in _vrm_want(root):
        it = props.vrm_items.add()
        it.name, it.kind, it.key, it.preset, it.bound = name, kind, key, preset, bound
    return True


def _drawn_characters():
    """(scene, active object) of every window (what each Expressions panel draws for); the
    context's scene and view layer when there is no window (background)."""
    wm = getattr(bpy.context, "window_manager", None)
    wins = list(getattr(wm, "windows", ()) or ())
    if wins:
        return [(w.scene, w.view_layer.objects.active) for w in wins if w.scene is not None]
    vl = getattr(bpy.context, "view_layer", None)
    scene = getattr(bpy.context, "scene", None)
    return [(scene, vl.objects.active if vl is not None else None)] if scene is not None else []


def _deferred_sync():
    """The timer request_sync registers: rebuild the stale items of every drawn character (the
    request names nothing: each window's scene and active object are read again here)."""
    changed = False
    for scene, obj in _drawn_characters():
        try:
            changed = sync_items(scene, obj) or changed
        except Exception:
            pass
    if changed:
        _tag_redraw()
    return None


def request_sync(scene, obj) -> None:
    """Called from the panel's draw() (for ``scene`` / ``obj``, the window's own): rebuild the
    items just after drawing."""
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
        _tag_redraw()
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
        _tag_redraw()
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
        if es is None:
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
        _tag_redraw()
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


# registered before ``classes`` (StylizedExpressionProps refers to it)
item_classes = (StylizedVrmExpressionItem,)
classes = (StylizedExpressionItem, StylizedExpressionProps, STYLIZED_OT_expression_set,
           STYLIZED_OT_expression_reset_all, STYLIZED_OT_expression_keyframe,
           STYLIZED_OT_vrm_expression_set, STYLIZED_OT_vrm_expression_keyframe)


def register():
    for c in item_classes + classes:
        bpy.utils.register_class(c)
    bpy.types.Scene.stylized_expressions = PointerProperty(
        type=StylizedExpressionProps, description="Expression sliders of the Stylized sidebar tab")


def unregister():
    if bpy.app.timers.is_registered(_deferred_sync):
        bpy.app.timers.unregister(_deferred_sync)
    if hasattr(bpy.types.Scene, "stylized_expressions"):
        del bpy.types.Scene.stylized_expressions
    for c in reversed(item_classes + classes):
        bpy.utils.unregister_class(c)
