"""Crowds of the demo character (tools/scenes.build_character): ``build_crowd`` (test_crowd_runtime:
``COPIES`` rig copies sharing the armature data and the action) with ``clip_of``, ``seek_frame``
and ``skinned_nodes`` to play and read them, and ``character_crowd`` (test_grouped_draws: linked
duplicates in a row under a camera and a sun) with ``last_pipeline_stats`` (the last F12's
pipeline counters).  Shared with test_crowd_preview and test_mixer_sources."""
from __future__ import annotations

import bpy

from conftest import add_camera, add_sun
from tools import bench_common, render_capture, scenes
from tools.bench_render import duplicate_linked

COPIES = 6


def build_crowd(scene, n=COPIES):
    """tools/scenes.build_character and n - 1 copies: each rig object a copy sharing the armature
    data and the action (placed, one rotated and scaled), its Body and Hat linked duplicates
    deformed by it; one copy holds a bone the clip does not animate in its own pose."""
    arm, body, hat, _ring = scenes.build_character(scene)
    names = [arm.name]
    for k in range(1, n):
        a2 = bench_common.duplicate_character(scene, arm, (body, hat), (1.5 * k, 0.3 * k, 0.0))
        if k == 2:
            a2.rotation_euler = (0.0, 0.0, 0.7)
            a2.scale = (1.2, 1.2, 1.2)
        if k == 3:
            a2.pose.bones["Unused"].rotation_quaternion = (0.9, 0.0, 0.0, 0.43)
        names.append(a2.name)
    scenes.finish()
    return names


def clip_of(asset, arm_name):
    return next(c for c in asset.animations if c.target_object == arm_name and c.channels)


def seek_frame(rt, clip, frame):
    assert rt.player.seek((frame - clip.frame_start) / clip.fps)
    assert rt.update(0.0), rt.last_failure()


def skinned_nodes(asset, arm_name):
    """(node, primitive) of every skinned primitive deformed by the armature ``arm_name``."""
    arm_node = asset.node_index(arm_name)
    out = []
    for i, nd in enumerate(asset.nodes):
        if nd.mesh_index < 0:
            continue
        for pi, p in enumerate(asset.meshes[nd.mesh_index].primitives):
            if p.skin is not None and p.skin.armature_node == arm_node:
                out.append((i, pi))
    return out


def last_pipeline_stats():
    return dict(render_capture.LAST_RENDER["pipeline"])


def character_crowd(scene, count, spacing=2.0):
    """tools/scenes.build_character (rig, two-material body, hat, ring) and ``count`` - 1 linked
    duplicates in a row; a sun and a camera seeing them all."""
    arm, body, hat, ring = scenes.build_character(scene)
    arm.pose.bones["Spine"].rotation_mode = "XYZ"
    arm.pose.bones["Spine"].rotation_euler = (0.5, 0.0, 0.3)
    chars = [(arm, [body, hat, ring])]
    for k in range(1, count):
        rig, objs = duplicate_linked(arm, (k * spacing, 0.0, 0.0), f".dup{k}")
        rig.pose.bones["Spine"].rotation_euler = (0.5 - 0.3 * k, 0.0, 0.3 * k)    # a pose of its own
        chars.append((rig, objs))
    mid = 0.5 + 0.5 * (count - 1) * spacing
    add_camera(scene, location=(mid, -4.0 - 1.2 * count, 0.8))
    add_sun(scene, rotation=(0.6, 0.2, 0.3), strength=3.0)
    bpy.context.view_layer.update()
    return chars
