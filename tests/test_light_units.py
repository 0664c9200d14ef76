"""Blender's light units: the Stylized engine is as bright as EEVEE on the same scene.

Blender's lights are radiometric (sun: irradiance in W/m^2; point, spot, area: power in W) and a
Lambert surface of albedo a reflects a * E / pi.  MToon's "light colour" is that radiance scale
(see README "Light units"), so a Principled sphere's lit side matches EEVEE's where it faces the
light.  Each scene is rendered with both engines in the same process (EEVEE 5.0 is
``BLENDER_EEVEE``; 4 samples) and compared in linear values, Standard view transform for both.
"""
from __future__ import annotations

import math

import bpy
import numpy as np
import pytest
from mathutils import Euler, Vector

import conftest as C
from conftest import render_eevee as _render_eevee  # noqa: E402

W, H = 160, 120
ORTHO = 3.0          # camera ortho scale (metres across)


def _stage(scene, world=0.05, plane=False, specular=True):
    scene.view_settings.view_transform = "Standard"
    w = bpy.data.worlds.new("W")
    w.use_nodes = True
    bg = w.node_tree.nodes["Background"]
    bg.inputs["Color"].default_value = (world, world, world, 1.0)
    bg.inputs["Strength"].default_value = 1.0
    scene.world = w
    if plane:
        bpy.ops.mesh.primitive_plane_add(size=8.0, rotation=(math.pi / 2, 0.0, 0.0))   # faces -Y
    else:
        bpy.ops.mesh.primitive_uv_sphere_add(segments=64, ring_count=32, radius=1.0)
        bpy.ops.object.shade_smooth()
    ob = bpy.context.active_object
    mat = bpy.data.materials.new("White")        # Principled BSDF, base colour 0.8
    mat.use_nodes = True
    if not specular:       # diffuse only: a toon surface has no specular lobe to compare
        bsdf = next(n for n in mat.node_tree.nodes if n.type == "BSDF_PRINCIPLED")
        bsdf.inputs["Specular IOR Level"].default_value = 0.0
    ob.data.materials.append(mat)
    C.add_camera(scene, location=(0.0, -6.0, 0.0), ortho=True)
    scene.camera.data.ortho_scale = ORTHO
    st = getattr(scene, "stylized", None)
    if st is not None:
        st.outlines = False
        st.fxaa = False
    return ob


def _both(scene, tmp_path):
    sty = C.render_scene(scene)
    eev = _render_eevee(scene, tmp_path / "eevee.exr", samples=1)
    C.save_png(np.concatenate([sty, eev], axis=1), C.ARTIFACTS / f"light_units_{tmp_path.name}.png")
    return sty, eev


def _pixel_grid():
    xs = ((np.arange(W) + 0.5) / W - 0.5) * ORTHO
    zs = ((np.arange(H) + 0.5) / H - 0.5) * ORTHO * H / W
    return np.meshgrid(xs, zs)       # world x, z of each pixel centre (row 0 = bottom)


def _sphere_normals():
    X, Z = _pixel_grid()
    r2 = X ** 2 + Z ** 2
    N = np.stack([X, -np.sqrt(np.clip(1.0 - r2, 0.0, 1.0)), Z], -1)
    return N, r2 < 0.85


def _lum(img, mask):
    return float(img[mask][:, :3].mean())


# ------------------------------------------------------------------------------------------------
def test_sun_strength_3_lit_side_matches_eevee(ext, empty_scene, tmp_path):
    """The issue's scene: a white Principled sphere, sun of strength 3, world 0.05.  Before light
    units the lit side read 2.44 in Stylized and 0.77 in EEVEE."""
    _stage(empty_scene)
    rot = (math.radians(60), 0.0, math.radians(-30))
    C.add_sun(empty_scene, rotation=rot, strength=3.0)
    L = np.array(-(Euler(rot).to_matrix() @ Vector((0, 0, -1))))
    sty, eev = _both(empty_scene, tmp_path)
    N, inside = _sphere_normals()
    lit = inside & (N @ L > 0.9)
    assert lit.sum() > 500
    s, e = _lum(sty, lit), _lum(eev, lit)
    print(f"light-units sun 3: stylized={s:.4f} eevee={e:.4f}")
    assert s == pytest.approx(e, rel=0.10), (s, e)


def test_world_strength_matches_eevee(ext, empty_scene, tmp_path):
    """No lamps: the world alone (colour 0.25 x strength 2).  MToon's GI term (world radiance x lit
    colour) equals a Lambert surface's reflection of a uniform world, as in EEVEE."""
    _stage(empty_scene, world=0.25)
    empty_scene.world.node_tree.nodes["Background"].inputs["Strength"].default_value = 2.0
    sty, eev = _both(empty_scene, tmp_path)
    _N, inside = _sphere_normals()
    s, e = _lum(sty, inside), _lum(eev, inside)
    print(f"light-units world 0.25x2: stylized={s:.4f} eevee={e:.4f}")
    assert s == pytest.approx(e, rel=0.10), (s, e)
    assert s == pytest.approx(0.8 * 0.5, rel=0.02)


def _add_light(scene, kind, energy, location, rotation=(0.0, 0.0, 0.0), **props):
    data = bpy.data.lights.new(kind, kind)
    data.energy = energy
    for k, v in props.items():
        setattr(data, k, v)
    ob = bpy.data.objects.new(kind, data)
    ob.location = location
    ob.rotation_euler = rotation
    scene.collection.objects.link(ob)
    return ob


def _disc(cx, cz, radius):
    X, Z = _pixel_grid()
    return (X - cx) ** 2 + (Z - cz) ** 2 < radius ** 2


FACING_PLUS_Y = (math.pi / 2, 0.0, 0.0)        # a lamp's -Z turned to +Y (towards the plane)


@pytest.mark.parametrize("kind", ["POINT", "SPOT", "AREA"])
def test_local_lights_match_eevee(ext, empty_scene, tmp_path, kind):
    """A plane facing a lamp 2 m (area: 3 m) in front of it: point and spot power P [W] give a
    Lambert surface a * P / (4 pi^2 r^2); an area lamp (0.5 m square, one-sided) a * P cos / (pi^2 r^2)
    in the far field.  Compared with EEVEE at the centre and off-centre (Principled specular off:
    with the lamp behind the camera its highlight sits at the centre)."""
    _stage(empty_scene, world=0.0, plane=True, specular=False)
    if kind == "AREA":
        _add_light(empty_scene, kind, 100.0, (0.0, -3.0, 0.0), FACING_PLUS_Y, size=0.5)
    elif kind == "SPOT":
        _add_light(empty_scene, kind, 100.0, (0.0, -2.0, 0.0), FACING_PLUS_Y,
                   spot_size=math.radians(40), spot_blend=0.3)
    else:
        _add_light(empty_scene, kind, 100.0, (0.0, -2.0, 0.0))
    sty, eev = _both(empty_scene, tmp_path)
    centre = _disc(0.0, 0.0, 0.15)
    s, e = _lum(sty, centre), _lum(eev, centre)
    print(f"light-units {kind} centre: stylized={s:.4f} eevee={e:.4f}")
    assert s == pytest.approx(e, rel=0.10), (kind, s, e)
    if kind == "SPOT":
        outside = _disc(1.2, 0.0, 0.1)          # 31 degrees off-axis: outside the 20-degree cone
        assert _lum(sty, outside) < 0.01 and _lum(eev, outside) < 0.01
    else:
        off = _disc(0.9, 0.0, 0.1)              # the falloff with distance (and the area's cosine)
        s, e = _lum(sty, off), _lum(eev, off)
        print(f"light-units {kind} off-centre: stylized={s:.4f} eevee={e:.4f}")
        assert s == pytest.approx(e, rel=0.12), (kind, s, e)


def test_light_exposure_temperature_and_diffuse_factor(ext, empty_scene):
    """What Blender multiplies into a lamp (BKE_light_power x BKE_light_color, EEVEE's diffuse
    factor): exposure 1 doubles the power, a blackbody temperature tints, diffuse factor scales;
    an unnormalised area lamp's strength is per unit area."""
    ob = _stage(empty_scene, world=0.0)
    sun = C.add_sun(empty_scene, rotation=(math.pi / 2, 0.0, 0.0), strength=1.0)   # from the camera
    N, inside = _sphere_normals()
    lit = inside & (N @ np.array([0.0, -1.0, 0.0]) > 0.9)
    base = C.render_scene(empty_scene)[lit][:, :3].mean(0)
    sun.data.exposure = 1.0
    assert np.allclose(C.render_scene(empty_scene)[lit][:, :3].mean(0), 2.0 * base, rtol=1e-3)
    sun.data.exposure = 0.0
    sun.data.diffuse_factor = 0.5
    assert np.allclose(C.render_scene(empty_scene)[lit][:, :3].mean(0), 0.5 * base, rtol=1e-3)
    sun.data.diffuse_factor = 1.0
    sun.data.use_temperature = True
    sun.data.temperature = 3000.0
    tint = np.array(sun.data.temperature_color[:3])
    assert tint[0] > tint[2]
    assert np.allclose(C.render_scene(empty_scene)[lit][:, :3].mean(0), base * tint, rtol=2e-3)
    del ob

    # area: normalize off = the strength is per m^2 of the lamp (x its area)
    bpy.data.objects.remove(sun)
    area = _add_light(empty_scene, "AREA", 50.0, (0.0, -3.0, 0.0), FACING_PLUS_Y, size=0.5)
    a = C.render_scene(empty_scene)[lit][:, :3].mean()
    area.data.normalize = False
    b = C.render_scene(empty_scene)[lit][:, :3].mean()
    assert b == pytest.approx(a * 0.25, rel=1e-3)


def test_view_exposure_is_applied_by_blender_once(ext, empty_scene, tmp_path):
    """The engine hands Blender linear scene-referred pixels; Blender applies the view transform and
    the exposure when it displays or saves them.  So the engine's pixels do not change with
    exposure, and the saved file is exactly 2^exposure brighter (not 4x: applied once)."""
    _stage(empty_scene, world=0.05)
    C.add_sun(empty_scene, rotation=(math.pi / 2, 0.0, 0.0), strength=1.0)
    outs, saved = {}, {}
    for ev in (0.0, 1.0):
        empty_scene.view_settings.exposure = ev
        empty_scene.render.image_settings.file_format = "PNG"
        empty_scene.render.image_settings.color_depth = "16"
        path = tmp_path / f"saved{int(ev)}.png"
        empty_scene.render.filepath = str(path)
        outs[ev] = C.render_scene(empty_scene, write_still=True)
        img = bpy.data.images.load(str(path), check_existing=False)
        try:
            img.colorspace_settings.name = "Non-Color"      # the stored display values
            saved[ev] = np.array(img.pixels[:], np.float32).reshape(H, W, 4)[..., :3]
        finally:
            bpy.data.images.remove(img)
    assert np.array_equal(outs[0.0], outs[1.0]), "the engine must not apply the exposure itself"

    def srgb(x):
        x = np.clip(x, 0.0, 1.0)
        return np.where(x <= 0.0031308, 12.92 * x, 1.055 * np.power(x, 1 / 2.4) - 0.055)

    lin = outs[0.0][..., :3]
    ok = lin.max(-1) < 0.45                          # not clipped at exposure 1
    assert np.allclose(saved[0.0][ok], srgb(lin[ok]), atol=2e-3)
    assert np.allclose(saved[1.0][ok], srgb(2.0 * lin[ok]), atol=2e-3)
