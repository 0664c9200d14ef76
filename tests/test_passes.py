"""Pixel tests of the FramePipeline passes on hand-built frames (direct pipeline renders inside
the engine's GPU context).  Each test fails if the feature behind it is removed."""
from __future__ import annotations

from typing import Any

import numpy as np

from conftest import ARTIFACTS, save_png
from support import mtoon_testlib as T

PLANE_XZ = [(-1, 0, -1), (1, 0, -1), (1, 0, 1), (-1, 0, 1)]   # faces -Y (towards the camera)


def params(**kw):
    from stylized_renderer.engine.core.assets.material import MToonParams

    base: dict[str, Any] = dict(base_color=(0.9, 0.5, 0.3, 1.0), shade_color=(0.2, 0.1, 0.25), shading_toony=0.9,
                gi_equalization=0.9)
    base.update(kw)
    return MToonParams(**base)


def tex_ref(img, **kw):
    from stylized_renderer.engine.core.assets.material import TextureRef

    return TextureRef(image=img, **kw)


def ring_width(row_mask):
    """Lengths of the runs of True in a 1-D mask."""
    runs, n = [], 0
    for v in row_mask:
        if v:
            n += 1
        elif n:
            runs.append(n); n = 0
    if n:
        runs.append(n)
    return runs


# ------------------------------------------------------------------------------------------------
def test_toony_one_two_colours(ext, empty_scene):
    shift = 0.3
    p = params(shading_toony=1.0, shading_shift=shift)
    L = np.array([0.5, 0.7, -0.4])
    col, aux = T.render_direct([T.item_spec(T.uv_sphere())], {"M": p}, [T.sun(L)], T.ortho_camera(),
                               shadows=False, outlines=False, world_color=np.zeros(3))
    save_png(col, ARTIFACTS / "passes_toony1.png")
    m = aux[..., 3] > 0.5
    colours = np.unique(np.round(col[m][:, :3], 5), axis=0)
    assert len(colours) == 2, colours
    d = aux[..., :3] @ (-L / np.linalg.norm(L)) + shift
    lit = m & (d > 1e-4)
    shade = m & (d < -1e-4)
    assert np.allclose(col[lit][:, :3], p.base_color[:3], atol=1e-5)
    assert np.allclose(col[shade][:, :3], p.shade_color, atol=1e-5)
    assert lit.sum() > 100 and shade.sum() > 100


def _shadow_scene(sun_dir, receive=True, cast=True):
    ground = T.quad([(-3, -3, 0), (3, -3, 0), (3, 3, 0), (-3, 3, 0)])
    cube = T.box(1.0, (0, 0, 1.0))
    mats = {"G": params(base_color=(0.8, 0.8, 0.8, 1), shade_color=(0.1, 0.2, 0.6), shading_toony=0.95,
                        receive_shadow=receive),
            "C": params(base_color=(0.9, 0.2, 0.2, 1), shade_color=(0.4, 0.1, 0.1), cast_shadow=cast)}
    cam = T.persp_camera(location=(0, -0.01, 9), target=(0, 0, 0), fov_y=0.8)
    col, aux = T.render_direct([T.item_spec(ground, "G", object_id=1), T.item_spec(cube, "C", object_id=2)], mats,
                               [T.sun(sun_dir)], cam, width=128, height=128, outlines=False,
                               world_color=np.zeros(3))
    ground_px = aux[..., 3] == 1
    shade = ground_px & (np.abs(col[..., :3] - (0.1, 0.2, 0.6)).max(-1) < 1e-3)
    return col, shade, ground_px


def test_cube_shadow_takes_shade_colour_and_moves(ext, empty_scene):
    col_a, shade_a, ground = _shadow_scene((0.5, 0.0, -1.0))
    col_b, shade_b, _ = _shadow_scene((-0.5, 0.3, -1.0))
    save_png(col_a, ARTIFACTS / "passes_shadow_a.png")
    save_png(col_b, ARTIFACTS / "passes_shadow_b.png")
    assert shade_a.sum() > 150 and shade_b.sum() > 150, "no shadow on the plane"
    # shadowed ground shows the shade colour, never black
    assert not np.any((col_a[ground][:, :3].max(-1) < 0.05))
    ya, xa = np.argwhere(shade_a).mean(0)
    yb, xb = np.argwhere(shade_b).mean(0)
    assert xa > 64 + 5 and xb < 64 - 5, (xa, xb)     # the shadow falls away from the sun
    # receive_shadow off / cast_shadow off: no shadow
    assert _shadow_scene((0.5, 0.0, -1.0), receive=False)[1].sum() == 0
    assert _shadow_scene((0.5, 0.0, -1.0), cast=False)[1].sum() == 0


def test_culled_caster_still_casts(ext, empty_scene):
    """A caster outside the camera frustum is not drawn but its shadow reaches the visible ground."""
    ground = T.quad([(-2, -2, 0), (2, -2, 0), (2, 2, 0), (-2, 2, 0)])
    pole = T.box(0.6, (0, 0, 0))
    mats = {"G": params(base_color=(0.8, 0.8, 0.8, 1), shade_color=(0.1, 0.2, 0.6), shading_toony=0.95),
            "C": params()}
    cam = T.persp_camera(location=(0, -0.01, 5), target=(0, 0, 0), fov_y=0.5)
    # the box floats at z=6, behind the camera (z=5 looking down); the sun shines straight down
    col, aux = T.render_direct([T.item_spec(ground, "G", object_id=1), T.item_spec(pole, "C", object_id=2, world=T.translate(0, 0, 6))],
                               mats, [T.sun((0.0, 0.0, -1.0))], cam, outlines=False, world_color=np.zeros(3))
    assert not np.any(aux[..., 3] == 2)
    shade = (aux[..., 3] == 1) & (np.abs(col[..., :3] - (0.1, 0.2, 0.6)).max(-1) < 1e-3)
    assert shade.sum() > 100


def _outlined_sphere(mode, width, camera, world=None, size=160, colour=(0.0, 1.0, 0.0), multiply_tex=None):
    textures = {}
    if multiply_tex is not None:
        textures["outline_width_multiply"] = tex_ref(multiply_tex)
    p = params(outline_width_mode=mode, outline_width=width, outline_color=colour, outline_lighting_mix=0.0,
               base_color=(0.9, 0.5, 0.3, 1), textures=textures)
    col, aux = T.render_direct([T.item_spec(T.uv_sphere(), world=world)], {"M": p}, [T.sun((0.3, 1.0, -0.5))],
                               camera, width=size, height=size, shadows=False, world_color=np.zeros(3))
    outline = np.abs(col[..., :3] - colour).max(-1) < 1e-4
    return col, outline


def test_world_outline_ring_width(ext, empty_scene):
    cam = T.ortho_camera(half_height=1.6)
    col, outline = _outlined_sphere("worldCoordinates", 0.1, cam)
    save_png(col, ARTIFACTS / "passes_outline_world.png")
    px_per_m = 160 / 3.2
    expected = 0.1 * px_per_m                    # 5 px
    for runs in (ring_width(outline[80]), ring_width(outline[:, 80])):
        assert len(runs) == 2, runs
        for r in runs:
            assert abs(r - expected) <= 1, (runs, expected)
    # outlines off: no ring
    from stylized_renderer.engine.core.assets.material import MToonParams  # noqa: F401
    p = params(outline_width_mode="worldCoordinates", outline_width=0.1, outline_color=(0, 1, 0),
               outline_lighting_mix=0.0)
    c2, _ = T.render_direct([T.item_spec(T.uv_sphere())], {"M": p}, [T.sun((0.3, 1.0, -0.5))], cam, width=160,
                            height=160, shadows=False, outlines=False, world_color=np.zeros(3))
    assert not np.any(np.abs(c2[..., :3] - (0, 1, 0)).max(-1) < 1e-4)


def test_outline_width_multiply_texture(ext, empty_scene):
    """G = 0 on the lower half of the texture (v < 0.5: the sphere's lower hemisphere) removes
    the outline there, the upper half keeps its full width."""
    n = 64
    tex = np.ones((n, 8, 4), np.float32)
    tex[: n // 2, :, 1] = 0.0
    img = T.float_image("outline_mul", tex)
    cam = T.ortho_camera(half_height=1.6)
    col, outline = _outlined_sphere("worldCoordinates", 0.1, cam, multiply_tex=img)
    save_png(col, ARTIFACTS / "passes_outline_multiply.png")
    top, bottom = outline[115], outline[45]                    # z = +0.7 and -0.7 (row 0 = bottom)
    assert len(ring_width(top)) == 2 and min(ring_width(top)) >= 4, ring_width(top)
    assert sum(ring_width(bottom)) == 0, ring_width(bottom)


def test_screen_outline_keeps_pixel_width(ext, empty_scene):
    widths = []
    for dist in (4.0, 9.0):
        cam = T.persp_camera(location=(0, -dist, 0), fov_y=0.7)
        col, outline = _outlined_sphere("screenCoordinates", 0.025, cam, size=160)
        save_png(col, ARTIFACTS / f"passes_outline_screen_{dist:.0f}.png")
        runs = ring_width(outline[80])
        assert len(runs) == 2, runs
        widths.append(runs)
    expected = 0.025 * 160                      # 4 px
    for runs in widths:
        for r in runs:
            assert abs(r - expected) <= 1, (widths, expected)


def test_screen_outline_aspect_correct(ext, empty_scene):
    cam = T.persp_camera(location=(0, -5, 0), fov_y=0.7, aspect=2.0)
    p = params(outline_width_mode="screenCoordinates", outline_width=0.03, outline_color=(0, 1, 0),
               outline_lighting_mix=0.0)
    col, aux = T.render_direct([T.item_spec(T.uv_sphere())], {"M": p}, [T.sun((0.3, 1.0, -0.5))], cam,
                               width=240, height=120, shadows=False, world_color=np.zeros(3))
    o = np.abs(col[..., :3] - (0, 1, 0)).max(-1) < 1e-4
    hor = ring_width(o[60])
    ver = ring_width(o[:, 120])
    assert all(abs(r - 3.6) <= 1 for r in hor + ver), (hor, ver)


def test_mask_cuts_at_cutoff(ext, empty_scene):
    n = 64
    tex = np.ones((4, n, 4), np.float32)
    tex[..., 3] = ((np.arange(n) + 0.5) / n)[None, :]        # alpha = u
    img = T.float_image("alpha_ramp", tex)
    cam = T.ortho_camera(half_height=1.0)
    res = {}
    for mode in ("MASK", "OPAQUE"):
        p = params(alpha_mode=mode, alpha_cutoff=0.3, textures={"base_color": tex_ref(img)})
        col, aux = T.render_direct([T.item_spec(T.quad(PLANE_XZ))], {"M": p}, [T.sun((0, 1, 0))], cam,
                                   width=100, height=100, shadows=False, outlines=False)
        res[mode] = aux[..., 3] > 0.5
        if mode == "MASK":
            assert np.all(col[res[mode]][:, 3] == 1.0)
    drawn = res["MASK"][50]
    first = int(np.argmax(drawn))
    assert abs(first - 30) <= 1, first                       # u = 0.3 at pixel 30 of 100
    assert np.all(drawn[first + 1:]) and not np.any(drawn[: first - 1])
    assert res["OPAQUE"][50].all()


def test_blend_sorted_back_to_front(ext, empty_scene):
    red = params(base_color=(0, 0, 0, 0.5), emissive=(1.0, 0.0, 0.0), alpha_mode="BLEND", shade_color=(0, 0, 0))
    blue = params(base_color=(0, 0, 0, 0.5), emissive=(0.0, 0.0, 1.0), alpha_mode="BLEND", shade_color=(0, 0, 0))
    near = T.item_spec(T.quad(PLANE_XZ), "R", object_id=1, world=T.translate(0, -1, 0))
    far = T.item_spec(T.quad(PLANE_XZ), "B", object_id=2, world=T.translate(0, 1, 0))
    cam = T.ortho_camera(half_height=2.0)
    bg = np.array([0.2, 0.2, 0.2])
    for order in ([near, far], [far, near]):
        col, _ = T.render_direct(order, {"R": red, "B": blue}, [], cam, width=40, height=40, shadows=False,
                                 outlines=False, world_color=bg)
        c = col[20, 20, :3]
        after_far = 0.5 * np.array([0, 0, 1.0]) + 0.5 * bg
        expected = 0.5 * np.array([1.0, 0, 0]) + 0.5 * after_far
        assert np.allclose(c, expected, atol=1e-4), (c, expected)


def test_blend_queue_offset(ext, empty_scene):
    """renderQueueOffset beats distance: the far quad with the higher offset is drawn last."""
    red = params(base_color=(0, 0, 0, 0.5), emissive=(1.0, 0, 0), alpha_mode="BLEND", render_queue_offset=0)
    blue_late = params(base_color=(0, 0, 0, 0.5), emissive=(0, 0, 1.0), alpha_mode="BLEND", render_queue_offset=0)
    blue_late.render_queue_offset = 5
    near = T.item_spec(T.quad(PLANE_XZ), "R", object_id=1, world=T.translate(0, -1, 0))
    far = T.item_spec(T.quad(PLANE_XZ), "B", object_id=2, world=T.translate(0, 1, 0))
    col, _ = T.render_direct([near, far], {"R": red, "B": blue_late}, [], T.ortho_camera(half_height=2.0),
                             width=40, height=40, shadows=False, outlines=False, world_color=np.zeros(3))
    c = col[20, 20, :3]
    assert c[2] > c[0], c       # blue composited last (over red)


def test_double_sided_back_faces_lit(ext, empty_scene):
    back = T.quad(PLANE_XZ[::-1])            # faces +Y: the camera sees its back
    cam = T.ortho_camera(half_height=1.5)
    # the sun travels +Y: it lights the side facing the camera (-Y)
    for ds in (True, False):
        p = params(double_sided=ds, gi_equalization=0.0)
        col, aux = T.render_direct([T.item_spec(back)], {"M": p}, [T.sun((0, 1, 0))], cam, width=60, height=60,
                                   shadows=False, outlines=False, world_color=np.zeros(3))
        m = aux[..., 3] > 0.5
        if ds:
            assert m.sum() > 1000
            assert np.allclose(col[m][:, :3], p.base_color[:3], atol=1e-5)    # lit, not shade
            assert np.allclose(aux[m][:, :3], (0, -1, 0), atol=1e-5)          # flipped normal
        else:
            assert m.sum() == 0                                               # back faces culled


def test_normal_map_changes_shading(ext, empty_scene):
    tilt = np.array([0.6, 0.0, 0.8])            # tangent space: towards +tangent (+X)
    tex = np.ones((4, 4, 4), np.float32)
    tex[..., :3] = tilt * 0.5 + 0.5
    img = T.float_image("nmap", tex)
    cam = T.ortho_camera(half_height=1.5)
    L = (-1.0, 0.0, 0.0)                         # travels -X: grazing on the plane, lights normals facing +X
    out = {}
    for use in (False, True):
        textures = {"normal": tex_ref(img)} if use else {}
        p = params(shading_toony=0.5, textures=textures)
        col, aux = T.render_direct([T.item_spec(T.quad(PLANE_XZ))], {"M": p}, [T.sun(L)], cam, width=40,
                                   height=40, shadows=False, outlines=False, world_color=np.zeros(3))
        out[use] = (col[20, 20, :3], aux[20, 20, :3])
    # tangent = +X, normal = -Y: the mapped normal is 0.6 X - 0.8 Y
    assert np.allclose(out[True][1], (0.6, -0.8, 0.0), atol=2e-3), out[True][1]
    assert np.allclose(out[False][1], (0, -1, 0), atol=1e-5)
    assert out[True][0][0] > out[False][0][0] + 0.05


def test_uv_scroll_moves_texture(ext, empty_scene):
    n = 64
    tex = np.ones((4, n, 4), np.float32)
    tex[:, 32:40, :3] = 0.0                     # a dark stripe at u in [0.5, 0.625)
    img = T.float_image("stripe", tex)
    p = params(uv_scroll_x=0.25, textures={"base_color": tex_ref(img)}, shading_toony=0.9)
    cam = T.ortho_camera(half_height=1.0)
    centres = []
    for t in (0.0, 1.0):
        col, aux = T.render_direct([T.item_spec(T.quad(PLANE_XZ))], {"M": p}, [T.sun((0, 1, 0))], cam,
                                   width=128, height=128, shadows=False, outlines=False, time_seconds=t,
                                   world_color=np.zeros(3))
        dark = col[64, :, 0] < 0.1
        centres.append(np.argwhere(dark).mean())
    # the texture scrolls +u by 0.25 per second: the stripe moves -0.25 of the plane = -32 px
    assert abs((centres[1] - centres[0]) + 32) <= 1.5, centres


def test_point_and_spot_lights(ext, empty_scene):
    from stylized_renderer.engine.core.world.frame import LightData

    p = params(shading_toony=1.0, gi_equalization=0.0, shade_color=(0, 0, 0), base_color=(1, 1, 1, 1))
    cam = T.ortho_camera(half_height=1.0)
    P = 100.0
    lights = [LightData(kind="POINT", color=np.array([P, P, P]), direction=np.array([0, 0, -1.0]),
                        position=np.array([0.0, -2.0, 0.0]))]
    col, aux = T.render_direct([T.item_spec(T.quad(PLANE_XZ))], {"M": p}, lights, cam, width=41, height=41,
                               shadows=False, outlines=False, world_color=np.zeros(3))
    # centre: r = 2 -> P / (4 pi^2 r^2)
    assert np.allclose(col[20, 20, 0], P / (4 * np.pi ** 2 * 4.0), rtol=1e-3)
    spot = [LightData(kind="SPOT", color=np.array([P, P, P]), direction=np.array([0, 1.0, 0]),
                      position=np.array([0.0, -2.0, 0.0]), spot_size=np.radians(30), spot_blend=0.0)]
    col, _ = T.render_direct([T.item_spec(T.quad(PLANE_XZ))], {"M": p}, spot, cam, width=41, height=41,
                             shadows=False, outlines=False, world_color=np.zeros(3))
    assert col[20, 20, 0] > 0.5 and col[20, 2, 0] == 0.0     # inside / outside the 15-degree cone


def test_many_lights(ext, empty_scene):
    """Eight suns each add their share: the lit colour x 8."""
    p = params(shading_toony=1.0, gi_equalization=0.0, base_color=(0.1, 0.1, 0.1, 1))
    col, aux = T.render_direct([T.item_spec(T.quad(PLANE_XZ))], {"M": p}, [T.sun((0, 1, 0))] * 8,
                               T.ortho_camera(), width=20, height=20, shadows=False, outlines=False,
                               world_color=np.zeros(3))
    assert np.allclose(col[10, 10, :3], 0.8, atol=1e-5)


def test_screen_space_outline(ext, empty_scene):
    p = params()
    cam = T.ortho_camera(half_height=1.6)
    kw: dict[str, Any] = dict(width=100, height=100, shadows=False, outlines=False, world_color=np.full(3, 0.5),
                              screen_space_outline_color=np.array([1.0, 0.0, 1.0]), screen_space_outline_width=2.0)
    col, aux = T.render_direct([T.item_spec(T.uv_sphere())], {"M": p}, [T.sun((0, 1, 0))], cam,
                               screen_space_outline=True, **kw)
    save_png(col, ARTIFACTS / "passes_screen_space_outline.png")
    mag = np.abs(col[..., :3] - (1, 0, 1)).max(-1) < 1e-4
    runs = ring_width(mag[50])
    assert len(runs) == 2 and all(1 <= r <= 3 for r in runs), runs
    col2, _ = T.render_direct([T.item_spec(T.uv_sphere())], {"M": p}, [T.sun((0, 1, 0))], cam,
                              screen_space_outline=False, **kw)
    assert not np.any(np.abs(col2[..., :3] - (1, 0, 1)).max(-1) < 1e-4)


def test_fxaa_smooths_edges(ext, empty_scene):
    p = params(shading_toony=1.0)
    cam = T.ortho_camera(half_height=1.3)
    args = ([T.item_spec(T.uv_sphere())], {"M": p}, [T.sun((0, 1, 0))], cam)
    hard, _ = T.render_direct(*args, width=64, height=64, shadows=False, outlines=False, fxaa=False,
                              world_color=np.zeros(3))
    soft, _ = T.render_direct(*args, width=64, height=64, shadows=False, outlines=False, fxaa=True,
                              world_color=np.zeros(3))
    n_hard = len(np.unique(np.round(hard[..., 0], 4)))
    n_soft = len(np.unique(np.round(soft[..., 0], 4)))
    assert n_soft > n_hard + 5
    assert np.allclose(hard[32, 32], soft[32, 32], atol=1e-5)    # flat interior untouched


def test_frustum_culling_skips_items(ext, empty_scene):
    from types import SimpleNamespace

    from stylized_renderer.engine.core.assets import Bounds
    from stylized_renderer.engine.gpu.passes.common import frustum_visible

    cam = T.persp_camera(location=(0, -6, 0))
    inside = SimpleNamespace(world_bounds=Bounds(np.array([-1, -1, -1.0]), np.array([1, 1, 1.0])), world=np.eye(4))
    behind = SimpleNamespace(world_bounds=Bounds(np.array([-1, -12, -1.0]), np.array([1, -10, 1.0])), world=np.eye(4))
    aside = SimpleNamespace(world_bounds=Bounds(np.array([30, -1, -1.0]), np.array([32, 1, 1.0])), world=np.eye(4))
    vis = frustum_visible([inside, behind, aside], cam.view_projection)
    assert vis == [inside]


def test_normal_map_bitangent_follows_mirroring(ext, empty_scene):
    """Regression: the bitangent sign ignored mirroring, so normal maps inverted on mirrored
    objects.  A normal map tilting towards +bitangent (+V, world +Z on this plane) must tilt the
    normal to +Z whether the object is mirrored in X or not (as Blender's normal map does)."""
    tilt = np.array([0.0, 0.6, 0.8])
    tex = np.ones((4, 4, 4), np.float32)
    tex[..., :3] = tilt * 0.5 + 0.5
    img = T.float_image("nmap_b", tex)
    cam = T.ortho_camera(half_height=1.5)
    L = (0.0, 0.0, -1.0)                          # travels -Z: grazing, lights normals facing +Z
    p = params(shading_toony=0.5, textures={"normal": tex_ref(img)}, double_sided=True)
    out = {}
    for mirror in (False, True):
        world = np.diag([-1.0 if mirror else 1.0, 1.0, 1.0, 1.0])
        col, aux = T.render_direct([T.item_spec(T.quad(PLANE_XZ), world=world)], {"M": p}, [T.sun(L)], cam,
                                   width=40, height=40, shadows=False, outlines=False, world_color=np.zeros(3))
        out[mirror] = (col[20, 20, :3], aux[20, 20, :3])
    assert np.allclose(out[False][1], (0.0, -0.8, 0.6), atol=2e-3), out[False][1]
    assert np.allclose(out[True][1], (0.0, -0.8, 0.6), atol=2e-3), out[True][1]
    assert np.allclose(out[True][0], out[False][0], atol=2e-3)
