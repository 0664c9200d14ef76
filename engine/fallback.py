"""Blender's evaluated mesh as draw items, for everything the GPU path does not draw itself.

Objects the GPU path cannot reproduce (other modifiers, B-Bones, curves, text, surfaces,
metaballs, instances...) are drawn from the depsgraph's evaluated mesh through the same passes.
``FallbackDrawer`` keeps one set of GPU streams per drawn instance and re-creates them only when
the evaluated mesh changed (a SHA-1 of the arrays read), so a redraw of an unchanged scene
creates no GPU objects, and streams of instances no longer drawn are released the same frame.

Curves, text, surfaces and metaballs appear twice in ``depsgraph.object_instances``: as the
object itself and as the evaluated mesh instance whose ``parent`` is that object.  Only the mesh
instance is drawn (once).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Dict, List, Tuple

import numpy as np

from .assets import Bounds

DRAWABLE_TYPES = {"MESH", "CURVE", "SURFACE", "FONT", "META"}
GEOMETRY_TYPES = DRAWABLE_TYPES - {"MESH"}


@dataclass
class FallbackItem:
    """A draw of Blender's evaluated mesh (same fields the passes read from a RenderItem)."""

    object_name: str
    stream: object
    world: np.ndarray
    world_bounds: Bounds
    local_bounds: Bounds
    material_name: str
    material_index: int
    node_index: int = -1
    primitive_index: int = 0
    palette: object = None
    influences: int = 0
    cast_shadow: bool = True
    object_id: int = 0
    fallback_reason: str = ""


def _finite_primitive(p):
    """Drop triangles touching non-finite vertices (they would poison bounds and pixels)."""
    ok = np.isfinite(p.positions).all(axis=1)
    if ok.all():
        return p, Bounds.from_points(p.positions)
    tri = np.asarray(p.indices).reshape(-1, 3)
    keep = ok[tri].all(axis=1)
    import dataclasses

    q = dataclasses.replace(p, indices=tri[keep].copy())
    return q, Bounds.from_points(p.positions[ok])


def _digest(cs, mats) -> str:
    h = hashlib.sha1()
    for a in (cs.positions, cs.normals, cs.tri_vertices, cs.tri_materials):
        h.update(np.ascontiguousarray(a).view(np.uint8))
    if cs.uv0 is not None:
        h.update(np.ascontiguousarray(cs.uv0).view(np.uint8))
    h.update("\0".join(mats).encode())
    return h.hexdigest()


class FallbackDrawer:
    """Per-session cache of fallback streams (see the module doc)."""

    def __init__(self):
        # instance key -> (digest, [(primitive, stream, local bounds, material name)])
        self._entries: Dict[tuple, Tuple[str, list]] = {}
        self.streams_created = 0

    @property
    def live_stream_count(self) -> int:
        return sum(len(e[1]) for e in self._entries.values())

    def clear(self) -> None:
        self._entries = {}

    def items(self, depsgraph, backend, skip_objects: set, reasons: Dict[str, str],
              import_error: str = "") -> List[FallbackItem]:
        from .importer.mesh import read_mesh, split_by_material

        # a curve/text/surface/metaball is drawn through its evaluated mesh instance only
        # (instances are only valid while iterating: two passes, nothing kept)
        has_geometry_instance = {inst.parent.original.name for inst in depsgraph.object_instances
                                 if inst.is_instance and inst.parent is not None
                                 and inst.parent.type in GEOMETRY_TYPES and inst.object.type == "MESH"}
        items: List[FallbackItem] = []
        seen: Dict[tuple, Tuple[str, list]] = {}
        for inst in depsgraph.object_instances:
            ob = inst.object
            if ob.type not in DRAWABLE_TYPES or not inst.show_self:
                continue
            if not inst.is_instance and ob.name in skip_objects:
                continue
            if not inst.is_instance and ob.type in GEOMETRY_TYPES and ob.original.name in has_geometry_instance:
                continue
            parent = inst.parent.original.name if inst.parent is not None else ""
            geometry_of = parent if (inst.is_instance and inst.parent is not None
                                     and inst.parent.type in GEOMETRY_TYPES) else ""
            name = geometry_of or ob.name
            key = (name, parent, ob.name, tuple(inst.persistent_id), bool(inst.is_instance))
            try:
                mesh = ob.to_mesh()
            except RuntimeError:
                continue
            if mesh is None:
                continue
            try:
                mats = [s.material.name if s.material is not None else "" for s in ob.material_slots]
                cs = read_mesh(mesh)
                nv = len(mesh.vertices)
            finally:
                ob.to_mesh_clear()
            digest = _digest(cs, mats)
            entry = seen.get(key) or self._entries.get(key)
            if entry is None or entry[0] != digest:
                built = []
                for p in split_by_material(cs, nv):
                    if p.indices.shape[0] == 0:
                        continue
                    p, lb = _finite_primitive(p)
                    if p.indices.shape[0] == 0:
                        continue
                    mname = mats[p.material_index] if 0 <= p.material_index < len(mats) else ""
                    built.append((p, backend.create_stream(p, cache_static=False), lb, mname))
                    self.streams_created += 1
                entry = (digest, built)
            seen[key] = entry
            world = np.array(inst.matrix_world)
            if geometry_of:
                reason = reasons.get(geometry_of) or f"{inst.parent.type.lower()} object"
            elif inst.is_instance:
                reason = "instance"
            else:
                reason = reasons.get(ob.name) or f"{ob.type.lower()} object"
            if ob.type == "MESH" and not inst.is_instance and ob.name not in reasons and import_error:
                reason = f"import error: {import_error}"
            for k, (p, stream, lb, mname) in enumerate(entry[1]):
                items.append(FallbackItem(object_name=name, stream=stream, world=world,
                                          world_bounds=lb.transformed(world), local_bounds=lb,
                                          material_name=mname, material_index=p.material_index,
                                          primitive_index=k, object_id=10000 + len(items),
                                          cast_shadow=True, fallback_reason=reason))
        self._entries = seen     # streams of instances not drawn this frame are released here
        return items
