"""Issue 36 item 4: the Vector pass through F12 into a multilayer EXR against EEVEE's on the same
scenes: rigid objects moving along keyed paths, and a skinned bar bending and travelling with its
rig while the camera moves (the runtime's exact poses at frame - 1 and + 1, fractional frames
too).  Within 0.5 px where both engines draw, away from the edges (EEVEE's film filter spreads
its data passes over ~1.5 px)."""
from __future__ import annotations

import math

import numpy as np

import conftest as C
from support import compositing_scene as S
from support.compositing_scene import interior
from support.exr_read import layer_pass
from support.two_bone_rig import bar_geometry, two_bone_rig


def _keys(ob, path, index, values, frames=(1, 2, 3)):
    for f, v in zip(frames, values):
        getattr(ob, path)[index] = v
        ob.keyframe_insert(path, index=index, frame=f)


def _vectors(scene, tmp_path):
    scene.view_layers[0].use_pass_vector = True
    ours = layer_pass(S.render_exr(scene, tmp_path / "ours.exr"), "ViewLayer.Vector", "XYZW")
    eevee = layer_pass(S.render_exr(scene, tmp_path / "eevee.exr", engine="EEVEE", samples=1),
                       "ViewLayer.Vector", "XYZW")
    return ours, eevee


def _compare(ours, eevee, name, min_pixels):
    pair = np.concatenate([ours, eevee], 1)          # ours | EEVEE: X (previous) red, Y green, Z blue
    C.save_png(np.concatenate([pair[..., :3] / 40.0 + 0.5, np.ones(pair.shape[:2] + (1,))], -1),
               C.ARTIFACTS / f"pass_vector_{name}.png")
    moving = interior(interior(np.any(np.abs(eevee) > 0.05, -1)) & interior(np.any(np.abs(ours) > 0.05, -1)))
    assert np.count_nonzero(moving) > min_pixels, np.count_nonzero(moving)
    err = np.abs(ours - eevee).max(-1)[moving]
    assert np.percentile(err, 95) < 0.5 and np.median(err) < 0.1, np.percentile(err, [50, 95, 99])
    # what does not move reads 0 in both (the background and the still ground)
    still = interior(~np.any(np.abs(eevee) > 0.05, -1))
    assert np.count_nonzero(still) > 100 and np.abs(ours[still]).max() < 0.05
    return err


def test_vector_pass_of_moving_objects_matches_eevee(empty_scene, tmp_path):
    """A box moving right faster and faster, a ball rising: EEVEE's signs and channel order
    (previous - now in X/Y, now - next in Z/W, pixels)."""
    scene = empty_scene
    ball, box, _ = S.stage(scene)
    _keys(box, "location", 0, (0.2, 1.2, 2.7))
    _keys(ball, "location", 2, (0.8, 1.0, 1.2))
    scene.frame_set(2)
    ours, eevee = _vectors(scene, tmp_path)
    _compare(ours, eevee, "rigid", 600)
    right = ours[..., 0] < -10.0                        # the box: 17 px right from frame 1, 25 px to frame 3
    assert np.count_nonzero(right) > 300
    assert np.median(ours[right][:, 2]) < -20.0 and np.abs(ours[right][:, [1, 3]]).max() < 1.0


def test_vector_pass_of_a_skinned_bar_and_moving_camera_matches_eevee(empty_scene, tmp_path):
    """The two-bone bar bends (upper bone keyed), its rig travels, the camera pans; at a
    fractional frame.  The bar is drawn by the GPU skinning path (no fallback)."""
    import bpy

    from stylized_renderer.engine.blender import render_engine

    scene = empty_scene
    S.stage(scene)
    for name in ("Ball", "Box"):
        bpy.data.objects.remove(bpy.data.objects[name])
    body = C.add_mesh_object(scene, "Bar", *bar_geometry(segments=16), material=bpy.data.materials["Red"])
    rig = two_bone_rig(scene, body)
    pb = rig.pose.bones["upper"]
    pb.rotation_mode = "XYZ"
    for f, deg in zip((1, 2, 3), (0.0, 35.0, 80.0)):
        pb.rotation_euler = (0.0, 0.0, math.radians(deg))     # sideways (two_bone_rig.bend)
        pb.keyframe_insert("rotation_euler", frame=f)
    _keys(rig, "location", 0, (-1.0, -0.5, 0.3))
    _keys(scene.camera, "location", 0, (0.0, 0.2, 0.3))
    scene.frame_set(2, subframe=0.5)
    ours, eevee = _vectors(scene, tmp_path)
    session = render_engine.kept_final_session()
    assert session is not None
    stats = session.stats
    assert stats["gpu_items"] >= 2 and not stats["fallbacks"], stats["fallbacks"]
    _compare(ours, eevee, "skinned", 300)
