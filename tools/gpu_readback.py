"""Reads GPU-deformed vertices back for tools/check_deform.py: the engine's own read-back
(engine/gpu/passes/motion_vectors.py ``VertexCapture``, which the Vector pass uses): each item is
drawn as points (pixel = vertex id) through the vertex variant the passes draw it with (its vertex
class's skinning defines), and the world positions or normals are read from the target.
"""
from __future__ import annotations

import numpy as np


class GpuReadback:
    """``read(item, normals=False)``: world positions (or normals) of the item's vertices as the
    passes deform them; ``variants``: reads per vertex class (static / lbs4 / lbs8 / general, as
    ``mtoon_shaders.VERTEX_DEFINES`` gives them to the forward, outline and shadow shaders)."""

    def __init__(self):
        from stylized_renderer.engine.gpu.passes.gpu_cache import GpuCache
        from stylized_renderer.engine.gpu.passes.motion_vectors import VertexCapture

        self._capture = VertexCapture(GpuCache())
        self.variants = self._capture.variants

    def read(self, item, normals: bool = False) -> np.ndarray:
        """World positions (or world normals) of the item's vertices, as the passes deform them."""
        return self._capture.positions(item, normals=normals)
