"""PostProcessPass: FXAA over the linear colour and the final linear RGBA32F output.

Blender's colour management (view transform, look, display) is applied by Blender on top of
the linear result; nothing here tone-maps."""
from __future__ import annotations

from .common import cached_shader, fullscreen_batch, fullscreen_shader
from .shader_lib import load_glsl


def fxaa_shader():
    return cached_shader("post_fxaa", lambda: fullscreen_shader(
        "stylized_fxaa", load_glsl("fxaa.glsl"), samplers=(("FLOAT_2D", "src"),)))


class PostProcessPass:
    def __init__(self):
        self._size = None
        self._out = None
        self._fb = None

    def execute(self, frame, color):
        """Returns the final texture (``color`` itself when no post effect is enabled)."""
        import gpu

        s = frame.settings
        if not s.fxaa:
            return color
        size = (s.width, s.height)
        if self._size != size:
            self._out = gpu.types.GPUTexture(size, format="RGBA32F")
            self._fb = gpu.types.GPUFrameBuffer(color_slots=(self._out,))
            self._size = size
        sh = fxaa_shader()
        with self._fb.bind():
            gpu.state.viewport_set(0, 0, s.width, s.height)
            gpu.state.depth_test_set("NONE")
            gpu.state.blend_set("NONE")
            gpu.state.face_culling_set("NONE")
            sh.bind()
            sh.uniform_sampler("src", color)
            fullscreen_batch(sh).draw(sh)
        return self._out

    def free(self):
        self._out = None
        self._fb = None
        self._size = None
