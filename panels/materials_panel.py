"""Material Properties > MToon (Stylized engine)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import bpy

ENGINE = "STYLIZED"

_SOURCE_TEXT = {
    "stylized": ("Stylized MToon properties", "SHADING_RENDERED"),
    "vrm_addon": ("VRM Add-on MToon node group", "NODETREE"),
    "principled": ("Toon look derived from the Principled BSDF", "NODE_MATERIAL"),
    "unlit": ("Unlit (Emission / KHR_materials_unlit)", "SHADING_SOLID"),
    "default": ("Viewport display colour", "COLOR"),
}


def _tex(layout, props, slot, text=None, show_scale=False):
    t = props.texture(slot)
    col = layout.column(align=True)
    col.template_ID(t, "image", new="image.new", open="image.open", text=text or t.bl_rna.name)
    if t.image is not None:
        row = col.row(align=True)
        row.prop(t, "uv_offset", text="Offset")
        row = col.row(align=True)
        row.prop(t, "uv_scale", text="Scale")
        if show_scale:
            col.prop(t, "scale")
    return col


class _MToonBase:
    bl_space_type = "PROPERTIES"
    bl_region_type = "WINDOW"
    bl_context = "material"
    COMPAT_ENGINES = {ENGINE}

    @classmethod
    def poll(cls, context):
        return context.engine in cls.COMPAT_ENGINES and getattr(context, "material", None) is not None \
            and hasattr(context.material, "stylized_mtoon")


class STYLIZED_PT_material_mtoon(_MToonBase, bpy.types.Panel):
    bl_label = "MToon"

    def draw_header(self, context):
        self.layout.prop(context.material.stylized_mtoon, "enabled", text="")

    def draw(self, context):
        from ..engine.features.materials import resolve_material

        layout = self.layout
        mat = context.material
        params = resolve_material(mat)
        text, icon = _SOURCE_TEXT.get(params.source, (params.source, "QUESTION"))
        box = layout.box()
        box.label(text="Source: " + text, icon=icon)
        if params.is_vrm_outline_material:
            box.label(text="VRM Add-on outline material: skipped (outlines are drawn by the engine)", icon="INFO")
        if not mat.stylized_mtoon.enabled:
            box.operator("stylized.convert_to_mtoon", icon="SHADING_TEXTURE")
            op = box.operator("stylized.convert_to_mtoon", text="Convert All Selected Objects")
            op.all_selected = True
        else:
            layout.prop(mat.stylized_mtoon, "base_color")
            _tex(layout, mat.stylized_mtoon, "base_color", "Lit Texture")


class _MToonSub(_MToonBase):
    bl_parent_id = "STYLIZED_PT_material_mtoon"
    bl_options = {"DEFAULT_CLOSED"}

    if TYPE_CHECKING:   # layout: bpy.types.Panel's, which the panels below derive from; draw_props: theirs
        layout: Any

        def draw_props(self, layout, props) -> None: ...

    @classmethod
    def poll(cls, context):
        return super().poll(context) and context.material.stylized_mtoon.enabled

    def draw(self, context):
        props = context.material.stylized_mtoon
        self.layout.use_property_split = True
        self.layout.use_property_decorate = False
        self.draw_props(self.layout, props)


class STYLIZED_PT_material_mtoon_lighting(_MToonSub, bpy.types.Panel):
    bl_label = "Lighting"
    bl_options = set()

    def draw_props(self, layout, props):
        layout.prop(props, "shade_color")
        _tex(layout, props, "shade_multiply", "Shade Texture")
        layout.prop(props, "gi_equalization")
        layout.prop(props, "emissive_color")
        layout.prop(props, "emissive_strength")
        _tex(layout, props, "emissive", "Emissive Texture")
        _tex(layout, props, "normal", "Normal Map", show_scale=True)


class STYLIZED_PT_material_mtoon_shading(_MToonSub, bpy.types.Panel):
    bl_label = "Shading"
    bl_options = set()

    def draw_props(self, layout, props):
        layout.prop(props, "shading_toony")
        layout.prop(props, "shading_shift")
        _tex(layout, props, "shading_shift", "Shift Texture", show_scale=True)


class STYLIZED_PT_material_mtoon_rim(_MToonSub, bpy.types.Panel):
    bl_label = "Rim"

    def draw_props(self, layout, props):
        layout.prop(props, "matcap_factor")
        _tex(layout, props, "matcap", "MatCap")
        layout.prop(props, "rim_color")
        layout.prop(props, "rim_fresnel_power")
        layout.prop(props, "rim_lift")
        layout.prop(props, "rim_lighting_mix")
        _tex(layout, props, "rim_multiply", "Rim Mask")


class STYLIZED_PT_material_mtoon_outline(_MToonSub, bpy.types.Panel):
    bl_label = "Outline"

    def draw_props(self, layout, props):
        layout.prop(props, "outline_width_mode")
        col = layout.column()
        col.active = props.outline_width_mode != "none"
        col.prop(props, "outline_width")
        col.prop(props, "outline_color")
        col.prop(props, "outline_lighting_mix")
        _tex(col, props, "outline_width_multiply", "Width Texture")


class STYLIZED_PT_material_mtoon_uv_animation(_MToonSub, bpy.types.Panel):
    bl_label = "UV Animation"

    def draw_props(self, layout, props):
        layout.prop(props, "uv_animation_scroll_x")
        layout.prop(props, "uv_animation_scroll_y")
        layout.prop(props, "uv_animation_rotation")
        _tex(layout, props, "uv_animation_mask", "Mask")


class STYLIZED_PT_material_mtoon_rendering(_MToonSub, bpy.types.Panel):
    bl_label = "Rendering"

    def draw_props(self, layout, props):
        layout.prop(props, "alpha_mode")
        row = layout.row()
        row.active = props.alpha_mode == "MASK"
        row.prop(props, "alpha_cutoff")
        col = layout.column()
        col.active = props.alpha_mode == "BLEND"
        col.prop(props, "transparent_with_zwrite")
        col.prop(props, "render_queue_offset")
        layout.prop(props, "double_sided")
        layout.prop(props, "cast_shadow")
        layout.prop(props, "receive_shadow")


CLASSES = (STYLIZED_PT_material_mtoon, STYLIZED_PT_material_mtoon_lighting, STYLIZED_PT_material_mtoon_shading,
           STYLIZED_PT_material_mtoon_rim, STYLIZED_PT_material_mtoon_outline,
           STYLIZED_PT_material_mtoon_uv_animation, STYLIZED_PT_material_mtoon_rendering)


register, unregister = bpy.utils.register_classes_factory(CLASSES)
