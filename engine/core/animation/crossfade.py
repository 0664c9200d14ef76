"""The crossfade's two sides (player.AnimationPlayer.set_crossfade): the fade in progress and a
frozen pose (an interrupted fade) as an outgoing side.  numpy only."""
from __future__ import annotations

import math

import numpy as np

from .mixer import MorphMixer, TRSMixer


class _Fade:
    """A crossfade in progress: the outgoing side and the elapsed clip time."""

    def __init__(self, source, duration: float):
        self.source = source
        self.duration = float(duration)
        self.elapsed = 0.0
        self._union = None
        self.last = None        # (nodes, T, Q, S) of the last blended sample
        self.mixer = None       # mixer.TRSMixer of the union's nodes (both sides accumulate into it)
        self.rows = None        # its rows (0..n-1)
        self.morph_mixer = None     # mixer.MorphMixer of the player's morph keys (made at the first sample)
        self.morph_rows = None      # (incoming rows, outgoing rows) into it
        self.source_keys = ()       # the outgoing side's morph keys
        self.targets = None         # a crowd: (M, n) target nodes of the union's n nodes

    @property
    def alpha(self) -> float:
        return min(max(self.elapsed / self.duration, 0.0), 1.0) if self.duration > 0.0 else 1.0

    @property
    def done(self) -> bool:
        return self.alpha >= 1.0

    def advance(self, step: float) -> None:
        self.elapsed += max(float(step), 0.0)
        src = self.source
        if isinstance(src, _Frozen) is False and step > 0.0:
            d = src.duration
            t = src._current_time + step
            src._current_time = (math.fmod(t, d) if d > 0.0 else 0.0) if src._looping else min(t, d)

    def apply(self, player, scene, pose) -> bool:
        """One frame of the fade through the mixer: both sides accumulate with their fade weights
        (the TRS of the union of both sides' nodes into ``pose``, the morph channels into the
        player's ``_morph_values``); the mixers are made at the first frame and reused."""
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
        morphs = self.morph_mixer
        keys = player.morph_keys
        if morphs is None:      # once per fade: the mixer and the outgoing keys' rows
            pos = {k: i for i, k in enumerate(keys)}
            morphs = self.morph_mixer = MorphMixer(len(keys))
            self.source_keys = tuple(self.source.morph_key_list())
            self.morph_rows = (np.arange(len(player.morph_key_list())),
                               np.array([pos[k] for k in self.source_keys], np.int64))
        own_rows, src_rows = self.morph_rows
        morphs.reset()
        morphs.accumulate(own_rows, im, a)
        morphs.accumulate(src_rows, fm, 1.0 - a)
        player._morph_values = morphs.apply()
        # the two sides, for a mixer that takes more sources (the preview's, with the panel's values)
        player._morph_sides = ((self.source_keys, np.asarray(fm, np.float64), 1.0 - a),
                               (player.morph_key_tuple(), np.asarray(im, np.float64), a)) if keys else ()
        return True

    def nodes_union(self, own_nodes: np.ndarray) -> np.ndarray:
        if self._union is None:
            self._union = np.union1d(np.asarray(own_nodes, np.int64), self.source.node_ids())
        return self._union


class _Frozen:
    """The pose of a moment (an interrupted fade), as the outgoing side of a new fade."""

    def __init__(self, nodes, trs, morph_keys, morph_values):
        self._nodes = np.asarray(nodes, np.int64)
        self._trs = trs
        self._keys = list(morph_keys)
        self._vals = np.asarray(morph_values, np.float64)

    def node_ids(self) -> np.ndarray:
        return self._nodes

    def morph_key_list(self) -> list:
        return self._keys

    def sample_side(self, scene, nodes):
        t = np.asarray(scene.bind_translations, np.float64)[nodes]
        q = np.asarray(scene.bind_rotations, np.float64)[nodes]
        s = np.asarray(scene.bind_scales, np.float64)[nodes]
        if self._trs is not None and self._nodes.size:
            rows = np.searchsorted(nodes, self._nodes)
            t[rows], q[rows], s[rows] = self._trs
        return t, q, s, self._vals

