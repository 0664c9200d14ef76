"""3D viewport sidebar tab "Stylized": what its panels share (``SidebarPanel``, ``timed``, the last
viewport session's stats) and the Stats panel.  The features' panels: preview_panel.py (Animation,
Scene), expressions_panel.py (Expressions); they register before this one (the tab's order)."""
from __future__ import annotations

import time

import bpy

from ..engine.features.passes import inventory
from ..engine.gpu.passes import render_passes

ENGINE = "STYLIZED"
GPU_PASSES = ("Shadow", "Forward", "Outline Mask", "Screen-Space Outline", "Post Process")


def viewport_session():
    """The most recent viewport StylizedSession (engine.blender.render_engine.last_viewport_session), or None."""
    try:
        from ..engine.blender import render_engine

        return render_engine.last_viewport_session()
    except Exception:
        return None


def session_stats() -> dict:
    s = viewport_session()
    st = getattr(s, "stats", None) if s is not None else None
    return st if isinstance(st, dict) else {}


def _norm(s: str) -> str:
    return "".join(ch for ch in str(s).lower() if ch.isalnum())


def gpu_pass_ms(gpu_ms: dict, display_name: str):
    """The measured ms of a pass from ``gpu_ms`` (keys matched loosely: 'screen_space_outline',
    'ScreenSpaceOutline', 'forward_opaque' ...); None when absent or pending."""
    want = _norm(display_name)
    for k, v in (gpu_ms or {}).items():
        nk = _norm(k)
        if nk == want or nk.startswith(want):
            return v
    return None


def _fmt_ms(v) -> str:
    return "pending" if v is None else f"{v:.2f} ms"


class SidebarPanel:
    """The tab's panels: the 3D viewport's sidebar, tab "Stylized", under the Stylized engine only."""

    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Stylized"
    COMPAT_ENGINES = {ENGINE}

    @classmethod
    def poll(cls, context):
        return context.engine == ENGINE


def timed(draw):
    """A panel's draw, its time added to the viewport session's UI timings."""
    def wrapper(self, context):
        t0 = time.perf_counter()
        try:
            draw(self, context)
        finally:
            timings = getattr(viewport_session(), "timings", None)
            if timings is not None:
                timings.add_ui_ms((time.perf_counter() - t0) * 1e3)
    wrapper.__doc__ = draw.__doc__
    return wrapper


def _message_block(layout, title: str, messages, icon: str) -> None:
    """A titled column of the frame's messages with their count (nothing when there are none)."""
    if not messages:
        return
    col = layout.column(align=True)
    col.label(text=f"{title}: {len(messages)}", icon=icon)
    for msg in messages:
        col.label(text=msg)


class STYLIZED_PT_viewport_stats(SidebarPanel, bpy.types.Panel):
    bl_label = "Stats"
    bl_idname = "STYLIZED_PT_viewport_stats"
    bl_options = {"DEFAULT_CLOSED"}

    @timed
    def draw(self, context):
        layout = self.layout
        sess = viewport_session()
        stats = session_stats()
        timings = getattr(sess, "timings", None)
        if sess is None:
            layout.label(text="No viewport frame yet: switch a viewport to Rendered", icon="INFO")
        col = layout.column(align=True)
        col.label(text="CPU (smoothed)", icon="TIME")
        if timings is not None:
            col.label(text=f"FPS: {timings.fps:.1f}")
            for label, attr in (("Animation", "animation_ms"), ("Skinning", "skinning_ms"),
                                ("Morph", "morph_ms"), ("Update", "update_ms"),
                                ("Extraction", "extraction_ms"), ("Pipeline", "pipeline_ms"),
                                ("UI", "ui_ms"), ("Render", "render_ms")):
                col.label(text=f"{label}: {getattr(timings, attr, 0.0):.2f} ms")
        else:
            col.label(text="FPS: -")
        box = layout.box()
        st = getattr(context.scene, "stylized", None)
        if st is not None:
            box.prop(st, "profile_gpu")
        if st is not None and st.profile_gpu:
            box.label(text="Synchronises after each pass (Python gpu has no timer queries)", icon="ERROR")
            gpu = stats.get("gpu_ms") or {}
            vals = []
            for name in GPU_PASSES:
                v = gpu_pass_ms(gpu, name)
                vals.append(v)
                box.label(text=f"{name}: {_fmt_ms(v)}")
            total = None if any(v is None for v in vals) else sum(vals)
            box.label(text=f"Pipeline GPU: {_fmt_ms(total)}")
        col = layout.column(align=True)
        col.label(text="Resource updates", icon="FILE_REFRESH")
        col.label(text=f"Palette uploads: {stats.get('palette_uploads', 0)}")
        col.label(text=f"Morph uploads: {stats.get('morph_uploads', 0)}")
        col.label(text=f"Morphs composed in the shader: {stats.get('shader_morphs', 0)}")
        driver = getattr(sess, "springs", None)     # the session's SpringsDriver (features/springs)
        springs = driver.of(sess.runtime) if driver is not None and sess is not None else None
        if springs is not None and (springs.joint_count or springs.warnings):
            # (its warnings are listed with the session's problems, as the render log lists them)
            col.label(text=f"Spring bones: {springs.joint_count} joints | {springs.last_ms:.3f} ms per frame")
        if stats.get("import_count"):
            col.label(text=f"Scene imports: {stats['import_count']} (last: {stats.get('last_import_reason', '')})")
        for key, label in (("import_error", "Import failed"), ("update_error", "Update failed")):
            if stats.get(key):
                layout.label(text=f"{label}: {stats[key]}", icon="ERROR")
        fallbacks = stats.get("fallbacks") or []
        col = layout.column(align=True)
        col.label(text=f"CPU fallbacks: {len(fallbacks)}", icon="ERROR" if fallbacks else "CHECKMARK")
        for name, reason in fallbacks:
            col.label(text=f"{name}: {reason}")
        _message_block(layout, "Material nodes not mapped", stats.get("unmapped"), "NODETREE")
        _message_block(layout, "Missing or invisible", stats.get("losses"), "ERROR")
        # bad input: objects not drawn, actions, VRM data
        _message_block(layout, "Problems", stats.get("problems"), "ERROR")
        # the view layer's passes an F12 would not write (engine/features/passes/inventory.py)
        vl = getattr(context, "view_layer", None)
        scene = getattr(context, "scene", None)
        missing = (inventory.unwritten(vl, render_passes.requested(vl), getattr(scene, "render", None))
                   if vl is not None else ())
        _message_block(layout, "Passes not written", missing, "RENDERLAYERS")


classes = (STYLIZED_PT_viewport_stats,)


register, unregister = bpy.utils.register_classes_factory(classes)
