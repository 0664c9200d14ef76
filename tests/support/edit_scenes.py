"""The skinned sheet of the trust tests (test_edits_between_renders, test_animation_render_resync,
test_weight_edit_signals): ``skinned_grid`` (a 6x6 grid skinned to two bones, with a shape key),
``animated_grid`` (the same with its bone and key keyed), the edits users make between renders
(``edit_positions``, ``edit_weights``), ``render_animation`` (Ctrl+F12 through bpy.ops with an
edit before and a grab after each frame) and ``mask_of`` (the pixels that are not background)."""
from __future__ import annotations

import bpy
import numpy as np

from support.viewport import object_mask
from tools import scenes


def mask_of(px):
    return object_mask(px)


def skinned_grid(scene):
    """A 6x6 grid skinned to two bones (the upper half to the posed bone) + a shape key."""
    arm = scenes.make_armature("Rig", [("Root", None, (0, 0, 0), (0, 0, 1)), ("Top", "Root", (0, 0, 1), (0, 0, 2))])
    verts, quads, _ = scenes.grid(6, 6, size=(2.0, 2.0), origin=(-1.0, 0.0, 0.0))
    ob = scenes.make_mesh("Sheet", verts, quads, materials=("SheetMat",))
    ob.data.materials[0].diffuse_color = (0.9, 0.2, 0.1, 1.0)
    z = np.array(verts)[:, 2]
    scenes.skin_to(ob, arm, {"Root": (np.flatnonzero(z <= 1.0), np.ones(int((z <= 1.0).sum()))),
                             "Top": (np.flatnonzero(z > 1.0), np.ones(int((z > 1.0).sum())))})
    ob.shape_key_add(name="Basis", from_mix=False)
    kb = ob.shape_key_add(name="Wide", from_mix=False)
    co = np.array(verts, np.float32)
    co[:, 0] *= 1.2
    kb.data.foreach_set("co", co.ravel())
    kb.value = 1.0
    arm.pose.bones["Top"].rotation_mode = "XYZ"
    arm.pose.bones["Top"].rotation_euler = (0.0, 0.8, 0.0)
    scenes.finish()
    return arm, ob


def edit_positions(arm, ob):
    co = np.empty(len(ob.data.vertices) * 3, np.float32)
    ob.data.vertices.foreach_get("co", co)
    ob.data.vertices.foreach_set("co", co * 0.6)
    ob.data.update()


def edit_weights(arm, ob):
    # the lower half now follows the posed bone too
    low = [v.index for v in ob.data.vertices if v.co.z <= 1.0]
    ob.vertex_groups["Root"].remove(low)
    ob.vertex_groups["Top"].add(low, 1.0, "REPLACE")


def render_animation(scene, before_frame, after_frame):
    """Ctrl+F12 through bpy.ops with a frame_change_pre and a render_post handler (a script that
    edits between frames, and a grab of each frame's pixels)."""
    bpy.app.handlers.frame_change_pre.append(before_frame)
    bpy.app.handlers.render_post.append(after_frame)
    try:
        bpy.ops.render.render(animation=True, scene=scene.name)
    finally:
        bpy.app.handlers.frame_change_pre.remove(before_frame)
        bpy.app.handlers.render_post.remove(after_frame)


def animated_grid(scene):
    """The trust tests' skinned sheet with its upper bone keyed: frame 1 bent one way, frames 2
    and later the other (constant from 2 on, so frame 3 differs from frame 2 only by an edit),
    and its shape key keyed too (Blender re-evaluates the mesh every frame)."""
    arm, ob = skinned_grid(scene)
    pb = arm.pose.bones["Top"]
    for frame, angle in ((1, 0.8), (2, -0.7)):
        pb.rotation_euler = (0.0, angle, 0.0)
        pb.keyframe_insert("rotation_euler", frame=frame)
    kb = ob.data.shape_keys.key_blocks["Wide"]
    for frame, value in ((1, 1.0), (2, 0.5)):
        kb.value = value
        kb.keyframe_insert("value", frame=frame)
    for fc in fcurves(arm.animation_data.action) + fcurves(ob.data.shape_keys.animation_data.action):
        for kp in fc.keyframe_points:
            kp.interpolation = "CONSTANT"
    scene.frame_start, scene.frame_end = 1, 3
    scene.frame_set(1)
    return arm, ob


def fcurves(action):
    """The action's F-curves, slotted (4.4+ layered actions) or legacy."""
    fcs = list(getattr(action, "fcurves", ()) or ())
    if fcs:
        return fcs
    out = []
    for layer in getattr(action, "layers", ()):
        for strip in layer.strips:
            for bag in strip.channelbags:
                out.extend(bag.fcurves)
    return out
