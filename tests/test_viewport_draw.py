"""The viewport adapter headless: ``render_engine.draw_view`` with the matrices and sizes a 3D
viewport passes (perspective, orthographic, camera view, resizes), GPU state left as found, and
``StylizedSession.sync`` fed with the depsgraph updates Blender really reports (captured by a
depsgraph_update_post handler): transform-only updates keep the import, an edited mesh re-imports
that mesh only, a deleted object frees its GPU streams and a changed material is redrawn."""
from __future__ import annotations

import math

import bpy
import numpy as np

from conftest import (
    add_camera,
    add_material,
    add_mesh_object,
    add_sun,
    cube_geometry,
    look_at,
    perspective,
    render_scene,
)
from stylized_renderer.engine.blender.render_engine import draw_view
from stylized_renderer.engine.gpu import util as gpu_util
from support.viewport import captured, draw, object_mask, session  # noqa: F401  (fixtures: session, captured)


def orthographic(half_height, aspect, near=0.1, far=100.0) -> np.ndarray:
    m = np.eye(4)
    m[0, 0], m[1, 1] = 1.0 / (half_height * aspect), 1.0 / half_height
    m[2, 2], m[2, 3] = -2.0 / (far - near), -(far + near) / (far - near)
    return m


def cube_scene(scene, color=(0.9, 0.1, 0.1), name="Cube", location=(0, 0, 0)):
    v, f = cube_geometry()
    return add_mesh_object(scene, name, v, f, location=location, material=add_material(name + "Mat", color))


def test_perspective_view_and_resizes(empty_scene, session):  # noqa: F811
    scene = empty_scene
    add_sun(scene, rotation=(0.6, 0.2, 0.0))
    cube_scene(scene)
    view = look_at((0.0, -6.0, 0.0))
    for w, h in ((200, 100), (90, 160), (200, 100)):
        px = draw(session, view, perspective(math.radians(40), w / h), False, w, h)
        assert px.shape == (h, w, 4)
        m = object_mask(px)
        ys, xs = np.nonzero(m)
        assert m.any()
        assert abs(xs.mean() - (w - 1) / 2) < 2.0 and abs(ys.mean() - (h - 1) / 2) < 2.0
        # a 1 m cube at 6 m under a 40 degree vertical field: about 1/4.4 of the height
        extent = (ys.max() - ys.min() + 1) / h
        assert 0.18 < extent < 0.32, extent


def test_orthographic_view_ignores_distance(empty_scene, session):  # noqa: F811
    scene = empty_scene
    add_sun(scene, rotation=(0.6, 0.2, 0.0))
    cube_scene(scene)
    w, h = 120, 120
    counts = {}
    for ortho in (True, False):
        for dist in (4.0, 9.0):
            proj = orthographic(2.0, 1.0) if ortho else perspective(math.radians(40), 1.0)
            counts[ortho, dist] = int(object_mask(draw(session, look_at((0.0, -dist, 0.0)), proj, ortho, w, h)).sum())
    assert abs(counts[True, 4.0] - counts[True, 9.0]) <= 0.02 * counts[True, 4.0], counts
    assert counts[False, 4.0] > 2.5 * counts[False, 9.0], counts


def test_camera_view_matches_the_f12_render(empty_scene, session):  # noqa: F811
    scene = empty_scene
    scene.render.resolution_x, scene.render.resolution_y = 160, 120
    cam = add_camera(scene, location=(3.0, -5.0, 2.0), rotation=(math.radians(70), 0.0, math.radians(30)))
    add_sun(scene, rotation=(0.6, 0.2, 0.0))
    cube_scene(scene)
    f12 = render_scene(scene).copy()
    dg = bpy.context.evaluated_depsgraph_get()
    ce = cam.evaluated_get(dg)
    window = np.array(ce.calc_matrix_camera(dg, x=160, y=120))
    px = draw(session, np.linalg.inv(np.array(ce.matrix_world)), window, False, 160, 120)
    assert object_mask(f12).sum() > 200
    diff = np.abs(px[..., :3] - f12[..., :3]).max(axis=2)
    assert np.mean(diff > 2.0 / 255.0) < 0.002, diff.max()


def test_draw_view_leaves_gpu_state_as_found(empty_scene, session):  # noqa: F811
    import gpu

    scene = empty_scene
    scene.stylized.screen_space_outline = True
    add_sun(scene, rotation=(0.6, 0.2, 0.0))
    cube_scene(scene)
    dg = bpy.context.evaluated_depsgraph_get()

    def task():
        def state():
            return (gpu.state.blend_get(), gpu.state.depth_test_get(), gpu.state.depth_mask_get(),
                    tuple(gpu.state.viewport_get()), tuple(gpu.state.scissor_get()))
        before = state()
        fb_before = gpu.state.active_framebuffer_get()
        draw_view(session, dg, look_at((0.0, -6.0, 0.0)), perspective(math.radians(40), 1.5), False, 150, 100)
        return before, state(), fb_before == gpu.state.active_framebuffer_get()

    before, after, same_fb = gpu_util.run_in_gpu_context(task)
    assert after == before and same_fb


def test_sync_applies_depsgraph_updates_incrementally(empty_scene, session, captured):  # noqa: F811
    scene = empty_scene
    add_sun(scene, rotation=(0.6, 0.2, 0.0))
    a = cube_scene(scene, (0.9, 0.1, 0.1), "A", location=(-1.2, 0, 0))
    b = cube_scene(scene, (0.1, 0.9, 0.1), "B", location=(1.2, 0, 0))
    view, proj = look_at((0.0, -8.0, 0.0)), perspective(math.radians(40), 1.5)
    session.sync(bpy.context.evaluated_depsgraph_get())
    draw(session, view, proj, False, 150, 100)
    runtime = session.runtime
    mesh_of = {n.object_name: runtime.scene.meshes[int(runtime.scene.mesh_indices[i])]
               for i, n in enumerate(runtime.scene.nodes) if int(runtime.scene.mesh_indices[i]) >= 0}

    captured.take()                                  # the set-up's own updates

    # transform only: no re-import, the new location is drawn
    a.location.z = 1.0
    session.sync(bpy.context.evaluated_depsgraph_get(), captured.take())
    assert not session.imports.need_import
    px = draw(session, view, proj, False, 150, 100)
    assert session.runtime is runtime
    ys, xs = np.nonzero(np.abs(px[..., :3] - px[0, 0, :3]).max(axis=2) > 0.02)
    left = xs < 75
    assert ys[left].mean() > ys[~left].mean() + 10       # A is drawn higher than B now (row 0 = bottom)

    # an edited mesh re-imports that mesh only (the importer cache keeps B's assets)
    a.data.vertices[0].co.x -= 0.3
    a.data.update()
    session.sync(bpy.context.evaluated_depsgraph_get(), captured.take())
    assert session.imports.need_import
    draw(session, view, proj, False, 150, 100)
    new_mesh_of = {n.object_name: session.runtime.scene.meshes[int(session.runtime.scene.mesh_indices[i])]
                   for i, n in enumerate(session.runtime.scene.nodes) if int(session.runtime.scene.mesh_indices[i]) >= 0}
    assert new_mesh_of["B"] is mesh_of["B"] and new_mesh_of["A"] is not mesh_of["A"]

    # a deleted object frees its GPU streams
    old_b_streams = list(session.runtime.runtime_meshes[int(session.runtime.scene.mesh_indices[
        [n.object_name for n in session.runtime.scene.nodes].index("B")])].streams)
    bpy.data.objects.remove(b)
    session.sync(bpy.context.evaluated_depsgraph_get(), captured.take())
    px = draw(session, view, proj, False, 150, 100)
    assert "B" not in [n.object_name for n in session.runtime.scene.nodes]
    assert all(s.batch is None for s in old_b_streams)
    green = np.abs(px[..., :3] - np.array([0.1, 0.9, 0.1])).max(axis=2) < 0.3
    assert not green.any()

    # a changed material is redrawn with its new colour
    before = object_mask(px).sum()
    mat = a.data.materials[0]
    mat.diffuse_color = (0.1, 0.1, 0.9, 1.0)
    mat.node_tree.nodes["Principled BSDF"].inputs["Base Color"].default_value = (0.1, 0.1, 0.9, 1.0)
    session.sync(bpy.context.evaluated_depsgraph_get(), captured.take())
    px = draw(session, view, proj, False, 150, 100)
    m = object_mask(px)
    assert abs(int(m.sum()) - int(before)) <= 0.05 * before
    assert px[m][:, 2].mean() > px[m][:, 0].mean()            # now blue, not red


def _animated_character(scene):
    """The demo character (skinned body, animated face keys, bone-parented wand)."""
    from demo.character import build_demo_scene

    info = build_demo_scene(scene)
    scene.frame_set(1)
    return info


def test_playback_and_pose_and_key_value_changes_do_not_reimport(empty_scene, session, captured):  # noqa: F811
    scene = empty_scene
    info = _animated_character(scene)
    cam = scene.camera
    w, h = 96, 72
    dg = bpy.context.evaluated_depsgraph_get()
    ce = cam.evaluated_get(dg)
    view = np.linalg.inv(np.array(ce.matrix_world))
    proj = np.array(ce.calc_matrix_camera(dg, x=w, y=h))
    session.sync(dg)
    first = draw(session, view, proj, False, w, h)
    runtime = session.runtime
    captured.take()

    # timeline playback: Blender reports geometry updates for the rig, the skinned meshes, the
    # shape keys and the action every frame; none of it is an edit
    for f in (2, 3, 12):
        scene.frame_set(f)
        ups = captured.take()
        assert any(u.is_updated_geometry for u in ups)
        session.sync(bpy.context.evaluated_depsgraph_get(), ups)
        assert not session.imports.need_import, f
    moved = draw(session, view, proj, False, w, h)
    assert session.runtime is runtime
    assert np.abs(moved - first).max() > 0.1                 # the new frame is drawn

    # a pose edit (no frame change) and a shape-key value change: no re-import either
    def edit(change):
        captured.take()            # drop what the previous GPU task's temporary scene caused
        change()
        session.sync(bpy.context.evaluated_depsgraph_get(), captured.take())

    rig = info["armature"]

    def pose():
        rig.pose.bones[0].rotation_mode = "XYZ"
        rig.pose.bones[0].rotation_euler = (0.0, 0.0, 0.6)
    edit(pose)
    assert not session.imports.need_import
    face = next(ob for ob in scene.objects if ob.type == "MESH" and ob.data.shape_keys is not None)
    kb = face.data.shape_keys.key_blocks[1]
    edit(lambda: setattr(kb, "value", 0.5 if kb.value != 0.5 else 0.25))
    assert not session.imports.need_import
    edit(lambda: scene.frame_set(scene.frame_current))      # the same frame evaluated again
    assert not session.imports.need_import, session.imports.reimport_reasons
    posed = draw(session, view, proj, False, w, h)
    assert session.runtime is runtime and np.abs(posed - moved).max() > 0.1

    # an edited key of the action re-imports it
    action = rig.animation_data.action
    from stylized_renderer.engine.blender.importer.actions import slot_fcurves
    fc = slot_fcurves(action, rig.animation_data.action_slot)[0]

    def move_key():
        fc.keyframe_points[0].co.y += 0.3
        fc.update()
        action.update_tag()
    # no clip was imported yet (no clip preview drew): the timeline draws Blender's pose, nothing
    # is stale and nothing re-imports; once a preview imported the clips, an edit re-imports them
    edit(move_key)
    assert not session.imports.need_import, session.imports.reimport_reasons
    session.imports.want_clips = True
    session.reimport("a clip preview")
    draw(session, view, proj, False, w, h)
    runtime = session.runtime
    edit(move_key)
    assert session.imports.need_import and any("action" in r for r in session.imports.reimport_reasons)
    draw(session, view, proj, False, w, h)
    runtime = session.runtime

    # a shape-key layout change (slider range) and a new modifier are structural: re-import
    imports = session.imports.import_count
    edit(lambda: setattr(kb, "slider_max", 2.0))
    assert session.imports.need_import
    draw(session, view, proj, False, w, h)
    assert session.runtime is not runtime
    assert session.imports.import_count == imports + 1
    assert f"shape keys '{kb.id_data.name}' changed their layout" in session.stats["last_import_reason"]
    body = next(ob for ob in scene.objects if ob.type == "MESH" and ob.name not in session.imports.fallbacks
                and ob.find_armature() is not None)
    edit(lambda: body.modifiers.new("Bevel", "BEVEL"))
    assert session.imports.need_import
    draw(session, view, proj, False, w, h)
    assert body.name in session.imports.fallbacks
