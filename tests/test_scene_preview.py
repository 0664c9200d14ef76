"""Scene playback's animation (engine/blender/sources/nla.py + engine/core/animation/nla.py) against Blender's
timeline evaluation (scene.frame_set with subframes): every strip option and blend type on
generated characters, shape-key NLA, object actions, the test data files; negative controls (a
wrong blend type, a wrong repeat mapping, a missing extrapolation) must fail the check."""
from __future__ import annotations

import pathlib

import bpy
import numpy as np
import pytest

from stylized_renderer.engine.blender.sources.nla import SceneAnimation
from stylized_renderer.engine.core.animation import nla
from tools import check_scene

TESTDATA = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "testdata"


@pytest.fixture
def nla_scene(empty_scene):
    scene = check_scene.build_nla_scene(0)
    yield scene
    bpy.ops.wm.read_factory_settings(use_empty=True)


def frames(scene):
    return check_scene.scene_frames(scene, (0.0, 0.35, 0.5), step=2)


def test_generated_nla_scene_matches_the_timeline(nla_scene):
    anim = SceneAnimation(nla_scene)
    # five characters, a rig's bones, a mesh's object action and its shape keys' NLA
    assert len(anim.ids) == 8
    used = {s.blend for a in anim.ids for t in a.stack.tracks for s in t.strips}
    assert used == set(nla.BLEND_TYPES.values())
    err, lines = check_scene.compare(nla_scene, anim, frames(nla_scene))
    assert err <= check_scene.TOL, "\n".join(lines)


def _every_strip(anim):
    return [s for a in anim.ids for t in a.stack.tracks for s in t.strips]


def wrong_blend(anim):
    for s in _every_strip(anim):
        s.blend = (s.blend + 1) % 5


def wrong_repeat(anim):
    for s in _every_strip(anim):
        if s.repeat != 1.0:      # played on past the action's end instead of repeating
            s.action_end = s.action_start + (s.end - s.start) / (abs(s.scale) or 1.0)
            s.repeat = 1.0


def no_extrapolation(anim):
    for s in _every_strip(anim):
        s.extend = nla.NOTHING
    for a in anim.ids:
        a.stack.action_extend = nla.NOTHING


@pytest.mark.parametrize("mutate", [wrong_blend, wrong_repeat, no_extrapolation])
def test_negative_controls_fail_the_check(nla_scene, mutate):
    anim = SceneAnimation(nla_scene)
    err, lines = check_scene.compare(nla_scene, anim, frames(nla_scene), mutate=mutate)
    assert err > 100 * check_scene.TOL, "\n".join(lines)


def test_check_deform_mode_scene_on_the_nla_test_file(capsys):
    path = TESTDATA / "03_all_animations.blend"
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared/testdata is not in a user's clone)")
    from tools import check_deform

    rc = check_deform.main([str(path), "--mode", "scene"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "scene: ids=3 channels=9" in out


def test_scene_preview_draws_what_the_timeline_draws(nla_scene, capsys):
    """The viewport path: a Scene-mode preview state seeked to each time, the session's
    update_frame (no depsgraph read by the playback), every drawn vertex read back and compared
    with Blender's evaluated mesh after frame_set at the same time."""
    rc = check_scene.run_deform(nla_scene, check_scene.scene_frames(nla_scene, (0.0, 0.5), step=4))
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "scene-deform: objects=7" in out
    for name in ("Char0_0", "RigSkin_0", "Face"):
        assert f"scene {name}: verts=" in out and "path=gpu" in out.split(f"scene {name}:")[1].split("\n")[0]


def test_a_scene_preview_a_few_frames_late_fails_the_deform_check(nla_scene, monkeypatch, capsys):
    from stylized_renderer.engine.blender.sources import nla as nla_source

    orig = nla_source.SceneAnimation.evaluate_all
    monkeypatch.setattr(nla_source.SceneAnimation, "evaluate_all", lambda self, t: orig(self, t - 2.0))
    rc = check_scene.run_deform(nla_scene, check_scene.scene_frames(nla_scene, (0.0,), step=6))
    assert rc == 1, capsys.readouterr().out


def test_scene_operator_and_panel_play_from_the_current_frame(nla_scene, capsys):
    """Animation > Scene: Play starts at the current frame and the session draws the scene there
    (as the timeline shows it), the clock advances at the scene's rate and wraps at the end,
    Pause holds, Stop hands back to the timeline; the sub-panel offers the three actions."""
    from stylized_renderer.engine.features.preview import control as preview
    from stylized_renderer.engine.features.preview import scene as preview_scene
    from stylized_renderer.panels import preview_panel
    from support.panels import Ctx, draw_panel

    preview.clear_states()
    try:
        nla_scene.frame_set(17)
        assert bpy.ops.stylized.preview_scene(action="PLAY") == {"FINISHED"}
        st = preview.get_state(nla_scene)
        assert st.active and st.playing and st.scene_mode and st.scene_frame == 17.0
        assert preview.timers_active()
        lay = draw_panel(preview_panel.STYLIZED_PT_viewport_scene, Ctx(nla_scene, None))
        assert lay.operators() == ["stylized.preview_scene"] * 3
        assert "Scene playing at frame 17.00" in lay.labels()
        # the session's frame with the operator's state: what Blender shows at frame 17
        assert bpy.ops.stylized.preview_scene(action="PAUSE") == {"FINISHED"}
        rc = check_scene.run_deform(nla_scene, [(17, 0.0)], state=st)
        assert rc == 0, capsys.readouterr().out
        assert st.scene_frame == 17.0 and not st.playing and st.active and st.scene_mode
        # a few frames later in the scene: the drawn pose is not the timeline's any more (the
        # comparison above was the playback's, not Blender's read back)
        st.push("scene_seek", 25.0)
        assert check_scene.run_deform(nla_scene, [(17, 0.0)], state=st) == 1
        # the clock: the scene's rate; past the last frame it wraps to the first (loop) or stops
        fps, start, end = preview_scene.scene_clock(nla_scene)
        assert preview_scene.advance(17.0, 0.5, fps, start, end, True) == (17.0 + 0.5 * fps, True)
        assert preview_scene.advance(end - 1.0, 3.0 / fps, fps, start, end, True) == (start + 2.0, True)
        assert preview_scene.advance(end - 1.0, 3.0 / fps, fps, start, end, False) == (end, False)
        assert bpy.ops.stylized.preview_scene(action="STOP") == {"FINISHED"}
        assert not st.active and not st.scene_mode
        assert bpy.ops.stylized.preview_scene(action="PAUSE") == {"CANCELLED"}
    finally:
        preview.stop_timer()
        preview.clear_states()


def test_a_scene_needing_blenders_evaluation_is_refused_with_the_reason(nla_scene, capsys):
    """An object constraint (what a bake of an armature's bones does not cover) would be played
    wrong: Play refuses, naming the object and the constraint; a session asked to play it anyway
    stays on the timeline and says why."""
    from stylized_renderer.engine.features.preview import control as preview

    ob = bpy.data.objects["Char1_0"]
    con = ob.constraints.new("COPY_LOCATION")
    con.target = bpy.data.objects["Char2_0"]
    preview.clear_states()
    try:
        with pytest.raises(RuntimeError, match="object 'Char1_0' is driven by object constraint 'Copy Location'"):
            bpy.ops.stylized.preview_scene(action="PLAY")      # reported as an error, cancelled
        st = preview.get_state(nla_scene)
        assert not st.active
        assert "(COPY_LOCATION)" in (st.last_error or "")
        rc = check_scene.run_deform(nla_scene, [(5, 0.0)])
        out = capsys.readouterr().out
        assert rc == 1 and "refused: object 'Char1_0'" in out, out
    finally:
        preview.clear_states()


def test_animated_armature_data_is_refused_not_dropped(nla_scene):
    """Armature data animated with anything but VRM expression previews (those play:
    test_scene_vrm.py): Scene playback does not evaluate it, so Play says so instead of playing
    without it."""
    from stylized_renderer.engine.features.preview import control as preview

    rig = bpy.data.objects["Rig_0"]
    rig.data["expression_preview"] = 0.0
    rig.data.keyframe_insert('["expression_preview"]', frame=1)
    preview.clear_states()
    try:
        with pytest.raises(RuntimeError, match="armature 'Rig_0': its data 'Rig_0' animates \\[\"expression_preview\"\\]"):
            bpy.ops.stylized.preview_scene(action="PLAY")
        assert not preview.get_state(nla_scene).active
    finally:
        preview.clear_states()


def test_an_nla_edit_while_the_scene_plays_is_followed(nla_scene):
    """A strip edited while Scene playback runs (Blender's depsgraph update reaches the session's
    sync, as view_update hands it) is played at the next frame: Blender's timeline and the
    preview agree after the edit.  Selecting an object (a Scene update) does not re-read."""
    from stylized_renderer.engine.blender.session import StylizedSession
    from stylized_renderer.engine.features.preview import control as preview
    from stylized_renderer.engine.gpu import util as gpu_util

    s = StylizedSession()
    st = preview.PreviewState(active=True, scene_mode=True)

    def frame(t):
        def task():
            dg = bpy.context.evaluated_depsgraph_get()
            s.ensure_gpu()
            s.ensure_runtime(dg)
            st.push("scene_seek", t)
            st.push("pause")
            assert s.update_frame(dg, st) and st.active, st.last_error
            assert s.scene_asset is not None and s.runtime is not None
            node = next(i for i, nd in enumerate(s.scene_asset.nodes) if nd.object_name == "Char1_0")
            return np.array(s.runtime.pose.world_matrix(node)), s.preview.scene_playback

        return gpu_util.run_in_gpu_context(task)

    def sync(scene, depsgraph):
        s.sync(depsgraph, list(depsgraph.updates))

    bpy.context.view_layer.update()
    bpy.app.handlers.depsgraph_update_post.append(sync)
    try:
        frame(17.0)
        bpy.context.view_layer.update()                 # the new scene's first updates are heard
        before, pb = frame(17.0)
        bpy.data.objects["Char2_0"].select_set(True)
        bpy.context.view_layer.update()
        rt = s.runtime
        pb_sel = frame(17.0)[1]
        assert pb_sel is pb and rt is s.runtime          # a selection: no re-read
        strip = bpy.data.objects["Char1_0"].animation_data.nla_tracks[0].strips[0]
        strip.blend_type = "ADD"
        bpy.context.view_layer.update()                 # the edit's depsgraph update
        after, pb2 = frame(17.0)
        assert pb2 is not pb
        with preview.timeline_handback_suspended():
            nla_scene.frame_set(17)
        ref = np.array(bpy.data.objects["Char1_0"].matrix_world)
        assert np.abs(after - ref).max() < 1e-4, (after, ref)
        assert np.abs(before - ref).max() > 1e-3          # the edit changed the pose
    finally:
        bpy.app.handlers.depsgraph_update_post.remove(sync)
        s.free()


def test_tweak_mode_is_refused_not_skipped(nla_scene):
    """A character whose NLA is in tweak mode would be left out silently: Play names it."""
    from stylized_renderer.engine.features.preview import control as preview

    ad = bpy.data.objects["Char0_0"].animation_data
    ad.nla_tracks[0].strips[0].select = True
    ad.use_tweak_mode = True
    preview.clear_states()
    try:
        assert ad.use_tweak_mode
        with pytest.raises(RuntimeError, match="object 'Char0_0': its NLA is in tweak mode"):
            bpy.ops.stylized.preview_scene(action="PLAY")
    finally:
        ad.use_tweak_mode = False
        preview.clear_states()


def test_a_curve_the_preview_cannot_evaluate_fails_the_check_not_filled_from_blender(nla_scene, capsys):
    """A Noise modifier is not evaluated by the preview (it plays the curve sampled through
    FCurve.evaluate): the check must not compare Blender with itself at integer frames; it names
    the curve and fails, in the channel check and in the drawn-vertex check."""
    act = bpy.data.actions["FaceMove"]
    fc = next(c for c in check_scene._fcurves(act) if c.data_path == "location" and c.array_index == 2)
    fc.modifiers.new("NOISE").strength = 0.5
    ints = [(f, 0.0) for f in range(1, 30, 4)]     # within the action: the old fill was exact there
    rc = check_scene.run(nla_scene, ints)
    out = capsys.readouterr().out
    assert rc == 1, out
    assert "unsupported: action 'FaceMove': curve location[2]: its Noise modifier" in out, out
    rc = check_scene.run_deform(nla_scene, ints)
    out = capsys.readouterr().out
    assert rc == 1 and "unsupported: action 'FaceMove'" in out, out
    fc.modifiers.remove(fc.modifiers[0])          # the control: the same frames pass without it
    assert check_scene.run(nla_scene, ints) == 0, capsys.readouterr().out


def test_shape_keys_holding_still_are_pushed_again_after_another_write(nla_scene):
    """Scene playback does not push a mesh's shape-key weights again while they hold still (the
    runtime's morph epoch unchanged since its last push); any other write of the runtime's morph
    weights in between (here a direct write, as a timeline frame or the preview player would do)
    makes the next Scene frame push the NLA's weights again: the same frame shows the same shape."""
    from stylized_renderer.engine.blender.session import StylizedSession
    from stylized_renderer.engine.features.preview import control as preview
    from stylized_renderer.engine.gpu import util as gpu_util

    s = StylizedSession(viewport=True)
    st = preview.PreviewState(active=True, scene_mode=True)
    got = []

    def frame(f):
        st.push("scene_seek", f)
        st.push("pause")
        dg = bpy.context.evaluated_depsgraph_get()
        s.ensure_gpu()
        s.ensure_runtime(dg)
        assert s.update_frame(dg, st), s.update_error
        rt = s.runtime
        assert rt is not None
        node = next(i for i, nd in enumerate(rt.scene.nodes) if nd.object_name == "Face" and nd.bone_name is None)
        inst = rt.mesh_instances[node]
        assert inst is not None
        prim = next(p for p in inst.primitives if p.morph_state is not None)
        assert prim.morph_state is not None
        got.append(np.array(prim.morph_state.weights))
        return rt, node

    def run():
        rt, node = frame(15.0)
        frame(15.0)                       # the same weights: nothing pushed, nothing changed
        rt.set_node_morph_weights(node, np.zeros(len(rt.morph_key_names(node))))
        frame(15.0)                       # another writer changed them: pushed again

    try:
        with preview.timeline_handback_suspended():
            gpu_util.run_in_gpu_context(run)
    finally:
        gpu_util.run_in_gpu_context(s.free)
    nla_scene.frame_set(15)
    key = bpy.data.objects["Face"].data.shape_keys
    blender = np.array([key.key_blocks[n].value for n in ("Smile", "Blink")])
    assert np.abs(got[0]).max() > 0.1 and np.allclose(got[0], blender, atol=1e-6), (got[0], blender)
    assert np.array_equal(got[1], got[0]) and np.array_equal(got[2], got[0]), got


def test_the_pick_table_gives_what_the_direct_pick_gives(nla_scene):
    """Scene playback looks the strip of every track up in a table made at set-up (one bisect a
    frame); at every strip start and end, one float either side of them and between them it
    gives exactly the strips and clamped times the direct evaluation of Blender's rules gives."""
    anim = SceneAnimation(nla_scene)
    anim.evaluate_all(0.0)
    b = anim._batch
    assert b is not None
    assert b._pick_table is not None
    edges = np.concatenate([b._start, b._end])
    times = np.concatenate([edges, np.nextafter(edges, -np.inf), np.nextafter(edges, np.inf),
                            np.arange(-10.0, 60.0, 0.25)])
    for t in sorted(set(times.tolist())):
        p1, c1 = b._pick(t)
        p2, c2 = b._pick_at(t)
        assert np.array_equal(p1, p2) and np.array_equal(c1, c2), t
