"""The preview player's shape-key weights and VRM expressions through the runtime's one morph
mixer (issue 24: one mixer, every source a weighted writer).

The runtime's ``morph_mix`` (engine/core/world/clip_morphs.py) holds the frame's one blend of
the player's sides (``player.morph_sides``: the clip alone at its weight, or during a crossfade
the outgoing clip at ``1 - alpha`` and the new one at ``alpha``: a crossfade only changes
weights), times ``clip_weight`` (1 by default), on the keys they drive, on the previewed
character and, for a crowd, on every character's same keys (VRM expression channels on every
character's armature).  Here the Expressions panel is its last source: the file's current values
fill what the clips leave (``ClipMorphs.apply(rows, panel)``: keys no clip drives, and the clips'
share below 1, so a key only the outgoing clip drives fades towards the panel's value):

* the VRM expressions first: ``TimelineReader.read_morph_weights`` takes the mixer's expression
  channels filled by the panel's previews (``ClipMorphs.expression_values``), and turns every
  avatar's expressions into its bound keys (docs/vrm.md);
* then every shape key: the mixer's blend filled by that read (the panel's values, VRM-bound keys
  from the expressions).

This is the one push of the clip-driven keys of the nodes it reads: the session runs the
runtime's update with ``fills_morphs``, so the runtime does not push them first with the mixer's
0 fill; a driven node the read leaves out takes the runtime's own push
(``SceneRuntime.push_clip_morphs(skip=read)``).  A node's weights are pushed
(``SceneRuntime.set_node_morph_weights``) only when they differ from its last push, or when any
morph weight of the runtime changed since that push (its ``morph_epoch``: a timeline frame); a
node a clip drives (or drove at its last push) is blended again each frame; a frame whose inputs
are those of the last one, with no key driven by the clip, pushes nothing.

Kept by the session's preview driver for one ``SceneRuntime`` (``PreviewDriver.morphs()``,
driver.py).  numpy only; the reader is the session's.
"""
from __future__ import annotations

import numpy as np


class _Layout:
    """The read's nodes as rows of the runtime's morph mixer: every key of each node, node by node."""

    def __init__(self, mix, read: dict):
        self.mix = mix
        self.nodes = [n for n in read if n in mix.offset]
        self.sizes = [int(np.shape(read[n])[0]) for n in self.nodes]
        starts = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        self.slices = [(n, slice(int(a), int(b))) for n, a, b in zip(self.nodes, starts[:-1], starts[1:])]
        self.rows = np.concatenate([np.arange(mix.offset[n], mix.offset[n] + k) for n, k in
                                    zip(self.nodes, self.sizes)]).astype(np.int64) if self.nodes else np.zeros(0, np.int64)
        self.read_nodes = list(read)

    def fits(self, mix, read: dict) -> bool:
        return mix is self.mix and list(read) == self.read_nodes and all(
            np.shape(read[n])[0] == k for n, k in zip(self.nodes, self.sizes))


class PreviewMorphs:
    """The preview's last morph source, the panel, over the runtime's mixer (see the module docstring)."""

    def __init__(self, runtime):
        self.runtime = runtime
        self._layout = None
        self._last = {}             # node -> (panel array pushed from, weights pushed, clip-driven then)
        self._epoch = None
        self._settled = None        # what lets a frame skip the push (nothing changed, no clip key)

    @property
    def clip_weight(self) -> float:
        """The clip's weight on the keys it drives (the runtime's mixer); the panel takes the rest."""
        return self.runtime.morph_mix.clip_weight

    @clip_weight.setter
    def clip_weight(self, value: float) -> None:
        self.runtime.morph_mix.clip_weight = value

    def push(self, reader) -> None:
        """After the player sampled and the runtime mixed its sides, before the uploads: fill the
        mixer's blend with the panel's weights and push every node whose weights changed (the
        runtime's update was told so: ``fills_morphs``; the clip-driven keys of nodes the read
        leaves out take the runtime's own push, ``push_clip_morphs``)."""
        mix = self.runtime.morph_mix
        read = reader.read_morph_weights(None, expression_values=mix.expression_values())
        self.runtime.push_clip_morphs(skip=read)
        epoch = self.runtime.morph_epoch.value
        if epoch != self._epoch:
            self._last = {}
            self._settled = None
        lay = self._layout
        if lay is None or not lay.fits(mix, read):
            lay = self._layout = _Layout(mix, read)
        driven = mix.driven
        token = reader.weights_version
        if self._settled is not None and self._settled == token and epoch == self._epoch and not mix.active:
            return      # the same panel values as the last push, every node pushed, no clip-driven key
        panel = np.concatenate([read[n] for n in lay.nodes]) if lay.nodes else np.zeros(0)
        out = mix.apply(lay.rows, panel) if mix.active else panel     # the panel fills what the clips leave
        last = self._last
        pushed = {}
        set_weights = self.runtime.set_node_morph_weights
        for node, sl in lay.slices:
            src = read[node]
            prev = last.get(node)
            if prev is not None and prev[0] is src and not prev[2] and node not in driven:
                pushed[node] = prev     # the reader's same array, no clip key now or then: the same weights
                continue
            w = out[sl]
            if (prev is not None and np.array_equal(prev[1], w)) or set_weights(node, w):
                pushed[node] = (src, w, node in driven)
        self._last = pushed
        self._epoch = self.runtime.morph_epoch.value
        # what lets the next frame skip this: nothing here depends on the player's values and
        # every node took its weights
        self._settled = token if not mix.active and len(pushed) == len(lay.nodes) else None
