"""Timeline pose source: Blender's evaluated pose, object transforms and shape-key values.

F12, Ctrl+F12, farm renders and the viewport (when not previewing) take the ScenePose local
transforms from the depsgraph, so NLA, drivers, constraints and IK are exact.  Everything is read
in bulk (``foreach_get``) and converted with batched numpy; the Python loops here run over
armatures and objects, never over joints, vertices or keys.

Morph weights = the shape-key values, except where a feature's expression step replaces some of them.
The reader's ``expressions`` hook does this; the session hands it the VRM feature's ``VrmDriver``
(``engine/features/vrm/driver.py``, docs/vrm.md). A key bound by any VRM expression takes the
expressions' result (``bind_matrix @ outputs``, from the previews at this frame) instead of its own
value. The VRM Add-on writes that value from the same previews (only in the viewport, and a frame
late or not at all in F12 animations), so counting both would double the expression. Keys no
expression binds keep their own values. Colour / UV binds stay with the hook's frame
(``material_binds``). In the preview player, the expressions the playing clip keys (its ``vrm:``
channels on the armature's node, docs/vrm.md) take the player's values instead of the stored
previews (``read_morph_weights(expression_values=...)``).

The ``expressions`` hook (None: shape-key values only) has four members:

* ``bind(scene, armature names, {mesh node: (object name, key names)})``, called when the morphs are bound;
* ``apply(weights, muted, depsgraph, expression_values) -> bool``, the last step of every
  ``read_morph_weights``: it writes the bound keys into ``weights`` (copying an array before
  writing) and returns whether they may have changed;
* ``material_binds`` (this frame's) and ``problems`` (messages for the Stats panel).
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

import numpy as np

from ...core.assets import NODE_BONE, NODE_OBJECT, SceneAsset
from ...core.finite import affine_inv, undrawable


class _ArmatureBinding:
    __slots__ = ("object_name", "nodes", "parent_pos", "count")

    def __init__(self, object_name: str, nodes: np.ndarray, parent_pos: np.ndarray):
        self.object_name = object_name
        self.nodes = nodes            # (B,) node index of each pose bone, in pose.bones order (-1: not a node)
        self.parent_pos = parent_pos  # (B,) index of the parent pose bone, -1 for a root bone
        self.count = int(nodes.shape[0])


class TimelineReader:
    """Reads the evaluated state for one SceneAsset.  Built once per asset (the bindings are
    name look-ups); ``read`` runs per frame.  ``expressions``: the expression step (see the
    module's docstring; the session gives the VRM feature's)."""

    def __init__(self, scene: SceneAsset, runtime=None, expressions=None):
        import bpy

        self.scene = scene
        self.armatures: List[_ArmatureBinding] = []
        self.object_nodes: List[Tuple[int, str]] = []
        self.morph_bindings: List[Tuple[int, str, np.ndarray]] = []   # (node, mesh object, key-block index per name)
        self.expressions = expressions   # the expression step (module docstring), or None
        self._key_reads = {}           # read_morph_weights: key name -> (values, mute, processed) last read
        self._node_weights = {}        # read_morph_weights: node -> (processed read, idx, weights, muted)
        self._last_weights = None      # read_morph_weights: (bindings, key names, reads, result, muted)
        self.weights_version = 0       # bumped when read_morph_weights' result may differ from the last
        self._key_map = None           # read_morph_weights (crowds): (bindings, sync token, object names, key names, distinct)
        self.sync_token = 0            # the owner bumps it on every depsgraph update it hears of (session.sync)
        self._undrawable = None        # (sync token, undrawable_objects result)
        parents = scene.parents
        seen_arm = set()
        for i, nd in enumerate(scene.nodes):
            if nd.kind == NODE_OBJECT:
                self.object_nodes.append((i, nd.object_name))
            elif nd.kind == NODE_BONE and nd.object_name not in seen_arm:
                seen_arm.add(nd.object_name)
        for arm_name in sorted(seen_arm):
            arm = bpy.data.objects.get(arm_name)
            if arm is None or arm.pose is None:
                continue
            names = [pb.name for pb in arm.pose.bones]
            index = {n: k for k, n in enumerate(names)}
            nodes = np.array([scene.node_index(arm_name, n) for n in names], np.int64)
            parent_pos = np.array([index[pb.parent.name] if pb.parent is not None else -1 for pb in arm.pose.bones],
                                  np.int64)
            self.armatures.append(_ArmatureBinding(arm_name, nodes, parent_pos))
        self._object_index = np.array([i for i, _ in self.object_nodes], np.int64)
        obj_pos = {name: k for k, (_, name) in enumerate(self.object_nodes)}
        # parent kind of each object node: object parent (index into object list) or a bone
        self._obj_parent_obj = np.full(len(self.object_nodes), -1, np.int64)
        self._obj_parent_bone = []   # (object position, armature binding index, pose bone position)
        arm_pos = {a.object_name: k for k, a in enumerate(self.armatures)}
        for k, (i, _name) in enumerate(self.object_nodes):
            p = int(parents[i])
            if p < 0:
                continue
            pn = scene.nodes[p]
            if pn.kind == NODE_OBJECT:
                self._obj_parent_obj[k] = obj_pos.get(pn.object_name, -1)
            else:
                a = arm_pos.get(pn.object_name)
                if a is not None:
                    bone_pos = int(np.flatnonzero(self.armatures[a].nodes == p)[0])
                    self._obj_parent_bone.append((k, a, bone_pos))
        self._runtime = runtime
        self._bbone_rest = None        # {bone node: (S+1,4,4)} rest segment matrices, read once
        self._bbone_bind = []          # (armature object name, pose bone name, bone node, segments)
        self.bbone_error = None        # why the evaluated B-Bone segments could not be read (last frame)
        self.bbone_segments = None     # (pose, rest) segments of the last read, for update_timeline
        if runtime is not None:
            self.bind_morphs(runtime)
            self.bind_bbones(runtime)

    def bind_morphs(self, runtime) -> None:
        import bpy

        self.morph_bindings = []
        for node, inst in enumerate(getattr(runtime, "mesh_instances", []) or []):
            if inst is None:
                continue
            names = runtime.morph_key_names(node)
            ob = bpy.data.objects.get(self.scene.nodes[node].object_name)
            key = getattr(getattr(ob, "data", None), "shape_keys", None)
            if key is None:
                continue
            kb_names = [kb.name for kb in key.key_blocks]
            lookup = {n: k for k, n in enumerate(kb_names)}
            idx = np.array([lookup.get(n, -1) for n in names], np.int64)
            self.morph_bindings.append((node, ob.name, idx))
        if self.expressions is not None:
            self.expressions.bind(self.scene, [a.object_name for a in self.armatures],
                                  {node: (ob_name, list(runtime.morph_key_names(node)))
                                   for node, ob_name, _ in self.morph_bindings})

    def bind_bbones(self, runtime) -> None:
        """The weighted B-Bones the palettes use (``SkinningPaletteSet.bbone_nodes``): which
        pose bone each stands for.  Only those are read per frame."""
        self._bbone_bind = []
        self._bbone_rest = None
        ps = getattr(runtime, "palette_set", None)
        if ps is None:
            return
        for node in ps.bbone_nodes:
            nd = self.scene.nodes[node]
            segs = ps.bbone_segment_indices(node)
            self._bbone_bind.append((nd.object_name, nd.bone_name, node, int(segs.max()) + 1 if segs.size else 0))

    def read_bbone_segments(self, depsgraph) -> Tuple[Dict[int, np.ndarray], Dict[int, np.ndarray]]:
        """({bone node: (S+1,4,4) evaluated segment matrices}, {bone node: rest ones}) of the
        weighted B-Bones, from Blender's evaluated pose (``PoseBone.bbone_segment_matrix``, bone
        space).  The rest ones are read once.  There is no bulk accessor for segment matrices:
        this is one call per segment of the weighted B-Bones only (a rig without B-Bones reads
        nothing)."""
        import bpy

        pose_out: Dict[int, np.ndarray] = {}
        need_rest = self._bbone_rest is None
        rest_out: Dict[int, np.ndarray] = {} if self._bbone_rest is None else self._bbone_rest
        for arm_name, bone, node, count in self._bbone_bind:
            ob = bpy.data.objects.get(arm_name)
            pb = ob.evaluated_get(depsgraph).pose.bones.get(bone) if ob is not None and ob.pose is not None else None
            if pb is None:
                raise RuntimeError(f"B-Bone '{bone}' of armature '{arm_name}' is missing from the evaluated pose")
            pose_out[node] = np.array([np.array(pb.bbone_segment_matrix(a, rest=False), np.float64)
                                       for a in range(count)])
            if need_rest:
                rest_out[node] = np.array([np.array(pb.bbone_segment_matrix(a, rest=True), np.float64)
                                           for a in range(count)])
        if need_rest:
            self._bbone_rest = rest_out
        return pose_out, rest_out

    def _object_worlds(self, depsgraph) -> np.ndarray:
        import bpy

        objects = bpy.data.objects
        return np.array([np.array(objects[name].evaluated_get(depsgraph).matrix_world) if name in objects
                         else np.eye(4) for _, name in self.object_nodes], np.float64)

    def undrawable_objects(self, depsgraph) -> Tuple[np.ndarray, np.ndarray]:
        """(object and bone nodes whose evaluated matrix is not finite, those beyond
        ``finite.DRAW_LIMIT``): the preview player, which does not read Blender's matrices each
        frame, skips what they move as the timeline does (a bone: the meshes it deforms, named
        after it).  Read again only after a depsgraph update (``sync_token``)."""
        import bpy

        hit = self._undrawable
        if hit is not None and hit[0] == self.sync_token:
            return hit[1]
        worlds = [self._object_worlds(depsgraph)] if self.object_nodes else []
        nodes = [self._object_index] if self.object_nodes else []
        for a in self.armatures:        # the bones' evaluated armature-space matrices
            ob = bpy.data.objects.get(a.object_name)
            if ob is None or ob.pose is None or len(ob.pose.bones) != a.count:
                continue
            flat = np.empty(a.count * 16, np.float32)
            ob.evaluated_get(depsgraph).pose.bones.foreach_get("matrix", flat)
            ok = a.nodes >= 0
            worlds.append(flat.reshape(a.count, 4, 4)[ok].astype(np.float64))
            nodes.append(a.nodes[ok])
        worlds = np.concatenate(worlds) if worlds else np.zeros((0, 4, 4))
        nodes = np.concatenate(nodes) if nodes else np.zeros(0, np.int64)
        bad = undrawable(worlds)
        finite = np.isfinite(worlds.reshape(-1, 16)).all(axis=1)
        out = (nodes[bad & ~finite], nodes[bad & finite])
        self._undrawable = (self.sync_token, out)
        return out

    # ------------------------------------------------------------------------------------------
    def read(self, depsgraph) -> Tuple[np.ndarray, np.ndarray, Dict[int, np.ndarray]]:
        """-> (nodes, local matrices (N,4,4), {mesh node: morph weights aligned with its key names})."""
        import bpy

        nodes_out = []
        mats_out = []
        arm_world = {}
        arm_pose = {}
        for a in self.armatures:
            ob = bpy.data.objects[a.object_name].evaluated_get(depsgraph)
            flat = np.empty(a.count * 16, np.float32)
            ob.pose.bones.foreach_get("matrix", flat)
            pose = flat.reshape(a.count, 4, 4).transpose(0, 2, 1).astype(np.float64)
            arm_pose[a.object_name] = pose
            arm_world[a.object_name] = np.array(ob.matrix_world, np.float64)
            local = pose.copy()
            child = a.parent_pos >= 0
            if child.any():
                # a parent scaled to 0 is singular: its affine pseudo-inverse (engine/core/finite.py)
                local[child] = affine_inv(pose[a.parent_pos[child]]) @ pose[child]
            ok = a.nodes >= 0
            nodes_out.append(a.nodes[ok])
            mats_out.append(local[ok])
        if self.object_nodes:
            worlds = self._object_worlds(depsgraph)
            parent_worlds = np.tile(np.eye(4), (len(self.object_nodes), 1, 1))
            has_obj = self._obj_parent_obj >= 0
            parent_worlds[has_obj] = worlds[self._obj_parent_obj[has_obj]]
            for k, a, b in self._obj_parent_bone:
                arm = self.armatures[a].object_name
                parent_worlds[k] = arm_world[arm] @ arm_pose[arm][b]
            local = affine_inv(parent_worlds) @ worlds
            nodes_out.append(self._object_index)
            mats_out.append(local)
        nodes = np.concatenate(nodes_out) if nodes_out else np.zeros(0, np.int64)
        mats = np.concatenate(mats_out) if mats_out else np.zeros((0, 4, 4))
        if self._bbone_bind:
            # B-Bones: Blender's evaluated segments, kept for the palette update that follows this
            # read (the caller passes them: SceneRuntime.update_timeline(bbone_segments=...);
            # without them the rest relation is used)
            try:
                self.bbone_segments = self.read_bbone_segments(depsgraph)
                self.bbone_error = None
            except Exception as ex:   # keep the rest relation for this frame; say why
                self.bbone_segments = None
                self.bbone_error = f"B-Bone segments could not be read: {type(ex).__name__}: {ex}"
        return nodes, mats, self.read_morph_weights(depsgraph)

    def read_morph_weights(self, depsgraph=None, expression_values=None) -> Dict[int, np.ndarray]:
        """{mesh node: weights aligned with its key names}: shape-key values (the evaluated ones
        with a depsgraph, the file's current ones without: preview player), VRM-bound keys
        replaced by the expressions' result at this frame.

        ``expression_values``: ``(keys, values)``, morph channels as (node, name) pairs and their
        values: an array (the Scene preview's NLA result), or ``values(chans, original)`` giving
        the channels ``chans`` filled by the ``original`` previews where the clips leave them (the
        runtime's morph mixer: ``ClipMorphs.expression_values``).  Channels that carry a VRM
        expression preview (an armature node, ``vrm.rules.CHANNEL_PREFIX`` names) replace
        those expressions' stored / scene-frame previews, so a playing clip's face follows the
        clip's time (and its crossfade); the expressions the clip does not key keep their values.
        Shape-key channels are not used here (the caller merges them)."""
        import bpy

        reads = self._key_reads
        nodes = self._node_weights
        bindings = self.morph_bindings
        objects = bpy.data.objects
        names = keys = None
        crowd = len(bindings) > 4
        if crowd and depsgraph is None:
            # crowds, preview player (the file's values): the objects' key names are kept while no
            # depsgraph update reached the session (``sync_token``) and no object was added,
            # removed or renamed; the keys are then looked up by name (a few).  Else one pass
            # over the objects instead of a name search per binding (~2 us a look-up; the first
            # object of a name wins, as with ``get``)
            obnames = objects.keys()
            kmap = self._key_map
            if kmap is not None and kmap[0] is bindings and kmap[1] == self.sync_token and kmap[2] == obnames:
                names = kmap[3]
                found: Dict[Any, Any] = {n: bpy.data.shape_keys.get(n) for n in kmap[4]}   # (a None name finds None)
                if all(k is not None for k in found.values()):
                    keys = [found.get(n) for n in names]
                else:
                    names = None
        if crowd and names is None:
            objects = dict(reversed(objects.items()))
        if names is None:
            keys = [getattr(ob, "data", None) for ob in [objects.get(b[1]) for b in bindings]]
            keys = [me.shape_keys if me is not None else None for me in keys]
            # a datablock's identity: its name and library (a linked character's "Key" is not
            # the local "Key"); bpy collections look the pair up directly
            names = [(k.name, k.library.filepath if k.library is not None else None) if k is not None else None
                     for k in keys]
            if crowd and depsgraph is None:
                self._key_map = (bindings, self.sync_token, obnames, names,
                                 [n for n in dict.fromkeys(names) if n is not None])
        # values read unchanged since the last call keep their last result (the same arrays, so
        # the per-node weights below and the caller's change checks are identity checks); the
        # returned arrays are shared between calls: callers copy before writing (VRM: below)
        blocks = {}     # shape-key datablock -> (values, mute): linked duplicates share one, read once
        assert keys is not None         # (read with names above)
        for name, key in zip(names, keys):
            if name is None or key is None or name in blocks:     # (a name comes with its key)
                continue
            if depsgraph is not None:
                key = key.evaluated_get(depsgraph)
            n = len(key.key_blocks)
            vals = np.empty(n, np.float32)
            mute = np.zeros(n, bool)
            key.key_blocks.foreach_get("value", vals)
            key.key_blocks.foreach_get("mute", mute)
            last = reads.get(name)
            if last is not None and np.array_equal(last[0], vals) and np.array_equal(last[1], mute):
                hit = last[2]
            else:
                hit = (np.where(mute, 0.0, vals), mute)
                reads[name] = (vals, mute, hit)
            blocks[name] = hit
        whole = self._last_weights
        if (whole is not None and whole[0] is bindings and whole[1] == names and whole[2].keys() == blocks.keys()
                and all(whole[2][k] is v for k, v in blocks.items())):
            out, muted = dict(whole[3]), whole[4]       # every read unchanged: the last result
        else:
            out = {}
            muted = {}
            for (node, _ob_name, idx), name in zip(bindings, names):
                if name is None:
                    continue
                hit = blocks[name]
                last = nodes.get(node)
                if last is not None and last[0] is hit and last[1] is idx:
                    out[node], muted[node] = last[2], last[3]
                    continue
                vals, mute = hit
                n = vals.shape[0]
                safe = np.minimum(np.maximum(idx, 0), max(n - 1, 0))
                w = np.where(idx >= 0, vals[safe], 0.0) if n else np.zeros(idx.shape[0])
                out[node] = w = w.astype(np.float64)
                muted[node] = m = (idx >= 0) & mute[safe] if n else np.zeros(idx.shape[0], bool)
                w.flags.writeable = False
                m.flags.writeable = False
                nodes[node] = (hit, idx, w, m)
            self._last_weights = (bindings, names, blocks, dict(out), muted)
            self.weights_version += 1
        if self.expressions is not None and self.expressions.apply(out, muted, depsgraph, expression_values):
            self.weights_version += 1            # the expressions may move every frame
        return out
