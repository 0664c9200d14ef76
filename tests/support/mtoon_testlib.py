"""Helpers for the MToon / pass tests: procedural primitives, direct pipeline renders with
hand-built FrameData (inside our engine's GPU context), and a CPU reference of the MToon 1.0
lighting equation written from the specification (VRMC_materials_mtoon-1.0 "Implementation"),
independent of the GLSL."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

# ------------------------------------------------------------------------------------------------
# geometry
# ------------------------------------------------------------------------------------------------


def uv_sphere(radius=1.0, segments=96, rings=48):
    th = np.linspace(0.0, np.pi, rings + 1)
    ph = np.linspace(0.0, 2.0 * np.pi, segments + 1)
    T, P = np.meshgrid(th, ph, indexing="ij")
    n = np.stack([np.sin(T) * np.cos(P), np.sin(T) * np.sin(P), np.cos(T)], -1).reshape(-1, 3)
    tan = np.stack([-np.sin(P), np.cos(P), np.zeros_like(P)], -1).reshape(-1, 3)
    uv = np.stack([P / (2 * np.pi), 1.0 - T / np.pi], -1).reshape(-1, 2)
    idx = []
    w = segments + 1
    for i in range(rings):
        for j in range(segments):
            a, b, c, d = i * w + j, i * w + j + 1, (i + 1) * w + j, (i + 1) * w + j + 1
            idx += [(a, c, b), (b, c, d)]
    idx = np.array(idx, np.int32)
    # drop degenerate pole triangles
    p = n * radius
    area = np.linalg.norm(np.cross(p[idx[:, 1]] - p[idx[:, 0]], p[idx[:, 2]] - p[idx[:, 0]]), axis=1)
    idx = idx[area > 1e-12]
    # outward winding (CCW seen from outside)
    c = p[idx].mean(1)
    nrm = np.cross(p[idx[:, 1]] - p[idx[:, 0]], p[idx[:, 2]] - p[idx[:, 0]])
    flip = np.einsum("ij,ij->i", nrm, c) < 0
    idx[flip] = idx[flip][:, [0, 2, 1]]
    return prim(p, n, uv, np.hstack([tan, np.ones((len(tan), 1))]), idx)


def quad(corners, uvs=((0, 0), (1, 0), (1, 1), (0, 1)), normal=None):
    """A two-triangle quad; corners CCW seen from the side its normal points to."""
    p = np.asarray(corners, np.float64)
    nrm = np.cross(p[1] - p[0], p[3] - p[0]) if normal is None else np.asarray(normal, np.float64)
    nrm = nrm / np.linalg.norm(nrm)
    t = (p[1] - p[0]) / np.linalg.norm(p[1] - p[0])
    return prim(p, np.tile(nrm, (4, 1)), np.asarray(uvs, np.float64), np.tile(np.append(t, 1.0), (4, 1)),
                np.array([(0, 1, 2), (0, 2, 3)], np.int32))


def box(size=1.0, center=(0, 0, 0)):
    s = size / 2.0
    c = np.asarray(center, np.float64)
    faces = [((0, 0, 1), (1, 0, 0)), ((0, 0, -1), (1, 0, 0)), ((1, 0, 0), (0, 1, 0)),
             ((-1, 0, 0), (0, -1, 0)), ((0, 1, 0), (-1, 0, 0)), ((0, -1, 0), (1, 0, 0))]
    P, N, UV, T, I = [], [], [], [], []
    for k, (nrm, t) in enumerate(faces):
        nrm, t = np.array(nrm, float), np.array(t, float)
        b = np.cross(nrm, t)
        for du, dv in ((-1, -1), (1, -1), (1, 1), (-1, 1)):
            P.append(c + s * (nrm + du * t + dv * b))
            N.append(nrm); T.append(np.append(t, 1.0)); UV.append(((du + 1) / 2, (dv + 1) / 2))
        o = 4 * k
        I += [(o, o + 1, o + 2), (o, o + 2, o + 3)]
    P = np.array(P)
    snor = P - c
    snor /= np.linalg.norm(snor, axis=1, keepdims=True)
    return prim(P, np.array(N), np.array(UV), np.array(T), np.array(I, np.int32), smooth=snor)


def prim(p, n, uv, tan, idx, smooth=None):
    return SimpleNamespace(positions=np.asarray(p, np.float32), normals=np.asarray(n, np.float32),
                           uv0=np.asarray(uv, np.float32), tangents=np.asarray(tan, np.float32),
                           smooth_normals=np.asarray(n if smooth is None else smooth, np.float32),
                           indices=np.asarray(idx, np.int32), joints=None, weights=None)


def translate(x=0.0, y=0.0, z=0.0):
    m = np.eye(4)
    m[:3, 3] = (x, y, z)
    return m


# ------------------------------------------------------------------------------------------------
# frame building
# ------------------------------------------------------------------------------------------------


def item_spec(primitive, material="M", world=None, object_id=1, cast_shadow=True):
    return dict(prim=primitive, material=material, world=np.eye(4) if world is None else np.asarray(world, float),
                object_id=object_id, cast_shadow=cast_shadow)


def ortho_camera(half_height=1.2, aspect=1.0, distance=10.0, near=0.1, far=40.0):
    """Camera at (0, -distance, 0) looking along +Y, Z up (like conftest.add_camera)."""
    from stylized_renderer.engine.core.world.frame import CameraData

    cam_world = np.array([[1, 0, 0, 0], [0, 0, -1, -distance], [0, 1, 0, 0], [0, 0, 0, 1]], float)
    view = np.linalg.inv(cam_world)
    hw = half_height * aspect
    proj = np.eye(4)
    proj[0, 0] = 1 / hw; proj[1, 1] = 1 / half_height
    proj[2, 2] = -2 / (far - near); proj[2, 3] = -(far + near) / (far - near)
    return CameraData(view=view, projection=proj, is_ortho=True)


def persp_camera(location=(0, -6, 0), fov_y=0.6, aspect=1.0, near=0.1, far=100.0, target=(0, 0, 0)):
    from stylized_renderer.engine.core.world.frame import CameraData

    eye = np.asarray(location, float)
    f = np.asarray(target, float) - eye
    f /= np.linalg.norm(f)
    up = np.array([0, 0, 1.0])
    r = np.cross(f, up); r /= np.linalg.norm(r)
    u = np.cross(r, f)
    cam_world = np.eye(4)
    cam_world[:3, 0], cam_world[:3, 1], cam_world[:3, 2], cam_world[:3, 3] = r, u, -f, eye
    t = 1 / np.tan(fov_y / 2)
    proj = np.zeros((4, 4))
    proj[0, 0] = t / aspect; proj[1, 1] = t
    proj[2, 2] = -(far + near) / (far - near); proj[2, 3] = -2 * far * near / (far - near); proj[3, 2] = -1
    return CameraData(view=np.linalg.inv(cam_world), projection=proj, is_ortho=False)


def sun(direction, color=(1.0, 1.0, 1.0), cast_shadow=True):
    """A sun whose MToon light colour is ``color`` (the C of the spec's ``lit x C``).  LightData holds
    Blender's units: a sun of irradiance E [W/m^2] gives MToon's light colour E / pi (README "Light
    units"), so the lamp is built with strength pi x ``color``."""
    from stylized_renderer.engine.core.world.frame import LightData

    d = np.asarray(direction, float)
    return LightData(kind="SUN", color=np.pi * np.asarray(color, float), direction=d / np.linalg.norm(d),
                     position=np.zeros(3), cast_shadow=cast_shadow)


def render_direct(specs, materials, lights, camera, width=128, height=128, **settings):
    """Run the FramePipeline on hand-built items inside the engine's GPU context.
    Returns (colour (H,W,4), aux (H,W,4): world shading normal xyz + object id)."""
    from stylized_renderer.engine.core.assets import Bounds
    from stylized_renderer.engine.core.world.frame import FrameData, FrameSettings
    from stylized_renderer.engine.gpu import util as gpu_util
    from stylized_renderer.engine.gpu.backend import GpuBackend
    from stylized_renderer.engine.gpu.passes.pipeline import FramePipeline

    def task():
        backend = GpuBackend()       # the streams' backend (its identity palette for unused samplers)
        items = []
        for s in specs:
            p = s["prim"]
            lb = Bounds.from_points(p.positions)
            items.append(SimpleNamespace(
                stream=backend.create_stream(p, cache_static=False), world=s["world"], world_bounds=lb.transformed(s["world"]), local_bounds=lb,
                palette=None, influences=0, material_name=s["material"], material_index=0,
                cast_shadow=s["cast_shadow"], object_id=s["object_id"], object_name=f"obj{s['object_id']}"))
        kw: dict[str, Any] = dict(fxaa=False, outlines=True, shadows=True)   # FrameSettings fields
        kw.update(settings)
        fs = FrameSettings(width=width, height=height, **kw)
        frame = FrameData(items=items, camera=camera, lights=list(lights), settings=fs, materials=materials)
        pipe = FramePipeline()
        try:
            tex = pipe.execute(frame)
            col = gpu_util.texture_to_numpy(tex, width, height)
            aux = gpu_util.texture_to_numpy(pipe.last_aux, width, height)
            return col, aux, dict(pipe.stats)
        finally:
            pipe.free()
            backend.release_all()

    col, aux, stats = gpu_util.run_in_gpu_context(task)
    return col, aux


def pixel_world_xz(camera, width, height):
    """World (x, z) of each pixel centre for ``ortho_camera`` (the view looks along +Y)."""
    hh = 1.0 / camera.projection[1, 1]
    hw = 1.0 / camera.projection[0, 0]
    xs = ((np.arange(width) + 0.5) / width * 2 - 1) * hw
    zs = ((np.arange(height) + 0.5) / height * 2 - 1) * hh
    return np.meshgrid(xs, zs)   # (H, W) each; row 0 = bottom (GL convention, as read back)


def float_image(name, rgba):
    """A float (linear) bpy image from an (H, W, 4) array (row 0 = bottom)."""
    import bpy

    a = np.asarray(rgba, np.float32)
    h, w = a.shape[:2]
    img = bpy.data.images.new(name, width=w, height=h, alpha=True, float_buffer=True)
    img.colorspace_settings.name = "Non-Color"
    img.pixels.foreach_set(np.ascontiguousarray(a).ravel())
    img.pack()
    return img


# ------------------------------------------------------------------------------------------------
# CPU reference (numpy) of MToon 1.0, from the specification
# ------------------------------------------------------------------------------------------------


def mtoon_reference(N, V, lights, p, shift_extra=None, sky=None, ground=None, matcap=None, rim_mask=None):
    """Per-pixel MToon colour.

    N: (...,3) unit shading normals; V: (3,) or (...,3) unit vectors to the viewer;
    lights: list of (L (3,) unit vector to the light, C (3,) colour x intensity);
    p: material (MToonParams-like); shift_extra: (...,) shading-shift texture R x scale;
    sky/ground: GI colours towards +Z / -Z (Blender up) - rawGi(n) interpolates them;
    matcap: f(uv (...,2)) -> (...,3) texture lookup; rim_mask: (...,3) rim multiply texture.
    """
    N = np.asarray(N, np.float64)
    lit = np.asarray(p.base_color[:3], np.float64)
    shade = np.asarray(p.shade_color, np.float64)
    shift = p.shading_shift + (0.0 if shift_extra is None else np.asarray(shift_extra)[..., None])
    toony = p.shading_toony
    color = np.zeros(N.shape, np.float64)
    light_sum = np.zeros(N.shape, np.float64)
    a, b = -1.0 + toony, 1.0 - toony
    for L, C in lights:
        d = np.clip(N @ np.asarray(L, np.float64), -1.0, 1.0)[..., None]
        x = d + shift
        ramp = np.clip((x - a) / (b - a), 0, 1) if b - a > 1e-6 else (x >= a).astype(np.float64)
        color += np.asarray(C) * (shade + (lit - shade) * ramp)      # C * mix(shade, lit, ramp)
        light_sum += np.asarray(C)
    sky = np.zeros(3) if sky is None else np.asarray(sky, np.float64)
    ground = sky if ground is None else np.asarray(ground, np.float64)

    def raw_gi(n):
        t = np.clip(n[..., 2:3] * 0.5 + 0.5, 0, 1)
        return ground + (sky - ground) * t

    uniform_gi = 0.5 * (sky + ground)           # (rawGi(+up) + rawGi(-up)) / 2
    gi = raw_gi(N) * (1 - p.gi_equalization) + uniform_gi * p.gi_equalization
    color += gi * lit
    color += np.asarray(p.emissive, np.float64)
    V = np.broadcast_to(np.asarray(V, np.float64), N.shape)
    ndv = np.sum(N * V, -1, keepdims=True)
    param = np.clip(1.0 - ndv + p.rim_lift, 0, 1) ** max(p.rim_fresnel_power, 1e-5) * np.asarray(p.rim_color)
    mc = np.zeros(N.shape)
    if matcap is not None:
        up = np.array([0.0, 0.0, 1.0])
        X = np.cross(up, V)
        X /= np.linalg.norm(X, axis=-1, keepdims=True)
        Y = np.cross(V, X)
        uv = np.stack([np.sum(X * N, -1), np.sum(Y * N, -1)], -1) * 0.495 + 0.5
        mc = np.asarray(p.matcap_factor) * matcap(uv)
    rim = mc + param
    if rim_mask is not None:
        rim = rim * rim_mask
    rim_light = light_sum + raw_gi(N)
    color += rim * (1.0 + (rim_light - 1.0) * p.rim_lighting_mix)
    return color
