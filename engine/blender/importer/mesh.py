"""Blender mesh -> per-material triangle primitives (numpy, bulk ``foreach_get``).

Used for the asset import (original mesh) and for the CPU fallback path (the evaluated mesh of
the depsgraph), so both draw through the same vertex layout.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ...core.geometry import smooth_normals
from .morph import sorted_unique, unique_inverse, unique_rows


@dataclass
class CornerSplit:
    """Triangulated mesh with vertices split where corner attributes differ."""

    positions: np.ndarray        # (V,3) float32
    normals: np.ndarray          # (V,3) float32
    uv0: Optional[np.ndarray]    # (V,2) float32
    source_vertices: np.ndarray  # (V,) int64 Blender vertex index
    tri_vertices: np.ndarray     # (T,3) uint32 indices into the split vertices
    tri_materials: np.ndarray    # (T,) int64 material index per triangle
    corner_to_split: np.ndarray  # (L,) int32 split vertex of each Blender corner (loop), -1: not drawn
    colors: Optional[np.ndarray] = None   # (V,4) float32 linear RGBA of the render colour attribute


def _get(coll, attr: str, count: int, width: int, dtype) -> np.ndarray:
    a = np.empty(count * width, dtype=dtype)
    if count:
        coll.foreach_get(attr, a)
    return a.reshape(count, width) if width > 1 else a


def vertex_positions(mesh) -> np.ndarray:
    """(V,3) float32 vertex positions: the ``position`` attribute (one bulk copy, about 2 ms for
    1,000,000 vertices), else ``MeshVertex.co`` (a per-item read, about 40 ms for as many)."""
    nv = len(mesh.vertices)
    attr = mesh.attributes.get("position")
    if (attr is not None and attr.domain == "POINT" and attr.data_type == "FLOAT_VECTOR"
            and len(attr.data) == nv):
        return _get(attr.data, "vector", nv, 3, np.float32)
    return _get(mesh.vertices, "co", nv, 3, np.float32)


#: rows ``_gather_in_place`` takes at once
GATHER_BLOCK = 1 << 16


def _gather_in_place(table: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``table[index]`` written over ``index`` (same item size), a block of rows at a time: a big
    mesh's import makes no second triangle-sized array."""
    flat = index.reshape(-1)
    for a in range(0, flat.size, GATHER_BLOCK):
        flat[a:a + GATHER_BLOCK] = table[flat[a:a + GATHER_BLOCK]]
    return index


def color_attribute(mesh):
    """The colour attribute a Color Attribute node with no name reads: the render colour
    attribute (else the active one, else the first), or None."""
    ca = getattr(mesh, "color_attributes", None)
    if ca is None or not len(ca):
        return None
    idx = ca.render_color_index
    if 0 <= idx < len(ca):
        return ca[idx]
    return ca.active_color if ca.active_color is not None else ca[0]


def read_corner_colors(mesh, loop_verts: np.ndarray) -> Optional[np.ndarray]:
    """(L,4) float32 linear RGBA per corner of the render colour attribute (corner or point domain;
    byte colours are converted from sRGB by Blender's ``color`` accessor), or None."""
    attr = color_attribute(mesh)
    if attr is None or attr.domain not in ("CORNER", "POINT"):
        return None
    n = len(attr.data)
    col = _get(attr.data, "color", n, 4, np.float32)
    if attr.domain == "POINT":
        return col[loop_verts] if loop_verts.size else np.zeros((0, 4), np.float32)
    return col


def _int_attribute(mesh, name: str, domain: str, count: int) -> Optional[np.ndarray]:
    """(count,) int64 values of the INT attribute ``name`` on ``domain`` (the bulk attribute
    path), or None when the mesh has no such attribute."""
    attr = mesh.attributes.get(name)
    if attr is None or attr.domain != domain or attr.data_type != "INT" or len(attr.data) != count:
        return None
    return _get(attr.data, "value", count, 1, np.int32).astype(np.int64)


def corner_verts(mesh, dtype: type[np.generic] = np.int64) -> np.ndarray:
    """(L,) vertex of each corner (int64, or ``dtype``): the ``.corner_vert`` attribute (a bulk
    copy), else ``MeshLoop.vertex_index`` (a per-item read, about 13 ms for 200k corners)."""
    nl = len(mesh.loops)
    attr = mesh.attributes.get(".corner_vert")
    if attr is not None and attr.domain == "CORNER" and attr.data_type == "INT" and len(attr.data) == nl:
        out = _get(attr.data, "value", nl, 1, np.int32)
        return out if out.dtype == dtype else out.astype(dtype)
    return _get(mesh.loops, "vertex_index", nl, 1, dtype)


def triangle_materials(mesh, nt: int) -> np.ndarray:
    """(T,) int64 material index of each loop triangle: its polygon's (``loop_triangle_polygons``
    and the FACE attribute ``material_index``, both bulk copies; ``MeshLoopTriangle.material_index``
    is a per-item read of about 100 ms for 100k triangles), 0 where the mesh has no such attribute."""
    if not nt:
        return np.zeros(0, np.int64)
    ltp = getattr(mesh, "loop_triangle_polygons", None)
    if ltp is None or len(ltp) != nt:
        return _get(mesh.loop_triangles, "material_index", nt, 1, np.int64)
    polys = _get(ltp, "value", nt, 1, np.int32)
    mat = _int_attribute(mesh, "material_index", "FACE", len(mesh.polygons))
    return mat[polys] if mat is not None else np.zeros(nt, np.int64)


def point_normals(mesh) -> bool:
    """Whether every corner's normal is its vertex's (``Mesh.normals_domain == 'POINT'``: smooth
    faces, no sharp edges, no corner custom normals).  Then a corner's normal says nothing its
    vertex does not, and the normals are read per vertex (V rows, not L)."""
    return getattr(mesh, "normals_domain", "CORNER") == "POINT"


def read_mesh(mesh, uv_name: Optional[str] = None, colors: bool = True,
              positions: Optional[np.ndarray] = None) -> CornerSplit:
    """Triangulate ``mesh`` from its loop triangles and split corners by (vertex, normal, uv,
    colour).  ``colors``: read the render colour attribute (``CornerSplit.colors``).
    ``positions``: the (V,3) float32 vertex positions when the caller has read them already.

    Point-domain normals (``point_normals``): the normal is a function of the vertex, so it is no
    part of the split key; with neither UVs nor a colour attribute the split vertices are the
    used vertices themselves (no per-corner key at all: a big static mesh is read with one bulk
    copy per array and no sort)."""
    nv = len(mesh.vertices)
    nl = len(mesh.loops)
    if positions is None:
        positions = vertex_positions(mesh)
    loop_verts = corner_verts(mesh, np.int32)
    by_vertex = bool(nl) and point_normals(mesh)
    # corner normals honour custom split normals and sharp edges/faces (Blender >= 4.1)
    vert_normals = normals = None
    if by_vertex:
        vert_normals = _get(mesh.vertex_normals, "vector", nv, 3, np.float32)
    elif nl:
        cn = mesh.corner_normals
        normals = _get(cn, "vector", len(cn), 3, np.float32)
        if normals.shape[0] != nl:  # defensive: should never happen
            normals = np.zeros((nl, 3), np.float32)
    else:
        normals = np.zeros((0, 3), np.float32)
    uv = None
    uv_layer = None
    if uv_name is not None:
        uv_layer = mesh.uv_layers.get(uv_name)
    elif len(mesh.uv_layers):
        uv_layer = mesh.uv_layers.active or mesh.uv_layers[0]
    if uv_layer is not None and nl:
        uv = _get(uv_layer.uv, "vector", nl, 2, np.float32)
    col = read_corner_colors(mesh, loop_verts) if colors and nl else None

    nt = len(mesh.loop_triangles)
    # int32: Blender's own index type (an int64 buffer takes a slower, converting copy)
    tri_loops = _get(mesh.loop_triangles, "loops", nt, 3, np.int32)
    tri_mat = triangle_materials(mesh, nt)

    split_corners = None
    if nt and vert_normals is not None and uv is None and col is None:       # (by_vertex)
        # one split vertex per drawn vertex, in vertex order: int32 indices, nothing per corner
        # but the corner -> split map (a big static mesh's import holds little besides its output:
        # the triangles' corners become their vertices, then their split vertices, in place)
        drawn = np.zeros(nl, bool)
        drawn[tri_loops.ravel()] = True
        tv = _gather_in_place(loop_verts, tri_loops)
        del tri_loops
        src = sorted_unique(nv, tv.ravel())
        if src.size == nv:
            # every vertex drawn (a terrain): the split vertices are the vertices themselves
            tri_vertices = tv.view(np.uint32)
            corner_to_split = loop_verts                       # (read above for this split alone)
            corner_to_split[~drawn] = -1
            return CornerSplit(positions=positions, normals=vert_normals, uv0=None, source_vertices=src,
                               tri_vertices=tri_vertices, tri_materials=tri_mat, corner_to_split=corner_to_split)
        lut = np.zeros(nv, np.uint32)
        lut[src] = np.arange(src.size, dtype=np.uint32)
        tri_vertices = _gather_in_place(lut, tv.view(np.uint32))   # (vertex indices < 2**31)
        corner_to_split = lut[loop_verts].view(np.int32)      # (fresh: lut's rows; < 2**31)
        corner_to_split[~drawn] = -1
        return _split(positions, vert_normals[src], None, src, tri_vertices, tri_mat, corner_to_split, None)
    loop_verts = loop_verts.astype(np.int64)
    # Only corners used by triangles matter (loose edges/verts are not drawn).
    used = sorted_unique(nl, tri_loops.ravel()) if nt else np.zeros(0, np.int64)
    if used.size:
        # one float64 row per corner: (vertex, normal, uv, colour); equal rows are one split vertex
        cols = [loop_verts[used][:, None]] + [c[used] for c in (normals, uv, col) if c is not None]
        key = np.empty((used.size, sum(c.shape[1] for c in cols)))
        x = 0
        for c in cols:
            key[:, x:x + c.shape[1]] = c
            x += c.shape[1]
        first, inverse = unique_rows(key, loop_verts[used], nv)
        del key, cols
        split_corners = used[first]                  # representative corner of each split vertex
        src = loop_verts[split_corners]
    else:
        src = inverse = np.zeros(0, np.int64)
    corner_to_split = np.full(nl, -1, np.int32)
    corner_to_split[used] = inverse.reshape(-1)
    tri_vertices = corner_to_split[tri_loops].astype(np.uint32) if nt else np.zeros((0, 3), np.uint32)
    if not src.size:
        split_normals = np.zeros((0, 3), np.float32)
    elif vert_normals is not None:
        split_normals = vert_normals[src]
    else:
        assert normals is not None                   # read per corner whenever not per vertex
        split_normals = normals[split_corners]

    def per_split(c):
        if c is None:
            return None
        return c[split_corners] if split_corners is not None else c[:0]

    return _split(positions, split_normals, per_split(uv), src, tri_vertices, tri_mat, corner_to_split, per_split(col))


def _split(positions, normals, uv, src, tri_vertices, tri_mat, corner_to_split, colors) -> CornerSplit:
    return CornerSplit(
        positions=positions[src] if src.size else np.zeros((0, 3), np.float32),
        normals=normals,
        uv0=uv,
        source_vertices=src,
        tri_vertices=tri_vertices,
        tri_materials=tri_mat,
        corner_to_split=corner_to_split,
        colors=colors,
    )


def compute_tangents(positions: np.ndarray, normals: np.ndarray, uv: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """Per-vertex tangents (xyz, handedness) from UV derivatives, Gram-Schmidt against the normal."""
    v = positions.shape[0]
    tan = np.zeros((v, 3), np.float64)
    bit = np.zeros((v, 3), np.float64)
    if tris.shape[0]:
        t = tris.astype(np.int64)
        p0, p1, p2 = positions[t[:, 0]], positions[t[:, 1]], positions[t[:, 2]]
        w0, w1, w2 = uv[t[:, 0]], uv[t[:, 1]], uv[t[:, 2]]
        e1, e2 = (p1 - p0).astype(np.float64), (p2 - p0).astype(np.float64)
        d1, d2 = (w1 - w0).astype(np.float64), (w2 - w0).astype(np.float64)
        det = d1[:, 0] * d2[:, 1] - d2[:, 0] * d1[:, 1]
        r = np.where(np.abs(det) > 1e-20, 1.0 / np.where(det == 0, 1, det), 0.0)[:, None]
        sdir = (e1 * d2[:, 1:2] - e2 * d1[:, 1:2]) * r
        tdir = (e2 * d1[:, 0:1] - e1 * d2[:, 0:1]) * r
        # per-vertex sums over the triangle corners (bincount: the corners in the same order
        # as a loop of np.add.at, one pass per component instead of an unbuffered scatter)
        idx = t.T.ravel()
        for c in range(3):
            tan[:, c] = np.bincount(idx, weights=np.tile(sdir[:, c], 3), minlength=v)
            bit[:, c] = np.bincount(idx, weights=np.tile(tdir[:, c], 3), minlength=v)
    n = normals.astype(np.float64)
    tan = tan - n * np.sum(n * tan, axis=1, keepdims=True)
    ln = np.linalg.norm(tan, axis=1, keepdims=True)
    bad = ln[:, 0] < 1e-12
    # degenerate UVs: any vector perpendicular to the normal
    if bad.any():
        alt = np.cross(n[bad], np.array([0.0, 0.0, 1.0]))
        alt2 = np.cross(n[bad], np.array([0.0, 1.0, 0.0]))
        small = np.linalg.norm(alt, axis=1) < 1e-6
        alt[small] = alt2[small]
        tan[bad] = alt
        ln = np.linalg.norm(tan, axis=1, keepdims=True)
    tan /= np.maximum(ln, 1e-12)
    sign = np.where(np.sum(np.cross(n, tan) * bit, axis=1) < 0.0, -1.0, 1.0)
    return np.hstack([tan, sign[:, None]]).astype(np.float32)


@dataclass
class PrimitiveArrays:
    material_index: int
    positions: np.ndarray
    normals: np.ndarray
    uv0: Optional[np.ndarray]
    tangents: Optional[np.ndarray]
    smooth_normals: np.ndarray
    indices: np.ndarray          # (T,3) uint32 local to this primitive
    source_vertices: np.ndarray  # (V,) Blender vertex index
    split_vertices: np.ndarray   # (V,) index into CornerSplit vertices
    colors: Optional[np.ndarray] = None   # (V,4) float32 linear RGBA (render colour attribute)


def split_by_material(cs: CornerSplit, vertex_count: int) -> list:
    """One PrimitiveArrays per material index that has triangles (unused slots are skipped)."""
    out = []
    if cs.tri_vertices.shape[0] == 0:
        return out
    smooth = smooth_normals(cs.normals, cs.source_vertices, vertex_count)
    tm = cs.tri_materials
    # (material indices are small: counted, not sorted; np.unique sorted 2,000,000 of them)
    mats = np.flatnonzero(np.bincount(tm)) if int(tm.min()) >= 0 else np.unique(tm)
    if mats.size == 1:
        # one material: every split vertex is drawn by it (split vertices come from triangle
        # corners), in the split's order; the primitive holds the split's arrays, not copies
        verts = np.arange(cs.positions.shape[0])
        tan = compute_tangents(cs.positions, cs.normals, cs.uv0, cs.tri_vertices) if cs.uv0 is not None else None
        return [PrimitiveArrays(int(mats[0]), cs.positions, cs.normals, cs.uv0, tan, smooth, cs.tri_vertices,
                                cs.source_vertices, verts, cs.colors)]
    for mat in mats:
        tris = cs.tri_vertices[cs.tri_materials == mat].astype(np.int64)
        verts, local = unique_inverse(tris.ravel(), cs.positions.shape[0])
        idx = local.reshape(-1, 3).astype(np.uint32)
        pos = cs.positions[verts]
        nor = cs.normals[verts]
        uv = cs.uv0[verts] if cs.uv0 is not None else None
        tan = compute_tangents(pos, nor, uv, idx) if uv is not None else None
        col = cs.colors[verts] if cs.colors is not None else None
        out.append(PrimitiveArrays(int(mat), pos, nor, uv, tan, smooth[verts], idx, cs.source_vertices[verts], verts,
                                   col))
    return out
