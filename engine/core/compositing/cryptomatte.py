"""Cryptomatte as Blender writes it (blenkernel cryptomatte.cc; the Cryptomatte 1.2 spec).

- An id is MurmurHash3_32 (seed 0) of the UTF-8 name (object, material, or the asset: the
  object's top-most parent), stored as the float32 with those bits, its exponent clamped to
  1..254 so it is never a denormal, infinity or NaN (``encode``).
- A type's pass "CryptoObject" (Material, Asset) is written as ranked layers CryptoObject00,
  01, ... of RGBA = (id, coverage, id, coverage): *Levels* (``pass_cryptomatte_depth``) ids per
  pixel, largest coverage first, ``ceil(levels / 2)`` layers; 0 where a rank is empty.
- Metadata per type: ``cryptomatte/<key>/name`` = "<view layer>.CryptoObject", ``/hash`` =
  "MurmurHash3_32", ``/conversion`` = "uint32_to_float32", ``/manifest`` = {name: 8-hex id};
  ``key``: the first 7 hex digits of the hash of that name.

``rank(samples, ids, levels)`` is the per-frame kernel: numpy over whole images, one step per
sample (never per pixel): coverage of each distinct id among a pixel's samples (equal weights;
the anti-aliasing samples are a box filter over the pixel), sorted per pixel.
"""
from __future__ import annotations

import json

import numpy as np

TYPES = ("Object", "Material", "Asset")


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86 32-bit of ``data``."""
    c1, c2, m = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF
    h = seed & m
    n = len(data) // 4 * 4
    for i in range(0, n, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * c1) & m
        k = ((k << 15) | (k >> 17)) & m
        k = (k * c2) & m
        h ^= k
        h = ((h << 13) | (h >> 19)) & m
        h = (h * 5 + 0xE6546B64) & m
    tail = data[n:]
    k = 0
    for j in range(len(tail) - 1, -1, -1):
        k = (k << 8) | tail[j]
    if tail:
        k = (k * c1) & m
        k = ((k << 15) | (k >> 17)) & m
        k = (k * c2) & m
        h ^= k
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & m
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & m
    h ^= h >> 16
    return h


def name_hash(name: str) -> int:
    return murmur3_32(name.encode("utf-8"))


def encode(h) -> np.ndarray:
    """uint32 hash(es) -> the float32 Blender stores (exponent clamped to 1..254)."""
    h = np.asarray(h, np.uint32)
    exp = np.clip((h >> np.uint32(23)) & np.uint32(0xFF), 1, 254).astype(np.uint32)
    bits = (h & np.uint32(0x807FFFFF)) | (exp << np.uint32(23))
    return bits.view(np.float32)


def layer_count(levels: int) -> int:
    return (max(1, int(levels)) + 1) // 2


def pass_names(kind: str, levels: int) -> list:
    """The ranked layers of ``kind`` (Object, Material, Asset): CryptoObject00, ..."""
    return [f"Crypto{kind}{i:02d}" for i in range(layer_count(levels))]


def metadata(layer_name: str, kind: str, names) -> dict:
    """{stamp field: value} Blender writes for ``kind`` on view layer ``layer_name``; ``names``:
    the names the manifest lists."""
    full = f"{layer_name}.Crypto{kind}"
    key = f"cryptomatte/{name_hash(full):08x}"[:19]
    manifest = json.dumps({n: f"{name_hash(n):08x}" for n in sorted(set(names))},
                          ensure_ascii=False, separators=(",", ":"))
    return {f"{key}/name": full, f"{key}/hash": "MurmurHash3_32",
            f"{key}/conversion": "uint32_to_float32", f"{key}/manifest": manifest}


def _rank_columns(s: np.ndarray, ids: np.ndarray, wts: np.ndarray, slots: int, levels: int) -> np.ndarray:
    """(slots, 2, P) float32 (encoded id, coverage) of the first ``levels`` ranks of the (n, P)
    keys ``s`` (the other slots 0)."""
    n = s.shape[0]
    hs = ids[np.clip(s, 0, len(ids) - 1)]                       # (n, P) hashes
    valid = (s > 0) & (s < len(ids)) & (hs != 0)
    cov = np.zeros(s.shape, np.float64)
    first = valid.copy()
    for i in range(n):                          # (n samples: n^2 whole-image steps, never per pixel)
        same = (hs == hs[i]) & valid & valid[i]
        cov[i] = (same * wts[:, None]).sum(0)
        if i:
            first[i] &= ~((hs[:i] == hs[i]) & valid[:i]).any(0)
    cov = np.where(first, cov, -1.0)            # each distinct id once, at its first sample
    order = np.argsort(-cov, axis=0, kind="stable")
    out = np.zeros((slots, 2, s.shape[1]), np.float32)
    enc = encode(hs)
    for r in range(min(slots, n, levels)):
        pick = order[r][None]
        c = np.take_along_axis(cov, pick, 0)[0]
        has = c > 0.0
        out[r, 0] = np.where(has, np.take_along_axis(enc, pick, 0)[0], np.float32(0.0))
        out[r, 1] = np.where(has, c, 0.0)
    return out


def rank(samples: np.ndarray, ids: np.ndarray, levels: int, weights=None, uniform=None) -> list:
    """Ranked (id, coverage) layers of one type.

    ``samples``: (n, H, W) integer keys, one image per anti-aliasing sample (0: nothing drawn);
    ``ids``: key -> uint32 hash of this type (a key whose entry is 0 counts as nothing, e.g. an
    object without material in the Material type); ``weights``: (n,) sample weights (default
    equal, summing to 1); ``uniform``: (H, W) bool, pixels whose samples all hold the same key
    (computed when not given; ``uniform_pixels``): those take their one id with coverage 1
    (its weights' sum) without the general ranking, which runs on the rest (the edges) only.
    Returns ``layer_count(levels)`` arrays (H, W, 4) float32: (id, coverage, id, coverage)."""
    samples = np.asarray(samples)
    n, h, w = samples.shape
    wts = np.full(n, 1.0 / n) if weights is None else np.asarray(weights, np.float64)
    ids = np.asarray(ids, np.uint32)
    count = layer_count(levels)
    s = samples.reshape(n, -1)
    uni = (uniform_pixels(samples) if uniform is None else np.asarray(uniform, bool)).reshape(-1)
    layers = [np.zeros((h * w, 4), np.float32) for _ in range(count)]
    # rank 0 of the uniform pixels: coverage 1 (dense writes: a scatter to most pixels is slower);
    # per key first (its encoded id, 0 for nothing), then one gather per pixel
    enc = encode(ids)
    enc[(ids == 0) | (np.arange(len(ids)) == 0)] = 0.0
    enc = np.append(enc, np.float32(0.0))                       # (keys out of range: nothing)
    k0 = np.where(uni, s[0], len(ids))
    k0[(k0 < 0) | (k0 > len(ids))] = len(ids)
    e0 = enc[k0]
    layers[0][:, 0] = e0
    layers[0][:, 1] = np.where(e0 != 0, np.float32(wts.sum()), np.float32(0.0))
    mixed = np.flatnonzero(~uni)                 # the edge pixels: few
    if mixed.size:
        ranked = _rank_columns(s[:, mixed], ids, wts, 2 * count, max(1, int(levels)))
        for r in range(2 * count):
            layers[r // 2][mixed, 2 * (r % 2)] = ranked[r, 0]
            layers[r // 2][mixed, 2 * (r % 2) + 1] = ranked[r, 1]
    return [a.reshape(h, w, 4) for a in layers]


def uniform_pixels(samples: np.ndarray) -> np.ndarray:
    """(H, W) bool: every sample of the pixel holds the same key (shared by the three types)."""
    samples = np.asarray(samples)
    return (samples == samples[:1]).all(0)
