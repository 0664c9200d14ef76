"""Viewport redraws with nothing changed re-read nothing from Blender.

Blender calls the engine's ``view_update`` whenever its depsgraph changed (an edit, a frame
change); between two of them the evaluated meshes, instances and lamps are the same.  A redraw
without one (orbiting, the preview's own clock) reuses what the last update read: the meshes
drawn from Blender's evaluated mesh and the lamps.  Besides the work, this matters for
Geometry Nodes instances of generated geometry: Blender keeps every Python wrapper made of such
an instance's temporary object (120 bytes each time ``DepsgraphObjectInstance.object`` is read,
never freed, in 4.5, 5.0 and 5.2), and a redraw read each of them twice.
"""
from __future__ import annotations

import gc
import math
import tracemalloc

import bpy
import numpy as np

from conftest import add_sun, look_at, perspective
from stylized_renderer.engine.blender.render_engine import draw_view
from stylized_renderer.engine.gpu import util as gpu_util
from support.viewport import captured, draw, object_mask, session  # noqa: F401


def _scatter(scene, count: int = 11):
    """A grid of count x count points with a Geometry Nodes modifier instancing a generated cube
    on each point (the instances' objects are temporary: nothing in bpy.data)."""
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=count - 1, y_subdivisions=count - 1, size=4.0)
    ob = bpy.context.object
    ob.name = "Scatter"
    ng = bpy.data.node_groups.new("Scatter", "GeometryNodeTree")
    ng.interface.new_socket("Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    ng.interface.new_socket("Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")
    gi, go = ng.nodes.new("NodeGroupInput"), ng.nodes.new("NodeGroupOutput")
    iop, cube = ng.nodes.new("GeometryNodeInstanceOnPoints"), ng.nodes.new("GeometryNodeMeshCube")
    cube.inputs["Size"].default_value = (0.15, 0.15, 0.15)
    ng.links.new(gi.outputs[0], iop.inputs["Points"])
    ng.links.new(cube.outputs[0], iop.inputs["Instance"])
    ng.links.new(iop.outputs[0], go.inputs[0])
    ob.modifiers.new("GN", "NODES").node_group = ng
    ob.rotation_euler = (math.radians(90.0), 0.0, 0.0)
    return ob, cube


def _python_bytes() -> int:
    """Python objects' memory traced now (numpy's array buffers left out: their own domain)."""
    gc.collect()
    snap = tracemalloc.take_snapshot().filter_traces([
        tracemalloc.Filter(False, __file__), tracemalloc.DomainFilter(False, np.lib.tracemalloc_domain)])
    return sum(t.size for t in snap.traces)


def test_idle_redraws_of_geometry_nodes_instances_read_nothing_and_edits_still_show(empty_scene, session, captured):  # noqa: F811
    """121 generated cubes instanced by Geometry Nodes: 60 redraws without a depsgraph update
    keep under 900 bytes a redraw of Python memory (reading every instance's object twice a
    redraw kept 29,040: 2 x 121 x 120) and make no new GPU stream; then an edit of the node
    tree (bigger cubes), reported through ``view_update``'s sync, is drawn at the next redraw."""
    scene = empty_scene
    add_sun(scene, rotation=(0.6, 0.2, 0.0))
    ob, cube = _scatter(scene)
    view, proj = look_at((0.0, -9.0, 0.0)), perspective(math.radians(40), 1.5)
    w, h = 120, 80
    session.sync(bpy.context.evaluated_depsgraph_get())
    captured.take()

    def redraws(n):
        dg = bpy.context.evaluated_depsgraph_get()
        return gpu_util.run_in_gpu_context(lambda: [draw_view(session, dg, view, proj, False, w, h) and None
                                                    for _ in range(n)])

    before = draw(session, view, proj, False, w, h)
    assert session.stats["items"] >= 121, session.stats["items"]      # every instance drawn
    redraws(20)
    made = session.fallback.streams_created
    tracemalloc.start()
    try:
        redraws(10)     # traced: the last frame's own objects (shadow keys, instance rows) are in b0 and b1 alike
        b0 = _python_bytes()
        redraws(60)
        b1 = _python_bytes()
    finally:
        tracemalloc.stop()
    print(f"python memory kept: {(b1 - b0) / 60:.0f} bytes a redraw")
    assert (b1 - b0) / 60 < 900.0, (b1 - b0) / 60
    assert session.fallback.streams_created == made
    # an edit reported as view_update reports it: drawn at the next redraw
    cube.inputs["Size"].default_value = (0.3, 0.3, 0.3)
    session.sync(bpy.context.evaluated_depsgraph_get(), captured.take())
    after = draw(session, view, proj, False, w, h)
    assert object_mask(after).sum() > 1.5 * object_mask(before).sum(), (object_mask(after).sum(),
                                                                        object_mask(before).sum())
