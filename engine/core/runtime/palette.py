"""Skinning palettes (seed: SkinningPalette, SkinningPaletteGroup, SkinningPaletteSet). No bpy/gpu.

skinMatrix[j] = inverse(meshWorld) @ jointWorld[j] @ inverseBind[j], batched over joints, with the
dynamic local bounds = union_j skinMatrix[j] * jointBounds[j] (each joint box transformed exactly as
centre and |R| * half extents, vectorised).
Palettes only read ``ScenePose.world_matrices``, so they work the same whether the local
transforms came from the AnimationPlayer or from Blender's evaluated pose (timeline mode).
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from ..assets.types import Bounds, SkinAsset
from ..finite import affine_solve, object_inv
from . import dquat as _dquat
from .bbones import BBoneInputs
from .palette_batch import PaletteBatch

# bytes of one mat4; the seed checks jointCount * sizeof(mat4) for overflow
MATRIX_BYTES = 64
_MAX_BUFFER_BYTES = (1 << 63) - 1

_NO_MATRICES = np.zeros((0, 4, 4), dtype=np.float32)
_NO_MATRICES.flags.writeable = False
_EMPTY_BOUNDS = Bounds.empty()


class SkinningPalette:
    """One skin's palette: the last computed (and uploaded) matrices, their local bounds and the
    upload flag.  While a batched update (``PaletteBatch``) computes it, those are read from
    the batch's arrays (``_view``: (batch, slot)), so a frame makes no per-palette Python step;
    any other write takes the palette's own copies back first (``_detach``)."""

    def __init__(self):
        self._view: Optional[tuple] = None   # (batch, slot) while a PaletteBatch holds the results
        self._matrices = np.zeros((0, 4, 4), dtype=np.float32)
        self._bounds = Bounds.empty()
        self._uploaded = False
        self.gpu_buffer = None
        self.joint_capacity = 0
        self._max_linear_scale = 0.0  # upper bound of ||skinMatrix[j][:3,:3]||_2 over joints
        self._backend = None
        self.zero_singular = False    # Blender 4.x's inverse of a singular mesh matrix (finite.object_inv)

    def _detach(self) -> None:
        """Stop reading the batch: its current results become the palette's own values."""
        v = self._view
        if v is not None:
            self._view = None
            b, k = v
            b.attached = False            # the batch re-attaches its palettes on its next update
            self._matrices = b.slot_matrices(k)
            self._bounds = b.slot_bounds(k)
            self._uploaded = b.slot_uploaded(k)
            self._max_linear_scale = b.linear_scale(k)

    @property
    def matrices(self) -> np.ndarray:
        """(J,4,4) float32 skin matrices of the last update (read-only after a batched one)."""
        v = self._view
        return self._matrices if v is None else v[0].slot_matrices(v[1])

    @matrices.setter
    def matrices(self, value) -> None:
        self._detach()
        self._matrices = value

    @property
    def current_local_bounds(self) -> Bounds:
        v = self._view
        return self._bounds if v is None else v[0].slot_bounds(v[1])

    @current_local_bounds.setter
    def current_local_bounds(self, value: Bounds) -> None:
        self._detach()
        self._bounds = value

    @property
    def uploaded(self) -> bool:
        v = self._view
        return self._uploaded if v is None else v[0].slot_uploaded(v[1])

    @uploaded.setter
    def uploaded(self, value: bool) -> None:
        self._detach()
        self._uploaded = bool(value)

    @property
    def max_linear_scale(self) -> float:
        """Upper bound of the spectral norm of every joint's skin matrix (3x3 part), for the
        morph reach in bounds.  After a batched update it is computed on first read (only
        morphed primitives need it), for every group of the batch at once."""
        v = self._view
        return self._max_linear_scale if v is None else v[0].linear_scale(v[1])

    @max_linear_scale.setter
    def max_linear_scale(self, value: float) -> None:
        self._detach()
        self._max_linear_scale = float(value)

    # ---------------------------------------------------------------- lifecycle
    def initialize(self, backend, joint_count: int) -> bool:
        j = int(joint_count)
        if j <= 0 or j * MATRIX_BYTES > _MAX_BUFFER_BYTES:
            return False
        if self.gpu_buffer is not None and self.joint_capacity == j and self._backend is backend:
            self.clear()
            return True
        self.release()
        try:
            buf = backend.create_palette_buffer(j)
        except Exception:
            buf = None
        if buf is None:
            return False
        self._backend = backend
        self.gpu_buffer = buf
        self.joint_capacity = j
        self.clear()
        return True

    def clear(self) -> None:
        """Drop CPU results, bounds and the uploaded flag; keeps the GPU buffer."""
        self.matrices = _NO_MATRICES
        self.current_local_bounds = _EMPTY_BOUNDS
        self.max_linear_scale = 0.0
        self.uploaded = False

    def release(self) -> None:
        if self.gpu_buffer is not None and self._backend is not None:
            self._backend.release_palette(self.gpu_buffer)
        self.gpu_buffer = None
        self.joint_capacity = 0
        self.clear()

    def is_gpu_ready(self) -> bool:
        return (self.gpu_buffer is not None and self._backend is not None
                and bool(self._backend.is_palette_valid(self.gpu_buffer))
                and self.joint_capacity > 0 and self.uploaded)

    # ---------------------------------------------------------------- frame
    def update(self, mesh_world: np.ndarray, joint_worlds: np.ndarray, inverse_binds: np.ndarray,
               box_center: Optional[np.ndarray] = None, box_half: Optional[np.ndarray] = None,
               box_joints: Optional[np.ndarray] = None, still_bounds: Optional[Bounds] = None) -> bool:
        """Compute and upload the palette.

        ``joint_worlds`` (J,4,4) world matrices of the joints in palette order, ``inverse_binds``
        (J,4,4); ``box_center``/``box_half`` (K,3) the non-empty joint bounds as centre and half
        extents and ``box_joints`` (K,) the palette slots they belong to (None: no bounds);
        ``still_bounds``: the mesh-local bounds of vertices no joint moves (unioned as they are).
        """
        self.clear()
        j = joint_worlds.shape[0]
        if j != self.joint_capacity or inverse_binds.shape[0] != j:
            return False
        mesh_inv = object_inv(mesh_world, self.zero_singular)   # a mesh scaled to 0: as in Blender
        skin = np.matmul(mesh_inv, np.matmul(joint_worlds, inverse_binds))   # (J,4,4) float64
        if box_center is not None and box_center.shape[0]:
            if box_half is None:
                raise ValueError("SkinningPalette.update: box_center without box_half")
            m = skin[box_joints]
            r = m[:, :3, :3]
            c = np.matmul(r, box_center[:, :, None])[:, :, 0] + m[:, :3, 3]
            h = np.matmul(np.abs(r), box_half[:, :, None])[:, :, 0]   # exact AABB of the moved box
            self.current_local_bounds = Bounds((c - h).min(axis=0), (c + h).max(axis=0))
        lin = skin[:, :3, :3]
        gram = np.matmul(np.transpose(lin, (0, 2, 1)), lin)
        # spectral norm^2 <= max absolute row sum of the Gram matrix (exact for similarities)
        self.max_linear_scale = float(np.sqrt(np.abs(gram).sum(axis=2).max())) if j else 0.0
        if still_bounds is not None:
            # vertices without weights stay where they are (identity): bounds and morph reach
            self.current_local_bounds = self.current_local_bounds.union(still_bounds)
            self.max_linear_scale = max(self.max_linear_scale, 1.0)
        self.matrices = np.ascontiguousarray(skin, dtype=np.float32)
        return self.upload()

    def upload(self) -> bool:
        ok = self._push()
        self.uploaded = ok
        return ok

    def _push(self) -> bool:
        """Hand the matrices to the backend; True on success (the flag is the caller's)."""
        if self.gpu_buffer is None or self._backend is None:
            return False
        if self.matrices.shape[0] != self.joint_capacity:
            return False
        try:
            return bool(self._backend.upload_palette(self.gpu_buffer, self.matrices))
        except Exception:
            return False


def _segments(skin) -> Optional[np.ndarray]:
    seg = getattr(skin, "joint_segments", None)
    return None if seg is None or not (np.asarray(seg) >= 0).any() else np.asarray(seg, np.int64)


def skin_definitions_equal(a: SkinAsset, b: SkinAsset) -> bool:
    """Exact joint-index sequence, B-Bone segment slots and element-wise inverse-bind equality
    (no epsilon)."""
    sa, sb = _segments(a), _segments(b)
    return (bool(getattr(a, "preserve_volume", False)) == bool(getattr(b, "preserve_volume", False))
            and (sa is None) == (sb is None)
            and (sa is None or sb is None or (sa.shape == sb.shape and bool(np.array_equal(sa, sb))))
            and a.joint_node_indices.shape == b.joint_node_indices.shape
            and bool(np.array_equal(a.joint_node_indices, b.joint_node_indices))
            and a.inverse_bind_matrices.shape == b.inverse_bind_matrices.shape
            and bool(np.array_equal(a.inverse_bind_matrices, b.inverse_bind_matrices)))


def merge_joint_bounds(a: SkinAsset, b: SkinAsset) -> SkinAsset:
    """The same skin with per-joint bounds = union(a[j], b[j])."""
    ua, ub = a.unweighted_bounds, b.unweighted_bounds
    still = ua if ub is None else (ub if ua is None else ua.union(ub))
    return SkinAsset(a.joint_node_indices, a.inverse_bind_matrices,
                     np.minimum(a.joint_bounds_min, b.joint_bounds_min),
                     np.maximum(a.joint_bounds_max, b.joint_bounds_max),
                     armature_node=a.armature_node, unweighted_bounds=still,
                     armature_relation=a.armature_relation, joint_segments=a.joint_segments,
                     preserve_volume=a.preserve_volume)


class SkinningPaletteGroup:
    """Primitives of one mesh node sharing one skin definition, and their single palette.

    Blender's Armature modifier deforms in the armature object's space using the *current* mesh
    and armature transforms.  When the skin names its armature node, the inverse binds are
    corrected every update by ``inverse(rel_bind) @ rel_now`` with ``rel = inverse(armatureWorld)
    @ meshWorld``: moving an armature that is not the mesh's parent leaves the mesh in place, as
    in Blender (identity while the relation is the bind relation)."""

    def __init__(self, mesh_node_index: int, skin: SkinAsset, bind_worlds: Optional[np.ndarray] = None):
        self.mesh_node_index = int(mesh_node_index)
        self.skin = skin
        self.palette = SkinningPalette()
        self.members: List[tuple] = []   # (node_index, primitive_index)
        self.armature_node = int(getattr(skin, "armature_node", -1))
        self.dq = bool(getattr(skin, "preserve_volume", False))   # Preserve Volume: engine/core/runtime/dquat.py
        self.rel_bind_inv = None
        rel = getattr(skin, "armature_relation", None)
        if self.armature_node >= 0 and rel is None and bind_worlds is not None:
            rel = np.linalg.inv(bind_worlds[self.armature_node]) @ bind_worlds[self.mesh_node_index]
        if self.armature_node >= 0 and rel is not None:
            self.rel_bind_inv = np.linalg.inv(rel)
        self._prepare()

    def merge(self, skin: SkinAsset) -> None:
        self.skin = merge_joint_bounds(self.skin, skin)
        self._prepare()

    def _prepare(self) -> None:
        sk = self.skin
        lo, hi = sk.joint_bounds_min, sk.joint_bounds_max
        nonempty = np.flatnonzero(np.all(lo <= hi, axis=1) & np.all(np.isfinite(lo), axis=1)
                                  & np.all(np.isfinite(hi), axis=1))
        self.joint_nodes = np.asarray(sk.joint_node_indices, dtype=np.int64)
        self.inverse_binds = np.asarray(sk.inverse_bind_matrices, dtype=np.float64)
        self.box_center = 0.5 * (lo[nonempty] + hi[nonempty])
        self.box_half = 0.5 * (hi[nonempty] - lo[nonempty])
        self.box_joints = nonempty
        ub = getattr(sk, "unweighted_bounds", None)
        self.still_bounds = ub if ub is not None and not ub.is_empty else None
        seg = _segments(sk)
        self.seg_slots = np.flatnonzero(seg >= 0) if seg is not None else np.zeros(0, np.int64)
        self.seg_keys = (np.stack([self.joint_nodes[self.seg_slots], seg[self.seg_slots]], axis=1)
                         if seg is not None else np.zeros((0, 2), np.int64))
        self.seg_rows = np.zeros(0, np.int64)   # set by SkinningPaletteSet.initialize

    def update(self, world_matrices: np.ndarray, segment_table: Optional[np.ndarray] = None) -> bool:
        """``segment_table``: (R,4,4) B-Bone segment deform relations of the palette set (rows
        ``seg_rows`` belong to this group's segment slots ``seg_slots``); None: the rest relation
        (identity: each segment slot moves rigidly with its bone)."""
        ibm = self.inverse_binds
        if self.rel_bind_inv is not None:
            rel_now = affine_solve(world_matrices[self.armature_node], world_matrices[self.mesh_node_index])
            ibm = np.matmul(ibm, self.rel_bind_inv @ rel_now)
        joints = world_matrices[self.joint_nodes]
        if segment_table is not None and self.seg_slots.size:
            # jointWorld @ bbone_pose[a] @ inverse(bbone_rest[a]) (Blender's b_bone_mats[a + 1]
            # = chan_mat @ arm_mat @ b_bone[a] @ inv(b_bone_rest[a]) @ inv(arm_mat))
            joints[self.seg_slots] = np.matmul(joints[self.seg_slots], segment_table[self.seg_rows])
        if self.dq:
            return _dquat.update_group(self, world_matrices, joints, ibm)
        return self.palette.update(world_matrices[self.mesh_node_index], joints,
                                   ibm, self.box_center, self.box_half, self.box_joints, self.still_bounds)


def _bind_worlds(scene) -> np.ndarray:
    """(N,4,4) bind world matrices (once per initialisation; any node order, no cycles: the
    scene was validated)."""
    n = scene.node_count
    out = np.empty((n, 4, 4))
    done = np.zeros(n, bool)
    parents = scene.parents
    for i in range(n):
        chain = []
        k = i
        while k >= 0 and not done[k]:
            chain.append(k)
            k = int(parents[k])
        for k in reversed(chain):
            p = int(parents[k])
            out[k] = scene.bind_locals[k] if p < 0 else out[p] @ scene.bind_locals[k]
            done[k] = True
    return out


class SkinningPaletteSet(BBoneInputs):
    """Every palette group of a scene: the linear-blend ones computed in one batched step
    (palette_batch.PaletteBatch), Preserve Volume ones group by group (dquat.py).  The pose
    source's other per-frame inputs (B-Bone segments, a bake's joints) come through the
    ``BBoneInputs`` API (bbones.py)."""

    def __init__(self, zero_singular_inverse: bool = False):
        self._init_bbone_inputs()
        self.zero_singular_inverse = zero_singular_inverse   # Blender 4.x's rule (finite.object_inv)
        self.palette_lookup: List[List[Optional[SkinningPalette]]] = []
        self.palette_groups: List[SkinningPaletteGroup] = []
        self.palette_count = 0
        self.joint_matrix_count = 0
        self.last_upload_count = 0
        self.last_pose_version = 0
        self.last_error: Optional[str] = None
        self._scene = None
        self._batch: Optional[PaletteBatch] = None
        self._dq_groups: List[SkinningPaletteGroup] = []

    # ---------------------------------------------------------------- lifecycle
    def initialize(self, scene, backend) -> bool:
        """Deep checks (scene.validation_error) and grouping; creates one buffer per group."""
        self.clear()
        err = scene.validation_error()
        if err is not None:
            self.last_error = err
            return False
        n = scene.node_count
        bind_worlds = _bind_worlds(scene)
        lookup: List[List[Optional[SkinningPalette]]] = [[] for _ in range(n)]
        groups: List[SkinningPaletteGroup] = []
        member_groups = []   # parallel: (node, prim, group)
        for node in range(n):
            mi = int(scene.mesh_indices[node])
            if mi < 0:
                continue
            mesh = scene.meshes[mi]
            node_groups: List[SkinningPaletteGroup] = []
            lookup[node] = [None] * len(mesh.primitives)
            for pi, prim in enumerate(mesh.primitives):
                if prim.skin is None:
                    continue
                g = next((g for g in node_groups if skin_definitions_equal(g.skin, prim.skin)), None)
                if g is None:
                    g = SkinningPaletteGroup(node, prim.skin, bind_worlds)
                    node_groups.append(g)
                    groups.append(g)
                else:
                    g.merge(prim.skin)
                g.members.append((node, pi))
                member_groups.append((node, pi, g))
        for g in groups:
            rows = _dquat.palette_rows(g.skin.joint_count) if g.dq else g.skin.joint_count
            g.palette.zero_singular = self.zero_singular_inverse
            if not g.palette.initialize(backend, rows):
                self.last_error = f"palette buffer creation failed for node '{scene.nodes[g.mesh_node_index].name}'"
                for h in groups:
                    h.palette.release()
                return False
        for node, pi, g in member_groups:
            lookup[node][pi] = g.palette
        self._init_segments(groups)
        self.palette_lookup = lookup
        self.palette_groups = groups
        self._dq_groups = [g for g in groups if g.dq]            # Preserve Volume: per group
        linear = [g for g in groups if not g.dq]
        self._batch = PaletteBatch(linear, self.zero_singular_inverse) if linear else None
        self.palette_count = len(groups)
        self.joint_matrix_count = int(sum(g.skin.joint_count for g in groups))
        self._scene = scene
        return True

    def clear(self) -> None:
        for g in self.palette_groups:
            g.palette.release()
        self.palette_lookup = []
        self.palette_groups = []
        self.palette_count = 0
        self.joint_matrix_count = 0
        self.last_upload_count = 0
        self.last_pose_version = 0
        self._scene = None
        self._batch = None
        self._dq_groups = []
        self._applied_seg = None       # the segment table the palettes were last computed with

    release = clear

    def texel_rows(self):
        """Every palette of the last batched update in one float32 array and where each starts:
        ``(rows (T*16,), {id(palette): first row})``, row j holding the 4 columns of a skin
        matrix (the layout of a palette texture, ``gpu/palette_textures.py: matrix_rows``).  For a pass that
        draws many palettes from one texture (grouped draws) without concatenating them again.
        None before the first update or after a per-group (fallback) update."""
        b = self._batch
        if b is None or b.texels is None or self._dq_groups or any(g.palette.matrices.base is not b.texels for g in b.groups):
            return None
        return b.texels.reshape(-1), {id(g.palette): int(o) for g, o in zip(b.groups, b.offsets)}

    # ---------------------------------------------------------------- queries
    def find(self, node_index: int, primitive_index: int) -> Optional[SkinningPalette]:
        if not (0 <= node_index < len(self.palette_lookup)):
            return None
        row = self.palette_lookup[node_index]
        if not (0 <= primitive_index < len(row)):
            return None
        return row[primitive_index]

    def group_of(self, palette: SkinningPalette) -> Optional[SkinningPaletteGroup]:
        return next((g for g in self.palette_groups if g.palette is palette), None)

    # ---------------------------------------------------------------- frame
    def update(self, pose) -> bool:
        """Recompute and upload every group when the pose version changed."""
        self.last_upload_count = 0
        if self._scene is None or not pose.is_for_scene(self._scene):
            self.last_error = "pose does not belong to the palette set's scene"
            return False
        if pose.node_count != len(self.palette_lookup):
            self.last_error = "pose node count does not match the palette lookup"
            return False
        version = pose.version
        if version != 0 and version == self.last_pose_version:
            return True
        world = pose.world_matrices
        if world is None:
            self.last_error = "pose world matrices are dirty"
            return False
        ok = True
        baked = self._baked_joints if self.segment_fresh else None
        self._baked_joints = None
        seg = None
        if self.segment_fresh and self.segment_table.shape[0]:
            seg = self.segment_table
        self.segment_fresh = False
        done = self._batch.update(world, seg, baked) if self._batch is not None else None
        if baked is not None and done is not None:
            self.baked_updates += 1
        if done is not None:
            self.last_upload_count += sum(done)
            ok = all(done)
            for g in self._dq_groups:
                if g.update(world, seg):
                    self.last_upload_count += 1
                else:
                    ok = False
        else:
            # a singular mesh world or armature relation: group by group (those groups fail)
            for g in self.palette_groups:
                if g.update(world, seg):
                    self.last_upload_count += 1
                else:
                    ok = False
        if ok:
            self.last_pose_version = version
            self._applied_seg = seg
        return ok
