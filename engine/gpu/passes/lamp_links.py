"""Light linking and shadow linking in the passes (the rules: engine/core/world/light_links.py).

* **Light linking.** Every lamp with a receiver collection gets a bit (lamps with the same rule
  share one), at most ``MAX_LINK_BITS``; each drawn object gets a word with the bits of the
  linked lamps that do not light it (instance_data's fourth info value, or the ``light_link``
  push constant of a draw of one object), and the shaders skip those lamps
  (glsl/mtoon_shading.glsl ``link_excluded``): surface, outline and every pass read the same word.
* **Shadow linking.** A lamp's shadow map draws only the casters its blocker collection lets
  block it (``blocks``): the sun's cascades and each local lamp's faces.
"""
from __future__ import annotations

import numpy as np

from ...core.world.light_links import reaches

MAX_LINK_BITS = 24     # exact in a float (instance_data) and an int push constant


def link_bits(lights) -> tuple:
    """(per lamp: its bit or -1, the rules that got a bit in bit order, lamps whose rule got none)."""
    rules, bits, over = [], [], []
    for l in lights:
        r = getattr(l, "receivers", None)
        if r is None:
            bits.append(-1)
            continue
        if r not in rules:
            if len(rules) >= MAX_LINK_BITS:
                bits.append(-1)
                over.append(l.name)
                continue
            rules.append(r)
        bits.append(rules.index(r))
    return bits, rules, over


def item_words(items, rules) -> np.ndarray:
    """(len(items),) float: each item's word, the bits of the ``rules`` that do not reach its object."""
    words = np.zeros(len(items), np.float64)
    if not rules:
        return words
    cache = {}
    for i, it in enumerate(items):
        name = getattr(it, "object_name", "")
        w = cache.get(name)
        if w is None:
            w = cache[name] = float(sum(1 << b for b, r in enumerate(rules) if not r.reaches(name)))
        words[i] = w
    return words


def blocks(light, casters) -> list:
    """The casters that block ``light`` (its Shadow Linking blocker collection)."""
    rule = getattr(light, "blockers", None)
    if rule is None:
        return casters
    return [it for it in casters if reaches(rule, getattr(it, "object_name", ""))]


def over_message(names) -> str:
    return (f"lamps {', '.join(repr(n) for n in names)} light every object: more than {MAX_LINK_BITS} "
            f"different Light Linking collections in one frame")
