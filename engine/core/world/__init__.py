"""World layer: RenderExtractor / RenderItem and the SceneRuntime driver (numpy, no bpy/gpu)."""
from __future__ import annotations

from .extractor import (RenderItem, RenderExtractor, ExtractionError, expand_bounds, frustum_planes,
    bounds_outside)
from .scene_runtime import SceneRuntime, RuntimeStats

__all__ = ["RenderItem", "RenderExtractor", "ExtractionError", "expand_bounds", "frustum_planes",
           "bounds_outside", "SceneRuntime", "RuntimeStats"]
