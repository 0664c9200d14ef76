"""The names of VRM expression preview F-Curves (the VRM Add-on's ``...preview`` properties) and
of the preview-player clip channels made from them.  Pure string rules of the importer
(actions.py: expression previews become clip channels), which the Scene preview's NLA reader
(engine/blender/sources/nla.py) and the VRM feature (engine/features/vrm) read too.
"""
from __future__ import annotations

import re
from typing import Optional

EXT = "vrm_addon_extension"

# Expression previews as channels of preview-player clips: a keyed preview F-Curve of the armature
# data becomes a MorphWeightChannelAsset on the ARMATURE OBJECT's node whose target name is
# CHANNEL_PREFIX + the curve's RNA path inside the add-on data, without ".preview"
# ("vrm:vrm0.blend_shape_master.blend_shape_groups[8]", "vrm:vrm1.expressions.preset.happy",
# "vrm:vrm1.expressions.custom[0]").  It names the curve exactly (custom / VRM 0.x entries by
# index, as Blender's F-Curve does) and cannot clash with a shape key: armature nodes have none.
CHANNEL_PREFIX = "vrm:"
RE_PREVIEW_PATH = re.compile(r"^" + re.escape(EXT) + r"\.(vrm1\.expressions\.preset\.([a-z_]+)"
                             r"|vrm1\.expressions\.custom\[(\d+)\]"
                             r"|vrm0\.blend_shape_master\.blend_shape_groups\[(\d+)\])\.preview$")


def channel_key_for_path(data_path: str) -> Optional[str]:
    """The clip channel name of a preview F-Curve's ``data_path`` (see CHANNEL_PREFIX), or None
    when the path is not an expression preview."""
    m = RE_PREVIEW_PATH.match(data_path or "")
    return CHANNEL_PREFIX + m.group(1) if m else None


def location_of_path(data_path: str) -> Optional[tuple]:
    """(kind, key) of the expression whose preview ``data_path`` animates: ("preset", the add-on's
    preset property name), ("custom", index) or ("vrm0", group index); None for other paths."""
    m = RE_PREVIEW_PATH.match(data_path or "")
    if not m:
        return None
    if m.group(2) is not None:
        return ("preset", m.group(2))
    if m.group(3) is not None:
        return ("custom", int(m.group(3)))
    return ("vrm0", int(m.group(4)))
