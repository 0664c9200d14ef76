"""Render speed paths, part 2 (issues 12, 15): the specialised shader variants
(engine/gpu/passes/mtoon_shaders.py ``SPECIALIZE``).  llvmpipe runs both sides of every branch, so
the passes draw each material with a variant whose material / frame / deformation choices are
compile-time constants.  Every test renders through F12 and compares with the general shaders
(``SPECIALIZE = False``): a variant that drops or changes anything a user would see fails here."""
from __future__ import annotations

import math

import bpy
import numpy as np
import pytest

from conftest import ARTIFACTS, add_camera, add_sun, render_scene, save_png
from stylized_renderer.engine.gpu.passes import mtoon_shaders
from support.mtoon_testlib import float_image
from tools import (
    render_capture,  # noqa: E402  (F12 results: the hook the tests install)
    scenes,
)
from tools.bench_render import duplicate_linked

TOL = 1e-5


@pytest.fixture
def variant_log(monkeypatch):
    """Every (shader key, spec) the passes asked for while rendering."""
    log = []
    real = mtoon_shaders._variant

    def spy(cache, key, spec, make):
        log.append((key, spec))
        return real(cache, key, spec, make)

    monkeypatch.setattr(mtoon_shaders, "_variant", spy)
    return log


def _general(monkeypatch, scene):
    monkeypatch.setattr(mtoon_shaders, "SPECIALIZE", False)
    try:
        return render_scene(scene).copy()
    finally:
        monkeypatch.setattr(mtoon_shaders, "SPECIALIZE", True)


def _defines(log, key):
    return [set(d if isinstance(d, str) else f"{d[0]}={d[1]}" for d in spec) for k, spec in log
            if k == key and spec is not None]


def _pattern(name, w=16, h=16, seed=0, alpha=False):
    """A packed float image with varied colour; ``alpha``: opaque on its left half, 0.05 on the
    right (else opaque)."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.1, 0.8, (h, w, 4)).astype(np.float32)
    a[..., 3] = np.where(np.arange(w)[None, :] < w // 2, 1.0, 0.05) if alpha else 1.0
    return float_image(name, a)


def _sphere(scene, name, location, radius=0.6, material=None):
    me = bpy.data.meshes.new(name)
    import bmesh

    bm = bmesh.new()
    bmesh.ops.create_uvsphere(bm, u_segments=32, v_segments=16, radius=radius, calc_uvs=True)
    bm.to_mesh(me)
    bm.free()
    for p in me.polygons:
        p.use_smooth = True
    ob = bpy.data.objects.new(name, me)
    ob.location = location
    scene.collection.objects.link(ob)
    if material is not None:
        me.materials.append(material)
    return ob


def _mtoon(name, color, alpha_mode="OPAQUE", textures=(), **props):
    mat = bpy.data.materials.new(name)
    p = mat.stylized_mtoon
    p.enabled = True
    p.base_color = color
    p.alpha_mode = alpha_mode
    for slot, img in textures:
        p.texture(slot).image = img
    for k, v in props.items():
        setattr(p, k, v)
    return mat


def _feature_scene(scene):
    """A ground and three spheres whose materials use every texture slot, UV animation, MASK
    and BLEND alpha, a material that receives no shadow and both outline modes; a sun with
    shadows, a point, a spot and an area lamp."""
    scene.render.resolution_x, scene.render.resolution_y = 200, 150
    base = _pattern("spec_base", seed=0, alpha=True)
    img = _pattern("spec_tex", seed=1)
    nrm = _pattern("spec_nrm", seed=2)
    slots = ("shade_multiply", "shading_shift", "emissive", "rim_multiply", "matcap",
             "outline_width_multiply", "uv_animation_mask")
    textured = _mtoon("SpecTextured", (1.0, 0.9, 0.8, 1.0), alpha_mode="MASK",
                      textures=[(s, img) for s in slots] + [("normal", nrm), ("base_color", base)],
                      alpha_cutoff=0.45, uv_animation_scroll_x=0.1, uv_animation_rotation=0.2,
                      outline_width_mode="worldCoordinates", outline_width=0.02, double_sided=True,
                      rim_color=(0.2, 0.2, 0.25))
    blend = _mtoon("SpecBlend", (0.3, 0.6, 1.0, 0.7), alpha_mode="BLEND", textures=[("base_color", base)],
                   receive_shadow=False, outline_width_mode="screenCoordinates", outline_width=0.005)
    plain = _mtoon("SpecPlain", (0.9, 0.5, 0.4, 1.0), outline_width_mode="worldCoordinates",
                   outline_width=0.015)
    ground = _mtoon("SpecGround", (0.6, 0.8, 0.5, 1.0))
    verts = [(-6, -6, 0), (6, -6, 0), (6, 6, 0), (-6, 6, 0)]
    me = bpy.data.meshes.new("SpecGround")
    me.from_pydata(verts, [], [(0, 1, 2, 3)])
    me.materials.append(ground)
    gob = bpy.data.objects.new("SpecGround", me)
    scene.collection.objects.link(gob)
    _sphere(scene, "SpecTextured", (-1.3, 0.0, 0.8), material=textured)
    _sphere(scene, "SpecBlend", (0.0, -0.6, 0.7), material=blend)
    _sphere(scene, "SpecPlain", (1.3, 0.3, 0.8), material=plain)
    add_camera(scene, location=(0.0, -6.0, 2.2), rotation=(math.radians(75), 0.0, 0.0))
    add_sun(scene, rotation=(math.radians(40), 0.0, math.radians(30)), strength=1.5)
    for kind, loc, energy in (("POINT", (2.0, -2.0, 2.0), 20.0), ("SPOT", (-2.0, -2.5, 3.0), 60.0),
                              ("AREA", (0.0, -3.0, 1.5), 10.0)):
        data = bpy.data.lights.new(f"Spec{kind}", kind)
        data.energy = energy
        ob = bpy.data.objects.new(f"Spec{kind}", data)
        ob.location = loc
        if kind in ("SPOT", "AREA"):
            ob.rotation_euler = (math.radians(50), 0.0, math.radians(-30) if kind == "SPOT" else 0.0)
        scene.collection.objects.link(ob)
    st = scene.stylized
    st.shadows = st.outlines = True
    bpy.context.view_layer.update()


def _small_demo(scene):
    """The demo character at 240x160 with shadows and outlines on; returns scene.stylized."""
    from demo.character import build_demo_scene

    build_demo_scene(scene)
    scene.render.resolution_x, scene.render.resolution_y = 240, 160
    scene.render.resolution_percentage = 100
    st = scene.stylized
    st.shadows = st.outlines = True
    return st


def test_variants_match_general_shaders_materials_and_lights(empty_scene, monkeypatch, variant_log):
    """Textures in every slot, UV animation, MASK / BLEND, no shadow received, both outline
    modes, sun + point + spot + area: the specialised frame equals the general one."""
    scene = empty_scene
    _feature_scene(scene)
    spec = render_scene(scene).copy()
    fwd = _defines(variant_log, "mtoon_forward")
    general = _general(monkeypatch, scene)
    save_png(spec, ARTIFACTS / "variants_materials_lights.png")
    # the scene reaches the variants it is meant to check
    assert any("SPEC_ALPHA_MODE=1" in d and "SPEC_TEX_MASK=511" in d and "SPEC_NO_UV_ANIM" not in d for d in fwd), fwd
    assert any("SPEC_ALPHA_MODE=2" in d and "SPEC_NO_SHADOW" in d for d in fwd), fwd
    assert any("SPEC_ALPHA_MODE=0" in d and "SPEC_NO_SHADOW" not in d for d in fwd), fwd
    assert not any("SPEC_NO_CLUSTERS" in d for d in fwd), fwd   # point, spot, area: the clusters
    out = _defines(variant_log, "mtoon_outline")
    assert {"SPEC_OUTLINE_MODE=1", "SPEC_OUTLINE_MODE=2"} <= set().union(*out), out   # world, screen
    assert _defines(variant_log, "mtoon_shadow")
    # a picture with every feature in it
    assert np.ptp(spec[..., :3].reshape(-1, 3), axis=0).min() > 0.3
    assert np.abs(spec - general).max() <= TOL, np.abs(spec - general).max()


def test_variants_match_general_shaders_sun_only_demo(empty_scene, monkeypatch, variant_log):
    """The demo character (sun only: the SPEC_SUN_ONLY variants, OPAQUE without discard, the
    shadow casters' variant that reads no texture): equal to the general shaders."""
    scene = empty_scene
    st = _small_demo(scene)
    spec = render_scene(scene).copy()
    fwd = _defines(variant_log, "mtoon_forward")
    shadow = _defines(variant_log, "mtoon_shadow")
    general = _general(monkeypatch, scene)
    save_png(spec, ARTIFACTS / "variants_demo.png")
    assert fwd and all("SPEC_SUN_ONLY" in d and "SKIN_LBS8" in d for d in fwd), fwd
    assert any("SKIN_MAX4" in d for d in fwd) and any("SKIN_STATIC" in d for d in fwd), fwd   # body, ground
    assert any("SPEC_ALPHA_MODE=0" in d and "SPEC_TEX_MASK=0" in d for d in shadow), shadow
    assert any({"SPEC_LIGHTS=1", "SPEC_PCF=1", "SPEC_CASCADES=3"} <= d for d in fwd), fwd
    assert any("SPEC_NO_RIM" in d for d in fwd) and any("SPEC_NO_RIM" not in d for d in fwd), fwd   # ground
    assert np.abs(spec - general).max() <= TOL, np.abs(spec - general).max()
    # 2x2 PCF and 4 cascades (the PCF radius and cascade count are constants of the variants)
    st.shadow_pcf = False
    st.shadow_cascades = 4
    variant_log.clear()
    spec = render_scene(scene).copy()
    fwd = _defines(variant_log, "mtoon_forward")
    general = _general(monkeypatch, scene)
    assert any({"SPEC_PCF=0", "SPEC_CASCADES=4"} <= d for d in fwd), fwd
    assert np.abs(spec - general).max() <= TOL, np.abs(spec - general).max()


def test_variants_match_general_shaders_deformation(empty_scene, monkeypatch, variant_log):
    """Vertices with more than 8 influences (per-vertex spans) and Preserve Volume palettes are
    drawn with the general skinning, next to items of up to 8 and up to 4 influences and
    instanced linked duplicates drawn with the SKIN_LBS8 / SKIN_MAX4 variants; the frame equals
    the general shaders' and every vertex class was drawn."""
    from support.deform_rigs import build_arm

    scene = empty_scene
    scene.render.resolution_x, scene.render.resolution_y = 240, 160
    arm, ob = build_arm()                                 # Preserve Volume, 2-4 influences
    inf_arm, inf_ob = scenes.build_many_influences(counts=(2, 9, 12, 20))
    inf_arm.location = (-2.0, 0.0, 0.5)
    for b in inf_arm.pose.bones:
        b.rotation_mode = "XYZ"
        b.rotation_euler = (0.2, 0.1, 0.0)
    fan8_arm, _fan8 = scenes.build_many_influences(counts=(1, 5, 6, 8))   # up to 8: "lbs8"
    fan8_arm.location = (-1.2, 0.0, -0.8)
    for b in fan8_arm.pose.bones:
        b.rotation_mode = "XYZ"
        b.rotation_euler = (0.1, 0.3, 0.1)
    rig, _objs = duplicate_linked(arm, (1.0, 0.0, 0.0), ".lbs")
    for o in _objs:
        for m in o.modifiers:
            if m.type == "ARMATURE":
                m.use_deform_preserve_volume = False
    chars = [scenes.build_character(scene)]
    chars[0][0].location = (2.5, 0.0, 0.0)
    for k in (1, 2):
        duplicate_linked(chars[0][0], (0.8 * k, 0.5, 0.0), f".crowd{k}")
    add_camera(scene, location=(1.6, -11.0, 1.3), rotation=(math.radians(90), 0.0, 0.0))
    add_sun(scene, rotation=(0.6, 0.2, 0.3), strength=3.0)
    scene.stylized.shadows = scene.stylized.outlines = True
    scene.frame_set(8)
    spec = render_scene(scene).copy()
    stats = dict(render_capture.LAST_RENDER["pipeline"])
    fwd = _defines(variant_log, "mtoon_forward")
    general = _general(monkeypatch, scene)
    save_png(spec, ARTIFACTS / "variants_deformation.png")
    assert stats["instanced_draws"] > 0, stats
    assert any("SKIN_LBS8" not in d for d in fwd), fwd                   # the general skinning
    assert any("SKIN_LBS8" in d and "SKIN_MAX4" not in d and "SKIN_STATIC" not in d for d in fwd), fwd
    assert any("SKIN_MAX4" in d for d in fwd), fwd
    assert (spec[..., :3].max(axis=-1) > 0.05).sum() > 2000
    assert np.abs(spec - general).max() <= TOL, np.abs(spec - general).max()


def _fxaa_reference(src: np.ndarray) -> tuple:
    """glsl/fxaa.glsl in numpy on an (H, W, 4) linear image (row 0 = bottom, as read back): whole
    texels for the centre and its diagonals, bilinear clamp-to-edge reads along the edge."""
    h, w = src.shape[:2]

    def luma(c):
        return np.sqrt(np.maximum(c[..., :3], 0.0)) @ np.array([0.299, 0.587, 0.114])

    def texel(dx, dy):
        ys = np.clip(np.arange(h) + dy, 0, h - 1)
        xs = np.clip(np.arange(w) + dx, 0, w - 1)
        return src[ys][:, xs]

    def bilinear(u, v):
        x, y = u * w - 0.5, v * h - 0.5
        x0, y0 = np.floor(x), np.floor(y)
        fx, fy = (x - x0)[..., None], (y - y0)[..., None]
        xi = [np.clip(x0 + k, 0, w - 1).astype(int) for k in (0, 1)]
        yi = [np.clip(y0 + k, 0, h - 1).astype(int) for k in (0, 1)]
        top = src[yi[0], xi[0]] * (1 - fx) + src[yi[0], xi[1]] * fx
        bot = src[yi[1], xi[0]] * (1 - fx) + src[yi[1], xi[1]] * fx
        return top * (1 - fy) + bot * fy

    cM = src
    lNW, lNE, lSW, lSE = (luma(texel(dx, dy)) for dx, dy in ((-1, -1), (1, -1), (-1, 1), (1, 1)))
    lM = luma(cM)
    lMin = np.minimum.reduce([lM, lNW, lNE, lSW, lSE])
    lMax = np.maximum.reduce([lM, lNW, lNE, lSW, lSE])
    flat = (lMax - lMin) < np.maximum(0.0312, lMax * 0.125)
    dx = -((lNW + lNE) - (lSW + lSE))
    dy = (lNW + lSW) - (lNE + lSE)
    reduce = np.maximum((lNW + lNE + lSW + lSE) * (0.25 * 0.125), 1.0 / 128.0)
    rcp_min = 1.0 / (np.minimum(np.abs(dx), np.abs(dy)) + reduce)
    dx = np.clip(dx * rcp_min, -8.0, 8.0) / w
    dy = np.clip(dy * rcp_min, -8.0, 8.0) / h
    u = (np.arange(w) + 0.5)[None, :] / w + 0 * dx
    v = (np.arange(h) + 0.5)[:, None] / h + 0 * dy

    def tap(k):
        return bilinear(u + dx * k, v + dy * k)

    a = 0.5 * (tap(1.0 / 3.0 - 0.5) + tap(2.0 / 3.0 - 0.5))
    b = a * 0.5 + 0.25 * (tap(-0.5) + tap(0.5))
    lB = luma(b)
    out = np.where(((lB < lMin) | (lB > lMax))[..., None], a, b)
    return np.where(flat[..., None], cM, out), flat


def test_fxaa_pass_matches_its_reference(empty_scene):
    """F12 of the demo with FXAA equals glsl/fxaa.glsl computed in numpy on the same frame
    rendered without it (the centre and diagonal taps are whole texels); it changes the edges."""
    scene = empty_scene
    st = _small_demo(scene)
    st.fxaa = False
    raw = render_scene(scene).copy()
    st.fxaa = True
    aa = render_scene(scene).copy()
    ref, flat = _fxaa_reference(raw.astype(np.float64))
    err = np.abs(aa - ref).max(-1)
    assert (~flat).sum() > 500 and (np.abs(aa - raw).max(-1) > 0.01).sum() > 300      # it smooths edges
    assert err[flat].max() <= 1e-6                                              # untouched elsewhere
    # edge pixels: the filtered reads (llvmpipe's bilinear weights) within 5e-3; a pixel whose
    # flat/edge or a/b choice sits on a rounding boundary may pick the other branch
    assert np.mean(err[~flat] <= 5e-3) >= 0.99, np.sort(err[~flat])[-20:]
