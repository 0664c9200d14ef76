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


#: True: every sample is drawn and shaded by the whole pipeline (exact, about n times the cost);
#: False: the frame is shaded once and each sample only finds the surface that covers it
SHADE_EVERY_SAMPLE = False


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


_RESOLVE_FS = """
/* One coverage sample's colour at this pixel: the shaded frame (src, drawn once at the pixel
 * centres) where the sample sees the surface the centre sees; else the colour of the nearest of
 * the three neighbours towards the sample (across x, across y, diagonal) whose centre sees the
 * surface the sample sees (the sample lies across an edge); else this pixel's own colour.
 * ids: object id x 2 (+1 outline), 0 nothing.  No loop and no branch body (llvmpipe would run it
 * for every block of pixels): only selects. */
void main()
{
  ivec2 p = ivec2(gl_FragCoord.xy);
  ivec2 hi = textureSize(src, 0) - 1;
  vec2 o = -params.yz;   /* a projection moved by +d shows at p what the centre frame has at p - d */
  ivec2 sx = ivec2((o.x >= 0.0) ? 1 : -1, 0);
  ivec2 sy = ivec2(0, (o.y >= 0.0) ? 1 : -1);
  bool x_first = abs(o.x) >= abs(o.y);
  ivec2 qa = clamp(p + (x_first ? sx : sy), ivec2(0), hi);
  ivec2 qb = clamp(p + (x_first ? sy : sx), ivec2(0), hi);
  ivec2 qc = clamp(p + sx + sy, ivec2(0), hi);
  float want = texelFetch(ids_k, p, 0).r;
  bool here = abs(texelFetch(ids_0, p, 0).r - want) < 0.25;
  bool a = abs(texelFetch(ids_0, qa, 0).r - want) < 0.25;
  bool b = abs(texelFetch(ids_0, qb, 0).r - want) < 0.25;
  bool c = abs(texelFetch(ids_0, qc, 0).r - want) < 0.25;
  ivec2 q = here ? p : (a ? qa : (b ? qb : (c ? qc : p)));
  frag_color = texelFetch(src, q, 0) * params.x;
}
"""


def _resolve_shader():
    return cached_shader("coverage_resolve", lambda: fullscreen_shader(
        "stylized_coverage_resolve", _RESOLVE_FS,
        samplers=(("FLOAT_2D", "src"), ("FLOAT_2D", "ids_0"), ("FLOAT_2D", "ids_k")),
        push_constants=(("VEC4", "params"),)))


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

    def id_target(self, k: int, width: int, height: int):
        """(R32F id texture, depth texture, framebuffer) number ``k`` (0: the centre's, 1: a sample's)."""
        import gpu

        if getattr(self, "_ids_size", None) != (width, height):
            self._ids = []
            for _ in range(2):
                t = gpu.types.GPUTexture((width, height), format="R32F")
                d = gpu.types.GPUTexture((width, height), format="DEPTH_COMPONENT32F")
                self._ids.append((t, d, gpu.types.GPUFrameBuffer(color_slots=(t,), depth_slot=d)))
            self._ids_size = (width, height)
        return self._ids[k]

    def add(self, tex, weight: float, width: int, height: int, first: bool, resolve=None) -> None:
        """Add ``tex`` x ``weight``; with ``resolve`` = (ids_0, ids_k, (dx, dy)) the coverage
        sample's colour (_RESOLVE_FS) instead."""
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
            sh = _accumulate_shader() if resolve is None else _resolve_shader()
            sh.bind()
            sh.uniform_sampler("src", tex)
            off = (0.0, 0.0)
            if resolve is not None:
                sh.uniform_sampler("ids_0", resolve[0])
                sh.uniform_sampler("ids_k", resolve[1])
                off = resolve[2]
            sh.uniform_float("params", (float(weight), float(off[0]), float(off[1]), 0.0))
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
    if not SHADE_EVERY_SAMPLE:
        # shade once, cover n times: the frame is shaded at the pixel centres, then only which
        # surface covers each sub-pixel sample is drawn (ID-only shaders) and resolved
        tex = pipeline.execute(dataclasses.replace(frame, settings=base))
        if after_first is not None:
            after_first()
        centre = accumulator.id_target(0, w, h)
        pipeline.draw_ids(dataclasses.replace(frame, settings=base), centre)
        other = accumulator.id_target(1, w, h)
        for i, (dx, dy) in enumerate(sample_offsets(n)):
            if i:
                pipeline.draw_ids(dataclasses.replace(frame, camera=jittered(frame.camera, dx, dy, w, h),
                                                      settings=base), other)
            ids = centre if i == 0 else other
            accumulator.add(tex, 1.0 / n, w, h, first=(i == 0), resolve=(centre[0], ids[0], (dx, dy)))
        return accumulator.texture
    for i, (dx, dy) in enumerate(sample_offsets(n)):
        settings = base if i == 0 else dataclasses.replace(base, jitter=(float(dx), float(dy)), reuse_shadow=True)
        cam = frame.camera if i == 0 else jittered(frame.camera, dx, dy, w, h)
        tex = pipeline.execute(dataclasses.replace(frame, camera=cam, settings=settings))
        if i == 0 and after_first is not None:
            after_first()
        accumulator.add(tex, 1.0 / n, w, h, first=(i == 0))
    return accumulator.texture
