"""Issue 36 item 5: Render > Motion Blur through F12: the anti-aliasing samples spread over the
shutter, each drawn at its own instant (engine/features/passes/motion_blur.py).  A box moving
right (17 then 25 px a frame) next to a still ball, on a transparent film: the box's moving edges
widen as EEVEE's do (partly covered pixels, blurred over sharp, EEVEE's ratio as the reference),
the still ball does not, Position moves the smear, the object's own Motion Blur switch holds it."""
from __future__ import annotations

import bpy
import numpy as np

import conftest as C
from support import compositing_scene as S
from support.exr_read import layer_pass

SHUTTER = 0.5


def _stage(scene):
    ball, box, ground = S.stage(scene)
    bpy.data.objects.remove(ground)
    scene.render.film_transparent = True
    for f, x in ((1, 0.2), (2, 1.2), (3, 2.7)):
        box.location.x = x
        box.keyframe_insert("location", index=0, frame=f)
    scene.frame_set(2)
    scene.stylized.render_samples = 8
    scene.render.motion_blur_shutter = SHUTTER
    return box


def _alpha(scene, tmp_path, name, blur, engine="STYLIZED", position="CENTER"):
    scene.render.use_motion_blur = blur
    scene.render.motion_blur_position = position
    rgba = layer_pass(S.render_exr(scene, tmp_path / f"{name}.exr", engine=engine, samples=8), "ViewLayer.Combined")
    return rgba


def _partial(rgba):
    a = rgba[..., 3]
    return np.count_nonzero((a > 0.02) & (a < 0.98))


def test_motion_blur_widens_moving_edges_as_eevee(empty_scene, tmp_path):
    scene = empty_scene
    box = _stage(scene)
    sharp, blurred = _alpha(scene, tmp_path, "sharp", False), _alpha(scene, tmp_path, "blur", True)
    e_sharp = _alpha(scene, tmp_path, "e_sharp", False, engine="EEVEE")
    e_blur = _alpha(scene, tmp_path, "e_blur", True, engine="EEVEE")
    C.save_png(np.concatenate([np.concatenate([sharp, blurred], 1), np.concatenate([e_sharp, e_blur], 1)], 0),
               C.ARTIFACTS / "motion_blur.png")
    ours, eevee = _partial(blurred) / _partial(sharp), _partial(e_blur) / _partial(e_sharp)
    assert eevee > 1.5, eevee                    # (the scene moves enough for EEVEE to blur it)
    assert ours > 1.0 + 0.5 * (eevee - 1.0), (ours, eevee)
    # the smear is as long as EEVEE's: the box's rows covered at all, blurred, within 20 %
    right = np.s_[:, S.W // 2:]
    covered = [np.count_nonzero(im[right][..., 3] > 0.02) for im in (blurred, e_blur)]
    assert abs(covered[0] / covered[1] - 1.0) < 0.2, covered
    # the still ball is not blurred (its half of the frame is the sharp frame's)
    left = np.s_[:, :S.W // 2]
    assert np.abs(blurred[left][..., 3] - sharp[left][..., 3]).max() < 0.02
    # Position: a shutter starting on the frame smears the box further right than one centred on it
    start = _alpha(scene, tmp_path, "start", True, position="START")
    cx = [np.average(np.broadcast_to(np.arange(S.W)[None, S.W // 2:], im[right][..., 3].shape),
                     weights=im[right][..., 3]) for im in (blurred, start)]
    assert cx[1] > cx[0] + 2.0, cx                # (a quarter frame: ~5 px)
    # the box's own Motion Blur switch off: drawn at the frame in every sample (sharp)
    box.cycles.use_motion_blur = False
    held = _alpha(scene, tmp_path, "held", True)
    assert np.abs(held[..., 3] - sharp[..., 3]).max() < 0.02
