"""Skin once per frame (an experiment, issue #14 "Rendering cost"; off by default: ``ENABLED``).

Without it every geometry pass morphs and skins each vertex itself: the shadow pass once per
cascade, then the forward and the outline pass.  With it, one pass at the start of the frame
draws every skinned item's vertices as points (its stream's ``points_batch``, instanced like the
passes' draws) into one RGBA32F texture: per vertex a 2x2-texel block (a point of size 2) with
the morphed and skinned mesh-local position and handedness sign, normal, tangent and outline
smooth normal (glsl/skinning.glsl, SKIN_ONCE_PASS); the passes then draw those items with their
"fetch" variant (SKIN_FETCH), which reads the block of ``skinned_base() + gl_VertexID`` instead
of morphing and skinning.  Items without a palette (static) are drawn as before.

The block of item i's vertex v is ``rows[i, 4, 3] + v`` (FrameInstances: the instance data's free
fourth texel; one-object draws pass it as the push constant ``skin_base``).

Measured (tools/bench_render.py --skin-once, llvmpipe, 2 shared cores): it is slower, so it is off.
Crowd of 36 at 640x480: the skin pass costs 31-42 ms for 254k vertices, of which ~27 ms is the
POINTS draw itself (the same pass without morph or skinning), while the passes save ~0-3 ms
(shadow), ~0-3 ms (forward) and ~3-8 ms (outline); F12 x1.12-1.48, Ctrl+F12 x1.13-1.23.  Demo at
1280x720: skin pass 1.3-2 ms, shadow -0.8 to -1.5 ms, forward and outline within noise; F12
x0.81-1.23 (noise).  A ``gpu.compute`` pass writing an image works headless on 4.5 and 5.2
(~8 ms for 262k vertices of 4-joint skinning in a synthetic test) but Python's gpu module cannot
bind a vertex buffer as a storage buffer, so every stream's attributes would have to be kept
a second time in textures (and re-uploaded for CPU-rebuilt morphs) to save at most ~10 ms.
"""
from __future__ import annotations

import numpy as np

from . import mtoon_shaders
from .mtoon_shaders import VERTEX_DEFINES
from .shader_lib import SKIN_ONCE_BLOCKS, build_shader

#: True: skinned items are skinned once per frame and every pass fetches the result (off: slower
#: on llvmpipe, see above; tests/test_skin_once.py keeps it equal to the per-pass skinning)
ENABLED = False

_VS = """
void main()
{
  vec3 p = pos; vec3 n = nor; vec3 t = tan.xyz; vec3 s = snor;
  morph_all(p, n, t, s);
  float handed = 1.0;
  if (skin_influences != 0) {
    /* skin_vertex_handed (forward), skin_vertex of the smooth normal (outline), skin_position */
    mat4 m = skin_matrix_at(p);
    p = (m * vec4(p, 1.0)).xyz;
    mat3 m3 = mat3(m);
    mat3 c = skin_normal_matrix(m3);
    vec3 n2 = c * n;
    vec3 t2 = m3 * t;
    vec3 s2 = c * s;
    n = (dot(n2, n2) > 0.0) ? normalize(n2) : n;
    t = (dot(t2, t2) > 0.0) ? normalize(t2) : t;
    s = (dot(s2, s2) > 0.0) ? normalize(s2) : s;
    handed = (determinant(m3) < 0.0) ? -1.0 : 1.0;
  }
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


class SkinOnce:
    """The skinned-vertex texture (kept between frames, grown when needed) and its pass."""

    def __init__(self, cache):
        self.cache = cache
        self._tex = None
        self._fb = None
        self._height = 0
        self._points = {}           # id(vbo) -> (vbo, POINTS batch over the stream's buffers)
        self.vertices = 0           # vertices skinned by the last frame's pass
        self.draws = 0

    def _points_batch(self, stream, used):
        key = id(stream.vbo)
        hit = self._points.get(key)
        if hit is None or hit[0] is not stream.vbo:
            hit = self._points[key] = (stream.vbo, stream.points_batch())
        used[key] = hit
        return hit[1]

    def run(self, inst) -> bool:
        """Skin every skinned item of ``inst`` (FrameInstances) into the texture and switch its
        draws to the fetch variants (``inst.vclass`` 4).  False (nothing changed): the flag is
        off, the general shaders draw (mtoon_shaders.SPECIALIZE off), no item is skinned, or
        the vertices do not fit one texture."""
        import gpu

        from ..runtime.gpu_backend import bind_deform

        self.vertices = self.draws = 0
        if not ENABLED or not mtoon_shaders.SPECIALIZE or not inst.items:
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
        vclass = inst.vclass.copy()
        inst.rows[sel, 4, 3] = first
        used = {}
        with self._fb.bind():
            gpu.state.viewport_set(0, 0, 2 * SKIN_ONCE_BLOCKS, self._height)
            gpu.state.depth_test_set("NONE")
            gpu.state.depth_mask_set(False)
            gpu.state.blend_set("NONE")
            gpu.state.face_culling_set("NONE")
            gpu.state.program_point_size_set(True)
            bound = None
            for group in groups.values():
                i0, it = group[0]
                shader = skin_pass_shader(self.cache, inst.VERTEX_CLASSES[int(vclass[i0])])
                if shader is not bound:
                    shader.bind()
                    shader.uniform_int("target_height", self._height)
                    bound = shader
                points = self._points_batch(it.stream, used)
                for k in range(0, len(group), inst.limit):
                    part = group[k:k + inst.limit]
                    if len(part) == 1:
                        bind_deform(shader, it if k == 0 else part[0][1])
                        shader.uniform_int("skin_base", int(inst.rows[part[0][0], 4, 3]))
                        points.draw(shader)
                    else:
                        rows = inst.bind_instanced(shader, part)   # kept until the draw is made
                        points.draw_instanced(shader, instance_start=0, instance_count=len(part))
                        del rows
                    self.draws += 1
            gpu.state.program_point_size_set(False)
        self._points = used
        inst.vclass[sel] = inst.FETCH
        inst.skinned_texture = self._tex
        self.vertices = total
        return True

    def free(self):
        self._tex = self._fb = None
        self._height = 0
        self._points = {}
