"""World layer: RenderExtractor / RenderItem and the SceneRuntime driver (numpy, no bpy/gpu)."""
from __future__ import annotations

from .extractor import ExtractionError, RenderExtractor, RenderItem, bounds_outside, expand_bounds, frustum_planes
from .scene_runtime import RuntimeStats, SceneRuntime

__all__ = ["RenderItem", "RenderExtractor", "ExtractionError", "expand_bounds", "frustum_planes",
           "bounds_outside", "SceneRuntime", "RuntimeStats"]
