"""Preview transport operators (stylized.preview_*) of the preview feature (engine/features/preview).

They only write the scene's ``engine.features.preview.control.PreviewState`` (fields + queued
commands); the viewport session applies the commands to the AnimationPlayer on its next frame.
The ``Scene.stylized_preview`` settings they share with the Animation panel:
engine/features/preview/properties.py.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, cast

import bpy
from bpy.props import EnumProperty, FloatProperty, StringProperty

from ..engine.features.preview import control as preview
from ..engine.features.preview.properties import ensure_bake, redraw, seek, state_for

if TYPE_CHECKING:
    from ..engine.blender.bake.scene import SceneBakes

# ------------------------------------------------------------------------------------------------
# operators
# ------------------------------------------------------------------------------------------------

class _PreviewOp:
    bl_options = {"REGISTER"}

    armature: StringProperty(
        name="Armature", default="", options={"SKIP_SAVE"},
        description="Armature to preview (empty: the active object's armature)")

    if TYPE_CHECKING:   # given by bpy.types.Operator, which the operators below also derive from
        def report(self, type: set[str], message: str) -> set[str]: ...

    @classmethod
    def poll(cls, context):
        return context.scene is not None

    def _bad_armature(self) -> str:
        """A message when ``armature`` names no armature (never fall back to the active one)."""
        if not self.armature:
            return ""
        ob = bpy.data.objects.get(self.armature)
        if ob is None:
            return f"No object named '{self.armature}'"
        if ob.type != "ARMATURE":
            return f"Object '{self.armature}' is not an armature (it is a {ob.type.lower()})"
        return ""

    def _state(self, context):
        """(PreviewState, armature) or None after reporting why not."""
        bad = self._bad_armature()
        if bad:
            self.report({"ERROR"}, bad)
            return None
        return state_for(context, self.armature)


class STYLIZED_OT_preview_play(_PreviewOp, bpy.types.Operator):
    bl_idname = "stylized.preview_play"
    bl_label = "Play"
    bl_description = "Play the selected clip in the viewport preview (the scene timeline does not move)"

    def execute(self, context):
        got = self._state(context)
        if got is None:
            return {"CANCELLED"}
        st, arm = got
        if arm is None and not st.armature:
            self.report({"ERROR"}, "No armature: select an armature or a mesh it deforms")
            return {"CANCELLED"}
        if not st.clip_name:
            self.report({"ERROR"}, f"Armature '{st.armature}' has no compatible clip")
            return {"CANCELLED"}
        if not ensure_bake(context, st, self.report):
            return {"CANCELLED"}
        st.scene_mode = False            # a clip: Scene playback ends
        st.push("play")
        if not st.looping and st.duration > 0.0 and st.time >= st.duration:
            st.time = 0.0
        st.playing = True
        st.active = True
        preview.ensure_timer()
        self.report({"INFO"}, f"Previewing '{st.clip_name}' on '{st.armature}'")
        return {"FINISHED"}


class STYLIZED_OT_preview_pause(_PreviewOp, bpy.types.Operator):
    bl_idname = "stylized.preview_pause"
    bl_label = "Pause"
    bl_description = "Pause the viewport preview at the current time"

    def execute(self, context):
        got = self._state(context)
        if got is None:
            return {"CANCELLED"}
        st, _ = got
        st.push("pause")
        st.playing = False
        redraw()
        self.report({"INFO"}, f"Preview paused at {st.time:.2f} s")
        return {"FINISHED"}


class STYLIZED_OT_preview_stop(_PreviewOp, bpy.types.Operator):
    bl_idname = "stylized.preview_stop"
    bl_label = "Stop"
    bl_description = "Stop the viewport preview: time 0 and the bind pose"

    def execute(self, context):
        got = self._state(context)
        if got is None:
            return {"CANCELLED"}
        st, _ = got
        if not ensure_bake(context, st, self.report):
            return {"CANCELLED"}
        st.scene_mode = False
        st.push("stop")
        st.playing = False
        st.time = 0.0
        st.active = True
        redraw()
        self.report({"INFO"}, "Preview stopped (bind pose)")
        return {"FINISHED"}


class STYLIZED_OT_preview_seek(_PreviewOp, bpy.types.Operator):
    bl_idname = "stylized.preview_seek"
    bl_label = "Seek"
    bl_description = "Move the viewport preview to a time (also while paused)"

    time: FloatProperty(name="Time", min=0.0, unit="TIME_ABSOLUTE",
                        description="Time in seconds from the clip start")

    def execute(self, context):
        got = self._state(context)
        if got is None:
            return {"CANCELLED"}
        st, _ = got
        if not ensure_bake(context, st, self.report):
            return {"CANCELLED"}
        t = seek(st, self.time)
        redraw()
        self.report({"INFO"}, f"Preview at {t:.2f} s")
        return {"FINISHED"}


class STYLIZED_OT_preview_scene(bpy.types.Operator):
    bl_idname = "stylized.preview_scene"
    bl_label = "Scene"
    bl_description = ("Play / pause / stop every animated object of the scene in the viewport preview, from the "
                      "current frame at the scene's rate, range and loop, as timeline playback would (the timeline "
                      "does not move and Blender's depsgraph is not evaluated)")
    bl_options = {"REGISTER"}

    action: EnumProperty(
        name="Action", default="PLAY", options={"SKIP_SAVE"},
        items=(("PLAY", "Play", "Play the scene from the shown frame (the current frame when it starts)"),
               ("PAUSE", "Pause", "Pause the scene playback at the shown frame"),
               ("STOP", "Stop", "Stop the scene playback: the viewport shows the timeline again")),
        description="What to do with the scene playback")

    @classmethod
    def poll(cls, context):
        return context.scene is not None

    def execute(self, context):
        scene = context.scene
        st = preview.get_state(scene, getattr(context, "active_object", None))
        if self.action == "PLAY":
            from ..engine.features.preview import scene as preview_scene

            why = preview_scene.needs_blender(scene)
            if why:
                st.last_error = why[0]
                self.report({"ERROR"}, why[0] + (f" (and {len(why) - 1} more object(s))" if len(why) > 1 else ""))
                return {"CANCELLED"}
            from ..engine.blender.bake.reasons import BakeError
            from ..engine.features.preview import scene_bake as preview_scene_bake

            try:      # the armatures only Blender can evaluate: baked over the scene's range (progress shown)
                if preview_scene_bake.prepare(scene, st, context.window_manager, preview.timeline_handback_suspended):
                    st.push("scene_reload")    # the playback reads the new bakes
            except BakeError as ex:
                st.last_error = str(ex)
                self.report({"ERROR"}, str(ex))
                return {"CANCELLED"}
            bakes = cast("SceneBakes | None", st.scene_bakes)    # (PreviewState types it object)
            for line in (bakes.lines() if bakes is not None else ()):
                self.report({"INFO"}, line)
            if not (st.active and st.scene_mode):
                st.scene_frame = float(scene.frame_current) + float(scene.frame_subframe)
                st.commands.clear()
                st.push("scene_reload")        # the scene's animation is read again
            st.scene_mode = True
            st.looping = bool(scene.stylized_preview.loop)
            st.push("play")
            st.playing = True
            st.active = True
            preview.ensure_timer()
            self.report({"INFO"}, f"Playing the scene from frame {st.scene_frame:.2f}")
        elif self.action == "PAUSE":
            if not (st.active and st.scene_mode):
                self.report({"WARNING"}, "The scene is not playing in the preview")
                return {"CANCELLED"}
            st.push("pause")
            st.playing = False
            self.report({"INFO"}, f"Scene paused at frame {st.scene_frame:.2f}")
        else:
            st.scene_mode = False
            st.playing = False
            st.active = False
            st.commands.clear()
            self.report({"INFO"}, "Scene playback stopped: the viewport shows the timeline")
        redraw()
        return {"FINISHED"}


classes = (STYLIZED_OT_preview_play, STYLIZED_OT_preview_pause, STYLIZED_OT_preview_stop,
           STYLIZED_OT_preview_seek, STYLIZED_OT_preview_scene)


register, unregister = bpy.utils.register_classes_factory(classes)
