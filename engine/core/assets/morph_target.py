"""MorphTargetAsset: one shape key of one primitive, stored sparse (made eagerly or, for the
importer's keys, on first use: ``MorphTargetAsset.deferred``). No bpy here."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from .readonly import AssetError, readonly_array


@dataclass(frozen=True, init=False)
class MorphTargetAsset:
    """One shape key of one primitive, stored sparse: the deltas (against its relative key) of the
    primitive vertices it changes.  ``indices`` (K,) int32, ascending and unique, lists every vertex
    whose position, normal or tangent delta is non-zero (int32: 4 bytes a row, where 8 would
    be a third of the rows' own size); ``position_rows`` / ``normal_rows`` /
    ``tangent_rows`` (K,3) float32 hold those vertices' deltas (normals/tangents None when the key
    has none).  Every other vertex has zero deltas.  A key that moves nothing stores zero rows.

    The constructor takes either dense (V,3) ``position_deltas`` / ``normal_deltas`` /
    ``tangent_deltas`` (the importer's form; they are reduced to the sparse form here and not
    kept) or the sparse form directly (``vertex_count``, ``indices``, ``position_rows``, ...).
    ``dense_positions()`` and friends build a dense (V,3) array on demand: they allocate, and are
    meant for tests and tools, never for a per-frame path."""

    name: str                              # display name (stable fallback when the key's name is empty)
    vertex_count: int                      # V: vertices of the primitive
    indices: np.ndarray                    # (K,) int32 ascending vertices with a non-zero delta
    position_rows: np.ndarray              # (K,3) float32
    normal_rows: Optional[np.ndarray]      # (K,3) float32 or None
    tangent_rows: Optional[np.ndarray]     # (K,3) float32 or None
    weight_min: float = 0.0                # the key's slider_min
    weight_max: float = 1.0                # the key's slider_max
    mute: bool = False
    key_name: str = ""                     # the shape key's own name in Blender ('' allowed)

    def __init__(self, name: str, position_deltas=None, normal_deltas=None, tangent_deltas=None,
                 weight_min: float = 0.0, weight_max: float = 1.0, mute: bool = False, key_name: str = "", *,
                 vertex_count: Optional[int] = None, indices=None, position_rows=None, normal_rows=None,
                 tangent_rows=None):
        s = object.__setattr__
        s(self, "name", name)
        s(self, "weight_min", weight_min)
        s(self, "weight_max", weight_max)
        s(self, "mute", mute)
        s(self, "key_name", key_name)
        what = f"morph '{name}'"
        if position_deltas is not None:
            if indices is not None or position_rows is not None:
                raise AssetError(f"{what}: give dense deltas or sparse rows, not both")
            p = _dense_f32(position_deltas, f"{what} positions")
            assert p is not None   # position_deltas is not None here
            n = _dense_f32(normal_deltas, f"{what} normals")
            t = _dense_f32(tangent_deltas, f"{what} tangents")
            v = p.shape[0]
            for a, kind in ((n, "normals"), (t, "tangents")):
                if a is not None and a.shape[0] != v:
                    raise AssetError(f"{what}: {a.shape[0]} {kind} deltas for {v} position deltas")
            keep = _any_row(p)
            for a in (n, t):
                if a is not None:
                    keep |= _any_row(a)
            idx = np.flatnonzero(keep)
            rows = [None if a is None else readonly_array(a[idx], np.float32, (3,)) for a in (p, n, t)]
            s(self, "vertex_count", int(v))
            s(self, "indices", readonly_array(idx, np.int32))
            s(self, "position_rows", rows[0])
            s(self, "normal_rows", rows[1])
            s(self, "tangent_rows", rows[2])
            return
        if normal_deltas is not None or tangent_deltas is not None:
            raise AssetError(f"{what}: normal/tangent deltas without position deltas")
        if vertex_count is None or indices is None or position_rows is None:
            raise AssetError(f"{what}: needs position_deltas, or vertex_count + indices + position_rows")
        idx = np.asarray(indices).reshape(-1)
        v = int(vertex_count)
        k = idx.shape[0]
        if k and (int(idx[0]) < 0 or int(idx[-1]) >= v or bool(np.any(idx[1:] <= idx[:-1]))):
            raise AssetError(f"{what}: indices must be ascending, unique and in [0, {v})")
        idx = readonly_array(idx, np.int32)
        s(self, "vertex_count", v)
        s(self, "indices", idx)
        for field_name, a, kind in (("position_rows", position_rows, "positions"),
                                    ("normal_rows", normal_rows, "normals"),
                                    ("tangent_rows", tangent_rows, "tangents")):
            r = readonly_array(a, np.float32, (3,), f"{what} {kind}")
            if r is not None and r.shape[0] != k:
                raise AssetError(f"{what}: {r.shape[0]} {kind} rows for {k} indices")
            s(self, field_name, r)

    @classmethod
    def deferred(cls, name: str, vertex_count: int, rows, weight_min: float = 0.0, weight_max: float = 1.0,
                 mute: bool = False, key_name: str = "") -> "MorphTargetAsset":
        """A target whose sparse rows are made on first use (an avatar's expression keys mostly
        rest at 0: their normal and tangent deltas are not needed until a weight turns them on).
        ``rows()`` returns ``(indices, position_rows, normal_rows, tangent_rows)`` as the sparse
        constructor takes them (checked as it checks them) and is called at most once, on the
        first read of any of the four.  Everything else reads as from any target."""
        t = object.__new__(cls)
        s = object.__setattr__
        for k, v in (("name", name), ("weight_min", weight_min), ("weight_max", weight_max),
                     ("mute", mute), ("key_name", key_name), ("vertex_count", int(vertex_count)),
                     ("_rows", rows)):
            s(t, k, v)
        return t

    def __getattr__(self, attr):
        # only reached for a deferred target's unset rows (or a name no target has)
        rows = self.__dict__.get("_rows")
        if rows is None or attr not in _DEFERRED_FIELDS:
            raise AttributeError(attr)
        made = MorphTargetAsset(self.name, vertex_count=self.vertex_count,
                                **dict(zip(_DEFERRED_FIELDS, rows())))
        for k in _DEFERRED_FIELDS:
            object.__setattr__(self, k, getattr(made, k))
        object.__setattr__(self, "_rows", None)        # made once: the maker and what it holds go
        return getattr(self, attr)

    @property
    def resolved(self) -> bool:
        """The rows exist (always, but for a ``deferred`` target not read yet)."""
        return self.__dict__.get("_rows") is None

    @property
    def row_count(self) -> int:
        """K: vertices with a non-zero delta."""
        return int(self.indices.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays this target holds."""
        return sum(a.nbytes for a in (self.indices, self.position_rows, self.normal_rows, self.tangent_rows)
                   if a is not None)

    def _dense(self, rows) -> Optional[np.ndarray]:
        if rows is None:
            return None
        out = np.zeros((self.vertex_count, 3), np.float32)
        out[self.indices] = rows
        return out

    def dense_positions(self) -> Optional[np.ndarray]:
        """(V,3) float32 position deltas.  Allocates a new array on every call."""
        return self._dense(self.position_rows)

    def dense_normals(self) -> Optional[np.ndarray]:
        """(V,3) float32 normal deltas (None when the key has none).  Allocates on every call."""
        return self._dense(self.normal_rows)

    def dense_tangents(self) -> Optional[np.ndarray]:
        """(V,3) float32 tangent deltas (None when the key has none).  Allocates on every call."""
        return self._dense(self.tangent_rows)

    def clamp(self, weight: float) -> float:
        return min(max(float(weight), self.weight_min), self.weight_max)


_DEFERRED_FIELDS = ("indices", "position_rows", "normal_rows", "tangent_rows")


def position_extremes(rows) -> tuple:
    """(lower (3,), upper (3,), longest) of (K,3) float32 position delta rows, as float64: the
    per-axis extremes clamped to include 0 and the largest row length (conservative bounds)."""
    if rows is None or rows.shape[0] == 0:
        return np.zeros(3), np.zeros(3), 0.0
    lo = np.minimum(rows.min(axis=0), 0.0).astype(np.float64)
    hi = np.maximum(rows.max(axis=0), 0.0).astype(np.float64)
    r = rows.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):    # a key of 1e30: inf, refused by the caller
        sq = r[:, 0] * r[:, 0]
        sq += r[:, 1] * r[:, 1]
        sq += r[:, 2] * r[:, 2]
    return lo, hi, float(np.sqrt(sq.max()))


def _dense_f32(a, name: str) -> Optional[np.ndarray]:
    """A (V,3) float32 view or copy of ``a`` (None stays None), for reduction to sparse rows."""
    if a is None:
        return None
    arr = np.asarray(a, dtype=np.float32)
    if arr.ndim != 2 or arr.shape[1] != 3:
        if arr.size == 0:
            return arr.reshape(0, 3)
        raise AssetError(f"{name}: expected shape (N, 3), got {arr.shape}")
    return arr


def _any_row(a: np.ndarray) -> np.ndarray:
    """(V,) bool: rows of a (V,3) array with any non-zero component (column-wise, no temporaries
    of the full array)."""
    return (a[:, 0] != 0.0) | (a[:, 1] != 0.0) | (a[:, 2] != 0.0)
