"""The std140 FrameBlock of one frame (glsl/mtoon_blocks.glsl): camera, world, the suns, the sun's
shadow cascades, the local lamps' shadows and clusters, light-link words; every pass of the
pipeline (engine/gpu/passes/pipeline.py) binds it."""
from __future__ import annotations

import numpy as np

from .common import FRAME_BLOCK_FLOATS, gl_matrix
from .lights import LIGHT_KINDS, mtoon_light_colors
from .local_shadows import CUBE_FACES, MAX_LOCAL_SHADOWS, pack_local
from .local_shadows import FLOATS as LOCAL_FLOATS
from .shadow import atlas_layout
from .shadow_softness import soft_shadows, sun_softness


def pack_frame(frame, lights, fit=None, shadow_index=-1, local=None, lamps=None) -> np.ndarray:
    """The std140 FrameBlock (glsl/mtoon_blocks.glsl); ``lights``: the suns; ``fit``: the sun's
    CascadeFit (None: no shadow); ``local``: the local lamps' LocalFit (None: none); ``lamps``:
    the frame's FrameLamps (clusters, light-link bits; None: no local lamp, no link)."""
    s = frame.settings
    cam = frame.camera
    sun_fit = fit if shadow_index >= 0 else None                     # the sun's cascades, when it casts
    shadows_on = sun_fit is not None
    d = np.zeros(FRAME_BLOCK_FLOATS, np.float32)
    d[0:16] = gl_matrix(cam.view_projection)
    d[16:32] = gl_matrix(sun_fit.matrices[0] if sun_fit is not None else np.eye(4))
    inv = np.linalg.inv(np.asarray(cam.view, np.float64))
    d[32:35] = inv[:3, 3]; d[35] = 1.0 if cam.is_ortho else 0.0
    d[36:39] = cam.forward
    r = inv[:3, 0]
    d[40:43] = r / max(np.linalg.norm(r), 1e-12)
    wc = np.asarray(s.world_color, np.float64)[:3]
    sky = getattr(s, "world_sky_color", None)
    ground = getattr(s, "world_ground_color", None)
    d[44:47] = wc; d[47] = len(lights)
    d[48:51] = wc if sky is None else np.asarray(sky)[:3]; d[51] = s.time_seconds
    d[52:55] = wc if ground is None else np.asarray(ground)[:3]
    # bias and normal offset in shadow texels; the shader scales them by the sampled cascade's texel
    d[56:60] = (float(getattr(s, "shadow_bias", 0.5)), float(getattr(s, "shadow_normal_offset", 2.0)),
                float(getattr(s, "shadow_min_offset", 0.02)), 1.0 if shadows_on else 0.0)
    d[60:64] = (float(sun_fit.texel[0]) if sun_fit is not None else 0.0, float(shadow_index) if shadows_on else -1.0,
                float(sun_fit.tile) if sun_fit is not None else 0.0,
                float(max(0, int(getattr(s, "shadow_pcf", 1)))))   # True -> radius 1, False -> 0 (2x2)
    d[64:68] = (s.width, s.height, 1.0 / max(s.width, 1), 1.0 / max(s.height, 1))
    c0 = 68 + 4 * 16 * 3                                           # after the light arrays
    if sun_fit is not None:
        n = sun_fit.count
        for i in range(n):
            d[c0 + 16 * i: c0 + 16 * (i + 1)] = gl_matrix(sun_fit.matrices[i])
        t = c0 + 64
        d[t:t + n] = sun_fit.splits
        d[t + 4:t + 4 + n] = sun_fit.blend
        d[t + 8:t + 8 + n] = sun_fit.texel
        d[t + 12:t + 15] = (n, atlas_layout(n)[0], sun_fit.near)
        d[t + 15] = sun_softness(s, lights[shadow_index], sun_fit)   # penumbra per metre of gap (0: hard)
    lo = c0 + 64 + 16
    if local is not None:
        loc = pack_local(local)
        if lamps is not None and lamps.clusters is not None:    # local_shadow[j].x: the lamp's lamp_data row
            at = 16 * MAX_LOCAL_SHADOWS * CUBE_FACES                 # local_shadow[0]
            for j, li in enumerate(local.lights):
                loc[at + 4 * j] = lamps.texture_index(lamps.lights[li])
        d[lo:lo + loc.size] = loc
    d[lo + LOCAL_FLOATS - 1] = 1.0 if soft_shadows(s) else 0.0        # local_params.w: Soft Shadows
    if lamps is not None:
        d[lo + LOCAL_FLOATS:lo + LOCAL_FLOATS + 8] = lamps.pack()
    words = lamps.sun_words() if lamps is not None else [0.0] * len(lights)
    mcol = mtoon_light_colors(lights)
    for i, l in enumerate(lights):
        kind = LIGHT_KINDS.get(l.kind, 1)
        d[68 + 4 * i: 71 + 4 * i] = l.position
        d[71 + 4 * i] = kind + words[i]        # + 4 x (light-link bit + 1)
        dv = np.asarray(l.direction, np.float64)
        d[132 + 4 * i: 135 + 4 * i] = dv / max(np.linalg.norm(dv), 1e-12)
        cos_half = float(np.cos(0.5 * min(l.spot_size, np.pi))) if kind == 2 else -1.0
        d[135 + 4 * i] = cos_half
        d[196 + 4 * i: 199 + 4 * i] = mcol[i]
        d[199 + 4 * i] = (1.0 - cos_half) * float(l.spot_blend) if kind == 2 else 0.0
    return d
