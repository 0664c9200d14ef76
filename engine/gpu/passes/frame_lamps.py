"""The frame's lamps as the forward and outline shaders read them (the pipeline's lamp setup):
suns in the FrameBlock's light arrays, point, spot and area lamps in the clusters' textures
(engine/gpu/passes/clusters.py), light-link bits and words (engine/gpu/passes/lamp_links.py),
and what the frame says of lamps it leaves out."""
from __future__ import annotations

import numpy as np

from .clusters import SLICES, TILE, budget_message, build_clusters, lamp_rows
from .lamp_links import item_words, link_bits, over_message
from .lights import LIGHT_KINDS, mtoon_light_colors

CLUSTER_FLOATS = 8        # FrameBlock's cluster_params and cluster_depth


class FrameLamps:
    """One frame's lamp data (made by the pipeline each frame; textures kept until the next)."""

    def __init__(self, lights, items, camera, width: int, height: int, budget: int):
        self.lights = list(lights)
        self.suns = [l for l in self.lights if l.kind == "SUN"]
        self.local = [l for l in self.lights if l.kind != "SUN"]
        self.bits, self.rules, over = link_bits(self.lights)
        self.words = item_words(items, self.rules)
        self.clusters = None
        if self.local:
            strength = mtoon_light_colors(self.local).max(-1)
            self.clusters = build_clusters(self.local, strength, camera, width, height, max(1, int(budget)))
        self.losses = ([over_message(over)] if over else []) + (
            [budget_message(self.clusters.left_out, budget)] if self.clusters is not None and self.clusters.left_out
            else [])
        self._data = self._lists = None

    def sun_words(self) -> list:
        """Per sun (FrameBlock order): kind 0 + 4 x (link bit + 1), the light_pos.w the shader reads."""
        at = {id(l): b for l, b in zip(self.lights, self.bits)}
        return [4.0 * (at[id(l)] + 1) for l in self.suns]

    def textures(self, shadow_slots: dict):
        """(lamp_data, lamp_lists) textures; ``shadow_slots``: id(lamp) -> its local shadow slot."""
        from ..palette_textures import rows_texture

        c = self.clusters
        if c is None:
            return None, None
        if self._data is None:
            at = {id(l): b for l, b in zip(self.lights, self.bits)}
            kinds = [LIGHT_KINDS.get(l.kind, 1) for l in c.lamps]
            rows = lamp_rows(c, mtoon_light_colors(c.lamps), kinds,
                             [shadow_slots.get(id(l), -1) for l in c.lamps], [at[id(l)] for l in c.lamps])
            self._data = rows_texture(rows, width=4)
            lists = c.lists
            if lists is None:
                raise RuntimeError("FrameLamps.textures: the lamp clusters have no lamp lists (not made by build_clusters)")
            self._lists = rows_texture(lists, width=lists.shape[1])
        return self._data, self._lists

    def texture_index(self, light) -> int:
        """The row of ``light`` (a local lamp of this frame) in ``lamp_data``."""
        c = self.clusters
        if c is None:
            raise ValueError("FrameLamps.texture_index: this frame has no local lamps (no clusters)")
        return next(i for i, l in enumerate(c.lamps) if l is light)

    def pack(self) -> np.ndarray:
        """FrameBlock's cluster_params, cluster_depth (glsl/mtoon_blocks.glsl)."""
        d = np.zeros(CLUSTER_FLOATS, np.float32)
        c = self.clusters
        if c is not None:
            d[:] = (TILE, SLICES, c.rows, c.tiles[0], c.depth[0], c.depth[1], c.depth[2], c.tiles[1])
        return d

    def stats(self) -> dict:
        c = self.clusters
        return {"lamps": len(self.lights), "local_lamps": len(self.local),
                "lamps_per_cluster_max": c.most if c is not None else 0,
                "lamps_per_cluster_mean": round(c.mean, 2) if c is not None else 0.0,
                "lamps_left_out": list(c.left_out) if c is not None else []}


def lamp_losses(frame) -> list:
    """What ``frame`` (FrameData) says of the lamps it leaves out: suns over the limit, lamps over
    the Lamps per Pixel budget of some cluster, lamps over the light-link bits (the pipeline's
    choice, made here on the CPU alone: the clusters of 64 lamps cost well under a millisecond)."""
    from .lights import shading_lights, suns_left_out

    s = frame.settings
    lamps = FrameLamps(shading_lights(frame.lights), [], frame.camera, s.width, s.height,
                       getattr(s, "max_lights", 128))
    return suns_left_out(frame.lights) + lamps.losses
