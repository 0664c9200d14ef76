"""Importer: Blender scene (original data) -> immutable assets. The only bpy user of the asset layer.

Public API
----------
import_scene(depsgraph_or_scene, view_layer=None, *, strict=False, use_cache=True) -> SceneAsset
import_scene_with_problems(...) -> (SceneAsset, [str])
import_action(action, scene_asset, target_object, scene, slot=None) -> AnimationClipAsset
compatible_clips(scene_asset, object_name) -> [AnimationClipAsset]
invalidate_mesh(name), invalidate_object(name), invalidate_action(name), invalidate_id(id), clear_cache()
object_signature(obj), key_signature(key), armature_signature(armature),
action_content_signature(action): what needs a re-import when it changes
node_world_matrices(scene_asset) -> (N,4,4) bind worlds

The mesh cache is keyed by object name with a cheap signature (datablock pointers, counts, key
and modifier settings, deform bones). Vertex positions, weights and shape-key coordinates are not
in the signature: the engine calls ``invalidate_id(update.id)`` for depsgraph geometry updates.
Problems with actions (missing bone / shape key, non-finite keys) do not fail the import; the clip
is not offered and the message is listed in ``asset.import_problems`` (``strict=True`` raises).
STATS: timings of the last import (seconds).
"""
from __future__ import annotations

import dataclasses
import time
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..assets import (AssetError, MeshAsset, MorphTargetAsset, NODE_BONE, NODE_OBJECT, PrimitiveAsset,
                      SceneAsset, SceneNodeAsset, SkinAsset, compose_trs)
from . import actions as _actions
from .actions import action_content_signature
from . import skin as _skin
from .mesh import read_mesh, split_by_material, smooth_normals, compute_tangents  # noqa: F401 (re-export)
from .morph import NormalDeltaSolver, TangentDeltaSolver, fallback_key_name, read_key_coords
from .rotation import euler_to_quat, normalize_quat, quat_mul, rotation_to_quat

__all__ = ["import_scene", "import_scene_with_problems", "import_action", "compatible_clips",
           "invalidate_mesh", "invalidate_object", "invalidate_action", "invalidate_id", "clear_cache",
           "object_signature", "key_signature", "armature_signature", "action_content_signature",
           "node_world_matrices", "STATS",
           "read_mesh", "split_by_material", "smooth_normals", "compute_tangents"]

STATS: Dict[str, float] = {}
VRM_OUTLINE_PREFIX = "VRM Add-on MToon 1.0 Outline Geometry"

_MESH_CACHE: Dict[str, tuple] = {}     # object name -> (signature, MeshAsset, mesh name)
_CLIP_CACHE: Dict[tuple, tuple] = {}   # (action name, target object) -> (signature, node keys, clip)


def clear_cache() -> None:
    _MESH_CACHE.clear()
    _CLIP_CACHE.clear()


def invalidate_mesh(name: str) -> None:
    """Drop cached assets of the mesh datablock or mesh object called ``name``."""
    for k in [k for k, v in _MESH_CACHE.items() if k == name or v[2] == name]:
        del _MESH_CACHE[k]


def invalidate_object(name: str) -> None:
    _MESH_CACHE.pop(name, None)
    for k in [k for k in _CLIP_CACHE if k[1] == name]:
        del _CLIP_CACHE[k]


def invalidate_action(name: str) -> None:
    for k in [k for k in _CLIP_CACHE if k[0] == name]:
        del _CLIP_CACHE[k]


def invalidate_id(id_data) -> None:
    """Drop whatever the cache derived from ``id_data`` (a depsgraph update's ``update.id``,
    original or evaluated): Mesh, Object, Key (shape keys), Armature or Action."""
    import bpy
    idd = getattr(id_data, "original", id_data)
    if isinstance(idd, bpy.types.Mesh):
        invalidate_mesh(idd.name)
    elif isinstance(idd, bpy.types.Object):
        invalidate_object(idd.name)
        if idd.type == "MESH" and idd.data is not None:
            invalidate_mesh(idd.data.name)
    elif isinstance(idd, bpy.types.Key):
        user = getattr(idd, "user", None)
        if user is not None:
            invalidate_mesh(user.name)
    elif isinstance(idd, bpy.types.Action):
        invalidate_action(idd.name)
    elif isinstance(idd, bpy.types.Armature):
        for k in [k for k, v in _MESH_CACHE.items() if v[3]]:   # skinned meshes
            del _MESH_CACHE[k]


def compatible_clips(scene_asset: SceneAsset, object_name: str) -> list:
    return [c for c in scene_asset.animations if c.target_object == object_name]


# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------

def _m(matrix) -> np.ndarray:
    return np.array(matrix, dtype=np.float64)


def _resolve(depsgraph_or_scene, view_layer):
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
        try:
            import bpy as _b
            if _b.context.scene == scene and _b.context.view_layer is not None:
                vl = _b.context.view_layer
        except Exception:
            pass
    return scene, vl


def _object_rotation_values(obj) -> Dict[str, np.ndarray]:
    return {
        "rotation_quaternion": np.array(obj.rotation_quaternion, np.float64),
        "rotation_euler": np.array(obj.rotation_euler, np.float64),
        "rotation_axis_angle": np.array(obj.rotation_axis_angle, np.float64),
    }


def _object_deltas(obj):
    """(delta location, delta rotation wxyz, delta scale) as Blender composes them in matrix_basis."""
    mode = obj.rotation_mode
    if mode == "QUATERNION":
        dq = normalize_quat(np.array(obj.delta_rotation_quaternion, np.float64))
    elif mode == "AXIS_ANGLE":
        dq = np.array([1.0, 0.0, 0.0, 0.0])   # delta axis-angle is not exposed (identity)
    else:
        dq = euler_to_quat(np.array(obj.delta_rotation_euler, np.float64)[None], mode)[0]
    return np.array(obj.delta_location, np.float64), dq, np.array(obj.delta_scale, np.float64)


def _object_target(obj, idx: int) -> "_actions.NodeTarget":
    dloc, drot, dscale = _object_deltas(obj)
    ident = (not dloc.any() and np.array_equal(drot, [1.0, 0.0, 0.0, 0.0]) and np.all(dscale == 1.0))
    return _actions.NodeTarget(idx, obj.rotation_mode, np.array(obj.location, np.float64),
                               _object_rotation_values(obj), np.array(obj.scale, np.float64),
                               None if ident else dloc, None if ident else drot, None if ident else dscale)


def _rot_of(mode: str, vals: Dict[str, np.ndarray]) -> np.ndarray:
    from .rotation import rotation_prop
    return rotation_to_quat(vals[rotation_prop(mode)[0]][None, :], mode)[0]


_BONE_REST_ROT = {
    "rotation_quaternion": np.array([1.0, 0, 0, 0]),
    "rotation_euler": np.zeros(3),
    "rotation_axis_angle": np.array([0.0, 0, 1, 0]),
}


def _armature_modifier_targets(obj) -> list:
    out = []
    if obj.type == "MESH":
        for md in obj.modifiers:
            if md.type == "ARMATURE" and md.object is not None and md.object.type == "ARMATURE":
                out.append(md.object)
    return out


# ----------------------------------------------------------------------------------------------
# nodes
# ----------------------------------------------------------------------------------------------

class _Nodes:
    def __init__(self):
        self.nodes: List[dict] = []
        self.worlds: List[np.ndarray] = []
        self.index: Dict[Tuple[str, Optional[str]], int] = {}
        self.targets: Dict[Tuple[str, Optional[str]], _actions.NodeTarget] = {}

    def add(self, world, **kw) -> int:
        i = len(self.nodes)
        self.nodes.append(kw)
        self.worlds.append(world)
        self.index[(kw["object_name"], kw.get("bone_name"))] = i
        return i


def _build_nodes(objects) -> _Nodes:
    nb = _Nodes()
    names = {o.name for o in objects}
    children: Dict[str, list] = {}
    roots = []
    for o in objects:
        if o.parent is not None and o.parent.name in names:
            children.setdefault(o.parent.name, []).append(o)
        else:
            roots.append(o)
    stack = sorted(roots, key=lambda o: o.name, reverse=True)
    while stack:
        o = stack.pop()
        _add_object(nb, o)
        stack.extend(sorted(children.get(o.name, ()), key=lambda c: c.name, reverse=True))
    return nb


def _add_object(nb: _Nodes, obj) -> None:
    parent_idx = -1
    basis = _m(obj.matrix_basis)
    mpi = _m(obj.matrix_parent_inverse)
    par = obj.parent
    if par is None:
        pre = np.eye(4)
        parent_world = np.eye(4)
    elif obj.parent_type == "BONE" and par.type == "ARMATURE" and obj.parent_bone in par.data.bones:
        parent_idx = nb.index[(par.name, obj.parent_bone)]
        bone = par.data.bones[obj.parent_bone]
        tail = np.eye(4)
        tail[1, 3] = bone.length
        pre = tail @ mpi
        parent_world = nb.worlds[parent_idx]
    else:
        parent_idx = nb.index[(par.name, None)]
        parent_world = nb.worlds[parent_idx]
        if obj.parent_type in ("OBJECT", "ARMATURE", "BONE"):
            pre = mpi
        else:  # vertex / lattice / curve parents: the constant offset Blender applies now
            pre = np.linalg.inv(parent_world) @ _m(obj.matrix_world) @ np.linalg.inv(basis)
    rot_vals = _object_rotation_values(obj)
    mode = obj.rotation_mode
    dloc, drot, dscale = _object_deltas(obj)
    t = np.array(obj.location, np.float64) + dloc
    r = quat_mul(drot, _rot_of(mode, rot_vals))
    s = np.array(obj.scale, np.float64) * dscale
    local = pre @ compose_trs(t, r, s)[0]
    world = parent_world @ local
    idx = nb.add(world, name=obj.name, kind=NODE_OBJECT, parent=parent_idx, pre_matrix=pre,
                 bind_translation=t, bind_rotation=r, bind_scale=s, object_name=obj.name, bone_name=None)
    nb.targets[(obj.name, None)] = _object_target(obj, idx)
    if obj.type == "ARMATURE":
        _add_bones(nb, obj, idx, world)


def _add_bones(nb: _Nodes, arm, arm_idx: int, arm_world: np.ndarray) -> None:
    bones = arm.data.bones
    n = len(bones)
    if not n:
        return
    ml = np.empty(n * 16, np.float32)
    bones.foreach_get("matrix_local", ml)
    ml = ml.reshape(n, 4, 4).transpose(0, 2, 1).astype(np.float64)
    bl = list(bones)
    pos = {b.name: i for i, b in enumerate(bl)}
    kids: Dict[int, list] = {}
    roots = []
    for i, b in enumerate(bl):
        if b.parent is None:
            roots.append(i)
        else:
            kids.setdefault(pos[b.parent.name], []).append(i)
    pose = arm.pose
    inv_cache = {}
    stack = list(reversed(roots))
    while stack:
        i = stack.pop()
        b = bl[i]
        if b.parent is None:
            pre = ml[i]
            pidx = arm_idx
        else:
            pi = pos[b.parent.name]
            if pi not in inv_cache:
                inv_cache[pi] = np.linalg.inv(ml[pi])
            pre = inv_cache[pi] @ ml[i]
            pidx = nb.index[(arm.name, b.parent.name)]
        world = arm_world @ ml[i]
        idx = nb.add(world, name=f"{arm.name}/{b.name}", kind=NODE_BONE, parent=pidx, pre_matrix=pre,
                     bind_translation=np.zeros(3), bind_rotation=np.array([1.0, 0, 0, 0]), bind_scale=np.ones(3),
                     object_name=arm.name, bone_name=b.name)
        pb = pose.bones.get(b.name) if pose is not None else None
        mode = pb.rotation_mode if pb is not None else "QUATERNION"
        nb.targets[(arm.name, b.name)] = _actions.NodeTarget(idx, mode, np.zeros(3), _BONE_REST_ROT, np.ones(3))
        stack.extend(reversed(kids.get(i, ())))


# ----------------------------------------------------------------------------------------------
# meshes
# ----------------------------------------------------------------------------------------------

def _enabled(md) -> bool:
    return bool(md.show_viewport or md.show_render)


def _mesh_fallbacks(obj) -> Tuple[list, Optional[object], Optional[object]]:
    """(reasons, armature modifier or None, armature object or None)."""
    reasons = []
    mods = [md for md in obj.modifiers if _enabled(md)]
    relevant = []
    for md in mods:
        if md.type == "NODES" and md.node_group is not None and md.node_group.name.startswith(VRM_OUTLINE_PREFIX):
            continue
        relevant.append(md)
    arm_mods = [md for md in relevant if md.type == "ARMATURE"]
    others = [md for md in relevant if md.type != "ARMATURE"]
    for md in others:
        reasons.append(f"modifier '{md.name}' ({md.type}) is not reproduced on the GPU")
    am = arm_mods[0] if arm_mods else None
    if len(arm_mods) > 1:
        reasons.append("more than one Armature modifier")
    if am is not None:
        if relevant[0] is not am:
            reasons.append(f"Armature modifier '{am.name}' is not the first modifier")
        if am.use_deform_preserve_volume:
            reasons.append(f"Armature modifier '{am.name}' uses preserve volume")
        if am.use_bone_envelopes:
            reasons.append(f"Armature modifier '{am.name}' uses bone envelopes")
        if am.use_multi_modifier:
            reasons.append(f"Armature modifier '{am.name}' uses multi modifier")
        if am.vertex_group:
            reasons.append(f"Armature modifier '{am.name}' is masked by vertex group '{am.vertex_group}'")
        if am.invert_vertex_group:
            reasons.append(f"Armature modifier '{am.name}' inverts its vertex group")
    arm = am.object if am is not None and am.object is not None and am.object.type == "ARMATURE" else None
    return reasons, am, arm


def key_signature(key) -> Optional[tuple]:
    """What about a shape-key datablock needs a re-import when it changes (not the values)."""
    if key is None:
        return None
    return (key.as_pointer(), key.use_relative, tuple(
        (kb.name, kb.relative_key.name, kb.vertex_group, kb.slider_min, kb.slider_max, kb.mute)
        for kb in key.key_blocks))


def armature_signature(armature) -> tuple:
    """What about an armature datablock needs a re-import when it changes: the bones' names,
    parents, rest matrices, deform and B-Bone flags (a pose change leaves it equal)."""
    bones = armature.bones
    n = len(bones)
    rest = np.empty(n * 16, np.float32)
    deform = np.empty(n, bool)
    segments = np.empty(n, np.int32)
    if n:
        bones.foreach_get("matrix_local", rest)
        bones.foreach_get("use_deform", deform)
        bones.foreach_get("bbone_segments", segments)
    return (armature.as_pointer(), tuple((b.name, b.parent.name if b.parent else None) for b in bones),
            rest.tobytes(), deform.tobytes(), segments.tobytes())


def object_signature(obj) -> tuple:
    """What about an object needs a re-import when it changes, read without vertex data: type,
    data, parenting and, for meshes, the mesh cache signature (counts, modifiers, shape-key
    structure, deform bones, vertex groups, material slots) and the fallback reasons."""
    data = getattr(obj, "data", None)
    base = (obj.type, data.as_pointer() if data is not None else None,
            obj.parent.name if obj.parent is not None else None, obj.parent_type, obj.parent_bone)
    if obj.type == "MESH" and data is not None:
        reasons, am, arm = _mesh_fallbacks(obj)
        return base + (_mesh_signature(obj, data, am, arm), tuple(reasons))
    return base


def _mesh_signature(obj, mesh, am, arm) -> tuple:
    ks = key_signature(mesh.shape_keys)
    mods = tuple((md.type, md.name, md.show_viewport, md.show_render,
                  getattr(getattr(md, "object", None), "name", None),
                  getattr(md, "use_deform_preserve_volume", None), getattr(md, "use_bone_envelopes", None),
                  getattr(md, "use_vertex_groups", None), getattr(md, "use_multi_modifier", None),
                  getattr(md, "vertex_group", None), getattr(md, "invert_vertex_group", None),
                  getattr(getattr(md, "node_group", None), "name", None)) for md in obj.modifiers)
    armsig = None
    if arm is not None:
        bones = arm.data.bones
        armsig = (arm.name, arm.data.as_pointer(), tuple(b.name for b in bones if b.use_deform),
                  tuple(b.name for b in bones if b.bbone_segments > 1))
    uv = mesh.uv_layers.active.name if mesh.uv_layers.active is not None else None
    return (mesh.as_pointer(), mesh.name, len(mesh.vertices), len(mesh.loops), len(mesh.polygons), uv, ks, mods,
            armsig, tuple(g.name for g in obj.vertex_groups),
            tuple((s.material.name if s.material else "") for s in obj.material_slots))


def _import_mesh(obj, nb: _Nodes, use_cache: bool = True) -> MeshAsset:
    mesh = obj.data
    reasons, am, arm = _mesh_fallbacks(obj)
    sig = _mesh_signature(obj, mesh, am, arm) if use_cache else None
    mesh_idx = nb.index[(obj.name, None)]
    mesh_world = nb.worlds[mesh_idx]
    if use_cache:
        hit = _MESH_CACHE.get(obj.name)
        if hit is not None and hit[0] == sig:
            asset, palette_bones = hit[1], hit[3]
            if not palette_bones:
                return asset
            jn, ibm = _palette_nodes(obj, arm, palette_bones, nb, mesh_world)
            p0 = next((p for p in asset.primitives if p.skin is not None), None)
            if p0 is None or (np.array_equal(p0.skin.joint_node_indices, jn)
                              and np.allclose(p0.skin.inverse_bind_matrices, ibm, rtol=1e-12, atol=1e-12)):
                return asset
            # same geometry and weights, new bind or node order: swap the skin only
            old = p0.skin
            skin = SkinAsset(jn, ibm, old.joint_bounds_min, old.joint_bounds_max,
                             armature_node=nb.index[(arm.name, None)])
            prims = [dataclasses.replace(p, skin=skin) if p.skin is not None else p for p in asset.primitives]
            asset = dataclasses.replace(asset, primitives=prims)
            _MESH_CACHE[obj.name] = (sig, asset, mesh.name, palette_bones)
            return asset
    asset, palette_bones = _build_mesh(obj, mesh, reasons, am, arm, nb, mesh_world)
    if use_cache:
        _MESH_CACHE[obj.name] = (sig, asset, mesh.name, palette_bones)
    return asset


def _palette_nodes(obj, arm, palette_bones, nb: _Nodes, mesh_world):
    jn = np.array([nb.index[(arm.name, b)] for b in palette_bones], np.int64)
    if jn.size == 0:
        return jn, np.zeros((0, 4, 4))
    ibm = np.linalg.inv(np.array([nb.worlds[j] for j in jn])) @ mesh_world
    return jn, ibm


def _build_mesh(obj, mesh, reasons, am, arm, nb: _Nodes, mesh_world):
    t0 = time.perf_counter()
    nv = len(mesh.vertices)
    if len(mesh.polygons) and not len(mesh.loop_triangles):
        mesh.calc_loop_triangles()
    cs = read_mesh(mesh)
    prims = split_by_material(cs, nv)
    base_co = np.empty(nv * 3, np.float32)
    if nv:
        mesh.vertices.foreach_get("co", base_co)
    base_co = base_co.reshape(nv, 3)
    STATS["mesh_read_s"] = STATS.get("mesh_read_s", 0.0) + time.perf_counter() - t0

    key = mesh.shape_keys
    use_keys = key is not None and len(key.key_blocks) > 1
    if use_keys and not key.use_relative:
        reasons.append("absolute (non-relative) shape keys")
        use_keys = False
    need_vg = len(obj.vertex_groups) > 0 and (
        (arm is not None and am.use_vertex_groups) or
        (use_keys and any(kb.vertex_group for kb in key.key_blocks)))
    vg = _skin.read_vertex_groups(mesh) if need_vg else None

    # --- skin ---------------------------------------------------------------------------------
    infl = None
    palette_bones: list = []
    t1 = time.perf_counter()
    if arm is not None and vg is not None:
        bones = arm.data.bones
        deform = {b.name: i for i, b in enumerate(bones) if b.use_deform}
        gmap = np.array([deform.get(g.name, -1) for g in obj.vertex_groups] or [-1], np.int64)
        vi, gi, wi = vg
        bj = gmap[gi] if gi.size else gi
        sel = (bj >= 0) & (wi > 0.0)
        infl = _skin.select_influences(vi[sel], bj[sel], wi[sel], nv)
        if infl.max_influences > 8:
            reasons.append(f"a vertex has {infl.max_influences} deform influences (more than 8)")
        used = np.unique(infl.joints[infl.weights > 0.0])
        if used.size == 0:
            infl = None
        else:
            bl = list(bones)
            # palette in node order (bones were added depth-first)
            used_names = [bl[int(i)].name for i in used]
            used_names.sort(key=lambda nm: nb.index[(arm.name, nm)])
            palette_bones = used_names
            remap = np.zeros(len(bl), np.int64)
            for slot, nm in enumerate(used_names):
                remap[bones.find(nm)] = slot
            infl.joints = np.where(infl.weights > 0.0, remap[infl.joints], 0)
            bb = [nm for nm in used_names if bones[nm].bbone_segments > 1]
            if bb:
                reasons.append(f"bendy bones (B-Bone segments > 1) on weighted bone '{bb[0]}'")
    skin_asset = None
    if infl is not None:
        jn, ibm = _palette_nodes(obj, arm, palette_bones, nb, mesh_world)
        lo, hi = _skin.joint_bounds(base_co, infl.joints, infl.weights, len(palette_bones))
        skin_asset = SkinAsset(jn, ibm, lo, hi, armature_node=nb.index[(arm.name, None)])
    STATS["skin_s"] = STATS.get("skin_s", 0.0) + time.perf_counter() - t1

    # --- morph targets ------------------------------------------------------------------------
    t2 = time.perf_counter()
    morphs_per_prim = [[] for _ in prims]
    if use_keys and prims:
        kbs = list(key.key_blocks)
        ref = key.reference_key
        coords = {}

        def co_of(kb):
            if kb.name not in coords:
                coords[kb.name] = read_key_coords(kb, nv)
            return coords[kb.name]

        nl, npoly = len(mesh.loops), len(mesh.polygons)
        loop_vert = np.empty(nl, np.int32)
        mesh.loops.foreach_get("vertex_index", loop_vert)
        poly_start = np.empty(npoly, np.int32)
        poly_total = np.empty(npoly, np.int32)
        mesh.polygons.foreach_get("loop_start", poly_start)
        mesh.polygons.foreach_get("loop_total", poly_total)
        nsolver = NormalDeltaSolver(cs.normals, cs.source_vertices, cs.corner_to_split, base_co,
                                    loop_vert, poly_start, poly_total)
        tsolvers = [TangentDeltaSolver(p.positions, p.normals, p.uv0, p.indices) if p.uv0 is not None else None
                    for p in prims]
        taken = {kb.name for kb in kbs if kb.name}
        split_local = []
        for p in prims:
            lm = np.full(cs.positions.shape[0], -1, np.int64)
            lm[p.split_vertices] = np.arange(p.split_vertices.shape[0])
            split_local.append(lm)
        vgroup_index = {g.name: g.index for g in obj.vertex_groups}
        for ki, kb in enumerate(kbs):
            if kb == ref:
                continue
            name = kb.name if kb.name else fallback_key_name(ki, taken)
            taken.add(name)
            rel = kb.relative_key if kb.relative_key is not None else ref
            ck, cr = co_of(kb), co_of(rel)
            ne = ck != cr
            mids = np.flatnonzero(ne[:, 0] | ne[:, 1] | ne[:, 2])
            d = np.zeros((nv, 3))
            d[mids] = ck[mids].astype(np.float64) - cr[mids]
            if kb.vertex_group and vg is not None and kb.vertex_group in vgroup_index:
                d[mids] *= _skin.group_weights(*vg, vgroup_index[kb.vertex_group], nv)[mids, None]
            if not np.isfinite(d[mids].sum()):
                raise AssetError(f"mesh '{obj.name}' shape key '{name}': non-finite vertex positions")
            moved = np.zeros(nv, bool)
            moved[mids[np.any(d[mids] != 0.0, axis=1)]] = True
            n_ids, n_d = nsolver.deltas(d, moved)
            for pi, p in enumerate(prims):
                pd = d[p.source_vertices]
                lmap = split_local[pi]
                loc = lmap[n_ids]
                ok = loc >= 0
                p_ids, p_nd = loc[ok], n_d[ok]
                nd = np.zeros((p.positions.shape[0], 3), np.float32)
                nd[p_ids] = p_nd
                td = (tsolvers[pi].deltas(pd, moved[p.source_vertices], p_ids, p_nd)
                      if tsolvers[pi] is not None else None)
                morphs_per_prim[pi].append(MorphTargetAsset(
                    name=name, position_deltas=pd, normal_deltas=nd, tangent_deltas=td,
                    weight_min=float(kb.slider_min), weight_max=float(kb.slider_max), mute=bool(kb.mute),
                    key_name=kb.name))
    STATS["morph_s"] = STATS.get("morph_s", 0.0) + time.perf_counter() - t2

    slots = obj.material_slots
    out = []
    for pi, p in enumerate(prims):
        mi = p.material_index
        mname = slots[mi].material.name if 0 <= mi < len(slots) and slots[mi].material is not None else ""
        kw = {}
        if skin_asset is not None:
            kw = dict(joints=infl.joints[p.source_vertices].astype(np.uint32),
                      weights=infl.weights[p.source_vertices], skin=skin_asset)
        out.append(PrimitiveAsset(material_index=mi, material_name=mname, positions=p.positions, normals=p.normals,
                                  indices=p.indices, source_vertices=p.source_vertices,
                                  smooth_normals=p.smooth_normals, tangents=p.tangents, uv0=p.uv0,
                                  morph_targets=morphs_per_prim[pi], **kw))
    asset = MeshAsset(name=obj.name, mesh_name=mesh.name, primitives=out,
                      fallback_reason="; ".join(reasons) if reasons else None, vertex_count=nv)
    return asset, palette_bones


# ----------------------------------------------------------------------------------------------
# actions
# ----------------------------------------------------------------------------------------------

def _bone_targets(nb: _Nodes, arm_name: str) -> Dict[str, "_actions.NodeTarget"]:
    return {k[1]: v for k, v in nb.targets.items() if k[0] == arm_name and k[1] is not None}


def _clip_for_object(action, slot, fps, obj, nb: _Nodes, use_cache: bool):
    ckey = (action.name, obj.name, "OBJECT")
    sig = (_actions.action_signature(action, slot), fps, obj.rotation_mode) if use_cache else None
    if use_cache:
        hit = _CLIP_CACHE.get(ckey)
        if hit is not None and hit[0] == sig and all(nb.index.get(k) == i for k, i in hit[1]):
            return hit[2]
    bones = _bone_targets(nb, obj.name) if obj.type == "ARMATURE" else {}
    clip = _actions.bake_object_action(action, slot, fps, obj.name, nb.targets[(obj.name, None)], bones,
                                       obj.name if obj.type == "ARMATURE" else "")
    if use_cache:
        keys = [(nb_key, nb.index[nb_key]) for nb_key in nb.index
                if nb_key[0] == obj.name]
        _CLIP_CACHE[ckey] = (sig, keys, clip)
    return clip


def _clip_for_key(action, slot, fps, obj, nb: _Nodes, use_cache: bool):
    ckey = (action.name, obj.name, "KEY")
    kb_names = {kb.name for kb in obj.data.shape_keys.key_blocks}
    node = nb.index[(obj.name, None)]
    sig = (_actions.action_signature(action, slot), fps, tuple(sorted(kb_names)), node) if use_cache else None
    if use_cache:
        hit = _CLIP_CACHE.get(ckey)
        if hit is not None and hit[0] == sig:
            return hit[2]
    clip = _actions.bake_key_action(action, slot, fps, obj.name, node, kb_names, obj.data.name)
    if use_cache:
        _CLIP_CACHE[ckey] = (sig, (), clip)
    return clip


def _assigned_actions(anim_data) -> list:
    """(action, slot) pairs assigned through the active action and NLA strips."""
    out = []
    if anim_data is None:
        return out
    if anim_data.action is not None:
        out.append((anim_data.action, anim_data.action_slot))
    for tr in anim_data.nla_tracks:
        for st in tr.strips:
            if st.action is not None:
                out.append((st.action, getattr(st, "action_slot", None)))
    return out


def _import_animations(scene, objects, nb: _Nodes, strict: bool, use_cache: bool, problems: list) -> list:
    import bpy
    fps = _actions.scene_fps(scene)
    clips = []
    info_cache = {}

    def bone_info(action, slot):
        k = (action.name, None if slot is None else slot.handle)
        if k not in info_cache:
            info_cache[k] = _actions.action_bone_names(action, slot)
        return info_cache[k]

    def attempt(fn, *args):
        try:
            clips.append(fn(*args))
        except AssetError as e:
            if strict:
                raise
            problems.append(str(e))

    all_actions = list(bpy.data.actions)
    for obj in objects:
        seen = set()
        ad = obj.animation_data
        for action, slot in _assigned_actions(ad):
            slot = slot if slot is not None else _actions.pick_slot(action, "OBJECT", ad, obj.name)
            if slot is None or action.name in seen:
                continue
            seen.add(action.name)
            attempt(_clip_for_object, action, slot, fps, obj, nb, use_cache)
        if obj.type == "ARMATURE":
            bone_names = set(obj.data.bones.keys())
            for action in all_actions:
                if action.name in seen:
                    continue
                slot = _actions.pick_slot(action, "OBJECT", None, obj.name)
                if slot is None:
                    continue
                names, _ = bone_info(action, slot)
                if not names or not (names & bone_names):
                    continue  # made for another rig
                seen.add(action.name)
                missing = sorted(names - bone_names)
                if missing:
                    msg = (f"action '{action.name}': bone '{missing[0]}' does not exist in armature "
                           f"'{obj.name}'; clip not offered for it")
                    if strict:
                        raise AssetError(msg)
                    problems.append(msg)
                    continue
                attempt(_clip_for_object, action, slot, fps, obj, nb, use_cache)
        if obj.type == "MESH" and obj.data.shape_keys is not None and len(obj.data.shape_keys.key_blocks) > 1:
            key = obj.data.shape_keys
            kad = key.animation_data
            kseen = set()
            kb_names = {kb.name for kb in key.key_blocks}
            for action, slot in _assigned_actions(kad):
                slot = slot if slot is not None else _actions.pick_slot(action, "KEY", kad, key.name)
                if slot is None or action.name in kseen:
                    continue
                kseen.add(action.name)
                attempt(_clip_for_key, action, slot, fps, obj, nb, use_cache)
            for action in all_actions:
                if action.name in kseen:
                    continue
                slot = _actions.pick_slot(action, "KEY", None, key.name)
                if slot is None or slot.target_id_type != "KEY":
                    continue
                names = _actions.action_key_names(action, slot)
                if names and names <= kb_names:
                    kseen.add(action.name)
                    attempt(_clip_for_key, action, slot, fps, obj, nb, use_cache)
    return clips


def import_action(action, scene_asset: SceneAsset, target_object, scene, slot=None):
    """Bake ``action`` for ``target_object`` (an object whose nodes are in ``scene_asset``).

    A Key action (slot id type KEY) becomes morph weight channels of the mesh object's node.
    Raises AssetError for a channel naming a missing bone / shape key or for non-finite keys.
    """
    fps = _actions.scene_fps(scene)
    obj = target_object
    nb = _Nodes()
    for i, nd in enumerate(scene_asset.nodes):
        nb.index[(nd.object_name, nd.bone_name)] = i
    is_key = (slot is not None and slot.target_id_type == "KEY") or (
        slot is None and obj.type == "MESH" and obj.data.shape_keys is not None
        and any(s.target_id_type == "KEY" for s in action.slots)
        and not any(s.target_id_type == "OBJECT" for s in action.slots))
    if (obj.name, None) not in nb.index:
        raise AssetError(f"action '{action.name}': object '{obj.name}' is not in the scene asset")
    if is_key:
        key = obj.data.shape_keys
        if key is None:
            raise AssetError(f"action '{action.name}': object '{obj.name}' has no shape keys")
        slot = slot or _actions.pick_slot(action, "KEY", key.animation_data, key.name)
        return _clip_for_key(action, slot, fps, obj, nb, False)
    slot = slot or _actions.pick_slot(action, "OBJECT", obj.animation_data, obj.name)
    # rebuild node targets for the object and its bones
    node = nb.index[(obj.name, None)]
    nb.targets[(obj.name, None)] = _object_target(obj, node)
    if obj.type == "ARMATURE":
        for b in obj.data.bones:
            bi = nb.index.get((obj.name, b.name), -1)
            if bi >= 0:
                pb = obj.pose.bones.get(b.name)
                nb.targets[(obj.name, b.name)] = _actions.NodeTarget(
                    bi, pb.rotation_mode if pb else "QUATERNION", np.zeros(3), _BONE_REST_ROT, np.ones(3))
    return _clip_for_object(action, slot, fps, obj, nb, False)


# ----------------------------------------------------------------------------------------------
# scene
# ----------------------------------------------------------------------------------------------

def _collect_objects(view_layer) -> list:
    objs = list(view_layer.objects) if view_layer is not None else []
    include: Dict[str, object] = {}
    for o in objs:
        if o.type in ("MESH", "ARMATURE"):
            include[o.name] = o
            for a in _armature_modifier_targets(o):
                include[a.name] = a
    for o in list(include.values()):
        p = o.parent
        while p is not None and p.name not in include:
            include[p.name] = p
            p = p.parent
        for a in _armature_modifier_targets(o):
            p = a.parent
            while p is not None and p.name not in include:
                include[p.name] = p
                p = p.parent
    return list(include.values())


def import_scene_with_problems(depsgraph_or_scene, view_layer=None, *, strict: bool = False,
                               use_cache: bool = True) -> Tuple[SceneAsset, List[str]]:
    """Import everything renderable in the view layer; returns the asset and the problems found
    with actions (clips that were not offered: missing bones/shape keys, non-finite keys)."""
    t0 = time.perf_counter()
    for k in ("mesh_read_s", "skin_s", "morph_s"):
        STATS[k] = 0.0
    _skin.STATS["vertex_group_walk_s"] = 0.0
    _skin.STATS["vertex_group_entries"] = 0
    scene, view_layer = _resolve(depsgraph_or_scene, view_layer)
    objects = _collect_objects(view_layer)
    nb = _build_nodes(objects)
    t1 = time.perf_counter()
    meshes = []
    problems: List[str] = []
    for i, nd in enumerate(nb.nodes):
        if nd["kind"] != NODE_OBJECT:
            continue
        obj = scene.objects.get(nd["object_name"]) or _obj(nd["object_name"])
        if obj.type == "MESH":
            try:
                asset = _import_mesh(obj, nb, use_cache)
            except AssetError:
                raise
            except Exception as e:  # pragma: no cover - unexpected data
                raise AssetError(f"object '{obj.name}': {e}") from e
            nd["mesh_index"] = len(meshes)
            meshes.append(asset)
    t2 = time.perf_counter()
    objs_by_node = [(_obj(nd["object_name"])) for nd in nb.nodes if nd["kind"] == NODE_OBJECT]
    clips = _import_animations(scene, objs_by_node, nb, strict, use_cache, problems)
    t3 = time.perf_counter()
    nodes = [SceneNodeAsset(**nd) for nd in nb.nodes]
    asset = SceneAsset(nodes, meshes, clips, name=scene.name)
    asset.validate()
    asset.import_problems = tuple(problems)
    t4 = time.perf_counter()
    STATS.update(nodes_s=t1 - t0, meshes_s=t2 - t1, actions_s=t3 - t2, assemble_s=t4 - t3, total_s=t4 - t0,
                 vertex_group_walk_s=_skin.STATS["vertex_group_walk_s"])
    return asset, problems


def _obj(name):
    import bpy
    return bpy.data.objects[name]


def import_scene(depsgraph_or_scene, view_layer=None, *, strict: bool = False, use_cache: bool = True) -> SceneAsset:
    """SceneAsset of the view layer (see import_scene_with_problems; problems are on
    ``asset.import_problems``)."""
    return import_scene_with_problems(depsgraph_or_scene, view_layer, strict=strict, use_cache=use_cache)[0]


def node_world_matrices(scene_asset: SceneAsset) -> np.ndarray:
    """(N,4,4) bind world matrices (nodes are stored parents-first)."""
    n = scene_asset.node_count
    out = np.empty((n, 4, 4))
    for i in range(n):
        p = scene_asset.parents[i]
        out[i] = scene_asset.bind_locals[i] if p < 0 else out[p] @ scene_asset.bind_locals[i]
    return out
