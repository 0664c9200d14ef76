"""View-fitted cascaded shadow maps for the sun (engine/gpu/passes/shadow.py).

* the demo character's shadow does not depend on how big the ground is (the maps follow the
  camera's view, not the scene's bounds);
* a vertex at 1e20 breaks nothing (no NaN, the shadow stays);
* the fit is texel-snapped: moving the camera moves each cascade's projection by whole texels
  and keeps its texel size, so shadow edges do not swim;
* cascades meet without a seam (blended), and the near cascade is sharper than one map would be.
"""
from __future__ import annotations

import math
from typing import Any

import bpy
import numpy as np
import pytest

import conftest as C
from support import mtoon_testlib as T


def _demo_scene(ground_scale=1.0, percentage=50):
    from demo.character import build_demo_scene

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.render.engine = "STYLIZED"
    objs = build_demo_scene(scene)
    scene.render.resolution_percentage = percentage
    objs["ground"].scale = (ground_scale, ground_scale, 1.0)
    bpy.context.view_layer.update()
    return scene, objs


def _shadow_mask(scene, name):
    """Pixels the shadow darkens: a render with shadows on against one with them off."""
    scene.stylized.shadows = True
    on = C.render_scene(scene)
    scene.stylized.shadows = False
    off = C.render_scene(scene)
    scene.stylized.shadows = True
    C.save_png(on, C.ARTIFACTS / f"cascades_{name}.png")
    assert np.all(np.isfinite(on)), f"{name}: non-finite pixels"
    lum_on = on[..., :3] @ np.array([0.2126, 0.7152, 0.0722])
    lum_off = off[..., :3] @ np.array([0.2126, 0.7152, 0.0722])
    return lum_off - lum_on > 0.02


def test_shadow_does_not_depend_on_the_ground_size(ext):
    """The demo character on its 20 m ground and on the same ground scaled to 2 km: at least 70 % of
    the shadowed pixels stay (the whole-scene fit kept 39 of about 4,900 at 640x480)."""
    scene, _ = _demo_scene(1.0)
    small = _shadow_mask(scene, "ground_20m")
    scene, _ = _demo_scene(100.0)
    big = _shadow_mask(scene, "ground_2km")
    print(f"cascades: shadowed pixels 20 m ground={small.sum()} 2 km ground={big.sum()}")
    assert small.sum() > 800, small.sum()
    assert big.sum() >= 0.7 * small.sum(), (small.sum(), big.sum())
    # the same pixels, not just as many
    assert (small & big).sum() >= 0.7 * small.sum()


def test_far_vertex_breaks_nothing(ext):
    """A mesh with a vertex at 1e20 in the scene: no NaN pixels and the character still casts."""
    scene, _ = _demo_scene(1.0)
    ref = _shadow_mask(scene, "ref")
    mat = C.add_material("Far", (0.5, 0.5, 0.5))
    C.add_mesh_object(scene, "Far", [(-1.0, 8.0, -0.5), (1.0, 8.0, -0.5), (1e20, 1e20, -0.5)], [(0, 1, 2)],
                      material=mat)
    bpy.context.view_layer.update()
    far = _shadow_mask(scene, "far_vertex")
    print(f"cascades: shadowed pixels without={ref.sum()} with a 1e20 vertex={far.sum()}")
    assert far.sum() >= 0.7 * ref.sum(), (ref.sum(), far.sum())


# ------------------------------------------------------------------------------------------------
# the fit (numpy, no GPU)
# ------------------------------------------------------------------------------------------------

def _items(*boxes):
    from types import SimpleNamespace

    from stylized_renderer.engine.core.assets import Bounds

    return [SimpleNamespace(world_bounds=Bounds(np.array(lo, float), np.array(hi, float)))
            for lo, hi in boxes]


def _fit(cam, items, count=4, res=2048):
    from stylized_renderer.engine.gpu.passes.shadow import fit_cascades

    return fit_cascades(np.array([0.3, 0.5, -0.8]), cam, items, items, count=count, resolution=res,
                        max_distance=100.0, split_lambda=0.8, fade=0.1)


def test_fit_is_texel_snapped_while_the_camera_moves():
    """Each cascade's light-space window moves by whole texels and keeps its texel size as the
    camera slides and turns, so a static shadow's texels stay where they are (no swimming)."""
    # a 200 m ground (the 50 m clip ends the view) and a 20 m one (the geometry ends it: the depth
    # range is rounded to 1/8-octave steps so it does not change the splits at every step)
    for size, moves in ((100.0, [(0.0131, 0.0, 0.0), (0.2, 0.077, 0.0), (0.0, 0.0, 0.05), (-0.31, 0.12, 0.2)]),
                        (10.0, [(0.0131, 0.0, 0.0), (0.0, 0.021, 0.0), (0.0, 0.0, 0.01)])):
        _check_snapping(size, moves)


def _check_snapping(size, moves):
    scene = _items(((-size, -size, -0.1), (size, size, 0.0)), ((-0.3, -0.3, 0.0), (0.3, 0.3, 1.8)))
    base = _fit(T.persp_camera(location=(0.3, -5.0, 1.6), target=(0, 0, 1.0), near=0.1, far=50.0), scene)
    assert base is not None and len(base.matrices) == 4
    for k, (dx, dy, yaw) in enumerate(moves):
        tgt = np.array([dx, dy, 1.0]) + np.array([math.sin(yaw), math.cos(yaw) - 1.0, 0.0])
        cam = T.persp_camera(location=(0.3 + dx, -5.0 + dy, 1.6), target=tgt, near=0.1, far=50.0)
        fit = _fit(cam, scene)
        assert fit is not None
        for i in range(4):
            assert fit.texel[i] == pytest.approx(base.texel[i], rel=1e-9), (size, k, i)
            # same light rotation; the window's origin differs by whole texels
            a, b = base.matrices[i], fit.matrices[i]
            assert np.allclose(a[:2, :3], b[:2, :3], rtol=1e-9, atol=1e-12)
            shift = (a[:2, 3] - b[:2, 3]) / (2.0 / base.tile) / 1.0   # NDC shift in texels
            assert np.allclose(shift, np.round(shift), atol=1e-4), (size, k, i, shift)


def test_fit_keeps_its_projections_while_a_character_moves_a_little():
    """A character moving a little (as between a frame's motion-blur instants, or from one frame to
    the next) keeps every cascade's projection: the depth its casters reach towards the sun is
    rounded up in 1/8-octave steps, so the static casters' cached depth (shadow_cache.py) stays
    valid and only the character is drawn again (before, the near plane followed the character's
    top and every tile it reached was redrawn at every instant)."""
    cam = T.persp_camera(location=(0.3, -5.0, 1.6), target=(0, 0, 1.0), near=0.1, far=50.0)
    # a 3 m ground and a 5 m tall figure: the figure's top is what reaches farthest towards the sun
    ground = ((-1.5, -1.5, -0.1), (1.5, 1.5, 0.0))
    base = _fit(cam, _items(ground, ((-0.3, -0.3, 0.0), (0.3, 0.3, 5.0))))
    low = _fit(cam, _items(ground, ((-0.3, -0.3, 0.0), (0.3, 0.3, 1.8))))
    assert base is not None and low is not None
    assert np.all(base.depth_range > low.depth_range)        # the figure sets the near planes
    for k, dx in enumerate((0.004, 0.011, -0.007, 0.019)):
        fit = _fit(cam, _items(ground, ((-0.3 + dx, -0.3, 0.0), (0.3 + dx, 0.3, 5.0 + dx))))
        assert fit is not None
        for i in range(4):
            assert np.array_equal(fit.matrices[i], base.matrices[i]), (k, i, fit.matrices[i] - base.matrices[i])
    # the sub-pixel offsets of a render's samples (each motion-blur sample fits its own instant)
    # keep the projections too: the light-space centre is snapped along the sun as well
    from stylized_renderer.engine.gpu.passes.samples import jittered

    # (a centre that lies within a jitter of a half texel rounds the other way: a whole-texel step)
    scene = _items(ground, ((-0.3, -0.3, 0.0), (0.3, 0.3, 5.0)))
    kept = 0
    for dx, dy in ((0.25, -0.125), (-0.375, 0.375), (0.0625, 0.3125), (-0.1875, -0.4375)):
        fit = _fit(jittered(cam, dx, dy, 1280, 720), scene)
        assert fit is not None
        kept += sum(np.array_equal(fit.matrices[i], base.matrices[i]) for i in range(4))
    assert kept >= 8, kept      # of 16: 11 here (none before: the centre's depth followed the offset)
    # a caster far taller still widens the far cascade's depth (its shadow is kept)
    tall = _fit(cam, _items(ground, ((-0.3, -0.3, 0.0), (0.3, 0.3, 30.0))))
    assert tall is not None and tall.depth_range[-1] > 2.0 * base.depth_range[-1]


def test_fit_splits_follow_the_view_and_ignore_huge_bounds():
    """Practical splits between the view's near and far (the nearer of the camera's far clip, the
    shadow distance and the farthest visible geometry); a 1e20 or non-finite box changes neither
    the splits nor the texel size."""
    cam = T.persp_camera(location=(0.0, -5.0, 1.6), target=(0, 0, 1.0), near=0.1, far=1000.0)
    scene = _items(((-10, -10, -0.1), (10, 10, 0.0)), ((-0.3, -0.3, 0.0), (0.3, 0.3, 1.8)))
    fit = _fit(cam, scene)
    assert fit is not None
    assert np.all(np.diff(fit.splits) > 0) and fit.splits[-1] <= 100.0 + 1e-6
    huge = scene + _items(((-1e20, -1e20, -1e20), (1e20, 1e20, 1e20)), ((np.nan, 0, 0), (1, 1, 1)))
    fit2 = _fit(cam, huge)
    assert fit2 is not None
    assert np.all(np.isfinite(np.concatenate([m.ravel() for m in fit2.matrices])))
    assert np.all(np.isfinite(fit2.depth_range)) and np.all(fit2.depth_range < 1e5)
    for i in range(4):
        assert np.isfinite(fit2.texel[i]) and fit2.texel[i] < 1.0


# ------------------------------------------------------------------------------------------------
# pixels: the near cascade is sharp, the boundaries do not show
# ------------------------------------------------------------------------------------------------

def _pole_scene(cascades, shadows=True, width=192, height=128):
    """A row of thin poles receding from the camera across a 200 m ground: each casts a thin
    shadow line; near the camera the lines need the near cascade's texels to show at all."""
    ground = T.quad([(-100, -10, 0), (100, -10, 0), (100, 190, 0), (-100, 190, 0)])
    specs = [T.item_spec(ground, "G", object_id=1)]
    pole = T.box(1.0)
    for k in range(16):
        y = 1.35 ** k - 1.0
        world = np.diag([0.03 + 0.01 * y, 0.03 + 0.01 * y, 1.2, 1.0])
        world[:3, 3] = (0.0, y, 0.6)
        specs.append(T.item_spec(pole, "P", object_id=2 + k, world=world))
    mats = {"G": T_params(base_color=(0.8, 0.8, 0.8, 1), shade_color=(0.1, 0.2, 0.6)),
            "P": T_params(base_color=(0.9, 0.2, 0.2, 1), shade_color=(0.4, 0.1, 0.1))}
    cam = T.persp_camera(location=(-2.5, -4.0, 2.5), target=(0.5, 4.0, 0.0), fov_y=0.7,
                         aspect=width / height, near=0.1, far=300.0)
    col, aux = T.render_direct(specs, mats, [T.sun((1.0, 0.15, -0.6))], cam, width=width, height=height,
                               outlines=False, world_color=np.zeros(3), shadows=shadows,
                               shadow_cascades=cascades, shadow_resolution=1024)
    return col, aux


def T_params(**kw):
    from stylized_renderer.engine.core.assets.material import MToonParams

    base: dict[str, Any] = dict(shading_toony=0.95, gi_equalization=0.9)
    base.update(kw)
    return MToonParams(**base)


def _ground_shadow(col, aux, off):
    lum = col[..., :3].mean(-1)
    return (aux[..., 3] == 1) & (off[..., :3].mean(-1) - lum > 0.05)


def test_near_cascade_resolves_thin_shadows_one_map_does_not(ext, empty_scene):
    off, _ = _pole_scene(1, shadows=False)
    col4, aux4 = _pole_scene(4)
    col1, aux1 = _pole_scene(1)
    C.save_png(np.concatenate([col4, col1], axis=1), C.ARTIFACTS / "cascades_poles_4_vs_1.png")
    s4, s1 = _ground_shadow(col4, aux4, off), _ground_shadow(col1, aux1, off)
    print(f"cascades: pole shadow pixels 4 cascades={s4.sum()} 1 map={s1.sum()}")
    assert s4.sum() > 150 and s4.sum() > 1.5 * s1.sum(), (s4.sum(), s1.sum())


def test_cascade_borders_do_not_show(ext, empty_scene):
    """A long wall's shadow runs from the near cascade to the far one across the ground: its width
    on screen changes smoothly (no step at a cascade border), and blending keeps it continuous."""
    ground = T.quad([(-100, -10, 0), (100, -10, 0), (100, 190, 0), (-100, 190, 0)])
    wall = T.box(1.0)
    world = np.diag([0.2, 60.0, 2.0, 1.0])
    world[:3, 3] = (0.0, 29.0, 1.0)
    mats = {"G": T_params(base_color=(0.8, 0.8, 0.8, 1), shade_color=(0.1, 0.2, 0.6)),
            "P": T_params(base_color=(0.9, 0.2, 0.2, 1), shade_color=(0.4, 0.1, 0.1))}
    cam = T.persp_camera(location=(5.0, -4.0, 3.0), target=(1.0, 10.0, 0.0), fov_y=0.7, aspect=1.5,
                         near=0.1, far=300.0)
    specs = [T.item_spec(ground, "G", object_id=1), T.item_spec(wall, "P", object_id=2, world=world)]
    kw: dict[str, Any] = dict(width=240, height=160, outlines=False, world_color=np.zeros(3), shadow_resolution=1024)
    col, aux = T.render_direct(specs, mats, [T.sun((1.0, 0.0, -1.0))], cam, shadow_cascades=4, **kw)
    off, _ = T.render_direct(specs, mats, [T.sun((1.0, 0.0, -1.0))], cam, shadows=False, **kw)
    C.save_png(col, C.ARTIFACTS / "cascades_wall.png")
    shadow = _ground_shadow(col, aux, off)
    rows = [r for r in range(160) if (aux[r, :, 3] == 1).sum() > 20]
    widths = np.array([shadow[r].sum() for r in rows], float)
    assert (widths > 0).sum() > 40, widths
    w = widths[widths > 0]
    # no row's shadow width jumps by more than 3 px (+ 15 %) from its neighbour's
    jumps = np.abs(np.diff(w))
    assert np.all(jumps <= 3 + 0.15 * w[1:]), w


# ------------------------------------------------------------------------------------------------
# a real face at the defaults: no acne, no drop-shadows of the eyes, the hair still shadows
# ------------------------------------------------------------------------------------------------

GODETTE = C.TESTDATA / "vrm" / "Godette_vrm0.blend"


@pytest.mark.skipif(not GODETTE.exists(), reason="shared test data not present")
def test_face_close_up_is_clean_at_the_defaults(ext):
    """Godette (VRM 0.x, the VRM Add-on's MToon materials; the add-on is not needed) with its
    camera moved to a face close-up, default shadow settings.  In a band across the eyes and
    cheeks, below the hair fringe, no skin pixel may be darkened by the shadow: that band showed
    acne (moire) and the eyes' drop-shadows (about 40 % of its skin pixels before).  The hair
    fringe must still shadow the forehead."""
    bpy.ops.wm.open_mainfile(filepath=str(GODETTE))
    scene = bpy.context.scene
    scene.render.engine = "STYLIZED"
    bpy.data.objects["HeldoutCamera"].location = (0.0, -1.0, 1.2)
    scene.render.resolution_x = scene.render.resolution_y = 400
    scene.render.resolution_percentage = 100
    bpy.context.view_layer.update()
    on = C.render_scene(scene)
    scene.stylized.shadows = False
    off = C.render_scene(scene)
    C.save_png(np.concatenate([on, off], axis=1), C.ARTIFACTS / "face_close_up.png")
    assert np.all(np.isfinite(on))
    h, w = on.shape[:2]
    darker = (off - on)[..., :3].mean(-1) > 0.02
    skin = (off[..., 0] > 0.5) & (off[..., 1] > 0.3) & (off[..., 2] > 0.3)

    def band(top, bottom):          # rows between these fractions of the height, from the top
        m = np.zeros((h, w), bool)
        m[int(h * (1 - bottom)):int(h * (1 - top)), int(0.15 * w):int(0.85 * w)] = True
        return m & skin

    eyes, forehead = band(0.45, 0.72), band(0.33, 0.45)
    print(f"face: shadowed skin eyes/cheeks={(eyes & darker).sum()} of {eyes.sum()}, "
          f"forehead={(forehead & darker).sum()} of {forehead.sum()}")
    assert eyes.sum() > 10000
    assert (eyes & darker).sum() <= 0.005 * eyes.sum()
    assert (forehead & darker).sum() > 0.05 * forehead.sum(), "the hair fringe no longer shadows the forehead"


# ------------------------------------------------------------------------------------------------
# per-material cast / receive, as Blender 5.0 and the VRM Add-on store them
# ------------------------------------------------------------------------------------------------

def _flag_scene(make_cube_mat, make_ground_mat):
    """A 1 m cube over a ground, the sun 45 degrees from the zenith towards +X (the shadow falls
    towards -X), an orthographic top view.  Returns (render, shadow band, open ground band)."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    cube_mat, ground_mat = make_cube_mat(), make_ground_mat()
    scene = bpy.context.scene
    scene.render.engine = "STYLIZED"
    scene.render.resolution_x = scene.render.resolution_y = 64
    scene.render.resolution_percentage = 100
    scene.stylized.outlines = False
    scene.stylized.fxaa = False
    v, f = C.cube_geometry(1.0)
    C.add_mesh_object(scene, "Ground", [(-3, -3, 0), (3, -3, 0), (3, 3, 0), (-3, 3, 0)], [(0, 1, 2, 3)],
                      material=ground_mat)
    C.add_mesh_object(scene, "Cube", v, f, location=(0, 0, 1.0), material=cube_mat)
    C.add_sun(scene, rotation=(0.0, math.radians(45), 0.0), strength=3.0)
    C.add_camera(scene, location=(0.0, 0.0, 6.0), rotation=(0.0, 0.0, 0.0), ortho=True)
    scene.camera.data.ortho_scale = 6.0
    bpy.context.view_layer.update()
    px = C.render_scene(scene)
    xs = ((np.arange(64) + 0.5) / 64 - 0.5) * 6.0
    shadow = px[28:36][:, (xs > -1.8) & (xs < -0.7), :3].mean()
    open_ = px[28:36][:, (xs > 1.0) & (xs < 2.0), :3].mean()
    return px, shadow, open_


def _disable_shadow_mix(mat, camera_ray_unlit=False):
    """Blender's versioning layout for "Shadow Mode: None" (Mix "Disable Shadow": Is Shadow Ray,
    surface, Transparent), or the glTF importer's unlit one (Is Camera Ray: Transparent, Emission)."""
    nt = mat.node_tree
    out = next(n for n in nt.nodes if n.type == "OUTPUT_MATERIAL")
    surface = out.inputs["Surface"].links[0].from_socket
    lp = nt.nodes.new("ShaderNodeLightPath")
    mix = nt.nodes.new("ShaderNodeMixShader")
    tr = nt.nodes.new("ShaderNodeBsdfTransparent")
    if camera_ray_unlit:
        em = nt.nodes.new("ShaderNodeEmission")
        em.inputs["Color"].default_value = (0.9, 0.1, 0.1, 1.0)
        nt.links.new(lp.outputs["Is Camera Ray"], mix.inputs[0])
        nt.links.new(tr.outputs[0], mix.inputs[1])
        nt.links.new(em.outputs[0], mix.inputs[2])
    else:
        nt.links.new(lp.outputs["Is Shadow Ray"], mix.inputs[0])
        nt.links.new(surface, mix.inputs[1])
        nt.links.new(tr.outputs[0], mix.inputs[2])
    nt.links.new(mix.outputs[0], out.inputs["Surface"])
    return mat


def test_material_that_casts_no_shadow_in_eevee_casts_none(ext):
    """EEVEE 5.0 (measured): a surface that shadow rays see as a Transparent BSDF casts nothing
    while the material's Transparent Shadows is on (the default), and casts when it is off."""
    def ground():
        return C.add_material("Ground", (0.8, 0.8, 0.8))

    def plain():
        return C.add_material("Cube", (0.9, 0.1, 0.1))

    _px, shadow, open_ = _flag_scene(plain, ground)
    assert shadow < 0.8 * open_, (shadow, open_)                      # a plain material casts

    for unlit in (False, True):
        def no_cast(opaque_shadows=False):
            m = _disable_shadow_mix(plain(), camera_ray_unlit=unlit)
            m.use_transparent_shadow = not opaque_shadows
            return m

        px, shadow, open_ = _flag_scene(no_cast, ground)
        assert shadow == pytest.approx(open_, rel=0.02), (unlit, shadow, open_)
        top = px[30:34, 30:34, :3].mean((0, 1))                       # the cube is still drawn, red
        assert top[0] > 3 * top[1], (unlit, top)
        _px, shadow, open_ = _flag_scene(lambda: no_cast(True), ground)
        assert shadow < 0.8 * open_, (unlit, shadow, open_)


def test_vrm_addon_receive_shadow_rate(ext):
    """The VRM Add-on keeps MToon 0.x's receive-shadow rate (no such thing in MToon 1.0) as
    vrm_addon_extension.mtoon1.mtoon0_receive_shadow_rate; stored in the file it is read without
    the add-on: 1 receives the full shadow, 0 none, 0.75 three quarters of it."""
    from support.vrm_materials import make_vrm_material

    results = {}
    for rate in (None, 1.0, 0.75, 0.0):
        def ground():
            m = make_vrm_material("VrmGround")
            if rate is not None:
                m["vrm_addon_extension"] = {"mtoon1": {"mtoon0_receive_shadow_rate": rate}}
            return m

        _px, shadow, open_ = _flag_scene(lambda: C.add_material("Cube", (0.9, 0.1, 0.1)), ground)
        results[rate] = (shadow, open_)
    print("vrm receive rate:", results)
    full = results[1.0][1] - results[1.0][0]
    assert full > 0.05, results
    assert results[None] == pytest.approx(results[1.0], rel=1e-4)      # the add-on's default is 1
    assert results[0.0][0] == pytest.approx(results[0.0][1], rel=0.01)
    part = results[0.75][1] - results[0.75][0]
    assert part == pytest.approx(0.75 * full, rel=0.05), (part, full)


def test_farthest_surface_keeps_its_shadow(ext, empty_scene):
    """Seen straight from above (orthographic), the ground is the farthest visible surface: the
    cascades end at it and must not fade its shadow out (only the shadow distance fades)."""
    from stylized_renderer.engine.core.world.frame import CameraData

    ground = T.quad([(-3, -3, 0), (3, -3, 0), (3, 3, 0), (-3, 3, 0)])
    cube = T.box(1.0, (0, 0, 1.0))
    mats = {"G": T_params(base_color=(0.8, 0.8, 0.8, 1), shade_color=(0.1, 0.2, 0.6)),
            "C": T_params(base_color=(0.9, 0.2, 0.2, 1), shade_color=(0.4, 0.1, 0.1))}
    cam_world = np.eye(4)
    cam_world[:3, 3] = (0.0, 0.0, 8.0)                  # looks down -Z
    proj = np.eye(4)
    proj[0, 0] = proj[1, 1] = 1.0 / 3.0
    n, f = 0.1, 40.0
    proj[2, 2], proj[2, 3] = -2.0 / (f - n), -(f + n) / (f - n)
    cam = CameraData(view=np.linalg.inv(cam_world), projection=proj, is_ortho=True)
    specs = [T.item_spec(ground, "G", object_id=1), T.item_spec(cube, "C", object_id=2)]
    col, aux = T.render_direct(specs, mats, [T.sun((0.5, 0.0, -1.0))], cam, outlines=False,
                               world_color=np.zeros(3))
    C.save_png(col, C.ARTIFACTS / "cascades_ortho_top.png")
    shade = (aux[..., 3] == 1) & (np.abs(col[..., :3] - (0.1, 0.2, 0.6)).max(-1) < 0.05)
    assert shade.sum() > 200, shade.sum()
    # a shadow distance shorter than the view fades it out instead
    col, aux = T.render_direct(specs, mats, [T.sun((0.5, 0.0, -1.0))], cam, outlines=False,
                               world_color=np.zeros(3), shadow_distance=4.0)
    shade = (aux[..., 3] == 1) & (np.abs(col[..., :3] - (0.1, 0.2, 0.6)).max(-1) < 0.05)
    assert shade.sum() == 0, shade.sum()
