"""Point, spot and area lamps cast shadows (engine/gpu/passes/local_shadows.py), compared with EEVEE.

The scene: a ground plane, a sphere, a cube and a skinned character (a column of two bones, its
upper bone bent 80 degrees, so its shadow is the posed one), lit by one local lamp at a time with
a dark world.  A lamp's shadow is where the lamp adds less than 80 % of what it adds with *Cast
Shadow* (``use_shadow``) off (three renders: shadow on, off, the lamp hidden): the mask is taken
the same way from EEVEE's render and ours (F12 both), and the two masks must overlap (IoU).  Objects with Visibility >
Shadow off cast nothing in both.  The viewport draw path gives the same shadow as F12.
"""
from __future__ import annotations

import math

import bpy
import numpy as np
import pytest

import conftest as C
from support.two_bone_rig import bend, two_bone_rig

W, H = 128, 96
IOU_MIN = 0.75


def _character(scene):
    """A 0.3 x 0.3 x 2 m column skinned to two bones (lower 0-1 m, upper 1-2 m), the upper bent."""
    bpy.ops.mesh.primitive_cube_add(size=1.0, location=(0.0, 0.0, 1.0))
    body = bpy.context.active_object
    body.name = "Body"
    body.scale = (0.3, 0.3, 2.0)
    bpy.ops.object.transform_apply(scale=True)
    bpy.ops.object.mode_set(mode="EDIT")
    bpy.ops.mesh.subdivide(number_cuts=7)
    bpy.ops.object.mode_set(mode="OBJECT")
    body.data.materials.append(C.add_material("Skin", (0.8, 0.6, 0.5, 1.0)))
    rig = two_bone_rig(scene, body)
    rig.location = (0.2, 1.2, 0.0)
    bend(rig, "upper", 80.0)                # bent about its Z: sideways
    return body


def _stage(scene, kind):
    scene.render.resolution_x, scene.render.resolution_y = W, H
    scene.view_settings.view_transform = "Standard"
    w = bpy.data.worlds.new("World")
    w.use_nodes = True
    w.node_tree.nodes["Background"].inputs["Color"].default_value = (0.02, 0.02, 0.02, 1.0)
    scene.world = w
    bpy.ops.mesh.primitive_plane_add(size=12.0)
    bpy.context.active_object.name = "Ground"
    bpy.context.active_object.data.materials.append(C.add_material("Grey", (0.6, 0.6, 0.6, 1.0)))
    bpy.ops.mesh.primitive_uv_sphere_add(segments=32, ring_count=16, radius=0.45, location=(-1.3, -0.2, 0.8))
    bpy.context.active_object.name = "Ball"
    bpy.ops.object.shade_smooth()
    bpy.context.active_object.data.materials.append(C.add_material("Red", (0.8, 0.1, 0.1, 1.0)))
    bpy.ops.mesh.primitive_cube_add(size=0.7, location=(1.4, -0.6, 0.35))
    bpy.context.active_object.name = "Box"
    bpy.context.active_object.data.materials.append(C.add_material("Blue", (0.1, 0.2, 0.8, 1.0)))
    _character(scene)
    ld = bpy.data.lights.new("Lamp", kind)
    ld.energy = 500.0 if kind == "SPOT" else 150.0
    ld.shadow_soft_size = 0.0               # a hard shadow in EEVEE too
    if kind == "SPOT":
        ld.spot_size = math.radians(110.0)
        ld.spot_blend = 0.1
    if kind == "AREA":
        ld.size = 0.02                      # small: its shadow as hard as the point-lamp equivalent's
    lamp = bpy.data.objects.new("Lamp", ld)
    scene.collection.objects.link(lamp)
    # the spot looks down from above; the point lamp hangs low, so its shadows fall through several
    # cube faces (the ball's through -X, the cube's through -Z, the character's through +Y)
    lamp.location = (0.3, -0.6, 2.8) if kind == "SPOT" else (0.3, -0.4, 1.7)   # (AREA: as POINT)
    lamp.rotation_euler = (math.radians(10.0), 0.0, 0.0)
    C.add_camera(scene, location=(0.0, -9.0, 6.5), rotation=(math.radians(52.0), 0.0, 0.0), lens=35.0)
    st = getattr(scene, "stylized", None)
    if st is not None:
        st.outlines = False
    return ld


def _lum(img):
    return img[..., :3] @ np.array([0.2126, 0.7152, 0.0722])


def shadow_mask(lit_on, lit_off, dark):
    """Pixels a lamp's shadow darkens: where the lamp adds (over ``dark``, the lamp hidden) less
    than 80 % of what it adds without its shadow (MToon's shadow turns a surface to its shade
    colour, 0.6 x the base colour when derived from a Principled BSDF; EEVEE's removes the lamp)."""
    on, off = _lum(lit_on) - _lum(dark), _lum(lit_off) - _lum(dark)
    return (off > 0.004) & (on < 0.8 * off)


def iou(a, b) -> float:
    return float((a & b).sum()) / max(float((a | b).sum()), 1.0)


def _both(scene, light, tmp_path, tag, engines=("STYLIZED", "EEVEE")):
    """(ours, EEVEE's) shadow masks of ``light`` (F12 with its shadow on, off and the lamp hidden,
    both engines) and the renders."""
    out = {}
    lamp = next(o for o in scene.objects if o.data == light)
    for eng in engines:
        imgs = []
        for flag, hidden in ((True, False), (False, False), (True, True)):
            light.use_shadow = flag
            lamp.hide_render = hidden
            if eng == "STYLIZED":
                imgs.append(C.render_scene(scene).copy())
            else:
                # one sample, as ours (+ FXAA): the hard shadows' masks like for like (IoU with ours
                # 0.88-0.95 at 1 sample, 0.85-0.91 at 4; a quarter of the time)
                imgs.append(C.render_eevee(scene, tmp_path / f"eevee_{flag}_{hidden}.exr", samples=1))
        light.use_shadow = True
        lamp.hide_render = False
        out[eng] = imgs
    if len(engines) == 1:
        return shadow_mask(*out["STYLIZED"]), None, out
    # top row: ours with the shadow on, off; bottom row: EEVEE's (Blender's rows run bottom-up)
    C.save_png(np.concatenate([np.concatenate(out["EEVEE"][:2], 1), np.concatenate(out["STYLIZED"][:2], 1)], 0),
               C.ARTIFACTS / f"local_shadows_{tag}.png")
    return shadow_mask(*out["STYLIZED"]), shadow_mask(*out["EEVEE"]), out


@pytest.mark.parametrize("kind", ["SPOT", "POINT", "AREA"])
def test_lamp_shadow_falls_where_eevee_puts_it(empty_scene, tmp_path, kind):
    """The shadows of a spot (perspective map), a point and an area lamp (cube maps) of the sphere,
    the cube and the bent character overlap EEVEE's; with *Cast Shadow* off the lamp casts none (the two
    renders differ only through the shadow).  Before: no local lamp cast a shadow (IoU 0)."""
    scene = empty_scene
    light = _stage(scene, kind)
    ours, eevee, imgs = _both(scene, light, tmp_path, kind.lower())
    assert eevee is not None                        # both engines rendered
    assert eevee.sum() > 150, eevee.sum()           # the scene has a shadow worth comparing
    score = iou(ours, eevee)
    print(f"{kind}: shadow pixels ours {ours.sum()} EEVEE {eevee.sum()} IoU {score:.3f}")
    assert score >= IOU_MIN, score
    # use_shadow off: no pixel of ours is darkened against ... itself, and the lit render differs
    assert np.abs(imgs["STYLIZED"][0] - imgs["STYLIZED"][1]).max() > 0.1


def test_skinned_character_casts_its_posed_shadow(empty_scene, tmp_path):
    """Only the skinned character casts (the sphere and the cube have Visibility > Shadow off, a
    rule the sun's shadow follows too): under the point lamp its shadow is the bent pose's, where
    EEVEE puts it (the shadow pass skins through glsl/skinning.glsl like the sun's)."""
    scene = empty_scene
    light = _stage(scene, "POINT")
    ours_all = _both(scene, light, tmp_path, "point_all", engines=("STYLIZED",))[0]
    for name in ("Ball", "Box"):
        bpy.data.objects[name].visible_shadow = False
    ours, eevee, _ = _both(scene, light, tmp_path, "point_character")
    assert eevee is not None                        # both engines rendered
    score = iou(ours, eevee)
    print(f"character only: ours {ours.sum()} (all casters {ours_all.sum()}) EEVEE {eevee.sum()} IoU {score:.3f}")
    assert ours_all.sum() - ours.sum() > 200        # the ball's and the cube's shadows are gone
    assert eevee.sum() > 100
    assert score >= IOU_MIN, score


def test_viewport_draws_the_same_lamp_shadow(empty_scene, view_session):
    """The viewport draw path (render_engine.draw_view through the camera's matrices, after the
    sync ``view_update`` makes with Blender's updates) shadows as F12 does, and *Cast Shadow*
    off removes it there too."""
    from stylized_renderer.engine.blender.render_engine import draw_view
    from stylized_renderer.engine.gpu import util as gpu_util
    from stylized_renderer.engine.gpu.util import texture_to_numpy
    from support.viewport import CapturedUpdates

    scene = empty_scene
    light = _stage(scene, "SPOT")
    lamp = bpy.data.objects["Lamp"]
    captured = CapturedUpdates()
    view_session.sync(bpy.context.evaluated_depsgraph_get())     # the first view_update
    captured.take()

    def both():
        f12 = C.render_scene(scene).copy()
        dg = bpy.context.evaluated_depsgraph_get()
        view_session.sync(dg, captured.take())                    # view_update: what changed
        ce = scene.camera.evaluated_get(dg)
        window = np.array(ce.calc_matrix_camera(dg, x=W, y=H))
        view = np.linalg.inv(np.array(ce.matrix_world))
        vp = gpu_util.run_in_gpu_context(
            lambda: texture_to_numpy(draw_view(view_session, dg, view, window, False, W, H), W, H)).copy()
        return f12, vp

    try:
        on = both()
        light.use_shadow = False
        off = both()
        light.use_shadow = True
        lamp.hide_render = lamp.hide_viewport = True
        dark = both()
    finally:
        captured.close()
    f12 = shadow_mask(on[0], off[0], dark[0])
    vp = shadow_mask(on[1], off[1], dark[1])
    C.save_png(np.concatenate([on[1], on[0]], 1), C.ARTIFACTS / "local_shadows_viewport.png")
    print(f"viewport {vp.sum()} F12 {f12.sum()} IoU {iou(vp, f12):.3f}")
    assert f12.sum() > 150
    assert iou(vp, f12) >= 0.9
    assert np.abs(on[1] - off[1]).max() > 0.1


def test_more_lamps_than_the_limit_are_named(empty_scene):
    """Six shadow-casting point lamps: the four strongest cast, the two weakest are named in the
    Stats panel's losses and the render log."""
    from stylized_renderer.engine.gpu.passes.local_shadows import MAX_LOCAL_SHADOWS

    scene = empty_scene
    light = _stage(scene, "POINT")
    light.energy = 900.0
    for k in range(5):
        ld = bpy.data.lights.new(f"Extra{k}", "POINT")
        ld.energy = 1000.0 + 100.0 * k if k < 3 else 100.0 * k
        ob = bpy.data.objects.new(f"Extra{k}", ld)
        scene.collection.objects.link(ob)
        ob.location = (-3.0 + 1.5 * k, 2.0, 3.0)
    C.render_scene(scene)
    from tools.render_capture import LAST_RENDER

    log = [m for m in LAST_RENDER["log"] if "casts no shadow" in m]
    losses = [m for m in LAST_RENDER["stats"]["losses"] if "casts no shadow" in m]
    assert len(losses) == 6 - MAX_LOCAL_SHADOWS and len(log) == len(losses), (losses, log)
    assert any("'Extra3'" in m for m in losses) and any("'Extra4'" in m for m in losses), losses
    assert LAST_RENDER["pipeline"]["local_shadows"] == MAX_LOCAL_SHADOWS
