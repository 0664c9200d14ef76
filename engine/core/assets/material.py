"""MToon 1.0 parameters as consumed by the passes (linear colours, spec defaults).

Defaults follow the VRMC_materials_mtoon-1.0 README column (see mtoon-facts §1).
UV animation values are in Blender's V-up convention (mtoon-facts §2.7): standard CCW
rotation about 0.5 and scroll (sx, -sy) relative to the glTF values.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# Texture slot names used as keys of MToonParams.textures.
TEXTURE_SLOTS = (
    "base_color",
    "shade_multiply",
    "normal",
    "shading_shift",
    "emissive",
    "rim_multiply",
    "matcap",
    "outline_width_multiply",
    "uv_animation_mask",
)


@dataclass
class TextureRef:
    image: object = None           # bpy.types.Image or None
    uv_offset: tuple = (0.0, 0.0)
    uv_scale: tuple = (1.0, 1.0)
    scale: float = 1.0             # normal-map scale / shading-shift scale


@dataclass
class MToonParams:
    base_color: tuple = (1.0, 1.0, 1.0, 1.0)
    shade_color: tuple = (0.0, 0.0, 0.0)
    shading_shift: float = 0.0
    shading_toony: float = 0.9
    gi_equalization: float = 0.9
    emissive: tuple = (0.0, 0.0, 0.0)      # factor x strength
    normal_scale: float = 1.0
    matcap_factor: tuple = (1.0, 1.0, 1.0)
    rim_color: tuple = (0.0, 0.0, 0.0)
    rim_fresnel_power: float = 5.0
    rim_lift: float = 0.0
    rim_lighting_mix: float = 1.0
    outline_width_mode: str = "none"        # "none" | "worldCoordinates" | "screenCoordinates"
    outline_width: float = 0.0
    outline_color: tuple = (0.0, 0.0, 0.0)
    outline_lighting_mix: float = 1.0
    uv_scroll_x: float = 0.0
    uv_scroll_y: float = 0.0
    uv_rotation: float = 0.0
    alpha_mode: str = "OPAQUE"              # "OPAQUE" | "MASK" | "BLEND"
    alpha_cutoff: float = 0.5
    double_sided: bool = False
    transparent_with_zwrite: bool = False
    render_queue_offset: int = 0
    cast_shadow: bool = True
    receive_shadow: bool = True
    receive_shadow_rate: float = 1.0        # how strongly received shadows darken (MToon 0.x _ReceiveShadowRate)
    textures: dict = field(default_factory=dict)   # slot name -> TextureRef (see TEXTURE_SLOTS)
    # Beyond MToon 1.0: what Blender materials need (see docs/materials.md)
    vertex_colors: bool = False             # base (and shade) colour x the mesh's colour attribute RGB
    vertex_alpha: bool = False              # base alpha x the colour attribute's alpha
    unlit: bool = False                     # base colour shown flat (KHR_materials_unlit, Emission shader)
    metallic: float = 0.0                   # Principled Metallic (x the texture channel when one is read)
    roughness: float = 0.5                  # Principled Roughness (likewise)
    metallic_channel: int = -1              # channel of textures["metallic_roughness"]: 0-3 RGBA, 4 luminance, -1 none
    roughness_channel: int = -1
    unmapped: tuple = ()                    # what the node-tree reader could not map, one message each
    source: str = "default"                 # "stylized" | "vrm_addon" | "principled" | "unlit" | "default"
    is_vrm_outline_material: bool = False   # the VRM add-on's "MToon Outline (...)" material: passes skip it
    images: tuple = ()                      # every bpy Image the material uses (losses.material_images)
