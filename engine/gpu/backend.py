"""GPU implementation of the runtime backend (Blender's ``gpu`` module).

Palette storage: the Python ``gpu`` module of the Blenders we support (4.5-5.2) has no storage
buffer (``GPUStorageBuf``), so a skinning palette is an RGBA32F texture (4 texels = 4 matrix
columns per joint row) read with ``texelFetch`` by ``glsl/skinning.glsl``; there is no other path.

A drawn ``GPUVertBuf`` cannot be refilled, so every morph rebuild creates a new vertex buffer and
batch; the index buffer of a primitive is created once and shared by all its streams.

Shader-composed morphs (animated weights, see ``runtime/mesh_instance.py``): the primitive's
sparse delta entries live in one static RGBA32F texture (4 texels per entry) and each vertex's
``morph_span`` attribute in the shared static buffer; an update only creates a small R32F texture
of the weights, drawn with the primitive's base stream.  The entries are packed from the asset's
sparse rows (``pack_morph_entries``) when the static buffer is built (for the spans) and again when
the texture is first needed; no packed copy is kept on the CPU.
"""
from __future__ import annotations

import hashlib

import numpy as np

from ..core.animation.morph import is_frozen
from ..core.geometry import SmoothNormalDeltas
from ..core.runtime.backend import RuntimeBackend
from ..core.runtime.morph_table import pack_morph_entries, pack_morph_span
from .chunks import CHUNK_TRIANGLES
from .chunks import moved as moved_chunks
from .layout import MORPH_TEX_WIDTH, compact_fill, vertex_format
from .palette_textures import (
    GpuPaletteBuffer,
    SliceSource,
    float_texture,
    identity_texture,
    matrix_rows,
    palette_texture,
)
from .static_buffers import (
    STATIC_NAMES,
    build_slim_static,
    compact_static,
    f32,
    fill_colour,
    static_attributes,
    static_bytes,
)

#: distinct morph weight textures a backend keeps for reuse (GpuBackend._weights_texture)
WEIGHT_TEXTURES = 256


class GpuStream:
    """One drawable vertex stream: a dynamic vertex buffer (pos, nor, tan: what a morph changes)
    plus the primitive's shared static buffer (uv, smooth normal, joints, weights, morph spans)
    and index buffer, combined in one batch.  ``morph`` is None, or the (deltas, weights)
    textures the vertex shader composes (a shader-morph stream shares the base stream's
    buffers)."""

    __slots__ = ("batch", "vbo", "static_vbo", "vertex_count", "triangle_count", "ibo", "morph", "skin_entries",
                 "morph_weights", "shared", "identity", "morph_live", "morph_owner", "chunks")

    def __init__(self, batch, vbo, static_vbo, ibo, vertex_count: int, triangle_count: int, morph=None,
                 skin_entries=None, morph_weights=None, chunks=None):
        self.batch = batch
        self.vbo = vbo
        self.static_vbo = static_vbo
        self.ibo = ibo
        self.vertex_count = vertex_count
        self.triangle_count = triangle_count
        self.morph = morph
        self.skin_entries = skin_entries      # influence entries (> 8 influences) or None
        self.morph_weights = morph_weights    # (T,) float32 weights of ``morph`` (instanced draws)
        self.shared = None                    # the backend's key of a stream shared by instances
        self.identity = None                  # the identity palette of the backend that made it (bind_deform)
        self.morph_live = None                # (T,) bool: the targets ``morph``'s deltas hold (None: all)
        self.morph_owner: tuple | None = None  # the backend's key of the primitive ``morph`` draws
        self.chunks = chunks                  # a big static mesh's ChunkTable (engine/gpu/chunks.py) or None

    def points_batch(self):
        """A POINTS batch over the same vertices (GPU readback: one point per vertex)."""
        import gpu

        batch = gpu.types.GPUBatch(type="POINTS", buf=self.vbo)
        batch.vertbuf_add(self.static_vbo)
        return batch


def build_static(primitive, morph_span=None, chunk_triangles: int = CHUNK_TRIANGLES):
    """The per-primitive buffer of attributes no morph changes (uv, joints, weights, morph spans,
    vertex colour), its index buffer, the triangle count, the influence-entries texture of a
    primitive with more than 8 influences (else None) and, for a big static primitive, its
    ChunkTable (engine/gpu/chunks.py: triangles in chunks of about ``chunk_triangles``; else None).
    ``morph_span`` is the (V,2) span of ``pack_morph_entries`` (zeros when None)."""
    import gpu

    n = int(np.asarray(primitive.positions).shape[0])
    joints = getattr(primitive, "joints", None)
    weights = getattr(primitive, "weights", None)
    if static_attributes(primitive, morph_span) != STATIC_NAMES:
        return build_slim_static(primitive, n, chunk_triangles)
    vbo = gpu.types.GPUVertBuf(vertex_format("static", compact=compact_static(primitive)), n)
    vbo.attr_fill("uv", f32(getattr(primitive, "uv0", None), 2, n))
    j = np.zeros((n, 8), np.uint32)
    w = np.zeros((n, 8), np.float32)
    entries = None
    if joints is not None and weights is not None:
        k = joints.shape[1]
        if k > 8:
            # more than 8 influences: every nonzero (joint, weight) as a texture entry, the
            # vertex's span (first, count) in joints.xy (skinning.glsl, skin_influences > 8)
            nz = np.asarray(weights) > 0.0
            counts = nz.sum(axis=1)
            vv, kk = np.nonzero(nz)
            data = np.zeros((vv.shape[0], 4), np.float32)
            data[:, 0] = np.asarray(joints)[vv, kk]
            data[:, 1] = np.asarray(weights)[vv, kk]
            j[:, 0] = np.cumsum(counts) - counts
            j[:, 1] = counts
            entries = float_texture(data, 4)
        else:
            j[:, :k] = joints
            w[:, :k] = weights
    vbo.attr_fill("joints", np.ascontiguousarray(j[:, :4]))
    vbo.attr_fill("weights", np.ascontiguousarray(w[:, :4]))
    vbo.attr_fill("joints_hi", np.ascontiguousarray(j[:, 4:]))
    vbo.attr_fill("weights_hi", np.ascontiguousarray(w[:, 4:]))
    span = np.zeros((n, 2), np.uint32) if morph_span is None else np.array(morph_span, np.uint32, order="C")
    vbo.attr_fill("morph_span", span)
    fill_colour(vbo, primitive, n)
    indices = np.ascontiguousarray(np.asarray(primitive.indices, dtype=np.int32).reshape(-1, 3))
    ibo = gpu.types.GPUIndexBuf(type="TRIS", seq=indices)
    return vbo, ibo, int(indices.shape[0]), entries, None


def build_stream(primitive, positions=None, normals=None, tangents=None, static=None,
                 smooth_normals=None) -> GpuStream:
    """Create a GPU vertex stream for ``primitive`` (a PrimitiveAsset or anything with the same
    array attributes).  ``positions``/``normals``/``tangents``/``smooth_normals`` override the
    base arrays (morphs); ``static`` is ``build_static``'s tuple to share."""
    import gpu

    pos = positions if positions is not None else primitive.positions
    n = int(np.asarray(pos).shape[0])
    nor = normals if normals is not None else primitive.normals
    tan_src = getattr(primitive, "tangents", None)
    if tangents is not None:
        tangents = np.asarray(tangents, np.float32)
        if tangents.shape[1] == 3:
            sign = tan_src[:, 3:4] if tan_src is not None else np.ones((n, 1), np.float32)
            tangents = np.hstack([tangents, sign])
        tan = tangents
    else:
        tan = tan_src
    if static is None:
        static = build_static(primitive)
    static_vbo, ibo, tris, entries, chunks = static
    if positions is not None:
        chunks = None                     # (the chunks' boxes hold the base positions)
    # no tangents (no UV map): the constant (1, 0, 0, 1), compact (layout.COMPACT_DEFAULTS)
    vbo = gpu.types.GPUVertBuf(vertex_format("dynamic", compact=("tan",) if tan is None else ()), n)
    vbo.attr_fill("pos", f32(pos, 3, n))
    vbo.attr_fill("nor", f32(nor, 3, n))
    vbo.attr_fill("tan", compact_fill("tan", n) if tan is None else f32(tan, 4, n))
    snor = smooth_normals if smooth_normals is not None else getattr(primitive, "smooth_normals", None)
    vbo.attr_fill("snor", f32(snor if snor is not None else nor, 3, n))
    batch = gpu.types.GPUBatch(type="TRIS", buf=vbo, elem=ibo)
    batch.vertbuf_add(static_vbo)
    return GpuStream(batch, vbo, static_vbo, ibo, n, tris, skin_entries=entries, chunks=chunks)


class GpuBackend(RuntimeBackend):
    """Runtime backend that owns real GPU resources (must be used with a GPU context current)."""

    supports_shader_morph = True

    def __init__(self):
        # keyed by the ids of a primitive's immutable arrays (held in the entry, so ids stay valid)
        self._static = {}        # -> (arrays, (static vbo, ibo, triangle count, influence entries))
        self._morph = {}         # -> [arrays, None, smooth deltas, (base vbo, span static, batch, live targets, deltas texture)]
        self._base = {}          # -> (arrays, the primitive's shared base GpuStream)
        self._users = {}         # -> live wrappers of the base stream (instances drawing the primitive)
        self._rebuilt = {}       # (key, digest) -> [arrays, shared rebuilt GpuStream, live wrappers]
        self._weights = {}       # morph weights bytes -> their texture (the last WEIGHT_TEXTURES)
        self._last_weights = None   # (frozen weights, their texture): the primitives sharing them
        self._last_digest = None    # (arrays, digest) of the last rebuilt stream hashed
        self._live_ok = {}   # primitive's morph key -> (its live targets, the last frozen weights that fit them)
        self._slices = None      # (handles, slices, SliceSource) of the last batched palette upload
        self._morph_memo = {}    # id(primitive) -> (primitive, key, entry) of _morph_entry
        self._by_indices = {}    # id(index array) -> its static entry's key (_moved_static)
        self.static_uploads = 0  # static buffers built (once per distinct geometry)
        self.static_reuses = 0   # static buffers taken on by a primitive whose vertices moved
        self.static_bytes = 0    # their bytes (vertex and index buffers; ``static_bytes``)
        self.palette_uploads = 0
        self.stream_uploads = 0
        self.morph_texture_bytes = 0   # GPU bytes of the delta textures uploaded (not numpy)
        self._identity = None    # the identity palette bound where nothing is read (identity_texture)
        # big static meshes' triangles per chunk (engine/gpu/chunks.py); 0: none chunked
        self.chunk_triangles = CHUNK_TRIANGLES

    def identity_texture(self):
        """This backend's one-joint identity palette (made on first use, in its GPU context):
        every stream it makes carries it (``GpuStream.identity``) for the draws' unused samplers."""
        if self._identity is None:
            self._identity = identity_texture()
        return self._identity

    # palettes -------------------------------------------------------------------------------
    def create_palette_buffer(self, joint_count: int):
        return GpuPaletteBuffer(joint_count)

    def upload_palette(self, handle, matrices) -> bool:
        if handle is None or not handle.valid or matrices.shape[0] != handle.joint_count:
            return False
        handle.rows = matrix_rows(matrices)
        handle.texture = None          # made when drawn alone (palette_texture)
        handle.uploads += 1
        self.palette_uploads += 1
        return True

    def upload_palette_slices(self, handles, texels: np.ndarray, slices) -> list:
        """``upload_palette`` of many palettes whose texels are row ranges of one (T,4,4) float32
        C-contiguous array ``texels`` (a batched palette update): ``slices[k] = (a, b)`` are the
        rows of ``handles[k]``.  Each handle views its rows of ``texels`` (no copy, no per-palette
        transpose).  The same ``handles`` and ``slices`` lists again (a batch's next frame) with
        every handle still attached: one step for all (the handles read the new array through
        their shared source).  Returns the per-handle results."""
        hit = self._slices
        if hit is not None and hit[0] is handles and hit[1] is slices and hit[2].intact:
            src = hit[2]
        else:
            src = SliceSource()
            ok = []
            for h, (a, b) in zip(handles, slices):
                if h is None or h.joint_count <= 0 or b - a != h.joint_count:
                    ok.append(False)
                    continue
                h._attach(src, a, b)
                ok.append(True)
            src.ok = ok
            src.count = sum(ok)
            src.intact = True
            self._slices = (handles, slices, src)
        src.flat = texels.reshape(-1)
        src.version += 1
        self.palette_uploads += src.count
        return src.ok

    def release_palette(self, handle) -> None:
        if handle is not None:
            handle.rows = None
            handle.texture = None

    def is_palette_valid(self, handle) -> bool:
        return handle is not None and handle.valid

    # streams --------------------------------------------------------------------------------
    @staticmethod
    def _geometry(primitive) -> tuple:
        """The immutable arrays the static buffers and morph entries are made of.  Primitives
        that share them (linked duplicates differ only in their skin) share one upload."""
        return (primitive.positions, primitive.indices, getattr(primitive, "joints", None),
                getattr(primitive, "weights", None), getattr(primitive, "uv0", None),
                getattr(primitive, "colors", None), getattr(primitive, "morph_targets", ()))

    def _lookup(self, table: dict, primitive):
        geo = self._geometry(primitive)
        key = tuple(id(a) for a in geo)
        entry = table.get(key)
        if entry is not None and all(x is y for x, y in zip(entry[0], geo)):
            return key, geo, entry
        return key, geo, None

    def _morph_entry(self, primitive):
        return self._morph_keyed(primitive)[1]

    def _morph_keyed(self, primitive):
        """(key, entry) of the primitive's morph entry.  The last entry of this primitive object
        (a per-frame shader-morph stream asks again every frame): valid while the table still
        holds it and its arrays are the primitive's."""
        memo = self._morph_memo.get(id(primitive))
        if memo is not None and memo[0] is primitive and self._morph.get(memo[1]) is memo[2]:
            return memo[1], memo[2]
        key, geo, entry = self._lookup(self._morph, primitive)
        if entry is None:
            entry = [geo, None, None]     # geometry, (unused), (normals, sources, smooth deltas); create_morph_stream adds its textures
            self._morph[key] = entry
        self._morph_memo[id(primitive)] = (primitive, key, entry)
        return key, entry

    def smooth_deltas(self, primitive) -> SmoothNormalDeltas:
        """The primitive's ``SmoothNormalDeltas`` (each target's made on first use), one per
        geometry (the runtime's morph table, the shader-morph spans and deltas texture all read
        it) and kept with the primitive's morph entry (released with it)."""
        entry = self._morph_entry(primitive)
        hit = entry[2]
        if hit is None or hit[0] is not primitive.normals or hit[1] is not primitive.source_vertices:
            hit = entry[2] = (primitive.normals, primitive.source_vertices, SmoothNormalDeltas(primitive))
        return hit[2]

    def create_stream(self, primitive, positions=None, normals=None, tangents=None, cache_static: bool = True,
                      smooth_normals=None):
        """``cache_static=False``: a one-off stream (fallback geometry) whose static buffers are
        owned by the stream alone and freed with it."""
        stream = self._create_stream(primitive, positions, normals, tangents, cache_static, smooth_normals)
        stream.identity = self.identity_texture()
        return stream

    def _create_stream(self, primitive, positions, normals, tangents, cache_static: bool, smooth_normals):
        if not cache_static:
            self.stream_uploads += 1
            return build_stream(primitive, positions, normals, tangents, smooth_normals=smooth_normals)
        key, geo, entry = self._lookup(self._static, primitive)
        static = entry[1] if entry is not None else None
        if static is None:
            static = self._moved_static(primitive, geo)
            if static is None:
                # no morph spans (zeros): the streams drawn from it are final (the base shape or a
                # CPU rebuild); a shader-morph stream draws with a static buffer that has them
                # (``create_morph_stream``), so no target's rows are needed before one is drawn
                static = build_static(primitive, chunk_triangles=self.chunk_triangles)
                self.static_uploads += 1
                self.static_bytes += static_bytes(primitive)
            self._static[key] = (geo, static)
            self._by_indices[id(primitive.indices)] = key
        if positions is None and normals is None and tangents is None and smooth_normals is None:
            # the primitive's base stream: one vertex buffer and batch per geometry, shared by
            # every instance (linked duplicates draw one batch; engine/gpu/passes/instancing.py groups
            # them into one draw).  Each caller gets its own wrapper, so releasing one keeps the others.
            base = (primitive.normals, getattr(primitive, "tangents", None),
                    getattr(primitive, "smooth_normals", None))
            hit = self._base.get(key)
            if hit is None or not all(x is y for x, y in zip(hit[0], geo + base)):
                hit = (geo + base, build_stream(primitive, static=static))
                self._base[key] = hit
                self.stream_uploads += 1
            self._users[key] = self._users.get(key, 0) + 1
            return self._wrap(hit[1], ("base", key))
        if self._users.get(key, 0) < 2:
            stream = build_stream(primitive, positions, normals, tangents, static=static, smooth_normals=smooth_normals)
            self.stream_uploads += 1
            return stream
        # a morph rebuilt on the CPU for a primitive that several instances draw: instances whose
        # rebuild gives the same arrays (linked duplicates at the same shape-key values) share one
        # vertex buffer and batch, so their draws group too.  Matched by a 256-bit digest of the
        # arrays (not kept); a primitive drawn by one instance only (a single heavy rig) pays nothing.
        arrays = (positions, normals, tangents, smooth_normals)
        last = self._last_digest
        if last is not None and all(x is y for x, y in zip(last[0], arrays)):
            digest = last[1]      # the same arrays (instances sharing one rebuild): hashed once
        else:
            h = hashlib.blake2b(digest_size=32)
            for a in arrays:
                if a is None:
                    h.update(b"-")
                else:
                    a = np.ascontiguousarray(a, np.float32)
                    h.update(str(a.shape).encode())
                    h.update(a.data)
            digest = h.digest()
            self._last_digest = (arrays, digest)
        skey = (key, digest)
        hit = self._rebuilt.get(skey)
        if hit is None or not all(x is y for x, y in zip(hit[0], geo)):
            hit = [geo, build_stream(primitive, positions, normals, tangents, static=static,
                                     smooth_normals=smooth_normals), 0]
            self._rebuilt[skey] = hit
            self.stream_uploads += 1
        hit[2] += 1
        return self._wrap(hit[1], ("rebuilt", skey))

    def _moved_static(self, primitive, geo):
        """The static buffers of a primitive that differs from a held one only in where its
        vertices are (an edit that moved vertices: importer/moved.py hands on the same index,
        UV and colour arrays): the same vertex and index buffers, with the boxes and digests
        of the chunks that hold a moved vertex made again (chunks.moved).  None: build anew."""
        old_key = self._by_indices.get(id(primitive.indices), ())
        held = self._static.get(old_key)
        if held is None or held[0][1] is not primitive.indices or held[0][0].shape != geo[0].shape:
            return None
        if any(a is not b for a, b in zip(held[0][2:6], geo[2:6])) or held[0][6] or geo[6]:
            return None
        if static_attributes(primitive) == STATIC_NAMES:
            return None                          # (skinned or morphed: not a moved static mesh)
        vbo, ibo, tris, entries, table = held[1]
        if table is not None:
            table = moved_chunks(table, held[0][0], geo[0], primitive.indices)
            if table is None:
                return None
        self.static_reuses += 1
        del self._static[old_key]                # (the new entry holds the buffers now)
        return (vbo, ibo, tris, entries, table)

    @staticmethod
    def _wrap(b, shared) -> GpuStream:
        w = GpuStream(b.batch, b.vbo, b.static_vbo, b.ibo, b.vertex_count, b.triangle_count,
                      skin_entries=b.skin_entries, chunks=b.chunks)
        w.shared = shared
        return w

    def create_morph_stream(self, primitive, base_stream, weights):
        """A stream drawing ``base_stream`` with the deltas composed in the vertex shader."""
        import gpu

        if base_stream is None or getattr(base_stream, "batch", None) is None:
            return None
        key, entry = self._morph_keyed(primitive)
        w = _kept(weights)
        made = entry[3] if len(entry) > 3 else None
        on = w != 0.0
        if made is None or made[0] is not base_stream.vbo or bool((on & ~made[3]).any()):
            # the deltas of the targets whose weight is or was non-zero (the others' rows are not
            # made: MorphTargetAsset.deferred), packed from the asset's sparse rows, uploaded (4
            # texels per entry, already padded to whole texture rows) and dropped; the base
            # stream's vertices with a static buffer that has their spans, one batch.  A target
            # turned on later packs them again with it.
            live = on if made is None else (made[3] | on)
            smooth = self.smooth_deltas(primitive)
            span = pack_morph_span(primitive, smooth, live)
            static = build_static(primitive, span)
            self.static_uploads += 1
            self.static_bytes += static_bytes(primitive, span)
            batch = gpu.types.GPUBatch(type="TRIS", buf=base_stream.vbo, elem=static[1])
            batch.vertbuf_add(static[0])
            _span, entries = pack_morph_entries(primitive, smooth, texels_multiple=MORPH_TEX_WIDTH, live=live)
            tex = float_texture(entries.reshape(-1, 4), 4)
            self.morph_texture_bytes += int(entries.nbytes)
            del entries
            made = (base_stream.vbo, static, batch, live, tex)
            del entry[3:]
            entry.append(made)
        _vbo, static, batch, live, tex = made
        weights_tex = self._weights_texture(w)
        self.stream_uploads += 1
        b = base_stream
        stream = GpuStream(batch, b.vbo, static[0], static[1], b.vertex_count, static[2],
                           morph=(tex, weights_tex), skin_entries=static[3], morph_weights=w)
        stream.morph_live = live
        stream.morph_owner = key
        stream.identity = self.identity_texture()
        return stream

    def refresh_morph_stream(self, stream, base_stream, weights) -> bool:
        """New weights for a shader-morph stream of ``create_morph_stream`` still drawing
        ``base_stream``: the stream object is kept (no new wrapper each animated frame).  False
        (nothing changed) when it cannot be: the caller then makes a new stream."""
        morph = getattr(stream, "morph", None)
        if (morph is None or stream.batch is None or base_stream is None
                or stream.vbo is not getattr(base_stream, "vbo", None)):
            return False
        w = _kept(weights)
        if stream.morph_weights is None or w.shape != stream.morph_weights.shape:
            return False
        live = stream.morph_live
        ok = self._live_ok.get(stream.morph_owner) if live is not None else None
        if live is not None and not (ok is not None and ok[0] is live and ok[1] is w):
            if bool(((w != 0.0) & ~live).any()):
                return False                 # a target it has no deltas of turned on: a new stream
            if is_frozen(w):                 # the primitive's other instances at these weights (one
                self._live_ok[stream.morph_owner] = (live, w)    # slot per primitive: its live targets now)
        stream.morph = (morph[0], self._weights_texture(w))
        stream.morph_weights = w
        self.stream_uploads += 1
        return True

    def _weights_texture(self, w: np.ndarray):
        """The texture of morph weights ``w``, shared by every stream drawing the same weights (the
        primitives of one mesh, a crowd at one expression): made once, kept for the last
        ``WEIGHT_TEXTURES`` distinct weight sets (the textures are never written after creation)."""
        last = self._last_weights
        if last is not None and last[0] is w:       # frozen weights: the same object, the same values
            return last[1]
        key = w.tobytes()
        tex = self._weights.pop(key, None)
        if tex is None:
            tex = float_texture(w, 1)
            if len(self._weights) >= WEIGHT_TEXTURES:
                del self._weights[next(iter(self._weights))]
        self._weights[key] = tex            # most recent last
        self._last_weights = (w, tex) if is_frozen(w) else None
        return tex

    def release_stream(self, stream) -> None:
        if stream is not None:
            shared = getattr(stream, "shared", None)
            if shared is not None:
                stream.shared = None
                kind, k = shared
                if kind == "base":
                    if self._users.get(k, 0) > 1:
                        self._users[k] -= 1
                    else:
                        self._users.pop(k, None)
                else:
                    hit = self._rebuilt.get(k)
                    if hit is not None:
                        hit[2] -= 1
                        if hit[2] <= 0:
                            del self._rebuilt[k]
            stream.batch = None
            stream.vbo = None
            stream.static_vbo = None
            stream.morph = None
            stream.skin_entries = None
            stream.morph_weights = None

    def retain(self, primitives, static_only=()) -> None:
        """Release the cached static buffers and morph textures of every primitive not in
        ``primitives`` (called after a re-import, so replaced assets do not pile up).  Static
        buffers stay also for the primitives in ``static_only`` and for those whose index array
        a kept primitive holds (an edit that moved their vertices: the import's new primitives
        take them on, ``_moved_static``, which lets the old entry go)."""
        keep = {tuple(id(a) for a in self._geometry(p)) for p in primitives}
        statics = keep | {tuple(id(a) for a in self._geometry(p)) for p in static_only}
        held_indices = {id(p.indices) for p in primitives}
        for table in (self._static, self._morph, self._base, self._users, self._live_ok):
            if table is self._static:
                gone = [k for k in table if k not in statics and k[1] not in held_indices]
            else:
                gone = [k for k in table if k not in keep]
            for k in gone:
                del table[k]
        self._by_indices = {i: k for i, k in self._by_indices.items() if k in self._static}
        for k in [k for k in self._rebuilt if k[0] not in keep]:
            del self._rebuilt[k]
        self._morph_memo = {i: m for i, m in self._morph_memo.items() if m[1] in keep}

    def release_all(self) -> None:
        self._weights.clear()
        self._last_weights = None
        self._last_digest = None
        self._live_ok.clear()
        self._morph_memo.clear()
        self._slices = None
        self._static.clear()
        self._by_indices.clear()
        self._morph.clear()
        self._base.clear()
        self._users.clear()
        self._rebuilt.clear()
        self._identity = None


def bind_morph(shader, stream, identity) -> None:
    """Set the shared morph uniforms for one draw (mode 0: the stream is already final);
    ``identity``: the backend's identity palette, bound where nothing is read."""
    morph = getattr(stream, "morph", None)
    if morph is not None:
        shader.uniform_sampler("morph_deltas", morph[0])
        shader.uniform_sampler("morph_weights", morph[1])
        shader.uniform_int("morph_mode", 1)
    else:
        shader.uniform_sampler("morph_deltas", identity)
        shader.uniform_sampler("morph_weights", identity)
        shader.uniform_int("morph_mode", 0)


def bind_deform(shader, item) -> None:
    """Morph and skinning uniforms of a RenderItem drawn alone: every geometry pass calls this
    per draw (instanced draws: engine/gpu/passes/instancing.py).  The unused samplers take the
    identity palette of the backend that made the item's stream."""
    identity = item.stream.identity
    bind_skinning(shader, item.palette, item.influences, identity)
    bind_morph(shader, item.stream, identity)
    entries = getattr(item.stream, "skin_entries", None)
    shader.uniform_sampler("skin_entries", entries if entries is not None else identity)
    bind_single(shader, identity)


def bind_single(shader, identity) -> None:
    """A one-object draw: the shader's own model matrix and object id (instance_mode 0)."""
    shader.uniform_sampler("instance_data", identity)
    shader.uniform_int("instance_mode", 0)


def bind_skinning(shader, palette, influences: int, identity) -> None:
    """Set the shared skinning uniforms for one draw (all passes call this)."""
    tex = palette_texture(palette) if influences else None
    ready = palette is not None and tex is not None and (getattr(palette, "is_gpu_ready", lambda: True)())
    if influences and ready:
        shader.uniform_sampler("skin_palette", tex)
        shader.uniform_int("skin_influences", int(influences))
    else:
        shader.uniform_sampler("skin_palette", identity)
        shader.uniform_int("skin_influences", 0)


def _kept(weights) -> np.ndarray:
    """The morph weights a stream keeps: frozen ones as they are (``MorphState.frozen_weights``:
    nobody changes them), anything else copied."""
    if is_frozen(weights) and weights.dtype == np.float32 and weights.ndim == 1:
        return weights
    return np.array(weights, np.float32).ravel()
