"""Render Properties > Stylized (scene settings, colour-management hint) and View Layer > Passes
(Blender's data passes and the toon passes of engine/gpu/passes/render_passes.py)."""
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
        layout.prop(st, "render_samples", text="Render Samples")


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
        layout.prop(st, "soft_shadows")


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


def _passes_changed(self, context):
    """Blender asks the engine for its passes again (the compositor's Render Layers node)."""
    for layer in getattr(self.id_data, "view_layers", ()):
        if layer.stylized_passes.as_pointer() == self.as_pointer():
            layer.update_render_passes()


class StylizedLayerPasses(bpy.types.PropertyGroup):
    """The toon passes of one view layer (engine/gpu/passes/render_passes.py)."""

    use_outline: bpy.props.BoolProperty(
        name="Outline", default=False, update=_passes_changed,
        description="Render pass 'Outline': the MToon outline's colour times its coverage, and the coverage "
                    "as alpha, so the compositor can retint or remove the outlines")
    use_shadow: bpy.props.BoolProperty(
        name="Shadow", default=False, update=_passes_changed,
        description="Render pass 'Shadow': the shadow every lamp casts on the visible surface, each lamp weighted by "
                    "the light it brings there (1 = lit, 0 = in the shadow of every lamp that reaches it)")
    use_shade: bpy.props.BoolProperty(
        name="Shade", default=False, update=_passes_changed,
        description="Render pass 'Shade': MToon's lit/shade ramp before shadows (1 = lit colour, 0 = shade colour)")
    use_rim: bpy.props.BoolProperty(
        name="Rim", default=False, update=_passes_changed,
        description="Render pass 'Rim': the rim light (rim colour, matcap, rim lighting) added to the colour")


class STYLIZED_PT_layer_passes(bpy.types.Panel):
    bl_label = "Passes"
    bl_space_type = "PROPERTIES"
    bl_region_type = "WINDOW"
    bl_context = "view_layer"
    COMPAT_ENGINES = {ENGINE}

    @classmethod
    def poll(cls, context):
        return context.engine in cls.COMPAT_ENGINES and hasattr(context.view_layer, "stylized_passes")

    def draw(self, context):
        layer = context.view_layer
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False
        col = layout.column(heading="Data", align=True)
        for prop in ("use_pass_combined", "use_pass_z", "use_pass_mist", "use_pass_normal"):
            col.prop(layer, prop)
        col = layout.column(heading="Indexes", align=True)
        col.prop(layer, "use_pass_object_index")
        col.prop(layer, "use_pass_material_index")
        col = layout.column(heading="Toon", align=True)
        toon = layer.stylized_passes
        for prop in ("use_outline", "use_shadow", "use_shade", "use_rim"):
            col.prop(toon, prop)


CLASSES = (STYLIZED_PT_render_settings, STYLIZED_PT_render_shadows, STYLIZED_PT_render_outlines,
           STYLIZED_PT_render_post)
#: View Layer Properties panels (drawn with a view layer in the context)
LAYER_CLASSES = (STYLIZED_PT_layer_passes,)


def register():
    bpy.utils.register_class(StylizedLayerPasses)
    bpy.types.ViewLayer.stylized_passes = bpy.props.PointerProperty(
        type=StylizedLayerPasses, name="Stylized Passes",
        description="The Stylized engine's toon render passes of this view layer")
    for c in CLASSES + LAYER_CLASSES:
        bpy.utils.register_class(c)


def unregister():
    for c in reversed(CLASSES + LAYER_CLASSES):
        bpy.utils.unregister_class(c)
    del bpy.types.ViewLayer.stylized_passes
    bpy.utils.unregister_class(StylizedLayerPasses)
