"""The VRM 1.0 expression rules and the add-on's enum tables (numpy only).

``evaluate`` applies the rules vectorised:

* a value is clamped to [0, 1]; ``isBinary``: 1 when the value is > 0.5, else 0;
* override amounts: ``block`` = 1 while the (binary-processed) output is > 0, ``blend`` = the
  output, ``none`` = 0; the override of a kind on an expression of the same kind is ignored
  (the spec: "settings for the same kind are treated as invalid");
* each procedural group (blink: blink/blinkLeft/blinkRight, lookAt: lookUp/Down/Left/Right,
  mouth: aa/ih/ou/ee/oh) is multiplied by ``max(0, 1 - sum of amounts)``; a binary expression
  that receives any override (multiplier < 1) is suppressed completely.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

OVERRIDE_NONE, OVERRIDE_BLOCK, OVERRIDE_BLEND = 0, 1, 2
OVERRIDE_NAMES = ("none", "block", "blend")
CAT_NONE, CAT_BLINK, CAT_LOOK_AT, CAT_MOUTH = -1, 0, 1, 2
CATEGORY_NAMES = ("blink", "lookAt", "mouth")

# VRM 1.0 presets in the specification's order: (name, the add-on's property name)
PRESETS: Tuple[Tuple[str, str], ...] = (
    ("happy", "happy"), ("angry", "angry"), ("sad", "sad"), ("relaxed", "relaxed"),
    ("surprised", "surprised"), ("aa", "aa"), ("ih", "ih"), ("ou", "ou"), ("ee", "ee"), ("oh", "oh"),
    ("blink", "blink"), ("blinkLeft", "blink_left"), ("blinkRight", "blink_right"),
    ("lookUp", "look_up"), ("lookDown", "look_down"), ("lookLeft", "look_left"),
    ("lookRight", "look_right"), ("neutral", "neutral"),
)
PRESET_NAMES = tuple(p for p, _ in PRESETS)
PRESET_CATEGORY = {
    "blink": CAT_BLINK, "blinkLeft": CAT_BLINK, "blinkRight": CAT_BLINK,
    "lookUp": CAT_LOOK_AT, "lookDown": CAT_LOOK_AT, "lookLeft": CAT_LOOK_AT, "lookRight": CAT_LOOK_AT,
    "aa": CAT_MOUTH, "ih": CAT_MOUTH, "ou": CAT_MOUTH, "ee": CAT_MOUTH, "oh": CAT_MOUTH,
}
# the add-on's VRM 0.x preset_name enum values -> VRM 1.0 preset (0 = unknown: a custom group)
VRM0_PRESETS = {1: "neutral", 2: "aa", 3: "ih", 4: "ou", 5: "ee", 6: "oh", 7: "blink", 8: "happy",
                9: "angry", 10: "sad", 11: "relaxed", 12: "lookUp", 13: "lookDown", 14: "lookLeft",
                15: "lookRight", 16: "blinkLeft", 17: "blinkRight"}
# the add-on's VRM 1.0 material colour bind type enum values
COLOR_BIND_TYPES = {0: "color", 1: "emissionColor", 2: "shadeColor", 5: "matcapColor", 3: "rimColor",
                    4: "outlineColor"}
# VRM 0.x material value property names -> VRM 1.0 colour bind type ("uv": _MainTex_ST)
VRM0_MATERIAL_PROPERTIES = {"_Color": "color", "_EmissionColor": "emissionColor", "_ShadeColor": "shadeColor",
                            "_RimColor": "rimColor", "_OutlineColor": "outlineColor",
                            "_SphereAdd": "matcapColor", "_MainTex_ST": "uv"}

SPEC_VRM0, SPEC_VRM1 = "0.x", "1.0"

# Expression previews as channels of preview-player clips: engine/blender/importer/vrm_paths.py (EXT,
# CHANNEL_PREFIX, RE_PREVIEW_PATH: the importer's names, read here)
from ...blender.importer.vrm_paths import CHANNEL_PREFIX, EXT, RE_PREVIEW_PATH, channel_key_for_path, location_of_path  # noqa: E402,F401

PRESET_PROPS = frozenset(k for _p, k in PRESETS)


# ------------------------------------------------------------------------------------------------
# the evaluator (numpy only)
# ------------------------------------------------------------------------------------------------

def evaluate(values, is_binary, overrides, category) -> np.ndarray:
    """Expression outputs after isBinary and the override rules (VRM 1.0 expressions.md).

    values (E,) raw expression values; is_binary (E,) bool; overrides (E, 3) ints
    (OVERRIDE_NONE/BLOCK/BLEND for blink, lookAt, mouth); category (E,) CAT_* of each expression.
    Non-finite values count as 0.  Returns (E,) float64 outputs in [0, 1]."""
    v = np.asarray(values, np.float64).reshape(-1)
    v = np.where(np.isfinite(v), v, 0.0)
    v = np.clip(v, 0.0, 1.0)
    binary = np.asarray(is_binary, bool).reshape(-1)
    out = np.where(binary, (v > 0.5).astype(np.float64), v)
    ov = np.asarray(overrides, np.int64).reshape(-1, 3)
    cat = np.asarray(category, np.int64).reshape(-1)
    if out.size == 0:
        return out
    amount = np.where(ov == OVERRIDE_BLOCK, (out > 0.0)[:, None].astype(np.float64),
                      np.where(ov == OVERRIDE_BLEND, out[:, None], 0.0))
    same_kind = cat[:, None] == np.arange(3)[None, :]
    amount = np.where(same_kind, 0.0, amount)
    mult = np.clip(1.0 - amount.sum(axis=0), 0.0, 1.0)            # (3,) blink, lookAt, mouth
    m = np.where(cat >= 0, mult[np.clip(cat, 0, 2)], 1.0)
    final = out * m
    return np.where(binary & (m < 1.0), 0.0, final)
