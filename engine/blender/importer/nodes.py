"""Scene objects and bones -> the node array of a SceneAsset (bind transforms, parents, targets
for the action baker).  Reads bpy; no caching."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ...core.assets import NODE_BONE, NODE_OBJECT, SceneAsset, compose_trs
from . import actions as _actions
from .rotation import euler_to_quat, normalize_quat, quat_mul, rotation_to_quat

# ----------------------------------------------------------------------------------------------
# object transforms
# ----------------------------------------------------------------------------------------------

def _m(matrix) -> np.ndarray:
    return np.array(matrix, dtype=np.float64)


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


def _finite_bind(t, r, s):
    """(t, r, s, reference scale): a NaN or infinite location, rotation or scale is bound as 0,
    identity, 1 (the timeline reads Blender's matrices every frame and skips such an object, by
    name); a zero scale axis stays in the bind pose (the preview collapses it, as Blender does)
    but counts as 1 in the reference world the inverse binds and armature relations are taken
    against (they only need one invertible frame: ``inv(jointBind) @ meshBind`` with
    ``inv(armBind) @ meshBind`` cancels it)."""
    t = np.where(np.isfinite(t), t, 0.0)
    if not (np.isfinite(r).all() and np.any(r)):
        r = np.array([1.0, 0.0, 0.0, 0.0])
    s = np.where(np.isfinite(s), s, 1.0)
    return t, r, s, np.where(s == 0.0, 1.0, s)


def object_target(obj, idx: int) -> "_actions.NodeTarget":
    dloc, drot, dscale = _object_deltas(obj)
    ident = (not dloc.any() and np.array_equal(drot, [1.0, 0.0, 0.0, 0.0]) and np.all(dscale == 1.0))
    return _actions.NodeTarget(idx, obj.rotation_mode, np.array(obj.location, np.float64),
                               _object_rotation_values(obj), np.array(obj.scale, np.float64),
                               None if ident else dloc, None if ident else drot, None if ident else dscale)


def _rot_of(mode: str, vals: Dict[str, np.ndarray]) -> np.ndarray:
    from .rotation import rotation_prop
    return rotation_to_quat(vals[rotation_prop(mode)[0]][None, :], mode)[0]


BONE_REST_ROT = {
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

class NodeBuilder:
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


def build_nodes(objects) -> NodeBuilder:
    nb = NodeBuilder()
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


def _add_object(nb: NodeBuilder, obj) -> None:
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
    t, r, s, ref_s = _finite_bind(t, r, s)
    world = parent_world @ pre @ compose_trs(t, r, ref_s)[0]
    idx = nb.add(world, name=obj.name, kind=NODE_OBJECT, parent=parent_idx, pre_matrix=pre,
                 bind_translation=t, bind_rotation=r, bind_scale=s, object_name=obj.name, bone_name=None)
    nb.targets[(obj.name, None)] = object_target(obj, idx)
    if obj.type == "ARMATURE":
        _add_bones(nb, obj, idx, world)


def bone_target(pb, idx: int) -> "_actions.NodeTarget":
    """The baker's target of a pose bone.  Its basis values are the rig's own pose: the bind
    (and the preview's base) pose, so channels a clip does not key keep them, exactly as timeline
    playback of that clip would.  No pose bone: the rest pose.  A connected bone's location is
    ignored, as Blender ignores it (keyed or not)."""
    if pb is None:
        return _actions.NodeTarget(idx, "QUATERNION", np.zeros(3), BONE_REST_ROT, np.ones(3))
    return _pose_target(idx, pb, np.array(pb.location, np.float64), _object_rotation_values(pb),
                        np.array(pb.scale, np.float64))


def _pose_target(idx: int, pb, location, rotation, scale) -> "_actions.NodeTarget":
    connected = bool(pb.bone.use_connect)
    return _actions.NodeTarget(idx, pb.rotation_mode, np.zeros(3) if connected else location, rotation, scale,
                               ignore_location=connected)


# pose-bone channels read in bulk (property, width); the rotation ones are _object_rotation_values'
_ROTATION_PROPS = ("rotation_quaternion", "rotation_euler", "rotation_axis_angle")
_POSE_CHANNELS = (("location", 3), ("rotation_quaternion", 4), ("rotation_euler", 3),
                  ("rotation_axis_angle", 4), ("scale", 3))


def bone_targets(arm, names, idxs) -> list:
    """``bone_target`` of the pose bones ``names`` of ``arm`` (node indices ``idxs``): the same
    values, read with one ``foreach_get`` per channel instead of per bone."""
    pose = arm.pose
    pbs = list(pose.bones) if pose is not None else []
    at = {pb.name: k for k, pb in enumerate(pbs)}
    vals = {}
    for prop, width in _POSE_CHANNELS:
        a = np.empty(len(pbs) * width, np.float32)
        if pbs and pose is not None:     # (pbs: the pose's bones)
            pose.bones.foreach_get(prop, a)
        vals[prop] = a.reshape(len(pbs), width).astype(np.float64)   # float32 values, exactly
    out = []
    for name, idx in zip(names, idxs):
        k = at.get(name)
        if k is None:
            out.append(bone_target(None, idx))
            continue
        out.append(_pose_target(idx, pbs[k], vals["location"][k].copy(),
                                {p: vals[p][k].copy() for p in _ROTATION_PROPS}, vals["scale"][k].copy()))
    return out


def _bone_binds(targets) -> tuple:
    """(translations, unit rotations, scales) (n,3)/(n,4)/(n,3) of the bind pose of bone
    ``targets``: per bone ``_finite_bind(location, normalize_quat(_rot_of(mode, rotation)), scale)``,
    one numpy pass per rotation mode (the same row-wise arithmetic)."""
    from .rotation import rotation_prop

    n = len(targets)
    rot = np.empty((n, 4))
    modes: Dict[str, list] = {}
    for k, t in enumerate(targets):
        modes.setdefault(t.rotation_mode, []).append(k)
    for mode, ks in modes.items():
        prop = rotation_prop(mode)[0]
        raw = np.array([targets[k].rotation[prop] for k in ks], np.float64)
        rot[ks] = rotation_to_quat(raw, mode)
    rot = normalize_quat(rot) if n else rot
    t = np.array([x.location for x in targets], np.float64).reshape(n, 3)
    s = np.array([x.scale for x in targets], np.float64).reshape(n, 3)
    t = np.where(np.isfinite(t), t, 0.0)
    bad = ~(np.isfinite(rot).all(axis=1) & np.any(rot != 0.0, axis=1))
    rot[bad] = (1.0, 0.0, 0.0, 0.0)
    s = np.where(np.isfinite(s), s, 1.0)
    return t, rot, s


def _add_bones(nb: NodeBuilder, arm, arm_idx: int, arm_world: np.ndarray) -> None:
    bones = arm.data.bones
    n = len(bones)
    if not n:
        return
    ml = np.empty(n * 16, np.float32)
    bones.foreach_get("matrix_local", ml)
    ml = ml.reshape(n, 4, 4).transpose(0, 2, 1).astype(np.float64)
    # inheritance flags (ScenePose composes them as Blender's bone parent transform does)
    inh_rot = np.empty(n, bool)
    bones.foreach_get("use_inherit_rotation", inh_rot)
    local_loc = np.empty(n, bool)
    bones.foreach_get("use_local_location", local_loc)
    bl = list(bones)
    pos = {b.name: i for i, b in enumerate(bl)}
    parent = [pos[b.parent.name] if b.parent is not None else -1 for b in bl]
    kids: Dict[int, list] = {}
    roots = []
    for i, p in enumerate(parent):
        if p < 0:
            roots.append(i)
        else:
            kids.setdefault(p, []).append(i)
    # depth-first order (parents first): node i of this armature is bone order[i]
    order = []
    stack = list(reversed(roots))
    while stack:
        i = stack.pop()
        order.append(i)
        stack.extend(reversed(kids.get(i, ())))
    base = len(nb.nodes)
    node_of = np.empty(n, np.int64)
    node_of[order] = base + np.arange(len(order))
    par = np.asarray(parent, np.int64)
    has_par = par >= 0
    # pre matrices: the root's rest, else inv(parent rest) @ rest (each parent inverted once)
    pre = ml.copy()
    if has_par.any():
        up = np.unique(par[has_par])
        inv = np.empty((n, 4, 4))
        inv[up] = np.linalg.inv(ml[up])
        ch = np.flatnonzero(has_par)
        pre[ch] = inv[par[ch]] @ ml[ch]
    world = arm_world @ ml            # the rest world: inverse binds are taken against it
    targets = bone_targets(arm, [bl[i].name for i in order], [base + k for k in range(len(order))])
    bt, br, bs = _bone_binds(targets)
    # a NaN pose channel binds as identity (the timeline skips what the bone deforms, by name)
    for k, i in enumerate(order):
        b = bl[i]
        nb.add(world[i], name=f"{arm.name}/{b.name}", kind=NODE_BONE,
                     parent=int(node_of[par[i]]) if par[i] >= 0 else arm_idx, pre_matrix=pre[i],
                     bind_translation=bt[k], bind_rotation=br[k], bind_scale=bs[k], object_name=arm.name,
                     bone_name=b.name, inherit_rotation=bool(inh_rot[i]), inherit_scale=str(b.inherit_scale),
                     local_location=bool(local_loc[i]))
        nb.targets[(arm.name, b.name)] = targets[k]

def collect_objects(view_layer, hidden: frozenset = frozenset()) -> list:
    """The view layer's meshes and armatures, with the armatures their Armature modifiers name
    and every parent up the chain; ``hidden``: names of meshes left out (a final render's meshes
    hidden from rendering: ``render_hidden``), unless an included object needs them as a parent."""
    objs = list(view_layer.objects) if view_layer is not None else []
    include: Dict[str, Any] = {}      # name -> bpy.types.Object
    for o in objs:
        if o.type == "MESH" and o.name in hidden:
            continue
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


def render_hidden(depsgraph, view_layer) -> frozenset:
    """Names of the view layer's meshes a final render's depsgraph does not show (Disable in
    Renders, a collection hidden from rendering): not imported, not uploaded.  Empty for a
    viewport depsgraph (hiding there is a quick toggle; the viewport's draw list skips them)."""
    if depsgraph is None or view_layer is None or getattr(depsgraph, "mode", "VIEWPORT") != "RENDER":
        return frozenset()
    shown = {getattr(o, "original", o).name for o in depsgraph.objects}
    return frozenset(o.name for o in view_layer.objects if o.type == "MESH" and o.name not in shown)


def render_objects(depsgraph, view_layer) -> list:
    """``collect_objects`` of what ``depsgraph`` draws: a final render's hidden meshes
    (``render_hidden``) left out; a viewport's or no depsgraph: the whole view layer."""
    return collect_objects(view_layer, render_hidden(depsgraph, view_layer))


def structure_key(objects) -> Optional[tuple]:
    """What of ``objects`` (``collect_objects``) the node array of ``build_nodes`` depends on,
    read cheaply: each object's name, type, data, parent, parent type, parent bone and parent
    inverse, and each armature datablock's bones (names, parents, rest matrices, lengths,
    inheritance flags).  Two equal keys give the same nodes, parents and pre-matrices; the bind
    pose is not in it (a final render reads the evaluated pose every frame).  ``None`` when an
    object's parent offset is not a constant of these (vertex, lattice or curve parents)."""
    out = []
    arms = {}
    for o in sorted(objects, key=lambda o: o.name):
        data = o.data
        par = o.parent
        if par is not None and o.parent_type not in ("OBJECT", "ARMATURE", "BONE"):
            return None
        mpi = np.array(o.matrix_parent_inverse, np.float64).tobytes() if par is not None else None
        out.append((o.name, o.type, data.as_pointer() if data is not None else 0,
                    par.name if par is not None else None, o.parent_type, o.parent_bone, mpi))
        if o.type == "ARMATURE" and data is not None and data.as_pointer() not in arms:
            arms[data.as_pointer()] = _bones_key(data.bones)
    return tuple(out), tuple(sorted(arms.items()))


def _bones_key(bones) -> tuple:
    n = len(bones)
    ml = np.empty(n * 16, np.float32)
    length = np.empty(n, np.float32)
    inh_rot = np.empty(n, bool)
    local_loc = np.empty(n, bool)
    connect = np.empty(n, bool)
    if n:
        bones.foreach_get("matrix_local", ml)
        bones.foreach_get("length", length)
        bones.foreach_get("use_inherit_rotation", inh_rot)
        bones.foreach_get("use_local_location", local_loc)
        bones.foreach_get("use_connect", connect)
    return (tuple((b.name, b.parent.name if b.parent else None, b.inherit_scale) for b in bones),
            ml.tobytes(), length.tobytes(), inh_rot.tobytes(), local_loc.tobytes(), connect.tobytes())


def node_world_matrices(scene_asset: SceneAsset) -> np.ndarray:
    """(N,4,4) bind world matrices, bone inheritance flags included (through ScenePose); an
    invalid scene falls back to world = parent_world @ bind_local (nodes are stored parents-first)."""
    from ...core.animation.pose import ScenePose

    pose = ScenePose()
    if pose.initialize(scene_asset) and pose.update_world_matrices():
        return np.array(pose.world_matrices)
    n = scene_asset.node_count
    out = np.empty((n, 4, 4))
    for i in range(n):
        p = scene_asset.parents[i]
        out[i] = scene_asset.bind_locals[i] if p < 0 else out[p] @ scene_asset.bind_locals[i]
    return out
