"""The importer's entry point: a Blender view layer -> SceneAsset (nodes, meshes, clips)."""
from __future__ import annotations

import time
from typing import List, Optional, Tuple

from ...core.assets import NODE_OBJECT, AssetError, SceneAsset, SceneNodeAsset
from .animations import import_animations
from .meshes import import_mesh
from .nodes import build_nodes, render_objects


def resolve_scene(depsgraph_or_scene, view_layer=None):
    """(original scene, original view layer) of a depsgraph or a scene (+ optional view layer).
    A scene alone takes the context's view layer when it is the context's scene, else its first."""
    import bpy

    if isinstance(depsgraph_or_scene, bpy.types.Depsgraph):
        scene = depsgraph_or_scene.scene
        scene = getattr(scene, "original", scene)
        vl = view_layer or depsgraph_or_scene.view_layer
        vl = getattr(vl, "original", vl) if vl is not None else None
    else:
        scene = depsgraph_or_scene
        vl = view_layer
    if vl is None:
        vl = scene.view_layers[0] if len(scene.view_layers) else None
        ctx_scene = getattr(bpy.context, "scene", None)
        ctx_vl = getattr(bpy.context, "view_layer", None)
        if ctx_scene == scene and ctx_vl is not None:
            vl = ctx_vl
    return scene, vl


def import_scene_with_problems(depsgraph_or_scene, view_layer=None, *, strict: bool = False,
                               cache=None, verify: bool = True, clips: bool = True,
                               expression_check=None) -> Tuple[SceneAsset, List[str]]:
    """Import everything renderable in the view layer; returns the asset and the problems found
    with actions (clips that were not offered: missing bones/shape keys, non-finite keys).

    ``cache``: an AssetCache whose unchanged assets are reused (None: build everything);
    ``verify``: check each cached mesh's content fingerprint (see cache.py); ``clips=False``
    imports no actions (final renders draw Blender's evaluated pose and need none);
    ``expression_check``: why a VRM expression preview curve animates nothing on its armature, or
    None (the session passes the VRM feature's, ``StylizedSession.expression_check``; without one
    every preview curve is kept: animations.py ``_expression_curves``).  The timings
    of this import are on ``asset.import_stats`` (seconds)."""
    stats = {"mesh_read_s": 0.0, "skin_s": 0.0, "morph_s": 0.0}
    if cache is not None:
        cache.begin_import(stats)
    try:
        return _import(depsgraph_or_scene, view_layer, strict, cache, verify, clips, expression_check, stats)
    finally:
        if cache is not None:
            cache.end_import()


def _import(depsgraph_or_scene, view_layer, strict: bool, cache, verify: bool, clips: bool, expression_check,
            stats: dict) -> Tuple[SceneAsset, List[str]]:
    import bpy

    t0 = time.perf_counter()
    scene, view_layer = resolve_scene(depsgraph_or_scene, view_layer)
    depsgraph = depsgraph_or_scene if isinstance(depsgraph_or_scene, bpy.types.Depsgraph) else None
    objects = render_objects(depsgraph, view_layer)
    nb = build_nodes(objects)
    t1 = time.perf_counter()
    meshes = []
    problems: List[str] = []
    for nd in nb.nodes:
        if nd["kind"] != NODE_OBJECT:
            continue
        obj = scene.objects.get(nd["object_name"]) or bpy.data.objects[nd["object_name"]]
        if obj.type == "MESH":
            try:
                asset = import_mesh(obj, nb, cache, verify, stats)
            except AssetError:
                raise
            except Exception as e:  # unexpected data: name the object
                raise AssetError(f"object '{obj.name}': {e}") from e
            nd["mesh_index"] = len(meshes)
            meshes.append(asset)
    t2 = time.perf_counter()
    objs_by_node = [bpy.data.objects[nd["object_name"]] for nd in nb.nodes if nd["kind"] == NODE_OBJECT]
    anims = import_animations(scene, objs_by_node, nb, strict, cache, problems, expression_check) if clips else []
    t3 = time.perf_counter()
    nodes = [SceneNodeAsset(**nd) for nd in nb.nodes]
    asset = SceneAsset(nodes, meshes, anims, name=scene.name)
    asset.validate()
    asset.import_problems = tuple(problems)
    t4 = time.perf_counter()
    stats.update(nodes_s=t1 - t0, meshes_s=t2 - t1, actions_s=t3 - t2, assemble_s=t4 - t3, total_s=t4 - t0)
    asset.import_stats = dict(stats)
    return asset, problems


def import_scene(depsgraph_or_scene, view_layer=None, *, strict: bool = False, cache=None,
                 verify: bool = True, clips: bool = True, expression_check=None) -> SceneAsset:
    """SceneAsset of the view layer (see import_scene_with_problems; problems are on
    ``asset.import_problems``)."""
    return import_scene_with_problems(depsgraph_or_scene, view_layer, strict=strict, cache=cache,
                                      verify=verify, clips=clips, expression_check=expression_check)[0]


def same_structure(a: Optional[SceneAsset], b: Optional[SceneAsset], compare_bind_pose: bool = True) -> bool:
    """Whether a runtime built for ``a`` can draw ``b`` unchanged: the same nodes (names, kinds,
    parents, meshes, pre-matrices), the very same mesh and clip assets (the cache returns the same
    objects for unchanged data) and, with ``compare_bind_pose``, the same bind transforms (the
    preview's base pose).  Timeline-driven runtimes overwrite the locals every frame and pass
    ``compare_bind_pose=False``."""
    import numpy as np

    if a is None or b is None or a.node_count != b.node_count:
        return False
    if len(a.meshes) != len(b.meshes) or any(x is not y for x, y in zip(a.meshes, b.meshes)):
        return False
    if len(a.animations) != len(b.animations) or any(x is not y for x, y in zip(a.animations, b.animations)):
        return False
    if any((p.name, p.kind, p.object_name, p.bone_name) != (q.name, q.kind, q.object_name, q.bone_name)
           for p, q in zip(a.nodes, b.nodes)):
        return False
    if not (np.array_equal(a.parents, b.parents) and np.array_equal(a.mesh_indices, b.mesh_indices)
            and np.array_equal(np.asarray(a.pre_matrices), np.asarray(b.pre_matrices))):   # (as array_equal reads them)
        return False
    if compare_bind_pose and not np.array_equal(np.asarray(a.bind_locals), np.asarray(b.bind_locals)):
        return False
    return True
