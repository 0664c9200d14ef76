"""RNA properties of the render engine itself: ``scene.stylized`` (Render Properties > Stylized:
shadows, outlines, anti-aliasing, lamps, profiling), read by ``scene_settings.settings_from_scene``
every frame.  Registered by the add-on before the features (registration.py)."""
from __future__ import annotations

import bpy
from bpy.props import BoolProperty, EnumProperty, FloatProperty, FloatVectorProperty, IntProperty, PointerProperty


def _scene_update(self, context):
    # Scene settings are read by the passes each frame; just ask viewports to redraw.
    screen = getattr(context, "screen", None) if context is not None else None
    for area in getattr(screen, "areas", ()):
        if area.type == "VIEW_3D":
            area.tag_redraw()


class StylizedSceneSettings(bpy.types.PropertyGroup):
    shadows: BoolProperty(
        name="Shadows", default=True, update=_scene_update,
        description="Lamps with Cast Shadow on cast shadows: the strongest sun through cascaded shadow maps, "
                    "the 4 strongest point, spot and area lamps through their own maps; shadowed areas take "
                    "the MToon shade colour")
    shadow_resolution: EnumProperty(
        name="Shadow Resolution", default="2048", update=_scene_update,
        items=(("512", "512", "512 × 512 shadow atlas"), ("1024", "1024", "1024 × 1024 shadow atlas"),
               ("2048", "2048", "2048 × 2048 shadow atlas"), ("4096", "4096", "4096 × 4096 shadow atlas")),
        description="Size of the shadow atlas in texels: one map, or 2 × 2 cascades of half this size each; "
                    "higher = sharper shadows, more GPU memory")
    shadow_cascades: IntProperty(
        name="Cascades", default=3, min=1, max=4, update=_scene_update,
        description="Shadow maps fitted to consecutive slices of the camera's view, near ones sharper")
    shadow_distance: FloatProperty(
        name="Shadow Distance", default=100.0, min=0.1, soft_max=1000.0, subtype="DISTANCE", unit="LENGTH",
        update=_scene_update,
        description="No sun shadow beyond this distance from the camera (the clip range and the visible "
                    "geometry can end the cascades sooner)")
    shadow_split_lambda: FloatProperty(
        name="Split Distribution", default=0.8, min=0.0, max=1.0, update=_scene_update,
        description="How the view is cut into cascades: 1 = logarithmic (sharp near the camera), 0 = uniform")
    shadow_cascade_fade: FloatProperty(
        name="Cascade Fade", default=0.1, min=0.0, max=0.5, subtype="FACTOR", update=_scene_update,
        description="Fraction of each cascade blended into the next one, so cascade borders do not show")
    shadow_bias: FloatProperty(
        name="Shadow Bias", default=0.5, min=0.0, soft_max=10.0, precision=2, step=10,
        update=_scene_update,
        description="Depth bias towards the sun against shadow acne, in shadow texels of the cascade; too high "
                    "detaches shadows from their casters")
    shadow_normal_offset: FloatProperty(
        name="Normal Offset", default=2.0, min=0.0, soft_max=10.0, precision=2, step=10,
        update=_scene_update,
        description="Offsets the shadow lookup along the surface normal, in shadow texels (x the sine of the "
                    "angle between normal and light), against acne; should cover the filter's reach (2 with PCF)")
    shadow_min_offset: FloatProperty(
        name="Minimum Offset", default=0.02, min=0.0, soft_max=0.1, subtype="DISTANCE", unit="LENGTH",
        precision=3, update=_scene_update,
        description="The normal offset is at least this distance: parts closer to a surface than this (eyes, "
                    "brows, blush on a face) cast no shadow onto it, even in a sharp close-up")
    shadow_pcf: BoolProperty(
        name="Soft Filtering (PCF)", default=True, update=_scene_update,
        description="Percentage-closer filtering: average several shadow-map samples for smoother edges")
    soft_shadows: BoolProperty(
        name="Soft Shadows", default=True, update=_scene_update,
        description="A lamp's Radius (an area lamp's Size) and the sun's Angle widen the shadow's penumbra as "
                    "the blocker is farther from the surface, as EEVEE's soft shadows do; MToon's toon step still "
                    "shapes the lit/shade boundary. Off: every shadow keeps a hard, filtered edge (flat cel looks)")
    outlines: BoolProperty(
        name="Outlines", default=True, update=_scene_update,
        description="Draw MToon inverted-hull outlines for materials whose outline mode is not None")
    screen_space_outline: BoolProperty(
        name="Screen-Space Outline", default=False, update=_scene_update,
        description="Add edges found from depth, normal and object-ID discontinuities (works on any material)")
    screen_space_outline_width: FloatProperty(
        name="Width", default=1.0, min=0.0, soft_max=8.0, subtype="PIXEL", update=_scene_update,
        description="Screen-space outline width in pixels")
    screen_space_outline_color: FloatVectorProperty(
        name="Color", size=4, default=(0.0, 0.0, 0.0, 1.0), subtype="COLOR", min=0.0, soft_max=1.0,
        update=_scene_update,
        description="Screen-space outline colour (linear) and opacity")
    fxaa: BoolProperty(
        name="FXAA", default=True, update=_scene_update,
        description="Fast approximate anti-aliasing as the last pass")
    render_samples: IntProperty(
        name="Samples", default=8, min=1, soft_max=32, max=256,
        description="Anti-aliasing samples of final renders (F12, Ctrl+F12): the frame is drawn this many "
                    "times with sub-pixel offsets and averaged (shadows once per frame). 1 = one sample "
                    "with FXAA. The viewport keeps FXAA")
    profile_gpu: BoolProperty(
        name="Profile GPU Passes", default=False, update=_scene_update,
        description="Measure each pass's GPU time. Blender's Python gpu module has no timer queries, so this "
                    "synchronises (waits for the GPU) after every pass, which slows rendering; debug only")
    max_lights: IntProperty(
        name="Lamps per Pixel", default=128, min=32, max=1024, update=_scene_update,
        description="Most point, spot and area lamps that may light one part of the screen (a screen tile x a "
                    "depth slice); each lamp reaches as far as the scene's Light Threshold (or its Custom Distance) "
                    "lets it. Every sun always lights. Lamps left out over this are named in the Stats panel and "
                    "the render log")


def register():
    bpy.utils.register_class(StylizedSceneSettings)
    bpy.types.Scene.stylized = PointerProperty(
        type=StylizedSceneSettings, name="Stylized",
        description="Stylized render engine settings (shadows, outlines, post-processing)")


def unregister():
    if hasattr(bpy.types.Scene, "stylized"):
        del bpy.types.Scene.stylized
    bpy.utils.unregister_class(StylizedSceneSettings)
