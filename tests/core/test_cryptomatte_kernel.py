"""engine/core/compositing/cryptomatte.py against the plain formulas: MurmurHash3_32 of names
Blender hashed (ids read from an EEVEE file's manifest), the float encoding, and the ranking
against a per-pixel loop."""
from __future__ import annotations

import importlib.util
import pathlib

import numpy as np

_path = pathlib.Path(__file__).resolve().parents[2] / "engine" / "core" / "compositing" / "cryptomatte.py"
_spec = importlib.util.spec_from_file_location("cm_kernel", _path)
assert _spec is not None and _spec.loader is not None, _path
cm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cm)


def test_hash_and_encoding_as_blender():
    # ids from the manifest and layer keys EEVEE (Blender 5.2) wrote for these names
    assert [f"{cm.name_hash(n):08x}" for n in ("Ball", "Box", "Ground", "Red", "Grey", "Blue")] == \
        ["74d3ebe9", "803b1009", "24950135", "6e1a9181", "f970f186", "e2911aba"]
    assert f"{cm.name_hash('ViewLayer.CryptoObject'):08x}"[:7] == "542cafa"
    assert f"{cm.name_hash('ViewLayer.CryptoMaterial'):08x}"[:7] == "c7dbf5e"
    assert f"{cm.name_hash('ViewLayer.CryptoAsset'):08x}"[:7] == "aa21542"
    # Box's exponent bits are 0: stored with exponent 1 (as EEVEE's file holds it)
    assert cm.encode([0x803B1009]).view(np.uint32)[0] == 0x80BB1009
    assert cm.encode([0x7F800001]).view(np.uint32)[0] == 0x7F000001          # never inf / NaN
    assert cm.name_hash("ä") == cm.murmur3_32("ä".encode())
    assert cm.pass_names("Object", 6) == ["CryptoObject00", "CryptoObject01", "CryptoObject02"]
    assert len(cm.pass_names("Asset", 3)) == 2


def _plain(samples, ids, levels):
    n, h, w = samples.shape
    out = np.zeros((h, w, 4 * cm.layer_count(levels)), np.float32)
    for y in range(h):
        for x in range(w):
            cov = {}
            order = []
            for i in range(n):
                k = int(samples[i, y, x])
                if k <= 0 or k >= len(ids) or ids[k] == 0:
                    continue
                hid = int(ids[k])
                if hid not in cov:
                    order.append(hid)
                cov[hid] = cov.get(hid, 0.0) + 1.0 / n
            ranked = sorted(order, key=lambda hh: -cov[hh])[:levels]
            for r, hid in enumerate(ranked):
                out[y, x, 2 * r] = cm.encode([hid])[0]
                out[y, x, 2 * r + 1] = cov[hid]
    return out


def test_rank_matches_the_per_pixel_formula():
    rng = np.random.default_rng(3)
    # keys 1..5; keys 2 and 4 share a hash (one object, two materials); key 5 has none (no material)
    ids = np.array([0, 11, 22, 33, 22, 0], np.uint32)
    ids[1:5] = [cm.name_hash(n) for n in ("A", "B", "C", "B")]
    for n, levels in ((8, 6), (5, 2), (1, 6), (8, 3)):
        samples = rng.integers(0, 6, size=(n, 7, 9))
        got = np.concatenate(cm.rank(samples, ids, levels), -1)
        want = _plain(samples, ids, levels)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got[..., 0::2].view(np.uint32), want[..., 0::2].view(np.uint32))
        np.testing.assert_allclose(got[..., 1::2], want[..., 1::2], atol=1e-6)
