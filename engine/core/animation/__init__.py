"""Animation layer: ScenePose, AnimationPlayer, MorphState and vectorised sampling (numpy, no bpy/gpu)."""
from __future__ import annotations

from .morph import MorphState
from .player import AnimationPlayer
from .pose import RESOLVED, RESOLVING, UNRESOLVED, LocalTransform, ScenePose, next_version
from .sampling import TINY_INTERVAL, TrackSet, decompose_matrices, matrix_to_quaternion, slerp

__all__ = [
    "ScenePose", "LocalTransform", "next_version", "UNRESOLVED", "RESOLVING", "RESOLVED",
    "MorphState", "AnimationPlayer", "TrackSet", "slerp", "matrix_to_quaternion",
    "decompose_matrices", "TINY_INTERVAL",
]
