"""Which shadows are soft (docs/lighting.md "Soft shadows") and Shadow Linking of the local
lamps' faces: the pipeline's shadow choices per frame (engine/gpu/passes/pipeline.py)."""
from __future__ import annotations

import numpy as np

from .lamp_links import blocks


def soft_shadows(settings) -> bool:
    return bool(getattr(settings, "soft_shadows", True))


#: a sun whose penumbra 2 m from its blocker stays within this many texels of the sharpest cascade
#: is drawn with the hard filter (no blocker search): a cost trade-off on llvmpipe, where the soft
#: path adds 10-20 % to a frame (the demo's 1-degree sun: 16 texels, drawn hard; a 5-degree sun
#: at the same framing: 80, soft)
SOFT_MIN_TEXELS = 24.0


def sun_softness(settings, sun, fit) -> float:
    """The sun's penumbra per metre between blocker and receiver, 2 tan(Angle / 2), or 0 (hard)
    when Soft Shadows is off or it stays within the hard filter (SOFT_MIN_TEXELS)."""
    per_m = 2.0 * np.tan(0.5 * min(float(getattr(sun, "sun_angle", 0.0)), 3.1))
    if not soft_shadows(settings) or per_m * 2.0 < SOFT_MIN_TEXELS * float(fit.texel[0]):
        return 0.0
    return float(per_m)


def frame_soft(settings, lights, sun_i, fit, local_fit) -> bool:
    """Whether the frame's shaders need the soft-shadow code: a soft sun or a shadowed local lamp
    with a Radius, with Soft Shadows on."""
    if not soft_shadows(settings):
        return False
    sun = fit is not None and sun_i >= 0 and sun_softness(settings, lights[sun_i], fit) > 0.0
    return sun or (local_fit is not None and any(lights[i].radius > 0.0 for i in local_fit.lights))


def link_local_casters(fit, lights, casters) -> None:
    """Shadow Linking of the local lamps: each face of ``fit`` keeps the casters its lamp's blocker
    collection lets block it (engine/gpu/passes/lamp_links.py)."""
    for j, li in enumerate(fit.lights):
        allowed = blocks(lights[li], casters)
        if allowed is casters:
            continue
        ok = np.zeros(len(casters), bool)
        keep = {id(it) for it in allowed}
        ok[[k for k, it in enumerate(casters) if id(it) in keep]] = True
        for slot in range(fit.first[j], fit.first[j] + fit.faces[j]):
            fit.casters[slot] = fit.casters[slot][ok[fit.casters[slot]]]
