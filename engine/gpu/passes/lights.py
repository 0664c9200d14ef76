"""The frame's lamps as the passes use them: Blender's units -> MToon's light colour, and which
lamps shade a frame (every lamp; at most MAX_LIGHTS suns).

Blender's units -> MToon's light colour (README "Light units").  MToon's light colour is the
radiance a white Lambert surface facing the lamp reflects, albedo x irradiance / pi, so the lit
colour shows exactly as bright as a diffuse surface lit head-on in EEVEE/Cycles:

  sun   irradiance E [W/m^2]                      -> E / pi
  point power P [W], intensity P / (4 pi) [W/sr]  -> P / (4 pi^2) / r^2 (the shader divides by r^2)
  spot  as point (Blender's spot power is the power of the whole sphere), x the cone mask
  area  power P [W], a one-sided Lambert emitter: intensity P cos(t) / pi  -> P / pi^2 x cos(t) / r^2
        (far-field point approximation of EEVEE's radiance P / (pi A))
"""
from __future__ import annotations

import numpy as np

from .common import MAX_LIGHTS

LIGHT_KINDS = {"SUN": 0, "POINT": 1, "SPOT": 2, "AREA": 3}
LIGHT_UNIT_SCALE = np.array([1.0 / np.pi, 1.0 / (4.0 * np.pi ** 2), 1.0 / (4.0 * np.pi ** 2), 1.0 / np.pi ** 2])


def mtoon_light_colors(lights) -> np.ndarray:
    """(N, 3) MToon light colours (for local lamps: at 1 m) of LightData in Blender's units."""
    if not lights:
        return np.zeros((0, 3))
    kinds = np.array([LIGHT_KINDS.get(l.kind, 1) for l in lights])
    cols = np.array([np.asarray(l.color, np.float64)[:3] for l in lights])
    return cols * LIGHT_UNIT_SCALE[kinds][:, None]


def shading_lights(lights, max_lights: int = 0) -> list:
    """The lamps that shade a frame, suns first: every sun (at most MAX_LIGHTS, the strongest:
    they live in the FrameBlock), then every point, spot and area lamp (the clusters pick those
    that reach each pixel: engine/gpu/passes/clusters.py; ``max_lights`` is their per-cluster
    budget there, not used here)."""
    known = [l for l in lights if l.kind in LIGHT_KINDS]
    suns = [l for l in known if l.kind == "SUN"]
    if len(suns) > MAX_LIGHTS:
        strength = mtoon_light_colors(suns).max(-1)
        keep = set(np.argsort(-strength, kind="stable")[:MAX_LIGHTS].tolist())
        suns = [l for i, l in enumerate(suns) if i in keep]
    return suns + [l for l in known if l.kind != "SUN"]


def suns_left_out(lights) -> list:
    """What a frame says of the suns beyond MAX_LIGHTS (the weakest)."""
    suns = [l for l in lights if l.kind == "SUN"]
    kept = {id(l) for l in shading_lights(suns)}
    return [f"sun '{l.name}' left out: at most {MAX_LIGHTS} suns light a frame" for l in suns if id(l) not in kept]
