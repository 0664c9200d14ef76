"""A final render does not import what it does not show (issue 37: a set's hidden proxies cost
neither import time nor memory): meshes disabled in renders, or in a collection disabled in
renders, are left out of the F12 session's assets; enabled again, the next F12 imports and draws
them.  The viewport keeps importing them (hiding there is a quick toggle)."""
from __future__ import annotations

import bpy
import numpy as np

import conftest as C
from stylized_renderer.engine.blender import render_engine


def _scene(scene):
    scene.render.resolution_x, scene.render.resolution_y = 64, 48
    C.add_sun(scene, rotation=(0.5, 0.2, 0.0))
    C.add_camera(scene, location=(0.0, -8.0, 0.0))
    verts, faces = C.cube_geometry(1.0)
    C.add_mesh_object(scene, "Shown", verts, faces, location=(-1.2, 0.0, 0.0),
                      material=C.add_material("ShownMat", (0.8, 0.2, 0.2, 1.0)))
    hidden = C.add_mesh_object(scene, "Proxy", verts, faces, location=(1.2, 0.0, 0.0),
                               material=C.add_material("ProxyMat", (0.2, 0.8, 0.2, 1.0)))
    coll = bpy.data.collections.new("HiddenSet")
    scene.collection.children.link(coll)
    in_coll = C.add_mesh_object(scene, "SetPiece", verts, faces, location=(0.0, 0.0, 1.5))
    scene.collection.objects.unlink(in_coll)
    coll.objects.link(in_coll)
    return hidden, coll


def _held():
    s = render_engine.kept_final_session()
    assert s is not None and s.scene_asset is not None
    return {n for n in ("Shown", "Proxy", "SetPiece") if s.scene_asset.node_index(n) >= 0}


def test_meshes_hidden_from_renders_are_not_imported_and_come_back_when_shown(empty_scene):
    scene = empty_scene
    proxy, coll = _scene(scene)
    everything = C.render_scene(scene).copy()
    assert _held() == {"Shown", "Proxy", "SetPiece"}
    proxy.hide_render = True
    coll.hide_render = True
    without = C.render_scene(scene).copy()
    assert _held() == {"Shown"}
    changed = np.abs(everything - without).max(axis=2) > 0.05
    assert changed.sum() > 50              # the proxy and the set piece are gone from the picture
    proxy.hide_render = False
    coll.hide_render = False
    again = C.render_scene(scene).copy()
    assert _held() == {"Shown", "Proxy", "SetPiece"}
    assert np.abs(again - everything).max() <= 1e-6
