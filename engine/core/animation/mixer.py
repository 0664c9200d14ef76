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

class TRSMixer:
    """Local translation, rotation (wxyz) and scale per node: three properties, each with its own
    accumulated weight per row, so a source may write each property on its own rows (a clip's
    translation, rotation and scale tracks need not cover the same nodes).

    A first source at weight 1 (a clip playing alone: the common frame) is kept as it came, not
    copied: ``tracks`` hands its arrays back unless another source joins."""

    def __init__(self, count: int):
        self.count = int(count)
        self.t = np.zeros((self.count, 3))
        self.q = np.zeros((self.count, 4))
        self.q[:, 0] = 1.0
        self.s = np.ones((self.count, 3))
        self.w = np.zeros((3, self.count))     # accumulated weight per property (t, q, s) and row
        self.touched = False
        self._lone = None       # ((rows, values) per property): a first source at weight 1, uncopied

    @property
    def weight(self) -> np.ndarray:
        """The accumulated weight per row of the translations (the rows a full-row source wrote)."""
        self._spill()
        return self.w[0]

    def reset(self) -> None:
        self._lone = None
        if self.touched:
            self.w[:] = 0.0
            self.touched = False

    def accumulate(self, rows, t, q, s, weight=1.0) -> None:
        """Mix one source's rows (unique node indices) with ``weight`` (scalar or per row)."""
        self.accumulate_tracks(rows, t, rows, q, rows, s, weight)

    def accumulate_tracks(self, t_rows, t, q_rows, q, s_rows, s, weight=1.0) -> None:
        """Mix one source whose properties have rows of their own (``t`` at ``t_rows``...; None:
        the source does not write that property)."""
        if (self._lone is None and not self.touched and isinstance(weight, (float, int))
                and weight == 1.0):
            self._lone = ((t_rows, t), (q_rows, q), (s_rows, s))
            return
        self._spill()
        for k, (rows, vals) in enumerate(((t_rows, t), (q_rows, q), (s_rows, s))):
            if vals is not None:
                self._mix(k, rows, vals, weight)

    def _spill(self) -> None:
        lone = self._lone
        if lone is not None:
            self._lone = None
            for k, (rows, vals) in enumerate(lone):
                if vals is not None:
                    self._mix(k, rows, vals, 1.0)

    def _mix(self, k: int, rows, vals, weight) -> None:
        rows = np.arange(self.count)[rows] if isinstance(rows, slice) else np.asarray(rows, np.int64)
        if rows.size == 0:
            return
        w = np.broadcast_to(np.asarray(weight, np.float64), rows.shape)
        cum = self.w[k, rows]
        first = cum <= 0.0
        total = cum + w
        with np.errstate(divide="ignore", invalid="ignore"):
            mix = np.where(total > 0.0, w / total, 0.0)
        self.w[k, rows] = total
        self.touched = True
        # a first source is taken as is (mix 1); the others blend in by w / (W + w)
        a = np.where(first, 1.0, mix)
        vals = np.asarray(vals, np.float64)
        if k == 1:
            self.q[rows] = np.where(first[:, None], vals, slerp(self.q[rows], vals, a))
        else:
            arr = self.t if k == 0 else self.s
            arr[rows] = arr[rows] * (1.0 - a[:, None]) + vals * a[:, None]

    def _blend(self, k: int, rows, bind):
        """The blend of property ``k`` at ``rows``, mixed with ``bind`` (values at ``rows``, or a
        callable giving them) where the accumulated weight is below 1."""
        cum = self.w[k, rows]
        out = (self.t, self.q, self.s)[k][rows].copy()
        low = cum < 1.0
        if low.any():
            a = cum[low]          # bind first, the blend with its weight (0: the bind values)
            b = np.asarray(bind() if callable(bind) else bind, np.float64)[low]
            out[low] = slerp(b, out[low], a) if k == 1 else b * (1.0 - a[:, None]) + out[low] * a[:, None]
        return out

    def apply(self, rows, bind_t, bind_q, bind_s):
        """(T, Q, S) of ``rows``: the blend, mixed with the bind values by the weight left where
        the accumulated weight is below 1 (rows no source wrote are the bind values)."""
        self._spill()
        rows = np.asarray(rows, np.int64)
        return self._blend(0, rows, bind_t), self._blend(1, rows, bind_q), self._blend(2, rows, bind_s)

    def tracks(self, t_rows, q_rows, s_rows, bind):
        """(T, Q, S) at the rows of each property (a clip's track rows; None for a property no
        source wrote there): a lone source at weight 1 exactly as it came (its own arrays), else
        the blend, mixed with the bind values where the accumulated weight is below 1.  ``bind()``
        gives the (T, Q, S) bind values of every row (called only when needed)."""
        lone = self._lone
        if lone is not None and lone[0][0] is t_rows and lone[1][0] is q_rows and lone[2][0] is s_rows:
            return lone[0][1], lone[1][1], lone[2][1]
        self._spill()
        out = []
        for k, rows in enumerate((t_rows, q_rows, s_rows)):
            rows = np.arange(self.count)[rows] if isinstance(rows, slice) else np.asarray(rows, np.int64)
            if rows.size == 0 or not (self.w[k, rows] > 0.0).any():
                out.append(None)
                continue
            out.append(self._blend(k, rows, lambda k=k, rows=rows: bind()[k][rows]))
        return tuple(out)


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
        vals = np.asarray(values, np.float64)
        # a first source replaces what an earlier frame left (a value that was not finite included)
        self.v[rows] = np.where(first, vals, self.v[rows] * (1.0 - mix) + vals * mix)

    def apply(self, rows=None, original=None) -> np.ndarray:
        """The blend of ``rows`` (every channel when None): a channel whose accumulated weight is
        below 1 is mixed with its ``original`` value by the weight left (0 without one; an
        unwritten channel is its original), as ``TRSMixer.apply`` mixes with the bind pose.  The
        same as accumulating ``original`` at ``1 - weight`` last (the panel fills what the clips
        leave), without writing into the mixer."""
        v = self.v if rows is None else self.v[rows]
        w = np.minimum(self.weight if rows is None else self.weight[rows], 1.0)
        out = np.where(w > 0.0, v * w, 0.0)     # an unwritten channel holds no earlier frame's value
        if original is not None:
            low = w < 1.0           # only there (an original that is not finite stays out of the rest)
            out[low] += np.asarray(original, np.float64)[low] * (1.0 - w[low])
        return out
