"""One weighted accumulator per target set (no bpy; numpy only), in the spirit of three.js
``PropertyMixer``: every source of a frame (a clip, the outgoing clip of a crossfade, a baked
clip's local matrices, a crowd's shared clip, the panel's morph override) calls
``accumulate(rows, values, weight)``; ``apply(original)`` then gives the blend.  A crossfade only
changes weights.

Accumulation is progressive, as three.js does it: the first source of a row is taken as is; a
later source with weight ``w`` over the ``W`` accumulated so far mixes in by ``w / (W + w)``
(translations, scales, matrices and morph weights linearly, rotations by shortest-path slerp).
Two sources with weights ``1 - a`` and ``a`` therefore give exactly ``lerp`` / ``slerp`` at ``a``.
``apply`` mixes a row whose accumulated weight is below 1 with its original value by the weight
left (the bind pose for TRS, 0 for morph weights), so a source alone at weight ``a`` fades in.
"""
from __future__ import annotations

import numpy as np

from .sampling import slerp


class _Accumulator:
    """Rows of fixed-width values with their accumulated weights."""

    width = 1

    def __init__(self, count: int):
        self.count = int(count)
        self.weight = np.zeros(self.count)
        self.touched = False

    def reset(self) -> None:
        if self.touched:
            self.weight[:] = 0.0
            self.touched = False

    def _mix_factor(self, rows: np.ndarray, weight):
        """(first mask, mix factor per row) for a source of ``weight`` on ``rows``; updates the
        accumulated weights."""
        w = np.broadcast_to(np.asarray(weight, np.float64), rows.shape)
        cum = self.weight[rows]
        first = cum <= 0.0
        total = cum + w
        with np.errstate(divide="ignore", invalid="ignore"):
            mix = np.where(total > 0.0, w / total, 0.0)
        self.weight[rows] = total
        self.touched = True
        return first, mix

    def accumulated_rows(self) -> np.ndarray:
        return np.flatnonzero(self.weight > 0.0)


class TRSMixer(_Accumulator):
    """Local translation, rotation (wxyz) and scale per node."""

    def __init__(self, count: int):
        super().__init__(count)
        self.t = np.zeros((self.count, 3))
        self.q = np.zeros((self.count, 4))
        self.q[:, 0] = 1.0
        self.s = np.ones((self.count, 3))

    def accumulate(self, rows, t, q, s, weight=1.0) -> None:
        """Mix one source's rows (unique node indices) with ``weight`` (scalar or per row)."""
        rows = np.asarray(rows, np.int64)
        if rows.size == 0:
            return
        first, mix = self._mix_factor(rows, weight)
        t = np.asarray(t, np.float64)
        q = np.asarray(q, np.float64)
        s = np.asarray(s, np.float64)
        m = mix[:, None]
        # a first source is taken as is (mix 1); the others blend in by w / (W + w)
        m = np.where(first[:, None], 1.0, m)
        self.t[rows] = self.t[rows] * (1.0 - m) + t * m
        self.s[rows] = self.s[rows] * (1.0 - m) + s * m
        a = np.where(first, 1.0, mix)
        self.q[rows] = np.where(first[:, None], q, slerp(self.q[rows], q, a))

    def apply(self, rows, bind_t, bind_q, bind_s):
        """(T, Q, S) of ``rows``: the blend, mixed with the bind values by the weight left where
        the accumulated weight is below 1 (rows no source wrote are the bind values)."""
        rows = np.asarray(rows, np.int64)
        cum = self.weight[rows]
        t, q, s = self.t[rows].copy(), self.q[rows].copy(), self.s[rows].copy()
        low = cum < 1.0
        if low.any():
            a = cum[low]          # bind first, the blend with its weight (0: the bind values)
            bt = np.asarray(bind_t, np.float64)[low]
            bq = np.asarray(bind_q, np.float64)[low]
            bs = np.asarray(bind_s, np.float64)[low]
            t[low] = bt * (1.0 - a[:, None]) + t[low] * a[:, None]
            s[low] = bs * (1.0 - a[:, None]) + s[low] * a[:, None]
            q[low] = slerp(bq, q[low], a)
        return t, q, s


class MatrixMixer(_Accumulator):
    """Local 4x4 matrices (a baked clip's), blended linearly."""

    def __init__(self, count: int):
        super().__init__(count)
        self.m = np.zeros((self.count, 4, 4))

    def accumulate(self, rows, matrices, weight=1.0) -> None:
        rows = np.asarray(rows, np.int64)
        if rows.size == 0:
            return
        first, mix = self._mix_factor(rows, weight)
        m = np.where(first, 1.0, mix)[:, None, None]
        self.m[rows] = self.m[rows] * (1.0 - m) + np.asarray(matrices, np.float64) * m

    def apply(self, rows, original):
        rows = np.asarray(rows, np.int64)
        cum = self.weight[rows][:, None, None]
        out = self.m[rows].copy()
        low = cum[:, 0, 0] < 1.0
        if low.any():
            a = cum[low]
            out[low] = np.asarray(original, np.float64)[low] * (1.0 - a) + out[low] * a
        return out


class MorphMixer(_Accumulator):
    """Morph weights per channel (a key list the sources index into); the original is 0."""

    def __init__(self, count: int):
        super().__init__(count)
        self.v = np.zeros(self.count)

    def accumulate(self, rows, values, weight=1.0) -> None:
        rows = np.asarray(rows, np.int64)
        if rows.size == 0:
            return
        first, mix = self._mix_factor(rows, weight)
        m = np.where(first, 1.0, mix)
        self.v[rows] = self.v[rows] * (1.0 - m) + np.asarray(values, np.float64) * m

    def apply(self) -> np.ndarray:
        """Every channel's blend (channels below weight 1 fade towards 0; unwritten ones are 0)."""
        return self.v * np.minimum(self.weight, 1.0)
