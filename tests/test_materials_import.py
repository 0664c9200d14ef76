"""Materials as Blender's importers make them: glTF files written here and imported with Blender's
own glTF importer (so the node trees are exactly what a user gets), rendered with F12 and read back
as pixels; plus the resolver on the shared real-world files.

Every pixel test compares parts of one picture with each other (colour channels, ratios, the
sunlit against the unlit side), never absolute brightness, so it holds whatever light units the
engine uses.  Each one fails when the node pattern behind it is not read.
"""
from __future__ import annotations

import json
import math
import pathlib
from typing import Any

import bpy
import numpy as np
import pytest

import conftest as C
from conftest import render_eevee as _render_eevee  # noqa: E402

W, H = 160, 120
ORTHO = 4.0            # the camera sees x in [-2, 2], z in [-1.5, 1.5]


# ------------------------------------------------------------------------------------------------
# glTF files built here, imported with Blender's importer
# ------------------------------------------------------------------------------------------------

def _importer_ready():
    """Blender's bundled glTF add-on (enabled in a factory session; enabled here if not)."""
    import addon_utils

    if not addon_utils.check("io_scene_gltf2")[1]:
        addon_utils.enable("io_scene_gltf2", default_set=True)


def quad_xz(x0, x1, z0, z1, y=0.0, uv=((0, 0), (1, 0), (1, 1), (0, 1))):
    """A quad in the XZ plane facing -Y (towards the test camera), Blender coordinates."""
    p = np.array([(x0, y, z0), (x1, y, z0), (x1, y, z1), (x0, y, z1)], np.float32)
    n = np.tile(np.array([0.0, -1.0, 0.0], np.float32), (4, 1))
    return dict(positions=p, normals=n, uvs=np.array(uv, np.float32), indices=np.array([0, 1, 2, 0, 2, 3], np.uint32))


def sphere(center=(0, 0, 0), radius=1.0, seg=48, rings=24):
    th = np.linspace(0.0, np.pi, rings + 1)
    ph = np.linspace(0.0, 2 * np.pi, seg + 1)
    T, P = np.meshgrid(th, ph, indexing="ij")
    n = np.stack([np.sin(T) * np.cos(P), np.sin(T) * np.sin(P), np.cos(T)], -1).reshape(-1, 3)
    uv = np.stack([P / (2 * np.pi), 1.0 - T / np.pi], -1).reshape(-1, 2)
    idx = []
    w = seg + 1
    for i in range(rings):
        for j in range(seg):
            a, b, c, d = i * w + j, i * w + j + 1, (i + 1) * w + j, (i + 1) * w + j + 1
            if i != 0:
                idx += [a, c, b]
            if i != rings - 1:
                idx += [b, c, d]
    pos = n * radius + np.asarray(center, np.float64)
    idx = np.array(idx, np.uint32).reshape(-1, 3)
    # outward winding
    p0, p1, p2 = pos[idx[:, 0]], pos[idx[:, 1]], pos[idx[:, 2]]
    flip = np.einsum("ij,ij->i", np.cross(p1 - p0, p2 - p0), p0 - np.asarray(center)) < 0
    idx[flip] = idx[flip][:, [0, 2, 1]]
    return dict(positions=pos.astype(np.float32), normals=n.astype(np.float32), uvs=uv.astype(np.float32),
                indices=idx.ravel())


def write_png(path, rgba_srgb):
    """An 8-bit sRGB PNG from an (H, W, 4) array of sRGB-encoded values in [0, 1] (row 0 = bottom)."""
    a = np.asarray(rgba_srgb, np.float32)
    h, w = a.shape[:2]
    img = bpy.data.images.new("__png__", width=w, height=h, alpha=True)
    try:
        img.pixels.foreach_set(np.ascontiguousarray(a).ravel())
        img.filepath_raw = str(path)
        img.file_format = "PNG"
        img.save()
    finally:
        bpy.data.images.remove(img)
    return path


def write_gltf(path: pathlib.Path, prims, materials, images=(), extensions_used=()):
    """A .gltf (+ .bin) with one node per primitive.  ``prims``: dicts of Blender-space positions,
    normals, uvs (Blender V up), optional colors (N, 4 linear) and indices, plus ``material``
    (index) and ``name``.  ``images``: PNG file names next to the .gltf (one texture each, nearest
    filtering)."""
    blob = bytearray()
    views, accessors, meshes, nodes = [], [], [], []

    def add(arr, comp, typ, target, minmax=False):
        arr = np.ascontiguousarray(arr)
        while len(blob) % 4:
            blob.append(0)
        views.append(dict(buffer=0, byteOffset=len(blob), byteLength=arr.nbytes, target=target))
        blob.extend(arr.tobytes())
        acc: dict[str, object] = dict(bufferView=len(views) - 1, componentType=comp, count=int(arr.shape[0]), type=typ)
        if minmax:
            acc["min"] = [float(v) for v in arr.min(0)]
            acc["max"] = [float(v) for v in arr.max(0)]
        accessors.append(acc)
        return len(accessors) - 1

    for k, p in enumerate(prims):
        bp = np.asarray(p["positions"], np.float32)
        bn = np.asarray(p["normals"], np.float32)
        gp = np.stack([bp[:, 0], bp[:, 2], -bp[:, 1]], 1)          # Blender Z-up -> glTF Y-up
        gn = np.stack([bn[:, 0], bn[:, 2], -bn[:, 1]], 1)
        attrs = dict(POSITION=add(gp, 5126, "VEC3", 34962, True), NORMAL=add(gn, 5126, "VEC3", 34962))
        if p.get("uvs") is not None:
            uv = np.asarray(p["uvs"], np.float32).copy()
            uv[:, 1] = 1.0 - uv[:, 1]                                  # Blender V up -> glTF V down
            attrs["TEXCOORD_0"] = add(uv, 5126, "VEC2", 34962)
        if p.get("colors") is not None:
            attrs["COLOR_0"] = add(np.asarray(p["colors"], np.float32), 5126, "VEC4", 34962)
        ind = add(np.asarray(p["indices"], np.uint32), 5125, "SCALAR", 34963)
        prim = dict(attributes=attrs, indices=ind)
        if p.get("material") is not None:
            prim["material"] = int(p["material"])
        meshes.append(dict(name=p.get("name", f"mesh{k}"), primitives=[prim]))
        nodes.append(dict(name=p.get("name", f"node{k}"), mesh=k))
    binname = path.with_suffix(".bin").name
    path.with_suffix(".bin").write_bytes(bytes(blob))
    doc = dict(asset=dict(version="2.0"), scene=0, scenes=[dict(nodes=list(range(len(nodes))))], nodes=nodes,
               meshes=meshes, accessors=accessors, bufferViews=views,
               buffers=[dict(uri=binname, byteLength=len(blob))], materials=list(materials))
    if images:
        doc["images"] = [dict(uri=name) for name in images]
        doc["samplers"] = [dict(magFilter=9728, minFilter=9728)]
        doc["textures"] = [dict(source=i, sampler=0) for i in range(len(images))]
    if extensions_used:
        doc["extensionsUsed"] = list(extensions_used)
    path.write_text(json.dumps(doc))
    return path


def import_gltf(path):
    _importer_ready()
    before = set(bpy.data.objects)
    bpy.ops.import_scene.gltf(filepath=str(path))
    return [ob for ob in bpy.data.objects if ob not in before]


SUN_ROTATION = (math.radians(80), 0.0, math.radians(-20))


def stage(scene, sun_rotation=SUN_ROTATION, strength=2.0):
    scene.render.resolution_x, scene.render.resolution_y = W, H
    cam = C.add_camera(scene, ortho=True)
    cam.data.ortho_scale = ORTHO
    C.add_sun(scene, rotation=sun_rotation, strength=strength)
    if hasattr(scene, "stylized"):
        scene.stylized.outlines = False
        scene.stylized.fxaa = False
        scene.stylized.shadows = False
    return cam


def px_region(img, x0, x1, z0, z1):
    """Pixels of the world rectangle [x0,x1] x [z0,z1] seen by ``stage``'s camera (row 0 = bottom)."""
    h, w = img.shape[:2]
    sx = w / ORTHO
    c0, c1 = int(round((x0 + ORTHO / 2) * sx)), int(round((x1 + ORTHO / 2) * sx))
    zh = ORTHO * h / w
    r0, r1 = int(round((z0 + zh / 2) * sx)), int(round((z1 + zh / 2) * sx))
    return img[r0:r1, c0:c1]


def _resolve(name):
    from stylized_renderer.engine.features import materials

    return materials.resolve_material(bpy.data.materials[name])


# ------------------------------------------------------------------------------------------------
# pixel tests, one per node pattern
# ------------------------------------------------------------------------------------------------

def test_textured_mix_multiply(ext, empty_scene, tmp_path):
    """baseColorTexture x baseColorFactor: the importer wires Image -> Mix (Multiply, RGBA) -> Base
    Color.  The texture's colours must appear, multiplied by the factor."""
    tex = np.zeros((8, 8, 4), np.float32)
    tex[:, :4] = (1.0, 0.0, 0.0, 1.0)        # left half red
    tex[:, 4:] = (0.0, 0.0, 1.0, 1.0)        # right half blue
    write_png(tmp_path / "rb.png", tex)
    mat = dict(name="Soldier", pbrMetallicRoughness=dict(baseColorTexture=dict(index=0),
                                                         baseColorFactor=[1.0, 1.0, 0.25, 1.0],
                                                         metallicFactor=0.0))
    write_gltf(tmp_path / "mix.gltf", [dict(quad_xz(-1.5, 1.5, -1, 1), material=0, name="Quad")], [mat],
               images=["rb.png"])
    import_gltf(tmp_path / "mix.gltf")
    tree = bpy.data.materials["Soldier"].node_tree
    mix = [n for n in tree.nodes if n.type == "MIX"]
    assert mix and mix[0].data_type == "RGBA" and mix[0].blend_type == "MULTIPLY"   # the importer's layout
    p = _resolve("Soldier")
    assert p.textures["base_color"].image is not None and p.textures["base_color"].image.name.startswith("rb")
    assert np.allclose(p.base_color[:3], (1.0, 1.0, 0.25), atol=1e-6)

    stage(empty_scene, sun_rotation=(math.radians(90), 0, 0))
    img = C.render_scene(empty_scene)
    left = px_region(img, -1.3, -0.2, -0.8, 0.8)[..., :3].reshape(-1, 3).mean(0)
    right = px_region(img, 0.2, 1.3, -0.8, 0.8)[..., :3].reshape(-1, 3).mean(0)
    assert left[0] > 5 * max(left[1], left[2], 1e-4), left        # the texture's red
    assert right[2] > 5 * max(right[0], right[1], 1e-4), right    # the texture's blue
    # the factor (1, 1, 0.25) multiplies: the blue half is a quarter of the red half
    assert right[2] / left[0] == pytest.approx(0.25, rel=0.1), (left, right)


def _rgb_quads():
    cols = [(1.0, 0.0, 0.0, 1.0), (0.0, 1.0, 0.0, 1.0), (0.0, 0.0, 1.0, 1.0)]
    out = []
    for k, c in enumerate(cols):
        q = quad_xz(-1.8 + 1.2 * k, -0.8 + 1.2 * k, -1, 1)
        q["colors"] = np.tile(np.array(c, np.float32), (4, 1))
        out.append(q)
    return out


def test_vertex_colors(ext, empty_scene, tmp_path):
    """COLOR_0 arrives as a Color Attribute node into Base Color: three quads, red / green / blue."""
    quads = _rgb_quads()
    merged = dict(positions=np.vstack([q["positions"] for q in quads]),
                  normals=np.vstack([q["normals"] for q in quads]), uvs=np.vstack([q["uvs"] for q in quads]),
                  colors=np.vstack([q["colors"] for q in quads]),
                  indices=np.concatenate([q["indices"] + 4 * k for k, q in enumerate(quads)]), material=0,
                  name="Parrot")
    write_gltf(tmp_path / "vc.gltf", [merged], [dict(name="Feathers", pbrMetallicRoughness=dict(metallicFactor=0.0))])
    import_gltf(tmp_path / "vc.gltf")
    tree = bpy.data.materials["Feathers"].node_tree
    assert any(n.type == "VERTEX_COLOR" for n in tree.nodes)
    p = _resolve("Feathers")
    assert p.vertex_colors

    stage(empty_scene, sun_rotation=(math.radians(90), 0, 0))
    img = C.render_scene(empty_scene)
    for k, ch in enumerate((0, 1, 2)):
        x0 = -1.8 + 1.2 * k
        c = px_region(img, x0 + 0.2, x0 + 0.8, -0.7, 0.7)[..., :3].reshape(-1, 3).mean(0)
        others = [c[i] for i in range(3) if i != ch]
        assert c[ch] > 5 * max(max(others), 1e-4), (k, c)


def test_vertex_colors_times_texture(ext, empty_scene, tmp_path):
    """Texture and COLOR_0 together: Image -> Mix (Multiply) <- Color Attribute."""
    write_png(tmp_path / "white.png", np.ones((4, 4, 4), np.float32))
    quads = _rgb_quads()
    merged = dict(positions=np.vstack([q["positions"] for q in quads]),
                  normals=np.vstack([q["normals"] for q in quads]), uvs=np.vstack([q["uvs"] for q in quads]),
                  colors=np.vstack([q["colors"] for q in quads]),
                  indices=np.concatenate([q["indices"] + 4 * k for k, q in enumerate(quads)]), material=0)
    write_gltf(tmp_path / "vct.gltf", [merged],
               [dict(name="Painted", pbrMetallicRoughness=dict(baseColorTexture=dict(index=0), metallicFactor=0.0))],
               images=["white.png"])
    import_gltf(tmp_path / "vct.gltf")
    p = _resolve("Painted")
    assert p.vertex_colors and "base_color" in p.textures
    stage(empty_scene, sun_rotation=(math.radians(90), 0, 0))
    img = C.render_scene(empty_scene)
    for k, ch in enumerate((0, 1, 2)):
        x0 = -1.8 + 1.2 * k
        c = px_region(img, x0 + 0.2, x0 + 0.8, -0.7, 0.7)[..., :3].reshape(-1, 3).mean(0)
        others = [c[i] for i in range(3) if i != ch]
        assert c[ch] > 5 * max(max(others), 1e-4), (k, c)


def test_unlit_texture_with_alpha(ext, empty_scene, tmp_path):
    """KHR_materials_unlit arrives as Emission + Light Path (Is Camera Ray) + Transparent, with the
    texture alpha on a second Mix Shader.  It must render flat (no light response) and blend."""
    # texture: top half opaque orange, bottom half alpha 0.5 orange (sRGB values)
    tex = np.zeros((8, 8, 4), np.float32)
    tex[...] = (1.0, 0.5, 0.0, 1.0)
    tex[:4, :, 3] = 0.5
    write_png(tmp_path / "logo.png", tex)
    write_png(tmp_path / "white.png", np.ones((4, 4, 4), np.float32))
    unlit = dict(name="Logo", alphaMode="BLEND", extensions=dict(KHR_materials_unlit={}),
                 pbrMetallicRoughness=dict(baseColorTexture=dict(index=0)))
    unlit_ball = dict(name="Flat", extensions=dict(KHR_materials_unlit={}),
                      pbrMetallicRoughness=dict(baseColorTexture=dict(index=1), baseColorFactor=[0.2, 0.6, 0.9, 1]))
    backdrop = dict(name="Backdrop", pbrMetallicRoughness=dict(baseColorFactor=[0.0, 0.0, 1.0, 1.0], metallicFactor=0))
    prims = [dict(quad_xz(-1.9, -0.1, -1.2, 1.2), material=0, name="LogoQuad"),
             dict(quad_xz(-1.95, -0.05, -1.4, 1.4, y=0.5), material=2, name="Back"),
             dict(sphere(center=(1.0, 0.0, 0.0), radius=0.8), material=1, name="Ball")]
    write_gltf(tmp_path / "unlit.gltf", prims, [unlit, unlit_ball, backdrop], images=["logo.png", "white.png"],
               extensions_used=["KHR_materials_unlit"])
    import_gltf(tmp_path / "unlit.gltf")
    tree = bpy.data.materials["Logo"].node_tree
    assert {"EMISSION", "LIGHT_PATH", "BSDF_TRANSPARENT"} <= {n.type for n in tree.nodes}
    p = _resolve("Logo")
    assert p.unlit and p.alpha_mode == "BLEND" and "base_color" in p.textures

    # the sun comes from the right: the ball's right side faces it, its left side faces away
    stage(empty_scene, sun_rotation=(0.0, math.radians(-90), 0.0))
    img = C.render_scene(empty_scene)
    flat = np.array((0.2, 0.6, 0.9))
    toward = px_region(img, 1.45, 1.6, -0.1, 0.1)[..., :3].reshape(-1, 3).mean(0)
    away = px_region(img, 0.4, 0.55, -0.1, 0.1)[..., :3].reshape(-1, 3).mean(0)
    assert np.allclose(toward, flat, atol=0.03) and np.allclose(away, flat, atol=0.03), (toward, away)

    orange = np.array((1.0, 0.2140, 0.0))                 # sRGB (1, 0.5, 0) in linear
    top = px_region(img, -1.7, -0.3, 0.3, 1.0)[..., :3].reshape(-1, 3).mean(0)
    bottom = px_region(img, -1.7, -0.3, -1.0, -0.3)[..., :3].reshape(-1, 3).mean(0)
    assert np.allclose(top, orange, atol=0.03), top                 # opaque texel: the texture, flat
    blue = px_region(img, -1.93, -1.91, -1.3, 1.3)[..., :3].reshape(-1, 3).mean(0)   # backdrop margin
    assert blue[2] > 0.05 and blue[0] < 0.02, blue
    expected = 0.5 * orange + 0.5 * blue                            # alpha 0.5 over the lit backdrop
    assert np.allclose(bottom, expected, atol=0.04), (bottom, expected)


def _sphere_lit_mask(center_x, radius, light_dir, cam_scale=ORTHO, w=W, h=H, min_ndl=0.3):
    """Pixels of an ortho-viewed sphere whose normal faces the light (N.L > min_ndl)."""
    xs = ((np.arange(w) + 0.5) / w - 0.5) * cam_scale
    zs = ((np.arange(h) + 0.5) / h - 0.5) * cam_scale * h / w
    X, Z = np.meshgrid(xs - center_x, zs)
    r2 = (X ** 2 + Z ** 2) / radius ** 2
    inside = r2 < 0.85
    N = np.stack([X / radius, -np.sqrt(np.clip(1 - r2, 0, 1)), Z / radius], -1)
    return inside & (N @ np.asarray(light_dir) > min_ndl)


def test_metallic_darker_like_eevee(ext, empty_scene, tmp_path):
    """A metallic sphere must not render lighter than a plastic one; the ratio of their sunlit sides
    follows EEVEE's on the same scene (measured here, not assumed)."""
    mats = [dict(name="Plastic", pbrMetallicRoughness=dict(baseColorFactor=[0.8, 0.8, 0.8, 1.0],
                                                           metallicFactor=0.0, roughnessFactor=0.5)),
            dict(name="Metal", pbrMetallicRoughness=dict(baseColorFactor=[0.8, 0.8, 0.8, 1.0],
                                                         metallicFactor=1.0, roughnessFactor=0.5))]
    prims = [dict(sphere(center=(-1.0, 0, 0), radius=0.85), material=0, name="PlasticBall"),
             dict(sphere(center=(1.0, 0, 0), radius=0.85), material=1, name="MetalBall")]
    write_gltf(tmp_path / "metal.gltf", prims, mats)
    import_gltf(tmp_path / "metal.gltf")
    for ob in bpy.data.objects:
        if ob.type == "MESH":
            for poly in ob.data.polygons:
                poly.use_smooth = True
    rot = (math.radians(60), 0.0, math.radians(-30))
    stage(empty_scene, sun_rotation=rot)
    world = bpy.data.worlds.new("Dim")
    world.color = (0.05, 0.05, 0.05)
    empty_scene.world = world
    from mathutils import Euler, Vector

    L = -(Euler(rot).to_matrix() @ Vector((0, 0, -1)))
    _p_plastic, p_metal = _resolve("Plastic"), _resolve("Metal")
    assert p_metal.metallic == pytest.approx(1.0)

    sty = C.render_scene(empty_scene)
    eev = _render_eevee(empty_scene, tmp_path / "eevee.exr")
    ratios = {}
    for name, img in (("stylized", sty), ("eevee", eev)):
        lum = img[..., :3].mean(-1)
        plastic = lum[_sphere_lit_mask(-1.0, 0.85, L)].mean()
        metal = lum[_sphere_lit_mask(1.0, 0.85, L)].mean()
        ratios[name] = metal / plastic
    assert ratios["stylized"] < 0.9, ratios                                  # darker, never lighter
    assert ratios["stylized"] == pytest.approx(ratios["eevee"], abs=0.12), ratios


# ------------------------------------------------------------------------------------------------
# the resolver on the importer's other patterns
# ------------------------------------------------------------------------------------------------

def _material_doc(tmp_path, material, images=(), ext_used=(), colors=False):
    q = quad_xz(-1, 1, -1, 1)
    if colors:
        q["colors"] = np.ones((4, 4), np.float32)
    write_gltf(tmp_path / "m.gltf", [dict(q, material=0)], [material], images=images, extensions_used=ext_used)
    import_gltf(tmp_path / "m.gltf")
    return _resolve(material["name"])


def test_alpha_clip_math_nodes(ext, empty_scene, tmp_path):
    """alphaMode MASK: the importer builds 1 - (alpha < cutoff) with two Math nodes."""
    tex = np.ones((8, 8, 4), np.float32)
    tex[:, :4, 3] = 0.2
    tex[:, 4:, 3] = 0.6
    write_png(tmp_path / "a.png", tex)
    p = _material_doc(tmp_path, dict(name="Leaves", alphaMode="MASK", alphaCutoff=0.4,
                                     pbrMetallicRoughness=dict(baseColorTexture=dict(index=0),
                                                               baseColorFactor=[1, 1, 1, 1])), images=["a.png"])
    tree = bpy.data.materials["Leaves"].node_tree
    assert {n.operation for n in tree.nodes if n.type == "MATH"} >= {"LESS_THAN", "SUBTRACT"}
    assert p.alpha_mode == "MASK" and p.alpha_cutoff == pytest.approx(0.4) and "base_color" in p.textures
    stage(empty_scene, sun_rotation=(math.radians(90), 0, 0))
    img = C.render_scene(empty_scene)
    world_bg = img[2, 2, :3]
    left = px_region(img, -0.9, -0.1, -0.8, 0.8)[..., :3].reshape(-1, 3)
    right = px_region(img, 0.1, 0.9, -0.8, 0.8)[..., :3].reshape(-1, 3)
    assert np.allclose(left, world_bg, atol=1e-4)            # alpha 0.2 < 0.4: cut
    assert right.mean() > world_bg.mean() + 0.1              # alpha 0.6: drawn


def test_texture_transform_and_alpha_factor(ext, empty_scene, tmp_path):
    """KHR_texture_transform (a Mapping node) and an alpha factor (Math multiply) on a BLEND material."""
    write_png(tmp_path / "t.png", np.ones((4, 4, 4), np.float32))
    mat = dict(name="Tiled", alphaMode="BLEND",
               pbrMetallicRoughness=dict(baseColorFactor=[1, 1, 1, 0.5], baseColorTexture=dict(
                   index=0, extensions=dict(KHR_texture_transform=dict(offset=[0.25, 0.5], scale=[2.0, 3.0])))))
    p = _material_doc(tmp_path, mat, images=["t.png"], ext_used=["KHR_texture_transform"])
    ref = p.textures["base_color"]
    # glTF (V down) -> Blender UV space (V up): offset (ox, 1 - oy - sy)
    assert ref.uv_scale == pytest.approx((2.0, 3.0)) and ref.uv_offset == pytest.approx((0.25, 1 - 0.5 - 3.0))
    assert p.alpha_mode == "BLEND" and p.base_color[3] == pytest.approx(0.5)
    assert not p.unmapped, p.unmapped


def test_emission_normal_occlusion(ext, empty_scene, tmp_path):
    """Emissive texture x factor x strength, a normal map with its scale, an occlusion texture
    (the glTF Material Output group: reported, not used for lighting)."""
    write_png(tmp_path / "e.png", np.ones((4, 4, 4), np.float32))
    write_png(tmp_path / "n.png", np.tile(np.array([0.5, 0.5, 1.0, 1.0], np.float32), (4, 4, 1)))
    write_png(tmp_path / "o.png", np.ones((4, 4, 4), np.float32))
    mat = dict(name="Glow", emissiveFactor=[1.0, 0.5, 0.25], emissiveTexture=dict(index=0),
               normalTexture=dict(index=1, scale=0.7), occlusionTexture=dict(index=2),
               extensions=dict(KHR_materials_emissive_strength=dict(emissiveStrength=3.0)),
               pbrMetallicRoughness=dict(baseColorFactor=[0.5, 0.5, 0.5, 1]))
    p = _material_doc(tmp_path, mat, images=["e.png", "n.png", "o.png"],
                      ext_used=["KHR_materials_emissive_strength"])
    assert "emissive" in p.textures and p.emissive == pytest.approx((3.0, 1.5, 0.75))
    assert "normal" in p.textures and p.normal_scale == pytest.approx(0.7)
    assert any("occlusion" in m.lower() and "Glow" in m for m in p.unmapped), p.unmapped


def test_unmapped_nodes_are_reported(ext, empty_scene):
    """A node the reader cannot map is named in the report, with the material."""
    mat = C.add_material("Odd", (0.5, 0.5, 0.5))
    tree = mat.node_tree
    bsdf = next(n for n in tree.nodes if n.type == "BSDF_PRINCIPLED")
    hsv = tree.nodes.new("ShaderNodeHueSaturation")
    hsv.name = "Tint"
    tex = tree.nodes.new("ShaderNodeTexImage")
    tex.image = bpy.data.images.new("odd_tex", 4, 4)
    tree.links.new(tex.outputs["Color"], hsv.inputs["Color"])
    tree.links.new(hsv.outputs["Color"], bsdf.inputs["Base Color"])
    p = _resolve("Odd")
    assert any("Odd" in m and "Tint" in m for m in p.unmapped), p.unmapped
    assert p.textures["base_color"].image.name == "odd_tex"      # the texture behind it is still used

    from stylized_renderer.engine.features.materials import describe

    d = describe(p)
    assert d["unmapped"] == p.unmapped and d["base_texture"] == "odd_tex" and d["source"] == "principled"


# ------------------------------------------------------------------------------------------------
# the vertex stream carries the colour attribute
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("domain", ["CORNER", "POINT"])
def test_read_mesh_colors(ext, empty_scene, domain):
    from stylized_renderer.engine.blender.importer.mesh import read_mesh, split_by_material

    verts, faces = C.cube_geometry()
    ob = C.add_mesh_object(empty_scene, "Box", verts, faces)
    me = ob.data
    attr = me.color_attributes.new("Col", "BYTE_COLOR", domain)
    n = len(attr.data)
    rgba = np.zeros((n, 4), np.float32)
    rgba[:, 0] = np.linspace(0.0, 1.0, n)
    rgba[:, 3] = 1.0
    attr.data.foreach_set("color", rgba.ravel())
    me.color_attributes.render_color_index = me.color_attributes.find("Col")
    me.calc_loop_triangles()
    expect = np.empty(n * 4, np.float32)
    attr.data.foreach_get("color", expect)
    expect = expect.reshape(n, 4)
    cs = read_mesh(me)
    assert cs.colors is not None and cs.colors.shape == (cs.positions.shape[0], 4)
    loops = np.empty(len(me.loops), np.int64)
    me.loops.foreach_get("vertex_index", loops)
    per_corner = expect if domain == "CORNER" else expect[loops]
    # every corner's split vertex carries that corner's colour
    assert np.allclose(cs.colors[cs.corner_to_split], per_corner, atol=1e-6)
    prims = split_by_material(cs, len(me.vertices))
    assert prims[0].colors is not None and prims[0].colors.shape[0] == prims[0].positions.shape[0]
    me.color_attributes.remove(me.color_attributes["Col"])
    assert read_mesh(me).colors is None


def test_primitive_asset_colors_validated():
    from stylized_renderer.engine.core.assets.types import PrimitiveAsset

    kw: dict[str, Any] = dict(material_index=0, material_name="m", positions=np.zeros((3, 3)), normals=np.zeros((3, 3)),
              indices=np.array([[0, 1, 2]]), source_vertices=np.arange(3))
    assert PrimitiveAsset(**kw).colors is None
    p = PrimitiveAsset(colors=np.ones((3, 4)), **kw)
    assert p.colors is not None and p.colors.dtype == np.float32 and not p.colors.flags.writeable
    with pytest.raises(ValueError):
        PrimitiveAsset(colors=np.ones((3, 3)), **kw)
    with pytest.raises(ValueError):
        PrimitiveAsset(colors=np.ones((2, 4)), **kw)


def test_cpu_stream_carries_colors():
    from stylized_renderer.engine.core.assets.types import PrimitiveAsset
    from stylized_renderer.engine.core.runtime.backend import CpuBackend

    cols = np.array([[1, 0, 0, 1], [0, 1, 0, 1], [0, 0, 1, 1]], np.float32)
    prim = PrimitiveAsset(material_index=0, material_name="m", positions=np.zeros((3, 3)), normals=np.zeros((3, 3)),
                          indices=np.array([[0, 1, 2]]), source_vertices=np.arange(3), colors=cols)
    s = CpuBackend().create_stream(prim)
    assert s is not None
    assert s.colors is not None and np.array_equal(s.colors, cols)


# ------------------------------------------------------------------------------------------------
# the shared real-world files
# ------------------------------------------------------------------------------------------------

REAL = C.TESTDATA / "real"
VRM = C.TESTDATA / "vrm"


def _open(path):
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared/testdata is not part of a user's clone)")
    bpy.ops.wm.open_mainfile(filepath=str(path))
    from stylized_renderer.engine.features import materials

    return {m.name: materials.resolve_material(m) for m in bpy.data.materials}


@pytest.mark.parametrize("fname,textured", [("CesiumMan.blend", ["Cesium_Man-effect"]),
                                            ("Fox.blend", ["fox_material"])])
def test_real_textured_materials_resolve_a_base_texture(ext, fname, textured):
    res = _open(REAL / fname)
    for name in textured:
        assert "base_color" in res[name].textures, (name, res[name])


def test_real_vertex_colour_material(ext):
    res = _open(REAL / "Mannequiny.blend")
    for name in ("Azul_COLOR_0", "Blanco_COLOR_0", "Negro_COLOR_0"):
        assert res[name].vertex_colors, name
    mesh = bpy.data.objects["body.001"].data
    from stylized_renderer.engine.blender.importer.mesh import read_mesh

    mesh.calc_loop_triangles()
    cs = read_mesh(mesh)
    # its COLOR_0 is (nearly) white; two colour attributes: the render one ('Color') is streamed
    attrs = mesh.color_attributes
    assert attrs[attrs.render_color_index].name == "Color" and len(attrs) == 2
    ref = np.empty(len(attrs["Color"].data) * 4, np.float32)
    attrs["Color"].data.foreach_get("color", ref)
    used = cs.corner_to_split >= 0
    assert cs.colors is not None
    assert np.allclose(cs.colors[cs.corner_to_split[used]], ref.reshape(-1, 4)[used], atol=1e-6)


def test_real_metallic_material(ext):
    res = _open(REAL / "GodotRobot.blend")
    gray = res["player_gray"]
    assert gray.metallic == pytest.approx(1.0) and "metallic_roughness" not in gray.textures
    assert gray.roughness == pytest.approx(bpy.data.materials["player_gray"].node_tree.nodes["Principled BSDF"]
                                           .inputs["Roughness"].default_value)
    assert res["player_glow"].emissive[2] > 0.5


def test_real_vrm_file(ext):
    res = _open(VRM / "Godette_vrm0.blend")
    assert res["Body"].source == "vrm_addon" and "base_color" in res["Body"].textures
    assert "base_color" in res["Backpack"].textures and res["Backpack"].source == "principled"
    # metallic (blue) and roughness (green) from one Non-Color texture: read, not reported
    assert res["Backpack"].textures["metallic_roughness"].image.name == "fabric"
    assert not any("etallic" in m for m in res["Backpack"].unmapped), res["Backpack"].unmapped
    logo = res["GodotLogo"]
    assert logo.unlit and logo.alpha_mode == "BLEND" and "base_color" in logo.textures


# ------------------------------------------------------------------------------------------------
# tools/compare_look.py
# ------------------------------------------------------------------------------------------------

def test_compare_look_tool(ext, empty_scene, tmp_path, capsys):
    """The tool renders Stylized and Workbench, writes the sheet and reports per material."""
    tex = np.zeros((8, 8, 4), np.float32)
    tex[...] = (1.0, 0.0, 0.0, 1.0)
    write_png(tmp_path / "red.png", tex)
    write_gltf(tmp_path / "t.gltf", [dict(quad_xz(-1.5, 1.5, -1, 1), material=0, name="Quad")],
               [dict(name="Red", pbrMetallicRoughness=dict(baseColorTexture=dict(index=0), metallicFactor=0.0))],
               images=["red.png"])
    import_gltf(tmp_path / "t.gltf")
    for img in bpy.data.images:
        if img.source == "FILE":
            img.pack()
    stage(empty_scene, sun_rotation=(math.radians(90), 0, 0))
    blend = tmp_path / "look.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(blend), copy=True)
    from tools import compare_look

    compare_look.main([str(blend), "--out", str(tmp_path / "out"), "--size", "96"])
    text = capsys.readouterr().out
    assert (tmp_path / "out" / "look_sheet.png").exists()
    assert "material 'Red'" in text and "base_texture=red" in text and "chroma_diff=" in text
    last = text.strip().splitlines()[-1]
    assert last.startswith("compare-look: file=look.blend materials=1")
    chroma = float(last.split("mean_chroma_diff=")[1])
    assert chroma < 0.05, text          # both show the red texture
