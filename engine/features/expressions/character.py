"""A character's expressions: its meshes and shape keys grouped by name, its VRM expressions, and
the rebuild of the ``Scene.stylized_expressions`` mirror (``sync_items``, deferred to a timer when
a panel's draw asks: ``request_sync``)."""
from __future__ import annotations

import math
from collections import OrderedDict

import bpy

from ..preview.state import armature_of
from ..vrm import expressions as vx
from ..vrm.rules import PRESET_NAMES


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
    presets = [(p, first.get(p)) for p in PRESET_NAMES]
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


def tag_redraw():
    try:
        for win in bpy.context.window_manager.windows:
            for area in win.screen.areas:
                if area.type == "VIEW_3D":
                    area.tag_redraw()
    except Exception:
        pass


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


def deferred_sync():
    """The timer request_sync registers: rebuild the stale items of every drawn character (the
    request names nothing: each window's scene and active object are read again here)."""
    changed = False
    for scene, obj in _drawn_characters():
        try:
            changed = sync_items(scene, obj) or changed
        except Exception:
            pass
    if changed:
        tag_redraw()
    return None


def request_sync(scene, obj) -> None:
    """Called from the panel's draw() (for ``scene`` / ``obj``, the window's own): rebuild the
    items just after drawing."""
    if not bpy.app.timers.is_registered(deferred_sync):
        bpy.app.timers.register(deferred_sync, first_interval=0.0)


def cancel_sync() -> None:
    """Unregister the pending ``deferred_sync`` timer (the add-on is disabled)."""
    if bpy.app.timers.is_registered(deferred_sync):
        bpy.app.timers.unregister(deferred_sync)
