"""Generated rigs for the GPU deform checks (tools/check_deform.py): ``build_arm`` (test_preserve_volume:
a tube arm whose forearm twists up to 170 degrees, the hand scaling non-uniformly, 2-4 influences
a vertex) and ``build_bbone_rig`` (test_bbones: a chain of curved B-Bones with custom handles),
with ``run_bbone_check`` running the check over the B-Bone rig's frames (test_bbones, test_bake)."""
from __future__ import annotations

import math

import bpy
import numpy as np

import conftest as C
from tools import scenes

RADIUS = 0.25


def tube(rings=26, sides=16, length=2.5):
    z = np.linspace(0.0, length, rings)
    a = np.linspace(0.0, 2.0 * math.pi, sides, endpoint=False)
    verts = np.stack([np.repeat(np.zeros(rings), sides) + RADIUS * np.tile(np.cos(a), rings),
                      RADIUS * np.tile(np.sin(a), rings), np.repeat(z, sides)], 1)
    quads = []
    for r in range(rings - 1):
        for s in range(sides):
            s1 = (s + 1) % sides
            quads.append((r * sides + s, r * sides + s1, (r + 1) * sides + s1, (r + 1) * sides + s))
    return verts, quads


def build_arm(preserve_volume=True, frames=8):
    """upper (0-1) -> lower (1-2) -> hand (2-2.5) along +Z, and a 'side' bone on the upper arm;
    a 26x16 tube weighted with overlapping falloffs (2-4 influences).  Keys: the upper arm
    bends, the forearm twists about its own axis up to 170 degrees and bends, the hand scales
    (1.0, 1.5, 0.6) and rolls, the side bone turns a little."""
    arm = scenes.make_armature("PVRig", [
        ("upper", None, (0, 0, 0), (0, 0, 1)),
        ("lower", "upper", (0, 0, 1), (0, 0, 2)),
        ("hand", "lower", (0, 0, 2), (0, 0, 2.5)),
        ("side", "upper", (0.3, 0, 0.8), (0.3, 0, 1.2)),
    ])
    verts, quads = tube()
    ob = scenes.make_mesh("PVArm", verts, quads)
    z = verts[:, 2]
    wb = {}
    for name, c in (("upper", 0.5), ("lower", 1.5), ("hand", 2.25)):
        w = np.clip(1.0 - np.abs(z - c) / 1.0, 0.0, 1.0)
        sel = np.flatnonzero(w > 0)
        wb[name] = (sel, np.round(w[sel], 3))
    sel = np.flatnonzero((z > 0.65) & (z < 1.35))
    wb["side"] = (sel, np.full(sel.size, 0.2))
    md = scenes.skin_to(ob, arm, wb)
    md.use_deform_preserve_volume = preserve_volume
    pb = arm.pose.bones
    for b in pb:
        b.rotation_mode = "XYZ"
    keys = {1: (0.0, 0.0, 0.0, (1.0, 1.0, 1.0)), 4: (0.3, 1.6, 0.4, (1.0, 1.3, 0.8)),
            frames: (-0.2, 2.97, 0.6, (1.0, 1.5, 0.6))}
    for f, (bend, twist, lbend, s) in keys.items():
        pb["upper"].rotation_euler = (bend, 0.0, 0.1 * bend)
        pb["lower"].rotation_euler = (lbend, twist, 0.0)          # bone Y = the forearm's axis
        pb["hand"].rotation_euler = (0.0, 0.5 * twist, 0.2)
        pb["hand"].scale = s
        pb["side"].rotation_euler = (0.2 * bend, 0.0, 0.3 * bend)
        for b in ("upper", "lower", "hand", "side"):
            pb[b].keyframe_insert("rotation_euler", frame=f)
        pb["hand"].keyframe_insert("scale", frame=f)
    sc = bpy.context.scene
    sc.frame_start, sc.frame_end = 1, frames
    scenes.finish()
    return arm, ob


def build_bbone_rig(scene=None):
    """A three-bone chain along +Z with B-Bones (4, 8, 6 segments), non-default ease, an AUTO
    start handle and a custom (ABSOLUTE) end handle bone on the middle bone, a curved mapping
    where Blender has it, and a strip mesh weighted to all three with overlapping falloffs;
    an action bends the chain and moves the handle over frames 1-10."""
    arm = scenes.make_armature("BRig", [
        ("root", None, (0, 0, 0), (0, 0, 1)),
        ("mid", "root", (0, 0, 1), (0, 0, 2)),
        ("tip", "mid", (0, 0, 2), (0, 0, 3)),
        ("handle", None, (0, 0.0, 2.2), (0, 0.3, 2.2), False),
    ], scene)
    bones = arm.data.bones
    for name, segs in (("root", 4), ("mid", 8), ("tip", 6)):
        bones[name].bbone_segments = segs
    bones["root"].bbone_easein, bones["root"].bbone_easeout = 0.4, 1.7
    bones["mid"].bbone_easein, bones["mid"].bbone_easeout = 1.6, 0.3
    bones["tip"].bbone_easeout = 2.0
    bones["mid"].bbone_handle_type_start = "AUTO"
    bones["mid"].bbone_handle_type_end = "ABSOLUTE"
    bones["mid"].bbone_custom_handle_end = bones["handle"]
    bones["tip"].bbone_handle_type_start = "AUTO"
    if hasattr(bones["tip"], "bbone_mapping_mode"):
        bones["tip"].bbone_mapping_mode = "CURVED"
    verts, quads, _uv = scenes.grid(4, 41, size=(0.6, 3.0), origin=(-0.3, 0.0, 0.0))
    ob = scenes.make_mesh("BStrip", verts, quads)
    z = verts[:, 2]
    wb = {}
    for k, name in enumerate(("root", "mid", "tip")):
        w = np.clip(1.0 - np.abs(z - (k + 0.5)) / 1.1, 0.0, 1.0)
        sel = np.flatnonzero(w > 0)
        wb[name] = (sel, np.round(w[sel], 3))
    scenes.skin_to(ob, arm, wb)
    pb = arm.pose.bones
    for name in ("root", "mid", "tip"):
        pb[name].rotation_mode = "XYZ"
    keys = {1: (0.0, 0.0, 0.0, 0.0), 4: (0.3, 0.6, 0.5, 0.2), 7: (-0.2, 0.9, -0.4, -0.3), 10: (0.5, -0.7, 0.8, 0.4)}
    for f, (a, b, c, h) in keys.items():
        pb["root"].rotation_euler = (a, 0.0, 0.2 * a)
        pb["mid"].rotation_euler = (b, 0.3 * b, 0.0)
        pb["tip"].rotation_euler = (c, 0.0, -0.5 * c)
        pb["handle"].location = (h, 0.0, -h)
        pb["mid"].bbone_easein = 0.5 + a        # pose ease on top of the rest ease
        pb["tip"].bbone_curveinx = 0.3 * c      # pose curve-in
        for name in ("root", "mid", "tip"):
            pb[name].keyframe_insert("rotation_euler", frame=f)
        pb["handle"].keyframe_insert("location", frame=f)
        pb["mid"].keyframe_insert("bbone_easein", frame=f)
        pb["tip"].keyframe_insert("bbone_curveinx", frame=f)
    sc = bpy.context.scene
    sc.frame_start, sc.frame_end = 1, 10
    scenes.finish()
    return arm, ob


def run_bbone_check(capsys, frames="1-10", mode="timeline"):
    return C.run_deform_check(capsys, frames, mode)
