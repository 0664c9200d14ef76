"""The GPU MToon forward pass against a CPU reference written from the spec (mtoon_testlib).

Lit spheres (and a plane for the shading-shift texture) under an orthographic camera; the
reference takes each pixel's shading normal from the pipeline's aux target (the exact normal the
fragment shader used), so the comparison is pixel by pixel with a 2/255 tolerance.  FXAA,
outlines and shadows are off."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from support import mtoon_testlib as T

TOL = 2.0 / 255.0
L_DIR = np.array([-0.45, 0.6, -0.55])         # light travel direction (towards +Y, down, to the left)
L_TO = -L_DIR / np.linalg.norm(L_DIR)         # unit vector to the light
SUN_C = np.array([1.0, 0.95, 0.9])


def params(**kw):
    from stylized_renderer.engine.core.assets.material import MToonParams

    base: dict[str, Any] = dict(base_color=(0.9, 0.5, 0.3, 1.0), shade_color=(0.2, 0.1, 0.25), shading_toony=0.9,
                shading_shift=0.0, gi_equalization=0.9, matcap_factor=(1, 1, 1), rim_color=(0, 0, 0))
    base.update(kw)
    return MToonParams(**base)


def render_sphere(p, world=(0.05, 0.05, 0.05), sky=None, ground=None, size=128, textures=None):
    cam = T.ortho_camera(half_height=1.2)
    col, aux = T.render_direct([T.item_spec(T.uv_sphere(1.0))], {"M": p}, [T.sun(L_DIR, SUN_C)], cam,
                               width=size, height=size, shadows=False, outlines=False, fxaa=False,
                               world_color=np.asarray(world, float), world_sky_color=sky, world_ground_color=ground)
    mask = aux[..., 3] > 0.5
    return col, aux, mask, -cam.forward


def check(col, ref, mask, name, exclude=None):
    from conftest import ARTIFACTS, save_png

    m = mask if exclude is None else (mask & ~exclude)
    err = np.abs(col[..., :3] - ref)[m]
    if m.sum() < 500 or err.max() > TOL:
        out = col.copy()
        out[..., :3][m] = ref[m]
        save_png(col, ARTIFACTS / f"mtoon_ref_{name}_gpu.png")
        save_png(out, ARTIFACTS / f"mtoon_ref_{name}_cpu.png")
    assert m.sum() > 500, "the object covers too few pixels"
    assert err.max() <= TOL, f"{name}: max error {err.max() * 255:.2f}/255 over {m.sum()} px " \
                             f"({(err > TOL).any(-1).sum()} px above tolerance)"


@pytest.mark.parametrize("toony", [0.5, 0.9, 1.0])
def test_toony(ext, empty_scene, toony):
    p = params(shading_toony=toony)
    col, aux, mask, V = render_sphere(p)
    N = aux[..., :3]
    ref = T.mtoon_reference(N, V, [(L_TO, SUN_C)], p, sky=(0.05,) * 3)
    # toony 1 is a step: pixels within float rounding of the step are ambiguous
    near = np.abs(N @ L_TO + p.shading_shift) < 1e-4
    check(col, ref, mask, f"toony{toony}", exclude=near)
    if toony < 1.0:   # the ramp really is soft: some pixels lie strictly between the two colours
        d = N[mask] @ L_TO
        assert np.any(np.abs(d) < (1 - toony) * 0.8)


@pytest.mark.parametrize("shift", [-0.5, 0.0, 0.5])
def test_shading_shift(ext, empty_scene, shift):
    p = params(shading_shift=shift, shading_toony=0.8)
    col, aux, mask, V = render_sphere(p)
    ref = T.mtoon_reference(aux[..., :3], V, [(L_TO, SUN_C)], p, sky=(0.05,) * 3)
    check(col, ref, mask, f"shift{shift}")


def test_shading_shift_texture(ext, empty_scene):
    """A plane facing the camera, the light at N.L = 0; the shift texture's R rises linearly with u,
    so the ramp runs across the plane: ramp = linearstep(-0.5, 0.5, -0.5 + u)."""
    from stylized_renderer.engine.core.assets.material import TextureRef

    w = 64
    tex = np.zeros((4, w, 4), np.float32)
    tex[..., 0] = ((np.arange(w) + 0.5) / w)[None, :]
    tex[..., 3] = 1.0
    img = T.float_image("shift_ramp", tex)
    p = params(shading_toony=0.5, shading_shift=-0.25,
               textures={"shading_shift": TextureRef(image=img, scale=0.75)})
    plane = T.quad([(-1, 0, -1), (1, 0, -1), (1, 0, 1), (-1, 0, 1)])    # faces -Y (the camera)
    cam = T.ortho_camera(half_height=1.2)
    size = 120
    L_dir = np.array([0.0, 0.0, -1.0])        # grazing: N.L = 0 on the plane
    col, aux = T.render_direct([T.item_spec(plane)], {"M": p}, [T.sun(L_dir, SUN_C)], cam, width=size,
                               height=size, shadows=False, outlines=False, fxaa=False, world_color=np.full(3, 0.05))
    X, Z = T.pixel_world_xz(cam, size, size)
    u = (X + 1) / 2
    mask = (aux[..., 3] > 0.5) & (u > 1.5 / w) & (u < 1 - 1.5 / w)
    ref = T.mtoon_reference(aux[..., :3], -cam.forward, [(-L_dir, SUN_C)], p, shift_extra=u * 0.75,
                            sky=(0.05,) * 3)
    check(col, ref, mask, "shift_texture")
    # without the texture the plane would be one flat colour: it is not
    row = col[size // 2, :, 0][mask[size // 2]]
    assert row.max() - row.min() > 0.3


@pytest.mark.parametrize("eq", [0.0, 1.0])
def test_gi_equalization(ext, empty_scene, eq):
    sky, ground = np.array([0.5, 0.6, 0.9]), np.array([0.05, 0.1, 0.02])
    p = params(gi_equalization=eq)
    col, aux, mask, V = render_sphere(p, sky=sky, ground=ground)
    ref = T.mtoon_reference(aux[..., :3], V, [(L_TO, SUN_C)], p, sky=sky, ground=ground)
    check(col, ref, mask, f"gi{eq}")
    # equalisation 1: top and bottom of the sphere's shade side receive the same GI; 0: they differ
    Nz = aux[..., 2]
    top = col[mask & (Nz > 0.8)][:, 2].mean() if np.any(mask & (Nz > 0.8)) else 0
    assert top > 0


def test_gi_equalization_changes_image(ext, empty_scene):
    sky, ground = np.array([0.5, 0.6, 0.9]), np.array([0.05, 0.1, 0.02])
    c0, _, m, _ = render_sphere(params(gi_equalization=0.0), sky=sky, ground=ground)
    c1, _, _, _ = render_sphere(params(gi_equalization=1.0), sky=sky, ground=ground)
    assert np.abs(c0 - c1)[m].max() > 0.1


def test_rim_fresnel_lift(ext, empty_scene):
    p = params(rim_color=(0.6, 0.8, 1.0), rim_fresnel_power=3.0, rim_lift=0.15, rim_lighting_mix=0.5)
    col, aux, mask, V = render_sphere(p)
    ref = T.mtoon_reference(aux[..., :3], V, [(L_TO, SUN_C)], p, sky=(0.05,) * 3)
    check(col, ref, mask, "rim")
    no_rim = T.mtoon_reference(aux[..., :3], V, [(L_TO, SUN_C)], params(), sky=(0.05,) * 3)
    assert np.abs(ref - no_rim)[mask].max() > 0.3     # the rim is a visible part of the result


def test_matcap(ext, empty_scene):
    """Matcap image linear in (u, v) so bilinear filtering reproduces it exactly: rgb = (u, v, 0.25)."""
    from stylized_renderer.engine.core.assets.material import TextureRef

    n = 128
    uu = (np.arange(n) + 0.5) / n
    tex = np.ones((n, n, 4), np.float32)
    tex[..., 0] = uu[None, :]
    tex[..., 1] = uu[:, None]
    tex[..., 2] = 0.25
    img = T.float_image("matcap_lin", tex)
    p = params(matcap_factor=(0.8, 0.6, 1.0), textures={"matcap": TextureRef(image=img)})
    col, aux, mask, V = render_sphere(p)
    N = aux[..., :3]
    ref = T.mtoon_reference(N, V, [(L_TO, SUN_C)], p, sky=(0.05,) * 3,
                            matcap=lambda uv: np.concatenate([uv, np.full(uv.shape[:-1] + (1,), 0.25)], -1))
    # stay clear of the texture's border half-texel (clamp vs. interpolation)
    X = np.cross([0, 0, 1.0], V); X /= np.linalg.norm(X); Y = np.cross(V, X)
    muv = np.stack([N @ X, N @ Y], -1) * 0.495 + 0.5
    inner = np.all((muv > 1.0 / n) & (muv < 1 - 1.0 / n), -1)
    # and of the silhouette: there the matcap UV changes so fast that the sampler picks a coarse
    # mip level, which Blender's image sampler wraps (REPEAT) across the border
    inner &= (N @ V) > 0.1
    check(col, ref, mask & inner, "matcap")
    # the matcap is oriented: a normal pointing up samples the top (v = 1) of the image
    up = mask & (N[..., 2] > 0.9)
    down = mask & (N[..., 2] < -0.9)
    assert col[up][:, 1].mean() > col[down][:, 1].mean() + 0.3


def test_emission(ext, empty_scene):
    p = params(emissive=(0.3, 0.1, 0.2))
    col, aux, mask, V = render_sphere(p)
    ref = T.mtoon_reference(aux[..., :3], V, [(L_TO, SUN_C)], p, sky=(0.05,) * 3)
    check(col, ref, mask, "emission")
    base = T.mtoon_reference(aux[..., :3], V, [(L_TO, SUN_C)], params(), sky=(0.05,) * 3)
    assert np.allclose((ref - base)[mask], (0.3, 0.1, 0.2))


def test_unit_sun_gives_lit_colour(ext, empty_scene):
    """MToon light colour 1 (a sun of strength pi W/m^2: README "Light units") facing the surface
    yields exactly the lit colour."""
    p = params(shading_toony=0.9, gi_equalization=0.0)
    plane = T.quad([(-1, 0, -1), (1, 0, -1), (1, 0, 1), (-1, 0, 1)])
    cam = T.ortho_camera()
    col, aux = T.render_direct([T.item_spec(plane)], {"M": p}, [T.sun((0, 1, 0))], cam, width=32, height=32,
                               shadows=False, outlines=False, fxaa=False, world_color=np.zeros(3))
    m = aux[..., 3] > 0.5
    assert np.abs(col[m][:, :3] - np.array(p.base_color[:3])).max() < 1e-5
