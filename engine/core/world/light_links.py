"""Light linking and shadow linking as Blender resolves them (bpy-free).

A lamp's *Light Linking* receiver collection and *Shadow Linking* blocker collection each become
a ``LinkRule``: which objects the lamp lights (receivers) or which objects block it (blockers).
Blender's rule (depsgraph light linking cache, what EEVEE and Cycles read):

* an object of the collection, or of one of its child collections (recursively), has the link
  state of its entry (*Include* / *Exclude*); an object reached through a child collection takes
  the state of that first-level child's entry; where an object is reached twice the later entry
  wins (child collections first, then the collection's own objects);
* the lamp reaches an *Included* object, never an *Excluded* one; an object outside the
  collection is reached only when no object of the collection is *Included* (an empty
  collection, or one of exclusions only, reaches everything else);
* a lamp without a collection reaches every object.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LinkRule:
    include: frozenset = frozenset()    # object names with the Include state
    exclude: frozenset = frozenset()    # object names with the Exclude state

    def reaches(self, name: str) -> bool:
        """Whether the lamp lights (receivers) / is blocked by (blockers) the object ``name``."""
        if name in self.exclude:
            return False
        return name in self.include or not self.include


def rule_from_entries(entries) -> LinkRule:
    """A LinkRule from ``(object name, state)`` pairs in Blender's order (later ones win);
    state ``"INCLUDE"`` or ``"EXCLUDE"``."""
    state = {}
    for name, st in entries:
        state[name] = st
    return LinkRule(include=frozenset(n for n, s in state.items() if s == "INCLUDE"),
                    exclude=frozenset(n for n, s in state.items() if s == "EXCLUDE"))


def reaches(rule, name: str) -> bool:
    """``rule.reaches(name)``; a lamp without a rule (None) reaches everything."""
    return True if rule is None else rule.reaches(name)
