"""MToon material parameters for the passes.

``resolve_material(material) -> MToonParams`` is cached per material name. Entries are dropped by
``invalidate(name)`` (called by our property update callbacks, by a depsgraph_update_post handler
for Material / node-tree updates, on undo/redo/file load, and by the session if it wants to), and
each hit also compares a cheap fingerprint (pointer, enabled flag, node tree pointer, node and link
counts), so node trees are never walked on a cache hit.
"""
from __future__ import annotations

import bpy

from .params import TEXTURE_SLOTS, MToonParams, TextureRef  # noqa: F401  (public API)

_cache: dict = {}   # material name -> (fingerprint, MToonParams)


def _fingerprint(material) -> tuple:
    props = getattr(material, "stylized_mtoon", None)
    tree = getattr(material, "node_tree", None)
    return (material.as_pointer(),
            bool(props.enabled) if props is not None else False,
            tree.as_pointer() if tree is not None else 0,
            len(tree.nodes) if tree is not None else 0,
            len(tree.links) if tree is not None else 0)


def resolve_material(material) -> MToonParams:
    """MToonParams for ``material`` (an original or evaluated bpy.types.Material, or None)."""
    from .resolve import resolve_uncached

    if material is None:
        return resolve_uncached(None)
    material = getattr(material, "original", None) or material
    try:
        key = material.name
        fp = _fingerprint(material)
    except ReferenceError:
        return MToonParams()
    hit = _cache.get(key)
    if hit is not None and hit[0] == fp:
        return hit[1]
    params = resolve_uncached(material)
    _cache[key] = (fp, params)
    return params


def describe(params: MToonParams) -> dict:
    """What was resolved, for reports (Stats, F12 logs, tools/compare_look.py): source, base texture
    name, vertex colours, alpha mode, unlit, metallic and the reader's unmapped messages."""
    ref = (params.textures or {}).get("base_color")
    img = getattr(ref, "image", None) if ref is not None else None
    return {
        "source": params.source,
        "base_texture": getattr(img, "name", None) if img is not None else None,
        "vertex_colors": bool(params.vertex_colors),
        "alpha_mode": params.alpha_mode + (f" {params.alpha_cutoff:g}" if params.alpha_mode == "MASK" else ""),
        "unlit": bool(params.unlit),
        "metallic": float(params.metallic),
        "unmapped": tuple(params.unmapped),
    }


def unmapped_report(material_names) -> list:
    """Every unmapped message of the named materials (resolved through the cache), in name order."""
    out = []
    for name in sorted(set(material_names)):
        mat = bpy.data.materials.get(name) if name else None
        if mat is not None:
            out.extend(resolve_material(mat).unmapped)
    return out


def invalidate(material_name=None) -> None:
    """Forget the cached params of one material (by name), or of all materials (None)."""
    if material_name is None:
        _cache.clear()
    else:
        _cache.pop(material_name, None)


def cache_size() -> int:
    return len(_cache)


# --- handlers ---------------------------------------------------------------------------------

@bpy.app.handlers.persistent
def _on_depsgraph_update(scene, depsgraph=None):
    if depsgraph is None or not _cache:
        return
    for update in depsgraph.updates:
        idb = update.id
        if isinstance(idb, bpy.types.Material):
            invalidate(getattr(idb.original, "name", idb.name))
        elif isinstance(idb, bpy.types.NodeTree):
            # a node group (e.g. the VRM add-on's output group) may be shared by many materials
            invalidate()
            return
        elif isinstance(idb, bpy.types.Image):
            invalidate()
            return


@bpy.app.handlers.persistent
def _on_reset(*_args):
    invalidate()


_HANDLERS = (("depsgraph_update_post", _on_depsgraph_update), ("undo_post", _on_reset),
             ("redo_post", _on_reset), ("load_post", _on_reset))


def register():
    from . import properties

    properties.register()
    for name, fn in _HANDLERS:
        lst = getattr(bpy.app.handlers, name)
        if fn not in lst:
            lst.append(fn)


def unregister():
    from . import properties

    for name, fn in _HANDLERS:
        lst = getattr(bpy.app.handlers, name)
        while fn in lst:
            lst.remove(fn)
    invalidate()
    properties.unregister()
