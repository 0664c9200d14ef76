"""Anti-aliasing of final frames: the whole pipeline drawn ``samples`` times with sub-pixel
offsets of the projection, averaged on the GPU (a box filter over the pixel: the true coverage
of each pixel, estimated with a low-discrepancy set of points).

The first sample is the pixel centre, unjittered: the render passes are read from it; the passes
``after_first`` hands back (Normal, Mist, the toon passes: render_passes.averaged_sources, a
pass_resolve.Sources) are then resolved with the same coverage samples as the colour, all in one
draw (engine/gpu/passes/pass_resolve.py), i.e. averaged over the pixel as
EEVEE accumulates them, while Depth and the index passes keep the centre's value (EEVEE's Depth
is not averaged; Cycles writes its index passes from the first sample).  The
shadow maps are drawn once per frame (later samples reuse them; the cascades are fitted to the
unjittered view).  FXAA is off while sampling (the samples anti-alias); ``samples`` 1 is one
sample with FXAA.  The offsets are fixed (Halton 2, 3, shifted to start at the centre), so a farm
renders every frame the same.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .common import fullscreen_shader
from .pass_resolve import NEIGHBOUR_PICK, PassResolve

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


#: coverage samples resolved per pass (samplers: the frame, the centre's ids and these)
BATCH = 7

_RESOLVE_HEAD = """
/* Coverage samples' colours at this pixel, summed: for each sample, the shaded frame (src, drawn
 * once at the pixel centres) where the sample sees the surface this pixel's centre sees; else the
 * colour of the nearest of the three neighbours towards the sample (across x, across y, diagonal)
 * whose centre sees the surface the sample sees (the sample lies across an edge); else this
 * pixel's own colour.  ids: object id x 2 (+1 outline), 0 nothing.  Selects only, no loop or
 * branch body (llvmpipe runs those for whole blocks of pixels).  The centre's 3x3 ids are
 * fetched once for every sample of the pass. */
void main()
{
  ivec2 p = ivec2(gl_FragCoord.xy);
  ivec2 hi = textureSize(src, 0) - 1;
  float n[9];
  for (int j = 0; j < 9; j++) {
    n[j] = texelFetch(ids_0, clamp(p + ivec2(j % 3 - 1, j / 3 - 1), ivec2(0), hi), 0).r;
  }
  vec4 sum = vec4(0.0);
"""

_RESOLVE_SAMPLE = """
  {{
    /* a projection moved by +d shows at p what the centre frame has at p - d */
""" + NEIGHBOUR_PICK + """\
    sum += texelFetch(src, clamp(p + ivec2(j % 3 - 1, j / 3 - 1), ivec2(0), hi), 0);
  }}
"""


def _resolve_shader(cache, count: int):
    """The resolve pass of ``count`` (1..BATCH) coverage samples ids_1..ids_count; offsets in the
    push constants o01, o23, o45, o67 (two per vec4), params.x the weight of one sample."""
    body = _RESOLVE_HEAD
    for k in range(1, count + 1):
        off = f"o{2 * ((k - 1) // 2)}{2 * ((k - 1) // 2) + 1}." + ("xy" if (k - 1) % 2 == 0 else "zw")
        body += _RESOLVE_SAMPLE.format(k=k, off=off)
    body += "  frag_color = sum * params.x;\n}\n"
    samplers = (("FLOAT_2D", "src"), ("FLOAT_2D", "ids_0")) + tuple(("FLOAT_2D", f"ids_{k}")
                                                                      for k in range(1, count + 1))
    return cache.shader(f"coverage_resolve_{count}", lambda: fullscreen_shader(
        f"stylized_coverage_resolve_{count}", body, samplers=samplers,
        push_constants=(("VEC4", "params"), ("VEC4", "o01"), ("VEC4", "o23"), ("VEC4", "o45"), ("VEC4", "o67"))))


def _accumulate_shader(cache):
    return cache.shader("accumulate", lambda: fullscreen_shader(
        "stylized_accumulate",
        "void main() { frag_color = texelFetch(src, ivec2(gl_FragCoord.xy), 0) * params.x; }",
        samplers=(("FLOAT_2D", "src"),), push_constants=(("VEC4", "params"),)))


class Accumulator:
    """An RGBA32F sum of weighted frames (additive blending of premultiplied colour)."""

    def __init__(self):
        self._size = None
        self.texture = None
        self._fb = None
        self._ids = []
        self._ids_size = None
        self.passes = PassResolve()  # the render passes averaged with the colour (one draw)
        self.averaged = {}          # slot -> that pass slot's averaged texture after the last frame

    def id_target(self, k: int, width: int, height: int):
        """(R32F id texture, depth texture, framebuffer) number ``k``: 0 the centre's, 1..BATCH a
        sample's (one depth texture, cleared by each draw)."""
        import gpu

        if self._ids_size != (width, height):
            d = gpu.types.GPUTexture((width, height), format="DEPTH_COMPONENT32F")
            self._ids = []
            for _ in range(BATCH + 1):
                t = gpu.types.GPUTexture((width, height), format="R32F")
                self._ids.append((t, d, gpu.types.GPUFrameBuffer(color_slots=(t,), depth_slot=d)))
            self._ids_size = (width, height)
        return self._ids[k]

    def _bind(self, width: int, height: int, first: bool):
        import gpu

        if self._size != (width, height):
            self.texture = gpu.types.GPUTexture((width, height), format="RGBA32F")
            self._fb = gpu.types.GPUFrameBuffer(color_slots=(self.texture,))
            self._size = (width, height)
        if first:
            fb = self._fb
            assert fb is not None       # made above for this size (free() resets the size with it)
            with fb.bind():
                fb.clear(color=(0.0, 0.0, 0.0, 0.0))

    def _draw(self, cache, sh, width: int, height: int):
        import gpu

        fb = self._fb
        assert fb is not None           # made by _bind, which the callers run first
        with fb.bind():
            gpu.state.viewport_set(0, 0, width, height)
            gpu.state.depth_test_set("NONE")
            gpu.state.face_culling_set("NONE")
            gpu.state.blend_set("ADDITIVE_PREMULT")
            cache.fullscreen_batch(sh).draw(sh)
            gpu.state.blend_set("NONE")

    def add(self, cache, tex, weight: float, width: int, height: int, first: bool) -> None:
        """Add ``tex`` x ``weight`` (``cache``: the pipeline's GpuCache)."""
        self._bind(width, height, first)
        sh = _accumulate_shader(cache)
        sh.bind()
        sh.uniform_sampler("src", tex)
        sh.uniform_float("params", (float(weight), 0.0, 0.0, 0.0))
        self._draw(cache, sh, width, height)

    def resolve(self, cache, tex, weight: float, width: int, height: int, offsets, first: bool,
                ids_from=None) -> None:
        """Add the colours of the coverage samples in id targets 1..len(offsets) (each x
        ``weight``) against the centre's ids (target 0); ``offsets``: their (dx, dy) in pixels;
        ``ids_from``: the accumulator whose id targets hold the samples (default this one)."""
        ids = (ids_from or self)._ids
        self._bind(width, height, first)
        count = len(offsets)
        sh = _resolve_shader(cache, count)
        sh.bind()
        sh.uniform_sampler("src", tex)
        sh.uniform_sampler("ids_0", ids[0][0])
        for k in range(1, count + 1):
            sh.uniform_sampler(f"ids_{k}", ids[k][0])
        o = np.zeros(16)
        o[:2 * count] = np.asarray(offsets, np.float64).reshape(-1)
        sh.uniform_float("params", (float(weight), 0.0, 0.0, 0.0))
        for i, name in enumerate(("o01", "o23", "o45", "o67")[:(count + 1) // 2]):   # (the others unused)
            sh.uniform_float(name, tuple(float(v) for v in o[4 * i:4 * i + 4]))
        self._draw(cache, sh, width, height)

    def free(self):
        self.texture = None
        self._fb = None
        self._size = None
        self._ids = []               # the id targets belong to the freed GPU context too
        self._ids_size = None
        self.passes.free()
        self.averaged = {}


def render_samples(pipeline, frame, accumulator: Accumulator, after_first=None, ids=None, frame_at=None):
    """Draw ``frame`` ``frame.settings.samples`` times (see the module docstring); returns the
    averaged colour texture.  ``after_first()`` runs after the first (centre) sample, while the
    pipeline's targets still hold it (the render passes are read there); it may return the
    passes to average like the colour (a pass_resolve.Sources): ``accumulator.averaged`` holds
    their slots' textures after (with one sample, or shading every sample: the centre's values).
    ``ids`` (Cryptomatte, engine/features/passes/cryptomatte.py): an object with ``key(item)`` (the
    id each item draws with in the coverage samples) and ``take(texture, width, height)``, handed
    every sample's id image (centre first) right after it is drawn.  ``frame_at(i)`` (motion
    blur, engine/features/passes/motion_blur.py): the frame of sample ``i`` >= 1 at its own instant
    (``frame`` is the first's); every sample is then drawn and shaded whole, shadows included."""
    s = frame.settings
    n = max(1, int(getattr(s, "samples", 1)))
    accumulator.averaged = {}
    key = None if ids is None else ids.key
    w, h = s.width, s.height

    def draw_ids(fr, k):
        target = accumulator.id_target(k, w, h)
        pipeline.draw_ids(fr, target, key=key)
        if ids is not None:
            ids.take(target[0], w, h)

    if n == 1:
        tex = pipeline.execute(frame)
        sources = after_first() if after_first is not None else None
        if sources is not None:
            accumulator.averaged = accumulator.passes.resolve(pipeline.gpu, sources, (), 1.0, w, h)
        if ids is not None:
            draw_ids(frame, 0)
        return tex
    base = dataclasses.replace(s, fxaa=False, jitter=(0.0, 0.0), reuse_shadow=False)
    if frame_at is not None:
        return _samples_over_time(pipeline, frame, accumulator, after_first, draw_ids if ids else None, frame_at, base)
    if not SHADE_EVERY_SAMPLE:
        # shade once, cover n times: the frame is shaded at the pixel centres, then only which
        # surface covers each sub-pixel sample is drawn (ID-only shaders) and resolved
        tex = pipeline.execute(dataclasses.replace(frame, settings=base))
        sources = after_first() if after_first is not None else None
        draw_ids(dataclasses.replace(frame, settings=base), 0)
        offsets = sample_offsets(n)[1:]
        if sources is not None:
            # the colour and the passes resolved together: one draw per batch of samples, the
            # centre sample summed in the first (pass_resolve.py)
            both = dataclasses.replace(sources, samplers=(("src", tex),) + sources.samplers,
                                       outputs=(("colour", "texelFetch(src, q, 0)"),) + sources.outputs)
            ids_tex = [t[0] for t in accumulator._ids]
            for b0 in range(0, len(offsets), BATCH):
                batch = offsets[b0:b0 + BATCH]
                for k, (dx, dy) in enumerate(batch, start=1):
                    draw_ids(dataclasses.replace(frame, camera=jittered(frame.camera, dx, dy, w, h), settings=base), k)
                got = accumulator.passes.resolve(pipeline.gpu, both, ids_tex, 1.0 / n, w, h, batch, first=(b0 == 0))
            colour = got.pop("colour")
            accumulator.averaged = got
            return colour
        accumulator.add(pipeline.gpu, tex, 1.0 / n, w, h, first=True)           # the centre sample: the frame itself
        for b0 in range(0, len(offsets), BATCH):
            batch = offsets[b0:b0 + BATCH]
            for k, (dx, dy) in enumerate(batch, start=1):
                draw_ids(dataclasses.replace(frame, camera=jittered(frame.camera, dx, dy, w, h), settings=base), k)
            accumulator.resolve(pipeline.gpu, tex, 1.0 / n, w, h, batch, first=False)
        return accumulator.texture
    for i, (dx, dy) in enumerate(sample_offsets(n)):
        settings = base if i == 0 else dataclasses.replace(base, jitter=(float(dx), float(dy)), reuse_shadow=True)
        cam = frame.camera if i == 0 else jittered(frame.camera, dx, dy, w, h)
        tex = pipeline.execute(dataclasses.replace(frame, camera=cam, settings=settings))
        if i == 0 and after_first is not None:
            sources = after_first()     # (the passes keep the centre sample's values here)
            if sources is not None:
                accumulator.averaged = accumulator.passes.resolve(pipeline.gpu, sources, (), 1.0, w, h)
        if ids is not None:
            draw_ids(dataclasses.replace(frame, camera=cam, settings=settings), 0)
        accumulator.add(pipeline.gpu, tex, 1.0 / n, w, h, first=(i == 0))
    return accumulator.texture


def _samples_over_time(pipeline, frame, accumulator, after_first, draw_ids, frame_at, base):
    """``render_samples`` with motion blur: sample ``i`` is ``frame_at(i)`` (``frame`` for 0), with
    the sample's sub-pixel offset, drawn and shaded whole (its own shadow maps); the render passes
    are read from the first (after_first)."""
    w, h = base.width, base.height
    n = max(1, int(getattr(base, "samples", 1)))
    for i, (dx, dy) in enumerate(sample_offsets(n)):
        fr = frame if i == 0 else frame_at(i)
        settings = dataclasses.replace(fr.settings, fxaa=False, jitter=(float(dx), float(dy)) if i else (0.0, 0.0),
                                       reuse_shadow=False)
        cam = fr.camera if i == 0 else jittered(fr.camera, dx, dy, w, h)
        drawn = dataclasses.replace(fr, camera=cam, settings=settings)
        tex = pipeline.execute(drawn)
        if i == 0 and after_first is not None:
            sources = after_first()     # (the passes keep the first sample's values here)
            if sources is not None:
                accumulator.averaged = accumulator.passes.resolve(pipeline.gpu, sources, (), 1.0, w, h)
        if draw_ids is not None:
            draw_ids(drawn, 0)
        accumulator.add(pipeline.gpu, tex, 1.0 / n, w, h, first=(i == 0))
    return accumulator.texture
