"""Issue 23 (the heavy avatar's first Rendered viewport frame): a viewport session imports no
action until a clip preview draws (the timeline draws Blender's evaluated pose and needs none;
the heavy rig's three clips were most of its first frame); Play then imports the clips and the
preview plays the chosen one."""
from __future__ import annotations

import math

import bpy
import numpy as np

from conftest import add_camera, add_sun, look_at, perspective
from stylized_renderer.engine.features.preview import control as preview
from support.viewport import draw, object_mask
from tools import scenes


def test_first_viewport_frame_reads_no_action_and_play_imports_the_clips(empty_scene, clean_preview, view_session):
    scene = empty_scene
    add_sun(scene, rotation=(0.6, 0.2, 0.0))
    add_camera(scene, location=(0.0, -6.0, 1.0))
    arm, body, hat, ring = scenes.build_character(scene)
    assert any(a.name == "CharacterWave" for a in bpy.data.actions)
    s = view_session
    view, proj = look_at((0.0, -6.0, 0.8), (0.0, 0.0, 0.8)), perspective(math.radians(45), 4 / 3)
    s.sync(bpy.context.evaluated_depsgraph_get())
    still = draw(s, view, proj, False, 96, 72)
    assert object_mask(still).sum() > 100
    assert s.scene_asset.animations == (), [c.name for c in s.scene_asset.animations]
    imports = s.imports.import_count
    # Play in the Animation panel: the next frame imports the clips and plays the chosen one
    with bpy.context.temp_override(active_object=arm, object=arm):
        preview.get_state(scene, arm)
        assert bpy.ops.stylized.preview_play() == {"FINISHED"}
    draw(s, view, proj, False, 96, 72)
    assert "CharacterWave" in [c.name for c in s.scene_asset.animations]
    assert s.imports.import_count == imports + 1
    player = s.runtime.player
    assert player.clip is not None and player.clip.name == "CharacterWave" and player.is_playing
    # the clip moves the character: a later frame differs from the still timeline frame
    for _ in range(20):
        moved = draw(s, view, proj, False, 96, 72)
    assert np.abs(moved - still).max() > 0.1
