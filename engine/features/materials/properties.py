"""RNA properties of the materials feature: ``material.stylized_mtoon`` (MToon 1.0 parameter set).
The render settings (``scene.stylized``) are the render engine's: engine/blender/render_settings.py.

Colours are linear (subtype COLOR). Factors default to the VRMC_materials_mtoon-1.0 README
values (mtoon-facts §1). Texture UV offset/scale are in Blender UV space (V up):
``uv' = uv * scale + offset``. UV animation speeds are stored exactly as in a VRM file (glTF
convention, +Y scrolls toward the top of the glTF image = down in Blender); the resolver converts
them to Blender's convention.
"""
from __future__ import annotations

import bpy
from bpy.props import BoolProperty, EnumProperty, FloatProperty, FloatVectorProperty, IntProperty, PointerProperty


def _tag_material(self, _context):
    """Tag the material for Blender's depsgraph (a viewport session re-reads it from the update;
    a Python property without an update function tags nothing)."""
    mat = getattr(self, "id_data", None)
    if mat is not None:
        mat.update_tag()


# (attribute, label, description, colour space note)
TEXTURE_SLOT_INFO = (
    ("base_color", "Lit Color Texture",
     "Base (lit) colour texture, sRGB RGBA. Multiplies the Lit Color and its alpha (glTF baseColorTexture)"),
    ("shade_multiply", "Shade Multiply Texture",
     "Shade colour texture, sRGB RGB. Multiplies the Shade Color (shadeMultiplyTexture)"),
    ("normal", "Normal Map",
     "Tangent-space normal map (non-colour). Its Scale is the glTF normalTexture.scale"),
    ("shading_shift", "Shading Shift Texture",
     "Linear texture whose RED channel times Scale is added to Shading Shift (shadingShiftTexture)"),
    ("emissive", "Emissive Texture",
     "Emission texture, sRGB RGB. Multiplies the Emissive colour (emissiveTexture)"),
    ("rim_multiply", "Rim Multiply Texture",
     "sRGB RGB mask multiplying MatCap and parametric rim (rimMultiplyTexture)"),
    ("matcap", "MatCap Texture",
     "MatCap image, sRGB, sampled with the view-space normal; not UV-animated (matcapTexture)"),
    ("outline_width_multiply", "Outline Width Texture",
     "Linear texture whose GREEN channel multiplies the outline width (outlineWidthMultiplyTexture)"),
    ("uv_animation_mask", "UV Animation Mask",
     "Linear texture whose BLUE channel scales UV animation per texel (uvAnimationMaskTexture)"),
)


class StylizedMToonTexture(bpy.types.PropertyGroup):
    image: PointerProperty(
        type=bpy.types.Image, name="Image", update=_tag_material,
        description="Image used for this MToon texture slot (empty = slot unused)")
    uv_offset: FloatVectorProperty(
        name="UV Offset", size=2, default=(0.0, 0.0), subtype="XYZ", update=_tag_material,
        description="UV offset in Blender UV space (V up), applied after UV animation: uv * scale + offset")
    uv_scale: FloatVectorProperty(
        name="UV Scale", size=2, default=(1.0, 1.0), subtype="XYZ", update=_tag_material,
        description="UV scale (tiling) in Blender UV space, applied after UV animation: uv * scale + offset")
    scale: FloatProperty(
        name="Scale", default=1.0, soft_min=-2.0, soft_max=2.0, update=_tag_material,
        description="Normal-map strength (normal slot) or multiplier of the red channel (shading shift slot); "
                    "unused by the other slots")


_COLOR = dict(subtype="COLOR", min=0.0, soft_max=1.0)


class StylizedMToonProperties(bpy.types.PropertyGroup):
    enabled: BoolProperty(
        name="Use MToon", default=False, update=_tag_material,
        description="Render this material with the MToon parameters below. When off, the Stylized engine "
                    "reads the VRM Add-on's MToon node group, else derives a toon look from the Principled BSDF")

    # --- lighting -------------------------------------------------------------------------
    base_color: FloatVectorProperty(
        name="Lit Color", size=4, default=(1.0, 1.0, 1.0, 1.0), update=_tag_material, **_COLOR,
        description="Colour of fully lit areas, linear RGB plus opacity in alpha (baseColorFactor)")
    shade_color: FloatVectorProperty(
        name="Shade Color", size=3, default=(0.0, 0.0, 0.0), update=_tag_material, **_COLOR,
        description="Colour of unlit / shadowed areas, linear (shadeColorFactor; spec default black)")
    shading_shift: FloatProperty(
        name="Shading Shift", default=0.0, soft_min=-1.0, soft_max=1.0, update=_tag_material,
        description="Moves the lit/shade boundary: the ramp is centred where N·L = -shift "
                    "(positive values enlarge the lit area) (shadingShiftFactor)")
    shading_toony: FloatProperty(
        name="Shading Toony", default=0.9, min=0.0, max=1.0, update=_tag_material,
        description="Sharpness of the lit/shade boundary: 1 = hard two-tone edge, 0 = smooth gradient "
                    "(shadingToonyFactor)")
    gi_equalization: FloatProperty(
        name="GI Equalization", default=0.9, min=0.0, max=1.0, update=_tag_material,
        description="Flattens ambient (world) lighting: 0 = directional ambient, 1 = uniform ambient "
                    "from the average of up and down (giEqualizationFactor)")
    emissive_color: FloatVectorProperty(
        name="Emissive", size=3, default=(0.0, 0.0, 0.0), update=_tag_material, **_COLOR,
        description="Emission colour added to the result, linear (emissiveFactor)")
    emissive_strength: FloatProperty(
        name="Emissive Strength", default=1.0, min=0.0, soft_max=10.0, update=_tag_material,
        description="Multiplier of the emission colour (KHR_materials_emissive_strength)")

    # --- rim --------------------------------------------------------------------------------
    matcap_factor: FloatVectorProperty(
        name="MatCap Factor", size=3, default=(1.0, 1.0, 1.0), update=_tag_material, **_COLOR,
        description="Tint multiplying the MatCap texture; no effect without a MatCap texture (matcapFactor)")
    rim_color: FloatVectorProperty(
        name="Rim Color", size=3, default=(0.0, 0.0, 0.0), update=_tag_material, **_COLOR,
        description="Colour of the parametric (fresnel) rim light; black disables it (parametricRimColorFactor)")
    rim_fresnel_power: FloatProperty(
        name="Rim Fresnel Power", default=5.0, min=0.0, soft_max=100.0, update=_tag_material,
        description="Exponent of the rim fresnel term: higher = thinner rim (parametricRimFresnelPowerFactor)")
    rim_lift: FloatProperty(
        name="Rim Lift", default=0.0, soft_min=0.0, soft_max=1.0, update=_tag_material,
        description="Added to 1 - N·V before the power: widens the rim toward the centre (parametricRimLiftFactor)")
    rim_lighting_mix: FloatProperty(
        name="Rim Lighting Mix", default=1.0, min=0.0, max=1.0, update=_tag_material,
        description="0 = rim and MatCap glow like emission, 1 = they are multiplied by the incoming light "
                    "(rimLightingMixFactor)")

    # --- outline ----------------------------------------------------------------------------
    outline_width_mode: EnumProperty(
        name="Outline Mode", default="none", update=_tag_material,
        items=(("none", "None", "No outline"),
               ("worldCoordinates", "World", "Width in metres along the surface normal"),
               ("screenCoordinates", "Screen", "Width as a fraction of the screen height, constant on screen")),
        description="How the inverted-hull outline width is measured (outlineWidthMode)")
    outline_width: FloatProperty(
        name="Outline Width", default=0.0, min=0.0, soft_max=0.05, precision=4, step=0.01, update=_tag_material,
        description="Outline width: metres (World mode) or fraction of the screen height (Screen mode) "
                    "(outlineWidthFactor)")
    outline_color: FloatVectorProperty(
        name="Outline Color", size=3, default=(0.0, 0.0, 0.0), update=_tag_material, **_COLOR,
        description="Outline colour, linear (outlineColorFactor)")
    outline_lighting_mix: FloatProperty(
        name="Outline Lighting Mix", default=1.0, min=0.0, max=1.0, update=_tag_material,
        description="0 = flat outline colour, 1 = outline colour multiplied by the shaded surface colour "
                    "(outlineLightingMixFactor)")

    # --- UV animation -----------------------------------------------------------------------
    uv_animation_scroll_x: FloatProperty(
        name="Scroll X Speed", default=0.0, soft_min=-10.0, soft_max=10.0, update=_tag_material,
        description="Horizontal UV scroll speed in UV units per second (uvAnimationScrollXSpeedFactor)")
    uv_animation_scroll_y: FloatProperty(
        name="Scroll Y Speed", default=0.0, soft_min=-10.0, soft_max=10.0, update=_tag_material,
        description="Vertical UV scroll speed in UV units per second, glTF convention as stored in VRM files "
                    "(positive moves the texture up the image) (uvAnimationScrollYSpeedFactor)")
    uv_animation_rotation: FloatProperty(
        name="Rotation Speed", default=0.0, soft_min=-10.0, soft_max=10.0, update=_tag_material,
        description="UV rotation speed about the UV centre in radians per second "
                    "(uvAnimationRotationSpeedFactor)")

    # --- rendering --------------------------------------------------------------------------
    alpha_mode: EnumProperty(
        name="Alpha Mode", default="OPAQUE", update=_tag_material,
        items=(("OPAQUE", "Opaque", "Alpha is ignored"),
               ("MASK", "Cutout", "Pixels with alpha below the cutoff are discarded"),
               ("BLEND", "Blend", "Alpha blended, drawn back to front after opaque surfaces")),
        description="How opacity is handled (glTF alphaMode)")
    alpha_cutoff: FloatProperty(
        name="Alpha Cutoff", default=0.5, min=0.0, max=1.0, update=_tag_material,
        description="Alpha threshold below which pixels are discarded in Cutout mode (alphaCutoff)")
    double_sided: BoolProperty(
        name="Double Sided", default=False, update=_tag_material,
        description="Draw back faces too (lit with a flipped normal); off = back faces are culled (doubleSided)")
    transparent_with_zwrite: BoolProperty(
        name="Transparent Z-Write", default=False, update=_tag_material,
        description="In Blend mode, also write depth so the surface occludes itself and later blended "
                    "surfaces (transparentWithZWrite)")
    render_queue_offset: IntProperty(
        name="Render Queue Offset", default=0, min=-9, max=9, update=_tag_material,
        description="Blend mode draw-order offset: higher draws later. Z-Write on uses 0..9, off uses -9..0 "
                    "(renderQueueOffsetNumber)")
    cast_shadow: BoolProperty(
        name="Cast Shadow", default=True, update=_tag_material,
        description="Surfaces with this material cast shadows into the Stylized shadow map")
    receive_shadow: BoolProperty(
        name="Receive Shadow", default=True, update=_tag_material,
        description="Surfaces with this material are darkened toward the shade colour by cast shadows")

    # --- textures (one pointer group per slot, added below) -----------------------------------

    def texture(self, slot: str) -> StylizedMToonTexture:
        return getattr(self, "tex_" + slot)


for _slot, _label, _desc in TEXTURE_SLOT_INFO:
    StylizedMToonProperties.__annotations__["tex_" + _slot] = PointerProperty(
        type=StylizedMToonTexture, name=_label, description=_desc)


CLASSES = (StylizedMToonTexture, StylizedMToonProperties)


def register():
    for c in CLASSES:
        bpy.utils.register_class(c)
    bpy.types.Material.stylized_mtoon = PointerProperty(
        type=StylizedMToonProperties, name="Stylized MToon",
        description="MToon 1.0 parameters used by the Stylized render engine")


def unregister():
    if hasattr(bpy.types.Material, "stylized_mtoon"):
        del bpy.types.Material.stylized_mtoon
    for c in reversed(CLASSES):
        bpy.utils.unregister_class(c)
