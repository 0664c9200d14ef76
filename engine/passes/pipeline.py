"""FramePipeline: renders one frame's RenderItems into a linear RGBA32F texture.

Foundation version: a depth-tested forward pass with simple lit shading.  The MToon passes
(shadow, forward, outline mask, screen-space outline, post-process) replace it.
"""
from __future__ import annotations

import numpy as np

from .shader_lib import build_shader
from ..runtime.gpu_backend import bind_skinning

_FORWARD_VS = """
void main()
{
  vec3 p = pos; vec3 n = nor; vec3 t = tan.xyz;
  skin_vertex(p, n, t);
  vec4 wp = model * vec4(p, 1.0);
  v_normal = normalize(mat3(normal_matrix) * n);
  gl_Position = view_projection * wp;
}
"""

_FORWARD_FS = """
void main()
{
  vec3 n = normalize(v_normal);
  if (!gl_FrontFacing) n = -n;
  vec3 c = base_color.rgb * world_color.rgb;
  for (int i = 0; i < light_count; i++) {
    c += base_color.rgb * light_color[i].rgb * max(dot(n, -light_dir[i].xyz), 0.0);
  }
  frag_color = vec4(c, 1.0);
}
"""

MAX_LIGHTS = 8


def set_vec4_array(shader, name: str, values: np.ndarray) -> None:
    """Upload a vec4 array uniform (``uniform_float`` only takes up to 16 floats)."""
    import gpu

    v = np.ascontiguousarray(values, dtype=np.float32).reshape(-1, 4)
    shader.uniform_vector_float(shader.uniform_from_name(name), gpu.types.Buffer("FLOAT", v.size, v.ravel()), 4, v.shape[0])


class FramePipeline:
    def __init__(self):
        self._forward = None
        self._targets = None
        self._size = None

    def _ensure(self, width: int, height: int):
        import gpu

        if self._forward is None:
            self._forward = build_shader(
                "stylized_simple_forward", _FORWARD_VS, _FORWARD_FS,
                interfaces=(("smooth", "VEC3", "v_normal"),),
                push_constants=(("MAT4", "model"), ("MAT4", "normal_matrix"), ("MAT4", "view_projection"),
                                ("VEC4", "base_color"), ("VEC4", "world_color"), ("INT", "light_count"),
                                ("VEC4", "light_dir", MAX_LIGHTS), ("VEC4", "light_color", MAX_LIGHTS)),
            )
        if self._size != (width, height):
            color = gpu.types.GPUTexture((width, height), format="RGBA32F")
            depth = gpu.types.GPUTexture((width, height), format="DEPTH_COMPONENT32F")
            fb = gpu.types.GPUFrameBuffer(color_slots=(color,), depth_slot=depth)
            self._targets = (color, depth, fb)
            self._size = (width, height)

    def execute(self, frame):
        import gpu

        s = frame.settings
        self._ensure(s.width, s.height)
        color, _depth, fb = self._targets
        wc = np.asarray(s.world_color, np.float32)
        suns = [l for l in frame.lights if l.kind == "SUN"][:MAX_LIGHTS]
        dirs = np.zeros((MAX_LIGHTS, 4), np.float32)
        cols = np.zeros((MAX_LIGHTS, 4), np.float32)
        for i, l in enumerate(suns):
            dirs[i, :3] = l.direction
            cols[i, :3] = l.color
        vp = np.asarray(frame.camera.view_projection, np.float32)
        with fb.bind():
            alpha = 0.0 if s.film_transparent else 1.0
            fb.clear(color=(float(wc[0]), float(wc[1]), float(wc[2]), alpha), depth=1.0)
            gpu.state.depth_test_set("LESS_EQUAL")
            gpu.state.depth_mask_set(True)
            gpu.state.face_culling_set("NONE")
            sh = self._forward
            sh.bind()
            sh.uniform_float("view_projection", vp.T.ravel())
            sh.uniform_float("world_color", (float(wc[0]), float(wc[1]), float(wc[2]), 1.0))
            sh.uniform_int("light_count", len(suns))
            set_vec4_array(sh, "light_dir", dirs)
            set_vec4_array(sh, "light_color", cols)
            for item in frame.items:
                model = np.asarray(item.world, np.float64)
                nm = np.eye(4)
                try:
                    nm[:3, :3] = np.linalg.inv(model[:3, :3]).T
                except np.linalg.LinAlgError:
                    continue
                mat = frame.materials.get(item.material_name)
                bc = getattr(mat, "base_color", None) if mat is not None else None
                if bc is None:
                    bc = (0.8, 0.8, 0.8, 1.0)
                sh.uniform_float("model", model.astype(np.float32).T.ravel())
                sh.uniform_float("normal_matrix", nm.astype(np.float32).T.ravel())
                sh.uniform_float("base_color", tuple(float(x) for x in bc[:4]))
                bind_skinning(sh, item.palette, item.influences)
                item.stream.batch.draw(sh)
            gpu.state.depth_test_set("NONE")
            gpu.state.depth_mask_set(False)
        return color

    def free(self):
        self._forward = None
        self._targets = None
        self._size = None
