"""The small GPU-resource interface the runtime core talks to (no bpy, no gpu here).

``RuntimeBackend`` is implemented by the GPU backend (``engine/gpu/backend.py``, palette texture or
storage buffer, GPUVertBuf/GPUBatch streams) and by ``CpuBackend`` below (arrays + counters, with
switchable failures) for tests and CPU-only tools.

Contract
--------
* ``create_palette_buffer(joint_count) -> handle``: a reusable palette buffer for ``joint_count``
  matrices; may return None or raise on failure.
* ``upload_palette(handle, matrices) -> bool``: ``matrices`` is ``(J,4,4) float32``, C-contiguous,
  column-vector convention (``p' = M @ p``; ``matrices[j, :3, 3]`` is the translation). A GLSL
  ``mat4`` built column by column from texels needs ``matrices[j].T`` flattened, i.e. the rows of
  ``np.transpose(matrices, (0, 2, 1))``.
* ``release_palette(handle)``.
* ``is_palette_valid(handle) -> bool``: default ``handle is not None``.
* ``create_stream(primitive, positions=None, normals=None, tangents=None) -> stream``: one
  immutable vertex stream (all attributes of ``primitive``: positions, normals, tangents, uv0,
  joints, weights, smooth normals, vertex colours, indices) with the given arrays replacing the asset's base
  arrays (None = the asset's own). ``positions``/``normals`` are ``(V,3) float32``,
  ``tangents`` ``(V,4) float32`` (xyz + the base handedness sign), ``smooth_normals`` (V,3) the
  outline's morphed smooth normals. A drawn GPUVertBuf cannot be
  refilled, so every morph rebuild asks for a new stream. May return None or raise on failure.
* ``release_stream(stream)``.
* ``retain(primitives)``: forget cached per-primitive resources of every other primitive.
* ``supports_shader_morph`` (bool) and ``create_morph_stream(primitive, base_stream, weights)
  -> stream``: a stream that draws ``base_stream`` with ``sum(weights[t] * delta_t)`` composed in
  the vertex shader (``weights``: (T,) float32, muted targets already 0; possibly a read-only
  view of the live MorphState weights, so a backend copies what it keeps).  May return None or
  raise on failure.  Backends without it leave ``supports_shader_morph`` False.
* ``refresh_morph_stream(stream, base_stream, weights) -> bool`` (optional): give a stream of
  ``create_morph_stream`` still drawing ``base_stream`` new ``weights`` in place; False (nothing
  changed) when it cannot, and the caller makes a new stream.
"""
from __future__ import annotations

import itertools
from typing import Optional

import numpy as np


class RuntimeBackend:
    """Abstract backend. Subclasses override every method."""

    name = "abstract"
    supports_shader_morph = False

    def create_palette_buffer(self, joint_count: int):
        raise NotImplementedError

    def upload_palette(self, handle, matrices: np.ndarray) -> bool:
        raise NotImplementedError

    def release_palette(self, handle) -> None:
        raise NotImplementedError

    def is_palette_valid(self, handle) -> bool:
        return handle is not None

    def create_stream(self, primitive, positions=None, normals=None, tangents=None, cache_static: bool = True,
                      smooth_normals=None):
        raise NotImplementedError

    def retain(self, primitives) -> None:
        """Drop per-primitive caches of primitives not in ``primitives`` (default: none kept)."""

    def release_stream(self, stream) -> None:
        raise NotImplementedError


class CpuPaletteBuffer:
    def __init__(self, joint_count: int):
        self.joint_count = int(joint_count)
        self.matrices: Optional[np.ndarray] = None
        self.upload_count = 0
        self.released = False


class CpuStream:
    smooth_normals: Optional[np.ndarray]   # set by CpuBackend.create_stream

    def __init__(self, primitive, positions, normals, tangents, stream_id: int = 0):
        self.id = stream_id          # numbered by the backend that made it
        self.primitive = primitive
        self.positions = positions
        self.normals = normals
        self.tangents = tangents
        self.colors = getattr(primitive, "colors", None)   # static: the vertex colours never morph
        self.released = False

    @property
    def vertex_count(self) -> int:
        return int(self.positions.shape[0])


class CpuMorphStream:
    """What a shader-morph stream holds on the CPU backend: the base stream and the weights."""

    def __init__(self, base, weights, stream_id: int = 0):
        self.id = stream_id          # numbered by the backend that made it (negative)
        self.base = base
        self.weights = np.array(weights, dtype=np.float32)
        self.released = False

    @property
    def vertex_count(self) -> int:
        return self.base.vertex_count


class CpuBackend(RuntimeBackend):
    """Keeps arrays in memory and counts calls. Failure switches (for tests):

    * ``fail_palette_create`` / ``fail_stream_create``: bool
    * ``fail_palette_upload``: bool, or a set of handles whose uploads fail
    """

    name = "cpu"

    def __init__(self):
        self.fail_palette_create = False
        self.fail_palette_upload: bool | set = False
        self.fail_stream_create = False
        self.palette_buffers_created = 0
        self.palette_uploads = 0
        self.palettes_released = 0
        self.streams_created = 0
        self.streams_released = 0
        self.live_streams = set()
        self._stream_ids = itertools.count(1)     # this backend's stream numbers

    def create_palette_buffer(self, joint_count: int):
        if self.fail_palette_create or int(joint_count) <= 0:
            return None
        self.palette_buffers_created += 1
        return CpuPaletteBuffer(joint_count)

    def upload_palette(self, handle, matrices: np.ndarray) -> bool:
        fail = self.fail_palette_upload
        if fail is True or (isinstance(fail, (set, frozenset, list, tuple)) and handle in fail):
            return False
        if handle is None or handle.released:
            return False
        m = np.asarray(matrices)
        if m.dtype != np.float32 or m.shape != (handle.joint_count, 4, 4):
            return False
        handle.matrices = m.copy()
        handle.upload_count += 1
        self.palette_uploads += 1
        return True

    def release_palette(self, handle) -> None:
        if handle is not None and not handle.released:
            handle.released = True
            self.palettes_released += 1

    def is_palette_valid(self, handle) -> bool:
        return handle is not None and not handle.released

    def create_stream(self, primitive, positions=None, normals=None, tangents=None, cache_static: bool = True,
                      smooth_normals=None):
        if self.fail_stream_create:
            return None
        s = CpuStream(primitive,
                      primitive.positions if positions is None else positions,
                      primitive.normals if normals is None else normals,
                      primitive.tangents if tangents is None else tangents, next(self._stream_ids))
        s.smooth_normals = primitive.smooth_normals if smooth_normals is None else smooth_normals
        self.streams_created += 1
        self.live_streams.add(s.id)
        return s

    def create_morph_stream(self, primitive, base_stream, weights):
        """Only when a test sets ``supports_shader_morph``; fails like ``create_stream``."""
        if self.fail_stream_create or not self.supports_shader_morph or base_stream is None:
            return None
        s = CpuMorphStream(base_stream, weights, -next(self._stream_ids))
        self.streams_created += 1
        self.live_streams.add(s.id)
        return s

    def release_stream(self, stream) -> None:
        if stream is not None and not stream.released:
            stream.released = True
            self.streams_released += 1
            self.live_streams.discard(stream.id)
