"""A minimal OpenEXR reader for the tests: uncompressed (``exr_codec = 'NONE'``) scan-line files,
single- or multi-layer, HALF / FLOAT / UINT channels.  bpy has no OpenImageIO module and
``Image.pixels`` of a multilayer EXR shows one pass only, so the compositing tests read the file
Blender wrote with this.  Returns {channel name: (H, W) float32 array}, top row first, like
``Image.pixels`` reshaped and flipped is not: row 0 here is the image's *top* (EXR order)."""
from __future__ import annotations

import struct

import numpy as np

_TYPES = {0: np.dtype("<u4"), 1: np.dtype("<f2"), 2: np.dtype("<f4")}


def _cstr(data: bytes, pos: int):
    end = data.index(b"\0", pos)
    return data[pos:end].decode("latin-1"), end + 1


def read_exr(path) -> dict:
    data = open(path, "rb").read()
    magic, version = struct.unpack_from("<iI", data, 0)
    if magic != 20000630:
        raise ValueError(f"{path}: not an OpenEXR file")
    if version & 0x200 or version & 0x1000:
        raise ValueError(f"{path}: tiled or multi-part EXR is not supported by this reader")
    pos = 8
    header = {}
    while data[pos] != 0:
        name, pos = _cstr(data, pos)
        typ, pos = _cstr(data, pos)
        size = struct.unpack_from("<i", data, pos)[0]
        pos += 4
        header[name] = (typ, data[pos:pos + size])
        pos += size
    pos += 1
    if struct.unpack_from("<B", header["compression"][1], 0)[0] != 0:
        raise ValueError(f"{path}: compressed EXR; write it with exr_codec = 'NONE'")
    chl = header["channels"][1]
    channels = []
    p = 0
    while chl[p] != 0:
        name, p = _cstr(chl, p)
        ptype = struct.unpack_from("<i", chl, p)[0]
        p += 16
        channels.append((name, _TYPES[ptype]))
    x0, y0, x1, y1 = struct.unpack_from("<iiii", header["dataWindow"][1], 0)
    w, h = x1 - x0 + 1, y1 - y0 + 1
    offsets = np.frombuffer(data, "<u8", count=h, offset=pos)
    out = {name: np.zeros((h, w), np.float32) for name, _ in channels}
    for off in offsets:
        y = struct.unpack_from("<i", data, int(off))[0] - y0
        q = int(off) + 8
        for name, dt in channels:
            n = w * dt.itemsize
            out[name][y] = np.frombuffer(data, dt, count=w, offset=q).astype(np.float32)
            q += n
    return out


def layer_pass(channels: dict, prefix: str, suffixes="RGBA") -> np.ndarray:
    """(H, W, len(suffixes)) of the channels ``prefix + '.' + s`` flipped to Blender's bottom-up
    pixel order (as ``Image.pixels`` and the engine's arrays)."""
    return np.stack([channels[f"{prefix}.{s}"] for s in suffixes], -1)[::-1]


def read_exr_header(path) -> dict:
    """The header's string attributes (e.g. Cryptomatte's ``cryptomatte/<key>/manifest``) as
    {name: str}; other attribute types are left out."""
    data = open(path, "rb").read()
    pos = 8
    out = {}
    while data[pos] != 0:
        name, pos = _cstr(data, pos)
        typ, pos = _cstr(data, pos)
        size = struct.unpack_from("<i", data, pos)[0]
        pos += 4
        if typ == "string":
            out[name] = data[pos:pos + size].decode("utf-8", "replace")
        pos += size
    return out
