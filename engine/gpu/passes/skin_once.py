"""Skin once per frame (issue #37 item 2): the frame's deformed vertices are morphed and skinned
once, and every pass and anti-aliasing sample of that frame reads the result.

Without it every geometry pass morphs and skins each vertex itself: the shadow pass once per
cascade, the forward and the outline pass, then each coverage sample of the frame's
anti-aliasing twice more (its id draw of the surfaces and of the outline hulls,
engine/gpu/passes/samples.py): at 8 samples a skinned vertex went through the skinning
arithmetic 19 times a frame.  With it, one pass at the start of the frame draws every skinned
item's vertices as points (its stream's ``points_batch``, instanced like the passes' draws) into
one RGBA32F texture: per vertex a 2x2-texel block (a point of size 2) with the morphed and
skinned mesh-local position and handedness sign, normal, tangent and outline smooth normal
(glsl/skinning.glsl, SKIN_ONCE_PASS); the passes then draw those items with their "fetch"
variant (SKIN_FETCH), which reads the block of ``skinned_base() + gl_VertexID``.  Items without a
palette (static) are drawn as before.

The result belongs to one frame at one instant: ``FramePipeline.execute`` skins again for each
frame it draws (a motion-blur step at another shutter time is another ``execute``), and the
coverage samples of that frame draw with its ``FrameInstances`` (the skinned texture and each
item's block).  Item i's first block is ``rows[i, 5, 0]`` of the instance data (one-object draws:
the push constant ``skin_base``).

It runs for frames drawn with more than one sample (``frame.settings.samples``): a one-sample
frame draws each vertex in three passes, where the POINTS draw costs about what it saves on
llvmpipe (measured in issue 14: 27 ms of points against 5-10 ms saved, docs/performance.md).
A ``gpu.compute`` pass works headless on llvmpipe in 4.5, 5.0 and 5.2, but Python's gpu module
cannot bind a vertex buffer as a storage buffer: every stream's attributes would be kept a
second time in textures (and uploaded again for CPU-rebuilt morphs); the POINTS pass reads the
vertex buffers the passes draw.
"""
from __future__ import annotations

import time

import numpy as np

from ..layout import SKIN_ONCE_BLOCKS
from . import mtoon_shaders
from .mtoon_shaders import VERTEX_DEFINES
from .shader_lib import build_shader

#: False: every pass skins for itself (the reference tests/test_skin_once.py compares with)
ENABLED = True

_VS = """
void main()
{
  vec3 p = pos; vec3 n = nor; vec3 t = tan.xyz; vec3 s = snor;
  morph_all(p, n, t, s);
  float handed = 1.0;
#ifndef SKIN_STATIC
  if (skin_influences != 0) {
    /* skin_vertex_handed (forward), skin_vertex of the smooth normal (outline), skin_position */
    mat4 m = skin_matrix_at(p);
    p = (m * vec4(p, 1.0)).xyz;
    mat3 m3 = mat3(m);
    vec3 t2 = m3 * t;
    n = skin_normal(m3, n);
    s = skin_normal(m3, s);
    t = (dot(t2, t2) > 0.0) ? normalize(t2) : t;
    handed = (determinant(m3) < 0.0) ? -1.0 : 1.0;
  }
#endif
  v_pos = vec4(p, handed);
  v_nor = vec4(n, 0.0);
  v_tan = vec4(t, 0.0);
  v_snor = vec4(s, 0.0);
  int g = skinned_base() + gl_VertexID;
  /* the centre of the vertex's 2x2 block: a point of size 2 covers exactly its 4 texels */
  vec2 c = vec2(float(2 * (g % SKIN_ONCE_BLOCKS) + 1), float(2 * (g / SKIN_ONCE_BLOCKS) + 1));
  gl_Position = vec4(c.x / float(SKIN_ONCE_BLOCKS) - 1.0, c.y / float(target_height) * 2.0 - 1.0, 0.0, 1.0);
  gl_PointSize = 2.0;
}
"""

_FS = """
void main()
{
  ivec2 q = ivec2(gl_FragCoord.xy) & 1;
  frag_color = (q.y == 0) ? ((q.x == 0) ? v_pos : v_nor) : ((q.x == 0) ? v_tan : v_snor);
}
"""


def skin_pass_shader(cache, vclass: str):
    """The skin pass's shader for a vertex class (mtoon_shaders.VERTEX_DEFINES), from ``cache``
    (the pipeline's GpuCache)."""
    defines = VERTEX_DEFINES[vclass] + ("SKIN_ONCE_PASS",)
    return cache.shader("skin_once|" + vclass, lambda: build_shader(
        "stylized_skin_once", _VS, _FS,
        interfaces=(("flat", "VEC4", "v_pos"), ("flat", "VEC4", "v_nor"), ("flat", "VEC4", "v_tan"),
                    ("flat", "VEC4", "v_snor")),
        push_constants=(("INT", "target_height"),), defines=defines))


def wanted(settings) -> bool:
    """Whether a frame drawn with ``settings`` skins once: more than one sample (see above)."""
    return ENABLED and mtoon_shaders.SPECIALIZE and int(getattr(settings, "samples", 1) or 1) > 1


class SkinOnce:
    """The skinned-vertex texture (kept between frames, grown when needed) and its pass."""

    def __init__(self, cache):
        self._cache = cache          # the pipeline's GpuCache (the pass's shaders)
        self._tex = None
        self._fb = None
        self._height = 0
        self._points = {}           # id(vbo) -> (vbo, POINTS batch over the stream's buffers)
        self.vertices = 0           # vertices skinned by the last frame's pass
        self.draws = 0
        self.runs = 0               # skin passes since the counter was last read (stats)

    def _points_batch(self, stream, used):
        key = id(stream.vbo)
        hit = self._points.get(key)
        if hit is None or hit[0] is not stream.vbo:
            hit = self._points[key] = (stream.vbo, stream.points_batch())
        used[key] = hit
        return hit[1]

    def frame(self, inst, settings, flush, t0: float, stats: dict) -> float:
        """The frame's skin pass when ``settings`` want one (``wanted``), timed on its own:
        ``flush(key, t, fb)`` (the pipeline's) records ``skin_once_ms``; returns ``t0`` moved
        on by that time (so the pass after it does not count it).  ``stats`` (the pipeline's)
        gets the vertices and draws of the pass."""
        self.vertices = self.draws = 0
        stats["skinning_draws"] = 0          # (FrameInstances.tally: this frame's count starts)
        if wanted(settings):
            t = time.perf_counter()
            if self.run(inst):
                t0 += flush("skin_once_ms", t, self._fb) - t
        stats.update(skin_once_vertices=self.vertices, skin_once_draws=self.draws)
        return t0

    def run(self, inst) -> bool:
        """Skin every skinned item of ``inst`` (FrameInstances) into the texture and switch its
        draws to the fetch variants (``inst.vclass`` FETCH).  False (nothing changed): no item
        is skinned, or the vertices do not fit one texture."""
        import gpu

        from ..backend import bind_deform

        self.vertices = self.draws = 0
        if not inst.items:
            return False
        sel = np.flatnonzero(inst.vclass != 0)
        if sel.size == 0:
            return False
        counts = np.fromiter((int(inst.items[i].stream.vertex_count) for i in sel), np.int64, sel.size)
        first = np.zeros(sel.size, np.int64)
        np.cumsum(counts[:-1], out=first[1:])
        total = int(counts.sum())
        height = 2 * -(-total // SKIN_ONCE_BLOCKS)
        if height > inst.limit or total == 0:
            return False
        if self._tex is None or height > self._height:
            self._height = min(inst.limit, max(height, 2 * -(-height // 128) * 64))   # headroom
            self._tex = gpu.types.GPUTexture((2 * SKIN_ONCE_BLOCKS, self._height), format="RGBA32F")
            self._fb = gpu.types.GPUFrameBuffer(color_slots=(self._tex,))
        # the skin pass's groups: what shares a vertex buffer and deformation layout
        groups = {}
        for i in sel:
            key = inst.group_key(int(i), inst.items[i]) if inst.enabled else (int(i),)
            if len(key) > 1:
                key = (id(inst.items[i].stream.vbo),) + key[3:]
            groups.setdefault(key, []).append((int(i), inst.items[i]))
        inst.rows[sel, 5, 0] = first        # before any instance_data texture is made
        used = {}
        fb = self._fb
        assert fb is not None           # made with _tex above (free() drops both)
        with fb.bind():
            gpu.state.viewport_set(0, 0, 2 * SKIN_ONCE_BLOCKS, self._height)
            gpu.state.depth_test_set("NONE")
            gpu.state.depth_mask_set(False)
            gpu.state.blend_set("NONE")
            gpu.state.face_culling_set("NONE")
            gpu.state.program_point_size_set(True)
            bound = None
            for group in groups.values():
                i0, it = group[0]
                shader = skin_pass_shader(self._cache, inst.VERTEX_CLASSES[int(inst.vclass[i0])])
                if shader is not bound:
                    shader.bind()
                    shader.uniform_int("target_height", self._height)
                    bound = shader
                points = self._points_batch(it.stream, used)
                for k in range(0, len(group), inst.limit):
                    part = group[k:k + inst.limit]
                    if len(part) == 1:
                        bind_deform(shader, part[0][1])
                        shader.uniform_int("skin_base", int(inst.rows[part[0][0], 5, 0]))
                        points.draw(shader)
                    else:
                        rows = inst.bind_instanced(shader, part)   # kept until the draw is made
                        points.draw_instanced(shader, instance_start=0, instance_count=len(part))
                        del rows
                    self.draws += 1
                    inst.tally["skinning_draws"] = inst.tally.get("skinning_draws", 0) + 1   # (the one that skins)
            gpu.state.program_point_size_set(False)
        self._points = used
        inst.mark_skinned(sel, self._tex)
        self.vertices = total
        self.runs += 1
        return True

    def free(self):
        self._tex = self._fb = None
        self._height = 0
        self._points = {}
