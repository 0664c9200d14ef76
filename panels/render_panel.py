"""Render Properties > Stylized (scene settings, colour-management hint)."""
from __future__ import annotations

import bpy

ENGINE = "STYLIZED"


class _RenderBase:
    bl_space_type = "PROPERTIES"
    bl_region_type = "WINDOW"
    bl_context = "render"
    COMPAT_ENGINES = {ENGINE}

    @classmethod
    def poll(cls, context):
        return context.engine in cls.COMPAT_ENGINES and hasattr(context.scene, "stylized")


class STYLIZED_PT_render_settings(_RenderBase, bpy.types.Panel):
    bl_label = "Stylized"

    def draw(self, context):
        layout = self.layout
        vs = context.scene.view_settings
        if vs.view_transform != "Standard":
            box = layout.box()
            box.label(text=f"View transform is {vs.view_transform}: it desaturates toon colours.", icon="INFO")
            box.operator("stylized.set_standard_view_transform", icon="COLOR")
        st = context.scene.stylized
        layout.use_property_split = True
        layout.use_property_decorate = False
        layout.prop(st, "max_lights")


class STYLIZED_PT_render_shadows(_RenderBase, bpy.types.Panel):
    bl_label = "Shadows"
    bl_parent_id = "STYLIZED_PT_render_settings"

    def draw_header(self, context):
        self.layout.prop(context.scene.stylized, "shadows", text="")

    def draw(self, context):
        st = context.scene.stylized
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False
        layout.active = st.shadows
        layout.prop(st, "shadow_resolution")
        layout.prop(st, "shadow_cascades")
        layout.prop(st, "shadow_distance")
        col = layout.column()
        col.active = st.shadow_cascades > 1
        col.prop(st, "shadow_split_lambda")
        col.prop(st, "shadow_cascade_fade")
        layout.prop(st, "shadow_bias")
        layout.prop(st, "shadow_normal_offset")
        layout.prop(st, "shadow_min_offset")
        layout.prop(st, "shadow_pcf")


class STYLIZED_PT_render_outlines(_RenderBase, bpy.types.Panel):
    bl_label = "Outlines"
    bl_parent_id = "STYLIZED_PT_render_settings"

    def draw(self, context):
        st = context.scene.stylized
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False
        layout.prop(st, "outlines", text="MToon Outlines")
        layout.prop(st, "screen_space_outline")
        col = layout.column()
        col.active = st.screen_space_outline
        col.prop(st, "screen_space_outline_width")
        col.prop(st, "screen_space_outline_color")


class STYLIZED_PT_render_post(_RenderBase, bpy.types.Panel):
    bl_label = "Post-Processing & Debug"
    bl_parent_id = "STYLIZED_PT_render_settings"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context):
        st = context.scene.stylized
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False
        layout.prop(st, "fxaa")
        layout.prop(st, "profile_gpu")


CLASSES = (STYLIZED_PT_render_settings, STYLIZED_PT_render_shadows, STYLIZED_PT_render_outlines,
           STYLIZED_PT_render_post)


def register():
    for c in CLASSES:
        bpy.utils.register_class(c)


def unregister():
    for c in reversed(CLASSES):
        bpy.utils.unregister_class(c)
