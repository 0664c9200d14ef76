"""Shader construction shared by every pass: the vertex layout and the one skinning include.

Every geometry shader is built with ``build_shader`` so that the forward, shadow, outline and
readback shaders all declare the same vertex inputs and prepend the same ``glsl/skinning.glsl``.
"""
from __future__ import annotations

import os

GLSL_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))), "glsl")   # engine/gpu/passes -> the repository root

# The vertex layout, texture slots and texture widths the GPU backend shares with the shaders
# (engine/gpu/layout.py: the backend fills buffers in this layout without importing the passes).
from ..layout import (
    INSTANCE_DATA_SLOT,
    MORPH_DELTAS_SLOT,
    MORPH_TEX_WIDTH,
    MORPH_WEIGHTS_SLOT,
    SKIN_ENTRIES_SLOT,
    SKIN_ONCE_BLOCKS,
    SKIN_PALETTE_SLOT,
    VERTEX_ATTRIBUTES,
)


def load_glsl(name: str) -> str:
    """The text of ``glsl/<name>`` (read when a shader is compiled: the pipeline's GpuCache keeps
    the compiled shader, so each file is read once per pipeline and shader)."""
    with open(os.path.join(GLSL_DIR, name), "r", encoding="utf-8") as f:
        return f.read()


def add_vertex_inputs(info) -> None:
    for slot, (name, glsl_type, _c, _l, _f) in enumerate(VERTEX_ATTRIBUTES):
        info.vertex_in(slot, glsl_type, name)


def add_skinning_interface(info) -> None:
    """The deformation interface of glsl/skinning.glsl: palette, morph deltas and weights, the
    influence entries of vertices with more than 8 influences and the instance data of instanced
    draws (``instance_mode``)."""
    info.sampler(SKIN_PALETTE_SLOT, "FLOAT_2D", "skin_palette")
    info.sampler(MORPH_DELTAS_SLOT, "FLOAT_2D", "morph_deltas")
    info.sampler(MORPH_WEIGHTS_SLOT, "FLOAT_2D", "morph_weights")
    info.sampler(SKIN_ENTRIES_SLOT, "FLOAT_2D", "skin_entries")
    info.sampler(INSTANCE_DATA_SLOT, "FLOAT_2D", "instance_data")
    info.push_constant("INT", "skin_influences")
    info.push_constant("INT", "morph_mode")
    info.push_constant("INT", "instance_mode")
    info.define("MORPH_TEX_WIDTH", str(MORPH_TEX_WIDTH))


def _has_define(defines, name: str) -> bool:
    return any((d[0] if isinstance(d, tuple) else d) == name for d in defines)


def build_shader(name: str, vertex_body: str, fragment_source: str, *, interfaces=(), push_constants=(),
                 samplers=(), fragment_outputs=(("VEC4", "frag_color"),), defines=(), typedefs: str = "",
                 uniform_bufs=(), depth_only: bool = False):
    """Create a geometry shader with the shared vertex inputs and the skinning include.

    ``vertex_body`` is GLSL that may call ``morph_vertex``/``morph_position`` and
    ``skin_vertex``/``skin_position`` (from skinning.glsl).
    ``interfaces`` is a sequence of (qualifier, type, name) for vertex->fragment varyings;
    ``samplers`` is a sequence of (type, name) (slots after the palette); ``push_constants``
    a sequence of (type, name) or (type, name, array_size).
    """
    import gpu

    info = gpu.types.GPUShaderCreateInfo()
    add_vertex_inputs(info)
    add_skinning_interface(info)
    for slot, (stype, sname) in enumerate(samplers, start=INSTANCE_DATA_SLOT + 1):
        info.sampler(slot, stype, sname)
    fetch = _has_define(defines, "SKIN_FETCH")
    if fetch or _has_define(defines, "SKIN_ONCE_PASS"):
        # skin once per frame (glsl/skinning.glsl): the item's first vertex in the skinned texture
        info.push_constant("INT", "skin_base")
        info.define("SKIN_ONCE_BLOCKS", str(SKIN_ONCE_BLOCKS))
    if fetch:
        info.sampler(INSTANCE_DATA_SLOT + 1 + len(samplers), "FLOAT_2D", "skinned")
    for pc in push_constants:
        if len(pc) == 3:
            info.push_constant(pc[0], pc[1], pc[2])
        else:
            info.push_constant(pc[0], pc[1])
    for slot, (utype, uname) in enumerate(uniform_bufs):
        info.uniform_buf(slot, utype, uname)
    if typedefs:
        info.typedef_source(typedefs)
    for d in defines:
        if isinstance(d, tuple):
            info.define(d[0], d[1])
        else:
            info.define(d)
    if interfaces:
        iface = gpu.types.GPUStageInterfaceInfo(name + "_iface")
        for qual, itype, iname in interfaces:
            getattr(iface, qual)(itype, iname)
        info.vertex_out(iface)
    for slot, (otype, oname) in enumerate(fragment_outputs):
        info.fragment_out(slot, otype, oname)
    info.vertex_source(load_glsl("skinning.glsl") + "\n" + vertex_body)
    info.fragment_source(fragment_source)
    return gpu.shader.create_from_info(info)
