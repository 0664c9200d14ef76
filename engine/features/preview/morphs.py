"""The preview player's shape-key weights through the mixer (issue 24: one mixer, every source a
weighted writer).

Every frame of a clip preview, each mesh's shape-key weights have their sources accumulated into
one ``animation.mixer.MorphMixer`` whose channels are every key of every morphed mesh node (node
by node, each in ``SceneRuntime.morph_key_names`` order):

* the clip: each side of the player's sampled morph channels (``player.morph_sides``: the clip
  alone at its weight, or during a crossfade the outgoing clip at ``1 - alpha`` and the new one at
  ``alpha``: a crossfade only changes weights), times ``clip_weight`` (1 by default), on the keys
  it drives, on the previewed character and, for a crowd, on every character's same keys
  (``SceneRuntime.crowd_morph_nodes``);
* the panel: the file's current values (the Expressions panel; VRM-bound keys take the
  expressions with the clip's expression channels at the player's time, docs/vrm.md:
  ``TimelineReader.read_morph_weights``), at ``1 - `` the weight accumulated so far, so it fills
  what the clips leave: keys no clip drives, and the clips' share below 1 (a key only the
  outgoing clip drives fades towards the panel's value).

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
        self._rows = (None, None, {})   # (layout, crowd, {side keys: (rows, chans, nodes)})
        self._clip_gen = 0          # bumped with every new clip or crowd
        self._last = {}             # node -> (panel array pushed from, weights pushed)
        self._epoch = None
        self._settled = None        # what lets a frame skip the push (nothing changed, no clip key)

    def _side_rows(self, keys: tuple, lay: _Layout):
        """(mixer rows, channel indices into the side's values, nodes with a driven key) of one
        side's keys, every crowd character's same keys included; made once per key list, layout
        and crowd (set-up work, a loop over the keys)."""
        lay_, crowd, table = self._rows
        rt = self.runtime
        if lay_ is not lay or crowd is not rt.crowd_targets:
            table = {}
            self._rows = (lay, rt.crowd_targets, table)
            self._clip_gen += 1
        hit = table.get(keys)
        if hit is None:
            rows, chans, driven = [], [], set()
            for ch, (node, name) in enumerate(keys):
                for n in rt.crowd_morph_nodes(node):
                    names = lay.names.get(n)
                    if names is not None and name in names:
                        rows.append(lay.offset[n] + names.index(name))
                        chans.append(ch)
                        driven.add(n)
            hit = table[keys] = (np.array(rows, np.int64), np.array(chans, np.int64), driven)
            self._clip_gen += 1
        return hit

    def push(self, reader, player) -> None:
        """After the player sampled, before the uploads: mix the clip's sides and the panel's
        weights and push every node whose weights changed."""
        epoch = self.runtime.morph_epoch.value
        if epoch != self._epoch:
            self._last = {}
            self._settled = None
        read = reader.read_morph_weights(None, expression_values=(player.morph_keys, player.morph_values))
        lay = self._layout
        if lay is None or not lay.fits(read):
            lay = self._layout = _Layout(self.runtime, read)
        sides = [(self._side_rows(keys, lay), vals, w) for keys, vals, w in player.morph_sides]
        sides = [s for s in sides if s[0][0].size]
        driven = set().union(*(s[0][2] for s in sides)) if sides else set()
        token = (reader.weights_version, self._clip_gen, self.clip_weight)
        if self._settled is not None and self._settled == token and epoch == self._epoch:
            return      # the same panel values as the last push, every node pushed, no clip-driven key
        mix = lay.mixer
        mix.reset()
        for (rows, chans, _nodes), vals, w in sides:     # each clip side at its weight
            mix.accumulate(rows, np.asarray(vals, np.float64)[chans], w * self.clip_weight)
        panel = np.concatenate(list(read.values())) if lay.count else np.zeros(0)
        mix.accumulate(lay.every, panel, 1.0 - mix.weight)      # the panel fills what the clips leave
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
        self._settled = token if not sides and len(pushed) == len(read) else None


def for_session(session) -> PreviewMorphs:
    """The session's PreviewMorphs of its current runtime (a new runtime starts a new one)."""
    m = session._preview_morphs
    if m is None or m.runtime is not session.runtime:
        m = session._preview_morphs = PreviewMorphs(session.runtime)
    return m


def push(session) -> None:
    """The session's preview frame step (``preview_hold.hooks``' after-sample step)."""
    for_session(session).push(session.reader, session.runtime.player)
