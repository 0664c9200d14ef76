"""RuntimeMesh (shared immutable streams) and RuntimeMeshInstance (per-instance morphs). No bpy/gpu.

Seed: RuntimeMeshInstance. Only primitives with morph targets get a MorphState and a dynamic
stream; when ``morph_state.version != applied_morph_version`` the stream is rebuilt *from the
base* over the active, non-muted targets (never incrementally) and uploaded as a brand-new stream
(a drawn GPUVertBuf cannot be refilled).

High-frequency morph animation (the seed's stated extension: "高频面部曲线 ... 由 Vertex Shader
执行 Delta 合成"): when a primitive's weights change on consecutive updates, and the backend can
compose deltas in the vertex shader, the update uploads only the weights (one small texture) and
the shaders add ``sum(weight * delta)`` over the vertex's sparse entries (``pack_morph_entries``).
As soon as the weights hold still for one update, the primitive is rebuilt once on the CPU again
("settles"), so edited expressions are drawn from a plain stream with exact bounds.

Both paths read one sparse form, the asset's (``MorphTargetAsset.indices`` and its (K,3) rows):
the CPU rebuild adds ``w * rows`` into the vertices ``indices`` names, the shader entries are
packed from the same rows, and no dense (V,3) array per target exists at run time.  The
per-target runtime data (extremes, outline smooth-normal deltas) is made once per primitive and
shared by every instance of the mesh (``RuntimeMesh.morph_table``).  In shader mode
the bounds and ``maximum_position_delta`` are conservative (per-target delta extremes times the
weights): never smaller than the exact values, as the seed's culling requires.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional

import numpy as np

from ..animation.morph import MorphState, is_frozen
from ..assets.types import Bounds, bounds_of
from ..finite import DRAW_LIMIT
from .morph_table import TargetData, morph_table

if TYPE_CHECKING:
    from .backend import RuntimeBackend

#: Normals/tangents shorter than this after morphing fall back to the base direction.
DEGENERATE_LENGTH = 1e-8
#: Version changes on this many updates in a row (without a still one between) = animated morph.
ANIMATED_CHANGES = 2
#: After this many still updates a primitive counts as edited by hand again.
STILL_RESET = 3
#: morph policies of RuntimeMeshInstance: "auto" (above), "rebuild" (always the CPU rebuild),
#: "shader" (always compose in the shader when the backend can).
MORPH_POLICIES = ("auto", "rebuild", "shader")


def target_key(t) -> str:
    """The shape-key name a morph target is set by (its key's name, else its own)."""
    return t.key_name or t.name


class RuntimeMesh:
    """One backend stream per primitive of a MeshAsset, created once (shared by all instances)."""

    def __init__(self):
        self.mesh_asset = None
        self.streams: list = []
        self._backend = None
        self._tables: dict = {}    # primitive index -> morph_table (made on first use)
        self._rebuilds: dict = {}  # primitive index -> its last CPU rebuild: rebuild_memo

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

    def morph_table(self, primitive_index: int) -> List[TargetData]:
        """The shared per-target runtime data of one primitive (made once, for all instances)."""
        table = self._tables.get(primitive_index)
        if table is None:
            mesh = self.mesh_asset
            if mesh is None:
                raise RuntimeError("RuntimeMesh.morph_table: no mesh asset (initialize() not called or released)")
            prim = mesh.primitives[primitive_index]
            # the backend's smooth-normal deltas of this primitive (made once with its static buffer)
            smooth = getattr(self._backend, "smooth_deltas", None)
            table = morph_table(prim, smooth(prim) if smooth is not None else None)
            self._tables[primitive_index] = table
        return table

    def rebuild_memo(self, primitive_index: int) -> list:
        """[effective weights, their bytes, the rebuild's arrays] of the last CPU rebuild of one
        primitive, shared by every instance of the mesh: linked duplicates at the same shape-key
        values (a crowd's faces settling together) rebuild it once."""
        return self._rebuilds.setdefault(primitive_index, [None, None, None])

    def release(self) -> None:
        if self._backend is not None:
            for s in self.streams:
                self._backend.release_stream(s)
        self.streams = []
        self._tables = {}
        self._rebuilds = {}
        self.mesh_asset = None
        self._backend = None


def _accumulate(acc: Optional[np.ndarray], rows: np.ndarray, delta: np.ndarray, w: np.float32,
                v: int) -> np.ndarray:
    """acc[rows] += w * delta for sparse (K,3) rows (acc allocated as zeros on first use).
    Column by column: 1-D fancy indexing of a column is about twice as fast as indexing rows of
    a (V,3) array, and needs no precomputed flat index array (memory per target).  ``rows``
    should be intp already (an int32 index is converted again by every indexing)."""
    if acc is None:
        acc = np.zeros((v, 3), dtype=np.float32)
    if rows.size:
        for c in range(3):                     # the 3 coordinates, not vertices
            col = acc[:, c]
            col[rows] += delta[:, c] * w
    return acc


def _row_norms_sq(a: np.ndarray) -> np.ndarray:
    """Squared length of each (V,3) row (column-wise: much faster than an axis=1 reduction)."""
    x, y, z = a[:, 0], a[:, 1], a[:, 2]
    with np.errstate(over="ignore", invalid="ignore"):    # a key of 1e30: inf, refused by the caller
        r = x * x
        r += y * y
        r += z * z
    return r


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
        self._targets: List[TargetData] = []
        self.shader_morph = False        # the current stream composes deltas in the shader
        self.shader_unavailable = False  # the backend could not hold this primitive's deltas
        self.changes = 0                 # version changes since the weights last held still
        self._rebuild_memo: Optional[list] = None   # RuntimeMesh.rebuild_memo (the instances of one mesh share it)
        self.still = 0                   # updates in a row without a version change

    @property
    def has_morphs(self) -> bool:
        return self.morph_state is not None

    def prepare(self, table: Optional[List[TargetData]] = None, epoch=None, shared_bounds=None,
                states: Optional[dict] = None) -> None:
        """MorphState and target data (``table``: shared ``RuntimeMesh.morph_table``, else made here;
        ``epoch``: the runtime's ``MorphEpoch`` the state bumps; ``shared_bounds``: the runtime's
        dict through which primitives with the same shape keys share their last bounds;
        ``states``: the instance's dict through which its primitives with the same shape keys (the
        same names in the same order, ranges and mutes: a mesh split by material) share one
        MorphState, so a frame sets their weights once)."""
        prim = self.primitive
        self.muted = np.array([bool(t.mute) for t in prim.morph_targets], dtype=bool)
        key = None
        if states is not None:
            key = (tuple(target_key(t) for t in prim.morph_targets), self.muted.tobytes(),
                   tuple((float(t.weight_min), float(t.weight_max)) for t in prim.morph_targets))
        state = states.get(key) if states is not None else None
        self.morph_state = state if state is not None else MorphState(prim.morph_targets, epoch)
        if states is not None:
            states.setdefault(key, self.morph_state)
        self._muted_w = None     # effective_weights with mutes: (frozen weights, their masked copy)
        self._targets = table if table is not None else morph_table(prim)
        self._extremes = self._ext_made = None   # conservative_bounds: its table, rows made as targets turn on
        self._signed = np.zeros(2 * len(self._targets))    # conservative_bounds: (w+, w-)
        self._base_empty = prim.bounds.is_empty
        self._base6 = (np.concatenate([prim.bounds.minimum, prim.bounds.maximum]).astype(np.float64)
                       if not self._base_empty else None)
        self._any_muted = bool(self.muted.any())
        # linked duplicates (the same shape-key assets, the same base bounds: a crowd's faces) at the
        # same weights: one bounds product for all of them (keyed by the targets' identity: nothing
        # of a deferred target is read for it; the targets are kept with it, so the ids stay theirs)
        self._memo = None
        if shared_bounds is not None and self._base6 is not None:    # (None: empty base bounds)
            targets = tuple(prim.morph_targets)
            key = (tuple(id(t) for t in targets), self._base6.tobytes())
            self._memo = shared_bounds.setdefault(key, [None, None, targets, None])

    def effective_weights(self) -> np.ndarray:
        """The weights the shader composes with: muted targets contribute nothing.  A read-only
        array that owns its memory and is the same object while the weights hold (the backend
        keeps it without a copy; bounds and weight textures are found by its identity)."""
        st = self.morph_state
        if st is None:
            raise RuntimeError("PrimitiveInstance.effective_weights: no MorphState (prepare() not called)")
        w = st.frozen_weights()     # read-only, owned, one object per version
        if not self._any_muted:
            return w
        m = self._muted_w
        if m is None or m[0] is not w:
            masked = w.copy()
            masked[self.muted] = 0.0
            masked.flags.writeable = False
            m = self._muted_w = (w, masked)
        return m[1]

    def conservative_bounds(self, weights: np.ndarray):
        """(bounds, max delta) that contain every morphed vertex for these weights, O(active)."""
        if self._base_empty:
            return self.primitive.bounds, 0.0
        memo = self._memo
        if memo is not None:
            if memo[3] is weights:           # the same frozen weights (effective_weights)
                return memo[1]
            key = np.asarray(weights, np.float32).tobytes()
            if memo[0] == key:
                memo[3] = weights if is_frozen(weights) else None
                return memo[1]
        # dmin <= 0 <= dmax per target: min(w*dmin, w*dmax) is w*dmin for w >= 0, w*dmax below;
        # one product gives (w+ . dmin + w- . dmax, w+ . dmax + w- . dmin, |w| . len)
        # one product: (w+, w-) (2T) against the per-target extremes [[dmin, dmax, len],
        # [dmax, dmin, -len]] (2T, 7) gives (lo delta, hi delta, |w| . len); a target's rows of the
        # table are made when its weight first leaves 0 (a weight of 0 adds nothing to the product)
        n = len(self._targets)
        if self._extremes is None or self._ext_made is None:
            self._extremes = np.zeros((2 * n, 7))
            self._ext_made = np.zeros(n, bool)
        new = (weights != 0.0) & ~self._ext_made
        if new.any():
            for i in np.flatnonzero(new):          # targets turned on for the first time
                td = self._targets[int(i)]
                e = np.concatenate([td.dmin, td.dmax, [td.max_length]])
                self._extremes[i] = e
                self._extremes[n + i] = np.concatenate([e[3:6], e[:3], -e[6:]])
            self._ext_made |= new
        pm = self._signed
        t = pm.shape[0] // 2
        np.maximum(weights, 0.0, out=pm[:t])
        np.minimum(weights, 0.0, out=pm[t:])
        r = np.dot(pm, self._extremes)
        lohi = r[:6]
        lohi += self._base6
        lohi.flags.writeable = False
        out = bounds_of(lohi[:3], lohi[3:6]), float(r[6])
        if memo is not None:
            memo[0], memo[1] = key, out
            memo[3] = weights if is_frozen(weights) else None   # (frozen: never changes)
        return out

    def compose_in_shader(self, backend, base_stream):
        """(stream, conservative bounds, max delta) drawing ``base_stream`` with the deltas
        composed in the vertex shader, or None when the upload failed.  A backend that cannot
        hold this primitive's deltas at all (it raises) sets ``shader_unavailable``."""
        weights = self.effective_weights()
        refresh = getattr(backend, "refresh_morph_stream", None)
        if self.shader_morph and refresh is not None:
            try:
                if refresh(self.stream, base_stream, weights):
                    return (self.stream,) + self.conservative_bounds(weights)   # new weights, same stream
            except Exception:
                pass                 # a new stream below (its failure is handled there)
        try:
            stream = backend.create_morph_stream(self.primitive, base_stream, weights)
        except Exception:
            self.shader_unavailable = True
            return None
        return None if stream is None else (stream,) + self.conservative_bounds(weights)

    def rebuild_stream(self, backend):
        """(stream, exact bounds, max delta) of a CPU rebuild from the base, or None on failure.
        The instances of one mesh at the same weights share the rebuild (``RuntimeMesh.rebuild_memo``)."""
        memo = self._rebuild_memo
        w = self.effective_weights() if memo is not None else None
        if memo is not None and w is not None and (memo[0] is w or (memo[1] is not None and memo[1] == w.tobytes())):
            positions, normals, tangents, bounds, max_delta, snor = memo[2]
        else:
            positions, normals, tangents, bounds, max_delta = self.rebuild()
            snor = self.rebuild_smooth_normals()
            if memo is not None and w is not None:
                memo[0], memo[1], memo[2] = w, w.tobytes(), (positions, normals, tangents, bounds, max_delta, snor)
        try:
            stream = backend.create_stream(self.primitive, positions, normals, tangents, smooth_normals=snor)
        except Exception:
            return None
        return None if stream is None else (stream, bounds, max_delta)

    def rebuild_smooth_normals(self):
        """The outline's smooth normals for the current weights (None: the base ones)."""
        prim = self.primitive
        state = self.morph_state
        if state is None:
            raise RuntimeError("PrimitiveInstance.rebuild_smooth_normals: no MorphState (prepare() not called)")
        active = state.active_indices()
        if active.size:
            active = active[~self.muted[active]]
        used = [int(i) for i in active
                if self._targets[int(i)].snr is not None or self._targets[int(i)].snr_on_normals]
        if not used:
            return None
        base = prim.smooth_normals if prim.smooth_normals is not None else prim.normals
        v = prim.vertex_count
        acc = None
        weights = state.weights
        for i in used:                       # active targets only
            td = self._targets[i]
            w = np.float32(weights[i])
            if td.snr_on_normals:
                acc = _accumulate(acc, td.idx.astype(np.intp), td.nrm, w, v)
            if td.snr is not None:
                acc = _accumulate(acc, td.snr_rows.astype(np.intp), td.snr, w, v)
        acc += base
        return _renormalize(base, acc)

    def rebuild(self):
        """Morph from the base over active, non-muted targets. Returns (pos, nrm, tan, bounds, maxdelta)."""
        prim = self.primitive
        state = self.morph_state
        if state is None:
            raise RuntimeError("PrimitiveInstance.rebuild: no MorphState (prepare() not called)")
        active = state.active_indices()
        if active.size:
            active = active[~self.muted[active]]
        if active.size == 0:
            return None, None, None, prim.bounds, 0.0
        weights = state.weights
        v = prim.vertex_count
        acc = acc_n = acc_t = None
        for i in active:                       # loop over active targets only
            td = self._targets[int(i)]
            w = np.float32(weights[i])
            rows = td.idx.astype(np.intp)      # int32 rows: converted once, not per column
            acc = _accumulate(acc, rows, td.pos, w, v)
            if td.nrm is not None:
                acc_n = _accumulate(acc_n, rows, td.nrm, w, v)
            if td.tan is not None and prim.tangents is not None:
                acc_t = _accumulate(acc_t, rows, td.tan, w, v)
        assert acc is not None   # active is not empty: set by the loop
        positions = prim.positions + acc
        max_delta = float(np.sqrt(_row_norms_sq(acc).max())) if v else 0.0
        bounds = Bounds.from_points(positions)
        normals = None
        if acc_n is not None:
            base_n = prim.normals
            acc_n += base_n
            normals = _renormalize(base_n, acc_n)
        tangents = None
        base_t = prim.tangents
        if acc_t is not None and base_t is not None:     # (acc_t is made only with base tangents)
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
        self._backend: Optional[RuntimeBackend] = None
        self.morph_policy = "auto"      # one of MORPH_POLICIES
        self.idle = False               # the last update found every primitive settled
        self.counts = (0, 0, 0)         # update(): (total uploads, shader-composed primitives, active targets)
        self.refusal: Optional[str] = None   # why the composed shape cannot be drawn (not drawn then)

    def initialize(self, mesh_asset, runtime_mesh: Optional[RuntimeMesh], backend, epoch=None, shared_bounds=None) -> bool:
        """Primitive counts must match; builds and uploads every morph primitive once.  ``epoch``:
        the runtime's ``MorphEpoch`` its primitives' MorphStates bump; ``shared_bounds``: see
        ``PrimitiveInstance.prepare``."""
        self.release()
        if runtime_mesh is None or runtime_mesh.primitive_count != len(mesh_asset.primitives):
            return False
        self.mesh_asset = mesh_asset
        self.runtime_mesh = runtime_mesh
        self._backend = backend
        self.primitives = []
        states: dict = {}       # the primitives with the same shape keys share one MorphState
        for prim in mesh_asset.primitives:
            pi = PrimitiveInstance(prim)
            if prim.has_morphs:
                shared = runtime_mesh.mesh_asset is mesh_asset
                pi.prepare(runtime_mesh.morph_table(len(self.primitives)) if shared else None, epoch,
                           shared_bounds, states)
                if shared:
                    pi._rebuild_memo = runtime_mesh.rebuild_memo(len(self.primitives))
            self.primitives.append(pi)
        self.morph_primitive_count = sum(1 for p in self.primitives if p.has_morphs)
        self.last_upload_count = 0
        self.total_upload_count = 0
        ok = self.update()
        for p in self.primitives:
            p.changes = 0                  # the initial build is not an edit
        return ok

    def morph_state(self, primitive_index: int) -> Optional[MorphState]:
        if 0 <= primitive_index < len(self.primitives):
            return self.primitives[primitive_index].morph_state
        return None

    def update(self) -> bool:
        """Bring every morph primitive's stream up to its MorphState version.

        A changed version is rebuilt from the base on the CPU, or, when the weights are animated
        (``morph_policy``), composed in the vertex shader with only the weights uploaded.  A
        shader-composed primitive whose weights held still for one update is rebuilt once.
        A failed upload does not advance ``applied_morph_version`` (retried next update)."""
        self.last_upload_count = 0
        ok = True
        backend = self._backend
        policy = self.morph_policy
        can_shader = bool(getattr(backend, "supports_shader_morph", False)) and policy != "rebuild"
        idle = True
        shader_count = active = 0
        with np.errstate(over="ignore", invalid="ignore"):     # huge keys: refused below
            for i, p in enumerate(self.primitives):
                st = p.morph_state
                if st is None:
                    continue
                active += st.active_count
                shader_count += p.shader_morph      # before this update; corrected below on a change
                can = can_shader and not p.shader_unavailable
                if (st.version == p.applied_morph_version and p.still + 1 >= STILL_RESET
                        and (can and policy == "shader") == p.shader_morph):
                    p.still += 1          # settled: nothing to do, now or on later still updates
                    p.changes = 0
                    continue
                idle = False
                if st.version == p.applied_morph_version:
                    p.still += 1
                    if p.still >= STILL_RESET:
                        p.changes = 0
                    shader = can and policy == "shader"      # still weights: settle into a stream
                    if shader == p.shader_morph:
                        continue
                else:
                    p.still = 0
                    p.changes += 1
                    shader = can and (policy == "shader" or p.changes >= ANIMATED_CHANGES)
                result = None
                if shader:
                    rm = self.runtime_mesh
                    assert rm is not None   # primitives exist only after initialize() set it
                    result = p.compose_in_shader(backend, rm.stream(i))
                    shader = not p.shader_unavailable      # the deltas do not fit: rebuild instead
                if not shader:
                    result = p.rebuild_stream(backend)
                if result is None:
                    ok = False          # applied_morph_version not advanced: retried next frame
                    continue
                stream, bounds, max_delta = result
                if p.stream is not None and p.stream is not stream:
                    assert backend is not None   # the new stream came from it
                    backend.release_stream(p.stream)
                p.stream = stream
                shader_count += shader - p.shader_morph
                p.shader_morph = shader
                p.local_bounds = bounds
                p.maximum_position_delta = max_delta
                p.applied_morph_version = st.version
                self.last_upload_count += 1
                self.total_upload_count += 1
        self.idle = idle and ok
        if self.last_upload_count or self.refusal is not None:
            self.refusal = _refusal(self.primitives)
        # (total uploads, shader-composed primitives, active targets) after this update
        self.counts = (self.total_upload_count, shader_count, active)
        return ok

    @property
    def shader_morph_count(self) -> int:
        """Primitives whose current stream composes the deltas in the vertex shader."""
        return sum(1 for p in self.primitives if p.shader_morph)

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


def _refusal(primitives) -> Optional[str]:
    """Why the morphed shape cannot be drawn in 32-bit floats (a shape key of 1e30: vertices moved
    by more than ``finite.DRAW_LIMIT`` or by a non-finite amount), naming the key that moves
    them most; None when every primitive is drawable.  A loop over primitives, and over the
    active targets of a refused one only."""
    for p in primitives:
        if p.morph_state is None or p.maximum_position_delta <= DRAW_LIMIT:
            continue
        active = p.morph_state.active_indices()
        w = np.abs(np.asarray(p.morph_state.weights, np.float64)[active])
        reach = w * np.array([p._targets[int(i)].max_length for i in active])
        t = p.primitive.morph_targets[int(active[int(np.nanargmax(np.nan_to_num(reach, nan=np.inf)))])] \
            if active.size else None
        key = (t.key_name or t.name) if t is not None else "?"
        return (f"shape key '{key}' moves its vertices by more than {DRAW_LIMIT:g} "
                f"(too large for 32-bit floats)")
    return None
