"""Importer: Blender scene (original data) -> immutable assets. The only bpy user of the asset layer.

Modules
-------
scene.py       import_scene / import_scene_with_problems: the entry point
nodes.py       objects and bones -> nodes (bind transforms, parents, baker targets)
meshes.py      mesh objects -> MeshAsset (primitives, skin, morphs), structure signatures
animations.py  assigned / compatible actions -> AnimationClipAsset
cache.py       AssetCache: what is reused between imports and why (content fingerprints)
mesh.py, skin.py, morph.py, actions.py, fcurve_eval.py, rotation.py: format-level readers

Problems with actions (missing bone / shape key, non-finite keys) do not fail the import; the clip
is not offered and the message is listed in ``asset.import_problems`` (``strict=True`` raises).
A mesh with non-finite geometry does not fail the import either: it gets a fallback reason.
"""
from __future__ import annotations

from .actions import action_content_signature
from .animations import compatible_clips, import_action
from .cache import AssetCache, mesh_content_fingerprint
from .mesh import compute_tangents, read_mesh, smooth_normals, split_by_material
from .meshes import armature_signature, import_mesh, key_signature, object_signature
from .nodes import build_nodes, collect_objects, node_world_matrices, render_hidden, render_objects, structure_key
from .scene import import_scene, import_scene_with_problems, resolve_scene, same_structure

__all__ = ["import_scene", "import_scene_with_problems", "import_action", "compatible_clips",
           "AssetCache", "mesh_content_fingerprint", "import_mesh", "build_nodes", "collect_objects", "render_hidden",
           "render_objects",
           "object_signature", "key_signature", "armature_signature", "action_content_signature",
           "node_world_matrices", "structure_key", "resolve_scene", "same_structure",
           "read_mesh", "split_by_material", "smooth_normals", "compute_tangents"]
