"""What several benchmarks share: the median timing loop and the demo crowd (the demo character
and linked duplicates of it).  tools/bench_runtime.py, bench_scene.py and bench_bake.py import
it; it imports none of them (no import circle among the benchmarks)."""
from __future__ import annotations

import statistics
import time


def median_ms(fn, n):
    out = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - t) * 1e3)
    return statistics.median(out)


def build_crowd(n: int, spacing: float = 1.2) -> list:
    """The demo character and n - 1 linked duplicates of it: copies of the rig object (sharing
    its armature data and its action, so Blender evaluates every copy) and of the body, face
    and wand objects (sharing their mesh data), each parented to (and deformed by) its own rig,
    on a grid.  Returns the armature object names, the demo's first."""
    import math

    import bpy

    from demo.character import build_demo_scene
    from tools import scenes

    bpy.ops.wm.read_factory_settings(use_empty=True)
    info = build_demo_scene()
    scene = bpy.context.scene
    scene.render.engine = "STYLIZED"
    arm = info["armature"]
    parts = [info["body"], info["face"], info["prop"]]
    cols = max(1, int(math.ceil(math.sqrt(n))))
    names = [arm.name]
    for k in range(1, n):
        loc = arm.location.copy()
        loc.x += spacing * (k % cols)
        loc.y += spacing * (k // cols)
        names.append(duplicate_character(scene, arm, parts, loc).name)
    scenes.finish()
    return names


def duplicate_character(scene, arm, parts, location):
    """A copy of the rig object ``arm`` (sharing its armature data; its action stays assigned)
    at ``location``, and linked duplicates of ``parts`` (sharing their mesh data) deformed by
    the copy, linked to the scene's collection: parented to it as the originals are (bone
    parents keep their bone and parent inverse), armature modifiers pointed at it, unparented
    parts moved with it (tools/bench_render.duplicate_linked).  Returns the new rig object."""
    from mathutils import Vector

    from tools.bench_render import duplicate_linked

    a2, _objects = duplicate_linked(arm, Vector(location) - arm.location, parts=parts,
                                    collection=scene.collection)
    return a2
