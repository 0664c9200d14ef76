"""Why a rig needs Blender's evaluation for the preview (``bake.bake_reasons``), and
``BakeError``."""
from __future__ import annotations

from typing import List

_MAX_LISTED = 3     # names listed per reason


class BakeError(Exception):
    """A bake could not be made (the message names the armature / action / bone)."""


# ------------------------------------------------------------------------------------------------
# why a rig needs Blender's evaluation
# ------------------------------------------------------------------------------------------------

def _listing(names: List[str]) -> str:
    shown = ", ".join(f"'{n}'" for n in names[:_MAX_LISTED])
    more = len(names) - _MAX_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def weighted_bbones(armature) -> List[str]:
    """Deform bones with B-Bone segments > 1 that a mesh deformed by ``armature`` has a vertex
    group for (those bend the mesh along a curve only Blender evaluates)."""
    import bpy

    bent = {b.name for b in armature.data.bones if b.use_deform and b.bbone_segments > 1}
    if not bent:
        return []
    groups = set()
    for ob in bpy.data.objects:
        if ob.type != "MESH":
            continue
        if any(md.type == "ARMATURE" and md.object == armature for md in ob.modifiers):
            groups.update(vg.name for vg in ob.vertex_groups)
    return [b.name for b in armature.data.bones if b.name in bent and b.name in groups]


def bake_reasons(armature) -> List[str]:
    """Why the clips of ``armature`` need Blender's evaluation (object or bone constraints, IK
    included, drivers on the armature, its data or its pose bones, weighted B-Bones).  An empty
    list: the player's own evaluation of the keyed channels is exact, no bake."""
    if armature is None or armature.type != "ARMATURE":
        return []
    out = []
    if len(armature.constraints):
        live = [c for c in armature.constraints if c.enabled]
        if live:
            out.append(f"object constraints on '{armature.name}' ({_listing([c.name for c in live])})")
    ik, other = [], []
    for pb in (armature.pose.bones if armature.pose is not None else ()):
        for c in pb.constraints:
            if not c.enabled:
                continue
            (ik if c.type in ("IK", "SPLINE_IK") else other).append(pb.name)
    if ik:
        out.append(f"IK on bone {_listing(list(dict.fromkeys(ik)))}")
    if other:
        names = list(dict.fromkeys(other))
        out.append(f"bone constraint on {_listing(names)}")
    for idb, what in ((armature, "the armature object"), (armature.data, "the armature data")):
        ad = idb.animation_data
        drv = [d for d in ad.drivers if not d.mute] if ad is not None else []
        if drv:
            out.append(f"{len(drv)} driver{'s' if len(drv) != 1 else ''} on {what} "
                       f"({_listing([d.data_path for d in drv])})")
    bb = weighted_bbones(armature)
    if bb:
        out.append(f"weighted B-Bones (segments > 1) on {_listing(bb)}")
    return out

