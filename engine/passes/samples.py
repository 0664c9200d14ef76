"""Anti-aliasing of final frames: the whole pipeline drawn ``samples`` times with sub-pixel
offsets of the projection, averaged on the GPU (a box filter over the pixel: the true coverage
of each pixel, estimated with a low-discrepancy set of points).

The first sample is the pixel centre, unjittered: the render passes are read from it (depth,
normal, indexes and the toon passes stay exact per pixel, as EEVEE's index passes are).  The
shadow maps are drawn once per frame (later samples reuse them; the cascades are fitted to the
unjittered view).  FXAA is off while sampling (the samples anti-alias); ``samples`` 1 is one
sample with FXAA.  The offsets are fixed (Halton 2, 3, shifted to start at the centre), so a farm
renders every frame the same.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .common import cached_shader, fullscreen_batch, fullscreen_shader


def _halton(i: int, base: int) -> float:
    f, r = 1.0, 0.0
    while i > 0:
        f /= base
        r += f * (i % base)
        i //= base
    return r


def sample_offsets(n: int) -> np.ndarray:
    """(n, 2) sub-pixel offsets in pixels within [-0.5, 0.5): the first n points of Halton (2, 3),
    shifted over the torus so the first is the pixel centre (a toroidal shift keeps the set's
    stratification)."""
    pts = np.array([(_halton(i, 2), _halton(i, 3)) for i in range(1, max(1, int(n)) + 1)])
    return np.mod(pts - pts[0] + 0.5, 1.0) - 0.5


def jittered(camera, dx: float, dy: float, width: int, height: int):
    """``camera`` with its projection moved by (dx, dy) pixels (clip x += 2 dx / width x w)."""
    p = np.array(camera.projection, np.float64)
    p[0] += (2.0 * dx / width) * p[3]
    p[1] += (2.0 * dy / height) * p[3]
    return dataclasses.replace(camera, projection=p)


def _accumulate_shader():
    return cached_shader("accumulate", lambda: fullscreen_shader(
        "stylized_accumulate",
        "void main() { frag_color = texelFetch(src, ivec2(gl_FragCoord.xy), 0) * params.x; }",
        samplers=(("FLOAT_2D", "src"),), push_constants=(("VEC4", "params"),)))


class Accumulator:
    """An RGBA32F sum of weighted frames (additive blending of premultiplied colour)."""

    def __init__(self):
        self._size = None
        self.texture = None
        self._fb = None

    def add(self, tex, weight: float, width: int, height: int, first: bool) -> None:
        import gpu

        if self._size != (width, height):
            self.texture = gpu.types.GPUTexture((width, height), format="RGBA32F")
            self._fb = gpu.types.GPUFrameBuffer(color_slots=(self.texture,))
            self._size = (width, height)
        with self._fb.bind():
            if first:
                self._fb.clear(color=(0.0, 0.0, 0.0, 0.0))
            gpu.state.viewport_set(0, 0, width, height)
            gpu.state.depth_test_set("NONE")
            gpu.state.face_culling_set("NONE")
            gpu.state.blend_set("ADDITIVE_PREMULT")
            sh = _accumulate_shader()
            sh.bind()
            sh.uniform_sampler("src", tex)
            sh.uniform_float("params", (float(weight), 0.0, 0.0, 0.0))
            fullscreen_batch(sh).draw(sh)
            gpu.state.blend_set("NONE")

    def free(self):
        self.texture = None
        self._fb = None
        self._size = None


def render_samples(pipeline, frame, accumulator: Accumulator, after_first=None):
    """Draw ``frame`` ``frame.settings.samples`` times (see the module docstring); returns the
    averaged colour texture.  ``after_first()`` runs after the first (centre) sample, while the
    pipeline's targets still hold it (the render passes are read there)."""
    s = frame.settings
    n = max(1, int(getattr(s, "samples", 1)))
    if n == 1:
        tex = pipeline.execute(frame)
        if after_first is not None:
            after_first()
        return tex
    w, h = s.width, s.height
    base = dataclasses.replace(s, fxaa=False, jitter=(0.0, 0.0), reuse_shadow=False)
    for i, (dx, dy) in enumerate(sample_offsets(n)):
        settings = base if i == 0 else dataclasses.replace(base, jitter=(float(dx), float(dy)), reuse_shadow=True)
        cam = frame.camera if i == 0 else jittered(frame.camera, dx, dy, w, h)
        tex = pipeline.execute(dataclasses.replace(frame, camera=cam, settings=settings))
        if i == 0 and after_first is not None:
            after_first()
        accumulator.add(tex, 1.0 / n, w, h, first=(i == 0))
    return accumulator.texture
