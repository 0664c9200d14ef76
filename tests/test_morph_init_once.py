"""Issue 23 item 1 (the heavy avatar's first frame): what the runtime derives from a morphed
primitive at initialisation is made once, not once per consumer."""
from __future__ import annotations

import bpy
import numpy as np

from conftest import add_camera, add_sun, render_scene
from stylized_renderer.engine.core import geometry
from stylized_renderer.engine.core.runtime import morph_table
from support.bump_grid import bump_grid, morph_targets_of


def test_first_f12_makes_the_smooth_normal_deltas_once_per_primitive(empty_scene, monkeypatch):
    """The runtime's morph table, the shader-morph spans and the deltas texture all need each
    primitive's outline smooth-normal deltas; the first F12 made them three times.  Now each
    target's are made once, for the whole primitive's one ``SmoothNormalDeltas``."""
    bump_grid()
    scene = bpy.context.scene
    add_camera(scene, location=(0.0, -5.0, 1.0))
    add_sun(scene, rotation=(0.6, 0.0, 0.4))
    scene.frame_set(10)                         # keys at 0.9: the morph is drawn
    made, calls = [], []
    real_init, real_target = geometry.SmoothNormalDeltas.__init__, geometry.SmoothNormalDeltas._target

    def init(self, primitive):
        made.append(primitive)
        real_init(self, primitive)

    def target(self, t):
        calls.append(t.name)
        return real_target(self, t)

    monkeypatch.setattr(geometry.SmoothNormalDeltas, "__init__", init)
    monkeypatch.setattr(geometry.SmoothNormalDeltas, "_target", target)
    px = render_scene(scene)
    assert (px[..., 3] > 0.5).sum() > 1000         # the grid is drawn
    assert len(made) == 1, f"SmoothNormalDeltas made {len(made)} times for one primitive"
    assert sorted(calls) == sorted(set(calls)) and "Bump" in calls, calls


def test_spans_alone_equal_the_packed_spans(empty_scene):
    ob = bump_grid()
    prim, _ = morph_targets_of(ob)
    smooth = geometry.smooth_normal_deltas(prim)
    span, entries = morph_table.pack_morph_entries(prim, smooth)
    alone = morph_table.pack_morph_span(prim, smooth)
    assert alone.dtype == span.dtype and np.array_equal(alone, span)
    assert int(span[:, 1].sum()) == entries.shape[0] > 0


def test_row_kernels_equal_numpy_bit_for_bit():
    """The importer's normal/tangent deltas must not change with the faster row kernels."""
    rng = np.random.default_rng(7)
    a = rng.normal(size=(5000, 3))
    b = a + rng.normal(size=(5000, 3)) * 1e-4
    assert np.array_equal(geometry.norm3(a), np.linalg.norm(a, axis=1))
    assert np.array_equal(geometry.dot3(a, b), np.sum(a * b, axis=1))
    assert np.array_equal(geometry.cross3(a, b), np.cross(a, b))


def test_vertex_group_read_equals_the_per_element_walk(empty_scene):
    """skin.read_vertex_groups (bulk reads per vertex) gives every (vertex, group, weight) of
    Blender's data in Blender's order, including vertices in no group and several groups."""
    from stylized_renderer.engine.blender.importer.skin import read_vertex_groups

    bpy.ops.mesh.primitive_uv_sphere_add(segments=16, ring_count=8)
    ob = bpy.context.object
    rng = np.random.default_rng(3)
    groups = [ob.vertex_groups.new(name=f"G{i}") for i in range(5)]
    for v in range(len(ob.data.vertices)):
        for gi in rng.choice(5, size=int(rng.integers(0, 4)), replace=False):
            groups[gi].add([v], float(rng.random()), "REPLACE")
    vi, gi, wi = read_vertex_groups(ob.data)
    walk = [(v.index, g.group, g.weight) for v in ob.data.vertices for g in v.groups]
    assert len(walk) > len(ob.data.vertices) // 2
    assert vi.tolist() == [w[0] for w in walk] and gi.tolist() == [w[1] for w in walk]
    assert wi.tolist() == [w[2] for w in walk]
    assert (vi.dtype, gi.dtype, wi.dtype) == (np.int64, np.int64, np.float64)
