"""Preserve Volume (dual quaternion skinning) on the GPU (issue 11 item 6): GPU-skinned vertices
read back from the GPU (tools/check_deform.py, timeline and player modes) against Blender's
evaluated mesh, on a generated arm whose forearm twists up to 170 degrees and bends, whose hand
scales non-uniformly, with 2-4 influences per vertex; negative control with linear blending;
renders of the twisted arm with and without Preserve Volume (the candy-wrapper collapse)."""
from __future__ import annotations

import math

import bpy
import numpy as np

import conftest as C  # noqa: F401  (registers the extension fixtures)
from conftest import ARTIFACTS, add_camera, add_sun, render_scene, save_png
from support.deform_rigs import build_arm
from tools import (
    deform_checker,
    render_capture,  # noqa: E402  (F12 results: the hook the tests install)
    scenes,
)


def _run(capsys, frames="1-8", mode="timeline"):
    return C.run_deform_check(capsys, frames, mode)


def test_import_flags_preserve_volume(empty_scene):
    """The importer keeps the object on the GPU path and flags its skin; 2-4 influences."""
    arm, ob = build_arm()
    from stylized_renderer.engine.blender import importer

    asset = importer.import_scene(bpy.context.evaluated_depsgraph_get())
    mesh = next(m for m in asset.meshes if m.name == ob.name)
    assert mesh.fallback_reason is None, mesh.fallback_reason
    prim = mesh.primitives[0]
    assert prim.skin.preserve_volume
    counts = (prim.weights > 0).sum(axis=1)
    assert counts.min() >= 1 and counts.max() == 4 and (counts >= 2).any(), np.bincount(counts)


def test_preserve_volume_matches_blender(empty_scene, capsys):
    """Timeline and player modes: every frame within 1e-4 of the object size, no fallback."""
    build_arm()
    rc, out, fields = _run(capsys, mode="both")
    assert rc == 0, out
    assert "path=gpu" in out and int(fields["fallbacks"]) == 0 and int(fields["skipped"]) == 0, out
    assert float(fields["max_rel_error"]) <= deform_checker.TOLERANCE, out


def test_linear_blending_fails(empty_scene, capsys, monkeypatch):
    """Negative control: the same rig drawn with linear blend skinning (the dual quaternion path
    off) is far from Blender's Preserve Volume result."""
    build_arm()
    from stylized_renderer.engine.core.runtime import palette

    real = palette.SkinningPaletteGroup.__init__

    def linear(self, *a, **k):
        real(self, *a, **k)
        self.dq = False

    monkeypatch.setattr(palette.SkinningPaletteGroup, "__init__", linear)
    rc, out, fields = _run(capsys, frames="4-8:4")
    assert "path=gpu" in out, out
    assert rc == 1 and float(fields["max_rel_error"]) > 100 * deform_checker.TOLERANCE, out


def _neck_width(px: np.ndarray) -> int:
    """The narrowest covered row of the arm's picture, away from its two ends (pixels)."""
    cov = px[..., :3].max(axis=-1) > 0.05      # the lit arm on the black world
    width = cov.sum(axis=1)
    rows = np.flatnonzero(width > 0)
    assert rows.size > 20, "the arm is not in the picture"
    lo, hi = rows[0], rows[-1]
    cut = (hi - lo) // 6
    return int(width[lo + cut:hi - cut].min())


def test_candy_wrapper_only_without_preserve_volume(empty_scene, tmp_path):
    """Renders of the arm at its 170-degree forearm twist: with Preserve Volume the elbow keeps
    its thickness, without it (linear blending, the same rig) it collapses to a thin neck."""
    scene = empty_scene
    scene.render.resolution_x, scene.render.resolution_y = 120, 200
    arm, ob = build_arm()
    cam = add_camera(scene, location=(0.0, -6.0, 1.25), rotation=(math.radians(90), 0.0, 0.0), ortho=True)
    cam.data.ortho_scale = 3.2
    add_sun(scene, rotation=(math.radians(50), 0.0, math.radians(30)), strength=math.pi)
    scene.frame_set(8)
    with_pv = render_scene(scene)
    ob.modifiers["Armature"].use_deform_preserve_volume = False
    bpy.context.view_layer.update()
    scene.frame_set(8)
    without = render_scene(scene)
    for name, px in (("with_preserve_volume", with_pv), ("without_preserve_volume", without)):
        save_png(px, ARTIFACTS / f"preserve_volume_{name}.png")
        save_png(px, tmp_path / f"{name}.png")
    w_pv, w_lin = _neck_width(with_pv), _neck_width(without)
    assert w_pv >= 1.5 * w_lin, (w_pv, w_lin)


def test_preserve_volume_bbones_and_object_transforms(empty_scene, capsys):
    """B-Bones with Preserve Volume (Blender's dual quaternion per segment matrix), the armature
    and the mesh object moved, turned and scaled non-uniformly (the modifier's armature space):
    both modes within 1e-4, no fallback."""
    from support.deform_rigs import build_bbone_rig

    arm, ob = build_bbone_rig()
    ob.modifiers["Armature"].use_deform_preserve_volume = True
    arm.location, arm.rotation_euler, arm.scale = (0.4, -0.2, 0.3), (0.3, 0.1, -0.4), (1.2, 1.2, 1.2)
    ob.location, ob.rotation_euler, ob.scale = (0.1, 0.2, 0.0), (0.0, 0.2, 0.5), (1.0, 0.8, 1.3)
    scenes.finish()
    rc, out, fields = _run(capsys, frames="1-10", mode="both")
    assert rc == 0, out
    assert "path=gpu" in out and int(fields["fallbacks"]) == 0 and int(fields["skipped"]) == 0, out
    assert float(fields["max_rel_error"]) <= deform_checker.TOLERANCE, out


def test_preserve_volume_many_influences(empty_scene, capsys):
    """Vertices with 2, 9, 12 and 20 influences (per-vertex spans) with Preserve Volume, bones
    turning and scaling: timeline within 1e-4, no fallback."""
    arm, ob = scenes.build_many_influences(counts=(2, 9, 12, 20))
    ob.modifiers["Armature"].use_deform_preserve_volume = True
    pb = arm.pose.bones
    for f in (1, 4):
        for k, b in enumerate(pb):
            b.rotation_mode = "XYZ"
            b.rotation_euler = (0.15 * k * (f > 1), 0.1 * (k % 3) * (f > 1), -0.05 * k * (f > 1))
            b.scale = (1.0, 1.0 + 0.05 * (k % 4) * (f > 1), 1.0)
            b.keyframe_insert("rotation_euler", frame=f)
            b.keyframe_insert("scale", frame=f)
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, 4
    scenes.finish()
    rc, out, fields = _run(capsys, frames="1-4", mode="timeline")
    assert rc == 0, out
    assert "path=gpu" in out and int(fields["fallbacks"]) == 0, out
    assert float(fields["max_rel_error"]) <= deform_checker.TOLERANCE, out


def test_preserve_volume_crowd_grouped_equals_single(empty_scene, monkeypatch):
    """Three Preserve Volume arms (linked duplicates, each with a pose of its own) drawn in
    grouped (instanced) draws give the same pixels as each drawn by its own call: every
    instance reads its own dual quaternion palette rows."""
    from stylized_renderer.engine.gpu.passes import instancing
    from tools.bench_render import duplicate_linked

    scene = empty_scene
    scene.render.resolution_x, scene.render.resolution_y = 240, 160
    arm, ob = build_arm()
    for k in (1, 2):
        rig, _objs = duplicate_linked(arm, (0.9 * k, 0.0, 0.0), f".dup{k}")
        rig.animation_data_clear()
        rig.pose.bones["lower"].rotation_euler = (0.3 * k, 1.2 + 0.8 * k, 0.0)
        rig.pose.bones["hand"].scale = (1.0, 1.0 + 0.3 * k, 1.0 - 0.2 * k)
    add_camera(scene, location=(0.9, -7.0, 1.25), rotation=(math.radians(90), 0.0, 0.0))
    add_sun(scene, rotation=(0.6, 0.2, 0.3), strength=3.0)
    scene.frame_set(8)
    grouped = render_scene(scene).copy()
    stats = dict(render_capture.LAST_RENDER["pipeline"])
    save_png(grouped, ARTIFACTS / "preserve_volume_crowd.png")
    monkeypatch.setattr(instancing, "ENABLED", False)
    single = render_scene(scene).copy()
    alone = dict(render_capture.LAST_RENDER["pipeline"])
    assert stats["instanced_draws"] > 0 and alone["instanced_draws"] == 0, (stats, alone)
    assert (single[..., :3].max(axis=-1) > 0.05).sum() > 500
    assert np.abs(grouped - single).max() <= 1e-6


def test_preserve_volume_with_shape_keys(empty_scene, capsys):
    """Shape keys first, then the dual quaternion deform at the keyed position (Blender's
    modifier order): an animated key that swells the elbow and shifts the hand, both morph
    paths (composed in the shader, rebuilt on the CPU), timeline mode within 1e-4.  (Player
    mode is left out: with an armature clip and a shape-key clip on one object it fails the
    same way with linear blending; not a Preserve Volume matter.)"""
    arm, ob = build_arm()
    ob.shape_key_add(name="Basis")
    kb = ob.shape_key_add(name="Swell")
    co = np.array([v.co for v in ob.data.vertices])
    z = co[:, 2]
    swell = np.exp(-((z - 1.0) / 0.3) ** 2)[:, None]
    new = co.copy()
    new[:, :2] *= 1.0 + 0.6 * swell
    new[:, 0] += 0.15 * (z > 2.0)
    kb.data.foreach_set("co", new.ravel())
    for f, v in ((1, 0.0), (4, 1.0), (8, 0.5)):
        kb.value = v
        kb.keyframe_insert("value", frame=f)
    scenes.finish()
    for morph in ("shader", "rebuild"):
        rc, out, fields = C.run_deform_check(capsys, "1-8", "timeline", morph)
        assert rc == 0, (morph, out)
        assert "path=gpu" in out and int(fields["fallbacks"]) == 0 and int(fields["skipped"]) == 0, out
        assert float(fields["max_rel_error"]) <= deform_checker.TOLERANCE, out
        assert f"{morph}=0" not in out, out


def test_preserve_volume_bounds_hold_blenders_mesh(empty_scene):
    """The dual quaternion palette's mesh-local bounds (culling, shadow fitting) hold every vertex
    of Blender's evaluated mesh at every frame, and stay within twice its extent."""
    from stylized_renderer.engine.blender import render_engine

    scene = empty_scene
    arm, ob = build_arm()
    add_camera(scene, location=(0.0, -6.0, 1.25), rotation=(math.radians(90), 0.0, 0.0))
    for f in range(1, 9):
        scene.frame_set(f)
        render_scene(scene)
        session = render_engine.kept_final_session()
        assert session is not None and session.runtime is not None
        groups = session.runtime.palette_set.palette_groups
        assert len(groups) == 1 and groups[0].dq
        b = groups[0].palette.current_local_bounds
        ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get()).data
        co = np.empty(len(ev.vertices) * 3)
        ev.vertices.foreach_get("co", co)
        co = co.reshape(-1, 3)
        lo, hi = co.min(axis=0), co.max(axis=0)
        assert (b.minimum <= lo + 1e-6).all() and (b.maximum >= hi - 1e-6).all(), (f, b, lo, hi)
        assert ((b.maximum - b.minimum) <= 2.0 * (hi - lo).max()).all(), (f, b, lo, hi)


def _build_sheared_arm():
    """build_arm with non-uniform scale keyed on the upper and lower arm too: the children
    inherit it turned, so their deform matrices shear (Blender's orthogonalisation matters)."""
    arm, ob = build_arm()
    pb = arm.pose.bones
    for f, s in ((1, (1.0, 1.0, 1.0)), (4, (1.4, 1.0, 0.6)), (8, (0.7, 1.3, 1.5))):
        pb["lower"].scale = s
        pb["lower"].keyframe_insert("scale", frame=f)
        pb["upper"].scale = (s[2], s[0], s[1])
        pb["upper"].keyframe_insert("scale", frame=f)
    scenes.finish()
    return arm, ob


def test_preserve_volume_sheared_bones(empty_scene, capsys):
    """Inherited non-uniform scale (sheared deform matrices): both modes within 1e-4."""
    _build_sheared_arm()
    rc, out, fields = _run(capsys, mode="both")
    assert rc == 0, out
    assert "path=gpu" in out and int(fields["fallbacks"]) == 0, out


def test_gram_schmidt_rotation_split_fails(empty_scene, capsys, monkeypatch):
    """Negative control: splitting the rotation off a sheared matrix by plain Gram-Schmidt
    against Y (X and Z each orthogonalised to Y only) instead of Blender's orthogonalize_m4
    exceeds the tolerance."""
    from stylized_renderer.engine.core.runtime import dquat

    def gram_schmidt(m3):
        size = np.linalg.norm(m3, axis=1)
        y = m3[:, :, 1] / size[:, 1:2]
        out = np.empty_like(m3)
        out[:, :, 1] = y
        for c in (0, 2):
            v = m3[:, :, c] - y * (m3[:, :, c] * y).sum(axis=1, keepdims=True)
            out[:, :, c] = v / np.linalg.norm(v, axis=1, keepdims=True)
        return out * size[:, None, :]

    monkeypatch.setattr(dquat, "_orthogonalize_y", gram_schmidt)
    _build_sheared_arm()
    rc, out, fields = _run(capsys, frames="4-8:4")
    assert "path=gpu" in out, out
    assert rc == 1 and float(fields["max_rel_error"]) > deform_checker.TOLERANCE, out


def test_preserve_volume_next_to_linear_mesh_baked(empty_scene, capsys):
    """One rig deforming a Preserve Volume mesh and a linear-blend mesh (batched palettes next
    to a per-group dual quaternion one), its B-Bone clip baked for the player: both meshes
    within 1e-4 in both modes."""
    from support.deform_rigs import build_bbone_rig

    arm, ob = build_bbone_rig()
    twin = ob.copy()
    twin.data = ob.data.copy()
    twin.name = "BStripLinear"
    bpy.context.scene.collection.objects.link(twin)
    twin.location = (0.8, 0.0, 0.0)
    ob.modifiers["Armature"].use_deform_preserve_volume = True
    scenes.finish()
    rc, out, fields = _run(capsys, frames="1-10", mode="both")
    assert rc == 0, out
    assert int(fields["objects"]) == 2 and int(fields["fallbacks"]) == 0 and int(fields["baked"]) >= 1, out
    assert float(fields["max_rel_error"]) <= deform_checker.TOLERANCE, out


def test_player_check_restores_the_file_between_clips(empty_scene, capsys):
    """check_deform's player mode checks an armature clip and then a shape-key clip of a rig that
    has no action assigned: the armature clip's evaluation must not leave the rig posed (nor
    leave it animation data) for the next clip's reference, which starts from the file's pose as
    the preview's does.  (Before, the second clip failed at 0.66 of the object size.)"""
    arm, ob = build_arm(preserve_volume=False)
    ob.shape_key_add(name="Basis")
    kb = ob.shape_key_add(name="Swell")
    co = np.array([v.co for v in ob.data.vertices])
    new = co.copy()
    new[:, :2] *= 1.0 + 0.6 * np.exp(-((co[:, 2] - 1.0) / 0.3) ** 2)[:, None]
    kb.data.foreach_set("co", new.ravel())
    for f, v in ((1, 0.0), (4, 1.0), (8, 0.5)):
        kb.value = v
        kb.keyframe_insert("value", frame=f)
    arm.animation_data_clear()            # the rig's action stays in the file, unassigned
    scenes.finish()
    pose_before = [tuple(pb.matrix_basis.col[3]) + tuple(pb.rotation_euler) for pb in arm.pose.bones]
    rc, out, f = C.run_deform_check(capsys, "1-8", "player", "shader")
    assert rc == 0 and float(f["max_rel_error"]) <= deform_checker.TOLERANCE, out
    assert int(f["frames"]) == 16, out    # both clips checked
    assert arm.animation_data is None
    assert [tuple(pb.matrix_basis.col[3]) + tuple(pb.rotation_euler) for pb in arm.pose.bones] == pose_before
