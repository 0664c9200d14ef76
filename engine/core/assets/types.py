"""Immutable asset types (see the package docstring for conventions). No bpy here."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional, Sequence

import numpy as np

from .readonly import AssetError, readonly_array

if TYPE_CHECKING:
    from .clips import AnimationClipAsset

NODE_OBJECT = "OBJECT"
NODE_BONE = "BONE"


# ----------------------------------------------------------------------------------------------
# Math helpers shared by assets, animation and runtime (vectorised).
# ----------------------------------------------------------------------------------------------

def quat_to_matrix(q: np.ndarray, normalized: bool = False) -> np.ndarray:
    """(N, 4) wxyz quaternions (normalised here unless ``normalized``) -> (N, 3, 3) rotations.

    R = (w^2 - v.v) I + 2 v v^T + 2 w [v]x for a unit quaternion (w, v)."""
    q = np.asarray(q, dtype=np.float64)
    single = q.ndim == 1
    q = np.atleast_2d(q)
    if not normalized:
        n = np.linalg.norm(q, axis=1, keepdims=True)
        n[n == 0.0] = 1.0
        q = q / n
    w = q[:, 0]
    v = q[:, 1:]
    m = 2.0 * v[:, :, None] * v[:, None, :]
    d = w * w - np.einsum("ij,ij->i", v, v)
    m[:, _DIAG, _DIAG] += d[:, None]
    wv = 2.0 * w[:, None] * v
    m[:, 0, 1] -= wv[:, 2]
    m[:, 1, 0] += wv[:, 2]
    m[:, 0, 2] += wv[:, 1]
    m[:, 2, 0] -= wv[:, 1]
    m[:, 1, 2] -= wv[:, 0]
    m[:, 2, 1] += wv[:, 0]
    return m[0] if single else m


_DIAG = np.arange(3)


def compose_trs(t: np.ndarray, q: np.ndarray, s: np.ndarray, normalized: bool = False) -> np.ndarray:
    """T @ R @ S for (N,3) translations, (N,4) wxyz rotations, (N,3) scales -> (N,4,4)."""
    t = np.atleast_2d(np.asarray(t, dtype=np.float64))
    s = np.atleast_2d(np.asarray(s, dtype=np.float64))
    r = quat_to_matrix(np.atleast_2d(q), normalized)
    out = np.zeros((t.shape[0], 4, 4), dtype=np.float64)
    out[:, :3, :3] = r * s[:, None, :]
    out[:, :3, 3] = t
    out[:, 3, 3] = 1.0
    return out


# ----------------------------------------------------------------------------------------------
# Bounds
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Bounds:
    """Axis-aligned box. An empty box has minimum = +inf and maximum = -inf."""

    minimum: np.ndarray
    maximum: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "minimum", readonly_array(self.minimum, np.float64))
        object.__setattr__(self, "maximum", readonly_array(self.maximum, np.float64))

    @staticmethod
    def empty() -> "Bounds":
        return Bounds(np.full(3, np.inf), np.full(3, -np.inf))

    @staticmethod
    def from_points(points: np.ndarray) -> "Bounds":
        """The box of (V,3) points.  No float64 copy (the extremes convert exactly), and blocks of
        16 rows: numpy's axis-0 reduction over 3 columns is ~14x slower (28 ms for 1,000,000
        points)."""
        p = np.asarray(points).reshape(-1, 3)
        v = p.shape[0]
        if v == 0:
            return Bounds.empty()
        k = v - v % 16
        los, his = [], []
        if k:
            blk = p[:k].reshape(-1, 48)
            los.append(blk.min(axis=0).reshape(16, 3).min(axis=0))
            his.append(blk.max(axis=0).reshape(16, 3).max(axis=0))
        if v > k:
            los.append(p[k:].min(axis=0))
            his.append(p[k:].max(axis=0))
        return Bounds(np.minimum.reduce(los).astype(np.float64), np.maximum.reduce(his).astype(np.float64))

    @property
    def is_empty(self) -> bool:
        return bool(np.any(self.minimum > self.maximum))

    def union(self, other: "Bounds") -> "Bounds":
        return Bounds(np.minimum(self.minimum, other.minimum), np.maximum(self.maximum, other.maximum))

    def corners(self) -> np.ndarray:
        lo, hi = self.minimum, self.maximum
        return np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])

    def transformed(self, matrix: np.ndarray) -> "Bounds":
        if self.is_empty:
            return self
        m = np.asarray(matrix, dtype=np.float64)
        c = self.corners() @ m[:3, :3].T + m[:3, 3]
        return Bounds(c.min(axis=0), c.max(axis=0))

def bounds_of(lo: np.ndarray, hi: np.ndarray) -> Bounds:
    """A Bounds over read-only (3,) float64 rows, without the constructor's defensive copies
    (per-frame paths: ``lo``/``hi`` are rows of a fresh array nobody else writes)."""
    b = object.__new__(Bounds)
    object.__setattr__(b, "minimum", lo)
    object.__setattr__(b, "maximum", hi)
    return b


# ----------------------------------------------------------------------------------------------
# Scene nodes
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SceneNodeAsset:
    """One node: a renderable object, an armature object or a bone."""

    name: str                      # unique node name: object name, or "Armature/Bone"
    kind: str                      # NODE_OBJECT or NODE_BONE
    parent: int                    # parent node index, -1 for a root
    pre_matrix: np.ndarray         # (4,4) constant: local = pre_matrix @ TRS(basis)
    bind_translation: np.ndarray   # (3,)
    bind_rotation: np.ndarray      # (4,) wxyz
    bind_scale: np.ndarray         # (3,)
    object_name: str               # the Blender object (for a bone: its armature object)
    bone_name: Optional[str] = None
    mesh_index: int = -1           # index into SceneAsset.meshes, -1 when the node draws nothing
    # Blender bone inheritance (bones only; objects keep the defaults): Bone.use_inherit_rotation,
    # Bone.inherit_scale ('FULL', 'FIX_SHEAR', 'ALIGNED', 'AVERAGE', 'NONE', 'NONE_LEGACY') and
    # Bone.use_local_location.  ScenePose composes a bone's world from its parent's with these.
    inherit_rotation: bool = True
    inherit_scale: str = "FULL"
    local_location: bool = True

    def __post_init__(self):
        object.__setattr__(self, "pre_matrix", readonly_array(self.pre_matrix, np.float64))
        object.__setattr__(self, "bind_translation", readonly_array(self.bind_translation, np.float64))
        object.__setattr__(self, "bind_rotation", readonly_array(self.bind_rotation, np.float64))
        object.__setattr__(self, "bind_scale", readonly_array(self.bind_scale, np.float64))

    @property
    def bind_local(self) -> np.ndarray:
        return self.pre_matrix @ compose_trs(self.bind_translation, self.bind_rotation, self.bind_scale)[0]


# ----------------------------------------------------------------------------------------------
# Skin and morph targets
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SkinAsset:
    """Joints of one skinned primitive.

    ``joint_node_indices[j]`` maps palette slot j to a SceneAsset node (a bone).
    ``inverse_bind_matrices[j]`` takes mesh-local bind-pose positions into joint j's bind space
    (relative to the mesh node: inverse(jointWorldBind) @ meshWorldBind).
    ``joint_bounds_min/max[j]``: bounds, in mesh-local bind space, of the base vertices that joint j
    actually influences (the seed's jointLocalBounds; skinMatrix[j] maps them to the current pose).
    ``armature_node``: the node of the armature object whose Armature modifier deforms the mesh
    (-1: none, the seed's plain glTF skin).  Blender deforms in the armature's space with the
    *current* mesh and armature transforms, so the palette corrects the bind relation
    inverse(armatureWorld) @ meshWorld (``armature_relation``, taken with the inverse binds) to
    today's (see runtime/palette.py).
    ``unweighted_bounds``: mesh-local bounds of the vertices no joint influences (they stay put, as
    in Blender), or None when every vertex is weighted.
    """

    joint_node_indices: np.ndarray     # (J,) int64
    inverse_bind_matrices: np.ndarray  # (J,4,4) float64
    joint_bounds_min: np.ndarray       # (J,3) float64
    joint_bounds_max: np.ndarray       # (J,3) float64
    armature_node: int = -1            # node of the armature object driving this skin
    unweighted_bounds: Optional["Bounds"] = None   # bounds of the vertices with no joint weight
    armature_relation: Optional[np.ndarray] = None  # (4,4) inverse(armatureWorld) @ meshWorld at bind
    # B-Bones: (J,) int64, -1 for a plain joint, else the B-Bone segment matrix index (0..segments)
    # of the joint's bone that palette slot j stands for (one slot per segment matrix of a bendy
    # bone; a vertex's weight on the bone is split between two adjacent segment slots).  None: no
    # bendy bones in this skin.
    joint_segments: Optional[np.ndarray] = None
    # Preserve Volume (the Armature modifier's ``use_deform_preserve_volume``): dual quaternion
    # skinning, palette layout in engine/core/runtime/dquat.py
    preserve_volume: bool = False

    def __post_init__(self):
        object.__setattr__(self, "joint_node_indices", readonly_array(self.joint_node_indices, np.int64))
        object.__setattr__(self, "inverse_bind_matrices", readonly_array(self.inverse_bind_matrices, np.float64, (4, 4), "inverse_bind_matrices"))
        object.__setattr__(self, "joint_bounds_min", readonly_array(self.joint_bounds_min, np.float64, (3,), "joint_bounds_min"))
        object.__setattr__(self, "joint_bounds_max", readonly_array(self.joint_bounds_max, np.float64, (3,), "joint_bounds_max"))
        if self.joint_segments is not None:
            object.__setattr__(self, "joint_segments", readonly_array(self.joint_segments, np.int64))
        if self.armature_relation is not None:
            rel = np.array(self.armature_relation, np.float64).reshape(4, 4)
            rel.flags.writeable = False
            object.__setattr__(self, "armature_relation", rel)

    @property
    def joint_count(self) -> int:
        return int(self.joint_node_indices.shape[0])

    def is_valid(self, node_count: int) -> bool:
        j = self.joint_count
        return (
            j > 0
            and self.inverse_bind_matrices.shape == (j, 4, 4)
            and self.joint_bounds_min.shape == (j, 3)
            and self.joint_bounds_max.shape == (j, 3)
            and bool(np.all((self.joint_node_indices >= 0) & (self.joint_node_indices < node_count)))
            and bool(np.all(np.isfinite(self.inverse_bind_matrices)))
        )


@dataclass(frozen=True)
class PrimitiveAsset:
    """Triangles of one material slot, with vertices split only where corner attributes differ."""

    material_index: int
    material_name: str
    positions: np.ndarray                  # (V,3) float32, mesh-local
    normals: np.ndarray                    # (V,3) float32, corner normals
    indices: np.ndarray                    # (T,3) uint32
    source_vertices: np.ndarray            # (V,) int64: Blender mesh vertex of each vertex
    smooth_normals: Optional[np.ndarray] = None   # (V,3) averaged over split vertices (outline)
    tangents: Optional[np.ndarray] = None  # (V,4) float32 (xyz, sign) when a UV map exists
    uv0: Optional[np.ndarray] = None       # (V,2) float32
    joints: Optional[np.ndarray] = None    # (V,K) uint32 palette-local joint indices, K in {4, 8}
    weights: Optional[np.ndarray] = None   # (V,K) float32, normalised (all-zero rows stay zero)
    skin: Optional[SkinAsset] = None
    morph_targets: tuple = ()
    bounds: Bounds = field(default_factory=Bounds.empty)
    colors: Optional[np.ndarray] = None    # (V,4) float32 linear RGBA of the render colour attribute

    def __post_init__(self):
        s = object.__setattr__
        s(self, "positions", readonly_array(self.positions, np.float32, (3,), "positions"))
        s(self, "normals", readonly_array(self.normals, np.float32, (3,), "normals"))
        s(self, "indices", readonly_array(self.indices, np.uint32, (3,), "indices"))
        s(self, "source_vertices", readonly_array(self.source_vertices, np.int64))
        s(self, "smooth_normals", readonly_array(self.smooth_normals, np.float32, (3,), "smooth_normals"))
        s(self, "tangents", readonly_array(self.tangents, np.float32, (4,), "tangents"))
        s(self, "uv0", readonly_array(self.uv0, np.float32, (2,), "uv0"))
        s(self, "joints", readonly_array(self.joints, np.uint32))
        s(self, "weights", readonly_array(self.weights, np.float32))
        s(self, "morph_targets", tuple(self.morph_targets))
        s(self, "colors", readonly_array(self.colors, np.float32, (4,), "colors"))
        if self.colors is not None and self.colors.shape[0] != self.positions.shape[0]:
            raise AssetError(f"colors: {self.colors.shape[0]} rows for {self.positions.shape[0]} vertices")
        if self.bounds.is_empty and self.positions.shape[0]:
            s(self, "bounds", Bounds.from_points(self.positions))

    @property
    def vertex_count(self) -> int:
        return int(self.positions.shape[0])

    @property
    def influences(self) -> int:
        """0 (static), 4, 8, or K > 8 (every influence kept; drawn from per-vertex spans)."""
        return 0 if self.joints is None else int(self.joints.shape[1])

    @property
    def is_skinned(self) -> bool:
        return self.skin is not None

    @property
    def has_morphs(self) -> bool:
        return len(self.morph_targets) > 0


@dataclass(frozen=True)
class MeshAsset:
    """The drawable content of one mesh object: one primitive per used material slot."""

    name: str                       # the object's name (meshes are per object: skins and keys differ)
    mesh_name: str                  # the mesh datablock name
    primitives: tuple
    fallback_reason: Optional[str] = None   # set when the GPU path cannot reproduce Blender
    vertex_count: int = 0           # Blender mesh vertex count (source_vertices index into it)

    def __post_init__(self):
        object.__setattr__(self, "primitives", tuple(self.primitives))

    @property
    def bounds(self) -> Bounds:
        b = Bounds.empty()
        for p in self.primitives:
            b = b.union(p.bounds)
        return b


# ----------------------------------------------------------------------------------------------
# The scene
# ----------------------------------------------------------------------------------------------

class SceneAsset:
    """Node array (objects + bones), meshes and animations. Immutable after construction."""

    def __init__(self, nodes: Sequence[SceneNodeAsset], meshes: Sequence[MeshAsset] = (),
                 animations: Sequence[AnimationClipAsset] = (), name: str = ""):
        self.name = name
        self.nodes = tuple(nodes)
        self.meshes = tuple(meshes)
        self.animations = tuple(animations)
        n = len(self.nodes)
        self.parents = readonly_array([nd.parent for nd in self.nodes], np.int64).reshape(n)
        self.pre_matrices = readonly_array(np.array([nd.pre_matrix for nd in self.nodes]).reshape(n, 4, 4), np.float64)
        self.bind_translations = readonly_array(np.array([nd.bind_translation for nd in self.nodes]).reshape(n, 3), np.float64)
        self.bind_rotations = readonly_array(np.array([nd.bind_rotation for nd in self.nodes]).reshape(n, 4), np.float64)
        self.bind_scales = readonly_array(np.array([nd.bind_scale for nd in self.nodes]).reshape(n, 3), np.float64)
        self.bind_locals = readonly_array(np.einsum("nij,njk->nik", self.pre_matrices,  # pyright: ignore[reportCallIssue, reportArgumentType]  (numpy's einsum stubs reject the array union)
                                         compose_trs(self.bind_translations, self.bind_rotations, self.bind_scales))
                               if n else np.zeros((0, 4, 4)), np.float64)
        self.mesh_indices = readonly_array([nd.mesh_index for nd in self.nodes], np.int64).reshape(n)
        self.import_problems: tuple = ()   # set by the importer: clips not offered and why
        self.import_stats: dict = {}       # set by the importer: timings of the import (seconds)
        self._index = {}
        for i, nd in enumerate(self.nodes):
            self._index[(nd.object_name, nd.bone_name)] = i

    @property
    def node_count(self) -> int:
        return len(self.nodes)

    def node_index(self, object_name: str, bone_name: Optional[str] = None) -> int:
        """Index of an object's node (bone_name None) or of a bone's node; -1 when absent."""
        return self._index.get((object_name, bone_name), -1)

    def validation_error(self) -> Optional[str]:
        """None when every invariant holds, else a message naming the first problem."""
        n = self.node_count
        for i, nd in enumerate(self.nodes):
            if not (-1 <= nd.parent < n) or nd.parent == i:
                return f"node '{nd.name}': parent index {nd.parent} out of range"
            if not (-1 <= nd.mesh_index < len(self.meshes)):
                return f"node '{nd.name}': mesh index {nd.mesh_index} out of range"
        for arr, what in ((self.pre_matrices, "matrix"), (self.bind_translations, "translation"),
                          (self.bind_rotations, "rotation"), (self.bind_scales, "scale")):
            bad = ~np.isfinite(arr.reshape(n, -1)).all(axis=1) if n else np.zeros(0, bool)
            if bad.any():
                return f"node '{self.nodes[int(np.argmax(bad))].name}': non-finite bind {what}"
        cycle = find_parent_cycle(self.parents)
        if cycle is not None:
            return "parent cycle through nodes " + " -> ".join(f"'{self.nodes[i].name}'" for i in cycle)
        for mesh in self.meshes:
            for p in mesh.primitives:
                v = p.vertex_count
                if p.indices.size and int(p.indices.max()) >= v:
                    return f"mesh '{mesh.name}' material '{p.material_name}': index out of range"
                if p.normals.shape[0] != v or p.source_vertices.shape[0] != v:
                    return f"mesh '{mesh.name}' material '{p.material_name}': attribute length mismatch"
                if not np.all(np.isfinite(p.positions)):
                    return f"mesh '{mesh.name}': non-finite vertex position"
                if p.skin is not None:
                    if not p.skin.is_valid(n):
                        return f"mesh '{mesh.name}' material '{p.material_name}': invalid skin"
                    if p.joints is None or p.weights is None or p.joints.shape != p.weights.shape \
                            or p.joints.shape[0] != v:
                        return f"mesh '{mesh.name}' material '{p.material_name}': joints/weights mismatch"
                    if p.joints.size and int(p.joints.max()) >= p.skin.joint_count:
                        return f"mesh '{mesh.name}' material '{p.material_name}': joint index out of range"
                for t in p.morph_targets:
                    if t.vertex_count != v:
                        return f"mesh '{mesh.name}' shape key '{t.name}': delta count {t.vertex_count} != {v}"
                    if not t.resolved:
                        continue           # checked by the sparse constructor when its rows are made
                    if t.indices.size and (int(t.indices[0]) < 0 or int(t.indices[-1]) >= v):
                        return f"mesh '{mesh.name}' shape key '{t.name}': delta index out of range"
                    if not all(np.all(np.isfinite(a)) for a in (t.position_rows, t.normal_rows, t.tangent_rows)
                               if a is not None):
                        return f"mesh '{mesh.name}' shape key '{t.name}': non-finite delta"
        for clip in self.animations:
            if not clip.is_valid(n):
                return f"action '{clip.name}': invalid clip for this scene"
        return None

    def is_valid(self) -> bool:
        return self.validation_error() is None

    def validate(self) -> None:
        err = self.validation_error()
        if err is not None:
            raise AssetError(err)


def find_parent_cycle(parents: np.ndarray) -> Optional[list]:
    """Return the node indices of one parent cycle, or None when the parents form a forest.

    Runs once per asset (validation), so a plain walk is fine here.
    """
    parents = np.asarray(parents)
    n = parents.shape[0]
    state = np.zeros(n, dtype=np.uint8)  # 0 unvisited, 1 on the current path, 2 done
    for start in range(n):
        if state[start]:
            continue
        path = []
        i = start
        while i >= 0 and state[i] == 0:
            state[i] = 1
            path.append(i)
            p = int(parents[i])
            i = p if 0 <= p < n else -1
        if i >= 0 and state[i] == 1:
            return path[path.index(i):]
        for k in path:
            state[k] = 2
    return None
