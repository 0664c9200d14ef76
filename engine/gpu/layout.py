"""The GPU vertex layout, texture slots and texture widths: what the GPU backend
(engine/gpu/backend.py) fills and every shader (engine/gpu/passes/shader_lib.py) declares.

Below both: the backend makes buffers in this layout without importing the passes.
"""
from __future__ import annotations

# (name, GLSL type, vertex-format comp type, length, fetch mode)
VERTEX_ATTRIBUTES = (
    ("pos", "VEC3", "F32", 3, "FLOAT"),
    ("nor", "VEC3", "F32", 3, "FLOAT"),
    ("tan", "VEC4", "F32", 4, "FLOAT"),
    ("uv", "VEC2", "F32", 2, "FLOAT"),
    ("snor", "VEC3", "F32", 3, "FLOAT"),
    ("joints", "UVEC4", "U32", 4, "INT"),
    ("weights", "VEC4", "F32", 4, "FLOAT"),
    ("joints_hi", "UVEC4", "U32", 4, "INT"),
    ("weights_hi", "VEC4", "F32", 4, "FLOAT"),
    ("morph_span", "UVEC2", "U32", 2, "INT"),     # (first entry, entry count) of the vertex's deltas
    ("col", "VEC4", "F32", 4, "FLOAT"),           # render colour attribute, linear RGBA (white: none)
)

# Attributes a morph changes live in their own vertex buffer; the rest is shared per primitive.
DYNAMIC_ATTRIBUTES = ("pos", "nor", "tan", "snor")

SKIN_PALETTE_SLOT = 0
MORPH_DELTAS_SLOT = 1
MORPH_WEIGHTS_SLOT = 2
SKIN_ENTRIES_SLOT = 3    # influence spans of vertices with more than 8 influences
INSTANCE_DATA_SLOT = 4   # per-instance model, object id and offsets of instanced draws
#: Row width of the morph delta and weight textures (glsl/skinning.glsl: MORPH_TEX_WIDTH).
MORPH_TEX_WIDTH = 4096
#: Skin once per frame (engine/gpu/passes/skin_once.py): 2x2-texel blocks per row of its texture.
SKIN_ONCE_BLOCKS = 1024


# The static attributes a primitive with neither skin nor morph targets needs (its draws run
# with skin_influences 0 and morph_mode 0, so glsl/skinning.glsl reads no joints, weights or
# morph spans): the colour always (white where the mesh has none), the UVs when it has them.
# An attribute a buffer leaves out reads Blender's default (0, 0, 0, 1): uv (0, 0), as the zeros
# the full layout holds.
SLIM_STATIC_ATTRIBUTES = ("uv", "col")


# Attributes a primitive may lack, filled with one constant then (a tangent where the mesh has no
# UV map, white where it has no colour attribute): such a buffer stores them in 8-bit normalised
# components (4 bytes a vertex, not 16), which read back as exactly the float constant (127/127,
# 255/255 and 0 are exact).  name -> (comp type, the constant's components)
COMPACT_DEFAULTS = {
    "tan": ("I8", (127, 0, 0, 127)),       # (1, 0, 0, 1)
    "col": ("U8", (255, 255, 255, 255)),   # (1, 1, 1, 1)
}


def vertex_format(which: str = "all", names=None, compact=()):
    """GPUVertFormat of the shared layout: "all", "dynamic" (pos/nor/tan/snor: what a morph
    changes) or "static" (the rest); ``names``: only these of them, in the layout's order;
    ``compact``: attributes stored as their COMPACT_DEFAULTS constant (``compact_fill``)."""
    import gpu

    fmt = gpu.types.GPUVertFormat()
    for name, _glsl, comp, length, fetch in VERTEX_ATTRIBUTES:
        dyn = name in DYNAMIC_ATTRIBUTES
        if (which == "all" or (which == "dynamic") == dyn) and (names is None or name in names):
            if name in compact:
                fmt.attr_add(id=name, comp_type=COMPACT_DEFAULTS[name][0], len=length, fetch_mode="INT_TO_FLOAT_UNIT")
            else:
                fmt.attr_add(id=name, comp_type=comp, len=length, fetch_mode=fetch)
    return fmt


def compact_fill(name: str, n: int):
    """The (n, 4) 8-bit array of ``name``'s COMPACT_DEFAULTS constant (what ``attr_fill`` takes for
    a ``vertex_format(compact=...)`` attribute)."""
    import numpy as np

    comp, value = COMPACT_DEFAULTS[name]
    return np.array(np.broadcast_to(np.array(value, np.int8 if comp == "I8" else np.uint8), (n, 4)))


def attribute_bytes(name: str, compact=()) -> int:
    """Bytes a vertex of ``name`` takes (``vertex_format``'s, with ``compact``)."""
    if name in compact:
        return 4
    return next(4 * a[3] for a in VERTEX_ATTRIBUTES if a[0] == name)
