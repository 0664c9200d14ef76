"""An F12 after an edit that only moved vertices of a big static mesh (issue 37: the set's F12
after moving a terrain vertex).

Through ``bpy.ops.render.render``: the check finds the mesh edited in its positions alone, the
import makes the new asset from the held one (engine/blender/importer/moved.py) and the GPU
backend keeps the mesh's static buffers and triangle order, making again only the boxes and
digests of the chunks that hold the moved vertex (engine/gpu/chunks.py ``moved``).  What it makes
is what a fresh session makes from the same data: the asset's arrays bit for bit, the chunk
table as ``chunk_order`` builds it, the frame pixel for pixel.  An edit that changes how Blender
splits a quad into triangles is read anew, and a non-finite position is still named.
"""
from __future__ import annotations

import math

import bpy
import numpy as np
import pytest

import conftest as C
from tools.bench_set import grid_mesh


@pytest.fixture(autouse=True)
def _free_kept_session():
    yield
    from stylized_renderer.engine.blender import render_engine

    render_engine.free_final_session()


def _scene(scene, uvs: bool):
    """A 300 x 300 grid (180,000 triangles: chunked) under a box, a sun, a short point lamp."""
    scene.render.resolution_x, scene.render.resolution_y = 128, 96
    if uvs:       # (Blender's grid: a UV map, so tangents and the per-corner split)
        bpy.ops.mesh.primitive_grid_add(x_subdivisions=300, y_subdivisions=300, size=60.0)
        ground = bpy.context.active_object
        ground.data.shade_smooth()           # (a flat-shaded mesh's split follows its face normals)
    else:         # (no UV map: the split vertices are the mesh's own)
        ground = bpy.data.objects.new("Ground", grid_mesh("Ground", 301, 301, 60.0,
                                                          lambda X, Y: 0.02 * np.sin(X) * np.cos(Y)))
        scene.collection.objects.link(ground)
    ground.name = "Ground"
    ground.data.materials.append(C.add_material("Grey", (0.6, 0.6, 0.6, 1.0)))
    v, f = C.cube_geometry(0.8)
    C.add_mesh_object(scene, "Box", v, f, location=(0.6, 0.4, 0.4),
                      material=C.add_material("Red", (0.8, 0.2, 0.2, 1.0)))
    C.add_sun(scene, rotation=(math.radians(40.0), 0.0, math.radians(30.0)), strength=2.0)
    ld = bpy.data.lights.new("Lamp", "POINT")
    ld.energy = 60.0
    ld.use_custom_distance = True
    ld.cutoff_distance = 5.0
    lamp = bpy.data.objects.new("Lamp", ld)
    lamp.location = (-0.5, -0.6, 1.6)
    scene.collection.objects.link(lamp)
    C.add_camera(scene, location=(0.0, -7.0, 4.0), rotation=(math.radians(60.0), 0.0, 0.0), lens=35.0)
    return ground


def _near(ground, x, y) -> int:
    co = np.empty(len(ground.data.vertices) * 3, np.float32)
    ground.data.vertices.foreach_get("co", co)
    co = co.reshape(-1, 3)
    return int(np.argmin((co[:, 0] - x) ** 2 + (co[:, 1] - y) ** 2))


def _session():
    from stylized_renderer.engine.blender import render_engine

    session = render_engine.kept_final_session()
    assert session is not None and session.scene_asset is not None
    return session


def _backend(session):
    backend = session.backend
    assert backend is not None
    return backend


def _moved_meshes(session):
    return session.scene_asset.import_stats.get("moved_meshes")


def _held(session, name="Ground"):
    """(primitive, its stream's chunk table) of the kept session's object ``name``."""
    asset = session.scene_asset
    mi = next(i for i, m in enumerate(asset.meshes) if m.name == name)
    return asset.meshes[mi].primitives[0], session.runtime.runtime_meshes[mi].streams[0].chunks


def _fresh_render(scene):
    """The frame and the ground's primitive and chunk table of a new session."""
    from stylized_renderer.engine.blender import render_engine

    render_engine.free_final_session()
    px = C.render_scene(scene).copy()
    return px, _held(_session())


@pytest.mark.parametrize("uvs", [False, True], ids=["plain", "uv-map"])
def test_moving_a_vertex_keeps_the_buffers_and_renders_as_a_fresh_session(empty_scene, uvs):
    from stylized_renderer.engine.gpu import chunks

    scene = empty_scene
    ground = _scene(scene, uvs)
    C.render_scene(scene)
    C.render_scene(scene)
    session = _session()
    backend = _backend(session)
    uploads, reuses = backend.static_uploads, backend.static_reuses
    old_prim, old_table = _held(session)
    assert old_table is not None and old_table.count > 4          # (a chunked ground)

    ground.data.vertices[_near(ground, 0.3, -0.5)].co.z += 0.3    # (in view, lit by the lamp)
    ground.data.update()
    px = C.render_scene(scene).copy()
    assert "edited" in session.imports.last_import_reason
    assert _moved_meshes(session) == 1
    assert (backend.static_uploads, backend.static_reuses) == (uploads, reuses + 1)
    prim, table = _held(session)
    assert prim.indices is old_prim.indices                        # the split and its order kept
    assert not np.array_equal(prim.positions, old_prim.positions)
    changed = int(np.count_nonzero(table.digests != old_table.digests))
    assert 1 <= changed <= 4, changed                              # the moved vertex's chunks only
    made = chunks.chunk_order(prim.positions, prim.indices)           # the plain build, same data
    assert made is not None and table is not None
    built = made[1]
    for f in ("starts", "lo", "hi", "digests"):
        assert np.array_equal(getattr(table, f), getattr(built, f)), f

    fresh_px, (fresh, fresh_table) = _fresh_render(scene)
    for f in ("positions", "normals", "smooth_normals", "tangents", "uv0", "indices", "source_vertices"):
        a, b = getattr(prim, f), getattr(fresh, f)
        assert (a is None and b is None) or (a is not None and b is not None and np.array_equal(a, b)), f
    assert (prim.tangents is not None) == uvs
    assert fresh_table is not None and np.array_equal(table.digests, fresh_table.digests)
    C.save_png(px, C.ARTIFACTS / f"moved_vertex_{'uv' if uvs else 'plain'}.png")
    assert np.array_equal(px, fresh_px), np.abs(px - fresh_px).max()


def _face_triangles(mesh, face: int) -> list:
    return sorted(tuple(t.vertices) for t in mesh.loop_triangles if t.polygon_index == face)


def test_a_move_that_splits_a_quad_the_other_way_is_read_anew(empty_scene):
    scene = empty_scene
    ground = _scene(scene, uvs=False)
    C.render_scene(scene)
    session = _session()
    uploads = _backend(session).static_uploads
    me = ground.data
    vi = _near(ground, 0.3, -0.5)
    face = next(p for p in me.polygons if p.vertices[1] == vi)
    a, _b, c, d = (np.array(me.vertices[k].co) for k in face.vertices)
    before = _face_triangles(me, face.index)
    mid = 0.5 * (a + c)
    me.vertices[vi].co = mid + 0.3 * (d - mid)      # across the diagonal a-c, to d's side
    me.update()
    assert _face_triangles(me, face.index) != before, "the move did not flip the quad (test set-up)"
    px = C.render_scene(scene).copy()
    assert "edited" in session.imports.last_import_reason
    assert not _moved_meshes(session)
    assert _backend(session).static_uploads == uploads + 1
    fresh_px, _fresh = _fresh_render(scene)
    assert np.array_equal(px, fresh_px), np.abs(px - fresh_px).max()


def test_a_vertex_moved_to_nan_is_named(empty_scene):
    scene = empty_scene
    ground = _scene(scene, uvs=False)
    C.render_scene(scene)
    session = _session()
    vi = _near(ground, 0.3, -0.5)
    ground.data.vertices[vi].co.z = float("nan")
    ground.data.update()
    C.render_scene(scene)
    assert not _moved_meshes(session)
    asset = _session().scene_asset
    assert asset is not None
    reason = next(m.fallback_reason for m in asset.meshes if m.name == "Ground")
    assert reason is not None and f"vertex {vi}" in reason, reason


def test_a_moved_mesh_s_linked_duplicate_moves_with_it(empty_scene):
    """Two objects share the moved mesh: one asset is made from the held one, the other object
    shares it (importer/meshes.py's linked duplicates), and both draw the new positions."""
    scene = empty_scene
    ground = _scene(scene, uvs=False)
    twin = bpy.data.objects.new("GroundTwin", ground.data)
    twin.location = (0.0, 30.0, -0.5)
    scene.collection.objects.link(twin)
    C.render_scene(scene)
    session = _session()
    ground.data.vertices[_near(ground, 0.3, -0.5)].co.z += 0.3
    ground.data.update()
    px = C.render_scene(scene).copy()
    assert _moved_meshes(session) == 1
    asset = session.scene_asset
    assert asset is not None
    a, b = (next(m for m in asset.meshes if m.name == n) for n in ("Ground", "GroundTwin"))
    assert a.primitives[0].positions is b.primitives[0].positions
    fresh_px, _fresh = _fresh_render(scene)
    assert np.array_equal(px, fresh_px), np.abs(px - fresh_px).max()
