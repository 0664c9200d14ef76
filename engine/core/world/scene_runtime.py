"""SceneRuntime: builds and drives every runtime object of one SceneAsset (no bpy/gpu).

Frame order (seed, "每帧执行顺序"):
  1. pose source: ``AnimationPlayer.update`` (preview player) or Blender's evaluated locals
     (``update_timeline``), then ``ScenePose.update_world_matrices``
  2. ``SkinningPaletteSet.update`` (skipped by pose version when unchanged)
  3. ``RuntimeMeshInstance.update`` for every morph instance (skipped by morph version)
  4. ``extract`` -> RenderItems for the passes
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np

from ..animation.morph import MorphEpoch
from ..animation.player import AnimationPlayer
from ..animation.pose import ScenePose
from ..runtime.mesh_instance import RuntimeMesh, RuntimeMeshInstance
from ..runtime.mesh_instance import target_key as _target_key
from ..runtime.palette import SkinningPaletteSet
from .clip_morphs import ClipMorphs
from .extractor import RenderExtractor
from .transform_guard import TransformGuard, skip_message


@dataclass
class RuntimeStats:
    palette_count: int = 0
    joint_matrix_count: int = 0
    palette_uploads: int = 0          # this frame
    morph_uploads: int = 0            # this frame
    morph_uploads_total: int = 0      # since initialisation (includes the initial uploads)
    shader_morph_primitives: int = 0  # primitives composing their deltas in the vertex shader
    morph_target_count: int = 0
    active_target_count: int = 0
    pose_version: int = 0
    animation_ms: float = 0.0
    skinning_ms: float = 0.0
    morph_ms: float = 0.0
    update_ms: float = 0.0
    extraction_ms: float = 0.0


class SceneRuntime:
    #: morph policy new runtimes start with (see runtime/mesh_instance.py)
    default_morph_policy = "auto"

    def __init__(self, scene, backend, after_mixer=None, after_timeline=None, zero_singular_inverse: bool = False):
        """``after_mixer(runtime, delta_time)`` / ``after_timeline(runtime, frame)``: the Blender side's pose
        steps (spring bones: engine/features/springs/driver.py, given by the session), run after the
        player's sample / Blender's matrices and before the palettes; each returns whether it
        succeeded.  None: no such step.  ``zero_singular_inverse``: the Blender being followed
        zeroes the inverse of a singular mesh matrix (4.x; engine/core/finite.object_inv)."""
        self.scene = scene
        self.backend = backend
        self.after_mixer = after_mixer
        self.after_timeline = after_timeline
        self.pose = ScenePose()
        self.player = AnimationPlayer()
        self.palette_set = SkinningPaletteSet(zero_singular_inverse)
        self.runtime_meshes: List[Optional[RuntimeMesh]] = []
        self.mesh_instances: List[Optional[RuntimeMeshInstance]] = []
        self.extractor = RenderExtractor()
        self.stats = RuntimeStats()
        self.last_error: Optional[str] = None
        self._key_names: Dict[int, List[str]] = {}
        # node -> [(primitive_index, slots into key names, target indices)]
        self._bindings: Dict[int, list] = {}
        self._all_keys_slots: set = set()
        self._clip_bindings: list = []     # [(node, MorphState, morph_mix rows, target indices)]
        self._clip_due = False             # mixed, its clip-driven keys left to push_clip_morphs
        self._last_sample_count = -1
        self._initialized = False
        self.morph_policy = type(self).default_morph_policy   # of every RuntimeMeshInstance
        self.crowd_targets: List[str] = []   # armatures the clip plays on (set_clip targets)
        self._crowd_morph = (None, {})       # (crowd_targets it was made for, node -> nodes)
        self._morph_insts: list = []         # the morph instances (mesh_instances without None)
        self._hot = None                     # instances not idle at the last full pass
        self._idle_sums = (0, 0, 0)          # upload total, shader count, active count of the idle ones
        self._morph_epoch = -1
        self.morph_epoch = MorphEpoch()     # bumped by this runtime's MorphStates (never another's)
        self.guard: Optional[TransformGuard] = None   # objects skipped for a transform that cannot be drawn
        self._morph_nodes: list = []         # the node of each of _morph_insts
        self._refused: dict = {}             # morph node -> why its shape cannot be drawn
        self.morph_mix = ClipMorphs(self)    # the one morph mixer (clip_morphs.py), made anew by initialize

    def set_morph_policy(self, policy: str) -> None:
        """"auto", "rebuild" or "shader" (see runtime/mesh_instance.py) for every morph instance."""
        from ..runtime.mesh_instance import MORPH_POLICIES

        if policy not in MORPH_POLICIES:
            raise ValueError(f"morph policy must be one of {MORPH_POLICIES}, not {policy!r}")
        self.morph_policy = policy
        for inst in self.mesh_instances:
            if inst is not None:
                inst.morph_policy = policy
        self._hot = None          # every instance looked at again next frame

    # ---------------------------------------------------------------- lifecycle
    def initialize(self) -> bool:
        self.release()
        sc = self.scene
        if not self.pose.initialize(sc):
            self.last_error = self.pose.last_error
            return False
        if not self.pose.update_world_matrices():
            self.last_error = self.pose.last_error
            return False
        if not self.palette_set.initialize(sc, self.backend):
            self.last_error = self.palette_set.last_error
            return False
        self.guard = TransformGuard(sc, self.palette_set)
        self.runtime_meshes = []
        for mesh in sc.meshes:
            rm = RuntimeMesh()
            if not rm.initialize(mesh, self.backend):
                self.last_error = f"stream creation failed for mesh '{mesh.name}'"
                self.release()
                return False
            self.runtime_meshes.append(rm)
        self.mesh_instances = [None] * sc.node_count
        shared_bounds: dict = {}      # linked duplicates' morph bounds (mesh_instance.PrimitiveInstance.prepare)
        for node in np.flatnonzero(sc.mesh_indices >= 0):
            node = int(node)
            mi = int(sc.mesh_indices[node])
            mesh = sc.meshes[mi]
            if not any(p.has_morphs for p in mesh.primitives):
                continue
            inst = RuntimeMeshInstance()
            inst.morph_policy = self.morph_policy
            if not inst.initialize(mesh, self.runtime_meshes[mi], self.backend, self.morph_epoch, shared_bounds):
                self.last_error = f"morph stream creation failed for '{sc.nodes[node].name}'"
                self.release()
                return False
            self.mesh_instances[node] = inst
            names: List[str] = []
            for p in mesh.primitives:
                for t in p.morph_targets:
                    k = _target_key(t)
                    if k not in names:
                        names.append(k)
            slot = {k: i for i, k in enumerate(names)}
            binds = []
            states = set()       # a MorphState its primitives share is set once per frame
            for pi, p in enumerate(mesh.primitives):
                if p.has_morphs:
                    st = inst.primitives[pi].morph_state
                    if id(st) in states:
                        continue
                    states.add(id(st))
                    slots = np.array([slot[_target_key(t)] for t in p.morph_targets], dtype=np.int64)
                    targets = np.arange(len(p.morph_targets), dtype=np.int64)
                    slots.flags.writeable = False
                    targets.flags.writeable = False     # MorphState.set_weights checks it once
                    binds.append((pi, slots, targets))
                    if np.array_equal(slots, np.arange(len(names))):
                        self._all_keys_slots.add(id(slots))     # kept alive by _bindings
            self._key_names[node] = names
            self._bindings[node] = binds
        self._morph_insts = [inst for inst in self.mesh_instances if inst is not None]
        self._morph_nodes = [n for n, inst in enumerate(self.mesh_instances) if inst is not None]
        self._refused = {}
        self._hot = None
        self.morph_mix = ClipMorphs(self)
        self._initialized = True
        self._refresh_static_stats()
        return True

    def release(self) -> None:
        self.palette_set.clear()
        for inst in self.mesh_instances:
            if inst is not None:
                inst.release()
        for rm in self.runtime_meshes:
            if rm is not None:
                rm.release()
        self.mesh_instances = []
        self._morph_insts = []
        self._hot = None
        self.runtime_meshes = []
        self._key_names = {}
        self._bindings = {}
        self._all_keys_slots = set()     # ids of binding slot arrays that are every key in order
        self._clip_bindings = []
        self._clip_due = False
        self._initialized = False

    def _refresh_static_stats(self) -> None:
        st = self.stats
        st.palette_count = self.palette_set.palette_count
        st.joint_matrix_count = self.palette_set.joint_matrix_count
        st.morph_target_count = sum(len(p.primitive.morph_targets) for inst in self.mesh_instances
                                    if inst is not None for p in inst.primitives if p.has_morphs)

    def last_failure(self) -> Optional[str]:
        """Why the last update failed: the first error a runtime part reports, or None."""
        for part in (self.pose, self.palette_set, self.player, self.extractor):
            err = getattr(part, "last_error", None)
            if err:
                return f"{type(part).__name__}: {err}"
        return self.last_error

    # ---------------------------------------------------------------- clips
    def set_clip(self, clip, targets=None) -> bool:
        """Select a clip (an AnimationClipAsset, an index into scene.animations, or None).

        ``targets``: play it on several armatures that share the clip's skeleton (a crowd): a
        list of armature object names (or their node indices), the clip's own armature included
        only when listed.  Each target gets the clip's basis values on its bones of the same
        names, as if the action were assigned to it; the tracks are sampled once per frame and
        written to every target in one step, and the palettes of all characters are computed
        in one batched step (SkinningPaletteSet).  Morph channels of the clip still drive their
        own nodes.  Returns False (``last_error`` names the armature or bone, no clip selected)
        when a target is missing, listed twice or has another skeleton."""
        if isinstance(clip, (int, np.integer)):
            clip = self.scene.animations[int(clip)]
        self.player.set_clip(clip)
        self._clip_bindings = []
        self._clip_due = False
        self._last_sample_count = -1
        self.crowd_targets = []
        if clip is None:
            return True
        if targets is not None:
            maps, names, err = self._crowd_maps(clip, targets)
            if err is None and not self.player.set_targets(maps, self._crowd_node_map(clip, names)):
                err = f"clip '{clip.name}': {self.player.last_error}"
            if err is not None:
                self.last_error = err
                self.player.set_clip(None)
                return False
            assert names is not None   # _crowd_maps gives the names whenever err is None
            self.crowd_targets = names
        # the keys the clip drives (a crowd: on every character), pushed from the morph mixer
        self._clip_bindings = self.morph_mix.clip_bindings(self.player.morph_keys)
        return True

    def crowd_morph_nodes(self, node: int) -> List[int]:
        """``node`` and, while a clip plays on a crowd, the node of each other character the same
        morph channel drives: its mesh of the same mesh data deformed by (or parented under) that
        character's armature, or that armature itself for a channel keyed on the armature (VRM
        expressions).  Set-up work, cached per crowd."""
        names = self.crowd_targets
        made, table = self._crowd_morph
        if made is not names:
            table = {}
            self._crowd_morph = (names, table)
        hit = table.get(int(node))
        if hit is None:
            hit = table[int(node)] = self._crowd_nodes_of(int(node), names)
        return hit

    def _crowd_nodes_of(self, node: int, names: List[str]) -> List[int]:
        sc = self.scene
        out = [node]
        if len(names) < 2:
            return out
        owner = self._owner_armature(node, names)
        if owner is None:
            return out
        nd = sc.nodes[node]
        is_arm = nd.bone_name is None and nd.object_name == owner
        mesh = sc.meshes[nd.mesh_index].mesh_name if nd.mesh_index >= 0 else None
        for name in names:
            if name == owner:
                continue
            for i, other in enumerate(sc.nodes):
                if is_arm:
                    hit = other.bone_name is None and other.object_name == name
                else:
                    hit = (mesh is not None and other.mesh_index >= 0 and sc.meshes[other.mesh_index].mesh_name == mesh
                           and self._owner_armature(i, names) == name)
                if hit:
                    out.append(i)
                    break
        return out

    def _owner_armature(self, node: int, names: List[str]) -> Optional[str]:
        """The crowd armature a node belongs to: the one whose modifier deforms its mesh, else the
        first in its parent chain (a bone's node names its armature object)."""
        sc = self.scene
        nd = sc.nodes[node]
        if nd.mesh_index >= 0:
            for prim in sc.meshes[nd.mesh_index].primitives:
                a = getattr(getattr(prim, "skin", None), "armature_node", -1)
                if a is not None and a >= 0 and sc.nodes[a].object_name in names:
                    return sc.nodes[a].object_name
        p = node
        while p >= 0:
            if sc.nodes[p].object_name in names:
                return sc.nodes[p].object_name
            p = sc.nodes[p].parent
        return None

    def _skeleton(self, armature: str) -> dict:
        """{bone name: parent bone name or None} of an armature object's bone nodes."""
        sc = self.scene
        return {nd.bone_name: (sc.nodes[nd.parent].bone_name if nd.parent >= 0 else None)
                for nd in sc.nodes if nd.object_name == armature and nd.bone_name is not None}

    def armatures_sharing_skeleton(self, armature: str) -> List[str]:
        """Names of the armature objects of the scene with the same bones (names and parents)
        as ``armature``, itself first: the crowd targets a clip of ``armature`` can play on
        (``set_clip(clip, targets=...)``).  Empty when ``armature`` has no bones."""
        own = self._skeleton(armature)
        if not own:
            return []
        names = []
        for nd in self.scene.nodes:
            obj = nd.object_name
            if nd.bone_name is None and obj not in names and (obj == armature or self._skeleton(obj) == own):
                names.append(obj)
        names.sort(key=lambda x: x != armature)
        return names

    def _crowd_node_map(self, clip, names):
        """``map_nodes(nodes)`` for AnimationPlayer.set_targets: the (M, len(nodes)) nodes of the
        same bones (the armature object for its own node) on each target armature, or None when
        one is missing.  Set-up work (once per crossfade of a crowd)."""
        sc = self.scene
        src = clip.target_object

        def map_nodes(nodes):
            index = {(nd.object_name, nd.bone_name): i for i, nd in enumerate(sc.nodes)}
            out = np.empty((len(names), len(nodes)), np.int64)
            for c, n in enumerate(np.asarray(nodes, np.int64).tolist()):
                nd = sc.nodes[n]
                if nd.object_name != src:
                    return None
                for m, name in enumerate(names):
                    hit = index.get((name, nd.bone_name))
                    if hit is None:
                        return None
                    out[m, c] = hit
            return out

        return map_nodes

    def _crowd_maps(self, clip, targets):
        """(node maps (M, C) for AnimationPlayer.set_targets, target names, error or None).
        Set-up only (loops over targets and bones once per clip selection)."""
        sc = self.scene
        src = clip.target_object
        index = {(nd.object_name, nd.bone_name): i for i, nd in enumerate(sc.nodes)}
        skeleton = self._skeleton
        names = []
        for t in targets:
            if isinstance(t, (int, np.integer)):
                if not 0 <= int(t) < sc.node_count:
                    return None, None, f"clip '{clip.name}': crowd target node {int(t)} is not in the scene"
                t = sc.nodes[int(t)].object_name
            t = str(t)
            if (t, None) not in index:
                return None, None, f"clip '{clip.name}': crowd target '{t}' is not in the scene"
            if t in names:
                return None, None, f"clip '{clip.name}': crowd target '{t}' is listed twice"
            names.append(t)
        if not names:
            return None, None, f"clip '{clip.name}': no crowd targets"
        own = skeleton(src)
        nodes = self.player.node_ids()
        maps = np.empty((len(names), nodes.shape[0]), np.intp)
        for m, name in enumerate(names):
            if name != src:
                other = skeleton(name)
                if other != own:
                    diff = sorted(set(own.items()) ^ set(other.items()), key=str)
                    bone = diff[0][0] if diff else "?"
                    return None, None, (f"clip '{clip.name}': armature '{name}' does not share the skeleton "
                                        f"of '{src}' (bone '{bone}' differs)")
            for c, n in enumerate(nodes):
                nd = sc.nodes[int(n)]
                if nd.object_name != src:
                    return None, None, (f"clip '{clip.name}' animates '{nd.name}', outside its armature "
                                        f"'{src}': it cannot be played on other armatures")
                maps[m, c] = index[(name, nd.bone_name)]
        return maps, names, None

    # ---------------------------------------------------------------- morph weights
    def morph_key_names(self, node: int) -> List[str]:
        return list(self._key_names.get(int(node), []))

    def set_node_morph_weights(self, node: int, values) -> bool:
        """Weights aligned with ``morph_key_names(node)``, pushed into every primitive's MorphState."""
        node = int(node)
        binds = self._bindings.get(node)
        if binds is None:
            return False
        vals = np.asarray(values, dtype=np.float64).reshape(-1)
        if vals.shape[0] != len(self._key_names[node]):
            return False
        finite = bool(np.isfinite(vals).all())   # else each primitive checks its own keys
        inst = self.mesh_instances[node]
        if inst is None:
            return False
        ok = True
        for pi, slots, targets in binds:
            # a primitive with every key of the mesh, in order (the common case), takes them as they are
            v = vals if id(slots) in self._all_keys_slots else vals[slots]
            ok &= inst.primitives[pi].morph_state.set_weights(targets, v, finite=finite)
        return bool(ok)

    def set_morph_weight(self, node: int, key_name: str, value: float) -> bool:
        """Set every target named ``key_name`` of the node (all primitives) to ``value``."""
        node = int(node)
        names = self._key_names.get(node)
        if names is None or key_name not in names:
            return False
        s = names.index(key_name)
        inst = self.mesh_instances[node]
        if inst is None:
            return False
        ok = True
        for pi, slots, targets in self._bindings[node]:
            hit = targets[slots == s]
            for t in hit:
                ok &= inst.primitives[pi].morph_state.set_weight(int(t), value)
        return bool(ok)

    def reset_morphs(self) -> None:
        for inst in self.mesh_instances:
            if inst is not None:
                for p in inst.primitives:
                    if p.morph_state is not None:
                        p.morph_state.reset()

    # ---------------------------------------------------------------- frames
    def update(self, delta_time: float = 0.0, after_sample=None, fills_morphs: bool = False) -> bool:
        """Preview-player frame: player -> palettes -> morph instances.  ``after_sample()``, when
        given, runs after the player sampled (and its shape-key channels were pushed) and before
        the palettes and morph streams are uploaded: weights it sets are drawn this frame.
        ``fills_morphs``: ``after_sample`` pushes the morph mixer's blend itself (the preview's
        panel fill, features/preview/morphs.py), so the clip-driven keys are not pushed here
        first with the 0 fill (a second push, and a morph-epoch bump that re-pushes every node):
        the step pushes the nodes it fills and calls ``push_clip_morphs(skip=them)`` for the
        rest; what it left unpushed is pushed after it."""
        if not self._initialized:
            return False
        t0 = time.perf_counter()
        if self.guard is not None:
            self.guard.forget_locals()
        ok = self.player.update(delta_time, self.scene, self.pose)
        mix = self.morph_mix
        if self.player.sample_count != self._last_sample_count or mix.dirty:
            self._last_sample_count = self.player.sample_count
            mix.mix(self.player)                # the player's morph sides: the frame's one blend
            self._clip_due = bool(self._clip_bindings)
            if not (fills_morphs and after_sample is not None):
                self.push_clip_morphs()
        if self.after_mixer is not None:      # spring bones: after the mixer, before the palettes
            ok = self.after_mixer(self, delta_time) and ok
        if after_sample is not None:
            after_sample()
            self.push_clip_morphs()             # (nothing left when the step pushed them)
        t1 = time.perf_counter()
        return self._finish_frame(ok, t0, t1)

    def push_clip_morphs(self, skip=()) -> None:
        """After a mix, push its blend (the 0 fill: the clip's share) into the clip-driven keys of
        every node not in ``skip`` (nodes whose every key the caller pushed from the same mixer);
        once per mix: a later call pushes nothing until the next mix."""
        if not self._clip_due:
            return
        self._clip_due = False
        vals = self.morph_mix.apply()
        for node, state, rows, targets in self._clip_bindings:
            if node not in skip:
                state.set_weights(targets, vals[rows])

    def update_timeline(self, nodes=None, local_matrices=None, morph_weights: Optional[dict] = None,
                        bbone_segments=None, frame: Optional[float] = None) -> bool:
        """Timeline frame: Blender's evaluated local matrices (and shape key values) drive the pose.

        ``morph_weights``: {node: values aligned with morph_key_names(node)}.  ``bbone_segments``:
        the frame's ``(pose, rest)`` B-Bone segment matrices (``TimelineReader.bbone_segments``),
        given to the palettes (``SkinningPaletteSet.set_bbone_segments``, runtime/bbones.py);
        None: the rest relation.  ``frame``: the scene time shown (the Scene preview's clock; None:
        the scene's current frame), handed to ``after_timeline``.
        """
        if not self._initialized:
            return False
        t0 = time.perf_counter()
        ok = True
        self.last_error = None
        guard = self.guard
        assert guard is not None                         # made by initialize()
        guard.hold_undrawable(None)                      # Blender's matrices are read: the preview's hold ends
        if nodes is not None and len(nodes):
            # a NaN / infinite matrix (one broken object) is drawn nowhere, the rest goes on
            local_matrices = guard.clean_locals(nodes, local_matrices)
            ok = self.pose.set_local_matrices(nodes, local_matrices)
        if bbone_segments is not None and not self.palette_set.set_bbone_segments(*bbone_segments):
            ok = False
            self.last_error = self.palette_set.last_error
        if self.pose.is_dirty:
            ok = self.pose.update_world_matrices() and ok
        if self.after_timeline is not None:   # spring bones without the VRM Add-on
            ok = self.after_timeline(self, frame) and ok
        if morph_weights:
            for node, vals in morph_weights.items():
                if not self.set_node_morph_weights(node, vals):
                    ok = False
                    self.last_error = self._weights_refused(node, vals)
        t1 = time.perf_counter()
        return self._finish_frame(ok, t0, t1)

    def _weights_refused(self, node: int, vals) -> str:
        """Why a node's shape-key values were refused, naming the object and the keys."""
        names = self._key_names.get(int(node), [])
        v = np.asarray(vals, dtype=np.float64).reshape(-1)
        bad = [names[i] for i in np.flatnonzero(~np.isfinite(v)) if i < len(names)] if v.size == len(names) else []
        what = ", ".join(f"'{k}'" for k in bad) if bad else "its values"
        return (f"object '{self.scene.nodes[int(node)].object_name}': shape key {what} is not finite "
                f"(NaN or infinite); the previous weights are kept")

    def _finish_frame(self, ok: bool, t0: float, t1: float) -> bool:
        world = self.pose.world_matrices
        if world is not None and self.guard is not None:
            self.guard.check(world, self.pose.version)
        ok = self.palette_set.update(self.pose) and ok
        t2 = time.perf_counter()
        uploads = 0
        # morph instances: all of them when any weight changed since the last frame (or after a
        # policy change), else only those that were not idle (settled) last time
        full = self._hot is None or self.morph_epoch.value != self._morph_epoch
        insts = self._morph_insts if full or self._hot is None else self._hot
        base = (0, 0, 0) if full else self._idle_sums
        total, shader, active = base
        idle_sums = list(base)
        hot = []
        for inst in insts:
            ok = inst.update() and ok
            uploads += inst.last_upload_count
            counts = inst.counts
            total += counts[0]
            shader += counts[1]
            active += counts[2]
            if inst.idle:
                idle_sums = [a + b for a, b in zip(idle_sums, counts)]
            else:
                hot.append(inst)
        self._hot = hot
        self._idle_sums = tuple(idle_sums)
        if uploads or self._refused or full:
            # shapes that cannot be drawn (a shape key of 1e30), per morph instance (objects)
            self._refused = {n: i.refusal for n, i in zip(self._morph_nodes, self._morph_insts) if i.refusal}
        self._morph_epoch = self.morph_epoch.value
        t3 = time.perf_counter()
        st = self.stats
        st.palette_uploads = self.palette_set.last_upload_count
        st.morph_uploads = uploads
        st.morph_uploads_total = total
        st.shader_morph_primitives = shader
        st.active_target_count = active
        st.pose_version = self.pose.version
        st.animation_ms = (t1 - t0) * 1e3
        st.skinning_ms = (t2 - t1) * 1e3
        st.morph_ms = (t3 - t2) * 1e3
        st.update_ms = (t3 - t0) * 1e3
        return bool(ok)

    def extract(self, frustum=None, strict: bool = False, shadow_casters=None):
        t0 = time.perf_counter()
        items = self.extractor.extract(self.scene, self.pose, self.palette_set, self.mesh_instances,
                                       self.runtime_meshes, frustum=frustum, strict=strict,
                                       shadow_casters=shadow_casters)
        skip = self._skipped()
        if skip:
            items = [it for it in items if it.node_index not in skip]
        self.stats.extraction_ms = (time.perf_counter() - t0) * 1e3
        return items

    def _skipped(self) -> dict:
        """{mesh node: why it is not drawn this frame}: a transform (TransformGuard) or a morphed
        shape (RuntimeMeshInstance.refusal) that cannot be drawn."""
        out = dict(self._refused) if self._refused else {}
        if self.guard is not None and self.guard.skipped:
            out.update(self.guard.skipped)
        return out

    def skip_messages(self) -> List[str]:
        """One line per object skipped this frame: its transform or its shape cannot be drawn."""
        skip = self._skipped()
        nodes = self.scene.nodes
        return [skip_message(nodes[n].object_name, r)
                for n, r in sorted(skip.items(), key=lambda kv: nodes[kv[0]].object_name)]
