"""MToon material parameters for the passes.

``resolve_material(material, cache=None) -> MToonParams``: through a session's
``MaterialCache`` (engine/features/materials/cache.py) when one is given, else read anew.  No state lives
in this module: the viewport session owns its cache and invalidates it from Blender's depsgraph
updates.
"""
from __future__ import annotations

from ...core.assets.material import TEXTURE_SLOTS, MToonParams, TextureRef  # noqa: F401  (public API)


def resolve_material(material, cache=None) -> MToonParams:
    """MToonParams for ``material`` (an original or evaluated bpy.types.Material, or None),
    through ``cache`` (a ``MaterialCache``) when given."""
    if cache is not None:
        return cache.resolve(material)
    from .resolve import resolve_uncached

    if material is not None:
        material = getattr(material, "original", None) or material
    try:
        return resolve_uncached(material)
    except ReferenceError:
        return MToonParams()


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


def register():
    from . import properties

    properties.register()


def unregister():
    from . import properties

    properties.unregister()
