"""Static casters' shadow depth kept between frames (issue 37).

A depth atlas (the sun's cascades, the local lamps' spot maps and cube faces) holds two layers:

* **static casters**: items with no palette, no morph (neither shader-composed nor rebuilt on
  the CPU), no animated UVs on an alpha-tested material, and the same world matrix as in the
  previous frame.  A tile's static depth is drawn once and redrawn only when the tile's key
  changes: the tile's place and size, its projection (the lamp, the camera-dependent cascade
  fit), a lamp's reach (big static casters draw only their chunks within it: engine/gpu/chunks.py),
  and per static caster drawn into it its vertex batch, world matrix, material block,
  textures and shader variant.  A caster that moves, appears or disappears, a lamp that moves,
  a changed shadow resolution, a light-linking change (a lamp's caster set) or an edited mesh (a
  new batch) therefore redraws exactly the tiles it reaches.
* **moving casters** (skinned and morphed characters, objects whose matrix changed since the
  last frame): drawn every frame over the static depth.  Before they are drawn, the static depth
  under them is saved into a small *backup* texture: per tile, the rectangle their world boxes
  cover through the tile's projection (``footprint``; the whole tile where a box reaches behind
  a perspective face's eye or is not finite).  The next frame first copies those rectangles
  back, which leaves the atlas holding the static depth alone again, then draws its own moving
  casters the same way.  Depth testing keeps the nearest surface whatever the order, so the
  atlas is the one drawing every caster at once would give, bit for bit.

One atlas is drawn and sampled (the ShadowPass's): the cache costs only the backup of the
moving casters' footprints (a character's few hundred texels a side, not a second atlas), and a
frame copies those footprints instead of clearing and redrawing every tile.  A frame with no
static caster, or whose moving casters' footprints cover more than ``MAX_FOOTPRINT_SHARE`` of
the tiles (a crowd), draws every caster directly and keeps nothing.  The atlas is trusted only while the ShadowPass's
``atlas_token`` is the one this cache last drew with: a new atlas texture or a frame drawn
without the cache changes it, and every tile is then redrawn.  The objects a key names by ``id``
(batches, material blocks, textures) are referenced by the cache, so an id cannot be reused by
a new object while its key is kept.  Owned by a ShadowPass (``depth_cache``), freed with it;
``stats`` counts the last frame's work.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from .shadow import caster_boxes, draw_tiles, drawn_tile

#: texels added on each side of a footprint (the projection here is float64, the GPU's float32)
FOOTPRINT_MARGIN = 2
#: the moving casters' footprints' share of the atlas's tiles above which a frame draws every
#: caster directly: saving and restoring a texel is two full-screen depth writes by a shader,
#: where a direct frame clears it (cheap on llvmpipe) and draws the static casters over it once
#: (the demo's character and the 36-character crowd: about 1.5 % of the sun's cascades)
MAX_FOOTPRINT_SHARE = 0.25

_COPY_FRAGMENT = """
void main()
{
  gl_FragDepth = (params.x > 0.5) ? 1.0 : texelFetch(src, ivec2(gl_FragCoord.xy) + ivec2(params.yz), 0).r;
  frag_color = vec4(0.0);
}
"""


def _copy_shader(cache):
    """A full-screen shader writing depth: ``src``'s texel at the fragment + (params.y, params.z)
    (params.x 0), or 1.0 (a tile's clear, params.x 1: a clear limited to the viewport, whatever
    the backend)."""
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


def footprint(matrix, boxes, x: int, y: int, size: int):
    """(x0, y0, x1, y1): the atlas texels (half-open) that geometry inside ``boxes`` ((K,2,3) world
    min/max) can cover in the tile of ``size`` texels at (x, y) drawn through ``matrix`` (world
    to clip), widened by ``FOOTPRINT_MARGIN``; the whole tile where a box is not finite or
    reaches behind a perspective projection's eye (w <= 0); None where nothing can be drawn."""
    whole = (x, y, x + size, y + size)
    boxes = np.asarray(boxes, np.float64).reshape(-1, 2, 3)
    if not len(boxes):
        return None
    if not np.all(np.isfinite(boxes)) or np.any(boxes[:, 0] > boxes[:, 1]):
        return whole
    corners = boxes[:, _CORNERS, np.arange(3)].reshape(-1, 3)
    clip = np.hstack([corners, np.ones((len(corners), 1))]) @ np.asarray(matrix, np.float64).T
    w = clip[:, 3]
    if not np.all(w > 1e-9):
        return whole
    ndc = clip[:, :2] / w[:, None]
    lo = np.floor(x + (ndc.min(0) + 1.0) * 0.5 * size)
    hi = np.ceil(x + (ndc.max(0) + 1.0) * 0.5 * size)
    lo[1] += y - x
    hi[1] += y - x
    x0, y0 = (max(int(v) - FOOTPRINT_MARGIN, lim) for v, lim in zip(lo, (x, y)))
    x1, y1 = (min(int(v) + FOOTPRINT_MARGIN, lim) for v, lim in zip(hi, (x + size, y + size)))
    if x1 <= x0 or y1 <= y0:
        return None
    return (x0, y0, x1, y1)


_CORNERS = np.array([[i, j, k] for i in (0, 1) for j in (0, 1) for k in (0, 1)])


def pack_rows(rects, width: int):
    """Shelf packing: the origin in a ``width``-wide texture of each (x0, y0, x1, y1) rectangle,
    and the texture's (width, height) needed."""
    origins = []
    cx = cy = row = 0
    used = 1
    for x0, y0, x1, y1 in rects:
        w, h = x1 - x0, y1 - y0
        if cx and cx + w > width:
            cy += row
            cx = row = 0
        origins.append((cx, cy))
        cx += w
        row = max(row, h)
        used = max(used, cx)
    return origins, (max(1, used), max(1, cy + row))


def item_identity(it) -> tuple:
    """What names an item from frame to frame (its object, primitive and material slot)."""
    return (it.object_name, getattr(it, "node_index", 0), getattr(it, "primitive_index", 0),
            getattr(it, "material_index", 0))


def _chunk_content(item, cull, mspec, alone: bool):
    """What an opaque big static caster draws into a tile, by content: the digests of the chunks
    the tile's ``cull`` holds (engine/gpu/chunks.py), so a re-uploaded mesh (an edit) keeps the
    tiles whose chunks did not change; None where the batch itself is the key (no chunks, no
    cull, drawn instanced with another caster of its batch: whole, or a material whose shadow
    reads textures or discards: it reads more than positions)."""
    chunks = getattr(item.stream, "chunks", None)
    spec = mspec(item.material_name)
    if chunks is None or cull is None or not alone or spec is None or spec["alpha"] != 0:
        return None
    return ("chunks", chunks.digests[chunks.visible(item.world, cull)].tobytes())


class StaticDepthCache:
    """The static casters' tile keys of one ShadowPass's atlas and the backup of the static depth
    under the moving casters."""

    def __init__(self, gpu_cache):
        self.gpu = gpu_cache          # the pipeline's GpuCache (the copy shader and its batch)
        self._token = None            # the ShadowPass's atlas_token this cache last drew with
        self._keys = {}               # (x, y, size) -> the static key the atlas's tile holds
        self._refs = {}               # (x, y, size) -> objects its key names by id (kept alive)
        self._worlds = {}             # item_identity -> world matrices' bytes of the last frame
        self._saved = {}              # (x, y, size) -> (atlas rectangle, its origin in the backup)
        self._backup = None           # DEPTH_COMPONENT32F: the static depth under the moving casters
        self._backup_fb = None
        self._backup_size = None
        self.stats = {"static_tiles_drawn": 0, "static_draws": 0, "moving_draws": 0, "restored_texels": 0}

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

    def _forget(self) -> None:
        self._token = None
        self._keys.clear()
        self._refs.clear()
        self._saved.clear()

    def draw(self, fb, atlas, size, tiles, casters, instances, shader_for, bind_material, material_key, mspec,
             token=None) -> int:
        """Draw the atlas ``fb`` (its depth texture ``atlas``, of ``size``) as ``shadow.draw_tiles`` would; ``tiles``: (x, y,
        size, index, caster indices, (4,4) projection) per tile; ``material_key(name)``: what the
        material's shadow draw reads (its block's bytes, then its textures: objects, compared by
        identity and held); ``mspec(name)``: its material_spec; ``token``: the ShadowPass's
        ``atlas_token`` (what the atlas holds is this cache's work only while it is unchanged).
        Returns the caster draws made."""
        static = self._static(casters, instances, mspec)
        if not static.any():
            return self._direct(fb, tiles, casters, instances, shader_for, bind_material)   # nothing to keep
        if token is None or token is not self._token:
            self._forget()
        boxes, _valid = caster_boxes(casters)
        stale, moving_tiles, rects = [], [], []
        keys, refs = {}, {}
        for x, y, sz, index, idx, matrix, cull in tiles:
            idx = np.asarray(idx, np.intp)
            s_idx, d_idx = idx[static[idx]], idx[~static[idx]]
            tile = (x, y, sz)
            parts, held = [], []
            shared = Counter(id(casters[int(k)].stream.batch) for k in s_idx)
            for k in s_idx:
                it = casters[int(k)]
                mk = material_key(it.material_name)
                geo = _chunk_content(it, cull, mspec, shared[id(it.stream.batch)] == 1)
                if geo is None:
                    held.append(it.stream.batch)
                    geo = ("batch", id(it.stream.batch))
                held.extend(mk[1:])
                parts.append((geo, np.asarray(it.world, np.float64).tobytes(),
                               it.material_name, mk[0], tuple(id(o) for o in mk[1:])))
            parts.sort()
            # (a big static caster draws the chunks the tile's cull holds: a lamp's reach is part of it)
            reach = None if cull is None else float(cull.radius)
            key = (index, np.asarray(matrix, np.float64).tobytes(), reach, tuple(parts))
            keys[tile], refs[tile] = key, held
            if self._keys.get(tile) != key:
                stale.append((x, y, sz, index, s_idx, cull))
            if len(d_idx):
                rect = footprint(matrix, boxes[d_idx], x, y, sz)
                if rect is not None:
                    moving_tiles.append((x, y, sz, index, d_idx, cull))
                    rects.append((tile, rect))
        if sum((r[2] - r[0]) * (r[3] - r[1]) for _t, r in rects) > MAX_FOOTPRINT_SHARE * sum(
                t[2] * t[2] for t in tiles):
            # moving casters over much of the atlas (a crowd): saving and restoring their
            # footprints would cost more than drawing every caster
            return self._direct(fb, tiles, casters, instances, shader_for, bind_material)
        stale_tiles = {t[:3] for t in stale}
        # 1. the static depth back under last frame's moving casters (tiles redrawn below aside)
        back = [v for t, v in self._saved.items() if t in keys and t not in stale_tiles]
        restored = self._copy(fb, atlas, back, into_atlas=True)
        # 2. the tiles whose static casters changed: cleared and drawn
        static_draws = 0
        if stale:
            # every tile redrawn (a new fit, e.g. each motion-blur sample): one clear of the whole
            # atlas, not a full-tile draw per tile (llvmpipe clears far faster than it fills)
            whole = len(stale) == len(tiles)
            static_draws = draw_tiles(fb, stale, casters, instances, shader_for, bind_material,
                                      clear="all" if whole else self._clear_tile)
        self._keys = keys
        self._refs = refs
        # 3. the static depth under this frame's moving casters saved, then those drawn over it
        self._saved = {}
        moving_draws = 0
        if rects:
            origins, need = pack_rows([r for _t, r in rects], max(size[0], max(r[2] - r[0] for _t, r in rects)))
            self._ensure_backup(need)
            self._saved = {t: (r, o) for (t, r), o in zip(rects, origins)}
            restored += self._copy(fb, atlas, list(self._saved.values()), into_atlas=False)
            moving_draws = draw_tiles(fb, moving_tiles, casters, instances, shader_for, bind_material, clear=None)
        self._token = token
        self.stats = {"static_tiles_drawn": len(stale), "static_draws": static_draws,
                      "moving_draws": moving_draws, "restored_texels": restored}
        return static_draws + moving_draws

    def _direct(self, fb, tiles, casters, instances, shader_for, bind_material) -> int:
        """Every caster drawn into a cleared atlas, nothing kept (the next frame redraws every tile)."""
        self._forget()
        self.stats = {"static_tiles_drawn": 0, "static_draws": 0, "moving_draws": 0, "restored_texels": 0,
                      "bypassed": True}
        return draw_tiles(fb, [drawn_tile(t) for t in tiles], casters, instances, shader_for, bind_material)

    def _ensure_backup(self, need) -> None:
        """A backup texture of at least ``need`` (width, height); made anew (rounded up to 64
        texels) when too small or more than four times too big."""
        import gpu

        have = self._backup_size
        if have is not None and have[0] >= need[0] and have[1] >= need[1] and have[0] * have[1] <= 4 * need[0] * need[1] + 4096:
            return
        size = tuple(int(-(-int(n) // 64) * 64) for n in need)
        self._backup = gpu.types.GPUTexture(size, format="DEPTH_COMPONENT32F")
        self._backup_fb = gpu.types.GPUFrameBuffer(depth_slot=self._backup)
        self._backup_size = size

    def _copy(self, fb, atlas, saved, into_atlas: bool) -> int:
        """Copy each (atlas rectangle, backup origin) of ``saved`` from the backup into the atlas
        (``fb``, its texture ``atlas``) with ``into_atlas``, else from the atlas into the backup;
        returns the texels copied."""
        import gpu

        if not saved:
            return 0
        assert self._backup_fb is not None, "the backup is made (_ensure_backup) before a copy"
        target, src = (fb, self._backup) if into_atlas else (self._backup_fb, atlas)
        texels = 0
        with target.bind():
            sh = _copy_shader(self.gpu)
            sh.bind()
            sh.uniform_sampler("src", src)
            gpu.state.depth_test_set("ALWAYS")
            gpu.state.depth_mask_set(True)
            gpu.state.face_culling_set("NONE")
            for (x0, y0, x1, y1), (bx, by) in saved:
                w, h = x1 - x0, y1 - y0
                if into_atlas:
                    gpu.state.viewport_set(x0, y0, w, h)
                    sh.uniform_float("params", (0.0, float(bx - x0), float(by - y0), 0.0))
                else:
                    gpu.state.viewport_set(bx, by, w, h)
                    sh.uniform_float("params", (0.0, float(x0 - bx), float(y0 - by), 0.0))
                self.gpu.fullscreen_batch(sh).draw(sh)
                texels += w * h
            gpu.state.depth_test_set("LESS_EQUAL")
        return texels

    def _clear_tile(self, x, y, size) -> None:
        """Depth 1 over one tile of the atlas (its framebuffer is bound)."""
        import gpu

        gpu.state.viewport_set(x, y, size, size)
        sh = _copy_shader(self.gpu)
        sh.bind()
        sh.uniform_sampler("src", self.gpu.dummy_texture("white"))
        sh.uniform_float("params", (1.0, 0.0, 0.0, 0.0))
        gpu.state.depth_test_set("ALWAYS")
        gpu.state.depth_mask_set(True)
        gpu.state.face_culling_set("NONE")
        self.gpu.fullscreen_batch(sh).draw(sh)
        gpu.state.depth_test_set("LESS_EQUAL")

    def free(self) -> None:
        self._forget()
        self._worlds.clear()
        self._backup = None
        self._backup_fb = None
        self._backup_size = None
