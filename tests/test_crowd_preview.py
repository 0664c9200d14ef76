"""Crowd preview (issue 15): "Play on All Characters" in the Animation panel plays the previewed
clip on every armature that shares the previewed armature's skeleton (linked duplicates), through
the real user path: the Scene property, the PreviewState command queue and the viewport
session's ``update_frame``.  Checked against Blender's evaluated pose with the action on every
rig; turning it off leaves only the previewed armature playing; a rig that needs a baked
preview refuses crowd mode with a message; undo restores the choice.

Lazy palette textures: a palette upload keeps the texels and makes no texture; a palette drawn
alone makes its texture on first use; grouped draws make none per palette and can draw from the
batched update's texel rows as they are (``SkinningPaletteSet.texel_rows``)."""
from __future__ import annotations

import types
from typing import Any, cast

import bpy
import numpy as np
import pytest

from conftest import render_scene
from stylized_renderer.engine.blender import render_engine
from stylized_renderer.engine.features.preview import control as preview
from stylized_renderer.engine.features.preview.state import CROWD_ERROR_PREFIX
from stylized_renderer.engine.features.preview.state import set_crowd as state_set_crowd
from stylized_renderer.engine.gpu.passes import instancing
from stylized_renderer.panels import preview_panel
from support.crowds import COPIES, build_crowd, character_crowd, last_pipeline_stats, skinned_nodes
from support.panels import Ctx, draw_panel
from support.preview_sessions import clocked_session
from tools import bench_common, rigify_rig

TOL = 1e-4


@pytest.fixture
def view(monkeypatch, ext, bakes):
    """A viewport session (as view_draw uses it) whose preview clock is driven by hand; the
    refusal tests read ``last_error`` themselves."""
    yield from clocked_session(monkeypatch, strict=False)


def set_crowd(scene, arm, flag):
    """What clicking the panel's toggle does: the Scene property, with the armature active."""
    with bpy.context.temp_override(active_object=arm, object=arm):
        scene.stylized_preview.crowd = flag


def bone_nodes(asset, name):
    return [(i, nd.bone_name) for i, nd in enumerate(asset.nodes)
            if nd.object_name == name and nd.bone_name is not None]


def blender_worlds(frame, names, asset):
    """{node: armature world @ pose bone matrix} of every bone of ``names`` at ``frame``: the
    check sets the frame and restores it, as a bake does (not the user scrubbing: the preview
    is not handed back to the timeline)."""
    scene = bpy.context.scene
    before = (scene.frame_current, scene.frame_subframe)
    out = {}
    with preview.timeline_handback_suspended():
        scene.frame_set(frame)
        dg = bpy.context.evaluated_depsgraph_get()
        for name in names:
            arm = bpy.data.objects[name].evaluated_get(dg)
            aw = np.array(arm.matrix_world)
            for i, bone in bone_nodes(asset, name):
                out[i] = aw @ np.array(arm.pose.bones[bone].matrix)
        scene.frame_set(before[0], subframe=before[1])
    return out


def blender_palette(frame_worlds, asset, node, pi):
    """Skin matrices of (node, primitive) from Blender's evaluated bone worlds."""
    dg = bpy.context.evaluated_depsgraph_get()
    skin = asset.meshes[asset.nodes[node].mesh_index].primitives[pi].skin
    mw = np.array(bpy.data.objects[asset.nodes[node].object_name].evaluated_get(dg).matrix_world)
    return np.array([np.linalg.inv(mw) @ frame_worlds[j] @ skin.inverse_bind_matrices[k]
                     for k, j in enumerate(skin.joint_node_indices)])


def frame_of(clip, t):
    return clip.frame_start + t * clip.fps


# ------------------------------------------------------------------------------------------------
# the real path: Scene property -> PreviewState -> session.update_frame
# ------------------------------------------------------------------------------------------------

def test_crowd_preview_plays_every_character_as_blender(empty_scene, view):
    scene = empty_scene
    names = build_crowd(scene)                          # 6 rigs sharing armature data and action
    arm = bpy.data.objects[names[0]]
    st = preview.get_state(scene, arm)
    assert not st.crowd and not scene.stylized_preview.crowd
    set_crowd(scene, arm, True)
    assert st.crowd and ("crowd", True) in st.commands
    clip_name = st.clip_name
    st.active = True
    rt = view.update(st)
    asset = view.session.scene_asset
    clip = next(c for c in asset.animations if c.name == clip_name and c.target_object == names[0])
    assert rt.player.clip is clip and rt.crowd_targets == names and rt.player.target_count == COPIES
    assert st.crowd_count == COPIES and st.last_error is None
    pairs = {name: skinned_nodes(asset, name) for name in names}
    bind = np.array(rt.pose.world_matrices)

    # seek to frame 4, then play 9 frames' worth of time: frame 13
    state_set_crowd(st, True)                   # unchanged: nothing queued
    assert not any(c[0] == "crowd" for c in st.commands)
    t0 = (4 - clip.frame_start) / clip.fps
    st.push("seek", t0)
    view.update(st)
    st.push("play")
    view.update(st, 0.0)
    rt = view.update(st, 9.0 / clip.fps)
    assert st.playing and st.time == pytest.approx(t0 + 9.0 / clip.fps)
    assert frame_of(clip, st.time) == pytest.approx(13.0)
    ref = blender_worlds(13, names, asset)
    moved = set()
    for name in names:
        for i, bone in bone_nodes(asset, name):
            assert np.allclose(rt.pose.world_matrix(i), ref[i], atol=TOL), (name, bone)
            if not np.allclose(bind[i], ref[i], atol=1e-3):
                moved.add(name)
        for node, pi in pairs[name]:
            got = rt.palette_set.find(node, pi).matrices
            assert np.allclose(got, blender_palette(ref, asset, node, pi), atol=TOL), (name, node)
    assert moved == set(names)                          # every character really plays

    # the panel: the toggle and the number of characters it drives
    lay = draw_panel(preview_panel.STYLIZED_PT_viewport_animation, Ctx(scene, arm))
    assert ("crowd" in [p[1] for p in lay.props()]) and f"{COPIES} characters" in lay.labels()

    # off: the clip keeps its time on the previewed armature only
    t = st.time
    set_crowd(scene, arm, False)
    assert not st.crowd and ("crowd", False) in st.commands
    st.push("pause")
    rt = view.update(st, 0.0)
    assert st.time == pytest.approx(t) and rt.crowd_targets == [] and rt.player.target_count == 1
    assert st.crowd_count == 1 and st.last_error is None
    st.push("play")
    rt = view.update(st, 0.0)
    worlds_a = np.array(rt.pose.world_matrices)
    rt = view.update(st, 5.0 / clip.fps)
    assert frame_of(clip, st.time) == pytest.approx(18.0)
    ref = blender_worlds(18, names, asset)
    others_moving = 0
    for name in names:
        nodes = [i for i, _b in bone_nodes(asset, name)]
        if name == names[0]:
            for i in nodes:
                assert np.allclose(rt.pose.world_matrix(i), ref[i], atol=TOL)
            assert not np.allclose(worlds_a[nodes], rt.pose.world_matrices[nodes], atol=1e-3)
        else:
            # not playing: their bind pose, frame after frame (Blender's frame 18 differs)
            assert np.array_equal(worlds_a[nodes], rt.pose.world_matrices[nodes]), name
            assert np.allclose(rt.pose.world_matrices[nodes], bind[nodes], atol=1e-9), name
            others_moving += not np.allclose(rt.pose.world_matrices[nodes], np.array([ref[i] for i in nodes]),
                                             atol=1e-3)
    assert others_moving == COPIES - 1
    lay = draw_panel(preview_panel.STYLIZED_PT_viewport_animation, Ctx(scene, arm))
    assert not any(l.endswith(" characters") for l in lay.labels())


def test_crowd_turned_on_while_playing_keeps_the_time(empty_scene, view):
    """The clip switched to the crowd mid-play continues from the same time on every character."""
    scene = empty_scene
    names = build_crowd(scene, 3)
    arm = bpy.data.objects[names[0]]
    st = preview.get_state(scene, arm)
    st.active = True
    st.push("play")
    rt = view.update(st)
    clip = rt.player.clip
    rt = view.update(st, 6.0 / clip.fps)
    t = st.time
    assert rt.player.target_count == 1 and t > 0.0
    set_crowd(scene, arm, True)
    rt = view.update(st, 0.0)
    assert st.time == pytest.approx(t) and rt.player.target_count == 3 and st.crowd_count == 3
    ref = blender_worlds(round(frame_of(clip, t)), names, view.session.scene_asset)
    for i, w in ref.items():
        assert np.allclose(rt.pose.world_matrix(i), w, atol=TOL)


def test_crowd_property_tooltip_and_undo(empty_scene, view):
    from stylized_renderer.engine.features.preview import properties as preview_props

    prop = preview_props.StylizedPreviewProps.bl_rna.properties["crowd"]
    assert prop.description == ("Play the clip on every armature that shares this armature's skeleton "
                                "(linked duplicates), in one batched update")
    assert not prop.is_skip_save
    scene = empty_scene
    names = build_crowd(scene, 2)
    arm = bpy.data.objects[names[0]]
    st = preview.get_state(scene, arm)
    bpy.ops.ed.undo_push(message="before")
    set_crowd(scene, arm, True)
    bpy.ops.ed.undo_push(message="Play on All Characters")
    assert st.crowd
    st.commands.clear()
    bpy.ops.ed.undo()
    assert not bpy.context.scene.stylized_preview.crowd
    assert not st.crowd and st.commands == [("crowd", False)]      # the viewport follows the undo
    bpy.ops.ed.redo()
    assert bpy.context.scene.stylized_preview.crowd and st.crowd and st.commands[-1] == ("crowd", True)
    # a new state (a reloaded file) starts from the scene's stored choice
    preview.clear_states()
    assert preview.get_state(bpy.context.scene, bpy.data.objects[names[0]]).crowd


def test_crowd_preview_pushes_shape_keys_only_when_they_change(empty_scene, view, monkeypatch):
    """The preview pushes the file's shape-key values (expressions panel) of every character each
    frame; unchanged values are not pushed again, an edit is drawn at the next frame on every
    linked duplicate, and a timeline frame in between is followed by a full push."""
    from stylized_renderer.engine.core.world.scene_runtime import SceneRuntime

    scene = empty_scene
    names = build_crowd(scene, 3)
    body = bpy.data.objects["Body"]
    body.shape_key_add(name="Basis", from_mix=False)
    smile = body.shape_key_add(name="Smile", from_mix=False)
    for v in smile.data:
        v.co.z += 0.05
    smile.value = 0.25
    arm = bpy.data.objects[names[0]]
    calls = []
    real = SceneRuntime.set_node_morph_weights

    def counted(self, node, values):
        calls.append(int(node))
        return real(self, node, values)

    monkeypatch.setattr(SceneRuntime, "set_node_morph_weights", counted)
    st = preview.get_state(scene, arm)
    st.active = True
    set_crowd(scene, arm, True)
    st.push("play")
    rt = view.update(st)
    asset = view.session.scene_asset
    bodies = sorted(i for i, nd in enumerate(asset.nodes)
                    if nd.mesh_index >= 0 and bpy.data.objects[nd.object_name].data == body.data)
    assert len(bodies) == 3 and sorted(calls) == bodies

    def smile_weights():
        out = []
        for node in bodies:
            for p in rt.mesh_instances[node].primitives:
                if p.morph_state is not None:
                    k = [t.name for t in p.primitive.morph_targets].index("Smile")
                    out.append(float(p.morph_state.weights[k]))
        return out

    assert smile_weights() and all(w == pytest.approx(0.25) for w in smile_weights())
    calls.clear()
    for _ in range(3):
        view.update(st, 1.0 / 24.0)
    assert calls == [] and st.playing                   # nothing changed: nothing pushed
    smile.value = 0.75                                  # the expressions panel
    view.update(st, 1.0 / 24.0)
    assert sorted(calls) == bodies and all(w == pytest.approx(0.75) for w in smile_weights())
    # a timeline frame writes Blender's values; back in the preview everything is pushed again
    smile.value = 0.5
    st.active = False
    view.update(st)
    smile.value = 0.75
    calls.clear()
    st.active = True
    view.update(st, 1.0 / 24.0)
    assert sorted(calls) == bodies and all(w == pytest.approx(0.75) for w in smile_weights())


# ------------------------------------------------------------------------------------------------
# rigs previewed from a bake refuse crowd mode
# ------------------------------------------------------------------------------------------------

def test_baked_rig_refuses_crowd(empty_scene, view, bakes):
    scene = empty_scene
    arm, ob, act = rigify_rig.build_constraint_rig(scene)
    dup = bench_common.duplicate_character(scene, arm, (ob,), (3.0, 0.0, 0.0))
    bpy.context.view_layer.update()
    bakes.cache.ensure(arm, act.name)
    st = preview.get_state(scene, arm)
    st.active = True
    st.push("clip", act.name)
    st.push("seek", 0.2)
    rt = view.update(st)
    assert st.active and st.last_error is None and rt.player.clip is not None    # alone: baked, plays
    set_crowd(scene, arm, True)
    view.update(st)
    assert not st.active and not st.playing                              # timeline mode, no wrong pose
    err = st.last_error or ""
    assert err.startswith(CROWD_ERROR_PREFIX) and f"'{arm.name}'" in err
    assert "IK" in err and "Turn Play on All Characters off" in err
    assert rt.player.target_count == 1
    lay = draw_panel(preview_panel.STYLIZED_PT_viewport_animation, Ctx(scene, arm))
    assert st.last_error in lay.labels()
    # off again: the message goes and the baked preview plays the previewed rig
    set_crowd(scene, arm, False)
    assert st.last_error is None
    st.active = True
    rt = view.update(st)
    assert st.active and st.last_error is None and rt.player.target_count == 1
    assert dup.name in rt.armatures_sharing_skeleton(arm.name)


def test_crowd_refused_when_a_duplicate_needs_a_bake(empty_scene, view, bakes):
    """The previewed rig plays from its clip, but a copy has a constraint of its own: the clip's
    tracks would not give that copy Blender's pose, so crowd mode is refused, naming it."""
    scene = empty_scene
    names = build_crowd(scene, 3)
    arm = bpy.data.objects[names[0]]
    other = bpy.data.objects[names[2]]
    con = other.pose.bones["Head"].constraints.new("COPY_ROTATION")
    con.target, con.subtarget = other, "Unused"
    bpy.context.view_layer.update()
    bakes.cache.mark_dirty()
    st = preview.get_state(scene, arm)
    st.active = True
    set_crowd(scene, arm, True)
    view.update(st)
    assert not st.active and st.last_error and f"'{other.name}'" in st.last_error, st.last_error
    set_crowd(scene, arm, False)
    st.active = True
    rt = view.update(st)
    assert st.active and st.last_error is None and rt.player.clip is not None


def test_crowd_refused_when_a_copy_gains_a_constraint_while_playing(empty_scene, view, bakes):
    """The crowd's bake check is answered once per set of characters and kept until the bake
    cache's reasons are dropped (a depsgraph update of a rig: StylizedSession.sync marks the
    cache dirty); a constraint added to a copy while the crowd plays refuses on the next frame."""
    scene = empty_scene
    names = build_crowd(scene, 3)
    arm = bpy.data.objects[names[0]]
    st = preview.get_state(scene, arm)
    st.active = True
    set_crowd(scene, arm, True)
    view.update(st)
    assert st.active and st.last_error is None, st.last_error
    view.update(st, 0.1)
    assert st.active and st.last_error is None
    other = bpy.data.objects[names[1]]
    con = other.pose.bones["Head"].constraints.new("COPY_ROTATION")
    con.target, con.subtarget = other, "Unused"
    bpy.context.view_layer.update()
    bakes.cache.mark_dirty()              # what sync does when the rig's update reaches the session
    view.update(st, 0.1)
    assert not st.active and st.last_error and f"'{other.name}'" in st.last_error, st.last_error


# ------------------------------------------------------------------------------------------------
# lazy palette textures
# ------------------------------------------------------------------------------------------------

def _handles(session):
    from stylized_renderer.engine.gpu.palette_textures import palette_handle

    handles = []
    for g in session.runtime.palette_set.palette_groups:
        h = palette_handle(g.palette)
        assert h is not None, "a palette of the session has no GPU buffer"
        handles.append(h)
    return handles


def test_palette_textures_are_made_only_for_palettes_drawn_alone(empty_scene, monkeypatch):
    scene = empty_scene
    scene.render.resolution_x, scene.render.resolution_y = 320, 160
    character_crowd(scene, 4)
    # grouped draws from the batched update's texel rows as they are
    from stylized_renderer.engine.gpu.passes import pipeline

    made = []
    real = pipeline.FrameInstances

    def with_texel_rows(items, enabled=True, palette_rows=None, **kwargs):
        # the session hands the pipeline the batched update's rows (FrameData.palette_rows)
        assert palette_rows is not None
        inst = real(items, enabled, palette_rows=palette_rows, **kwargs)
        made.append((inst, palette_rows))
        return inst

    monkeypatch.setattr(pipeline, "FrameInstances", with_texel_rows)
    grouped = render_scene(scene).copy()
    stats = last_pipeline_stats()
    session = render_engine.kept_final_session()
    assert session is not None and session.runtime is not None
    handles = _handles(session)
    assert len(handles) >= 4 and all(h.rows is not None for h in handles)
    assert stats["instanced_draws"] > 0
    assert all(h.texture is None for h in handles)                 # no texture per palette
    inst, (rows, first) = next((i, r) for i, r in made if i.palette_shared is not None)
    assert inst.palette_shared is rows                             # not a concatenation
    for g, h in zip(session.runtime.palette_set.palette_groups, handles):
        off = first[id(g.palette)]                                 # each palette's rows at its first row
        assert np.shares_memory(h.rows, rows) and np.array_equal(rows[16 * off:16 * off + h.rows.size], h.rows)
    # every item drawn alone: each palette makes its texture once, the same pixels
    monkeypatch.setattr(pipeline, "FrameInstances", real)
    monkeypatch.setattr(instancing, "ENABLED", False)
    single = render_scene(scene).copy()
    assert last_pipeline_stats()["instanced_draws"] == 0
    handles = _handles(render_engine.kept_final_session())
    assert all(h.texture is not None for h in handles)
    assert np.abs(grouped - single).max() <= 1e-6
    # and the grouped path without the rows (the drawn palettes concatenated) gives them too
    monkeypatch.setattr(instancing, "ENABLED", True)
    monkeypatch.setattr(pipeline, "FrameInstances",
                        lambda items, enabled=True, palette_rows=None, **kw: real(items, enabled, **kw))
    concat = render_scene(scene).copy()
    assert np.abs(concat - single).max() <= 1e-6


def test_palette_texture_follows_the_upload(empty_scene):
    """The lazily made texture holds the last uploaded rows, and an upload drops the old one."""
    from stylized_renderer.engine.gpu import util as gpu_util
    from stylized_renderer.engine.gpu.backend import GpuBackend, palette_texture

    def task():
        be = GpuBackend()
        h = be.create_palette_buffer(2)
        pal = types.SimpleNamespace(gpu_buffer=h)
        m = np.tile(np.eye(4, dtype=np.float32), (2, 1, 1))
        m[1, 0, 3] = 2.5
        assert be.upload_palette(h, m) and h.texture is None and be.palette_uploads == 1
        tex = palette_texture(pal)
        assert tex is not None and palette_texture(pal) is tex          # made once
        got = np.array(tex.read().to_list(), np.float32).reshape(2, 4, 4)
        assert np.array_equal(got.transpose(0, 2, 1), m)
        m2 = m.copy()
        m2[0, 1, 3] = -1.0
        assert be.upload_palette(h, m2) and h.texture is None
        tex = palette_texture(pal)
        assert tex is not None
        got = np.array(tex.read().to_list(), np.float32).reshape(2, 4, 4)
        assert np.array_equal(got.transpose(0, 2, 1), m2)
        be.release_palette(h)
        assert palette_texture(pal) is None

    gpu_util.run_in_gpu_context(task)


@pytest.mark.parametrize("count", [2, 6])      # the per-object path and the crowd (> 4 meshes) path
def test_linked_library_keys_are_not_mixed_with_local_ones(empty_scene, tmp_path, count):
    """A character linked from a library has a shape-key datablock named "Key" like a local mesh's:
    the reader must read each one's own values (keyed by name and library), every frame."""
    from stylized_renderer.engine.blender import importer
    from stylized_renderer.engine.blender.sources.timeline import TimelineReader
    from stylized_renderer.engine.core.runtime.backend import CpuBackend
    from stylized_renderer.engine.core.world.scene_runtime import SceneRuntime

    def keyed_plane(name, value):
        me = bpy.data.meshes.new(name)
        me.from_pydata([(0, 0, 0), (1, 0, 0), (0, 1, 0)], [], [(0, 1, 2)])
        ob = bpy.data.objects.new(name, me)
        bpy.context.scene.collection.objects.link(ob)
        ob.shape_key_add(name="Basis")
        kb = ob.shape_key_add(name="Up")
        kb.data[0].co = (0, 0, 1)
        kb.value = value
        return ob

    lib_path = tmp_path / "lib.blend"
    lib = keyed_plane("LibPlane", 0.8)
    assert lib.data.shape_keys.name == "Key"
    bpy.data.libraries.write(str(lib_path), {lib})
    me = lib.data
    bpy.data.objects.remove(lib)
    bpy.data.meshes.remove(me)               # its Key goes with it: the local one is "Key" again
    locals_ = [keyed_plane(f"Local{i}", 0.1 * (i + 1)) for i in range(count - 1)]
    assert locals_[0].data.shape_keys.name == "Key"
    with bpy.data.libraries.load(str(lib_path), link=True) as (src, dst):
        dst.objects = ["LibPlane"]
    linked = cast(Any, dst.objects[0])       # the load replaced the names by the linked objects
    bpy.context.scene.collection.objects.link(linked)
    assert linked.library is not None and linked.data.shape_keys.name == "Key"
    asset = importer.import_scene(bpy.context.evaluated_depsgraph_get())
    rt = SceneRuntime(asset, CpuBackend())
    assert rt.initialize(), rt.last_error
    reader = TimelineReader(asset, rt)
    for _ in range(2):                       # the first read and the cached one
        w = reader.read_morph_weights(None)
        got = {asset.nodes[n].object_name: float(v[rt.morph_key_names(n).index("Up")]) for n, v in w.items()}
        assert got["LibPlane"] == pytest.approx(0.8)
        for i, ob in enumerate(locals_):
            assert got[ob.name] == pytest.approx(0.1 * (i + 1)), got
