"""Animation layer: ScenePose, AnimationPlayer, MorphState and vectorised sampling (numpy, no bpy/gpu)."""
from __future__ import annotations

from .pose import ScenePose, LocalTransform, next_version, UNRESOLVED, RESOLVING, RESOLVED
from .morph import MorphState
from .player import AnimationPlayer
from .sampling import TrackSet, slerp, matrix_to_quaternion, decompose_matrices, TINY_INTERVAL

__all__ = [
    "ScenePose", "LocalTransform", "next_version", "UNRESOLVED", "RESOLVING", "RESOLVED",
    "MorphState", "AnimationPlayer", "TrackSet", "slerp", "matrix_to_quaternion",
    "decompose_matrices", "TINY_INTERVAL",
]
