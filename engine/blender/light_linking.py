"""A lamp object's Light Linking / Shadow Linking collections read into LinkRules
(engine/core/world/light_links.py)."""
from __future__ import annotations

from ..core.world.light_links import rule_from_entries


def _entries(collection):
    """(object name, link state) of every object ``collection`` links, in Blender's order: the
    child collections first (each object of a child's tree with that child's state), then the
    collection's own objects with their own states."""
    out = []

    def tree(coll, state, seen):
        if coll.name in seen:             # (a collection cannot contain itself; guard anyway)
            return
        seen = seen | {coll.name}
        for child in coll.children:
            tree(child, state, seen)
        for ob in coll.objects:
            out.append((ob.name, state))

    for child, link in zip(collection.children, collection.collection_children):
        tree(child, link.light_linking.link_state, frozenset((collection.name,)))
    for ob, link in zip(collection.objects, collection.collection_objects):
        out.append((ob.name, link.light_linking.link_state))
    return out


def lamp_rules(ob) -> tuple:
    """(receivers, blockers) LinkRules of the lamp object ``ob`` (None: no collection)."""
    orig = getattr(ob, "original", None) or ob
    ll = getattr(orig, "light_linking", None)
    if ll is None:
        return None, None
    rec, blk = ll.receiver_collection, ll.blocker_collection
    return (rule_from_entries(_entries(rec)) if rec is not None else None,
            rule_from_entries(_entries(blk)) if blk is not None else None)
