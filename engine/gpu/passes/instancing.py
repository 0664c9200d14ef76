"""Grouped (instanced) draws: the items of a pass that share one batch, material, mirroring and
deformation layout are drawn with one ``GPUBatch.draw_instanced`` call.

Linked duplicates and collection instances of one mesh share the primitive's batch (the runtime
keeps one stream per primitive of a MeshAsset; shader-composed morphs draw that stream too), so a
crowd of N characters draws each primitive once per pass instead of N times.  Per frame, every
skinned item's palette goes into one RGBA32F texture (its first row per item) and every
shader-morph item's weights into one R32F texture; per group, a small RGBA32F ``instance_data``
texture holds each instance's model matrix, object id and those two offsets
(glsl/skinning.glsl ``instance_mode`` 1).  A group of one item is drawn as before (push
constants, its own palette and weights), so single objects take exactly the old path.

The palette texture is made from the texel rows of the frame's batched palette update as they
are (``SkinningPaletteSet.texel_rows``, passed as ``palette_rows``: every palette's uploaded rows
are a view of them), not from a concatenation; without them, or for palettes outside them (a
per-group update), the drawn palettes are concatenated.  Palettes drawn alone make their own
texture on first use (``palette_textures.palette_texture``); grouped ones make none.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..backend import bind_deform
from ..chunks import Cull
from ..palette_textures import float_texture, palette_handle, rows_texture
from .common import gl_matrix

#: False draws every item alone (the reference the tests compare instanced frames with)
ENABLED = True
INSTANCE_TEXELS = 6          # per instance: 4 model columns, (object id, palette row, weight base, light-link word),
                             # (first block in the skinned texture, 0, 0, 0): engine/gpu/passes/skin_once.py


def palette_layout(pal_rows, pal_first, palette_rows, limit: int):
    """``(shared, first, count)`` for one palette texture holding every array of ``pal_rows``
    ((J*16,) float32 each, one per palette drawn).  ``palette_rows``: the frame's batched palette
    update (``SkinningPaletteSet.texel_rows()``: ``(rows, {id(palette): first row})``) or None;
    ``pal_first``: the first row ``palette_rows`` gives each of ``pal_rows`` (-1: not in it).
    When every array is a view of that update's rows (it fits ``limit``), ``shared`` is those
    rows as they are and ``first`` = ``pal_first``; otherwise ``shared`` is None and the texture
    is the concatenation of ``pal_rows`` in order.  ``count``: the texture's rows."""
    if not pal_rows:
        return None, np.zeros(0, np.intp), 0
    if palette_rows is not None and palette_rows[0] is not None:
        shared = palette_rows[0]
        first = np.asarray(pal_first, np.intp)
        base = shared.base if shared.base is not None else shared
        if (shared.size // 16 <= limit and bool((first >= 0).all())
                and all(r.base is base for r in pal_rows)):
            return shared, first, shared.size // 16
    sizes = np.fromiter((r.size // 16 for r in pal_rows), np.intp, len(pal_rows))
    first = np.zeros(len(pal_rows), np.intp)
    np.cumsum(sizes[:-1], out=first[1:])
    return None, first, int(sizes.sum())


class FrameInstances:
    """The per-frame instance data of ``items`` (every item any pass of the frame draws)."""

    def __init__(self, items, enabled: bool = True, palette_rows=None, ids=None, tally=None, skinned=None):
        """``palette_rows``: ``SkinningPaletteSet.texel_rows()`` of the frame's runtime (the
        palette texture is then those rows as they are); None concatenates the drawn palettes.
        ``ids``: the id each item draws with (one per item) instead of its ``object_id``
        (Cryptomatte's keys: engine/gpu/passes/samples.py).  ``tally``: the dict whose
        "skinning_draws" counts the draws whose vertex stage morphs or skins (the pipeline's
        stats: every pass and coverage sample of the frame; skin_once.py resets it per frame).
        ``skinned``: the frame's FrameInstances whose skinned vertices (``share_skinning``) and
        tally these draw with."""
        import gpu

        items = list(items)
        self.items = items
        self.index = {id(it): i for i, it in enumerate(items)}
        n = len(items)
        self.draw_calls = 0
        self.instanced_draws = 0
        self.tally = tally if tally is not None else (skinned.tally if skinned is not None else {})
        self.batches = set()
        worlds = np.array([np.asarray(it.world, np.float64).reshape(4, 4) for it in items]).reshape(n, 4, 4)
        self.mirrored = np.linalg.det(worlds[:, :3, :3]) < 0.0 if n else np.zeros(0, bool)
        self.models = [gl_matrix(w) for w in worlds]
        self.worlds = worlds
        # what the current draws can see (engine/gpu/chunks.Cull): a big static mesh drawn
        # alone draws only its chunks inside it; None draws every chunk.  Set by the passes.
        self.cull: Optional[Cull] = None
        rows = np.zeros((n, INSTANCE_TEXELS, 4), np.float32)
        rows[:, :4, :] = worlds.transpose(0, 2, 1)                     # model columns
        self.ids = (np.fromiter((int(getattr(it, "object_id", 0)) for it in items), np.int64, n)
                    if ids is None else np.asarray(ids, np.int64).reshape(n))
        rows[:, 4, 0] = self.ids
        # deformation layout per item (what bind_skinning / bind_morph would bind alone)
        self.influences = np.zeros(n, np.int64)
        # items a SKIN_LBS8 shader variant cannot draw (mtoon_shaders.py): more than 8
        # influences, or a Preserve Volume palette (its first texel's w holds 2, as the shader tests)
        self.vgeneral = np.zeros(n, bool)
        pal_rows, pal_at, pal_items, pal_first = [], {}, [], []
        known = palette_rows[1] if palette_rows is not None and palette_rows[0] is not None else {}
        w_rows, w_at, w_next = [], {}, 0
        for i, it in enumerate(items):
            infl = int(getattr(it, "influences", 0) or 0)
            h = palette_handle(it.palette) if infl else None
            ready = (h is not None and getattr(h, "rows", None) is not None
                     and getattr(it.palette, "is_gpu_ready", lambda: True)())
            if ready and h is not None:     # (ready implies h)
                self.influences[i] = infl
                r = h.rows
                self.vgeneral[i] = infl > 8 or (getattr(r, "size", 0) > 3 and float(r[3]) > 1.5)
                key = id(h)
                if key not in pal_at:
                    pal_at[key] = len(pal_rows)
                    pal_rows.append(h.rows)
                    pal_first.append(known.get(id(it.palette), -1))
                pal_items.append((i, pal_at[key]))
            w = getattr(it.stream, "morph_weights", None)
            if getattr(it.stream, "morph", None) is not None and w is not None:
                key = id(w)
                if key not in w_at:
                    w_at[key] = w_next
                    w_rows.append(w)
                    w_next += w.size
                rows[i, 4, 2] = w_at[key]
        limit = int(gpu.capabilities.max_texture_size_get())
        self.palette_shared, first, pal_next = palette_layout(pal_rows, pal_first, palette_rows, limit)
        if pal_items:
            at = np.array(pal_items, np.intp)
            rows[at[:, 0], 4, 1] = first[at[:, 1]]
        self.rows = rows
        # the shader variant's vertex class of each item (mtoon_shaders.VERTEX_DEFINES), from
        # the most influences it may bind (its own count, or the ready palette's)
        own = np.fromiter((int(getattr(it, "influences", 0) or 0) for it in items), np.int64, n)
        most = np.maximum(own, self.influences)
        self.vclass = np.where(self.vgeneral | (most > 8), 3, np.where(most == 0, 0, np.where(most <= 4, 1, 2)))
        # instancing needs every palette in one texture (rows <= the texture limit)
        self.limit = limit
        from .shader_lib import MORPH_TEX_WIDTH

        self.enabled = (bool(enabled) and ENABLED and n > 1 and pal_next <= limit
                        and w_next <= MORPH_TEX_WIDTH * limit)
        self._pal_rows, self._w_rows = pal_rows, w_rows
        # skin once per frame (skin_once.py): the texture of the skinned vertices; items whose
        # vclass is FETCH read theirs from it at rows[i, 5, 0]
        self.skinned_texture = None
        self._palette_tex = self._weights_tex = None
        self._keys = {}
        self._has_link = {}
        self._inst_tex = {}          # group's item indices (bytes) -> its instance_data texture
        if skinned is not None:
            self.share_skinning(skinned)

    # the shared textures are made on the first instanced draw (a frame without one makes none)
    @property
    def palette_texture(self):
        if self._palette_tex is None and self._pal_rows:
            shared = self.palette_shared
            self._palette_tex = rows_texture(shared if shared is not None else np.concatenate(self._pal_rows))
        return self._palette_tex

    @property
    def weights_texture(self):
        if self._weights_tex is None and self._w_rows:
            self._weights_tex = float_texture(np.concatenate(self._w_rows), 1)
        return self._weights_tex

    def group_key(self, i: int, it) -> tuple:
        s = it.stream
        morph = getattr(s, "morph", None)
        if morph is not None and getattr(s, "morph_weights", None) is None:
            return (i,)                    # weights not known on the CPU: drawn alone
        entries = getattr(s, "skin_entries", None)
        return (id(s.batch), it.material_name, bool(self.mirrored[i]), int(self.influences[i]),
                id(entries) if entries is not None else 0, id(morph[0]) if morph is not None else 0,
                int(self.vclass[i]))

    VERTEX_CLASSES = ("static", "lbs4", "lbs8", "general", "fetch")
    FETCH = 4   # skinned once this frame (skin_once.SkinOnce.run sets it)

    def vertex_class(self, group) -> str:
        """The shader variant's vertex class of ``group`` (mtoon_shaders.VERTEX_DEFINES):
        "general" (more than 8 influences or a Preserve Volume palette), "static" (no palette
        at all), else "lbs4" / "lbs8" by the most influences, or "fetch" (skinned once this
        frame by engine/gpu/passes/skin_once.py); one class per group (the group key holds it)."""
        return self.VERTEX_CLASSES[int(self.vclass[group[0][0]])]

    def groups(self, items) -> list:
        """``items`` split into draw groups (lists of (index, item)), in order of first appearance."""
        out = {}
        keys = self._keys
        for it in items:
            i = self.index[id(it)]
            key = keys.get(i)
            if key is None:       # made once per frame (every pass and cascade groups again)
                key = keys[i] = self.group_key(i, it) if self.enabled else (i,)
            out.setdefault(key, []).append((i, it))
        return list(out.values())

    def _bind_fetch(self, shader, i0: int, alone: bool) -> None:
        """A "fetch" group (skin_once.py): the skinned texture and, drawn alone, the item's
        first vertex in it (instanced draws read it from instance_data).  A shader without them
        (a variant that fell back to the general shader) skins as before."""
        if self.vclass[i0] != self.FETCH or self.skinned_texture is None:
            return
        try:
            shader.uniform_sampler("skinned", self.skinned_texture)
            if alone:
                shader.uniform_int("skin_base", int(self.rows[i0, 5, 0]))
        except ValueError:
            pass

    def mark_skinned(self, sel, texture) -> None:
        """Items ``sel`` were skinned once this frame into ``texture`` (skin_once.py): their
        draws fetch (vertex class FETCH; their blocks are set in rows[:, 5, 0])."""
        self.vclass[sel] = self.FETCH
        self.skinned_texture = texture
        self._keys = {}                 # (group keys hold the vertex class)

    def share_skinning(self, other: "FrameInstances") -> None:
        """Draw with ``other``'s skinned vertices (the same items, e.g. Cryptomatte's keyed
        instances of the frame's coverage samples): for every item ``other`` also holds, its
        FETCH class, block and texture."""
        if other.skinned_texture is None or not self.items:
            return
        at = np.fromiter((other.index.get(id(it), -1) for it in self.items), np.int64, len(self.items))
        fetch = np.zeros(len(self.items), bool)
        fetch[at >= 0] = other.vclass[at[at >= 0]] == other.FETCH
        self.vclass = np.where(fetch, self.FETCH, self.vclass)
        self.rows[fetch, 5, 0] = other.rows[at[fetch], 5, 0]
        self.skinned_texture = other.skinned_texture
        self._keys = {}

    def draw_group(self, shader, group, object_id: bool = True) -> None:
        """Draw one group: alone (push constants, as before) or instanced.  ``object_id``: the
        shader has the ``object_id`` push constant (the shadow shader has none)."""
        i0, first = group[0]
        batch = first.stream.batch
        self.batches.add(id(batch))
        self.draw_calls += 1
        if 0 < self.vclass[i0] < self.FETCH and len(group) <= self.limit:   # (a palette, not FETCH)
            self.tally["skinning_draws"] = self.tally.get("skinning_draws", 0) + 1
        if len(group) == 1:
            shader.uniform_float("model", self.models[i0])
            if object_id:
                shader.uniform_int("object_id", int(self.ids[i0]))
                # the light-link word (lamp_links.py); a variant that reads no lamp has none
                has = self._has_link.get(id(shader))
                if has is None:
                    try:
                        has = shader.uniform_from_name("light_link") >= 0
                    except ValueError:
                        has = False
                    self._has_link[id(shader)] = has
                if has:
                    shader.uniform_int("light_link", int(self.rows[i0, 4, 3]))
            bind_deform(shader, first)
            self._bind_fetch(shader, i0, True)
            chunks = getattr(first.stream, "chunks", None)
            if chunks is None or self.cull is None:
                batch.draw(shader)
                return
            ranges, culled = chunks.visible_ranges(self.worlds[i0], self.cull)
            self.tally["chunks_culled"] = self.tally.get("chunks_culled", 0) + culled
            self.tally["chunks_drawn"] = self.tally.get("chunks_drawn", 0) + chunks.count - culled
            for start, count in ranges:
                batch.draw_range(shader, elem_start=start, elem_count=count)
            return
        if len(group) > self.limit:             # one instance_data row per instance: split
            self.draw_calls -= 1
            for k in range(0, len(group), self.limit):
                self.draw_group(shader, group[k:k + self.limit], object_id)
            return
        self.instanced_draws += 1
        inst = self.bind_instanced(shader, group)      # referenced until the draw is made
        self._bind_fetch(shader, i0, False)
        batch.draw_instanced(shader, instance_start=0, instance_count=len(group))
        del inst

    def bind_instanced(self, shader, group):
        """The deformation uniforms of an instanced draw of ``group`` (at most ``limit`` items):
        its instance_data rows, the frame's shared palette and morph weight textures.  Returns
        the instance_data texture: the caller keeps it until the draw is made (a texture freed
        before the draw reads freed memory)."""
        i0, first = group[0]
        idx = np.fromiter((i for i, _ in group), np.int64, len(group))
        key = idx.tobytes()
        inst = self._inst_tex.get(key)
        if inst is None:          # made once per group (the frame's coverage samples draw it again)
            inst = self._inst_tex[key] = rows_texture(self.rows[idx].ravel(), width=INSTANCE_TEXELS)
        dummy = first.stream.identity        # the backend's identity palette (unused samplers)
        infl = int(self.influences[i0])
        palettes = self.palette_texture if infl else None
        shader.uniform_sampler("skin_palette", palettes if palettes is not None else dummy)
        shader.uniform_int("skin_influences", infl if palettes is not None else 0)
        morph = getattr(first.stream, "morph", None)
        weights = self.weights_texture
        if morph is not None and weights is not None:
            shader.uniform_sampler("morph_deltas", morph[0])
            shader.uniform_sampler("morph_weights", weights)
            shader.uniform_int("morph_mode", 1)
        else:
            shader.uniform_sampler("morph_deltas", dummy)
            shader.uniform_sampler("morph_weights", dummy)
            shader.uniform_int("morph_mode", 0)
        entries = getattr(first.stream, "skin_entries", None)
        shader.uniform_sampler("skin_entries", entries if entries is not None else dummy)
        shader.uniform_sampler("instance_data", inst)
        shader.uniform_int("instance_mode", 1)
        return inst

    def stats(self) -> dict:
        return {"draw_calls": self.draw_calls, "instanced_draws": self.instanced_draws,
                "batches_drawn": len(self.batches), "instanced_items": len(self.items)}
