"""Static casters' shadow depth kept between frames (issue 37).

A depth atlas (the sun's cascades, the local lamps' spot maps and cube faces) is drawn in two
layers:

* **static casters**: items with no palette, no morph (neither shader-composed nor rebuilt on
  the CPU), no animated UVs on an alpha-tested material, and the same world matrix as in the
  previous frame.  They are drawn into this cache's own atlas, tile by tile, and a tile is
  redrawn only when its key changes: the tile's place and size, its projection (the lamp, the
  camera-dependent cascade fit), and per static caster drawn into it its vertex batch, world
  matrix, material block, textures and shader variant.  A caster that moves, appears or
  disappears, a lamp that moves, a changed shadow resolution, a light-linking change (a lamp's
  caster set) or an edited mesh (a new batch) therefore redraws exactly the tiles it reaches.
* **moving casters** (skinned and morphed characters, objects whose matrix changed since the
  last frame): drawn every frame over a copy of the cached static depth (one full-screen draw
  writing ``gl_FragDepth``).  Depth testing keeps the nearest surface whatever the order, so the
  atlas is the one drawing every caster at once would give, bit for bit.

A frame without a moving caster in any tile samples the cache's atlas directly (no copy).  A
frame whose static casters are few triangles for the atlas's size (``worth_it``: the copy would
cost more than drawing them) draws every caster directly, as before the cache.  The
objects a key names by ``id`` (batches, material blocks, textures) are referenced by the cache,
so an id cannot be reused by a new object while its key is kept.  Owned by a ShadowPass
(``depth_cache``), freed with it; ``stats`` counts the last frame's work.
"""
from __future__ import annotations

import numpy as np

from .shadow import draw_tiles

#: ``StaticDepthCache.worth_it``: static triangles per atlas texel from which the cache pays.  On
#: llvmpipe a full-screen depth copy costs about as much as drawing 1 triangle per 16 texels (a
#: depth-only triangle of a few texels); the demo (a 512-triangle ground, 3 cascades on a 3072 x
#: 1024 atlas: 0.0005) draws directly, the set's terrain (2,000,000 triangles in ~20 tiles) keeps.
MIN_TRIANGLES_PER_TEXEL = 1.0 / 16.0

_COPY_FRAGMENT = """
void main()
{
  gl_FragDepth = (params.x > 0.5) ? 1.0 : texelFetch(src, ivec2(gl_FragCoord.xy), 0).r;
  frag_color = vec4(0.0);
}
"""


def _copy_shader(cache):
    """A full-screen shader writing depth: the static atlas's texel (params.x 0) or 1.0 (a
    tile's clear, params.x 1: a clear limited to the viewport, whatever the backend)."""
    def make():
        import gpu

        info = gpu.types.GPUShaderCreateInfo()
        info.vertex_in(0, "VEC2", "p")
        info.sampler(0, "FLOAT_2D", "src")
        info.push_constant("VEC4", "params")
        info.depth_write("ANY")
        info.fragment_out(0, "VEC4", "frag_color")
        info.vertex_source("void main() { gl_Position = vec4(p, 0.0, 1.0); }")
        info.fragment_source(_COPY_FRAGMENT)
        return gpu.shader.create_from_info(info)

    return cache.shader("shadow_depth_copy", make)


def item_identity(it) -> tuple:
    """What names an item from frame to frame (its object, primitive and material slot)."""
    return (it.object_name, getattr(it, "node_index", 0), getattr(it, "primitive_index", 0),
            getattr(it, "material_index", 0))


class StaticDepthCache:
    """The static casters' depth atlas of one ShadowPass and the key of each of its tiles."""

    def __init__(self, gpu_cache):
        self.gpu = gpu_cache          # the pipeline's GpuCache (the copy shader and its batch)
        self._size = None
        self._depth = None
        self._fb = None
        self._keys = {}               # (x, y, size) -> the key its static depth was drawn with
        self._refs = {}               # (x, y, size) -> objects its key names by id (kept alive)
        self._worlds = {}             # item_identity -> world matrices' bytes of the last frame
        self.stats = {"static_tiles_drawn": 0, "static_draws": 0, "moving_draws": 0, "copied": False}
        # below this many static triangles drawn per atlas texel the atlas is drawn directly
        # (``worth_it``); 0 always keeps the static depth
        self.min_triangles_per_texel = MIN_TRIANGLES_PER_TEXEL

    @property
    def texture(self):
        return self._depth

    def _ensure(self, size) -> None:
        import gpu

        if self._size != size:
            self._depth = gpu.types.GPUTexture(size, format="DEPTH_COMPONENT32F")
            self._fb = gpu.types.GPUFrameBuffer(depth_slot=self._depth)
            with self._fb.bind():
                self._fb.clear(depth=1.0)
            self._size = size
            self._keys.clear()
            self._refs.clear()

    def _moving(self, casters) -> np.ndarray:
        """(K,) bool: the casters whose world matrix is not one its object had last frame (an
        object not drawn last frame is not moving)."""
        now = {}
        out = np.zeros(len(casters), bool)
        last = self._worlds
        for k, it in enumerate(casters):
            ident = item_identity(it)
            w = np.asarray(it.world, np.float64).tobytes()
            now.setdefault(ident, set()).add(w)
            prev = last.get(ident)
            out[k] = prev is not None and w not in prev      # (a new object is static: its key is new)
        self._worlds = now
        return out

    def _static(self, casters, instances, mspec) -> np.ndarray:
        """(K,) bool: the casters this cache may keep (see the module docstring)."""
        moving = self._moving(casters)
        out = np.zeros(len(casters), bool)
        for k, it in enumerate(casters):
            if moving[k] or it.palette is not None or getattr(it, "morphed", False):
                continue
            stream = it.stream
            if getattr(stream, "morph", None) is not None or getattr(stream, "batch", None) is None:
                continue
            i = instances.index.get(id(it))
            if i is None or int(instances.vclass[i]) != 0:
                continue
            spec = mspec(it.material_name)
            if spec is None or (spec["alpha"] != 0 and spec["uv_anim"]):
                continue
            out[k] = True
        return out

    def draw(self, fb, size, tiles, casters, instances, shader_for, bind_material, material_key, mspec):
        """Draw the atlas ``fb`` (of ``size``) as ``shadow.draw_tiles`` would; ``tiles``: (x, y,
        size, index, caster indices, (4,4) projection) per tile; ``material_key(name)``: what the
        material's shadow draw reads (its block's bytes, then its textures: objects, compared by
        identity and held); ``mspec(name)``: its material_spec.  Returns (the atlas to sample, the caster draws made)."""
        static = self._static(casters, instances, mspec)
        if not self.worth_it(tiles, casters, static, size):
            # little static geometry: drawing it costs less than copying the kept depth
            self.stats = {"static_tiles_drawn": 0, "static_draws": 0, "moving_draws": 0, "copied": False,
                          "bypassed": True}
            return None, draw_tiles(fb, [t[:5] for t in tiles], casters, instances, shader_for, bind_material)
        self._ensure(size)
        stale, moving_tiles = [], []
        keys, refs = {}, {}
        for x, y, sz, index, idx, matrix in tiles:
            idx = np.asarray(idx, np.intp)
            s_idx, d_idx = idx[static[idx]], idx[~static[idx]]
            tile = (x, y, sz)
            parts, held = [], []
            for k in s_idx:
                it = casters[int(k)]
                mk = material_key(it.material_name)
                held.append(it.stream.batch)
                held.extend(mk[1:])
                parts.append((id(it.stream.batch), np.asarray(it.world, np.float64).tobytes(),
                               it.material_name, mk[0], tuple(id(o) for o in mk[1:])))
            parts.sort()
            key = (index, np.asarray(matrix, np.float64).tobytes(), tuple(parts))
            keys[tile], refs[tile] = key, held
            if self._keys.get(tile) != key:
                stale.append((x, y, sz, index, s_idx))
            if len(d_idx):
                moving_tiles.append((x, y, sz, index, d_idx))
        static_draws = 0
        if stale:
            static_draws = draw_tiles(self._fb, stale, casters, instances, shader_for, bind_material,
                                      clear=self._clear_tile)
        self._keys.update(keys)
        self._refs.update(refs)
        moving_draws = 0
        copied = bool(moving_tiles)
        if copied:
            self._copy_into(fb, size)
            moving_draws = draw_tiles(fb, moving_tiles, casters, instances, shader_for, bind_material, clear=None)
        self.stats = {"static_tiles_drawn": len(stale), "static_draws": static_draws,
                      "moving_draws": moving_draws, "copied": copied}
        return (None if copied else self._depth), static_draws + moving_draws

    def worth_it(self, tiles, casters, static, size) -> bool:
        """Whether keeping the static depth pays: the static casters' triangles the tiles would
        draw (each tile counts its own) are at least ``min_triangles_per_texel`` x the atlas's
        texels (the copy draws every texel once).  A character on a small ground is drawn
        directly, as before the cache."""
        if self.min_triangles_per_texel <= 0.0:
            return True
        tris = np.fromiter((float(getattr(it.stream, "triangle_count", 0) or 0) if static[k] else 0.0
                            for k, it in enumerate(casters)), np.float64, len(casters))
        drawn = sum(float(tris[np.asarray(t[4], np.intp)].sum()) for t in tiles if len(t[4]))
        return drawn >= self.min_triangles_per_texel * float(size[0]) * float(size[1])

    def _fullscreen(self, mode: float, src=None) -> None:
        import gpu

        sh = _copy_shader(self.gpu)
        sh.bind()
        sh.uniform_sampler("src", src if src is not None else self._depth)
        sh.uniform_float("params", (float(mode), 0.0, 0.0, 0.0))
        gpu.state.depth_test_set("ALWAYS")
        gpu.state.depth_mask_set(True)
        gpu.state.face_culling_set("NONE")
        self.gpu.fullscreen_batch(sh).draw(sh)
        gpu.state.depth_test_set("LESS_EQUAL")

    def _clear_tile(self, x, y, size) -> None:
        """Depth 1 over one tile of the static atlas (the framebuffer is bound)."""
        import gpu

        gpu.state.viewport_set(x, y, size, size)
        self._fullscreen(1.0, src=self.gpu.dummy_texture("white"))

    def _copy_into(self, fb, size) -> None:
        """The static atlas's depth into ``fb`` (the frame's atlas), every texel."""
        import gpu

        with fb.bind():
            gpu.state.viewport_set(0, 0, size[0], size[1])
            self._fullscreen(0.0)

    def free(self) -> None:
        self._depth = None
        self._fb = None
        self._size = None
        self._keys.clear()
        self._refs.clear()
        self._worlds.clear()
