"""The crossfade's two sides (player.AnimationPlayer.set_crossfade): the fade in progress and a
frozen pose (an interrupted fade) as an outgoing side.  numpy only."""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from .mixer import TRSMixer


class FadeState:
    """A crossfade in progress: the outgoing side and the elapsed clip time."""

    def __init__(self, source, duration: float):
        self.source = source
        self.duration = float(duration)
        self.elapsed = 0.0
        self._union = None
        self.last = None        # (nodes, T, Q, S) of the last blended sample
        self.mixer = None       # mixer.TRSMixer of the union's nodes (both sides accumulate into it)
        self.rows = None        # its rows (0..n-1)
        self.targets: Optional[np.ndarray] = None         # a crowd: (M, n) target nodes of the union's n nodes

    @property
    def alpha(self) -> float:
        return min(max(self.elapsed / self.duration, 0.0), 1.0) if self.duration > 0.0 else 1.0

    @property
    def done(self) -> bool:
        return self.alpha >= 1.0

    def advance(self, step: float) -> None:
        self.elapsed += max(float(step), 0.0)
        src = self.source
        if isinstance(src, Frozen) is False and step > 0.0:
            d = src.duration
            t = src._current_time + step
            src._current_time = (math.fmod(t, d) if d > 0.0 else 0.0) if src._looping else min(t, d)

    def apply(self, player, scene, pose) -> bool:
        """One frame of the fade through the mixer: both sides accumulate with their fade weights
        (the TRS of the union of both sides' nodes into ``pose``; the TRS mixer is made at the
        first frame and reused).  The morph channels are not blended here: the player's
        ``morph_sides`` become the outgoing side(s) at ``1 - alpha`` and the new clip at ``alpha``
        (a crossfade only changes weights), for the runtime's one morph mixer."""
        nodes = self.nodes_union(player._nodes)
        ft, fq, fs, fm = self.source.sample_side(scene, nodes)
        it, iq, is_, im = player.sample_side(scene, nodes)
        a = self.alpha
        n = nodes.shape[0]
        if self.mixer is None or self.mixer.count != n:
            self.mixer = TRSMixer(n)
            self.rows = np.arange(n)
        mix = self.mixer
        mix.reset()
        rows = self.rows
        mix.accumulate(rows, ft, fq, fs, 1.0 - a)
        mix.accumulate(rows, it, iq, is_, a)
        t, q, s = mix.apply(rows, ft, fq, fs)
        out = nodes
        grid = self.targets
        if grid is not None and player.target_count > 1:
            # a crowd: the one blend written to every target
            out = grid.ravel()
            t, q, s = (np.tile(v, (grid.shape[0], 1)) for v in (t, q, s))
        if nodes.size and not pose.set_local_trs(out, t, q, s):
            player.last_error = "pose rejected the blended transforms"
            return False
        self.last = (nodes, t[:n], q[:n], s[:n])
        player._morph_sides = (tuple((k, v, w * (1.0 - a)) for k, v, w in self.source.side_morphs(fm))
                               + player.side_morphs(im, a))
        return True

    def nodes_union(self, own_nodes: np.ndarray) -> np.ndarray:
        if self._union is None:
            self._union = np.union1d(np.asarray(own_nodes, np.int64), self.source.node_ids())
        return self._union


class Frozen:
    """The pose of a moment (an interrupted fade), as the outgoing side of a new fade: its blended
    TRS and its morph sides as they were (unblended: the new fade scales their weights)."""

    def __init__(self, nodes, trs, morph_sides):
        self._nodes = np.asarray(nodes, np.int64)
        self._trs = trs
        self._sides = tuple(morph_sides)
        self._keys = list(dict.fromkeys(k for keys, _v, _w in self._sides for k in keys))

    def node_ids(self) -> np.ndarray:
        return self._nodes

    def morph_key_list(self) -> list:
        return self._keys

    def side_morphs(self, _values) -> tuple:
        return self._sides

    def sample_side(self, scene, nodes):
        t = np.asarray(scene.bind_translations, np.float64)[nodes]
        q = np.asarray(scene.bind_rotations, np.float64)[nodes]
        s = np.asarray(scene.bind_scales, np.float64)[nodes]
        if self._trs is not None and self._nodes.size:
            rows = np.searchsorted(nodes, self._nodes)
            t[rows], q[rows], s[rows] = self._trs
        return t, q, s, None

