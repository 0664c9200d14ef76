"""VRM expression material binds (colour and texture transform) applied to MToonParams per frame.

The timeline reader's expression step (``driver.VrmDriver``) evaluates the avatars' expressions every
frame (F12, timeline, preview player) and keeps the frame's weighted sums (``VrmDriver.material_binds``); the
material resolver passes each resolved MToonParams through ``apply`` before the passes draw it.

VRM 1.0 (expressions.md, "Expression update algorithm"): a colour = ``base + sum_e w_e (target_e -
base)``, with ``base`` the material's own value (our resolved MToonParams, so the add-on's
``Expression ... Color Bind`` sockets, which the add-on fills from the same previews for EEVEE,
are never read: no double counting).  The texture transform is interpolated the same way from the
texture's own KHR_texture_transform towards each bind's scale / offset (as the VRM Add-on does),
for every UV-mapped texture (not the matcap).

The frame's binds travel with the frame: the timeline reader keeps the sums it evaluated for
its frame (``VrmDriver.material_binds``, one per reader) and the session hands them to ``apply`` when it
resolves that frame's materials (``MaterialsDriver.frame``), so no session ever sees
another's binds.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ...core.assets.material import MToonParams

# colour bind type -> (MToonParams field, components)
FIELDS = {
    "color": ("base_color", 4),
    "emissionColor": ("emissive", 3),
    "shadeColor": ("shade_color", 3),
    "matcapColor": ("matcap_factor", 3),
    "rimColor": ("rim_color", 3),
    "outlineColor": ("outline_color", 3),
}

def _lerp_sum(base, sum_target, sum_weight, n):
    b = np.asarray(tuple(base)[:n] + (1.0,) * max(0, n - len(tuple(base))), np.float64)[:n]
    return tuple(float(x) for x in b + np.asarray(sum_target[:n]) - sum_weight * b)


def apply(material_name: str, params: MToonParams, frame_binds) -> MToonParams:
    """``params`` with the expression binds of ``material_name`` in ``frame_binds`` (the frame's
    {material name: {type or 'uv': (weighted target sum (4,), weight sum)}}; a copy: the cached
    params are never changed), or ``params`` itself when no expression touches it."""
    binds = frame_binds.get(material_name) if (material_name and frame_binds) else None
    if not binds:
        return params
    changes = {}
    for kind, (st, sw) in binds.items():
        if kind == "uv":
            continue
        field = FIELDS.get(kind)
        if field is None:
            continue
        name, n = field
        changes[name] = _lerp_sum(getattr(params, name), st, sw, n)
    out = dataclasses.replace(params, **changes)
    uv = binds.get("uv")
    if uv is not None and params.textures:
        st, sw = uv
        textures = {}
        for slot, ref in params.textures.items():
            if slot == "matcap" or ref is None:
                textures[slot] = ref
                continue
            # our TextureRef is Blender's V-up form of KHR_texture_transform: (ox, 1 - sy - oy)
            sx, sy = (float(v) for v in ref.uv_scale)
            ox, oyb = (float(v) for v in ref.uv_offset)
            oy = 1.0 - sy - oyb
            nsx, nsy = sx + st[0] - sw * sx, sy + st[1] - sw * sy
            nox, noy = ox + st[2] - sw * ox, oy + st[3] - sw * oy
            textures[slot] = dataclasses.replace(ref, uv_scale=(nsx, nsy), uv_offset=(nox, 1.0 - nsy - noy))
        out.textures = textures
    return out


__all__ = ["apply", "FIELDS"]
