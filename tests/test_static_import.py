"""The static-mesh import path (issue 37 item 3): a mesh whose normals are its vertices'
(``Mesh.normals_domain == 'POINT'``) is read per vertex and, without UVs or colours, split with no
per-corner key; what it yields per triangle corner is exactly what the general per-corner path
yields (positions, normals, UVs, colours, source vertices, materials), on the kinds of mesh
each path takes."""
from __future__ import annotations

import bpy
import numpy as np
import pytest

import conftest as C
from tools.bench_set import grid_mesh


def _grid(scene, n=24, uv=False, colors=False, sharp=False, flat=False, loose=False):
    me = grid_mesh("G", n, n, 4.0, lambda X, Y: 0.3 * np.sin(2 * X) * np.cos(Y))
    if uv:
        layer = me.uv_layers.new(name="UV")
        co = np.empty(len(me.loops) * 2, np.float32)
        layer.uv.foreach_get("vector", co)
        lv = np.empty(len(me.loops), np.int32)
        me.loops.foreach_get("vertex_index", lv)
        # a seam: corners of one vertex differ in UV along a column
        uvs = np.stack([(lv % n) / n + 0.5 * ((lv % n == n // 2) & (np.arange(lv.size) % 4 == 0)), (lv // n) / n], 1)
        layer.uv.foreach_set("vector", uvs.astype(np.float32).ravel())
    if colors:
        attr = me.color_attributes.new("Col", "FLOAT_COLOR", "POINT")
        rgba = np.random.default_rng(3).random((len(me.vertices), 4)).astype(np.float32)
        attr.data.foreach_set("color", rgba.ravel())
        me.color_attributes.render_color_index = me.color_attributes.find("Col")
    if sharp:
        me.edges[len(me.edges) // 2].use_edge_sharp = True
    if flat:
        me.shade_flat()
    if loose:
        me.vertices.add(1)
    me.update()
    ob = bpy.data.objects.new("G", me)
    scene.collection.objects.link(ob)
    me.calc_loop_triangles()
    return me


def _streams(cs):
    t = cs.tri_vertices.astype(np.int64)
    out = [cs.positions[t], cs.normals[t], cs.source_vertices[t], cs.tri_materials]
    out += [a[t] for a in (cs.uv0, cs.colors) if a is not None]
    return out


@pytest.mark.parametrize("kind", ["plain", "uv", "colors", "uv_colors", "sharp", "flat", "loose"])
def test_point_normal_path_is_the_corner_path(empty_scene, monkeypatch, kind):
    from stylized_renderer.engine.blender.importer import mesh as M

    me = _grid(empty_scene, uv="uv" in kind, colors="colors" in kind, sharp=kind == "sharp", flat=kind == "flat",
               loose=kind == "loose")
    expect_point = kind not in ("sharp", "flat")
    assert M.point_normals(me) == expect_point, me.normals_domain
    fast = M.read_mesh(me)
    monkeypatch.setattr(M, "point_normals", lambda mesh: False)
    general = M.read_mesh(me)
    a, b = _streams(fast), _streams(general)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and np.array_equal(x, y)
    assert fast.positions.shape == general.positions.shape      # the same split, in another order
    used = general.corner_to_split >= 0
    assert np.array_equal(fast.corner_to_split >= 0, used)
    assert np.array_equal(fast.source_vertices[fast.corner_to_split[used]],
                          general.source_vertices[general.corner_to_split[used]])
    if kind in ("plain", "loose"):
        # no key at all: one split vertex per drawn vertex, in vertex order
        assert np.array_equal(fast.source_vertices, np.arange(len(me.vertices) - (kind == "loose")))
    # the plain formula: every triangle corner carries its Blender corner's data
    nl = len(me.loops)
    tl = np.empty(len(me.loop_triangles) * 3, np.int32)
    me.loop_triangles.foreach_get("loops", tl)
    lv = np.empty(nl, np.int32)
    me.loops.foreach_get("vertex_index", lv)
    co = np.empty(len(me.vertices) * 3, np.float32)
    me.vertices.foreach_get("co", co)
    cn = np.empty(nl * 3, np.float32)
    me.corner_normals.foreach_get("vector", cn)
    t = fast.tri_vertices.astype(np.int64).ravel()
    assert np.array_equal(fast.positions[t], co.reshape(-1, 3)[lv[tl]])
    assert np.array_equal(fast.normals[t], cn.reshape(-1, 3)[tl])


def test_static_primitives_upload_a_slim_buffer_and_skinned_ones_the_whole_layout(empty_scene):
    """A static grid's static buffer holds only its colour (white, the mesh has none: 4 bytes a
    vertex, layout.COMPACT_DEFAULTS; no joints, weights or morph spans: 96 before) and its
    indices; a skinned primitive holds the whole static layout; the grid still draws (the F12
    shows it lit)."""
    from stylized_renderer.engine.blender.session import StylizedSession
    from stylized_renderer.engine.gpu import util as gpu_util
    from stylized_renderer.engine.gpu.static_buffers import STATIC_NAMES, static_attributes

    scene = empty_scene
    me = _grid(scene, n=40)
    C.add_sun(scene, rotation=(0.5, 0.2, 0.0))
    C.add_camera(scene, location=(0.0, -8.0, 5.0), rotation=(1.0, 0.0, 0.0))
    px = C.render_scene(scene)
    s = StylizedSession()
    dg = bpy.context.evaluated_depsgraph_get()
    gpu_util.run_in_gpu_context(lambda: (s.ensure_gpu(), s.ensure_runtime(dg)))
    try:
        tris = len(me.loop_triangles)
        assert s.backend is not None
        assert s.backend.static_uploads == 1
        assert s.backend.static_bytes == 4 * len(me.vertices) + 12 * tris, s.backend.static_bytes
    finally:
        gpu_util.run_in_gpu_context(s.free)
    skinned = type("P", (), {"positions": np.zeros((3, 3)), "joints": np.zeros((3, 4)), "uv0": None})()
    assert static_attributes(skinned) == STATIC_NAMES and "joints" in STATIC_NAMES
    h, w = px.shape[:2]
    centre, corner = px[h // 2 - 5:h // 2 + 5, w // 2 - 5:w // 2 + 5, :3].mean(), px[:5, :5, :3].mean()
    assert centre > corner + 0.05, (centre, corner)      # the grid, lit, over the empty background


def test_a_mesh_without_colours_draws_as_with_a_white_colour_attribute(empty_scene):
    """The compact white a mesh without a colour attribute is drawn with (8-bit, 4 bytes a vertex)
    is exactly 1.0: a material that multiplies its base colour by the colour attribute draws such
    a grid as it draws the grid with a float attribute of 1.0 (and not as with 0.5)."""
    scene = empty_scene
    scene.render.resolution_x, scene.render.resolution_y = 64, 48
    me = _grid(scene, n=30)
    mat = C.add_material("Tinted", (0.8, 0.6, 0.4))
    tree = mat.node_tree
    attr = tree.nodes.new("ShaderNodeVertexColor")
    mix = tree.nodes.new("ShaderNodeMix")
    mix.data_type, mix.blend_type = "RGBA", "MULTIPLY"
    mix.inputs["Factor"].default_value = 1.0
    mix.inputs[6].default_value = (0.8, 0.6, 0.4, 1.0)
    tree.links.new(attr.outputs["Color"], mix.inputs[7])
    bsdf = next(n for n in tree.nodes if n.type == "BSDF_PRINCIPLED")
    tree.links.new(mix.outputs[2], bsdf.inputs["Base Color"])
    me.materials.append(mat)
    C.add_sun(scene, rotation=(0.5, 0.2, 0.0))
    C.add_camera(scene, location=(0.0, -8.0, 5.0), rotation=(1.0, 0.0, 0.0))
    none = C.render_scene(scene).copy()

    def with_attribute(value):
        if "Col" in me.color_attributes:
            me.color_attributes.remove(me.color_attributes["Col"])
        a = me.color_attributes.new("Col", "FLOAT_COLOR", "POINT")
        a.data.foreach_set("color", np.full(4 * len(me.vertices), value, np.float32))
        me.color_attributes.render_color_index = me.color_attributes.find("Col")
        me.update()
        return C.render_scene(scene).copy()

    white = with_attribute(1.0)
    grey = with_attribute(0.5)
    assert np.array_equal(none, white)
    assert np.abs(none - grey).max() > 0.05          # (the material does multiply by the attribute)
