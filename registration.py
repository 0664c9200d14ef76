"""register()/unregister() for every class, property, handler and COMPAT_ENGINES entry."""
from __future__ import annotations

import bpy

from .engine.blender.render_engine import StylizedRenderEngine

ENGINE_ID = StylizedRenderEngine.bl_idname

# Blender's built-in panels that make sense under our engine.
COMPAT_PANELS = (
    # render / output
    "RENDER_PT_format", "RENDER_PT_frame_range", "RENDER_PT_time_stretching", "RENDER_PT_output",
    "RENDER_PT_output_views", "RENDER_PT_encoding", "RENDER_PT_encoding_video", "RENDER_PT_encoding_audio",
    "RENDER_PT_output_color_management", "RENDER_PT_output_pixel_density", "RENDER_PT_post_processing",
    "RENDER_PT_stamp", "RENDER_PT_stamp_note", "RENDER_PT_stamp_burn", "RENDER_PT_color_management",
    "RENDER_PT_color_management_curves", "RENDER_PT_color_management_white_balance",
    "RENDER_PT_color_management_advanced", "RENDER_PT_color_management_working_space", "RENDER_PT_film_transparent",
    "RENDER_PT_simplify", "RENDER_PT_simplify_viewport", "RENDER_PT_simplify_render",
    "RENDER_PT_stereoscopy",
    "VIEWLAYER_PT_layer",
    # object and data
    "OBJECT_PT_visibility", "OBJECT_PT_custom_props",
    "DATA_PT_context_mesh", "DATA_PT_vertex_groups", "DATA_PT_shape_keys", "DATA_PT_uv_texture",
    "DATA_PT_vertex_colors", "DATA_PT_mesh_attributes", "DATA_PT_customdata", "DATA_PT_custom_props_mesh",
    "DATA_PT_texture_space", "DATA_PT_remesh", "DATA_PT_mesh_animation",
    "DATA_PT_context_light", "DATA_PT_light", "DATA_PT_EEVEE_light", "DATA_PT_spot", "DATA_PT_custom_props_light",
    "DATA_PT_light_animation",
    "DATA_PT_context_camera", "DATA_PT_camera", "DATA_PT_lens", "DATA_PT_camera_dof", "DATA_PT_camera_dof_aperture",
    "DATA_PT_camera_display", "DATA_PT_camera_stereoscopy", "DATA_PT_camera_safe_areas", "DATA_PT_camera_background_image",
    "DATA_PT_custom_props_camera", "DATA_PT_camera_animation",
    # materials and world
    "EEVEE_MATERIAL_PT_context_material", "MATERIAL_PT_custom_props", "MATERIAL_PT_animation",
    "WORLD_PT_context_world", "WORLD_PT_custom_props", "WORLD_PT_animation", "EEVEE_WORLD_PT_surface",
)

_added_to = []


def _add_compat():
    for name in COMPAT_PANELS:
        panel = getattr(bpy.types, name, None)
        if panel is None or not hasattr(panel, "COMPAT_ENGINES"):
            continue
        if ENGINE_ID not in panel.COMPAT_ENGINES:
            panel.COMPAT_ENGINES.add(ENGINE_ID)
            _added_to.append(panel)


def _remove_compat():
    while _added_to:
        panel = _added_to.pop()
        panel.COMPAT_ENGINES.discard(ENGINE_ID)


def compat_panels():
    """Panels to which register() added our engine (for tests)."""
    return list(_added_to)


def _submodules():
    """Feature subpackages with their own register()/unregister() (operators, panels, properties)."""
    mods = []
    from . import operators, panels  # noqa: F401
    from .engine.blender import render_settings  # Scene.stylized: the render engine's settings
    mods.append(render_settings)
    from .engine.features import materials  # Material.stylized_mtoon (before operators and panels)
    mods.append(materials)
    from .engine.features import expressions  # Scene.stylized_expressions
    mods.append(expressions)
    from .engine.features import preview as preview_feature  # Scene.stylized_preview
    mods.append(preview_feature)
    mods.append(operators)
    mods.append(panels)
    from .engine.features.preview import (
        control as preview,  # viewport preview: redraw timer, load_post/frame_change handlers
    )
    mods.append(preview)
    from .engine.features import springs  # Object.stylized_spring_bones
    mods.append(springs)
    return mods


def active_timers():
    """Our bpy.app.timers still registered (for tests: none after unregister())."""
    from .engine.features.expressions import character as expressions
    from .engine.features.preview import control as preview

    out = list(preview.timers_active())
    if bpy.app.timers.is_registered(expressions.deferred_sync):
        out.append(expressions.deferred_sync)
    return out


def register():
    from .engine.blender import render_engine

    render_engine.register()      # the engine class and the F12 session keeper it holds
    for mod in _submodules():
        mod.register()
    _add_compat()


def unregister():
    from .engine.blender import render_engine

    _remove_compat()
    for mod in reversed(_submodules()):
        mod.unregister()
    render_engine.unregister()    # releases the add-on's state: the F12 session kept between renders (GPU memory)
