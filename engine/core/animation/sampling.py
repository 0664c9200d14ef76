"""Vectorised keyframe sampling and quaternion helpers (numpy only, no bpy/gpu).

``TrackSet`` flattens many independent key tracks (one per animation channel) into one sorted
array so that a single ``np.searchsorted`` performs the seed's per-track ``lower_bound`` for all
channels at once: the keys of track ``c`` are shifted by ``c * span`` where ``span`` exceeds the
whole time range, so the tracks occupy disjoint, increasing intervals of one array.
"""
from __future__ import annotations

import bisect
from typing import Sequence

import numpy as np

#: Adjacent keys closer than this (seconds) are treated as a step: the right key is used.
TINY_INTERVAL = 1e-6


class TrackSet:
    """Tracks of one kind (translation, rotation, scale or a scalar weight), flattened.

    ``times_list[c]`` (K_c,) sorted times and ``values_list[c]`` (K_c, W) values of track c.
    Empty tracks must be filtered out by the caller.
    """

    def __init__(self, times_list: Sequence[np.ndarray], values_list: Sequence[np.ndarray], width: int):
        self.width = int(width)
        self.count = len(times_list)
        counts = np.array([len(t) for t in times_list], dtype=np.int64)
        if self.count and np.any(counts == 0):
            raise ValueError("TrackSet: empty track")
        self.counts = counts
        self.offsets = np.zeros(self.count, dtype=np.int64)
        if self.count:
            self.offsets[1:] = np.cumsum(counts)[:-1]
            times = np.concatenate([np.asarray(t, dtype=np.float64).reshape(-1) for t in times_list])
            values = _joined([np.asarray(v, dtype=np.float64).reshape(-1, self.width) for v in values_list])
        else:
            times = np.zeros(0)
            values = np.zeros((0, self.width))
        self.values = values
        if times.size:
            self.t_min = float(times.min())
            self.t_max = float(times.max())
        else:
            self.t_min = self.t_max = 0.0
        self.span = (self.t_max - self.t_min) + 1.0
        self._base = np.arange(self.count, dtype=np.float64) * self.span
        self._last = self.offsets + counts - 1
        # every track keyed at the same times (the common case: a baked or imported clip keys
        # all its channels together): those times relative to t_min, one search for all tracks
        self._uniform = None
        self._shifted = None
        if self.count and np.all(counts == counts[0]):
            grid = times.reshape(self.count, -1)
            if (grid == grid[0]).all():
                self._uniform = grid[0] - self.t_min
        if self._uniform is None:
            # keys of track c live in [c*span, c*span + (t_max - t_min)]
            channel_of_key = np.repeat(np.arange(self.count, dtype=np.float64), counts)
            self._shifted = (times - self.t_min) + channel_of_key * self.span
        self._pairs = None       # _pair_table: the slerp terms of every key and its next key

    @property
    def times(self) -> np.ndarray:
        """(K,) key times (recovered: only the shifted keys, or the one shared row, are kept)."""
        if self._uniform is not None:
            return np.tile(self._uniform + self.t_min, self.count)
        channel_of_key = np.repeat(np.arange(self.count, dtype=np.float64), self.counts)
        return self._shifted - channel_of_key * self.span + self.t_min  # pyright: ignore[reportOptionalOperand]  (set by __init__ whenever keys exist)

    def _locate_uniform(self, time: float):
        """``locate`` for tracks keyed at the same times: (left key, right key, alpha) scalars,
        the key indices within a track."""
        keys = self._uniform
        assert keys is not None   # called only for tracks keyed at the same times (_uniform set)
        rel = float(time) - self.t_min
        pos = bisect.bisect_left(keys, min(max(rel, -0.25), (self.t_max - self.t_min) + 0.25))
        right = min(pos, keys.shape[0] - 1)
        left = min(max(pos - 1, 0), right)
        dt = keys[right] - keys[left]
        alpha = 1.0 if dt < TINY_INTERVAL else min(max((rel - keys[left]) / dt, 0.0), 1.0)
        return left, right, alpha

    def locate(self, time: float):
        """Lower-bound search in every track: returns (left_index, right_index, alpha) flat arrays.

        Outside a track's range both indices are the endpoint; a single key holds; an interval
        shorter than ``TINY_INTERVAL`` uses the right key (alpha = 1).  Times are compared in the
        shifted frame (``time - t_min + c * span`` against the shifted keys of track c), or, for
        tracks keyed at the same times, once against those times.
        """
        if self._uniform is not None:
            left, right, alpha = self._locate_uniform(time)
            return self.offsets + left, self.offsets + right, np.full(self.count, alpha)
        rel = float(time) - self.t_min
        q = self._base + min(max(rel, -0.25), (self.t_max - self.t_min) + 0.25)
        pos = np.searchsorted(self._shifted, q, side="left")  # pyright: ignore[reportCallIssue, reportArgumentType]  (set by __init__ whenever keys exist)
        right = np.minimum(pos, self._last)                   # r == count -> last key
        left = np.maximum(pos - 1, self.offsets)              # r == 0 -> first key
        np.minimum(left, right, out=left)
        sl = self._shifted[left]
        dt = self._shifted[right] - sl
        step = dt < TINY_INTERVAL                              # endpoints (dt == 0) and tiny intervals
        dt[step] = 1.0
        alpha = self._base + rel
        alpha -= sl
        alpha /= dt
        np.maximum(alpha, 0.0, out=alpha)
        np.minimum(alpha, 1.0, out=alpha)
        alpha[step] = 1.0
        return left, right, alpha

    def sample_linear(self, time: float) -> np.ndarray:
        """(C, W) linearly interpolated values (translation, scale, weights)."""
        if self.count == 0:
            return np.zeros((0, self.width))
        if self._uniform is not None:
            left, right, alpha = self._locate_uniform(time)
            grid = self.values.reshape(self.count, -1, self.width)
            vl = grid[:, left]
            return vl + (grid[:, right] - vl) * alpha
        left, right, alpha = self.locate(time)
        vl = self.values[left]
        vr = self.values[right]
        return vl + (vr - vl) * alpha[:, None]

    def sample_rotation(self, time: float) -> np.ndarray:
        """(C, 4) wxyz: shortest-path slerp of the two keys around ``time`` (``slerp``), with the
        terms that depend on the keys alone made once per track set; unit."""
        if self.count == 0:
            return np.zeros((0, 4))
        if self._uniform is None:
            left, right, alpha = self.locate(time)
            return self.slerp_at(left, right, alpha)
        # one search for every track: the keys are columns of the (C, K, 4) values
        left, right, alpha = self._locate_uniform(time)
        k = self._uniform.shape[0]
        table, keys = self._pair_table()
        grid = keys.reshape(self.count, k, 4)
        if left == right:                  # before the first or after the last key: that key
            return grid[:, left].copy()
        return _slerp_pairs(grid[:, left], grid[:, right], alpha, table.reshape(self.count, k, 3)[:, left])

    def slerp_at(self, left: np.ndarray, right: np.ndarray, alpha: np.ndarray) -> np.ndarray:
        """``slerp(values[left], values[right], alpha)`` for ``locate``'s indices (``right`` is
        ``left + 1`` or ``left``), the key-only terms read from the pair table."""
        table, keys = self._pair_table()
        terms = table[left]
        same = right == left              # an endpoint (alpha 1): the key itself, not its negation
        if same.any():
            terms[same, 2] = terms[same, 1]
        return _slerp_pairs(keys[left], keys[right], alpha, terms)

    def _pair_table(self):
        """((K, 3) terms, (K, 4) unit keys), made on the first rotation sample.  The terms, per
        key j with key j + 1 of its track (the last key with itself), are ``slerp``'s terms that
        depend on the keys alone: theta, 1 / sin theta and sign / sin theta (sign -1 where the
        right key is taken in the left key's hemisphere).  Pairs closer than ``NEAR_THETA`` get
        theta = ``NEAR_THETA``, where sin(a theta) / sin(theta) equals a to float64 precision (the
        lerp's weights, no branch).  The keys are ``values`` themselves when every key is a unit
        quaternion (to 1e-12: an imported clip's), else a normalised copy (a zero key: the
        identity); with an exact theta (``_pair_terms``) their slerps are unit, no normalisation."""
        if self._pairs is None:
            keys = self.values
            norms = np.einsum("ij,ij->i", keys, keys)
            if norms.size and np.abs(norms - 1.0).max() >= 2e-12:
                keys = normalize_quaternions(keys)
            j = np.arange(keys.shape[0])
            nxt = np.minimum(j + 1, np.repeat(self._last, self.counts))
            theta, sin_t, near, flip = _pair_terms(keys, keys[nxt])
            theta[near] = NEAR_THETA
            sin_t[near] = np.sin(NEAR_THETA)
            table = np.empty((theta.shape[0], 3))
            table[:, 0] = theta
            table[:, 1] = 1.0 / sin_t
            table[:, 2] = np.where(flip, -table[:, 1], table[:, 1])
            self._pairs = (table, keys)
        return self._pairs


#: theta of nearly equal key pairs in the pair table: sin(a x) / sin(x) = a (1 - (1 - a^2) x^2 / 6 + ...)
#: is a to about 1e-17 here, below float64's resolution; such keys are within 1e-8 of each other,
#: so their lerp is unit to about 1e-17 as well
NEAR_THETA = 1e-8


def _slerp_pairs(ql, qr, alpha, terms) -> np.ndarray:
    """Slerp of unit (N,4) keys ``ql`` toward ``qr`` from the pair table's (N,3) ``terms`` (theta,
    1 / sin theta, sign / sin theta); ``alpha`` a scalar or (N,).  Unit (theta is exact)."""
    theta = terms[:, 0]
    wl = np.sin((1.0 - alpha) * theta)
    wl *= terms[:, 1]
    wr = np.sin(alpha * theta)
    wr *= terms[:, 2]
    out = ql * wl[:, None]
    out += qr * wr[:, None]
    return out


def _joined(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """The rows of ``arrays`` in one array: a view when they are consecutive slices of one
    C-contiguous array (a clip's packed tracks, ``AnimationClipAsset``), else a concatenation."""
    base = arrays[0].base
    if (base is not None and isinstance(base, np.ndarray) and base.dtype == arrays[0].dtype
            and base.ndim == 2 and base.shape[1:] == arrays[0].shape[1:] and base.flags.c_contiguous):
        row = base.strides[0]
        start = arrays[0].__array_interface__["data"][0] - base.__array_interface__["data"][0]
        at = start
        for a in arrays:
            if (a.base is not base or not a.flags.c_contiguous
                    or a.__array_interface__["data"][0] - base.__array_interface__["data"][0] != at):
                break
            at += a.shape[0] * row
        else:
            if start % row == 0 and 0 <= start and at <= base.nbytes:
                return base[start // row:at // row]
    return np.concatenate(arrays)


def slerp(ql: np.ndarray, qr: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """Batched shortest-path slerp of (N,4) quaternions (each normalised first, a zero one taken
    as the identity), result normalised."""
    ql = normalize_quaternions(ql)
    qr = normalize_quaternions(qr)
    alpha = np.asarray(alpha, dtype=np.float64)
    theta, sin_t, near, flip = _pair_terms(ql, qr)
    a1 = 1.0 - alpha
    wl = np.where(near, a1, np.sin(a1 * theta) / sin_t)
    wr = np.where(near, alpha, np.sin(alpha * theta) / sin_t)
    wr[flip] *= -1.0                      # the right key taken in the left key's hemisphere
    out = ql * wl[:, None]
    out += qr * wr[:, None]
    n2 = np.einsum("ij,ij->i", out, out)
    if (n2 < 1e-24).any():
        return normalize_quaternions(out)
    out /= np.sqrt(n2)[:, None]
    return out


def _pair_terms(ql, qr):
    """(theta, sin theta (1 where near), near, flip) of (N,4) key pairs: the slerp terms that
    depend on the keys alone (``flip``: opposite hemispheres, the right key negated; ``near``:
    closer than ``NEAR_THETA``, lerped).  theta = 2 atan2(|l - r|, |l + r|) (r the right key in
    the left key's hemisphere, both normalised): exact at every angle, where arccos of the dot
    product loses half the digits near 0."""
    d = np.einsum("ij,ij->i", ql, qr)
    flip = d < 0.0
    nl = np.sqrt(np.einsum("ij,ij->i", ql, ql))
    nr = np.sqrt(np.einsum("ij,ij->i", qr, qr))
    nl[nl == 0.0] = 1.0
    nr[nr == 0.0] = 1.0
    u = ql / nl[:, None]
    v = qr * (np.where(flip, -1.0, 1.0) / nr)[:, None]
    theta = 2.0 * np.arctan2(np.sqrt(np.einsum("ij,ij->i", u - v, u - v)),
                             np.sqrt(np.einsum("ij,ij->i", u + v, u + v)))
    near = theta < NEAR_THETA
    sin_t = np.sin(theta)
    sin_t[near] = 1.0
    return theta, sin_t, near, flip


def normalize_quaternions(q: np.ndarray) -> np.ndarray:
    q = np.asarray(q, dtype=np.float64)
    n = np.linalg.norm(q, axis=-1, keepdims=True)
    bad = n[..., 0] < 1e-12
    n = np.where(n < 1e-12, 1.0, n)
    out = q / n
    if np.any(bad):
        out[bad] = (1.0, 0.0, 0.0, 0.0)
    return out


def matrix_to_quaternion(m: np.ndarray) -> np.ndarray:
    """(N,3,3) rotation matrices -> (N,4) wxyz unit quaternions (vectorised Shepperd)."""
    m = np.asarray(m, dtype=np.float64)
    n = m.shape[0]
    m00, m11, m22 = m[:, 0, 0], m[:, 1, 1], m[:, 2, 2]
    tr = m00 + m11 + m22
    q = np.empty((n, 4))
    # four candidate formulas; pick the numerically best per row
    cand = np.stack([tr, m00, m11, m22], axis=1)
    k = np.argmax(cand, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        s0 = np.sqrt(np.maximum(1.0 + tr, 1e-300)) * 2.0
        s1 = np.sqrt(np.maximum(1.0 + m00 - m11 - m22, 1e-300)) * 2.0
        s2 = np.sqrt(np.maximum(1.0 + m11 - m00 - m22, 1e-300)) * 2.0
        s3 = np.sqrt(np.maximum(1.0 + m22 - m00 - m11, 1e-300)) * 2.0
        q0 = np.stack([0.25 * s0, (m[:, 2, 1] - m[:, 1, 2]) / s0, (m[:, 0, 2] - m[:, 2, 0]) / s0, (m[:, 1, 0] - m[:, 0, 1]) / s0], 1)
        q1 = np.stack([(m[:, 2, 1] - m[:, 1, 2]) / s1, 0.25 * s1, (m[:, 0, 1] + m[:, 1, 0]) / s1, (m[:, 0, 2] + m[:, 2, 0]) / s1], 1)
        q2 = np.stack([(m[:, 0, 2] - m[:, 2, 0]) / s2, (m[:, 0, 1] + m[:, 1, 0]) / s2, 0.25 * s2, (m[:, 1, 2] + m[:, 2, 1]) / s2], 1)
        q3 = np.stack([(m[:, 1, 0] - m[:, 0, 1]) / s3, (m[:, 0, 2] + m[:, 2, 0]) / s3, (m[:, 1, 2] + m[:, 2, 1]) / s3, 0.25 * s3], 1)
    allq = np.stack([q0, q1, q2, q3], axis=1)
    q = allq[np.arange(n), k]
    q = normalize_quaternions(q)
    q[q[:, 0] < 0] *= -1.0
    return q


def decompose_matrices(b: np.ndarray):
    """(N,4,4) affine matrices -> (T (N,3), Q (N,4) wxyz, S (N,3)) with M = T @ R @ S.

    Exact for matrices without shear; a negative determinant is folded into scale x.
    """
    b = np.asarray(b, dtype=np.float64)
    t = b[:, :3, 3].copy()
    m = b[:, :3, :3]
    s = np.linalg.norm(m, axis=1)  # column norms
    det = np.linalg.det(m)
    s[det < 0, 0] *= -1.0
    safe = np.where(np.abs(s) < 1e-12, 1.0, s)
    r = m / safe[:, None, :]
    return t, matrix_to_quaternion(r), s
