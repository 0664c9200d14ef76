"""RuntimeMesh (shared immutable streams) and RuntimeMeshInstance (per-instance morphs). No bpy/gpu.

Seed: RuntimeMeshInstance. Only primitives with morph targets get a MorphState and a dynamic
stream; when ``morph_state.version != applied_morph_version`` the stream is rebuilt *from the
base* over the active, non-muted targets (never incrementally) and uploaded as a brand-new stream
(a drawn GPUVertBuf cannot be refilled).
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from ..animation.morph import MorphState
from ..assets.types import Bounds

#: Normals/tangents shorter than this after morphing fall back to the base direction.
DEGENERATE_LENGTH = 1e-8
#: Targets touching at most this fraction of the vertices are stored sparsely.
SPARSE_FRACTION = 0.5


class RuntimeMesh:
    """One backend stream per primitive of a MeshAsset, created once (shared by all instances)."""

    def __init__(self):
        self.mesh_asset = None
        self.streams: list = []
        self._backend = None

    def initialize(self, mesh_asset, backend) -> bool:
        self.release()
        streams = []
        for prim in mesh_asset.primitives:
            try:
                s = backend.create_stream(prim)
            except Exception:
                s = None
            if s is None:
                for t in streams:
                    backend.release_stream(t)
                return False
            streams.append(s)
        self.mesh_asset = mesh_asset
        self.streams = streams
        self._backend = backend
        return True

    @property
    def primitive_count(self) -> int:
        return len(self.streams)

    def stream(self, primitive_index: int):
        if 0 <= primitive_index < len(self.streams):
            return self.streams[primitive_index]
        return None

    def release(self) -> None:
        if self._backend is not None:
            for s in self.streams:
                self._backend.release_stream(s)
        self.streams = []
        self.mesh_asset = None
        self._backend = None


class _TargetData:
    """Deltas of one target, dense (idx None) or sparse (rows idx)."""

    __slots__ = ("idx", "pos", "nrm", "tan")

    def __init__(self, target, vertex_count: int):
        p = target.position_deltas
        n = target.normal_deltas
        t = target.tangent_deltas
        touched = np.any(p != 0.0, axis=1)
        if n is not None:
            touched |= np.any(n != 0.0, axis=1)
        if t is not None:
            touched |= np.any(t != 0.0, axis=1)
        nnz = int(np.count_nonzero(touched))
        if nnz <= SPARSE_FRACTION * vertex_count:
            idx = np.flatnonzero(touched)
            # flat element indices: 1-D fancy indexing is several times faster than row indexing
            self.idx = (idx[:, None] * 3 + np.arange(3)).reshape(-1)
            self.pos = np.ascontiguousarray(p[idx]).reshape(-1)
            self.nrm = None if n is None else np.ascontiguousarray(n[idx]).reshape(-1)
            self.tan = None if t is None else np.ascontiguousarray(t[idx]).reshape(-1)
        else:
            self.idx = None
            self.pos, self.nrm, self.tan = p, n, t


def _accumulate(acc: Optional[np.ndarray], scratch: np.ndarray, delta: np.ndarray, idx, w: np.float32,
                v: int) -> np.ndarray:
    """acc += w * delta (dense or sparse rows); the first dense target writes acc directly."""
    if acc is None:
        if idx is None:
            return np.multiply(delta, w, out=np.empty((v, 3), dtype=np.float32))
        acc = np.zeros((v, 3), dtype=np.float32)
    if idx is None:
        np.multiply(delta, w, out=scratch)
        np.add(acc, scratch, out=acc)
    else:
        flat = acc.reshape(-1)
        flat[idx] += delta * w
    return acc


def _row_norms_sq(a: np.ndarray) -> np.ndarray:
    """Squared length of each (V,3) row (column-wise: much faster than an axis=1 reduction)."""
    x, y, z = a[:, 0], a[:, 1], a[:, 2]
    r = x * x
    r += y * y
    r += z * z
    return r


def _bounds(a: np.ndarray) -> Bounds:
    """Bounds of (V,3) points; blocks of 16 rows avoid numpy's slow axis-0 reduction over 3 columns."""
    v = a.shape[0]
    if v == 0:
        return Bounds.empty()
    k = v - v % 16
    los, his = [], []
    if k:
        blk = a[:k].reshape(-1, 48)
        los.append(blk.min(axis=0).reshape(16, 3).min(axis=0))
        his.append(blk.max(axis=0).reshape(16, 3).max(axis=0))
    if v > k:
        los.append(a[k:].min(axis=0))
        his.append(a[k:].max(axis=0))
    return Bounds(np.minimum.reduce(los), np.maximum.reduce(his))


def _renormalize(base: np.ndarray, summed: np.ndarray) -> np.ndarray:
    """normalize(summed) with the base direction where the result degenerates."""
    length = np.sqrt(_row_norms_sq(summed))
    bad = length < DEGENERATE_LENGTH
    length[bad] = 1.0
    np.multiply(summed, (1.0 / length).astype(summed.dtype)[:, None], out=summed)
    if bad.any():
        summed[bad] = base[bad]
    return summed


class PrimitiveInstance:
    """Per-primitive instance state (seed: PrimitiveInstance)."""

    def __init__(self, primitive):
        self.primitive = primitive
        self.morph_state: Optional[MorphState] = None
        self.stream = None
        self.local_bounds: Bounds = primitive.bounds
        self.maximum_position_delta = 0.0
        self.applied_morph_version = 0
        self.muted = np.zeros(0, dtype=bool)
        self._targets: List[_TargetData] = []

    @property
    def has_morphs(self) -> bool:
        return self.morph_state is not None

    def prepare(self) -> None:
        prim = self.primitive
        v = prim.vertex_count
        self.morph_state = MorphState(prim.morph_targets)
        self.muted = np.array([bool(t.mute) for t in prim.morph_targets], dtype=bool)
        self._targets = [_TargetData(t, v) for t in prim.morph_targets]

    def rebuild(self):
        """Morph from the base over active, non-muted targets. Returns (pos, nrm, tan, bounds, maxdelta)."""
        prim = self.primitive
        state = self.morph_state
        active = state.active_indices()
        if active.size:
            active = active[~self.muted[active]]
        if active.size == 0:
            return None, None, None, prim.bounds, 0.0
        weights = state.weights
        v = prim.vertex_count
        scratch = np.empty((v, 3), dtype=np.float32)
        acc = acc_n = acc_t = None
        for i in active:                       # loop over active targets only
            td = self._targets[int(i)]
            w = np.float32(weights[i])
            acc = _accumulate(acc, scratch, td.pos, td.idx, w, v)
            if td.nrm is not None:
                acc_n = _accumulate(acc_n, scratch, td.nrm, td.idx, w, v)
            if td.tan is not None and prim.tangents is not None:
                acc_t = _accumulate(acc_t, scratch, td.tan, td.idx, w, v)
        positions = prim.positions + acc
        max_delta = float(np.sqrt(_row_norms_sq(acc).max())) if v else 0.0
        bounds = _bounds(positions)
        normals = None
        if acc_n is not None:
            base_n = prim.normals
            acc_n += base_n
            normals = _renormalize(base_n, acc_n)
        tangents = None
        if acc_t is not None:
            base_t = prim.tangents
            acc_t += base_t[:, :3]
            t3 = _renormalize(base_t[:, :3], acc_t)
            tangents = np.empty((v, 4), dtype=np.float32)
            tangents[:, :3] = t3
            tangents[:, 3] = base_t[:, 3]
        return positions, normals, tangents, bounds, max_delta


class RuntimeMeshInstance:
    """Instance state of one mesh node that has morph targets."""

    def __init__(self):
        self.mesh_asset = None
        self.runtime_mesh: Optional[RuntimeMesh] = None
        self.primitives: List[PrimitiveInstance] = []
        self.morph_primitive_count = 0
        self.last_upload_count = 0
        self.total_upload_count = 0
        self._backend = None

    def initialize(self, mesh_asset, runtime_mesh: RuntimeMesh, backend) -> bool:
        """Primitive counts must match; builds and uploads every morph primitive once."""
        self.release()
        if runtime_mesh is None or runtime_mesh.primitive_count != len(mesh_asset.primitives):
            return False
        self.mesh_asset = mesh_asset
        self.runtime_mesh = runtime_mesh
        self._backend = backend
        self.primitives = []
        for prim in mesh_asset.primitives:
            pi = PrimitiveInstance(prim)
            if prim.has_morphs:
                pi.prepare()
            self.primitives.append(pi)
        self.morph_primitive_count = sum(1 for p in self.primitives if p.has_morphs)
        self.last_upload_count = 0
        self.total_upload_count = 0
        return self.update()

    def morph_state(self, primitive_index: int) -> Optional[MorphState]:
        if 0 <= primitive_index < len(self.primitives):
            return self.primitives[primitive_index].morph_state
        return None

    def update(self) -> bool:
        """Rebuild and upload every morph primitive whose MorphState version changed."""
        self.last_upload_count = 0
        ok = True
        backend = self._backend
        for p in self.primitives:
            st = p.morph_state
            if st is None or st.version == p.applied_morph_version:
                continue
            positions, normals, tangents, bounds, max_delta = p.rebuild()
            try:
                stream = backend.create_stream(p.primitive, positions, normals, tangents)
            except Exception:
                stream = None
            if stream is None:
                ok = False          # applied_morph_version not advanced: retried next frame
                continue
            if p.stream is not None:
                backend.release_stream(p.stream)
            p.stream = stream
            p.local_bounds = bounds
            p.maximum_position_delta = max_delta
            p.applied_morph_version = st.version
            self.last_upload_count += 1
            self.total_upload_count += 1
        return ok

    def release(self) -> None:
        if self._backend is not None:
            for p in self.primitives:
                if p.stream is not None:
                    self._backend.release_stream(p.stream)
                    p.stream = None
        self.primitives = []
        self.morph_primitive_count = 0
        self.mesh_asset = None
        self.runtime_mesh = None
