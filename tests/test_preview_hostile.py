"""The viewport preview and the expressions under hostile use (issue 27, items 8, 9, 10, 12 and
"an F12 while the preview plays").

Everything goes through the path a user takes: the transport and expression operators through
``bpy.ops``, the viewport through Blender's own depsgraph updates (``StylizedSession.sync``, as
``view_update`` does) and ``render_engine.draw_view`` (as ``view_draw`` does), F12 through
``bpy.ops.render.render``.  The session's frame clock (``time.perf_counter`` in
engine/blender/session.py) is advanced by hand so that "wait 2 s" is exact.
"""
from __future__ import annotations

import math
import types
from typing import Any

import bpy
import numpy as np
import pytest

import conftest as C
from stylized_renderer.engine.features.preview import control as preview
from stylized_renderer.engine.features.preview.state import compatible_clips_for
from stylized_renderer.engine.gpu import util as gpu_util
from tools import deform_checker


class Viewport:
    """A Rendered 3D viewport: ``update()`` hands the session Blender's depsgraph updates since
    the last call (view_update), ``draw(wait)`` draws a frame ``wait`` seconds after the last
    one (view_draw -> draw_view)."""

    W, H = 64, 48

    def __init__(self, clock):
        from stylized_renderer.engine.blender import session as session_mod

        self.clock = clock
        self.session = session_mod.StylizedSession(viewport=True, addon=C.addon())   # as view_update makes it
        self.updates = []
        self.synced = False
        bpy.app.handlers.depsgraph_update_post.append(self._handler)

    def _handler(self, scene, depsgraph):
        if scene.name.startswith(gpu_util.TASK_SCENE_NAME):
            return
        for u in depsgraph.updates:
            if getattr(u.id, "name", "").startswith(gpu_util.TASK_SCENE_NAME):
                continue
            self.updates.append(types.SimpleNamespace(
                id=u.id.original if hasattr(u.id, "original") else u.id,
                is_updated_geometry=u.is_updated_geometry, is_updated_transform=u.is_updated_transform,
                is_updated_shading=u.is_updated_shading))

    def update(self):
        bpy.context.view_layer.update()
        dg = bpy.context.evaluated_depsgraph_get()
        if not self.synced:
            self.session.sync(dg)
            self.synced = True
        else:
            self.session.sync(dg, self.updates)
        self.updates = []

    def draw(self, wait: float = 0.0):
        from stylized_renderer.engine.blender.render_engine import draw_view
        from stylized_renderer.engine.gpu.util import texture_to_numpy

        self.update()
        self.clock.now += wait
        dg = bpy.context.evaluated_depsgraph_get()
        view = C.look_at((0.0, -6.0, 1.0), target=(0.0, 0.0, 0.8))
        proj = C.perspective(math.radians(40.0), self.W / self.H)
        return gpu_util.run_in_gpu_context(
            lambda: texture_to_numpy(draw_view(self.session, dg, view, proj, False, self.W, self.H), self.W, self.H))

    def close(self):
        if self._handler in bpy.app.handlers.depsgraph_update_post:
            bpy.app.handlers.depsgraph_update_post.remove(self._handler)
        gpu_util.run_in_gpu_context(self.session.free)


@pytest.fixture
def viewport(ext, monkeypatch):
    from stylized_renderer.engine.blender import session as session_mod

    clock = C.Clock()
    monkeypatch.setattr(session_mod, "time", clock)
    preview.clear_states()
    vp = Viewport(clock)
    yield vp
    vp.close()
    addon = C.addon()
    assert addon is not None
    addon.forget_viewport_session()
    preview.stop_timer()
    preview.clear_states()


@pytest.fixture
def character(empty_scene):
    from tools import scenes

    arm, body, hat, ring = scenes.build_character(empty_scene)
    C.add_camera(empty_scene, location=(0.0, -6.0, 1.0))
    C.add_sun(empty_scene, rotation=(0.6, 0.2, 0.0))
    return types.SimpleNamespace(scene=empty_scene, arm=arm, body=body, hat=hat)


def op(name, obj, **kw):
    """Run ``bpy.ops.stylized.<name>`` with ``obj`` active (as the sidebar does)."""
    with bpy.context.temp_override(active_object=obj, object=obj):
        return getattr(bpy.ops.stylized, name)(**kw)


# ------------------------------------------------------------------------------------------------
# 8: Play / resume after an idle viewport starts from the shown time
# ------------------------------------------------------------------------------------------------

def test_play_and_resume_after_an_idle_viewport_start_from_the_shown_time(character, viewport):
    c = character
    viewport.draw()
    st = preview.get_state(c.scene)
    viewport.clock.now += 2.0                       # the viewport idles (nothing redraws)
    assert op("preview_play", c.arm) == {"FINISHED"}
    viewport.draw()                                 # the first frame after Play
    assert st.playing and st.time == pytest.approx(0.0, abs=1e-9)
    viewport.draw(0.1)
    assert st.time == pytest.approx(0.1)
    assert op("preview_pause", c.arm) == {"FINISHED"}
    viewport.draw(0.05)
    shown = st.time
    assert not st.playing and shown == pytest.approx(0.1)
    viewport.clock.now += 2.0                       # paused and idle
    assert op("preview_play", c.arm) == {"FINISHED"}
    viewport.draw()
    assert st.playing and st.time == pytest.approx(shown)
    viewport.draw(0.05)
    assert st.time == pytest.approx(shown + 0.05)


def test_scene_play_after_an_idle_viewport_starts_from_the_shown_frame(empty_scene, viewport):
    """Animation > Scene: the same rule as a clip's Play (one place: StylizedSession.update_frame):
    the seconds the viewport idled before Play or resume are not scene time."""
    from tools import check_scene

    scene = check_scene.build_nla_scene(0)
    scene.frame_set(17)
    fps = scene.render.fps / scene.render.fps_base
    viewport.draw()
    viewport.clock.now += 2.0                       # the viewport idles (nothing redraws)
    assert bpy.ops.stylized.preview_scene(action="PLAY") == {"FINISHED"}
    st = preview.get_state(scene)
    viewport.draw()                                 # the first frame after Play
    assert st.playing and st.scene_frame == pytest.approx(17.0), st.last_error
    viewport.draw(0.1)
    assert st.scene_frame == pytest.approx(17.0 + 0.1 * fps)
    assert bpy.ops.stylized.preview_scene(action="PAUSE") == {"FINISHED"}
    viewport.draw(0.05)
    shown = st.scene_frame
    viewport.clock.now += 2.0                       # paused and idle
    assert bpy.ops.stylized.preview_scene(action="PLAY") == {"FINISHED"}
    viewport.draw()
    assert st.playing and st.scene_frame == pytest.approx(shown)
    viewport.draw(0.05)
    assert st.scene_frame == pytest.approx(shown + 0.05 * fps)


# ------------------------------------------------------------------------------------------------
# F12 while the preview plays
# ------------------------------------------------------------------------------------------------

def test_f12_while_the_preview_plays_keeps_it_playing(character, viewport):
    c = character
    viewport.draw()
    assert op("preview_play", c.arm) == {"FINISHED"}
    st = preview.get_state(c.scene)
    viewport.draw()
    viewport.draw(0.1)
    assert st.active and st.playing
    C.render_scene(c.scene)                                 # F12
    assert st.active and st.playing, "F12 stopped the preview"
    viewport.draw(0.1)
    assert st.active and st.playing and st.time == pytest.approx(0.2)
    c.scene.frame_end = 2                                   # Ctrl+F12 (two frames)
    c.scene.render.filepath = str(C.ARTIFACTS / "preview_hostile_anim_")
    bpy.ops.render.render(animation=True, scene=c.scene.name)
    assert st.active and st.playing, "Ctrl+F12 stopped the preview"
    viewport.draw(0.1)
    assert st.time == pytest.approx(0.3)
    # scrubbing the timeline still hands control back
    c.scene.frame_set(c.scene.frame_current + 3)
    assert not st.active and not st.playing


# ------------------------------------------------------------------------------------------------
# 12: the rest of the scene holds the pose the user sees when a preview starts
# ------------------------------------------------------------------------------------------------

def add_wand_and_bystander(c):
    """A Wand parented to the Rig's Head bone with its own action (location X 0 -> 0.6 over
    frames 1-20), and a second armature Bystander with its own action (its bone turns 90 degrees
    over frames 1-20), skinning a Flag."""
    from tools import scenes

    wand = scenes.make_mesh("Wand", [(0, 0, 0), (0.05, 0, 0), (0, 0.05, 0.4)], [(0, 1, 2)], c.scene)
    wand.parent = c.arm
    wand.parent_type = "BONE"
    wand.parent_bone = "Head"
    act, cb = scenes.new_action("WandSwing", wand)
    scenes.add_curve(cb, "location", 0, [1.0, 20.0], [0.0, 0.6])
    by = scenes.make_armature("Bystander", [("Pole", None, (0, 0, 0), (0, 0, 1.0))], c.scene,
                              location=(-1.5, 0.0, 0.0))
    flag = scenes.make_mesh("Flag", [(0, 0, 0), (0.3, 0, 0), (0, 0, 1.0), (0.3, 0, 1.0)], [(0, 1, 3, 2)], c.scene)
    flag.location = (-1.5, 0.0, 0.0)
    scenes.skin_to(flag, by, {"Pole": (np.arange(4), np.ones(4))})
    flag.location = (0.0, 0.0, 0.0)
    act2, cb2 = scenes.new_action("PoleTurn", by)
    by.pose.bones["Pole"].rotation_mode = "XYZ"
    scenes.add_curve(cb2, 'pose.bones["Pole"].rotation_euler', 1, [1.0, 20.0], [0.0, math.pi / 2])
    return wand, by


def blender_bone_world(obj, bone):
    dg = bpy.context.evaluated_depsgraph_get()
    ev = obj.evaluated_get(dg)
    return np.array(ev.matrix_world) @ np.array(ev.pose.bones[bone].matrix)


def our_world(session, obj_name, bone=None):
    asset = session.scene_asset
    node = asset.node_index(obj_name, bone)
    assert node >= 0, (obj_name, bone)
    w = session.runtime.pose.world_matrices
    assert w is not None
    return np.array(w[node])


def test_the_rest_of_the_scene_holds_the_pose_shown_when_a_preview_starts(character, viewport):
    c = character
    wand, by = add_wand_and_bystander(c)
    c.scene.frame_set(1)
    viewport.draw()                       # imported at frame 1 (the runtime's bind pose)
    c.scene.frame_set(12)
    viewport.draw()                       # timeline mode: the user sees frame 12
    shown_pole = blender_bone_world(by, "Pole")
    assert np.abs(our_world(viewport.session, "Bystander", "Pole") - shown_pole).max() < 1e-5
    dg = bpy.context.evaluated_depsgraph_get()
    shown_wand_local = (np.linalg.inv(blender_bone_world(c.arm, "Head"))
                        @ np.array(wand.evaluated_get(dg).matrix_world))
    # the user previews the Rig's clip, at a time and paused
    assert op("preview_seek", c.arm, time=0.1) == {"FINISHED"}
    viewport.draw()
    st = preview.get_state(c.scene)
    assert st.active and st.last_error is None
    s = viewport.session
    # Bystander (no clip plays on it) holds the pose of frame 12, as Blender shows it
    assert np.abs(our_world(s, "Bystander", "Pole") - shown_pole).max() < 1e-5, "Bystander jumped to its import pose"
    # the Wand follows the previewed Head bone with the local transform of frame 12
    wand_local = np.linalg.inv(our_world(s, "Rig", "Head")) @ our_world(s, "Wand")
    assert np.abs(wand_local - shown_wand_local).max() < 1e-5, "the Wand jumped to its import offset"
    # the clip still plays on the Rig: its Head is not at frame 12's pose
    assert np.abs(our_world(s, "Rig", "Head") - blender_bone_world(c.arm, "Head")).max() > 1e-3
    # Stop (the Rig's bind pose) keeps holding the rest
    assert op("preview_stop", c.arm) == {"FINISHED"}
    viewport.draw()
    assert np.abs(our_world(s, "Bystander", "Pole") - shown_pole).max() < 1e-5


def test_check_deform_both_modes_pass_with_a_bone_parented_animated_mesh(character, capsys):
    """tools/check_deform.py --mode both: the player check after the timeline frames compares
    the clip's objects with Blender evaluating that clip alone, while every other object holds
    the pose Blender shows (issue 27: 'player error 4.0' where --mode player alone passed)."""

    c = character
    add_wand_and_bystander(c)
    c.scene.frame_start, c.scene.frame_end = 1, 20
    c.scene.frame_set(1)
    rc, out, f = C.run_deform_check(capsys, "1-20:6", "both", player_step=6)
    assert "player   Wand" in out and "player   Flag" in out, out
    assert rc == 0 and float(f["max_rel_error"]) <= deform_checker.TOLERANCE, out


# ------------------------------------------------------------------------------------------------
# 9: the playing action or armature renamed or deleted
# ------------------------------------------------------------------------------------------------

def animation_panel(c):
    from stylized_renderer.panels import preview_panel
    from support.panels import Ctx, draw_panel

    lay = draw_panel(preview_panel.STYLIZED_PT_viewport_animation, Ctx(c.scene, c.arm))
    return lay.labels()


def playing(c, viewport):
    viewport.draw()
    assert op("preview_play", c.arm) == {"FINISHED"}
    viewport.draw()
    viewport.draw(0.2)
    st = preview.get_state(c.scene)
    assert st.playing and st.time == pytest.approx(0.2)
    return st


def second_clip(c):
    """Another clip of the Rig (Head nods), so that a lost clip is not hidden by the only one."""
    from tools import scenes

    act, cb = scenes.new_action("CharacterNod", c.arm, assign=False)
    scenes.add_curve(cb, 'pose.bones["Head"].location', 0, [1.0, 40.0], [0.0, 0.3])
    act.use_fake_user = True
    return act


def test_renaming_the_playing_action_follows_it(character, viewport):
    c = character
    second_clip(c)
    st = playing(c, viewport)
    duration = st.duration
    bpy.data.actions["CharacterWave"].name = "Greeting"
    viewport.draw(0.1)
    viewport.draw(0.1)
    assert st.clip_name == "Greeting" and st.playing and st.active and st.last_error is None
    assert st.time == pytest.approx(0.4) and st.duration == pytest.approx(duration)
    rt = viewport.session.runtime
    assert rt.player.clip is not None and rt.player.clip.name == "Greeting"
    with bpy.context.temp_override(active_object=c.arm, object=c.arm):
        assert c.scene.stylized_preview.clip == "Greeting"          # the panel's clip menu
    labels = animation_panel(c)
    assert "Mode: Preview playing" in labels, labels
    assert not any("CharacterWave" in l for l in labels), labels


def test_deleting_the_playing_action_stops_with_a_message(character, viewport):
    c = character
    second_clip(c)
    st = playing(c, viewport)
    bpy.data.actions.remove(bpy.data.actions["CharacterWave"])
    viewport.draw(0.1)
    t = st.time
    viewport.draw(0.1)
    assert not st.playing and st.time == t
    assert st.last_error == "Action 'CharacterWave' was deleted: the preview stopped", st.last_error
    assert st.clip_name != "CharacterWave" and st.duration == pytest.approx(
        {c.name: c for c in compatible_clips_for("Rig")}[st.clip_name].duration_seconds)
    labels = animation_panel(c)
    assert st.last_error in labels and not any(l.startswith("Mode: Preview playing") for l in labels), labels
    # the viewport shows what Blender shows (timeline mode), the runtime did not fail
    assert viewport.session.update_error is None


def test_renaming_the_previewed_armature_follows_it(character, viewport):
    c = character
    st = playing(c, viewport)
    c.arm.name = "Hero"
    viewport.draw(0.1)
    viewport.draw(0.1)
    assert st.armature == "Hero" and st.playing and st.time == pytest.approx(0.4), st
    assert st.clip_name == "CharacterWave" and st.last_error is None
    labels = animation_panel(c)
    assert "Hero" in labels and not any("'Rig'" in l for l in labels), labels
    assert op("preview_pause", c.arm) == {"FINISHED"}
    viewport.draw(0.1)
    assert not st.playing and st.time == pytest.approx(0.4)


def test_renaming_the_scene_keeps_its_preview_playing(character, viewport):
    """Issue 38 item 4: preview states are kept per scene by its session id, not its name: a
    renamed scene plays on (before, the viewport found no state under the new name and showed
    the timeline, and the panel's Pause found nothing to pause)."""
    c = character
    st = playing(c, viewport)
    c.scene.name = "Renamed"
    viewport.draw(0.1)
    viewport.draw(0.1)
    assert preview.peek_state(c.scene) is st and st.playing and st.time == pytest.approx(0.4), st
    assert op("preview_pause", c.arm) == {"FINISHED"}
    viewport.draw(0.1)
    assert not st.playing and st.time == pytest.approx(0.4)


def test_deleting_the_previewed_armature_stops_with_a_message(character, viewport):
    c = character
    st = playing(c, viewport)
    bpy.data.objects.remove(c.arm)
    viewport.draw(0.1)
    viewport.draw(0.1)
    assert not st.playing and not st.active
    assert st.last_error == "Armature 'Rig' was deleted: the preview stopped", st.last_error
    assert viewport.session.update_error is None and viewport.session.imports.import_error is None


# ------------------------------------------------------------------------------------------------
# 10: expressions of a character linked from another .blend
# ------------------------------------------------------------------------------------------------

def link_objects(path, names=None) -> dict[str, Any]:
    """Link objects of ``path`` into the current scene (File > Link, objects directly)."""
    with bpy.data.libraries.load(str(path), link=True) as (src, dst):
        dst.objects = list(src.objects) if names is None else list(names)
    for ob in dst.objects:
        if ob is not None:
            bpy.context.scene.collection.objects.link(ob)
    return {ob.name: ob for ob in dst.objects if ob is not None}


def save_and_reload(path):
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    bpy.ops.wm.open_mainfile(filepath=str(path))


def test_expressions_of_a_linked_character_are_refused_with_a_message(character, tmp_path):
    from stylized_renderer.engine.features.expressions import character as ex
    from stylized_renderer.panels import expressions_panel
    from support.panels import Ctx, add_shape_keys, draw_panel

    c = character
    add_shape_keys(c.body, [("Smile", 0.0, 1.0), ("Blink", 0.0, 1.0)])
    add_shape_keys(c.hat, [("Smile", 0.0, 1.0)])
    coll = bpy.data.collections.new("Character")
    c.scene.collection.children.link(coll)
    for ob in list(c.scene.collection.objects):
        if ob.name in ("Rig", "Body", "Hat", "Ring"):
            coll.objects.link(ob)
            c.scene.collection.objects.unlink(ob)
    lib = tmp_path / "character_lib.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(lib))
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.context.scene.render.engine = "STYLIZED"
    obs = link_objects(lib, ["Rig", "Body", "Hat"])
    scene = bpy.context.scene
    smile = obs["Body"].data.shape_keys.key_blocks["Smile"]
    for name, kw in (("expression_set", dict(name="Smile", value=0.7)),
                     ("expression_keyframe", dict(name="Smile")),
                     ("expression_reset_all", {})):
        with pytest.raises(RuntimeError, match="Nothing changed: The shape keys of 'Body' are linked from "
                                               "'character_lib.blend'"):
            getattr(bpy.ops.stylized, name)(character="Rig", **kw)
    assert smile.value == 0.0                                   # nothing written, nothing claimed
    want = ("The shape keys of 'Body' are linked from 'character_lib.blend': an edit would be lost when the file "
            "is saved; to edit them, override its mesh data too (Outliner: right-click it > Library Override > "
            "Make > Selected & Content)")
    assert ex.linked_problem(obs["Rig"], [obs["Body"], obs["Hat"]], vrm=False) == want
    # the sliders of the Expressions panel write nothing either, and the panel says why
    assert ex.sync_items(scene, obs["Rig"])
    items = {it.name: it for it in scene.stylized_expressions.items}
    items["Smile"].value = 0.4
    assert smile.value == 0.0 and items["Smile"].value == 0.0
    labels = draw_panel(expressions_panel.STYLIZED_PT_viewport_expressions, Ctx(scene, obs["Rig"])).labels()
    assert "The shape keys of 'Body' are linked from 'character_lib.blend': an edit would be lost when the file " \
           "is saved" in labels, labels
    # what the user sees is what the file keeps
    save_and_reload(tmp_path / "shot.blend")
    assert bpy.data.objects["Body"].data.shape_keys.key_blocks["Smile"].value == 0.0
    # what the message advises works: a library override of the character and of its mesh data
    # takes the edit and the file keeps it
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    with bpy.data.libraries.load(str(lib), link=True) as (src, dst):
        dst.collections = ["Character"]
    inst = bpy.data.objects.new("CharacterInstance", None)
    inst.instance_type, inst.instance_collection = "COLLECTION", dst.collections[0]
    scene.collection.objects.link(inst)
    linked: Any = dst.collections[0]     # the loader put the linked collection in place of its name
    linked.override_hierarchy_create(scene, bpy.context.view_layer, reference=inst, do_fully_editable=True)
    bpy.data.objects.remove(inst)
    with pytest.raises(RuntimeError, match="The shape keys of 'Body' are linked"):
        bpy.ops.stylized.expression_set(character="Rig", name="Smile", value=0.7)
    for name in ("Body", "Hat"):
        bpy.data.objects[name].data.override_create(remap_local_usages=True)
    assert bpy.ops.stylized.expression_set(character="Rig", name="Smile", value=0.7) == {"FINISHED"}
    save_and_reload(tmp_path / "override.blend")
    assert bpy.data.objects["Body"].data.shape_keys.key_blocks["Smile"].value == pytest.approx(0.7)


GODETTE = C.TESTDATA / "vrm" / "Godette_vrm0.blend"


@pytest.mark.skipif(not GODETTE.exists(), reason="../shared/testdata/vrm/Godette_vrm0.blend is absent")
def test_vrm_expressions_of_a_linked_avatar_are_refused_with_a_message(ext, tmp_path):
    from stylized_renderer.engine.features.expressions import character as ex
    from stylized_renderer.engine.features.vrm import expressions as vx

    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.context.scene.render.engine = "STYLIZED"
    obs = link_objects(GODETTE)
    arm = obs["Armature"]
    es = vx.expression_set_of(arm)
    assert es is not None
    joy = es.by_name("Joy")
    assert joy is not None
    before = vx.get_preview(arm, joy)
    with bpy.context.temp_override(active_object=arm, object=arm):
        with pytest.raises(RuntimeError, match="Nothing changed: The VRM expressions of 'Armature' are linked from "
                                               "'Godette_vrm0.blend'"):
            bpy.ops.stylized.vrm_expression_set(name="Joy", value=1.0)
        with pytest.raises(RuntimeError, match="are linked from 'Godette_vrm0.blend'"):
            bpy.ops.stylized.vrm_expression_keyframe(name="Joy")
    assert vx.get_preview(arm, joy) == before
    scene = bpy.context.scene
    assert ex.sync_items(scene, arm)
    item = {it.name: it for it in scene.stylized_expressions.vrm_items}["Joy"]
    item.value = 1.0
    assert vx.get_preview(arm, joy) == before
    save_and_reload(tmp_path / "shot.blend")
    assert vx.get_preview(bpy.data.objects["Armature"], joy) == before
