"""F12 / Ctrl+F12 re-sync fast path (issue 15, item 1): the later frames of an animation render
read what changes per frame (pose, shape-key values, matrices, materials) without re-importing
the scene, yet an edit made between frames is drawn, and every frame equals a fresh session's
render of the same frame.

Everything goes through ``bpy.ops.render.render`` (Ctrl+F12 with ``animation=True`` and a
``frame_change_pre`` handler that edits, as a script or a driver would), and the reference is a
new session (``free_final_session``) rendering the same frame of the same data."""
from __future__ import annotations

import bpy
import numpy as np
import pytest

from conftest import add_camera, add_sun, cube_geometry, render_scene
from stylized_renderer.engine.blender import render_engine
from stylized_renderer.engine.blender.importer import scene as importer_scene
from support.edit_scenes import animated_grid, edit_positions, mask_of, render_animation
from tools.render_capture import LAST_RENDER as last_render


@pytest.fixture
def anim_scene(empty_scene, tmp_path):
    scene = empty_scene
    add_camera(scene, location=(0.0, -7.0, 1.0))
    add_sun(scene, rotation=(0.6, 0.2, 0.0))
    arm, ob = animated_grid(scene)
    scene.render.filepath = str(tmp_path / "f")
    render_engine.free_final_session()
    yield scene, arm, ob
    render_engine.free_final_session()


@pytest.fixture
def build_nodes_calls(monkeypatch):
    """How many times the importer built the node array (once per scene import)."""
    calls = []
    real = importer_scene.build_nodes

    def counting(objects):
        calls.append(len(objects))
        return real(objects)

    monkeypatch.setattr(importer_scene, "build_nodes", counting)
    return calls


def _animate(scene, edit=None, edit_frame=3):
    """Ctrl+F12 over the scene's frames; ``edit(scene)`` runs before ``edit_frame`` is evaluated.
    Returns {frame: (pixels, stats, build_nodes calls so far)}."""
    frames = {}

    def before(sc, *_):
        if edit is not None and sc.frame_current == edit_frame:
            edit(sc)

    def grab(sc, *_):
        frames[sc.frame_current] = (last_render["pixels"].copy(), dict(last_render["stats"]))

    render_animation(scene, before, grab)
    return frames


def _fresh(scene, frame):
    """The frame rendered by a new session (nothing kept from the animation render)."""
    render_engine.free_final_session()
    scene.frame_set(frame)
    return render_scene(scene).copy()


def test_second_frame_does_not_reimport_but_shows_the_new_pose(anim_scene, build_nodes_calls):
    scene, arm, ob = anim_scene
    frames = _animate(scene)
    assert sorted(frames) == [1, 2, 3]
    (p1, s1), (p2, s2), (_p3, s3) = frames[1], frames[2], frames[3]
    # frame 1 imports; frames 2 and 3 import nothing (one node build for the whole animation)
    assert len(build_nodes_calls) == 1, build_nodes_calls
    assert s1["import_count"] == s2["import_count"] == s3["import_count"] == 1
    assert (s1["render_steps"], s2["render_steps"], s3["render_steps"]) == (0, 1, 2)
    assert (s1["runtime_reuses"], s2["runtime_reuses"], s3["runtime_reuses"]) == (0, 1, 2)
    assert s2["fallbacks"] == [] and s2["gpu_items"] >= 1
    # the new pose is drawn: frame 2 bends the other way
    assert (mask_of(p1) != mask_of(p2)).sum() > 40
    # every frame is the picture a new session makes of it
    for frame, px in ((2, p2), (1, p1)):
        ref = _fresh(scene, frame)
        assert np.abs(px - ref).max() <= 1e-6, f"frame {frame} differs from a fresh session's render"


def _move_vertices(scene):
    edit_positions(bpy.data.objects["Rig"], bpy.data.objects["Sheet"])


def _recolour(scene):
    mat = bpy.data.materials["SheetMat"]
    mat.diffuse_color = (0.1, 0.3, 0.9, 1.0)
    if mat.node_tree is not None:
        for node in mat.node_tree.nodes:
            if node.type == "BSDF_PRINCIPLED":
                node.inputs["Base Color"].default_value = (0.1, 0.3, 0.9, 1.0)


def _add_object(scene):
    v, f = cube_geometry()
    me = bpy.data.meshes.new("Added")
    me.from_pydata([tuple(x * 0.4 for x in p) for p in v], [], f)
    me.update()
    ob = bpy.data.objects.new("Added", me)
    ob.location = (1.6, 0.0, 1.2)
    scene.collection.objects.link(ob)


def _rename_key(scene):
    bpy.data.objects["Sheet"].data.shape_keys.key_blocks["Wide"].name = "Wider"


def _change_modifier(scene):
    md = bpy.data.objects["Sheet"].modifiers["Armature"]
    md.show_viewport = False
    md.show_render = False


EDITS = [("move a vertex", _move_vertices, True, True), ("material colour", _recolour, False, True),
         ("add an object", _add_object, True, True), ("rename a shape key", _rename_key, True, False),
         ("change a modifier", _change_modifier, True, True)]


@pytest.mark.parametrize("what,edit,reimports,visible", EDITS, ids=[e[0] for e in EDITS])
def test_an_edit_between_frames_is_drawn(anim_scene, build_nodes_calls, what, edit, reimports, visible):
    scene, arm, ob = anim_scene
    frames = _animate(scene, edit, edit_frame=3)
    assert sorted(frames) == [1, 2, 3]
    (p2, s2), (p3, s3) = frames[2], frames[3]
    assert s2["import_count"] == 1 and s2["render_steps"] == 1, "frame 2 re-imported an unchanged scene"
    if reimports:
        assert s3["import_count"] == 2, f"the {what} edit did not re-import"
        assert len(build_nodes_calls) == 2
        assert s3["render_steps"] == 1
    else:
        assert s3["import_count"] == 1 and s3["render_steps"] == 2
    if visible:
        # the pose is the same on frames 2 and 3: only the edit changes the picture
        assert np.abs(p3 - p2).max() > 0.05, f"the {what} edit is not drawn"
    ref = _fresh(scene, 3)
    assert np.abs(p3 - ref).max() <= 1e-6, f"after the {what} edit, frame 3 differs from a fresh session's render"


def test_repeated_f12_verifies_without_rebuilding(anim_scene, build_nodes_calls):
    """F12 gets a new engine and depsgraph each time (whose updates name everything): an
    unchanged scene is verified (structure and every mesh's content fingerprint) without
    building nodes or re-importing, and draws what a fresh session draws."""
    scene, arm, ob = anim_scene
    scene.frame_set(2)
    first = render_scene(scene).copy()
    imports = last_render["stats"]["import_count"]
    again = render_scene(scene).copy()
    st = last_render["stats"]
    assert st["import_count"] == imports and st["last_sync"] == "verified, nothing re-imported"
    assert len(build_nodes_calls) == 1 and st["fingerprint_ms"] > 0.0
    assert np.abs(again - first).max() == 0.0
    assert np.abs(again - _fresh(scene, 2)).max() <= 1e-6


@pytest.mark.parametrize("persistent", [False, True], ids=["", "persistent data"])
def test_f12_after_an_untagged_edit_still_verifies(anim_scene, persistent):
    """An edit Blender was not told about (``foreach_set`` without ``update()``) between two F12
    renders is found by the content fingerprint and drawn, also when Blender keeps the engine
    and its depsgraph between renders (Persistent Data)."""
    scene, arm, ob = anim_scene
    scene.render.use_persistent_data = persistent
    scene.frame_set(2)
    before = render_scene(scene).copy()
    imports = last_render["stats"]["import_count"]
    co = np.empty(len(ob.data.vertices) * 3, np.float32)
    ob.data.vertices.foreach_get("co", co)
    ob.data.vertices.foreach_set("co", co * 0.6)          # no ob.data.update()
    after = render_scene(scene).copy()
    st = last_render["stats"]
    assert st["import_count"] == imports + 1 and st["last_import_reason"] == "mesh 'Sheet' edited"
    assert (mask_of(before) != mask_of(after)).sum() > 40
    assert np.abs(after - _fresh(scene, 2)).max() <= 1e-6


@pytest.mark.parametrize("mover", ["Rig", "Sheet"])
def test_a_mesh_moving_against_its_armature_matches_a_fresh_render(anim_scene, mover):
    """Object animation that moves the skinned mesh relative to its armature (Blender's Armature
    modifier deforms with the current relative transform) is drawn as a fresh session draws it."""
    scene, arm, ob = anim_scene
    target = bpy.data.objects[mover]
    for frame, x in ((1, 0.0), (2, 0.6)):
        target.location = (x, 0.0, 0.0)
        target.keyframe_insert("location", frame=frame)
    scene.frame_set(1)
    frames = _animate(scene)
    p2, s2 = frames[2]
    assert s2["import_count"] == 1 and s2["render_steps"] == 1      # a transform is no re-import
    assert np.abs(p2 - _fresh(scene, 2)).max() <= 1e-6, f"{mover} moved: frame 2 differs from a fresh render"


def test_demo_crowd_animation_frames_import_nothing_and_match_fresh(empty_scene, tmp_path, build_nodes_calls):
    """The demo character (action, face shape keys keyed every frame, bone-parented wand) and 2
    linked duplicates over a Ctrl+F12 of 3 frames: one import; frames 2 and 3 read the new pose
    and face (Blender re-evaluates the face mesh each frame: its fingerprint is re-checked) and
    equal a fresh session's render."""
    from demo.character import build_demo_scene
    from tools.bench_render import add_linked_duplicates

    scene = empty_scene
    build_demo_scene(scene)
    add_linked_duplicates(scene, 2)
    scene.render.resolution_x, scene.render.resolution_y = 200, 150
    start = scene.frame_start
    scene.frame_end = start + 2
    scene.frame_set(start)
    scene.render.filepath = str(tmp_path / "c")
    render_engine.free_final_session()
    try:
        frames = _animate(scene)
        stats = [frames[f][1] for f in sorted(frames)]
        assert [s["import_count"] for s in stats] == [1, 1, 1] and len(build_nodes_calls) == 1
        assert [s["render_steps"] for s in stats] == [0, 1, 2]
        assert stats[2]["fingerprint_ms"] > 0.0          # the re-evaluated face mesh was verified
        last = frames[start + 2][0]
        assert np.abs(last - frames[start][0]).max() > 0.05      # the characters moved
        assert np.abs(last - _fresh(scene, start + 2)).max() <= 1e-6
    finally:
        render_engine.free_final_session()
