"""Uncached resolution of a Blender material into MToonParams.

Order: (1) our ``material.stylized_mtoon`` when enabled; (2) the VRM Add-on's MToon group node;
(3) the node tree (Principled BSDF, unlit Emission, the glTF importer's patterns: node_tree.py);
(4) the viewport display colour, with the reader's report of why.
"""
from __future__ import annotations

from ...core.assets.material import TEXTURE_SLOTS, MToonParams, TextureRef
from ..vrm import materials as vrm_addon
from . import losses, node_tree, principled, shadow_flags


def from_properties(material, props) -> MToonParams:
    p = MToonParams(
        base_color=tuple(props.base_color),
        shade_color=tuple(props.shade_color),
        shading_shift=props.shading_shift,
        shading_toony=props.shading_toony,
        gi_equalization=props.gi_equalization,
        emissive=tuple(c * props.emissive_strength for c in props.emissive_color),
        matcap_factor=tuple(props.matcap_factor),
        rim_color=tuple(props.rim_color),
        rim_fresnel_power=props.rim_fresnel_power,
        rim_lift=props.rim_lift,
        rim_lighting_mix=props.rim_lighting_mix,
        outline_width_mode=props.outline_width_mode,
        outline_width=props.outline_width,
        outline_color=tuple(props.outline_color),
        outline_lighting_mix=props.outline_lighting_mix,
        # stored in glTF convention; Blender V-up: CCW rotation about 0.5, scroll (sx, -sy)
        uv_scroll_x=props.uv_animation_scroll_x,
        uv_scroll_y=-props.uv_animation_scroll_y,
        uv_rotation=props.uv_animation_rotation,
        alpha_mode=props.alpha_mode,
        alpha_cutoff=props.alpha_cutoff,
        double_sided=props.double_sided,
        transparent_with_zwrite=props.transparent_with_zwrite,
        render_queue_offset=props.render_queue_offset,
        cast_shadow=props.cast_shadow,
        receive_shadow=props.receive_shadow,
        source="stylized",
    )
    textures = {}
    for slot in TEXTURE_SLOTS:
        t = props.texture(slot)
        if t.image is not None:
            textures[slot] = TextureRef(image=t.image, uv_offset=tuple(t.uv_offset), uv_scale=tuple(t.uv_scale),
                                        scale=float(t.scale))
    p.normal_scale = float(props.texture("normal").scale)
    p.textures = textures
    # our properties have no vertex-colour switch: the node tree says whether the mesh's colour
    # attribute feeds the base colour (a Color Attribute node), as it does for Blender
    tree_params, _ = node_tree.read_node_tree(material)
    if tree_params is not None:
        p.vertex_colors, p.vertex_alpha = tree_params.vertex_colors, tree_params.vertex_alpha
    return p


def resolve_uncached(material, use_properties: bool = True) -> MToonParams:
    """Resolve ``material`` (None allowed); ``use_properties=False`` skips step 1 (for conversion).
    ``images`` lists every image the material uses (losses.material_images: the render log names
    those whose file is missing)."""
    p = _resolve(material, use_properties)
    if material is not None:
        p.images = losses.material_images(material, p)
    return p


def _resolve(material, use_properties: bool) -> MToonParams:
    if material is None:
        return MToonParams(base_color=(0.8, 0.8, 0.8, 1.0), shade_color=principled.shade_from_base((0.8,) * 3))
    props = getattr(material, "stylized_mtoon", None)
    if use_properties and props is not None and props.enabled:
        p = from_properties(material, props)
        p.is_vrm_outline_material = vrm_addon.is_outline_material(material)
        return p
    node = vrm_addon.find_output_node(material)
    if node is not None:
        p = vrm_addon.read(material, node)
        p.cast_shadow = shadow_flags.casts_shadow(material)
        rate = shadow_flags.vrm_receive_shadow_rate(material)
        if rate is not None:
            p.receive_shadow_rate = rate
            p.receive_shadow = rate > 0.0
        return p
    p, unmapped = node_tree.read_node_tree(material)
    if p is None:
        p = principled.read_diffuse(material, unmapped)
    p.is_vrm_outline_material = vrm_addon.is_outline_material(material)
    p.cast_shadow = shadow_flags.casts_shadow(material)
    return p


def write_properties(props, p: MToonParams) -> None:
    """Copy resolved params into our properties (inverse of from_properties)."""
    props.base_color = tuple(p.base_color[:4]) if len(p.base_color) >= 4 else tuple(p.base_color[:3]) + (1.0,)
    props.shade_color = p.shade_color[:3]
    props.shading_shift = p.shading_shift
    props.shading_toony = p.shading_toony
    props.gi_equalization = p.gi_equalization
    em = tuple(p.emissive[:3])
    peak = max(em) if em else 0.0
    if peak > 1.0:
        props.emissive_color, props.emissive_strength = tuple(c / peak for c in em), peak
    else:
        props.emissive_color, props.emissive_strength = em, 1.0
    props.matcap_factor = p.matcap_factor[:3]
    props.rim_color = p.rim_color[:3]
    props.rim_fresnel_power = max(0.0, p.rim_fresnel_power)
    props.rim_lift = p.rim_lift
    props.rim_lighting_mix = p.rim_lighting_mix
    props.outline_width_mode = p.outline_width_mode
    props.outline_width = max(0.0, p.outline_width)
    props.outline_color = p.outline_color[:3]
    props.outline_lighting_mix = p.outline_lighting_mix
    props.uv_animation_scroll_x = p.uv_scroll_x
    props.uv_animation_scroll_y = -p.uv_scroll_y
    props.uv_animation_rotation = p.uv_rotation
    props.alpha_mode = p.alpha_mode
    props.alpha_cutoff = p.alpha_cutoff
    props.double_sided = p.double_sided
    props.transparent_with_zwrite = p.transparent_with_zwrite
    props.render_queue_offset = max(-9, min(9, int(p.render_queue_offset)))
    props.cast_shadow = p.cast_shadow
    props.receive_shadow = p.receive_shadow
    for slot in TEXTURE_SLOTS:
        t = props.texture(slot)
        ref = p.textures.get(slot)
        t.image = ref.image if ref is not None else None
        t.uv_offset = tuple(ref.uv_offset) if ref is not None else (0.0, 0.0)
        t.uv_scale = tuple(ref.uv_scale) if ref is not None else (1.0, 1.0)
        t.scale = float(ref.scale) if ref is not None else 1.0
    props.texture("normal").scale = float(p.normal_scale)
