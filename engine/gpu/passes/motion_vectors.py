"""The Vector pass on the GPU (issue 36 item 4): each item's deformed vertices read back at another
instant, then the frame's items drawn once with their clip positions at three instants.

``VertexCapture.positions(item)``: the world positions of ``item``'s vertices as the passes deform
them now (its palette, morphs and object matrix), read back by drawing its stream as points (pixel
= vertex id) through the vertex variant of its class (the shared skinning include with the same
defines the forward, outline and shadow shaders use: mtoon_shaders.VERTEX_DEFINES).
``draw_vectors(...)``: every item drawn with depth test, its vertices at the previous, current and
next instants put through each instant's camera (engine/core/compositing/motion.py
``clip_positions``); the fragment writes EEVEE's Vector (previous - now, now - next, in pixels:
the same formula as ``motion.pixel_motion``, perspective-correct over the triangle).
Shaders are kept in the pipeline's GpuCache; nothing is kept here between frames.
"""
from __future__ import annotations

import math

import numpy as np

from ...core.compositing.motion import clip_positions

_CAPTURE_VS = """
void main()
{
  vec3 p = pos; vec3 n = nor; vec3 t = tan.xyz;
  morph_vertex(p, n, t);
  skin_vertex(p, n, t);
  if (read_normals != 0) {
    vec3 wn = skin_normal_matrix(mat3(model)) * n;
    v_world = (dot(wn, wn) > 0.0) ? normalize(wn) : wn;
  }
  else {
    v_world = (model * vec4(p, 1.0)).xyz;
  }
  int x = gl_VertexID % target_width;
  int y = gl_VertexID / target_width;
  gl_Position = vec4((float(x) + 0.5) / float(target_width) * 2.0 - 1.0,
                     (float(y) + 0.5) / float(target_height) * 2.0 - 1.0, 0.0, 1.0);
  gl_PointSize = 1.0;
}
"""
_CAPTURE_FS = """
void main() { frag_color = vec4(v_world, 1.0); }
"""

_VECTOR_VS = """
void main()
{
  gl_Position = clip_now;
  v_prev = clip_prev;
  v_next = clip_next;
}
"""
_VECTOR_FS = """
void main()
{
  vec2 now = gl_FragCoord.xy;
  vec2 prev = (v_prev.xy / v_prev.w * 0.5 + 0.5) * target_size;
  vec2 next = (v_next.xy / v_next.w * 0.5 + 0.5) * target_size;
  frag_color = vec4(prev - now, now - next);
}
"""


def _capture_shader(vclass: str):
    from .mtoon_shaders import VERTEX_DEFINES
    from .shader_lib import build_shader

    return build_shader("stylized_capture_" + vclass, _CAPTURE_VS, _CAPTURE_FS,
                        interfaces=(("flat", "VEC3", "v_world"),),
                        push_constants=(("MAT4", "model"), ("INT", "target_width"),
                                        ("INT", "target_height"), ("INT", "read_normals")),
                        defines=VERTEX_DEFINES[vclass])


def _vector_shader():
    import gpu

    info = gpu.types.GPUShaderCreateInfo()
    for slot, name in enumerate(("clip_now", "clip_prev", "clip_next")):
        info.vertex_in(slot, "VEC4", name)
    info.push_constant("VEC2", "target_size")
    iface = gpu.types.GPUStageInterfaceInfo("stylized_vector_iface")
    iface.smooth("VEC4", "v_prev")
    iface.smooth("VEC4", "v_next")
    info.vertex_out(iface)
    info.fragment_out(0, "VEC4", "frag_color")
    info.vertex_source(_VECTOR_VS)
    info.fragment_source(_VECTOR_FS)
    return gpu.shader.create_from_info(info)


class VertexCapture:
    """Reads items' deformed vertices back (see the module docstring).  ``cache``: a GpuCache
    (the pipeline's) that keeps the shaders; ``variants`` counts reads per vertex class."""

    def __init__(self, cache):
        self.cache = cache
        self.variants = {}

    def vertex_class(self, item) -> str:
        """The vertex class the passes draw ``item`` with (FrameInstances.vertex_class)."""
        from .instancing import FrameInstances

        return FrameInstances([item]).vertex_class([(0, item)])

    def positions(self, item, normals: bool = False) -> np.ndarray:
        """(V, 3) float64 world positions (or world normals) of ``item``'s vertices."""
        import gpu

        from ..backend import bind_deform
        from ..util import texture_to_numpy

        vclass = self.vertex_class(item)
        sh = self.cache.shader("stylized_capture_" + vclass, lambda: _capture_shader(vclass))
        self.variants[vclass] = self.variants.get(vclass, 0) + 1
        n = int(item.stream.vertex_count)
        w = min(1024, max(1, n))
        h = max(1, math.ceil(n / w))
        tex = gpu.types.GPUTexture((w, h), format="RGBA32F")
        fb = gpu.types.GPUFrameBuffer(color_slots=(tex,))
        batch = item.stream.points_batch()
        with fb.bind():
            fb.clear(color=(0.0, 0.0, 0.0, 0.0))
            gpu.state.viewport_set(0, 0, w, h)
            gpu.state.depth_test_set("NONE")
            gpu.state.blend_set("NONE")
            gpu.state.program_point_size_set(True)
            sh.bind()
            sh.uniform_float("model", np.asarray(item.world, np.float32).T.ravel())
            sh.uniform_int("target_width", w)
            sh.uniform_int("target_height", h)
            sh.uniform_int("read_normals", 1 if normals else 0)
            bind_deform(sh, item)
            batch.draw(sh)
            gpu.state.program_point_size_set(False)
        px = texture_to_numpy(tex, w, h).reshape(-1, 4)[:n]
        return px[:, :3].astype(np.float64)


def draw_vectors(cache, draws, vp_prev, vp_now, vp_next, width: int, height: int) -> np.ndarray:
    """EEVEE's Vector pass, (height, width, 4) float32, bottom row first: ``draws`` is a list of
    (index buffer (the item's stream's GPUIndexBuf), world positions at the previous, current and
    next instants ((V, 3) each)); ``vp_*``: the camera's view-projection at each instant."""
    import gpu

    from ..util import texture_to_numpy

    sh = cache.shader("stylized_vector_pass", _vector_shader)
    color = gpu.types.GPUTexture((width, height), format="RGBA32F")
    depth = gpu.types.GPUTexture((width, height), format="DEPTH_COMPONENT32F")
    fb = gpu.types.GPUFrameBuffer(color_slots=(color,), depth_slot=depth)
    fmt = gpu.types.GPUVertFormat()
    for name in ("clip_now", "clip_prev", "clip_next"):
        fmt.attr_add(id=name, comp_type="F32", len=4, fetch_mode="FLOAT")
    with fb.bind():
        fb.clear(color=(0.0, 0.0, 0.0, 0.0), depth=1.0)
        gpu.state.viewport_set(0, 0, width, height)
        gpu.state.depth_test_set("LESS_EQUAL")
        gpu.state.depth_mask_set(True)
        gpu.state.blend_set("NONE")
        gpu.state.face_culling_set("NONE")
        sh.bind()
        sh.uniform_float("target_size", (float(width), float(height)))
        for ibo, prev, now, nxt in draws:
            vbo = gpu.types.GPUVertBuf(fmt, int(now.shape[0]))
            vbo.attr_fill("clip_now", clip_positions(now, vp_now))
            vbo.attr_fill("clip_prev", clip_positions(prev, vp_prev))
            vbo.attr_fill("clip_next", clip_positions(nxt, vp_next))
            gpu.types.GPUBatch(type="TRIS", buf=vbo, elem=ibo).draw(sh)
        gpu.state.depth_test_set("NONE")
        gpu.state.depth_mask_set(False)
    return texture_to_numpy(color, width, height)
