"""VRM spring bones in our runtime (engine/features/springs, issue 25) against the VRM Add-on's own
``update_pose_bone_rotations`` (tools/check_springs.py), on Godette and a generated avatar (long
hair chains, a skirt with capsule colliders on the legs, gravity); negative controls fail; the
setup reads the same without the add-on.  Tests needing ../shared skip with the reason.
"""
from __future__ import annotations

import bpy
import numpy as np
import pytest

from support import springs_builder as B
from support.vrm_addon import ADDON_DIR, disable_vrm_addon
from support.vrm_scenes import GODETTE, needs_godette


def skip_without_bone_uuids():
    """Godette_vrm0.blend was saved by Blender 5.0: Blender 4.5 drops the bones' system properties
    (the VRM Add-on's bone uuids), so neither the add-on nor we can tell which bone a joint is."""
    from stylized_renderer.engine.features.springs import reader

    arm = bpy.data.objects["Armature"]
    if len(reader._bone_by_uuid(arm)) <= 1:
        pytest.skip(f"Blender {bpy.app.version_string} lost Godette's bone uuids (file saved by a newer Blender)")


def _check(path, control="none", steps=120, log=lambda m: None, dt=1.0 / 60.0):
    from tools import check_springs

    return check_springs.run(str(path), steps=steps, control=control, log=log, dt=dt)


def _avatar(tmp_path, clip_frames=0):
    bpy.ops.wm.read_factory_settings(use_empty=True)
    from tools import check_springs

    assert check_springs.enable_addon(ADDON_DIR)
    arm = B.build_avatar()
    if clip_frames:
        B.add_shake_action(arm, frames=clip_frames)
    path = tmp_path / "springs_avatar.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


@needs_godette
def test_godette_hair_matches_the_addon(vrm_addon):
    bpy.ops.wm.open_mainfile(filepath=str(GODETTE))
    skip_without_bone_uuids()
    r = _check(GODETTE)
    assert r["joints"] == 16 and r["steps"] == 120
    assert r["tip_motion"] > 0.01                  # the hair really swings (relative to her height)
    assert r["max_rel_error"] <= 1e-3, r


def test_generated_avatar_matches_the_addon_and_controls_fail(vrm_addon, tmp_path):
    """The avatar's own clip (head shake, hips sway and shift) played by the preview at 24 fps
    (2-3 steps per update, each reading the update's pose, as the add-on's frame handler does)."""
    path = _avatar(tmp_path, clip_frames=64)
    said = []
    r = _check(path, log=said.append, dt=1.0 / 24.0)
    assert any("plays its action 'Shake'" in m for m in said), said
    assert r["steps"] == 120 and r["updates"] == 48
    assert r["joints"] == 6 * 9 + 8 * 5
    assert r["tip_motion"] > 0.05, r
    assert r["max_rel_error"] <= 1e-3, r
    for control in ("no-collisions", "no-gravity", "wrong-order"):
        bad = _check(path, control)
        assert bad["max_rel_error"] > 1e-2, (control, bad)


def test_two_avatars_each_match_the_addon(vrm_addon, tmp_path):
    """Two armatures with spring bones in one file (different hair, the second turned, scaled and
    moved): the preview's crowd plays the clip on both, one SpringRig simulates every chain of
    both, and each avatar's joints match the add-on's (which steps every armature it finds)."""
    import math

    bpy.ops.wm.read_factory_settings(use_empty=True)
    from tools import check_springs

    assert check_springs.enable_addon(ADDON_DIR)
    first = B.build_avatar()
    B.add_shake_action(first, frames=64)
    second = B.build_avatar(name="Avatar2", hair_chains=3, hair_len=5, skirt_chains=6, location=(1.5, 0.4, 0.0))
    second.rotation_euler = (0.0, 0.0, math.radians(30.0))
    second.scale = (1.2, 1.2, 1.2)
    path = tmp_path / "springs_two.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    said = []
    r = _check(path, log=said.append, dt=1.0 / 24.0)
    assert any("the crowd plays 'Shake' on Avatar, Avatar2" in m for m in said), said
    per = r["armatures"]
    assert per["Avatar"]["joints"] == 6 * 9 + 8 * 5 and per["Avatar2"]["joints"] == 3 * 6 + 6 * 5
    for name, a in per.items():
        assert a["tip_motion"] > 0.02, (name, r)          # its hair swings too
        assert a["max_rel_error"] <= 1e-3, (name, r)


def _spec_summary(spec):
    return ([(s.name, [(j.node, round(j.stiffness, 6), round(j.drag_force, 6), round(j.gravity_power, 6),
                        tuple(np.round(j.gravity_dir, 6)), round(j.hit_radius, 6)) for j in s.joints],
              s.colliders, s.center_node) for s in spec.springs],
            [(c.node, c.kind, tuple(np.round(c.offset, 5)), tuple(np.round(c.tail, 5)), round(c.radius, 5))
             for c in spec.colliders])


def test_setup_reads_the_same_without_the_addon(vrm_addon, tmp_path):
    from stylized_renderer.engine.features.springs import reader

    path = _avatar(tmp_path)
    bpy.ops.wm.open_mainfile(filepath=str(path))
    arm = bpy.data.objects["Avatar"]
    with_addon = _spec_summary(reader.read_character(arm, *reader.standalone_nodes(arm)))
    disable_vrm_addon()
    bpy.ops.wm.open_mainfile(filepath=str(path))
    arm = bpy.data.objects["Avatar"]
    warnings = []
    without = _spec_summary(reader.read_character(arm, *reader.standalone_nodes(arm), warn=warnings.append))
    assert without == with_addon and not warnings
    springs, colliders = without
    assert len(springs) == 14 and [c[1] for c in colliders] == [0, 1, 1]     # sphere, two capsules
    assert colliders[1][4] == pytest.approx(0.08, abs=1e-5)


@needs_godette
def test_vrm0_secondary_animation_is_migrated_as_the_addon_does(ext):
    """Without a spring_bone1 copy, the VRM 0.x bone groups give what the add-on's "Assign VRM 0.0
    Spring Bones" wrote into Godette's file (same joints, parameters, colliders), add-on absent."""
    from stylized_renderer.engine.features.springs import reader
    from stylized_renderer.engine.features.vrm import expressions as vx

    assert not hasattr(bpy.types.Armature, "vrm_addon_extension")
    bpy.ops.wm.open_mainfile(filepath=str(GODETTE))
    skip_without_bone_uuids()
    arm = bpy.data.objects["Armature"]
    stored = _spec_summary(reader.read_character(arm, *reader.standalone_nodes(arm)))
    props = vx.extension_props(arm.data)
    assert props is not None
    sb = props["spring_bone1"]
    sb["springs"] = []
    sb["colliders"] = []
    sb["collider_groups"] = []
    assert reader.has_springs(arm)
    migrated = _spec_summary(reader.read_character(arm, *reader.standalone_nodes(arm)))
    strip = lambda springs: [s[1:] for s in springs]          # noqa: E731  (names carry a uuid)
    assert strip(migrated[0]) == strip(stored[0]) and len(stored[0]) == 8
    assert [c[:2] for c in migrated[1]] == [c[:2] for c in stored[1]]
    assert np.allclose([c[2] + (c[4],) for c in migrated[1]], [c[2] + (c[4],) for c in stored[1]], atol=1e-4)
