"""Per-frame inputs of the FramePipeline (plain data, numpy; built by the session)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np


@dataclass
class CameraData:
    view: np.ndarray                 # (4,4) world -> view
    projection: np.ndarray           # (4,4) view -> clip (OpenGL convention)
    is_ortho: bool = False

    @property
    def view_projection(self) -> np.ndarray:
        return self.projection @ self.view

    @property
    def position(self) -> np.ndarray:
        return np.linalg.inv(self.view)[:3, 3]

    @property
    def forward(self) -> np.ndarray:
        """Unit view direction in world space (camera looks down its -Z)."""
        f = -np.linalg.inv(self.view)[:3, 2]
        return f / max(np.linalg.norm(f), 1e-12)


@dataclass
class LightData:
    kind: str                        # 'SUN', 'POINT', 'SPOT', 'AREA'
    color: np.ndarray                # (3,) linear colour x power in Blender's units (sun: W/m^2 irradiance;
                                     # point/spot/area: W), see session.scene_lights and README "Light units"
    direction: np.ndarray            # (3,) unit, the direction the light travels (light's -Z)
    position: np.ndarray             # (3,)
    radius: float = 0.0              # soft size (unused by the toon ramp)
    spot_size: float = np.pi         # full cone angle (SPOT)
    spot_blend: float = 0.0
    cast_shadow: bool = True
    name: str = ""

    @property
    def strength(self) -> float:
        return float(np.max(self.color)) if self.color.size else 0.0


@dataclass
class FrameSettings:
    width: int
    height: int
    film_transparent: bool = False
    world_color: np.ndarray = field(default_factory=lambda: np.array([0.05, 0.05, 0.05]))
    time_seconds: float = 0.0        # drives UV animation
    shadows: bool = True
    shadow_resolution: int = 2048
    shadow_bias: float = 0.001        # constant depth bias, normalised light depth (fraction of the fitted range)
    shadow_normal_offset: float = 1.5 # normal offset, in shadow-map texels, scaled by (1 - N.L)
    shadow_pcf: int = 1               # PCF radius r (True = 1): a bilinear-weighted (2r+2)^2 texel filter; 0 = 2x2
    outlines: bool = True
    screen_space_outline: bool = False
    screen_space_outline_width: float = 1.0
    screen_space_outline_color: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 0.0]))
    fxaa: bool = True
    profile_gpu: bool = False
    max_lights: int = 16              # lights used by the forward pass (at most 16)
    # GI hemisphere: rawGi(n) = mix(ground, sky, n.z / 2 + 0.5); None = world_color (uniform GI,
    # where giEqualizationFactor has no visible effect)
    world_sky_color: Optional[np.ndarray] = None
    world_ground_color: Optional[np.ndarray] = None


@dataclass
class FrameData:
    items: list                      # RenderItems (engine.world) or fallback items with the same fields
    camera: CameraData
    lights: list
    settings: FrameSettings
    materials: dict = field(default_factory=dict)   # material name -> resolved material params
