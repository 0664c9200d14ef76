"""MorphState: per-instance morph (shape key) weights with a change version (seed: MorphState).

Deviation from the seed (Blender mapping): weights are clamped to each target's own
``[weight_min, weight_max]`` (the shape key's slider range) instead of [0, 1].
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from .pose import next_version

#: distinct frozen weight arrays a MorphEpoch keeps for sharing (then it starts anew)
FROZEN_KEPT = 256


def is_frozen(a) -> bool:
    """Whether ``a`` is an array nobody can change under its keeper: read-only and owning its
    memory (``MorphState.frozen_weights``; a read-only view of live weights is not)."""
    return isinstance(a, np.ndarray) and a.base is None and not a.flags.writeable


class MorphEpoch:
    """A change counter shared by the MorphStates of one runtime (``SceneRuntime.morph_epoch``):
    bumped with every version change of any of them, so a runtime that saw the same value on its
    last frame knows none of its weights changed since (SceneRuntime skips its idle instances)."""

    __slots__ = ("value", "frozen")

    def __init__(self):
        self.value = 0
        # weights bytes -> the one frozen array of them (MorphState.frozen_weights): the states
        # at the same weights (linked duplicates) hand out the same object, so what is keyed by
        # identity downstream (bounds, weight textures, rebuilds) is found once per weights
        self.frozen: dict = {}


class MorphState:
    def __init__(self, targets: Optional[Sequence] = None, epoch: Optional[MorphEpoch] = None):
        self._epoch = epoch if epoch is not None else MorphEpoch()    # (its own when alone)
        self._weights = np.zeros(0, dtype=np.float32)
        self._min = np.zeros(0, dtype=np.float32)
        self._max = np.zeros(0, dtype=np.float32)
        self._active = 0
        self._version = 0
        self._idx_cache = None     # (index array, checked indices, keep, min, max, length)
        self._frozen = None        # (version, read-only copy of the weights): frozen_weights
        if targets is not None:
            self.initialize(targets)

    # ---------------------------------------------------------------- lifecycle
    def initialize(self, targets=None, weight_min=None, weight_max=None) -> bool:
        """From MorphTargetAsset-like objects (weight_min/weight_max) or explicit range arrays."""
        if targets is not None:
            lo = np.array([float(t.weight_min) for t in targets], dtype=np.float32)
            hi = np.array([float(t.weight_max) for t in targets], dtype=np.float32)
        else:
            lo = np.asarray(weight_min, dtype=np.float32).reshape(-1)
            hi = np.asarray(weight_max, dtype=np.float32).reshape(-1)
            if lo.shape != hi.shape:
                return False
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(lo <= hi)):
            return False
        self._min = lo
        self._max = hi
        self._idx_cache = None
        self._weights = np.zeros(lo.shape[0], dtype=np.float32)
        self._active = 0
        self._version = next_version(self._version)
        self._epoch.value += 1
        return True

    def clear(self) -> None:
        self._idx_cache = None
        self._weights = np.zeros(0, dtype=np.float32)
        self._min = np.zeros(0, dtype=np.float32)
        self._max = np.zeros(0, dtype=np.float32)
        self._active = 0
        self._version = next_version(self._version)
        self._epoch.value += 1

    # ---------------------------------------------------------------- queries
    @property
    def target_count(self) -> int:
        return int(self._weights.shape[0])

    @property
    def active_count(self) -> int:
        """Number of non-zero weights, maintained incrementally (O(1))."""
        return self._active

    @property
    def version(self) -> int:
        return self._version

    @property
    def weights(self) -> np.ndarray:
        v = self._weights.view()
        v.flags.writeable = False
        return v

    def frozen_weights(self) -> np.ndarray:
        """A read-only copy of the weights that owns its memory, the same object until the
        version changes: whoever keeps it (a stream, a bounds memo) needs no copy, and one
        identity test tells that the weights are those it kept."""
        f = self._frozen
        if f is None or f[0] != self._version:
            shared = self._epoch.frozen
            key = self._weights.tobytes()
            a = shared.get(key)
            if a is None:
                if len(shared) >= FROZEN_KEPT:
                    shared.clear()
                a = self._weights.copy()
                a.flags.writeable = False
                shared[key] = a
            f = self._frozen = (self._version, a)
        return f[1]

    def weight(self, index: int) -> float:
        return float(self._weights[int(index)])

    def active_indices(self) -> np.ndarray:
        return np.flatnonzero(self._weights)

    # ---------------------------------------------------------------- writes
    def set_weight(self, index: int, weight: float) -> bool:
        """Clamp to the target's range, exact compare, O(1) active-count maintenance.

        Returns False for an invalid index or a non-finite weight, True otherwise (changed or not).
        """
        i = int(index)
        if not (0 <= i < self._weights.shape[0]):
            return False
        w = float(weight)
        if not np.isfinite(w):
            return False
        new = np.float32(min(max(w, float(self._min[i])), float(self._max[i])))
        old = self._weights[i]
        if new == old:
            return True
        if old == 0.0 and new != 0.0:
            self._active += 1
        elif old != 0.0 and new == 0.0:
            self._active -= 1
        self._weights[i] = new
        self._version = next_version(self._version)
        self._epoch.value += 1
        return True

    def set_weights(self, indices, values, finite: bool = False) -> bool:
        """Vectorised set_weight: one version bump when anything changed (last duplicate wins).
        ``finite``: the caller checked that every value is finite.

        A read-only index array (what SceneRuntime passes every frame) is checked once and its
        checks, duplicate selection and clamp ranges are reused while the same array comes back."""
        cached = self._idx_cache
        if cached is not None and indices is cached[0]:
            _, idx, keep, lo, hi, length = cached
            val = np.asarray(values, dtype=np.float64).reshape(-1)
            if val.shape[0] != length:
                return False
        else:
            idx = np.asarray(indices, dtype=np.int64).reshape(-1)
            val = np.asarray(values, dtype=np.float64).reshape(-1)
            if idx.shape != val.shape:
                return False
            if idx.size == 0:
                return True
            n = self._weights.shape[0]
            if idx.min() < 0 or idx.max() >= n:
                return False
            keep = None
            if idx.size > 1 and not (idx[1:] > idx[:-1]).all() and np.unique(idx).size != idx.size:
                # keep the last occurrence of each index
                rev_u, rev_first = np.unique(idx[::-1], return_index=True)
                keep = idx.size - 1 - rev_first
                idx = idx[keep]
            lo, hi = self._min[idx], self._max[idx]
            if idx.shape[0] == n and keep is None and (idx == np.arange(n)).all():
                idx = slice(None)          # every target in order: whole-array reads and writes
            if isinstance(indices, np.ndarray) and not indices.flags.writeable:
                self._idx_cache = (indices, idx, keep, lo, hi, val.shape[0])
        if val.shape[0] == 0:
            return True
        if not finite and not np.isfinite(val).all():
            return False
        if keep is not None:
            val = val[keep]
        new = np.minimum(np.maximum(val, lo), hi).astype(np.float32)   # np.clip, without its overhead
        old = self._weights[idx]
        if (new == old).all():
            return True
        if isinstance(idx, slice):
            self._active = int(np.count_nonzero(new))
        else:
            self._active += int(np.count_nonzero(new)) - int(np.count_nonzero(old))
        self._weights[idx] = new
        self._version = next_version(self._version)
        self._epoch.value += 1
        return True

    def reset(self) -> bool:
        """Zero every weight; bumps the version only when something was active."""
        if self._active == 0:
            return False
        self._weights[:] = 0.0
        self._active = 0
        self._version = next_version(self._version)
        self._epoch.value += 1
        return True
