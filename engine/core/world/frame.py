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
    clip_start: float = 0.05         # Shadow > Clip Start (shadow_buffer_clip_start): a local lamp's shadow near plane
    # EEVEE's influence radius (m): the lamp adds nothing beyond it (Light Threshold, or the lamp's
    # Custom Distance); inf for a sun (engine/gpu/passes/clusters.py culls local lamps by it)
    influence: float = float("inf")
    sun_angle: float = 0.0           # a sun's Angle (rad): its shadow's penumbra (soft shadows)
    # Light Linking / Shadow Linking (engine/core/world/light_links.LinkRule; None: every object)
    receivers: Optional[object] = None
    blockers: Optional[object] = None

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
    shadow_resolution: int = 2048     # the shadow atlas' size: 1 map, or 2x2 tiles of half the size (2-4 cascades)
    shadow_cascades: int = 3          # view-fitted cascades of the sun's shadow (1-4)
    shadow_distance: float = 100.0    # no sun shadow beyond this view depth (m); also bounded by the clip range
    shadow_split_lambda: float = 0.8  # practical split scheme: 1 = logarithmic, 0 = uniform slices
    shadow_cascade_fade: float = 0.1  # fraction of each cascade's depth blended into the next one
    shadow_bias: float = 0.5          # depth bias towards the sun, in shadow texels of the sampled cascade
    shadow_normal_offset: float = 2.0 # normal offset, in shadow texels, x sin(angle between normal and light)
    shadow_min_offset: float = 0.02   # ... at least this many metres: layers closer to a surface cast nothing on it
    shadow_pcf: int = 1               # PCF radius r (True = 1): a bilinear-weighted (2r+2)^2 texel filter; 0 = 2x2
    soft_shadows: bool = True         # lamp Radius / sun Angle widen the penumbra (PCSS); False: today's hard edge
    outlines: bool = True
    screen_space_outline: bool = False
    screen_space_outline_width: float = 1.0
    screen_space_outline_color: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 0.0]))
    fxaa: bool = True
    profile_gpu: bool = False
    max_lights: int = 128             # Lamps per Pixel: the most point/spot/area lamps of one cluster (clusters.py)
    # GI hemisphere: rawGi(n) = mix(ground, sky, n.z / 2 + 0.5); None = world_color (uniform GI,
    # where giEqualizationFactor has no visible effect)
    world_sky_color: Optional[np.ndarray] = None
    world_ground_color: Optional[np.ndarray] = None
    # render passes that need the forward pass's extra outputs (engine/gpu/passes/render_passes.py):
    # False = none requested, the shaders write none and no extra target exists
    gpu_passes: bool = False
    # View Layer > Passes > Alpha Threshold: BLEND surfaces at least this opaque write the Normal
    # and index passes; below it those passes show what lies behind (render_passes.py)
    alpha_threshold: float = 0.5
    # anti-aliasing of final frames (engine/gpu/passes/samples.py): samples per frame (1 = FXAA only),
    # this draw's sub-pixel offset in pixels, and whether it reuses the frame's shadow maps
    samples: int = 1
    jitter: tuple = (0.0, 0.0)
    reuse_shadow: bool = False


@dataclass
class FrameData:
    items: list                      # RenderItems (engine.core.world) or fallback items with the same fields
    camera: CameraData
    lights: list
    settings: FrameSettings
    materials: dict = field(default_factory=dict)   # material name -> resolved material params
    # every palette of the frame as one float32 texel array (SkinningPaletteSet.texel_rows()):
    # grouped draws read their palette texture from it instead of concatenating the palettes
    palette_rows: object = None
    # the view layer's visibility (engine/gpu/passes/visibility.py): objects that are holdouts (their
    # own Holdout flag or a holdout collection), materials whose output is a Holdout shader, and
    # objects the camera does not see (Visibility > Camera off, indirect-only collections) that
    # still cast shadows
    holdout_objects: frozenset = frozenset()
    holdout_materials: frozenset = frozenset()
    camera_hidden: frozenset = frozenset()
    material_pass_index: dict = field(default_factory=dict)   # material name -> Pass Index (IndexMA)
