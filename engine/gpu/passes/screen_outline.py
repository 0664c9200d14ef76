"""ScreenSpaceOutlinePass (optional): edges from object-id, normal and depth discontinuities of
the forward pass's aux target (world normal, object id) and depth buffer; width (pixels) and
colour are scene settings."""
from __future__ import annotations

import numpy as np

from .common import FullscreenPass, fullscreen_shader
from .shader_lib import load_glsl


def screen_outline_shader(cache):
    return cache.shader("screen_outline", lambda: fullscreen_shader(
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


class ScreenSpaceOutlinePass(FullscreenPass):
    def execute(self, frame, color, aux, depth):
        s = frame.settings
        n, f = near_far(frame.camera.projection, frame.camera.is_ortho)
        c = np.asarray(s.screen_space_outline_color, np.float64)
        return self.draw(
            s.width, s.height, screen_outline_shader(self.cache),
            samplers=(("src", color), ("aux", aux), ("depth", depth)),
            floats=(("params", (float(s.screen_space_outline_width), abs(n), abs(f),
                                1.0 if frame.camera.is_ortho else 0.0)),
                    ("color", (float(c[0]), float(c[1]), float(c[2]), 1.0))))
