"""RenderExtractor and RenderItem (seed: RenderExtractor). numpy only, no bpy/gpu.

The four-row table of the seed:

=================  ============================  ==========================================  ===========
primitive          stream                        local bounds                                palette
=================  ============================  ==========================================  ===========
static             RuntimeMesh                   asset bounds                                None
morph only         RuntimeMeshInstance           morphed bounds                              None
skin only          RuntimeMesh                   palette.current_local_bounds                palette
morph + skin       RuntimeMeshInstance           skin bounds expanded by                     palette
                                                 maximum_position_delta * max linear scale
=================  ============================  ==========================================  ===========

Only cheap per-frame preconditions are checked here (pose belongs to the scene, world matrices
clean, counts match); the deep asset checks ran at initialisation.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Sequence

import numpy as np

from ..assets.types import Bounds, bounds_of


class ExtractionError(RuntimeError):
    """A per-frame precondition of RenderExtractor.extract was violated."""


@dataclass
class RenderItem:
    node_index: int
    primitive_index: int
    object_name: str
    material_index: int
    material_name: str
    stream: object                     # backend stream (RuntimeMesh or RuntimeMeshInstance)
    world: np.ndarray                  # (4,4) float64
    world_bounds: Bounds
    palette: object = None             # SkinningPalette or None
    influences: int = 0                # 0, 4 or 8
    local_bounds: Bounds = field(default_factory=Bounds.empty)
    cast_shadow: bool = True
    object_id: int = 0
    primitive: object = None           # the PrimitiveAsset (for passes needing asset data)
    morphed: bool = False

    @property
    def skinned(self) -> bool:
        return self.palette is not None


def expand_bounds(b: Bounds, radius: float) -> Bounds:
    if radius <= 0.0 or b.is_empty:
        return b
    lo, hi = b.minimum - radius, b.maximum + radius
    lo.flags.writeable = False
    hi.flags.writeable = False
    return bounds_of(lo, hi)


def frustum_planes(view_projection: np.ndarray) -> np.ndarray:
    """(6,4) planes (a,b,c,d), inside where a*x+b*y+c*z+d >= 0, from an OpenGL clip matrix."""
    m = np.asarray(view_projection, dtype=np.float64)
    r = m
    planes = np.array([r[3] + r[0], r[3] - r[0], r[3] + r[1], r[3] - r[1], r[3] + r[2], r[3] - r[2]])
    n = np.linalg.norm(planes[:, :3], axis=1, keepdims=True)
    return planes / np.where(n == 0, 1.0, n)


def bounds_outside_many(planes: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """(N,) True where box (lo[i], hi[i]) lies entirely outside one of the planes."""
    n = planes[None, :, :3]                                               # (1,6,3)
    p = np.where(n >= 0.0, hi[:, None, :], lo[:, None, :])               # positive vertex (N,6,3)
    return np.any(np.sum(n * p, axis=2) + planes[None, :, 3] < 0.0, axis=1)


def bounds_outside(planes: np.ndarray, b: Bounds) -> bool:
    """True when the box is entirely outside one of the planes."""
    if b.is_empty:
        return True
    return bool(bounds_outside_many(planes, np.asarray(b.minimum, np.float64)[None],
                                    np.asarray(b.maximum, np.float64)[None])[0])


class RenderExtractor:
    def __init__(self):
        self.last_error: Optional[str] = None
        self.culled_count = 0

    def _fail(self, msg: str, strict: bool) -> list:
        self.last_error = msg
        if strict:
            raise ExtractionError(msg)
        return []

    def extract(self, scene, pose, palette_set, mesh_instances: Sequence, runtime_meshes: Sequence,
                frustum: Optional[np.ndarray] = None, strict: bool = False,
                shadow_casters: Optional[Sequence[bool]] = None) -> List[RenderItem]:
        """Flatten the scene into RenderItems.

        ``mesh_instances``: one entry per scene node (RuntimeMeshInstance or None);
        ``runtime_meshes``: one RuntimeMesh per ``scene.meshes`` entry; ``palette_set`` may be None
        for a scene without skins; ``frustum``: (6,4) planes (see ``frustum_planes``) or None;
        ``shadow_casters``: optional per-node flags for ``cast_shadow``.
        A violated precondition returns [] (``last_error`` says why) or raises with ``strict``.
        """
        self.last_error = None
        self.culled_count = 0
        if not pose.is_for_scene(scene):
            return self._fail("pose does not belong to this scene", strict)
        world_all = pose.world_matrices
        if world_all is None:
            return self._fail("pose world matrices are dirty (update_world_matrices not run)", strict)
        n = scene.node_count
        if pose.node_count != n:
            return self._fail(f"pose node count {pose.node_count} != scene node count {n}", strict)
        if len(mesh_instances) != n:
            return self._fail(f"mesh instance count {len(mesh_instances)} != scene node count {n}", strict)
        if palette_set is not None and len(palette_set.palette_lookup) != n:
            return self._fail(f"palette lookup count {len(palette_set.palette_lookup)} != scene node count {n}",
                              strict)
        if len(runtime_meshes) != len(scene.meshes):
            return self._fail(f"runtime mesh count {len(runtime_meshes)} != scene mesh count {len(scene.meshes)}",
                              strict)
        items: List[RenderItem] = []
        mesh_indices = scene.mesh_indices
        cands = []          # (node, world, object name, cast, primitive index, primitive, stream, palette, local, morphed)
        for node in np.flatnonzero(mesh_indices >= 0):
            node = int(node)
            mesh = scene.meshes[int(mesh_indices[node])]
            rmesh = runtime_meshes[int(mesh_indices[node])]
            inst = mesh_instances[node]
            world = np.array(world_all[node])
            obj_name = scene.nodes[node].object_name
            cast = True if shadow_casters is None else bool(shadow_casters[node])
            for pi, prim in enumerate(mesh.primitives):
                pinst = inst.primitives[pi] if inst is not None and pi < len(inst.primitives) else None
                morphed = pinst is not None and pinst.has_morphs and pinst.stream is not None
                palette = palette_set.find(node, pi) if (palette_set is not None and prim.skin is not None) else None
                if morphed and pinst is not None:     # (morphed implies pinst)
                    stream = pinst.stream
                else:
                    stream = rmesh.stream(pi) if rmesh is not None else None
                if stream is None:
                    continue
                if palette is not None:
                    local = palette.current_local_bounds
                    if morphed and pinst is not None:
                        local = expand_bounds(local, pinst.maximum_position_delta * palette.max_linear_scale)
                elif morphed and pinst is not None:
                    local = pinst.local_bounds
                else:
                    local = prim.bounds
                cands.append((node, world, obj_name, cast, pi, prim, stream, palette, local, morphed))
        if not cands:
            return items
        # every item's world box at once: centre through the matrix, half extents through |R|
        # (the exact box of the moved box); an empty local box stays empty
        lo = np.array([c[8].minimum for c in cands], np.float64).reshape(-1, 3)
        hi = np.array([c[8].maximum for c in cands], np.float64).reshape(-1, 3)
        empty = np.any(lo > hi, axis=1)
        with np.errstate(invalid="ignore"):
            centre = np.where(empty[:, None], 0.0, 0.5 * (lo + hi))
            half = np.where(empty[:, None], 0.0, 0.5 * (hi - lo))
        w = world_all[np.array([c[0] for c in cands], np.intp)]
        wc = np.einsum("nij,nj->ni", w[:, :3, :3], centre) + w[:, :3, 3]
        wh = np.einsum("nij,nj->ni", np.abs(w[:, :3, :3]), half)
        wlo = wc - wh
        whi = wc + wh
        wlo.flags.writeable = False
        whi.flags.writeable = False
        out = empty if frustum is None else (bounds_outside_many(frustum, wlo, whi) | empty)
        cull = frustum is not None
        for k, (node, world, obj_name, cast, pi, prim, stream, palette, local, morphed) in enumerate(cands):
            if cull and out[k]:
                self.culled_count += 1
                continue
            items.append(RenderItem(
                node_index=node, primitive_index=pi, object_name=obj_name,
                material_index=int(prim.material_index), material_name=prim.material_name,
                stream=stream, world=world, world_bounds=local if empty[k] else bounds_of(wlo[k], whi[k]),
                palette=palette, influences=prim.influences if palette is not None else 0,
                local_bounds=local, cast_shadow=cast, object_id=node + 1,
                primitive=prim, morphed=morphed))
        return items
