"""Asset layer: immutable, numpy-backed, bpy-free descriptions of an imported scene.

This mirrors the seed's asset types (SceneAsset, MeshAsset/primitives, SkinAsset,
MorphTargetAsset, AnimationClipAsset).  Only ``engine.blender.importer`` builds them from Blender data;
everything downstream (animation, runtime, world, passes, tests) only reads them.

Conventions
-----------
* Matrices are float64 ``(4, 4)`` arrays in column-vector convention (``world = parent @ local``),
  i.e. the same layout as ``mathutils.Matrix`` converted with ``np.array(matrix)``.
* Quaternions are ``(w, x, y, z)`` like ``mathutils.Quaternion``.
* Arrays are made read-only (``flags.writeable = False``) when an asset is frozen, so the
  runtime can never modify an asset by accident.

Blender mapping of a node's local transform
-------------------------------------------
The seed stores a node's local transform as TRS.  In Blender a bone's animated TRS
(``pose_bone.location/rotation/scale``) is applied *on top of* its rest matrix, and an object's
TRS (``matrix_basis``) on top of its ``matrix_parent_inverse`` (and, for a bone parent, an offset
to the bone's tail).  So every node has a constant ``pre_matrix`` and a TRS "basis":

    local = pre_matrix @ T(translation) @ R(rotation) @ S(scale)

For a bone: ``pre_matrix`` = rest matrix relative to the parent bone (or to the armature object
for a root bone), bind TRS = identity.  For an object: ``pre_matrix`` = [tail offset @]
``matrix_parent_inverse``, bind TRS = the object's ``location/rotation/scale`` at import.
Animation channels carry Blender's TRS basis values; ScenePose composes them with ``pre_matrix``.
"""
from __future__ import annotations

from .clips import AnimationClipAsset, MorphWeightChannelAsset, NodeAnimationChannelAsset
from .morph_target import MorphTargetAsset
from .readonly import AssetError
from .types import (
    NODE_BONE,
    NODE_OBJECT,
    Bounds,
    MeshAsset,
    PrimitiveAsset,
    SceneAsset,
    SceneNodeAsset,
    SkinAsset,
    compose_trs,
    quat_to_matrix,
)

__all__ = [
    "AssetError",
    "Bounds",
    "SceneNodeAsset",
    "SceneAsset",
    "SkinAsset",
    "MorphTargetAsset",
    "PrimitiveAsset",
    "MeshAsset",
    "NodeAnimationChannelAsset",
    "MorphWeightChannelAsset",
    "AnimationClipAsset",
    "NODE_OBJECT",
    "NODE_BONE",
    "compose_trs",
    "quat_to_matrix",
]
