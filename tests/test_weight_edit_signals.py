"""Verified final renders that read the vertex-group weights only after Blender reports an edit
(issue 23): the weights are read once per import, not at all by an F12 or a Ctrl+F12 frame of
unchanged data, and every kind of weight edit (and an untagged shape-key edit) is still drawn,
as a fresh session draws it.

Everything goes through ``bpy.ops.render.render`` (F12, and Ctrl+F12 with a
``frame_change_pre`` handler that edits, as a script does); the weight reads are counted at
``skin.read_vertex_groups`` (the per-vertex walk), the reference is a new session
(``free_final_session``) rendering the same data."""
from __future__ import annotations

import bpy
import numpy as np
import pytest

from conftest import add_camera, add_sun, render_scene
from stylized_renderer.engine.blender import render_engine
from stylized_renderer.engine.blender.importer import skin
from support.edit_scenes import animated_grid, edit_weights, mask_of, render_animation, skinned_grid
from support.mesh_calls import mesh_calls
from tools.render_capture import LAST_RENDER as last_render

HANDLER = "stylized_edit_signals"


@pytest.fixture
def weight_reads(monkeypatch):
    """Names of the meshes whose vertex-group weights were read (one entry per read)."""
    return mesh_calls(monkeypatch, skin, "read_vertex_groups")


@pytest.fixture
def grid_scene(empty_scene):
    scene = empty_scene
    add_camera(scene, location=(0.0, -7.0, 1.0))
    add_sun(scene, rotation=(0.6, 0.2, 0.0))
    render_engine.free_final_session()
    yield scene
    render_engine.free_final_session()


def _fresh(scene):
    """The frame rendered by a new session (nothing kept)."""
    render_engine.free_final_session()
    return render_scene(scene).copy()


def _handlers():
    return [h for h in bpy.app.handlers.depsgraph_update_post if getattr(h, "__name__", "") == HANDLER]


def test_weights_are_read_once_per_import_and_not_by_an_unchanged_f12(grid_scene, weight_reads):
    scene = grid_scene
    skinned_grid(scene)
    first = render_scene(scene).copy()
    assert weight_reads == ["Sheet"], "the first F12 read the weights more than once"
    again = render_scene(scene).copy()
    assert last_render["stats"]["last_sync"] == "verified, nothing re-imported"
    assert weight_reads == ["Sheet"], "an F12 of unchanged data read the weights"
    assert np.abs(again - first).max() == 0.0


# ---------------------------------------------------------------------------------------------
# every kind of weight edit between two F12 renders
# ---------------------------------------------------------------------------------------------

def _lower(ob):
    return [v.index for v in ob.data.vertices if v.co.z <= 1.0]


def _prepare_zero_top(arm, ob):
    """The lower half also in 'Top' with weight 0 (so an element's weight can be set)."""
    ob.vertex_groups["Top"].add(_lower(ob), 0.0, "REPLACE")


def _set_element_weight(arm, ob):
    top = ob.vertex_groups["Top"].index
    for v in ob.data.vertices:
        if v.co.z <= 1.0:
            for g in v.groups:
                if g.group == top:
                    g.weight = 1.0          # VertexGroupElement.weight (RNA setter)


def _add_then_update(arm, ob):
    edit_weights(arm, ob)
    bpy.context.view_layer.update()         # evaluated before the render: the handler hears it


def _remove_upper(arm, ob):
    upper = [v.index for v in ob.data.vertices if v.co.z > 1.0]
    ob.vertex_groups["Top"].remove(upper)   # the upper half no longer follows the posed bone


WEIGHT_EDITS = [("VertexGroup.add and remove", None, edit_weights),
                ("VertexGroupElement.weight", _prepare_zero_top, _set_element_weight),
                ("edit then view_layer.update", None, _add_then_update),
                ("VertexGroup.remove", None, _remove_upper)]


@pytest.mark.parametrize("what,prepare,edit", WEIGHT_EDITS, ids=[e[0] for e in WEIGHT_EDITS])
def test_f12_after_a_weight_edit_is_drawn(grid_scene, weight_reads, what, prepare, edit):
    scene = grid_scene
    arm, ob = skinned_grid(scene)
    if prepare is not None:
        prepare(arm, ob)
    before = render_scene(scene).copy()
    render_scene(scene)                     # unchanged: verified without reading the weights
    reads = len(weight_reads)
    edit(arm, ob)
    after = render_scene(scene).copy()
    assert len(weight_reads) > reads, f"the {what} edit was not signalled: weights not read"
    assert last_render["stats"]["last_import_reason"] == "mesh 'Sheet' edited"
    assert (mask_of(before) != mask_of(after)).sum() > 40, f"the {what} edit rendered the old weights"
    assert np.abs(after - _fresh(scene)).max() <= 1e-6


def test_f12_after_an_untagged_shape_key_edit_is_drawn(grid_scene, weight_reads):
    """Shape-key coordinates set with ``foreach_set`` and no ``update()``: Blender's fresh render
    depsgraph shows them, so F12 hashes every shape key (not only after a signal)."""
    scene = grid_scene
    arm, ob = skinned_grid(scene)
    before = render_scene(scene).copy()
    kb = ob.data.shape_keys.key_blocks["Wide"]
    co = np.empty(len(kb.data) * 3, np.float32)
    kb.data.foreach_get("co", co)
    co = co.reshape(-1, 3)
    co[:, 2] += 0.5
    kb.data.foreach_set("co", co.ravel())       # no update(): nothing is tagged
    after = render_scene(scene).copy()
    assert last_render["stats"]["last_import_reason"] == "mesh 'Sheet' edited"
    assert (mask_of(before) != mask_of(after)).sum() > 40
    assert np.abs(after - _fresh(scene)).max() <= 1e-6


def test_without_its_handler_every_mesh_counts_as_edited(grid_scene, weight_reads):
    """The session's handler goes with the session; when it is missing (a file load clears
    handlers) no signal is trusted: the weights are read and an edit is drawn."""
    scene = grid_scene
    arm, ob = skinned_grid(scene)
    before = render_scene(scene).copy()
    assert len(_handlers()) == 1, "the final-render session registered no edit handler"
    for h in _handlers():
        bpy.app.handlers.depsgraph_update_post.remove(h)
    reads = len(weight_reads)
    edit_weights(arm, ob)
    after = render_scene(scene).copy()
    assert len(weight_reads) > reads
    assert (mask_of(before) != mask_of(after)).sum() > 40
    render_engine.free_final_session()
    assert _handlers() == []


# ---------------------------------------------------------------------------------------------
# an edit made by a script between two frames of one animation render
# ---------------------------------------------------------------------------------------------

def _animate(scene, edit, edit_frame, weight_reads):
    frames = {}

    def before(sc, *_):
        if edit is not None and sc.frame_current == edit_frame:
            edit(sc)

    def grab(sc, *_):
        frames[sc.frame_current] = (last_render["pixels"].copy(), dict(last_render["stats"]), len(weight_reads))

    render_animation(scene, before, grab)
    return frames


@pytest.mark.parametrize("animated", [False, True], ids=["still", "keyed pose and shape key"])
def test_a_weight_edit_between_animation_frames_is_drawn(grid_scene, tmp_path, weight_reads, animated):
    """frame_change_pre edits the weights before frame 3.  Frames 2 and 3 read no weights for
    the unchanged mesh, also where Blender re-evaluates it every frame (a keyed shape key);
    frame 3 reads them, draws the edit and equals a fresh session's render."""
    scene = grid_scene
    if animated:
        arm, ob = animated_grid(scene)
    else:
        arm, ob = skinned_grid(scene)
        scene.frame_start, scene.frame_end = 1, 3
    scene.render.filepath = str(tmp_path / "f")

    def edit(sc):
        edit_weights(arm, ob)

    frames = _animate(scene, edit, 3, weight_reads)
    assert sorted(frames) == [1, 2, 3]
    (p2, _s2, r2), (p3, s3, r3) = frames[2], frames[3]
    assert frames[1][2] == 1, "the import read the weights more than once"
    assert r2 == 1, "frame 2 read the weights of an unchanged mesh"
    assert r3 > r2, "the edit before frame 3 was not signalled"
    assert s3["last_import_reason"] == "mesh 'Sheet' edited"
    assert (mask_of(p2) != mask_of(p3)).sum() > 40, "the weight edit is not drawn"
    scene.frame_set(3)
    assert np.abs(p3 - _fresh(scene)).max() <= 1e-6


def test_signals_are_answered_by_a_verified_f12(grid_scene, weight_reads):
    """Edits of an object no asset is made from (a curve: drawn from Blender's evaluated mesh)
    leave no signal behind once an F12 verified the scene, and do not make the rendered mesh's
    weights be read."""
    scene = grid_scene
    skinned_grid(scene)
    cu = bpy.data.curves.new("Wire", "CURVE")
    cu.dimensions = "3D"
    cu.bevel_depth = 0.05
    spline = cu.splines.new("POLY")
    spline.points.add(1)
    spline.points[0].co = (-1.5, -0.5, 0.5, 1.0)
    spline.points[1].co = (-1.5, -0.5, 1.5, 1.0)
    wire = bpy.data.objects.new("Wire", cu)
    scene.collection.objects.link(wire)
    render_scene(scene)
    spline.points[1].co = (-1.2, -0.5, 1.8, 1.0)
    cu.update_tag()
    bpy.context.view_layer.update()
    session = render_engine.kept_final_session()
    assert session is not None
    edits = session.assets.edits
    assert edits is not None
    assert "Wire" in edits.objects          # the handler heard the curve's geometry update
    render_scene(scene)
    assert weight_reads == ["Sheet"]
    assert not (edits.objects or edits.meshes or edits.keys), (edits.objects, edits.meshes, edits.keys)
