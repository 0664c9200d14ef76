"""The preview feature's panels in the sidebar tab "Stylized": Animation (the clip preview's
transport, clip, bake and crowd settings, the spring bones toggle) and its Scene sub-panel
(engine/features/preview)."""
from __future__ import annotations

import bpy

from ..engine.features.preview import control as preview
from ..engine.features.preview import follow as preview_follow
from ..engine.features.preview.state import armature_of, compatible_clips_for
from .viewport_panels import SidebarPanel, session_stats, timed


class STYLIZED_PT_viewport_animation(SidebarPanel, bpy.types.Panel):
    bl_label = "Animation"
    bl_idname = "STYLIZED_PT_viewport_animation"

    @timed
    def draw(self, context):
        layout = self.layout
        scene = context.scene
        arm = armature_of(getattr(context, "active_object", None))
        if arm is None:
            # short lines: the default sidebar width cuts a label at ~40 characters
            col = layout.column(align=True)
            col.label(text="Select an armature", icon="INFO")
            col.label(text="or a mesh it deforms", icon="BLANK1")
            st = preview.peek_state(scene)
            if st is not None and st.last_error:
                layout.label(text=st.last_error, icon="ERROR")
            return
        st = preview.get_state(scene, arm)
        preview_follow.follow(st)         # renamed: the new names; deleted: stopped, with the message
        clips = compatible_clips_for(arm.name)
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


class STYLIZED_PT_viewport_scene(SidebarPanel, bpy.types.Panel):
    """Animation > Scene: every animated object of the scene plays as the timeline would
    (engine/features/preview/scene.py), next to the single clips above."""
    bl_label = "Scene"
    bl_idname = "STYLIZED_PT_viewport_scene"
    bl_parent_id = "STYLIZED_PT_viewport_animation"

    @timed
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
            # short lines: the default sidebar width cut the one long label in the middle
            col = layout.column(align=True)
            col.label(text="Every animated object plays")
            col.label(text="from the current frame,")
            col.label(text="as the timeline plays it")


classes = (STYLIZED_PT_viewport_animation, STYLIZED_PT_viewport_scene)


register, unregister = bpy.utils.register_classes_factory(classes)
