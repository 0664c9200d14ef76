"""PostProcessPass: FXAA over the linear colour and the final linear RGBA32F output.

Blender's colour management (view transform, look, display) is applied by Blender on top of
the linear result; nothing here tone-maps."""
from __future__ import annotations

from .common import FullscreenPass, fullscreen_shader
from .shader_lib import load_glsl


def fxaa_shader(cache):
    return cache.shader("post_fxaa", lambda: fullscreen_shader(
        "stylized_fxaa", load_glsl("fxaa.glsl"), samplers=(("FLOAT_2D", "src"),)))


class PostProcessPass(FullscreenPass):
    def execute(self, frame, color):
        """Returns the final texture (``color`` itself when no post effect is enabled)."""
        s = frame.settings
        if not s.fxaa:
            return color
        return self.draw(s.width, s.height, fxaa_shader(self.cache), samplers=(("src", color),))
