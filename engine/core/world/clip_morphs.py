"""The one morph mixer of a SceneRuntime (issue 24: one mixer, every source a weighted writer).

The preview player only exposes its morph sources, ``player.morph_sides``: ((keys, values,
weight), ...), the clip alone at its weight, or during a crossfade the outgoing side(s) at
``1 - alpha`` and the new clip at ``alpha`` (a crossfade only changes weights).  They are blended
here and nowhere else, into one ``animation.mixer.MorphMixer`` whose channels are

* every shape key of every morphed mesh node, node by node, each in ``morph_key_names`` order;
* then the side channels that are no shape key of a morphed node: VRM expression previews, keyed
  on an armature's node (docs/vrm.md), appended as they first appear (set-up work).

A side writes its channels and, for a crowd, every character's same channels
(``SceneRuntime.crowd_morph_nodes``: the same mesh data deformed by each armature, or each
armature itself for an expression channel), at its weight times ``clip_weight``.  Every consumer
reads the result:

* the runtime alone (``SceneRuntime.update`` -> ``push_clip_morphs``): the clip-driven shape
  keys, ``apply()`` (a channel below weight 1 fades towards 0);
* the preview (engine/features/preview/morphs.py): every shape key, ``apply(rows, panel)`` (the
  Expressions panel's values fill what the clips leave; the runtime's update is told so,
  ``fills_morphs``, and pushes only the clip-driven keys of nodes the preview's read leaves out:
  one push per node and frame), and the VRM expression values
  (``expression_values()``: the same fill with the panel's expression previews, read by
  ``TimelineReader.read_morph_weights``).

numpy only; owned by the runtime (``SceneRuntime.morph_mix``), made anew with every
``initialize``.
"""
from __future__ import annotations

import numpy as np

from ..animation.mixer import MorphMixer


class ClipMorphs:
    """The runtime's morph mixer (see the module docstring)."""

    def __init__(self, runtime):
        self.runtime = runtime
        names = runtime._key_names
        self.nodes = [n for n in runtime._morph_nodes if n in names]
        sizes = [len(names[n]) for n in self.nodes]
        starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.offset = {n: int(a) for n, a in zip(self.nodes, starts[:-1])}
        self.key_count = int(starts[-1])          # the shape-key channels; the extra ones follow
        self.extra_keys: tuple = ()               # (node, name) of each extra channel, in row order
        self._extra_row = {}
        self.mixer = MorphMixer(self.key_count)
        self._clip_weight = 1.0
        self._tables = (None, {})                 # (crowd targets they were made for, {keys: rows})
        self.driven = frozenset()                 # mesh nodes with a channel the last mix wrote
        self.active = False                       # whether the last mix had a side with a channel
        self.dirty = True                         # the next runtime frame mixes again

    @property
    def clip_weight(self) -> float:
        """The clip's weight on the channels it drives (1 by default); what it leaves is filled by
        the original (the panel's values in the preview, 0 for the runtime alone)."""
        return self._clip_weight

    @clip_weight.setter
    def clip_weight(self, value: float) -> None:
        v = float(value)
        if v != self._clip_weight:
            self._clip_weight = v
            self.dirty = True

    def _side_rows(self, keys: tuple):
        """(mixer rows, channel indices into the side's values, mesh nodes with a driven key) of one
        side's keys, every crowd character's same keys included; made once per key list and crowd
        (set-up work, a loop over the keys)."""
        rt = self.runtime
        crowd, table = self._tables
        if crowd is not rt.crowd_targets:
            table = {}
            self._tables = (rt.crowd_targets, table)
        hit = table.get(keys)
        if hit is None:
            names = rt._key_names
            rows, chans, driven, seen = [], [], set(), set()
            for ch, (node, name) in enumerate(keys):
                for n in rt.crowd_morph_nodes(node):
                    own = names.get(n)
                    if n in self.offset and name in own:
                        row = self.offset[n] + own.index(name)
                        driven.add(n)
                    else:
                        row = self._extra(n, name)
                    if row not in seen:
                        seen.add(row)
                        rows.append(row)
                        chans.append(ch)
            hit = table[keys] = (np.array(rows, np.int64), np.array(chans, np.int64), frozenset(driven))
        return hit

    def _extra(self, node: int, name: str) -> int:
        row = self._extra_row.get((node, name))
        if row is None:
            row = self._extra_row[(node, name)] = self.key_count + len(self.extra_keys)
            self.extra_keys = self.extra_keys + ((node, name),)     # a new tuple: readers re-map
        return row

    def mix(self, player) -> None:
        """Accumulate the player's sides (after it sampled): the frame's one blend."""
        self.dirty = False
        sides = player.morph_sides
        mixer = self.mixer
        if not sides:
            mixer.reset()
            self.driven = frozenset()
            self.active = False
            return
        tables = [self._side_rows(keys) for keys, _v, _w in sides]
        count = self.key_count + len(self.extra_keys)
        if mixer.count != count:
            mixer = self.mixer = MorphMixer(count)
        mixer.reset()
        cw = self._clip_weight
        driven = frozenset()
        for (rows, chans, nodes), (_k, vals, w) in zip(tables, sides):
            if rows.size:
                mixer.accumulate(rows, np.asarray(vals, np.float64)[chans], w * cw)
                driven |= nodes
        self.driven = driven
        self.active = mixer.touched

    def apply(self, rows=None, original=None) -> np.ndarray:
        """The blend of ``rows`` (every channel when None), filled by ``original`` where the
        sides' weight is below 1 (``MorphMixer.apply``)."""
        return self.mixer.apply(rows, original)

    def expression_values(self) -> tuple:
        """``(keys, fill)`` for ``TimelineReader.read_morph_weights(expression_values=...)``: the
        extra channels' (node, name) and ``fill(chans, original)``, their blend at those positions
        filled by the ``original`` values (the panel's expression previews)."""
        base = self.key_count
        return self.extra_keys, lambda chans, original: self.mixer.apply(base + np.asarray(chans, np.int64),
                                                                         original)

    def clip_bindings(self, keys) -> list:
        """[(node, MorphState, mixer rows, target indices)] of every primitive key the player's
        ``keys`` drive (a crowd: on every character): what ``SceneRuntime.push_clip_morphs``
        pushes after a mix.
        Set-up work (once per clip)."""
        rt = self.runtime
        driven = set()
        for node, name in keys:
            for n in rt.crowd_morph_nodes(node):
                driven.add((n, name))
        out = []
        for node, binds in rt._bindings.items():
            base = self.offset.get(node)
            if base is None:
                continue
            names = rt._key_names[node]
            inst = rt.mesh_instances[node]
            for pi, slots, targets in binds:
                keep = np.array([(node, names[s]) in driven for s in slots], bool)
                if keep.any():
                    t_keep = targets[keep]
                    t_keep.flags.writeable = False
                    out.append((node, inst.primitives[pi].morph_state, base + slots[keep], t_keep))
        return out
