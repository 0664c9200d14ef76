"""The preview player's shape-key weights through the mixer (issue 24: one mixer, every source a
weighted writer).

Every frame of a clip preview, each mesh's shape-key weights have two sources, accumulated into
one ``animation.mixer.MorphMixer`` whose channels are every key of every morphed mesh node (node
by node, each in ``SceneRuntime.morph_key_names`` order):

* the clip: the player's sampled morph channels (``player.morph_keys`` / ``morph_values``; a
  crossfade's blend of both clips), at ``clip_weight`` (1 by default) on the keys it drives;
* the panel: the file's current values (the Expressions panel; VRM-bound keys take the
  expressions with the clip's expression channels at the player's time, docs/vrm.md:
  ``TimelineReader.read_morph_weights``), at ``1 - `` the weight accumulated so far, so it fills
  what the clip leaves: keys the clip does not drive, and the clip's share below 1.

A node's weights are pushed (``SceneRuntime.set_node_morph_weights``) only when they differ from
its last push, or when any morph weight of the runtime changed since that push (its
``morph_epoch``: a timeline frame, a clip's channels); a frame whose inputs are those of the last one, with no key driven by
the clip, pushes nothing.

Owned by one ``StylizedSession`` for one ``SceneRuntime`` (``session._preview_morphs``).  numpy
only; the reader is the session's.
"""
from __future__ import annotations

import numpy as np

from ...core.animation.mixer import MorphMixer


class _Layout:
    """The mixer's channels: every key of the nodes of one read, node by node."""

    def __init__(self, runtime, read: dict):
        self.nodes = list(read)
        self.sizes = [int(np.shape(w)[0]) for w in read.values()]
        starts = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        self.slices = [(n, slice(int(a), int(b))) for n, a, b in zip(self.nodes, starts[:-1], starts[1:])]
        self.offset = {n: int(a) for n, a in zip(self.nodes, starts[:-1])}
        self.names = {n: runtime.morph_key_names(n) for n in self.nodes}
        self.count = int(starts[-1])
        self.every = np.arange(self.count, dtype=np.int64)
        self.mixer = MorphMixer(self.count)

    def fits(self, read: dict) -> bool:
        return list(read) == self.nodes and all(
            np.shape(w)[0] == n for w, n in zip(read.values(), self.sizes))


class PreviewMorphs:
    """The preview's shape-key mixer of one runtime (see the module docstring)."""

    def __init__(self, runtime):
        self.runtime = runtime
        self.clip_weight = 1.0      # the clip's weight on the keys it drives; the panel takes the rest
        self._layout = None
        self._clip = None           # (clip, morph_keys list, layout, rows, chans, nodes with rows)
        self._clip_gen = 0          # bumped with every new _clip
        self._last = {}             # node -> (panel array pushed from, weights pushed)
        self._epoch = None
        self._settled = None        # what lets a frame skip the push (nothing changed, no clip key)

    def _clip_channels(self, player, lay: _Layout):
        """(mixer rows, player channel indices, nodes with a driven key) of the keys the current
        clip drives; computed once per clip (set-up work, a loop over the clip's morph keys)."""
        keys = player.morph_keys if player.clip is not None else []
        c = self._clip
        if c is not None and c[0] is player.clip and c[1] is keys and c[2] is lay:
            return c[3], c[4], c[5]
        rows, chans = [], []
        for ch, (node, name) in enumerate(keys):
            names = lay.names.get(node)
            if names is not None and name in names:
                rows.append(lay.offset[node] + names.index(name))
                chans.append(ch)
        driven = {n for n, _ in keys if n in lay.names}
        hit = (np.array(rows, np.int64), np.array(chans, np.int64), driven)
        self._clip = (player.clip, keys, lay) + hit
        self._clip_gen += 1
        return hit

    def push(self, reader, player) -> None:
        """After the player sampled, before the uploads: mix the clip's and the panel's weights
        and push every node whose weights changed."""
        epoch = self.runtime.morph_epoch.value
        if epoch != self._epoch:
            self._last = {}
            self._settled = None
        read = reader.read_morph_weights(None, expression_values=(player.morph_keys, player.morph_values))
        lay = self._layout
        if lay is None or not lay.fits(read):
            lay = self._layout = _Layout(self.runtime, read)
        rows, chans, driven = self._clip_channels(player, lay)
        token = (reader.weights_version, self._clip_gen, self.clip_weight)
        if self._settled is not None and self._settled == token and epoch == self._epoch:
            return      # the same panel values as the last push, every node pushed, no clip-driven key
        mix = lay.mixer
        mix.reset()
        if rows.size:
            mix.accumulate(rows, np.asarray(player.morph_values, np.float64)[chans], self.clip_weight)
        panel = np.concatenate(list(read.values())) if lay.count else np.zeros(0)
        mix.accumulate(lay.every, panel, 1.0 - mix.weight)      # the panel fills what the clip leaves
        out = mix.apply()
        last = self._last
        pushed = {}
        set_weights = self.runtime.set_node_morph_weights
        for node, sl in lay.slices:
            src = read[node]
            prev = last.get(node)
            if prev is not None and prev[0] is src and node not in driven:
                pushed[node] = prev     # the reader's same array, no clip key: the same weights
                continue
            w = out[sl]
            if (prev is not None and np.array_equal(prev[1], w)) or set_weights(node, w):
                pushed[node] = (src, w)
        self._last = pushed
        self._epoch = self.runtime.morph_epoch.value
        # what lets the next frame skip this: nothing here depends on the player's values and
        # every node took its weights
        self._settled = token if not rows.size and len(pushed) == len(read) else None


def for_session(session) -> PreviewMorphs:
    """The session's PreviewMorphs of its current runtime (a new runtime starts a new one)."""
    m = session._preview_morphs
    if m is None or m.runtime is not session.runtime:
        m = session._preview_morphs = PreviewMorphs(session.runtime)
    return m


def push(session) -> None:
    """The session's preview frame step (``preview_hold.hooks``' after-sample step)."""
    for_session(session).push(session.reader, session.runtime.player)
