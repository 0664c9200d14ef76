"""A static mesh whose vertices moved (an edit of positions only): its new asset made from the
held one, not read anew (issue 37: an F12 after moving a terrain vertex).

``AssetCache.moved_entry`` finds such an edit: the mesh's content fingerprint differs from the
held asset's in the vertex positions alone (every other attribute, the corner topology, the
normals' domain, shape keys and weights are the same).  With point-domain normals the corner
split (vertex, UV, colour) does not depend on where the vertices are, so the held primitive's
split stays: its triangles, UVs, colours and source vertices are handed on as they are (the GPU
backend then keeps their static buffers and index order, ``GpuBackend._moved_static``), and only
what follows the positions is made again: positions, normals, the outlines' smooth normals and,
with a UV map, the tangents, each exactly as ``read_mesh`` / ``split_by_material`` make them.

One thing moves with the vertices that is not a vertex: how Blender splits a quad or an n-gon
into triangles.  Every face with a moved vertex and more than three corners has its loop
triangles read back from Blender (one by one: a few faces) and compared with the held ones; any
that differs, or too many faces to read one by one, and the mesh is read anew.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from ...core.assets import Bounds, MeshAsset
from ...core.assets.readonly import hand_over
from ...core.geometry import smooth_normals
from .mesh import _get, compute_tangents, point_normals, vertex_positions

#: faces with a moved vertex read back one by one at most (beyond: the mesh is read anew, its
#: loop triangles in bulk)
MAX_FACES = 4096


def movable(asset) -> bool:
    """Whether ``moved_asset`` can make ``asset`` anew from moved vertices: one primitive, neither
    skin nor morph targets, drawn by the GPU path (the check sets aside only such entries)."""
    prims = getattr(asset, "primitives", ())
    return (getattr(asset, "fallback_reason", None) is None and len(prims) == 1
            and prims[0].skin is None and prims[0].joints is None and not prims[0].morph_targets)


def moved_asset(asset: MeshAsset, mesh, stats: Optional[dict] = None) -> Optional[MeshAsset]:
    """``asset`` (held, made from ``mesh`` before its vertices moved) made anew from ``mesh``'s
    positions, or None when the mesh must be read anew (not ``movable``, the normals are not per
    vertex, a position is not finite, a face's triangles changed)."""
    if not movable(asset) or mesh.shape_keys is not None or not point_normals(mesh):
        return None
    p = asset.primitives[0]
    nv = len(mesh.vertices)
    if nv != asset.vertex_count or len(mesh.loop_triangles) != p.indices.shape[0]:
        return None
    base = vertex_positions(mesh)
    if not np.isfinite(base).all():
        return None                         # (the full read names the vertex)
    src = p.source_vertices
    # every vertex, in order (the split of a mesh without UVs or colours; with them the split
    # vertices come in the order of their corners)
    whole = src.shape[0] == nv and bool((src[1:] > src[:-1]).all())
    pos = base if whole else base[src]
    if pos.shape != p.positions.shape:
        return None
    old = p.positions
    hit = (old[:, 0] != pos[:, 0]) | (old[:, 1] != pos[:, 1]) | (old[:, 2] != pos[:, 2])
    if not same_triangles(mesh, p, src[hit], nv, whole):
        return None
    vn = _get(mesh.vertex_normals, "vector", nv, 3, np.float32)
    nor = vn if whole else vn[src]
    tan = compute_tangents(pos, nor, p.uv0, p.indices) if p.uv0 is not None else None
    h = hand_over                            # (fresh arrays: the asset takes them as they are)
    prim = dataclasses.replace(p, positions=h(pos), normals=h(nor), smooth_normals=h(smooth_normals(nor, src, nv)),
                               tangents=h(tan), bounds=Bounds.empty())
    if stats is not None:
        stats["moved_meshes"] = stats.get("moved_meshes", 0) + 1
    return dataclasses.replace(asset, primitives=(prim,))


def same_triangles(mesh, primitive, moved_vertices: np.ndarray, vertex_count: int, whole: bool = False) -> bool:
    """Whether every loop triangle of the faces with a vertex in ``moved_vertices`` still joins
    the vertices of ``primitive``'s triangle of the same index (the primitive holds every loop
    triangle, in Blender's order).  A face's triangles are found from the held ones that touch
    a moved vertex (each corner of a face is in one of its triangles).  ``whole``: the
    primitive's vertices are the mesh's, in order (its source vertices need no look-up)."""
    if not moved_vertices.size:
        return True
    hit = np.zeros(vertex_count, bool)
    hit[moved_vertices] = True
    src = primitive.source_vertices
    tris = primitive.indices
    near = np.zeros(tris.shape[0], bool)
    for c in range(3):                       # (the 3 corners, not triangles)
        near |= hit[tris[:, c]] if whole else hit[src[tris[:, c]]]
    cand = np.flatnonzero(near)
    if cand.size > 3 * MAX_FACES:
        return False
    looptris = mesh.loop_triangles
    faces = sorted({looptris[int(t)].polygon_index for t in cand})
    if len(faces) > MAX_FACES:
        return False
    polygons = mesh.polygons
    for f in faces:
        poly = polygons[f]
        if poly.loop_total < 4:
            continue                         # (a triangle is its own loop triangle)
        first = poly.loop_start - 2 * f      # (Blender's face -> triangles offset)
        for t in range(first, first + poly.loop_total - 2):
            lt = looptris[t]
            if lt.polygon_index != f or tuple(lt.vertices) != tuple(src[tris[t]].tolist()):
                return False
    return True
