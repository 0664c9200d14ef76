"""MeshReads: the bulk reads of one mesh datablock, made at most once per import or check.

The content fingerprint (cache.py) and the asset build (meshes.py) read the same data: the
vertex-group weights (a per-vertex Python walk: Blender has no bulk accessor for them, the
slowest read of an import) and every shape key's coordinates.  One ``MeshReads`` per mesh
datablock and import hands both the same arrays, so each is read once.  Not kept between
imports (the cache's ``begin_import`` / ``begin_check`` start new ones): the data may change."""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np


class MeshReads:
    """Lazy, memoised reads of ``mesh`` (original data)."""

    def __init__(self, mesh):
        self.mesh = mesh
        self.vertex_count = len(mesh.vertices)
        self._groups = None
        self._keys: Dict[str, np.ndarray] = {}

    def vertex_groups(self):
        """(vertex, group, weight) triples (int64, int64, float64): ``skin.read_vertex_groups``."""
        if self._groups is None:
            from .skin import read_vertex_groups

            self._groups = read_vertex_groups(self.mesh)
        return self._groups

    def key_coords(self, key_block) -> np.ndarray:
        """(V,3) float32 coordinates of ``key_block`` (read once; treat as read-only)."""
        hit = self._keys.get(key_block.name)
        if hit is None:
            from .morph import read_key_coords

            hit = self._keys[key_block.name] = read_key_coords(key_block, self.vertex_count)
        return hit


def reads_for(memo: Optional[dict], mesh) -> MeshReads:
    """The ``MeshReads`` of ``mesh`` in ``memo`` (a dict per import; None: a new one)."""
    if memo is None:
        return MeshReads(mesh)
    hit = memo.get(mesh.name)
    if hit is None or hit.mesh != mesh:
        hit = memo[mesh.name] = MeshReads(mesh)
    return hit
