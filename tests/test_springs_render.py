"""Spring bones in F12 / Ctrl+F12 without the VRM Add-on (engine/features/springs/timeline.py): frame N does
not depend on which frames the process rendered before (a farm worker rendering 25-48 alone gets
the frames of a 1-48 render), and the hair really moves (differs from Animate Spring Bones off)."""
from __future__ import annotations

import bpy
import numpy as np

import conftest as C
from support import springs_builder as B
from support.vrm_addon import ADDON_DIR, disable_vrm_addon

ART = C.ARTIFACTS / "springs"


def _scene_file(tmp_path):
    from tools import check_springs

    bpy.ops.wm.read_factory_settings(use_empty=True)
    assert check_springs.enable_addon(ADDON_DIR)
    arm = B.build_avatar(hair_chains=4, skirt_chains=6)
    B.add_bone_boxes(arm)
    B.add_shake_action(arm)
    scene = bpy.context.scene
    C.add_camera(scene, location=(0.0, -3.2, 1.2), rotation=(1.5707963, 0.0, 0.0))
    C.add_sun(scene, rotation=(0.6, 0.0, 0.4))
    scene.render.engine = "STYLIZED"
    scene.render.resolution_x = scene.render.resolution_y = 96
    scene.render.fps = 24
    scene.frame_start, scene.frame_end = 1, 48
    path = tmp_path / "springs_render.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    disable_vrm_addon()
    return path


def _render(path, first, last, out, springs=True):
    bpy.ops.wm.open_mainfile(filepath=str(path))
    scene = bpy.context.scene
    bpy.data.objects["Avatar"].stylized_spring_bones = springs
    scene.frame_start, scene.frame_end = first, last          # what --frame-start/--frame-end do
    scene.render.filepath = str(out) + "/f_"
    scene.render.image_settings.file_format = "PNG"
    bpy.ops.render.render(animation=True)
    imgs = {}
    for f in range(first, last + 1):
        img = bpy.data.images.load(str(out / f"f_{f:04d}.png"))
        imgs[f] = np.array(img.pixels[:], np.float32).reshape(96, 96, 4)
        bpy.data.images.remove(img)
    return imgs


def test_farm_chunks_equal_the_full_render_and_the_hair_moves(vrm_addon, tmp_path):
    path = _scene_file(tmp_path)
    full = _render(path, 1, 48, tmp_path / "full")
    chunk = _render(path, 25, 48, tmp_path / "chunk")
    for f in range(25, 49):
        assert np.abs(full[f] - chunk[f]).max() == 0.0, f
    rigid = _render(path, 30, 30, tmp_path / "rigid", springs=False)
    moved = (np.abs(full[30] - rigid[30])[..., :3].max(-1) > 0.05).sum()
    ART.mkdir(parents=True, exist_ok=True)
    C.save_png(np.concatenate([full[30], rigid[30]], axis=1), ART / "f12_frame30_springs_vs_rigid.png")
    assert moved > 20, moved


def _to_nla(path, tmp_path):
    """The same scene with the avatar's action moved from the active slot into an NLA strip (a rig
    animated by its NLA stack only, as the timeline shows it)."""
    bpy.ops.wm.open_mainfile(filepath=str(path))
    arm = bpy.data.objects["Avatar"]
    ad = arm.animation_data
    act = ad.action
    ad.action = None
    track = ad.nla_tracks.new()
    track.strips.new("Shake", int(act.frame_range[0]), act)
    out = tmp_path / "springs_nla.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(out))
    return out


def test_the_pre_roll_plays_the_nla_stack_the_timeline_shows(vrm_addon, tmp_path):
    """An avatar animated by an NLA strip only: F12 of frame 30 pre-rolls the strip (the frame
    equals the one of the same action played as the active action) and the hair moves (differs
    from Animate Spring Bones off).  Fails when the pre-roll samples active actions only."""
    path = _scene_file(tmp_path)
    nla = _to_nla(path, tmp_path)
    active = _render(path, 30, 30, tmp_path / "active")[30]
    stacked = _render(nla, 30, 30, tmp_path / "nla")[30]
    rigid = _render(nla, 30, 30, tmp_path / "nla_rigid", springs=False)[30]
    ART.mkdir(parents=True, exist_ok=True)
    C.save_png(np.concatenate([active, stacked, rigid], axis=1), ART / "f12_frame30_action_nla_rigid.png")
    assert np.abs(active - stacked).max() < 1e-6
    assert (np.abs(stacked - rigid)[..., :3].max(-1) > 0.05).sum() > 20


def test_spring_warnings_are_in_the_render_log(vrm_addon, tmp_path, capfd):
    """A spring joint whose bone was deleted: F12 still renders and its log line names the spring
    and the armature (the engine's report path, not only the Stats panel)."""
    from tools import check_springs

    bpy.ops.wm.read_factory_settings(use_empty=True)
    assert check_springs.enable_addon(ADDON_DIR)
    arm = B.build_avatar(hair_chains=2, skirt_chains=2)
    B.add_bone_boxes(arm)
    scene = bpy.context.scene
    bpy.context.view_layer.objects.active = arm
    bpy.ops.object.mode_set(mode="EDIT")
    arm.data.edit_bones.remove(arm.data.edit_bones["hair1_8"])
    bpy.ops.object.mode_set(mode="OBJECT")
    C.add_camera(scene, location=(0.0, -3.2, 1.2), rotation=(1.5707963, 0.0, 0.0))
    scene.render.engine = "STYLIZED"
    scene.render.resolution_x = scene.render.resolution_y = 32
    path = tmp_path / "springs_bad_joint.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    disable_vrm_addon()
    bpy.ops.wm.open_mainfile(filepath=str(path))
    capfd.readouterr()
    bpy.ops.render.render()
    out = capfd.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("Stylized frame 1:")]
    assert any("spring 'hair1_0' of 'Avatar'" in ln and "no bone" in ln for ln in lines), lines
