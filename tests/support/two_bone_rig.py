"""The two-bone test rig (test_local_shadows, test_passes_skinned, test_vector_pass): a column of two
bones, each skinning the half of a mesh below / above the middle (weight 1), the upper one bent
sideways about its own Z; ``bar_geometry`` the square bar such a rig bends."""
from __future__ import annotations

import math

import bpy
import numpy as np


def two_bone_rig(scene, body, names=("lower", "upper"), height=2.0):
    """An armature "Rig" linked to ``scene`` with bones ``names`` from 0 to ``height`` / 2 and on to
    ``height`` (the second the child), skinning ``body``'s vertices below / above ``height`` / 2
    (vertex groups, an Armature modifier, ``body`` parented to the rig); returns the rig."""
    arm_data = bpy.data.armatures.new("Rig")
    rig = bpy.data.objects.new("Rig", arm_data)
    scene.collection.objects.link(rig)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="EDIT")
    mid = 0.5 * height
    lo = arm_data.edit_bones.new(names[0])
    lo.head, lo.tail = (0.0, 0.0, 0.0), (0.0, 0.0, mid)
    up = arm_data.edit_bones.new(names[1])
    up.head, up.tail = (0.0, 0.0, mid), (0.0, 0.0, height)
    up.parent = lo
    bpy.ops.object.mode_set(mode="OBJECT")
    co = np.empty(len(body.data.vertices) * 3, np.float32)
    body.data.vertices.foreach_get("co", co)
    above = co.reshape(-1, 3)[:, 2] > mid
    for name, rows in zip(names, (~above, above)):
        body.vertex_groups.new(name=name).add(np.flatnonzero(rows).tolist(), 1.0, "REPLACE")
    mod = body.modifiers.new("Armature", "ARMATURE")
    mod.object = rig
    body.parent = rig
    return rig


def bend(rig, bone, degrees):
    """Pose ``bone`` rotated ``degrees`` about its own Z (sideways for these upright bones)."""
    pb = rig.pose.bones[bone]
    pb.rotation_mode = "XYZ"
    pb.rotation_euler = (0.0, 0.0, math.radians(degrees))


def bar_geometry(segments=8, half=0.3, height=2.0):
    verts, faces = [], []
    for k in range(segments + 1):
        z = height * k / segments
        verts += [(-half, -half, z), (half, -half, z), (half, half, z), (-half, half, z)]
    for k in range(segments):
        a = 4 * k
        b = a + 4
        for i in range(4):
            j = (i + 1) % 4
            faces.append((a + i, a + j, b + j, b + i))
    faces.append((3, 2, 1, 0))
    t = 4 * segments
    faces.append((t, t + 1, t + 2, t + 3))
    return verts, faces
