"""Static vertex buffers of primitives with neither skin nor morph targets (issue 37 item 3: a
big static mesh uploads only what its draws read), and the float32 copies ``attr_fill`` takes.

A skinned or morphed primitive's static buffer holds the whole static layout (layout.py: uv,
joints, weights, joints_hi, weights_hi, morph_span, col: 96 bytes a vertex); a static one only
its colour and, when it has them, its UVs (16 or 24 bytes): its draws run with
``skin_influences`` 0 and ``morph_mode`` 0, so glsl/skinning.glsl reads no joints, weights or
spans, and a left-out ``uv`` reads Blender's default attribute value, (0, 0), as the zeros the
whole layout holds.
"""
from __future__ import annotations

import numpy as np

from .layout import DYNAMIC_ATTRIBUTES, SLIM_STATIC_ATTRIBUTES, VERTEX_ATTRIBUTES, vertex_format


def f32(a, width, n, default=None):
    """A writable, C-contiguous float32 (n, width) array.  ``attr_fill`` only takes the fast
    buffer-protocol path for writable arrays; asset arrays are read-only, so they are copied
    (a read-only array silently falls back to a per-element path ~50x slower)."""
    if a is None:
        if default is None:
            return np.zeros((n, width), np.float32)
        return np.array(np.broadcast_to(np.asarray(default, np.float32), (n, width)))
    out = np.asarray(a, dtype=np.float32).reshape(n, width)
    if not (out.flags.writeable and out.flags.c_contiguous):
        out = np.array(out, dtype=np.float32, order="C")
    return out


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


def static_bytes(primitive, morph_span=None) -> int:
    """Bytes of ``primitive``'s static vertex buffer and index buffer (what ``build_static`` makes)."""
    names = static_attributes(primitive, morph_span)
    per_vertex = sum(4 * a[3] for a in VERTEX_ATTRIBUTES if a[0] in names)
    return (per_vertex * int(np.asarray(primitive.positions).shape[0])
            + 4 * int(np.asarray(primitive.indices).size))


def build_slim_static(primitive, n: int):
    """``build_static`` of a primitive with neither skin nor morph targets: only the attributes
    its draws read (``static_attributes``: 24 or 16 bytes a vertex instead of 96)."""
    import gpu

    uv = getattr(primitive, "uv0", None)
    vbo = gpu.types.GPUVertBuf(vertex_format("static", static_attributes(primitive)), n)
    if uv is not None:
        vbo.attr_fill("uv", f32(uv, 2, n))
    vbo.attr_fill("col", f32(getattr(primitive, "colors", None), 4, n, (1.0, 1.0, 1.0, 1.0)))
    indices = np.ascontiguousarray(np.asarray(primitive.indices, dtype=np.int32).reshape(-1, 3))
    ibo = gpu.types.GPUIndexBuf(type="TRIS", seq=indices)
    return vbo, ibo, int(indices.shape[0]), None
