"""Viewport experience (issue 6): sidebar panels, preview transport, expressions, timings."""
from __future__ import annotations

import math

import bpy
import numpy as np
import pytest

from stylized_renderer.engine.core.world.viewer_timings import ViewerCpuTimings
from stylized_renderer.engine.features.preview import control as preview
from stylized_renderer.engine.features.preview.state import apply_commands, clips_by_name
from support.panels import Ctx, add_shape_keys, draw_panel
from tools import render_capture  # noqa: E402  (F12 results: the hook the tests install)


@pytest.fixture
def character(empty_scene, clean_preview):
    from tools import scenes

    arm, body, hat, ring = scenes.build_character(empty_scene)
    return empty_scene, arm, body, hat


def make_runtime(scene):
    from stylized_renderer.engine.blender.importer import import_scene
    from stylized_renderer.engine.core.runtime.backend import CpuBackend
    from stylized_renderer.engine.core.world.scene_runtime import SceneRuntime

    asset = import_scene(bpy.context.evaluated_depsgraph_get())
    rt = SceneRuntime(asset, CpuBackend())
    assert rt.initialize(), rt.last_error
    return asset, rt


def frames(state, rt, clips, n=1, dt=1.0 / 60.0):
    for _ in range(n):
        apply_commands(state, rt, clips, dt)


# ------------------------------------------------------------------------------------------------
# ViewerCpuTimings
# ------------------------------------------------------------------------------------------------

def test_timings_ema_rules():
    t = ViewerCpuTimings()
    assert t.fps == 0.0 and t.animation_ms == 0.0
    t.sample(animation_ms=10.0)
    assert t.animation_ms == 10.0                      # first sample as is
    t.sample(animation_ms=20.0)
    assert t.animation_ms == pytest.approx(11.0)       # avg + (s - avg) * 0.1
    t.sample(animation_ms=None, skinning_ms=float("nan"))
    assert t.animation_ms == pytest.approx(11.0) and not t.has("skinning_ms")
    t.sample(frame_interval_ms=20.0)
    assert t.fps == pytest.approx(50.0)
    t.sample(frame_interval_ms=10.0)
    assert t.frame_interval_ms == pytest.approx(19.0) and t.fps == pytest.approx(1000.0 / 19.0)
    with pytest.raises(KeyError):
        t.sample(bogus_ms=1.0)
    for f in ("frame_interval_ms", "animation_ms", "skinning_ms", "morph_ms", "update_ms",
              "extraction_ms", "pipeline_ms", "ui_ms", "render_ms"):
        assert hasattr(t, f)
    u = ViewerCpuTimings()
    assert u.mark_frame(now=100.0) is None and u.fps == 0.0
    assert u.mark_frame(now=116.0) == pytest.approx(16.0)
    assert u.frame_interval_ms == pytest.approx(16.0)
    u.sample(frame_interval_ms=0.0)
    assert u.fps == pytest.approx(1000.0 / 14.4)


# ------------------------------------------------------------------------------------------------
# registration and poll
# ------------------------------------------------------------------------------------------------

def test_panels_registered_in_sidebar(ext):
    from stylized_renderer.panels import expressions_panel, preview_panel
    from stylized_renderer.panels import viewport_panels as vp

    for cls in (*preview_panel.classes, *expressions_panel.classes, *vp.classes):
        assert getattr(bpy.types, cls.__name__, None) is not None
        assert cls.bl_space_type == "VIEW_3D" and cls.bl_region_type == "UI" and cls.bl_category == "Stylized"
        assert cls.poll(Ctx(None, None, "STYLIZED"))
        assert not cls.poll(Ctx(None, None, "BLENDER_EEVEE_NEXT"))
    for op in ("preview_play", "preview_pause", "preview_stop", "preview_seek", "expression_set",
               "expression_reset_all", "expression_keyframe"):
        assert hasattr(bpy.ops.stylized, op)
    for cls in (bpy.types.STYLIZED_OT_expression_set, bpy.types.STYLIZED_OT_expression_reset_all):
        assert "UNDO" in cls.bl_options


def test_every_property_has_a_tooltip(ext):
    from stylized_renderer.engine.features.expressions import properties as expr_props
    from stylized_renderer.engine.features.preview import properties as preview_props
    from stylized_renderer.operators import expressions_ops, preview_ops

    rnas = [c.bl_rna for c in (preview_props.StylizedPreviewProps, expr_props.StylizedExpressionItem,
                               expr_props.StylizedExpressionProps)]
    rnas += [getattr(bpy.ops.stylized, c.bl_idname.split(".")[1]).get_rna_type()
             for c in (*preview_ops.classes, *expressions_ops.classes)]
    for rna in rnas:
        for p in rna.properties:
            if p.identifier in ("rna_type", "name"):
                continue
            assert p.description, f"{rna.identifier}.{p.identifier} has no description"
    for name in ("stylized_preview", "stylized_expressions"):
        assert bpy.types.Scene.bl_rna.properties[name].description


# ------------------------------------------------------------------------------------------------
# Animation panel and transport
# ------------------------------------------------------------------------------------------------

def test_animation_panel_content(character):
    from stylized_renderer.panels import preview_panel

    scene, arm, body, hat = character
    lay = draw_panel(preview_panel.STYLIZED_PT_viewport_animation, Ctx(scene, body))   # the mesh -> its armature
    labels = lay.labels()
    assert "Rig" in labels
    assert any(l.startswith("Duration: ") and "Channels: " in l for l in labels), labels
    assert [o for o in lay.operators()] == ["stylized.preview_play", "stylized.preview_pause",
                                            "stylized.preview_stop"]
    assert {p[1] for p in lay.props()} >= {"clip", "loop", "speed", "time"}
    assert any(l.startswith("Palettes: ") and "| Joints: " in l and "| Uploads: " in l for l in labels)
    st = preview.get_state(scene)
    assert st.armature == "Rig" and st.clip_name == "CharacterWave"
    assert st.looping and not st.playing and not st.active        # still until Play is pressed
    # the clip enum lists the compatible clip with duration and channels
    with bpy.context.temp_override(active_object=arm, object=arm):
        assert scene.stylized_preview.clip == "CharacterWave"
    # no armature: a hint only
    lay = draw_panel(preview_panel.STYLIZED_PT_viewport_animation, Ctx(scene, None))
    assert lay.operators() == [] and lay.labels()


def test_transport_through_operators(character):
    scene, arm, body, hat = character
    asset, rt = make_runtime(scene)
    clips = clips_by_name(asset, arm.name)
    assert "CharacterWave" in clips
    with bpy.context.temp_override(active_object=arm, object=arm):
        st = preview.get_state(scene, arm)
        frames(st, rt, clips)                      # drains the preselection (clip, loop, speed)
        assert rt.player.clip is not None and not st.active
        frame_before = scene.frame_current

        assert bpy.ops.stylized.preview_play() == {"FINISHED"}
        assert st.playing and st.active
        assert preview.timers_active()             # redraw timer runs while playing
        states = preview._states()
        states.sidebar_redrawn_at = 0.0
        assert preview._redraw_tick() == pytest.approx(preview.REDRAW_INTERVAL)
        sidebar_at = states.sidebar_redrawn_at     # the first tick redraws the sidebars too
        assert sidebar_at > 0.0
        assert preview._redraw_tick() == pytest.approx(preview.REDRAW_INTERVAL)
        assert states.sidebar_redrawn_at == sidebar_at   # the next ones, within a second: the views only
        frames(st, rt, clips, 10)
        assert st.playing and st.time == pytest.approx(10 / 60.0)
        assert st.last_palette_uploads > 0
        assert scene.frame_current == frame_before  # the timeline does not move

        assert bpy.ops.stylized.preview_pause() == {"FINISHED"}
        frames(st, rt, clips)
        t_paused = st.time
        samples = rt.player.sample_count
        for _ in range(5):
            frames(st, rt, clips)
            assert st.time == t_paused
            assert rt.stats.palette_uploads == 0 and st.last_palette_uploads == 0
        assert rt.player.sample_count == samples
        assert preview._redraw_tick() is None       # nothing plays: the timer stops itself

        # seek while paused resamples once
        assert bpy.ops.stylized.preview_seek(time=0.5) == {"FINISHED"}
        frames(st, rt, clips)
        assert st.time == pytest.approx(0.5) and not st.playing
        assert rt.player.sample_count == samples + 1 and st.last_palette_uploads > 0
        frames(st, rt, clips)
        assert st.last_palette_uploads == 0

        # the Time slider seeks too
        scene.stylized_preview.time = 0.25
        frames(st, rt, clips)
        assert st.time == pytest.approx(0.25) and rt.player.sample_count == samples + 2

        # stop: time 0 and the bind pose
        bpy.ops.stylized.preview_play()
        frames(st, rt, clips, 3)
        assert bpy.ops.stylized.preview_stop() == {"FINISHED"}
        frames(st, rt, clips)
        assert st.time == 0.0 and not st.playing
        nodes = np.arange(asset.node_count)
        t, q, s = rt.pose.local_trs(nodes)
        assert np.allclose(t, asset.bind_translations) and np.allclose(np.abs(q), np.abs(asset.bind_rotations))  # pyright: ignore[reportCallIssue, reportArgumentType]  (local_trs: arrays)

        # speed >= 0 and non-loop auto-pause at the end
        scene.stylized_preview.speed = -1.0
        assert scene.stylized_preview.speed == 0.0
        scene.stylized_preview.speed = 2.0
        scene.stylized_preview.loop = False
        bpy.ops.stylized.preview_play()
        dur = st.duration
        assert dur > 0
        frames(st, rt, clips, int(math.ceil(dur / (2.0 / 60.0))) + 2)
        assert not st.playing and st.time == pytest.approx(dur)
        assert rt.player.playback_speed == 2.0 and not rt.player.is_looping


def test_frame_change_hands_back_to_timeline(character):
    scene, arm, body, hat = character
    with bpy.context.temp_override(active_object=arm, object=arm):
        bpy.ops.stylized.preview_play()
    st = preview.get_state(scene)
    assert st.active and st.playing and preview.timers_active()
    scene.frame_set(scene.frame_current + 3)        # scrubbing / timeline playback
    assert not st.active and not st.playing
    assert ("pause",) in st.commands
    assert preview._redraw_tick() is None


def test_load_post_clears_states(character):
    scene, arm, body, hat = character
    preview.get_state(scene, arm)
    assert preview.all_states()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    assert preview.all_states() == {}


def test_play_without_clip_reports_error(empty_scene, clean_preview):
    from tools import scenes

    arm = scenes.make_armature("Lonely", [("B", None, (0, 0, 0), (0, 0, 1))], empty_scene)
    with bpy.context.temp_override(active_object=arm, object=arm):
        with pytest.raises(RuntimeError, match="no compatible clip"):
            bpy.ops.stylized.preview_play()
    assert not preview.timers_active()


# ------------------------------------------------------------------------------------------------
# Expressions
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def expr_character(character):
    scene, arm, body, hat = character
    kb_body = add_shape_keys(body, [("Smile", 0.0, 1.0), ("Blink", 0.0, 1.0), ("Wide", -1.0, 2.0)])
    kb_hat = add_shape_keys(hat, [("Smile", -0.5, 1.0), ("HatOnly", 0.0, 1.0)])
    return scene, arm, body, hat, kb_body, kb_hat


def test_expression_grouping_and_range(expr_character):
    from stylized_renderer.engine.features.expressions import character as ex

    scene, arm, body, hat, kb_body, kb_hat = expr_character
    root, meshes = ex.character_of(hat, scene)
    assert root == arm and {m.name for m in meshes} == {"Body", "Hat"}
    groups = ex.expression_groups(meshes)
    assert list(groups) == ["Smile", "Blink", "Wide", "HatOnly"]
    assert len(groups["Smile"]) == 2
    assert ex.slider_range(groups["Smile"]) == (-0.5, 1.0)
    assert ex.slider_range(groups["Wide"]) == (-1.0, 2.0)
    assert ex.names_by_mesh(meshes) == {"Body": ["Smile", "Blink", "Wide"], "Hat": ["HatOnly"]}
    # a lone mesh with shape keys is its own character
    from tools import scenes
    face, basis, _ = scenes.build_shape_key_mesh(scene)
    root, meshes = ex.character_of(face, scene)
    assert root == face and meshes == [face]


def test_expression_operators(expr_character):
    scene, arm, body, hat, kb_body, kb_hat = expr_character
    with bpy.context.temp_override(active_object=arm, object=arm):
        assert bpy.ops.stylized.expression_set(name="Smile", value=0.7) == {"FINISHED"}
        assert kb_body["Smile"].value == pytest.approx(0.7) and kb_hat["Smile"].value == pytest.approx(0.7)
        bpy.ops.stylized.expression_set(name="Smile", value=-1.0)     # clamped per key
        assert kb_body["Smile"].value == 0.0 and kb_hat["Smile"].value == pytest.approx(-0.5)
        bpy.ops.stylized.expression_set(name="Wide", value=1.5)
        assert kb_body["Wide"].value == pytest.approx(1.5)
        with pytest.raises(RuntimeError, match="No shape key named"):
            bpy.ops.stylized.expression_set(name="Nope", value=1.0)
        scene.frame_set(7)
        assert bpy.ops.stylized.expression_keyframe(name="Smile") == {"FINISHED"}
        for key in (body.data.shape_keys, hat.data.shape_keys):
            fc = [f for f in key.animation_data.action.fcurves] if hasattr(key.animation_data.action, "fcurves") \
                else None
            assert key.animation_data is not None and key.animation_data.action is not None
            if fc is not None:
                assert any(f.data_path == 'key_blocks["Smile"].value' for f in fc)
        assert bpy.ops.stylized.expression_reset_all() == {"FINISHED"}
        assert all(kb.value == 0.0 for kb in list(kb_body.values()) + list(kb_hat.values()))


def test_expression_items_and_panel(expr_character):
    from stylized_renderer.engine.features.expressions import character as ex
    from stylized_renderer.engine.features.expressions import properties as expr_props
    from stylized_renderer.panels import expressions_panel

    scene, arm, body, hat, kb_body, kb_hat = expr_character
    ctx = Ctx(scene, body)
    lay = draw_panel(expressions_panel.STYLIZED_PT_viewport_expressions, ctx)    # stale: falls back, schedules a sync
    assert ex.sync_items(scene, body)
    assert not ex.sync_items(scene, body)                          # up to date
    items = {it.name: it for it in scene.stylized_expressions.items}
    assert list(items) == ["Smile", "Blink", "Wide", "HatOnly"]
    assert (items["Smile"].slider_min, items["Smile"].slider_max) == (-0.5, 1.0)
    items["Smile"].value = 0.4                                     # the slider writes every same-named key
    assert kb_body["Smile"].value == pytest.approx(0.4) and kb_hat["Smile"].value == pytest.approx(0.4)
    assert items["Smile"].value == pytest.approx(0.4)

    lay = draw_panel(expressions_panel.STYLIZED_PT_viewport_expressions, ctx)
    labels = lay.labels()
    assert "Targets: 5 | Active: 2" in labels, labels
    assert any(l.startswith("Morph uploads: ") and "this frame" in l and "total" in l for l in labels)
    assert [a[0] for k, a, kw in lay.log if k == "panel"] == ["stylized_expr_Body", "stylized_expr_Hat"]
    sliders = [(p[0], kw.get("text")) for p in lay.props() for kw in [p[2]] if p[1] == "value"]
    assert [t for _, t in sliders] == ["Smile (x2)", "Blink", "Wide", "HatOnly"]
    assert all(isinstance(d, expr_props.StylizedExpressionItem.bl_rna.__class__) or hasattr(d, "slider_min")
               for d, _ in sliders)
    assert "stylized.expression_reset_all" in lay.operators()
    assert lay.operators().count("stylized.expression_keyframe") == 4
    scene.stylized_expressions.filter = "smi"
    lay = draw_panel(expressions_panel.STYLIZED_PT_viewport_expressions, ctx)
    assert [kw.get("text") for _, p, kw in lay.props() if p == "value"] == ["Smile (x2)"]
    # no character
    lay = draw_panel(expressions_panel.STYLIZED_PT_viewport_expressions, Ctx(scene, None))
    assert lay.props() == []


# ------------------------------------------------------------------------------------------------
# Stats panel
# ------------------------------------------------------------------------------------------------

class FakeSession:
    def __init__(self, gpu):
        self.timings = ViewerCpuTimings()
        self.timings.sample(frame_interval_ms=20.0, animation_ms=0.5, render_ms=4.0)
        self.stats = {"palette_uploads": 1, "morph_uploads": 2, "morph_uploads_total": 9,
                      "palette_count": 1, "joint_matrix_count": 4, "gpu_ms": gpu, "shader_morphs": 1,
                      "import_count": 3, "last_import_reason": "mesh 'Body' edited",
                      "fallbacks": [("Text", "font object"), ("Cube", "modifier 'Bevel'")],
                      "update_error": "SkinningPaletteSet: pose node count does not match"}


def test_stats_panel(empty_scene, monkeypatch):
    from stylized_renderer.engine.blender import render_engine
    from stylized_renderer.panels import viewport_panels as vp

    scene = empty_scene
    lay = draw_panel(vp.STYLIZED_PT_viewport_stats, Ctx(scene, None))
    assert any("No viewport frame yet" in l for l in lay.labels())

    pending = {"shadow": 0.3, "forward_opaque": 1.2, "outline_mask": None, "screen_space_outline": 0.2,
               "post_process": 0.1}
    fake = FakeSession(pending)
    monkeypatch.setattr(render_engine, "last_viewport_session", lambda: fake)
    scene.stylized.profile_gpu = False
    lay = draw_panel(vp.STYLIZED_PT_viewport_stats, Ctx(scene, None))
    labels = lay.labels()
    assert "FPS: 50.0" in labels and "Animation: 0.50 ms" in labels and "Render: 4.00 ms" in labels
    for name in ("Skinning", "Morph", "Update", "Extraction", "Pipeline"):
        assert any(l.startswith(name + ": ") for l in labels)
    assert not any(l.startswith("Shadow") for l in labels)           # GPU times only when profiling
    assert ("prop", (scene.stylized, "profile_gpu"), {}) in lay.log
    assert "Palette uploads: 1" in labels and "Morph uploads: 2" in labels
    assert "Morphs composed in the shader: 1" in labels
    assert "Scene imports: 3 (last: mesh 'Body' edited)" in labels
    assert "Text: font object" in labels and "Cube: modifier 'Bevel'" in labels
    assert "Update failed: SkinningPaletteSet: pose node count does not match" in labels
    # panel time is sampled once per viewport frame (the session's mark_frame), not accumulated
    assert not fake.timings.has("ui_ms")
    fake.timings.mark_frame()
    assert fake.timings.has("ui_ms") and 0.0 < fake.timings.ui_ms < 1000.0

    scene.stylized.profile_gpu = True
    labels = draw_panel(vp.STYLIZED_PT_viewport_stats, Ctx(scene, None)).labels()
    assert any("no timer queries" in l for l in labels)
    assert "Shadow: 0.30 ms" in labels and "Forward: 1.20 ms" in labels
    assert "Outline Mask: pending" in labels and "Pipeline GPU: pending" in labels
    fake.stats["gpu_ms"] = dict(pending, outline_mask=0.4)
    labels = draw_panel(vp.STYLIZED_PT_viewport_stats, Ctx(scene, None)).labels()
    assert "Screen-Space Outline: 0.20 ms" in labels and "Post Process: 0.10 ms" in labels
    assert "Pipeline GPU: 2.20 ms" in labels


def test_profile_gpu_measures_every_pass(empty_scene, render):
    """With Profile GPU the pipeline waits for each pass and reports real times for all five;
    without it nothing is reported (the panel says pending, never 0)."""
    from conftest import add_camera, add_mesh_object, add_sun, cube_geometry
    from stylized_renderer.panels import viewport_panels as vp

    scene = empty_scene
    add_camera(scene)
    add_sun(scene, rotation=(0.5, 0.3, 0.0))
    v, f = cube_geometry()
    add_mesh_object(scene, "Cube", v, f)
    scene.stylized.screen_space_outline = True
    render(scene)
    assert render_capture.LAST_RENDER["stats"]["gpu_ms"] == {}
    scene.stylized.profile_gpu = True
    render(scene)
    gpu = render_capture.LAST_RENDER["stats"]["gpu_ms"]
    assert set(gpu) == {"shadow", "forward", "outline_mask", "screen_space_outline", "post_process"}
    assert all(isinstance(v, float) and v >= 0.0 for v in gpu.values())
    assert all(vp.gpu_pass_ms(gpu, name) is not None for name in vp.GPU_PASSES)


def test_expression_and_mtoon_operators_are_undoable(expr_character):
    """What our operators write lives in Blender's data, so Blender's undo restores it.  Headless
    there is no window manager to push the step an UNDO operator gets in the UI, so the test
    pushes it, as the window manager does after the operator finishes."""
    from stylized_renderer.operators import expressions_ops, materials_ops

    assert "UNDO" in expressions_ops.STYLIZED_OT_expression_set.bl_options
    assert "UNDO" in materials_ops.STYLIZED_OT_convert_to_mtoon.bl_options
    scene, arm, body, hat, kb_body, kb_hat = expr_character
    kb_body["Smile"].value = 0.2
    bpy.ops.ed.undo_push(message="before")
    with bpy.context.temp_override(active_object=arm, object=arm):
        assert bpy.ops.stylized.expression_set(name="Smile", value=0.9) == {"FINISHED"}
    bpy.ops.ed.undo_push(message="Set Expression")
    assert bpy.data.objects["Body"].data.shape_keys.key_blocks["Smile"].value == pytest.approx(0.9)
    bpy.ops.ed.undo()
    keys = bpy.data.objects["Body"].data.shape_keys.key_blocks      # undo reloads the data
    assert keys["Smile"].value == pytest.approx(0.2)
    assert bpy.data.objects["Hat"].data.shape_keys.key_blocks["Smile"].value == 0.0

    body = bpy.data.objects["Body"]
    mat = body.material_slots[0].material
    name = mat.name
    assert not mat.stylized_mtoon.enabled
    bpy.ops.ed.undo_push(message="before convert")
    with bpy.context.temp_override(active_object=body, object=body, material=mat):
        assert bpy.ops.stylized.convert_to_mtoon() == {"FINISHED"}
    bpy.ops.ed.undo_push(message="Convert to MToon")
    assert bpy.data.materials[name].stylized_mtoon.enabled
    bpy.ops.ed.undo()
    assert not bpy.data.materials[name].stylized_mtoon.enabled
