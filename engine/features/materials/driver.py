"""Materials on one session: ``MaterialsDriver`` resolves the MToon parameters of a frame's
materials and says what of them cannot be drawn (docs/architecture.md).

The session makes one driver (``session.materials``) and calls ``frame(items, binds)`` for the
frame's materials (each with the frame's VRM expression colour / UV binds on a copy:
``engine.features.vrm.binds``), ``losses(items, materials)`` for the Stats panel and the render
log, and ``invalidate(name)`` for every material (None: every one) Blender's depsgraph updates
name.  A viewport session keeps the resolved parameters (``cache``: a ``MaterialCache``) until an
update names the material; a final render reads every material anew each frame (a few node
trees: cheap), so a script that recolours a material between frames is never stale.
"""
from __future__ import annotations

from ..vrm import binds as vrm_binds
from .cache import MaterialCache
from .losses import frame_losses
from .resolve import resolve_uncached


class MaterialsDriver:
    """The MToon parameters of one session's frames (see the module docstring)."""

    def __init__(self, viewport: bool):
        self.viewport = viewport
        self.cache = MaterialCache()    # viewport: MToon params until a depsgraph update names the material

    def frame(self, items, binds=None) -> dict:
        """{material name: MToonParams} of the materials ``items`` draw; ``binds``: the frame's
        VRM expression material binds (``VrmDriver.material_binds``, the reader's expression step), applied on a copy
        (never on the cached params)."""
        import bpy

        resolve = self.cache.resolve if self.viewport else resolve_uncached
        out = {}
        for name in {it.material_name for it in items}:
            out[name] = vrm_binds.apply(name, resolve(bpy.data.materials.get(name) if name else None), binds)
        return out

    def losses(self, items, materials: dict) -> list:
        """One line per missing image and per object whose every drawn material is fully
        transparent (``losses.frame_losses``)."""
        return frame_losses(items, materials)

    def invalidate(self, material_name=None) -> None:
        """A depsgraph update named the material (None: a node group or image any material may
        use): its parameters are resolved again."""
        self.cache.invalidate(material_name)
