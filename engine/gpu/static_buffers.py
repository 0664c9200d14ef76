"""Static vertex buffers of primitives with neither skin nor morph targets (issue 37 item 3: a
big static mesh uploads only what its draws read), and the float32 copies ``attr_fill`` takes.

A skinned or morphed primitive's static buffer holds the whole static layout (layout.py: uv,
joints, weights, joints_hi, weights_hi, morph_span, col: 96 bytes a vertex); a static one only
its colour and, when it has them, its UVs (4-24 bytes: a colour the mesh lacks is stored
compact, layout.COMPACT_DEFAULTS): its draws run with
``skin_influences`` 0 and ``morph_mode`` 0, so glsl/skinning.glsl reads no joints, weights or
spans, and a left-out ``uv`` reads Blender's default attribute value, (0, 0), as the zeros the
whole layout holds.
"""
from __future__ import annotations

import numpy as np

from .chunks import CHUNK_TRIANGLES, chunk_order
from .layout import (
    DYNAMIC_ATTRIBUTES,
    SLIM_STATIC_ATTRIBUTES,
    VERTEX_ATTRIBUTES,
    attribute_bytes,
    compact_fill,
    vertex_format,
)


def f32(a, width, n):
    """A C-contiguous float32 (n, width) array (zeros for None) for ``attr_fill``, which copies
    any C-contiguous buffer of the right element type (``PyObject_GetBuffer`` with
    ``PyBUF_STRIDES | PyBUF_ND``: read-only buffers too), so an asset's read-only arrays go in
    as they are (a big mesh's upload made no full-size copies of its positions and normals)."""
    if a is None:
        return np.zeros((n, width), np.float32)
    out = np.asarray(a, dtype=np.float32).reshape(n, width)
    return out if out.flags.c_contiguous else np.ascontiguousarray(out)


STATIC_NAMES = tuple(a[0] for a in VERTEX_ATTRIBUTES if a[0] not in DYNAMIC_ATTRIBUTES)


def static_attributes(primitive, morph_span=None) -> tuple:
    """The attributes ``build_static`` puts in ``primitive``'s static buffer: all of the static
    layout for a skinned or morphed primitive, else only what its draws read
    (layout.SLIM_STATIC_ATTRIBUTES, the UVs only when it has them)."""
    if getattr(primitive, "joints", None) is not None or morph_span is not None or getattr(
            primitive, "morph_targets", None):
        return STATIC_NAMES
    if getattr(primitive, "uv0", None) is None:
        return tuple(a for a in SLIM_STATIC_ATTRIBUTES if a != "uv")
    return SLIM_STATIC_ATTRIBUTES


def compact_static(primitive) -> tuple:
    """The static attributes ``primitive``'s buffer stores as a compact constant: the colour
    where the mesh has no colour attribute (layout.COMPACT_DEFAULTS)."""
    return ("col",) if getattr(primitive, "colors", None) is None else ()


def fill_colour(vbo, primitive, n: int) -> None:
    """The render colour attribute (linear RGBA) into ``vbo``; white, compact, where the mesh has none."""
    colours = getattr(primitive, "colors", None)
    vbo.attr_fill("col", compact_fill("col", n) if colours is None else f32(colours, 4, n))


def static_bytes(primitive, morph_span=None) -> int:
    """Bytes of ``primitive``'s static vertex buffer and index buffer (what ``build_static`` makes)."""
    names = static_attributes(primitive, morph_span)
    compact = compact_static(primitive)
    per_vertex = sum(attribute_bytes(a[0], compact) for a in VERTEX_ATTRIBUTES if a[0] in names)
    return (per_vertex * int(np.asarray(primitive.positions).shape[0])
            + 4 * int(np.asarray(primitive.indices).size))


def build_slim_static(primitive, n: int, chunk_triangles: int = CHUNK_TRIANGLES):
    """``build_static`` of a primitive with neither skin nor morph targets: only the attributes
    its draws read (``static_attributes``: 24 or 16 bytes a vertex instead of 96); a big one's
    triangles in spatial chunks (engine/gpu/chunks.py), its ChunkTable last (else None)."""
    import gpu

    uv = getattr(primitive, "uv0", None)
    vbo = gpu.types.GPUVertBuf(vertex_format("static", static_attributes(primitive), compact_static(primitive)), n)
    if uv is not None:
        vbo.attr_fill("uv", f32(uv, 2, n))
    fill_colour(vbo, primitive, n)
    tris = np.asarray(primitive.indices).reshape(-1, 3)
    made = chunk_order(primitive.positions, tris, chunk_triangles)
    indices, table = (np.ascontiguousarray(np.asarray(tris, dtype=np.int32)), None) if made is None else made
    ibo = gpu.types.GPUIndexBuf(type="TRIS", seq=indices)
    return vbo, ibo, int(indices.shape[0]), None, table
