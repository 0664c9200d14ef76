"""A material -> MToonParams cache kept by a session's ``MaterialsDriver`` (driver.py; the
viewport's frames use it).

Entries are dropped by ``invalidate(name)``: the session calls it for every Material named in
Blender's depsgraph updates (an edit of our MToon properties, of a node or of an image tags the
material; a node group or image update clears everything).  Each hit also compares a cheap
fingerprint (pointer, enabled flag, node tree pointer, node and link counts), so node trees are
never walked on a cache hit.  Final renders read every material anew (``resolve_uncached``).
"""
from __future__ import annotations

from ...core.assets.material import MToonParams


def fingerprint(material) -> tuple:
    props = getattr(material, "stylized_mtoon", None)
    tree = getattr(material, "node_tree", None)
    return (material.as_pointer(),
            bool(props.enabled) if props is not None else False,
            tree.as_pointer() if tree is not None else 0,
            len(tree.nodes) if tree is not None else 0,
            len(tree.links) if tree is not None else 0)


class MaterialCache:
    """MToonParams per material name, with the fingerprint each was resolved under."""

    def __init__(self):
        self._entries = {}      # material name -> (fingerprint, MToonParams)

    def resolve(self, material) -> MToonParams:
        """MToonParams for ``material`` (an original or evaluated bpy.types.Material, or None)."""
        from .resolve import resolve_uncached

        if material is None:
            return resolve_uncached(None)
        material = getattr(material, "original", None) or material
        try:
            key = material.name
            fp = fingerprint(material)
        except ReferenceError:
            return MToonParams()
        hit = self._entries.get(key)
        if hit is not None and hit[0] == fp:
            return hit[1]
        params = resolve_uncached(material)
        self._entries[key] = (fp, params)
        return params

    def invalidate(self, material_name=None) -> None:
        """Forget the params of one material (by name), or of all materials (None)."""
        if material_name is None:
            self._entries.clear()
        else:
            self._entries.pop(material_name, None)

    def __len__(self) -> int:
        return len(self._entries)
