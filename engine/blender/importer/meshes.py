"""Blender mesh objects -> MeshAsset (primitives, skin, morph targets) and the signatures that tell
when an object's structure changed.  Reuse goes through ``AssetCache`` (cache.py)."""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Optional, Tuple

import numpy as np

from ...core.assets import AssetError, Bounds, MeshAsset, PrimitiveAsset, SkinAsset
from ...core.assets.readonly import hand_over
from . import skin as _skin
from .mesh import read_mesh, split_by_material, vertex_positions
from .morph_build import build_morphs as _build_morphs
from .moved import moved_asset
from .nodes import NodeBuilder
from .reads import MeshReads

VRM_OUTLINE_PREFIX = "VRM Add-on MToon 1.0 Outline Geometry"


def _enabled(md) -> bool:
    return bool(md.show_viewport or md.show_render)


def mesh_fallbacks(obj) -> Tuple[list, Optional[object], Optional[object]]:
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


def object_signature(obj, memo: Optional[dict] = None) -> tuple:
    """What about an object needs a re-import when it changes, read without vertex data: type,
    data, parenting and, for meshes, the mesh cache signature (counts, modifiers, shape-key
    structure, deform bones, vertex groups, material slots) and the fallback reasons.
    ``memo``: a dict shared by the calls of one check, so the parts of datablocks that many
    objects share (linked duplicates' shape keys and armatures) are read once."""
    data = getattr(obj, "data", None)
    base = (obj.type, data.as_pointer() if data is not None else None,
            obj.parent.name if obj.parent is not None else None, obj.parent_type, obj.parent_bone)
    if obj.type == "MESH" and data is not None:
        reasons, am, arm = mesh_fallbacks(obj)
        return base + (mesh_structure_signature(obj, data, am, arm, memo=memo), tuple(reasons))
    return base


def _memo(memo: Optional[dict], key, make):
    if memo is None:
        return make()
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = make()
    return hit


def mesh_structure_signature(obj, mesh, am, arm, shared: bool = False, memo: Optional[dict] = None) -> tuple:
    """What about a mesh object's structure an asset depends on (no vertex data).  ``shared``:
    without what is the object's own (object names of its armature), so linked duplicates of
    one mesh with copies of one rig compare equal.  ``memo``: see ``object_signature``."""
    keys = mesh.shape_keys
    ks = None if keys is None else _memo(memo, ("key", keys.as_pointer()), lambda: key_signature(keys))

    def target(md):
        ob = getattr(md, "object", None)
        if ob is None:
            return None
        return ob.data.as_pointer() if shared and getattr(ob, "data", None) is not None else ob.name

    mods = tuple((md.type, md.name, md.show_viewport, md.show_render, target(md),
                  getattr(md, "use_deform_preserve_volume", None), getattr(md, "use_bone_envelopes", None),
                  getattr(md, "use_vertex_groups", None), getattr(md, "use_multi_modifier", None),
                  getattr(md, "vertex_group", None), getattr(md, "invert_vertex_group", None),
                  getattr(getattr(md, "node_group", None), "name", None)) for md in obj.modifiers)
    armsig = None
    if arm is not None:
        bones = arm.data.bones
        rest = _memo(memo, ("bones", arm.data.as_pointer()),
                     lambda: (tuple(b.name for b in bones if b.use_deform),
                              tuple(_bbone_rest_signature(b) for b in bones if b.bbone_segments > 1)))
        armsig = (None if shared else arm.name, arm.data.as_pointer()) + rest
    uv = mesh.uv_layers.active.name if mesh.uv_layers.active is not None else None
    return (mesh.as_pointer(), mesh.name, len(mesh.vertices), len(mesh.loops), len(mesh.polygons), uv, ks, mods,
            armsig, tuple(g.name for g in obj.vertex_groups),
            tuple((s.material.name if s.material else "") for s in obj.material_slots))


_BBONE_REST_PROPS = ("bbone_segments", "bbone_mapping_mode", "bbone_easein", "bbone_easeout", "bbone_curveinx",
                     "bbone_curveinz", "bbone_curveoutx", "bbone_curveoutz", "bbone_rollin", "bbone_rollout",
                     "bbone_handle_type_start", "bbone_handle_type_end", "use_endroll_as_inroll",
                     "bbone_handle_use_scale_start", "bbone_handle_use_scale_end",
                     "bbone_handle_use_ease_start", "bbone_handle_use_ease_end")


def _bbone_rest_signature(bone) -> tuple:
    """What about a B-Bone's rest shape the per-vertex segment index/blend depend on (read at
    import): its name, segment count, mapping mode, rest ease/curve/roll, handles."""
    vals = []
    for p in _BBONE_REST_PROPS:
        v = getattr(bone, p, None)
        vals.append(tuple(v) if v is not None and hasattr(v, "__len__") and not isinstance(v, str) else v)
    hs, he = bone.bbone_custom_handle_start, bone.bbone_custom_handle_end
    return (bone.name, tuple(vals), hs.name if hs is not None else None, he.name if he is not None else None)


def weights_matter(obj, am, arm) -> bool:
    """Whether vertex-group weights change what the importer builds (skin or masked keys)."""
    if not len(obj.vertex_groups):
        return False
    key = obj.data.shape_keys
    return bool((arm is not None and am.use_vertex_groups)
                or (key is not None and any(kb.vertex_group for kb in key.key_blocks)))


def import_mesh(obj, nb: NodeBuilder, cache=None, verify: bool = True, stats: Optional[dict] = None) -> MeshAsset:
    """The MeshAsset of mesh object ``obj``; reused from ``cache`` (an AssetCache) when the data
    is unchanged (see cache.py).  Invalid geometry (non-finite positions or shape keys) does not
    fail the scene: the object gets a fallback reason and is drawn from Blender's evaluated mesh."""
    mesh = obj.data
    stats = {} if stats is None else stats
    reasons, am, arm = mesh_fallbacks(obj)
    mesh_idx = nb.index[(obj.name, None)]
    mesh_world = nb.worlds[mesh_idx]
    structure = content = None
    if cache is not None:
        structure = mesh_structure_signature(obj, mesh, am, arm)
        entry, content = cache.find_mesh(obj, structure, weights_matter(obj, am, arm), verify)
        if entry is not None:
            asset = _rebind(entry, obj, arm, nb, mesh_world)
            if asset is not entry.asset:
                cache.store_mesh(obj, structure, entry.content, asset, entry.palette_bones, entry.shared)
            return asset
        # a linked duplicate of a mesh imported for another object: share its geometry, weights
        # and morph targets (only the skin's joint nodes and binds are this object's own)
        shared = mesh_structure_signature(obj, mesh, am, arm, shared=True)
        if content is None:
            content = cache.content_of(obj, weights_matter(obj, am, arm))
        twin = cache.find_shared(mesh.name, shared, content)
        if twin is not None:
            asset = _rebind(twin, obj, arm, nb, mesh_world, force=True)
            cache.store_mesh(obj, structure, twin.content, asset, twin.palette_bones, shared)
            return asset
        # only its vertices moved: the held asset made anew from them (moved.py)
        held = cache.moved_entry(obj, structure, content)
        asset = moved_asset(held.asset, mesh, stats) if held is not None else None
        if asset is not None:
            cache.store_mesh(obj, structure, content, asset, (), shared)
            return asset
    try:
        asset, palette_bones = _build_mesh(obj, mesh, reasons, am, arm, nb, mesh_world, stats,
                                           cache.reads_of(mesh) if cache is not None else None)
    except AssetError as ex:
        msg = str(ex)
        prefix = f"mesh '{obj.name}' "
        asset = MeshAsset(name=obj.name, mesh_name=mesh.name, primitives=(),
                          fallback_reason=msg[len(prefix):] if msg.startswith(prefix) else msg,
                          vertex_count=len(mesh.vertices))
        palette_bones = []
    if cache is not None:
        cache.store_mesh(obj, structure, content, asset, palette_bones,
                         mesh_structure_signature(obj, mesh, am, arm, shared=True))
    return asset


def _rebind(entry, obj, arm, nb: NodeBuilder, mesh_world, force: bool = False) -> MeshAsset:
    """A cached asset with its skin's joint nodes and inverse binds for today's node order and
    bind transforms (the same geometry and weights keep their arrays).  ``force``: always a new
    MeshAsset named for ``obj`` (the entry is another object's: a linked duplicate)."""
    asset = entry.asset
    if force:
        asset = dataclasses.replace(asset, name=obj.name)
    if not entry.palette_bones or arm is None:
        return asset
    jn, ibm = _palette_nodes(obj, arm, entry.palette_bones, nb, mesh_world)
    p0 = next((p for p in asset.primitives if p.skin is not None), None)
    if p0 is None or (not force and np.array_equal(p0.skin.joint_node_indices, jn)
                      and np.allclose(p0.skin.inverse_bind_matrices, ibm, rtol=1e-12, atol=1e-12)
                      and p0.skin.armature_node == nb.index[(arm.name, None)]
                      and p0.skin.armature_relation is not None
                      and np.allclose(p0.skin.armature_relation, _relation(arm, nb, mesh_world), rtol=1e-12,
                                      atol=1e-12)):
        return asset
    old = p0.skin
    skin = SkinAsset(jn, ibm, old.joint_bounds_min, old.joint_bounds_max,
                     armature_node=nb.index[(arm.name, None)], unweighted_bounds=old.unweighted_bounds,
                     armature_relation=_relation(arm, nb, mesh_world), joint_segments=old.joint_segments,
                     preserve_volume=old.preserve_volume)
    prims = [dataclasses.replace(p, skin=skin) if p.skin is not None else p for p in asset.primitives]
    return dataclasses.replace(asset, primitives=prims)

def _relation(arm, nb: NodeBuilder, mesh_world) -> np.ndarray:
    """inverse(armature world) @ mesh world in the frame the inverse binds were taken in."""
    return np.linalg.solve(nb.worlds[nb.index[(arm.name, None)]], mesh_world)


def _palette_nodes(obj, arm, palette_bones, nb: NodeBuilder, mesh_world):
    jn = np.array([nb.index[(arm.name, b)] for b in palette_bones], np.int64)
    if jn.size == 0:
        return jn, np.zeros((0, 4, 4))
    ibm = np.linalg.inv(np.array([nb.worlds[j] for j in jn])) @ mesh_world
    return jn, ibm


def _build_mesh(obj, mesh, reasons, am, arm, nb: NodeBuilder, mesh_world, stats: dict, reads=None):
    reads = reads if reads is not None else MeshReads(mesh)
    t0 = time.perf_counter()
    nv = len(mesh.vertices)
    if len(mesh.polygons) and not len(mesh.loop_triangles):
        mesh.calc_loop_triangles()
    base_co = vertex_positions(mesh)
    cs = read_mesh(mesh, positions=base_co)
    prims = split_by_material(cs, nv)
    for p in prims:          # read-only: the PrimitiveAssets share them (no copies; the key rows' solvers read them)
        for a in (p.positions, p.normals, p.uv0, p.tangents, p.smooth_normals, p.indices, p.source_vertices, p.colors):
            if a is not None:
                a.setflags(write=False)
    if not np.isfinite(base_co).all():        # (flat: the per-row form is 30x slower)
        finite = np.isfinite(base_co).all(axis=1)
        raise AssetError(f"mesh '{obj.name}' has a non-finite vertex position (vertex {int(np.argmin(finite))})")
    stats["mesh_read_s"] = stats.get("mesh_read_s", 0.0) + time.perf_counter() - t0

    key = mesh.shape_keys
    use_keys = key is not None and len(key.key_blocks) > 1
    if use_keys and key is not None and not key.use_relative:     # (use_keys: key is not None)
        reasons.append("absolute (non-relative) shape keys")
        use_keys = False
    need_vg = len(obj.vertex_groups) > 0 and (
        (arm is not None and am.use_vertex_groups) or
        (use_keys and key is not None and any(kb.vertex_group for kb in key.key_blocks)))
    vg = reads.vertex_groups() if need_vg else None

    # --- skin ---------------------------------------------------------------------------------
    infl = None
    palette_bones: list = []
    joint_segments = None
    t1 = time.perf_counter()
    if arm is not None and vg is not None:
        bones = arm.data.bones
        deform = {b.name: i for i, b in enumerate(bones) if b.use_deform}
        gmap = np.array([deform.get(g.name, -1) for g in obj.vertex_groups] or [-1], np.int64)
        vi, gi, wi = vg
        bj = gmap[gi] if gi.size else gi
        sel = (bj >= 0) & (wi > 0.0)
        tv, tj, tw = vi[sel], bj[sel], wi[sel]
        # B-Bones: a bone's weight is split between two adjacent segment slots; joint ids
        # >= len(bones) stand for (bone, segment) pairs (``seg_keys``)
        src = _skin.source_order(arm, tj) if am.use_deform_preserve_volume else None
        tv, tj, tw, seg_keys = _skin.split_bbone_weights(obj, arm, base_co, tv, tj, tw)
        infl = _skin.select_influences(tv, tj, tw, nv, order=src)
        used = np.unique(infl.joints[infl.weights > 0.0])
        if used.size == 0:
            infl = None
        else:
            bl = list(bones)
            nb_bones = len(bl)
            # (bone index, segment or -1) of each used joint id
            ub, us = used.copy(), np.full(used.size, -1, np.int64)
            if seg_keys.shape[0]:
                row = np.clip(used - nb_bones, 0, seg_keys.shape[0] - 1)
                ub = np.where(used < nb_bones, used, seg_keys[row, 0])
                us = np.where(used < nb_bones, -1, seg_keys[row, 1])
            # palette in node order (bones were added depth-first), segments in Blender's order
            node_of = np.array([nb.index[(arm.name, bl[int(b)].name)] for b in ub], np.int64)
            order = np.lexsort((us, node_of))
            palette_bones = [bl[int(ub[k])].name for k in order]
            remap = np.zeros(nb_bones + seg_keys.shape[0], np.int64)
            remap[used[order]] = np.arange(order.size)
            infl.joints = np.where(infl.weights > 0.0, remap[infl.joints], 0)
            if (us >= 0).any():
                joint_segments = us[order].astype(np.int64)
    skin_asset = None
    if infl is not None and arm is not None:    # (infl is made only with an armature)
        jn, ibm = _palette_nodes(obj, arm, palette_bones, nb, mesh_world)
        lo, hi = _skin.joint_bounds(base_co, infl.joints, infl.weights, len(palette_bones))
        # vertices without deform weight stay where they are (as in Blender's Armature modifier):
        # the skin's bounds must still cover them
        still = ~(infl.weights > 0.0).any(axis=1)
        still_bounds = Bounds.from_points(base_co[still]) if still.any() else None
        skin_asset = SkinAsset(jn, ibm, lo, hi, armature_node=nb.index[(arm.name, None)],
                               unweighted_bounds=still_bounds, armature_relation=_relation(arm, nb, mesh_world),
                               joint_segments=joint_segments,
                               preserve_volume=bool(am.use_deform_preserve_volume))
    stats["skin_s"] = stats.get("skin_s", 0.0) + time.perf_counter() - t1

    # --- morph targets ------------------------------------------------------------------------
    t2 = time.perf_counter()
    morphs_per_prim = [[] for _ in prims]
    if use_keys and prims:
        morphs_per_prim = _build_morphs(obj, mesh, key, cs, prims, base_co, vg, reads)
    stats["morph_s"] = stats.get("morph_s", 0.0) + time.perf_counter() - t2

    slots = obj.material_slots
    out = []
    for pi, p in enumerate(prims):
        mi = p.material_index
        mname = slots[mi].material.name if 0 <= mi < len(slots) and slots[mi].material is not None else ""
        kw: dict[str, Any] = {}
        if skin_asset is not None and infl is not None:     # (skin_asset is made only from infl)
            kw = dict(joints=infl.joints[p.source_vertices].astype(np.uint32),
                      weights=infl.weights[p.source_vertices], skin=skin_asset)
        # the split's fresh arrays go to the asset as they are (no copies: a big mesh's import
        # would otherwise hold each twice); nothing writes them after this
        h = hand_over
        out.append(PrimitiveAsset(material_index=mi, material_name=mname, positions=h(p.positions),
                                  normals=h(p.normals), indices=h(p.indices), source_vertices=h(p.source_vertices),
                                  smooth_normals=h(p.smooth_normals), tangents=h(p.tangents), uv0=h(p.uv0),
                                  colors=h(p.colors), morph_targets=tuple(morphs_per_prim[pi]), **kw))
    asset = MeshAsset(name=obj.name, mesh_name=mesh.name, primitives=tuple(out),
                      fallback_reason="; ".join(reasons) if reasons else None, vertex_count=nv)
    return asset, palette_bones

