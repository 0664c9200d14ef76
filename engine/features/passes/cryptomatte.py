"""Cryptomatte Object / Material / Asset passes of a final render (issue 36 item 1).

The anti-aliasing's coverage samples (engine/gpu/passes/samples.py) draw which surface covers
each sub-pixel sample; with Cryptomatte on, each drawn item draws a key of its own (one per
object and material, ``key``), and every sample's id image is read back (``take``).  The keys map
to the names Blender hashes: the object's name, its material's, and the asset (the object's
top-most parent).  An outline is drawn with its object's key (id x 2 + 1), so it carries its
object's and material's ids.  ``passes`` ranks them (engine/core/compositing/cryptomatte.py)
into the ranked layers; ``metadata`` gives the stamp fields Blender writes (name, hash,
conversion, manifest), which the engine adds to the render result.

With Cryptomatte on, the colour's coverage resolve compares these keys instead of object ids
(one object's materials are told apart: an edge sample between two of them takes the colour of
the material it sees); Cryptomatte off draws exactly as before.
"""
from __future__ import annotations

import numpy as np

from ...core.compositing import cryptomatte as cm


def kinds(passes) -> tuple:
    """The Cryptomatte types among ``passes`` (render_passes.requested): ("Object", ...)."""
    return tuple(p[len("Crypto"):] for p in passes if p.startswith("Crypto"))


def _asset_name(name: str) -> str:
    import bpy

    ob = bpy.data.objects.get(name)
    if ob is None:
        return name
    seen = set()
    while ob.parent is not None and ob.name not in seen:
        seen.add(ob.name)
        ob = ob.parent
    return ob.name


class CryptoIds:
    """The keys and sample id images of one view of one final render (Cryptomatte's and the
    AOVs', engine/features/passes/aov.py)."""

    def __init__(self, kinds_):
        self.kinds = tuple(kinds_)
        self._keys = {}             # (object name, material name) -> key (1..)
        self._samples = []          # (H, W) int32 key image per sample, centre first
        self._stack = None          # those stacked (n, H, W)
        self._uniform = None        # (that stack, its uniform pixels)

    def key(self, item) -> int:
        k = (item.object_name, item.material_name or "")
        v = self._keys.get(k)
        if v is None:
            v = self._keys[k] = len(self._keys) + 1
        return v

    def take(self, texture, width: int, height: int) -> None:
        from ...gpu.util import texture_to_numpy

        v = texture_to_numpy(texture, width, height, channels=1)[..., 0]
        self._samples.append((v * 0.5 + 0.25).astype(np.int32))    # id x 2 (+1 outline); >= 0: floor

    def stacked(self):
        """(n, H, W) int32 keys of the samples (centre first); None before any was taken."""
        if not self._samples:
            return None
        if self._stack is None or self._stack.shape[0] != len(self._samples):
            self._stack = np.stack(self._samples)
        return self._stack

    def uniform(self):
        """(H, W) bool: every sample of the pixel holds the same key (None before any sample);
        computed once per frame for the three types and the AOVs."""
        samples = self.stacked()
        if samples is None:
            return None
        if self._uniform is None or self._uniform[0] is not samples:
            self._uniform = (samples, cm.uniform_pixels(samples))
        return self._uniform[1]

    def names(self, kind: str) -> list:
        return self._names(kind)

    def _names(self, kind: str) -> list:
        """Name of this type per key (index 0: nothing; None: no name, e.g. no material)."""
        out: list = [None] * (len(self._keys) + 1)
        for (ob, mat), k in self._keys.items():
            out[k] = ob if kind == "Object" else (mat or None) if kind == "Material" else _asset_name(ob)
        return out

    def passes(self, levels: int) -> dict:
        """{ranked layer name: (H, W, 4) float32} of every type (bottom row first)."""
        samples = self.stacked()
        if samples is None or not self.kinds:
            return {}
        uniform = self.uniform()                   # (the three types share which pixels are edges)
        out = {}
        for kind in self.kinds:
            names = self._names(kind)
            ids = np.fromiter((0 if n is None else cm.name_hash(n) for n in names), np.uint32, len(names))
            ranked = cm.rank(samples, ids, levels, uniform=uniform)
            out.update(zip(cm.pass_names(kind, levels), ranked))
        return out

    def metadata(self, layer_name: str) -> dict:
        """{stamp field: value} for every type (the manifest: the names drawn)."""
        out = {}
        for kind in self.kinds:
            out.update(cm.metadata(layer_name, kind, [n for n in self._names(kind) if n is not None]))
        return out
