"""Issue 27 items 1-3: Render Region (with and without Crop), Film > Transparent premultiplied
colour (F12, animation, viewport) and Stereoscopy, through F12 (``bpy.ops.render.render``) and the
files Blender writes, compared with the full render, EEVEE and Workbench on the same scene."""
from __future__ import annotations

import bpy
import numpy as np

import conftest as C
from support import compositing_scene as S
from support.exr_read import read_exr


def _region(scene, bx=(0.253, 0.757), by=(0.3, 0.9)):
    rd = scene.render
    rd.use_border = True
    rd.border_min_x, rd.border_max_x = bx
    rd.border_min_y, rd.border_max_y = by
    # Blender's region: int(border * size) in single precision (render_init_from_main)
    x0, x1 = (int(np.float32(v) * np.float32(S.W)) for v in bx)
    y0, y1 = (int(np.float32(v) * np.float32(S.H)) for v in by)
    return x0, x1, y0, y1


def test_render_region_matches_the_full_render(empty_scene, tmp_path):
    scene = empty_scene
    S.stage(scene)
    full = S.combined(S.render_exr(scene, tmp_path / "full.exr"))
    x0, x1, y0, y1 = _region(scene)
    assert full[y0:y1, x0:x1, 3].min() > 0.99            # the region covers opaque pixels
    scene.render.use_crop_to_border = False
    uncropped = S.combined(S.render_exr(scene, tmp_path / "region.exr"))
    assert uncropped.shape == full.shape
    C.save_png(np.concatenate([full, uncropped], 1), C.ARTIFACTS / "render_region.png")
    np.testing.assert_allclose(uncropped[y0:y1, x0:x1], full[y0:y1, x0:x1], atol=1e-5)
    outside = np.ones(full.shape[:2], bool)
    outside[y0:y1, x0:x1] = False
    assert np.abs(uncropped[outside]).max() == 0.0       # Blender leaves the rest empty
    scene.render.use_crop_to_border = True
    cropped = S.combined(S.render_exr(scene, tmp_path / "crop.exr"))
    assert cropped.shape == (y1 - y0, x1 - x0, 4)
    np.testing.assert_allclose(cropped, full[y0:y1, x0:x1], atol=1e-5)


def test_film_transparent_is_premultiplied_like_eevee(empty_scene, tmp_path):
    scene = empty_scene
    S.stage(scene, world=0.8)
    bpy.data.objects["Ground"].hide_render = True
    scene.render.film_transparent = True
    ours = S.combined(S.render_exr(scene, tmp_path / "ours.exr"))
    eevee = S.combined(S.render_exr(scene, tmp_path / "eevee.exr", engine="EEVEE"))
    C.save_png(np.concatenate([ours, eevee], 1), C.ARTIFACTS / "film_transparent.png")
    empty = ours[..., 3] == 0.0
    assert np.count_nonzero(empty) > 1000
    assert np.abs(eevee[eevee[..., 3] == 0.0, :3]).max() == 0.0     # Blender's results are premultiplied
    assert np.abs(ours[empty, :3]).max() == 0.0
    # premultiplied everywhere: no channel exceeds alpha by more than an unlit surface can
    assert (ours[..., :3] <= ours[..., 3:4] * 8.0 + 1e-6).all()
    assert S.coverage_iou(ours[..., 3] > 0.5, eevee[..., 3] > 0.5) > 0.9
    # a blended (BLEND) surface over the empty film keeps premultiplied colour: alpha < 1, rgb <= a*colour
    mat = bpy.data.materials["Red"]
    st = mat.stylized_mtoon
    st.enabled = True
    st.alpha_mode = "BLEND"
    st.base_color = (0.8, 0.1, 0.1, 0.5)
    st.outline_width_mode = "none"
    px = C.render_scene(scene)
    ball = (px[..., 3] > 0.4) & (px[..., 3] < 0.6)
    assert np.count_nonzero(ball) > 100
    assert np.abs(px[px[..., 3] == 0.0, :3]).max() == 0.0
    # straight colour would be the lit red itself; premultiplied it is at most half of it
    assert px[ball, 0].max() > 0.0


def test_film_transparent_premultiplied_in_animation_and_viewport(empty_scene, tmp_path):
    scene = empty_scene
    S.stage(scene)
    bpy.data.objects["Ground"].hide_render = True
    scene.render.film_transparent = True
    scene.frame_start, scene.frame_end = 1, 2
    S.exr_settings(scene, tmp_path / "anim_", multilayer=False)
    bpy.ops.render.render(animation=True, scene=scene.name)
    for f in (1, 2):
        ch = read_exr(tmp_path / f"anim_{f:04d}.exr")
        px = np.stack([ch[c] for c in "RGBA"], -1)
        empty = px[..., 3] == 0.0
        assert np.count_nonzero(empty) > 1000 and np.abs(px[empty, :3]).max() == 0.0
    # the viewport's texture (draw_view: the path view_draw takes)
    from stylized_renderer.engine.blender import render_engine
    from stylized_renderer.engine.blender.session import StylizedSession
    from stylized_renderer.engine.gpu import util as gpu_util

    depsgraph = bpy.context.evaluated_depsgraph_get()
    cam = scene.camera
    view = np.array(cam.matrix_world.inverted())
    proj = np.array(cam.calc_matrix_camera(depsgraph, x=S.W, y=S.H))

    def draw():
        s = StylizedSession(viewport=True)
        try:
            s.sync(depsgraph)
            tex = render_engine.draw_view(s, depsgraph, view, proj, False, S.W, S.H)
            return gpu_util.texture_to_numpy(tex, S.W, S.H)
        finally:
            s.free()

    px = gpu_util.run_in_gpu_context(draw)
    empty = px[..., 3] == 0.0
    assert np.count_nonzero(empty) > 1000 and np.abs(px[empty, :3]).max() == 0.0


def test_stereo_renders_both_views_like_workbench(empty_scene, tmp_path):
    scene = empty_scene
    S.stage(scene)
    bpy.data.objects["Ground"].hide_render = True
    scene.render.film_transparent = True
    rd = scene.render
    rd.use_multiview = True
    rd.views_format = "STEREO_3D"
    cam = scene.camera.data
    cam.stereo.interocular_distance = 0.6        # a large separation: the views differ visibly
    cam.stereo.convergence_mode = "OFFAXIS"
    scene.render.image_settings.views_format = "INDIVIDUAL"
    out = {}
    for engine in ("STYLIZED", "BLENDER_WORKBENCH"):
        S.exr_settings(scene, tmp_path / f"{engine}_", multilayer=False)
        scene.render.image_settings.views_format = "INDIVIDUAL"
        scene.render.engine = engine
        bpy.ops.render.render(write_still=True, scene=scene.name)
        scene.render.engine = "STYLIZED"
        for view, suffix in (("left", "_L"), ("right", "_R")):
            ch = read_exr(tmp_path / f"{engine}_{suffix}.exr") if (tmp_path / f"{engine}_{suffix}.exr").exists() \
                else read_exr(next(tmp_path.glob(f"{engine}_*{suffix}.exr")))
            out[engine, view] = np.stack([ch[c] for c in "RGBA"], -1)
    C.save_png(np.concatenate([np.concatenate([out["STYLIZED", v], out["BLENDER_WORKBENCH", v]], 1)
                               for v in ("left", "right")], 0), C.ARTIFACTS / "stereo.png")
    for view in ("left", "right"):
        ours = out["STYLIZED", view][..., 3] > 0.5
        wb = out["BLENDER_WORKBENCH", view][..., 3] > 0.5
        assert np.count_nonzero(ours) > 500, view
        assert S.coverage_iou(ours, wb) > 0.9, view
    left = out["STYLIZED", "left"][..., 3] > 0.5
    right = out["STYLIZED", "right"][..., 3] > 0.5
    assert S.coverage_iou(left, right) < 0.9           # two different eyes, not one view twice
