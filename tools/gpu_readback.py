"""Reads GPU-deformed vertices back for tools/check_deform.py: each item is drawn as points
(pixel = vertex id) through the vertex variant the passes draw it with (its vertex class's
skinning defines), and the world positions or normals are read from the target.
"""
from __future__ import annotations

import math

import numpy as np

_READBACK_VS = """
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
_READBACK_FS = """
void main() { frag_color = vec4(v_world, 1.0); }
"""


class GpuReadback:
    """Draws primitive streams as points (pixel = vertex id) and reads world positions back,
    through the vertex variant the passes draw that item with: the skinning defines of its vertex
    class (``FrameInstances.vertex_class``: static / lbs4 / lbs8 / general, as
    ``mtoon_shaders.VERTEX_DEFINES`` gives them to the forward, outline and shadow shaders)."""

    def __init__(self):
        self.shaders = {}          # vertex class -> readback shader with that class's defines
        self.variants = {}         # vertex class -> primitive reads through it

    def shader_for(self, item):
        """(vertex class, readback shader) of ``item``, classified by the pipeline's own code."""
        from stylized_renderer.engine.gpu.passes.instancing import FrameInstances
        from stylized_renderer.engine.gpu.passes.mtoon_shaders import VERTEX_DEFINES
        from stylized_renderer.engine.gpu.passes.shader_lib import build_shader

        vclass = FrameInstances([item]).vertex_class([(0, item)])
        sh = self.shaders.get(vclass)
        if sh is None:
            sh = self.shaders[vclass] = build_shader(
                "stylized_readback_" + vclass, _READBACK_VS, _READBACK_FS,
                interfaces=(("flat", "VEC3", "v_world"),),
                push_constants=(("MAT4", "model"), ("INT", "target_width"),
                                ("INT", "target_height"), ("INT", "read_normals")),
                defines=VERTEX_DEFINES[vclass])
        return vclass, sh

    def read(self, item, normals: bool = False) -> np.ndarray:
        """World positions (or world normals) of the item's vertices, as the passes deform them."""
        import gpu

        from stylized_renderer.engine.gpu.backend import bind_deform
        from stylized_renderer.engine.gpu.util import texture_to_numpy

        vclass, sh = self.shader_for(item)
        self.variants[vclass] = self.variants.get(vclass, 0) + 1

        n = item.stream.vertex_count
        w = min(1024, max(1, n))
        h = max(1, math.ceil(n / w))
        tex = gpu.types.GPUTexture((w, h), format="RGBA32F")
        fb = gpu.types.GPUFrameBuffer(color_slots=(tex,))
        batch = item.stream.points_batch()
        with fb.bind():
            fb.clear(color=(0.0, 0.0, 0.0, 0.0))
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
