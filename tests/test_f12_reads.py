"""What an F12 reads and keeps (issue 37: the set's after-edit F12 and its peak memory).

Through ``bpy.ops.render.render``: the check that finds an edited mesh and the import that
follows in the same render share their fingerprints (each mesh is hashed once, not twice), and
a render that imports nothing gives the pages it freed back (engine/blender/heap.py ``trim``).
"""
from __future__ import annotations

import sys

import bpy
import numpy as np

import conftest as C
from support.mesh_calls import mesh_calls
from tools.bench_set import grid_mesh


def _scene(scene, n=60):
    me = grid_mesh("Grid", n, n, 10.0, lambda X, Y: 0.1 * np.sin(X) * np.cos(Y))
    grid = bpy.data.objects.new("Grid", me)
    scene.collection.objects.link(grid)
    v, f = C.cube_geometry()
    C.add_mesh_object(scene, "Box", v, f, location=(0.0, 0.0, 1.0))
    C.add_sun(scene, rotation=(0.5, 0.2, 0.0))
    C.add_camera(scene, location=(0.0, -12.0, 6.0), rotation=(1.1, 0.0, 0.0))
    scene.render.resolution_x, scene.render.resolution_y = 64, 48
    return grid


def _hashed(monkeypatch):
    from stylized_renderer.engine.blender.importer import cache as cache_mod

    return mesh_calls(monkeypatch, cache_mod, "base_fingerprint")


def test_an_edit_s_f12_hashes_each_mesh_once(empty_scene, monkeypatch):
    from stylized_renderer.engine.blender import render_engine

    grid = _scene(empty_scene)
    C.render_scene(empty_scene)
    C.render_scene(empty_scene)
    session = render_engine.kept_final_session()
    assert session is not None
    imports = session.imports.import_count
    seen = _hashed(monkeypatch)
    C.render_scene(empty_scene)                     # nothing edited: checked, not imported
    assert session.imports.import_count == imports
    assert sorted(seen) == sorted({grid.data.name, "Box"}), seen
    seen.clear()
    grid.data.vertices[100].co.z += 0.05
    grid.data.update()
    C.render_scene(empty_scene)                     # the check finds the edit, the import follows
    assert session.imports.import_count == imports + 1
    assert "edited" in session.imports.last_import_reason
    assert sorted(seen) == sorted({grid.data.name, "Box"}), f"hashed more than once: {seen}"
    seen.clear()
    grid.data.vertices[200].co.z += 0.05             # the next render hashes anew (nothing carried)
    grid.data.update()
    C.render_scene(empty_scene)
    assert session.imports.import_count == imports + 2
    assert sorted(seen) == sorted({grid.data.name, "Box"}), seen


def test_a_render_that_imports_nothing_gives_its_freed_pages_back(empty_scene, monkeypatch):
    """Every final render's scratch (the checks' reads, the draws' and read-backs' buffers) is
    freed at its end; glibc keeps such pages, so the set's process stayed ~150 MB above its
    size between renders and the next render's peak stood on them.  render_complete trims."""
    from stylized_renderer.engine.blender import heap, render_engine

    _scene(empty_scene)
    C.render_scene(empty_scene)
    calls = []
    real = heap.trim

    def counting():
        calls.append(1)
        return real()

    monkeypatch.setattr(heap, "trim", counting)
    C.render_scene(empty_scene)
    session = render_engine.kept_final_session()
    assert session is not None and session.imports.import_count == 1
    assert calls, "the render's freed pages were not given back"
    if sys.platform.startswith("linux"):
        assert real() is True           # glibc was asked
