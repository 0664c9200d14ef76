"""ScreenSpaceOutlinePass (optional): edges from object-id, normal and depth discontinuities of
the forward pass's aux target (world normal, object id) and depth buffer; width (pixels) and
colour are scene settings."""
from __future__ import annotations

import numpy as np

from .common import cached_shader, fullscreen_batch, fullscreen_shader
from .shader_lib import load_glsl


def screen_outline_shader():
    return cached_shader("screen_outline", lambda: fullscreen_shader(
        "stylized_screen_outline", load_glsl("screen_outline.glsl"),
        samplers=(("FLOAT_2D", "src"), ("FLOAT_2D", "aux"), ("FLOAT_2D", "depth")),
        push_constants=(("VEC4", "params"), ("VEC4", "color"))))


def near_far(projection: np.ndarray, is_ortho: bool):
    p = np.asarray(projection, np.float64)
    a, b = p[2, 2], p[2, 3]
    if is_ortho:
        n, f = (b + 1.0) / a, (b - 1.0) / a
    else:
        n, f = b / (a - 1.0), b / (a + 1.0)
    return float(n), float(f)


class ScreenSpaceOutlinePass:
    def __init__(self):
        self._size = None
        self._out = None
        self._fb = None

    def execute(self, frame, color, aux, depth):
        import gpu

        s = frame.settings
        size = (s.width, s.height)
        if self._size != size:
            self._out = gpu.types.GPUTexture(size, format="RGBA32F")
            self._fb = gpu.types.GPUFrameBuffer(color_slots=(self._out,))
            self._size = size
        n, f = near_far(frame.camera.projection, frame.camera.is_ortho)
        sh = screen_outline_shader()
        c = np.asarray(s.screen_space_outline_color, np.float64)
        with self._fb.bind():
            gpu.state.viewport_set(0, 0, s.width, s.height)
            gpu.state.depth_test_set("NONE")
            gpu.state.blend_set("NONE")
            gpu.state.face_culling_set("NONE")
            sh.bind()
            sh.uniform_sampler("src", color)
            sh.uniform_sampler("aux", aux)
            sh.uniform_sampler("depth", depth)
            sh.uniform_float("params", (float(s.screen_space_outline_width), abs(n), abs(f),
                                        1.0 if frame.camera.is_ortho else 0.0))
            sh.uniform_float("color", (float(c[0]), float(c[1]), float(c[2]), 1.0))
            fullscreen_batch(sh).draw(sh)
        return self._out

    def free(self):
        self._out = None
        self._fb = None
        self._size = None
