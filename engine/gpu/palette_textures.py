"""The GPU side's textures that are not vertex streams: skinning palettes (``GpuPaletteBuffer``:
rows kept on the CPU, the RGBA32F texture made on first draw), matrix rows, float textures for
morph data and the one-joint identity palette."""
from __future__ import annotations

import numpy as np

from .layout import MORPH_TEX_WIDTH

_IDENTITY_ROWS = np.eye(4, dtype=np.float32).T.ravel()   # column-major = 4 texels of one row


def matrix_rows(matrices: np.ndarray) -> np.ndarray:
    """(J,4,4) column-vector matrices -> (J*16,) float32 texels of a (4, J) RGBA32F texture."""
    return np.ascontiguousarray(np.asarray(matrices, dtype=np.float32).transpose(0, 2, 1)).ravel()


def rows_texture(rows: np.ndarray, width: int = 4):
    """A (width, len(rows) / (4 * width)) RGBA32F texture of float32 ``rows``."""
    import gpu

    rows = np.ascontiguousarray(rows, np.float32).ravel()
    h = max(1, rows.size // (4 * width))
    return gpu.types.GPUTexture((width, h), format="RGBA32F", data=gpu.types.Buffer("FLOAT", rows.size, rows))


class SliceSource:
    """The one texel array of a batched palette upload (``upload_palette_slices``) that its
    buffers view, each its rows; ``version`` counts the uploads, ``intact`` turns False when a
    buffer leaves it (uploaded or released alone), so the next batch call re-attaches them."""

    __slots__ = ("flat", "version", "intact", "ok", "count")

    def __init__(self):
        self.flat: np.ndarray | None = None
        self.version = 0
        self.intact = True
        self.ok = []
        self.count = 0


class GpuPaletteBuffer:
    """A palette's GPU storage.  An upload keeps the texels in ``rows`` ((J*16,) float32,
    column-major per joint; after a batched palette update a view of the batch's one texel
    array, no copy: the buffer reads it from the batch's ``SliceSource``, so a batched upload
    makes no per-buffer step) and drops the texture: ``palette_texture`` makes the RGBA32F
    texture on the first draw of the palette alone, and instanced draws put the palettes of many
    instances into one texture (engine/gpu/passes/instancing.py), so a crowd drawn grouped makes no
    texture per palette per frame."""

    __slots__ = ("joint_count", "_texture", "_uploads", "_rows", "_src", "_seen", "_base")

    def __init__(self, joint_count: int):
        self.joint_count = int(joint_count)
        self._texture = None
        self._uploads = 0
        self._rows = None
        self._src = None          # (source, first row, end row) while a batched upload holds the rows
        self._seen = -1           # the source's version the texture was made from
        self._base = 0            # the source's version when attached (uploads counted since)

    @property
    def valid(self) -> bool:
        return self.joint_count > 0

    def _attach(self, src: SliceSource, a: int, b: int) -> None:
        self._detach()
        self._src = (src, a, b)
        self._base = src.version
        self._texture = None

    def _detach(self) -> None:
        s = self._src
        if s is not None:
            src = s[0]
            self._rows, self._texture, self._uploads = self.rows, self.texture, self.uploads
            self._src = None
            src.intact = False

    @property
    def rows(self):
        s = self._src
        if s is None:
            return self._rows
        flat = s[0].flat
        return None if flat is None else flat[16 * s[1]:16 * s[2]]

    @rows.setter
    def rows(self, value) -> None:
        self._detach()
        self._rows = value

    @property
    def texture(self):
        s = self._src
        if s is not None and self._seen != s[0].version:
            return None              # made from an older upload
        return self._texture

    @texture.setter
    def texture(self, value) -> None:
        s = self._src
        if s is not None:
            self._seen = s[0].version
        self._texture = value

    @property
    def uploads(self) -> int:
        s = self._src
        return self._uploads + (0 if s is None else s[0].version - self._base)

    @uploads.setter
    def uploads(self, value: int) -> None:
        self._detach()
        self._uploads = int(value)


def float_texture(values: np.ndarray, channels: int):
    """A 2-D float texture MORPH_TEX_WIDTH texels wide (narrower when fewer) holding ``values``
    ((N, channels) float32) at texel i = (i % width, i // width); the tail is zero-padded."""
    import gpu

    values = np.asarray(values, np.float32).reshape(-1, channels)
    n = max(1, values.shape[0])
    w = min(MORPH_TEX_WIDTH, n)
    h = -(-n // w)
    limit = gpu.capabilities.max_texture_size_get()
    if h > limit:
        raise ValueError(f"{values.shape[0]} texels exceed the largest texture ({w}x{limit})")
    if values.shape[0] == w * h and values.flags.c_contiguous:
        data = values                 # already whole rows: no padded copy
    else:
        data = np.zeros((w * h, channels), np.float32)
        data[:values.shape[0]] = values
    fmt = {1: "R32F", 4: "RGBA32F"}[channels]
    return gpu.types.GPUTexture((w, h), format=fmt, data=gpu.types.Buffer("FLOAT", data.size, data.ravel()))

def identity_texture():
    """A one-joint identity palette (4 texels), bound where a sampler must be bound but nothing
    is read (static geometry, no morphs, single draws).  Made by ``GpuBackend.identity_texture``,
    which keeps it with the backend's other GPU objects."""
    import gpu

    return gpu.types.GPUTexture((4, 1), format="RGBA32F", data=gpu.types.Buffer("FLOAT", 16, _IDENTITY_ROWS))


def palette_handle(palette):
    """The GpuPaletteBuffer of a runtime SkinningPalette (None when it has none)."""
    if palette is None:
        return None
    for attr in ("gpu_buffer", "buffer", "handle"):
        handle = getattr(palette, attr, None)
        if handle is not None:
            return handle
    return None


def palette_texture(palette):
    """The texture of a runtime SkinningPalette (None when not GPU-ready): made from the
    uploaded rows on first use after an upload and kept until the next one."""
    h = palette_handle(palette)
    tex = getattr(h, "texture", None)
    if tex is None and h is not None and getattr(h, "rows", None) is not None:
        tex = h.texture = rows_texture(h.rows)
    return tex
