"""3D viewport sidebar tab "Stylized": Animation, Expressions and Stats panels (STYLIZED only)."""
from __future__ import annotations

import time

import bpy

from ..engine.features.passes import inventory
from ..engine.features.preview import control as preview, follow as preview_follow
from ..engine.gpu.passes import render_passes
from ..engine.features.expressions import character as expr

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


class _SidebarBase:
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Stylized"
    COMPAT_ENGINES = {ENGINE}

    @classmethod
    def poll(cls, context):
        return context.engine == ENGINE


def _timed(draw):
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


class STYLIZED_PT_viewport_animation(_SidebarBase, bpy.types.Panel):
    bl_label = "Animation"
    bl_idname = "STYLIZED_PT_viewport_animation"

    @_timed
    def draw(self, context):
        layout = self.layout
        scene = context.scene
        arm = preview.armature_of(getattr(context, "active_object", None))
        if arm is None:
            layout.label(text="Select an armature or a mesh it deforms", icon="INFO")
            st = preview.peek_state(scene)
            if st is not None and st.last_error:
                layout.label(text=st.last_error, icon="ERROR")
            return
        st = preview.get_state(scene, arm)
        preview_follow.follow(st)         # renamed: the new names; deleted: stopped, with the message
        clips = preview.compatible_clips_for(arm.name)
        layout.label(text=arm.name, icon="ARMATURE_DATA")
        if st.armature and st.armature != arm.name:
            layout.label(text=f"Previewing '{st.armature}'; Play switches to this one", icon="INFO")
        props = scene.stylized_preview
        if not clips:
            layout.label(text="No compatible clip (no action matches these bones)", icon="ERROR")
        else:
            layout.prop(props, "clip")
            cur = next((c for c in clips if c.name == (st.clip_name if st.armature == arm.name else None)),
                       None) or clips[0]
            layout.label(text=f"Duration: {cur.duration_seconds:.2f} s | Channels: {cur.channel_count}")
            for note in getattr(cur, "notes", ())[:4]:     # ignored or resampled channels (clip notes)
                layout.label(text=note, icon="INFO")
            from ..engine.blender.bake import cache as bake

            cache = preview.bake_cache()
            lines = bake.describe(cache, arm.name, cur.name) if cache is not None else []
            for k, line in enumerate(lines[:6]):
                layout.label(text=line, icon=("INFO" if line.startswith("Baked") else "ERROR") if k == 0 else "BLANK1")
            if lines:
                layout.prop(props, "bake_substeps")
        row = layout.row(align=True)
        row.operator("stylized.preview_play", text="Play", icon="PLAY")
        row.operator("stylized.preview_pause", text="Pause", icon="PAUSE")
        row.operator("stylized.preview_stop", text="Stop", icon="SNAP_FACE")
        row = layout.row(align=True)
        row.prop(props, "loop", toggle=True, icon="FILE_REFRESH")
        row.prop(props, "speed")
        row = layout.row(align=True)
        row.prop(props, "time")
        row.label(text=f"/ {st.duration:.2f} s")
        row = layout.row(align=True)
        row.prop(props, "fade")
        row.prop(props, "in_place", toggle=True, icon="CON_LOCLIKE")
        row = layout.row(align=True)
        row.prop(props, "crowd", toggle=True, icon="COMMUNITY")
        if props.crowd:
            n = st.crowd_count if st.active else 0
            row.label(text=f"{n} characters" if n else "starts with Play")
        from ..engine.features.springs import reader as spring_reader

        if hasattr(arm, "stylized_spring_bones") and spring_reader.has_springs(arm):
            layout.prop(arm, "stylized_spring_bones")     # VRM spring bones in the preview
        mode = ("Preview playing" if st.playing else "Preview paused") if st.active else "Timeline"
        if st.active and st.fading:
            mode += " (crossfading)"
        layout.label(text=f"Mode: {mode}", icon="TIME")
        stats = session_stats()
        layout.label(text=f"Palettes: {stats.get('palette_count', 0)} | Joints: "
                          f"{stats.get('joint_matrix_count', 0)} | Uploads: {stats.get('palette_uploads', 0)}")
        if st.last_error:
            layout.label(text=st.last_error, icon="ERROR")


def _draw_vrm_expressions(layout, props, root, presets, custom, flt, stale):
    """Presets in the VRM 1.0 order (greyed where the avatar binds nothing), then custom ones."""
    items = {} if stale else {it.name: it for it in props.vrm_items}

    def slider(col, e):
        row = col.row(align=True)
        row.active = e.is_bound
        label = expr.vrm_label(e)
        it = items.get(e.name)
        if it is not None:
            row.prop(it, "value", text=label if e.is_bound else f"{label} (not bound)", slider=True)
        else:   # before the deferred sync
            row.label(text=label)
        k = row.operator("stylized.vrm_expression_keyframe", text="", icon="KEY_HLT")
        k.name = e.name
        k.character = root.name

    shown = [(p, e) for p, e in presets if not flt or flt in p.lower() or (e is not None and flt in e.name.lower())]
    if shown:
        header, body = layout.panel("stylized_expr_vrm_presets", default_closed=False)
        header.label(text=f"Presets ({sum(1 for _p, e in shown if e is not None)})", icon="USER")
        if body is not None:
            col = body.column(align=True)
            for p, e in shown:
                if e is None:
                    row = col.row(align=True)
                    row.enabled = False
                    row.label(text=f"{p} (not defined)")
                else:
                    slider(col, e)
    shown = [e for e in custom if not flt or flt in e.name.lower()]
    if shown:
        header, body = layout.panel("stylized_expr_vrm_custom", default_closed=False)
        header.label(text=f"Custom ({len(shown)})", icon="SHAPEKEY_DATA")
        if body is not None:
            col = body.column(align=True)
            for e in shown:
                slider(col, e)

def _draw_shape_keys(layout, props, root, meshes, groups, flt, stale, bound):
    """One collapsible group per mesh, one slider per shape-key name; keys an expression binds
    are greyed (their value comes from the expressions)."""
    items = {} if stale else {it.name: it for it in props.items}
    for mesh_name, names in expr.names_by_mesh(meshes).items():
        shown = [n for n in names if not flt or flt in n.lower()]
        if not shown:
            continue
        header, body = layout.panel(f"stylized_expr_{mesh_name}", default_closed=False)
        header.label(text=f"{mesh_name} ({len(shown)})", icon="MESH_DATA")
        if body is None:
            continue
        col = body.column(align=True)
        for n in shown:
            blocks = groups[n]
            row = col.row(align=True)
            it = items.get(n)
            label = n if len(blocks) == 1 else f"{n} (x{len(blocks)})"
            if n in bound:
                row.active = False
                label += " (expression)"
            if it is not None:
                row.prop(it, "value", text=label, slider=True)
            else:   # before the deferred sync: the first key's own slider
                row.prop(blocks[0], "value", text=label, slider=True)
            k = row.operator("stylized.expression_keyframe", text="", icon="KEY_HLT")
            k.name = n
            k.character = root.name


class STYLIZED_PT_viewport_expressions(_SidebarBase, bpy.types.Panel):
    bl_label = "Expressions"
    bl_idname = "STYLIZED_PT_viewport_expressions"

    @_timed
    def draw(self, context):
        layout = self.layout
        scene = context.scene
        obj = getattr(context, "active_object", None)
        root, meshes = expr.character_of(obj, scene)
        if root is None or not meshes:
            layout.label(text="Select a character with shape keys", icon="INFO")
            return
        props = scene.stylized_expressions
        stale = expr.items_stale(scene, root, meshes)
        if stale:
            expr.request_sync(scene, obj)
        es = expr.vrm_set(root)
        groups = expr.expression_groups(meshes)
        total, active = expr.counts(meshes)
        stats = session_stats()
        if es is not None:
            presets, custom = expr.vrm_presets_and_custom(es)
            layout.label(text=f"{root.name}: VRM {es.spec} | {sum(1 for _p, e in presets if e is not None)} presets, "
                              f"{len(custom)} custom", icon="SHAPEKEY_DATA")
        else:
            layout.label(text=f"{root.name}: {len(groups)} expressions", icon="SHAPEKEY_DATA")
        layout.label(text=f"Targets: {total} | Active: {active}")
        layout.label(text=f"Morph uploads: {stats.get('morph_uploads', 0)} this frame | "
                          f"{stats.get('morph_uploads_total', 0)} total")
        row = layout.row(align=True)
        row.prop(props, "filter", text="", icon="VIEWZOOM")
        op = row.operator("stylized.expression_reset_all", text="Reset All", icon="LOOP_BACK")
        op.character = root.name
        flt = props.filter.strip().lower()
        linked = expr.linked_problem(root, meshes, vrm=es is not None)
        if linked:          # read-only: an edit of linked data would be lost on save
            for k, part in enumerate(linked.split("; ")):
                layout.label(text=part, icon="LIBRARY_DATA_DIRECT" if k == 0 else "BLANK1")
            layout = layout.column()
            layout.enabled = False
        if es is not None:
            for msg in es.problems:
                layout.label(text=msg, icon="ERROR")
            _draw_vrm_expressions(layout, props, root, presets, custom, flt, stale)
            header, body = layout.panel("stylized_expr_shape_keys", default_closed=True)
            header.label(text=f"Shape Keys ({len(groups)})", icon="SHAPEKEY_DATA")
            if body is None:
                return
            _draw_shape_keys(body, props, root, meshes, groups, flt, stale, expr.vrm_bound_keys(es))
        else:
            _draw_shape_keys(layout, props, root, meshes, groups, flt, stale, set())


def _message_block(layout, title: str, messages, icon: str) -> None:
    """A titled column of the frame's messages with their count (nothing when there are none)."""
    if not messages:
        return
    col = layout.column(align=True)
    col.label(text=f"{title}: {len(messages)}", icon=icon)
    for msg in messages:
        col.label(text=msg)


class STYLIZED_PT_viewport_stats(_SidebarBase, bpy.types.Panel):
    bl_label = "Stats"
    bl_idname = "STYLIZED_PT_viewport_stats"
    bl_options = {"DEFAULT_CLOSED"}

    @_timed
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
        springs = driver.of(sess.runtime) if driver is not None else None
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
        missing = inventory.unwritten(vl, render_passes.requested(vl)) if vl is not None else ()
        _message_block(layout, "Passes not written", missing, "RENDERLAYERS")


class STYLIZED_PT_viewport_scene(_SidebarBase, bpy.types.Panel):
    """Animation > Scene: every animated object of the scene plays as the timeline would
    (engine/features/preview/scene.py), next to the single clips above."""
    bl_label = "Scene"
    bl_idname = "STYLIZED_PT_viewport_scene"
    bl_parent_id = "STYLIZED_PT_viewport_animation"

    @_timed
    def draw(self, context):
        layout = self.layout
        st = preview.peek_state(context.scene)
        row = layout.row(align=True)
        for action, icon in (("PLAY", "PLAY"), ("PAUSE", "PAUSE"), ("STOP", "SNAP_FACE")):
            row.operator("stylized.preview_scene", text=action.title(), icon=icon).action = action
        if st is not None and st.active and st.scene_mode:
            layout.label(text=f"Scene {'playing' if st.playing else 'paused'} at frame {st.scene_frame:.2f}")
            for note in st.scene_notes[:4]:
                layout.label(text=note, icon="INFO")
        else:
            layout.label(text="Every animated object from the current frame, as the timeline plays it")


classes = (STYLIZED_PT_viewport_animation, STYLIZED_PT_viewport_scene, STYLIZED_PT_viewport_expressions,
           STYLIZED_PT_viewport_stats)


def register():
    for c in classes:
        bpy.utils.register_class(c)


def unregister():
    for c in reversed(classes):
        bpy.utils.unregister_class(c)
