"""ShadowPass: a directional shadow map for the strongest sun lamp.

The orthographic light projection is fitted every frame to the union of the dynamic world
bounds of all shadow casters (frustum-culled casters included), so a swung arm still casts.
Casters are drawn with the same skinning include and palette as the forward pass; MASK/BLEND
materials alpha-test.  Depth bias (normalised light depth, i.e. a fraction of the fitted depth range)
and normal offset (shadow texels, scaled by 1 - N.L) are applied when sampling; PCF is a bilinear-weighted (2r+2)^2 texel filter.
"""
from __future__ import annotations

import numpy as np

from .common import bounds_corners, bounds_valid, gl_matrix


def strongest_sun(lights):
    """Index of the brightest shadow-casting SUN lamp in ``lights`` (or -1)."""
    best, best_i = 0.0, -1
    for i, l in enumerate(lights):
        if l.kind != "SUN" or not getattr(l, "cast_shadow", True):
            continue
        lum = float(np.dot(np.asarray(l.color, np.float64)[:3], (0.2126, 0.7152, 0.0722)))
        if lum > best:
            best, best_i = lum, i
    return best_i


def light_view_matrix(direction: np.ndarray, center: np.ndarray) -> np.ndarray:
    d = np.asarray(direction, np.float64)
    d = d / max(np.linalg.norm(d), 1e-12)
    up = np.array([0.0, 0.0, 1.0]) if abs(d[2]) < 0.99 else np.array([0.0, 1.0, 0.0])
    x = np.cross(d, up)
    x /= np.linalg.norm(x)
    y = np.cross(x, d)
    m = np.eye(4)
    m[0, :3], m[1, :3], m[2, :3] = x, y, -d     # light looks down its -Z = direction of travel
    m[:3, 3] = -m[:3, :3] @ np.asarray(center, np.float64)
    return m


def ortho(l, r, b, t, n, f) -> np.ndarray:
    m = np.eye(4)
    m[0, 0] = 2.0 / (r - l); m[0, 3] = -(r + l) / (r - l)
    m[1, 1] = 2.0 / (t - b); m[1, 3] = -(t + b) / (t - b)
    m[2, 2] = -2.0 / (f - n); m[2, 3] = -(f + n) / (f - n)
    return m


def fit_shadow_matrix(direction, casters, resolution: int, pad_texels: float = 4.0):
    """(light view-projection, world size of one texel) fitted to the casters' world bounds."""
    corners = [bounds_corners(it.world_bounds) for it in casters if bounds_valid(getattr(it, "world_bounds", None))]
    if not corners:
        return None, 0.0, 0.0
    pts = np.vstack(corners)
    center = 0.5 * (pts.min(0) + pts.max(0))
    view = light_view_matrix(direction, center)
    lp = np.hstack([pts, np.ones((pts.shape[0], 1))]) @ view.T
    lo, hi = lp[:, :3].min(0), lp[:, :3].max(0)
    ext = max(hi[0] - lo[0], hi[1] - lo[1], 1e-4)
    texel = ext / max(resolution, 1)
    pad = pad_texels * texel
    # square texels: centre the larger extent
    cx, cy = 0.5 * (lo[0] + hi[0]), 0.5 * (lo[1] + hi[1])
    half = 0.5 * ext + pad
    texel = 2.0 * half / max(resolution, 1)
    depth_pad = max(0.05 * (hi[2] - lo[2]), 1e-3)
    proj = ortho(cx - half, cx + half, cy - half, cy + half, -hi[2] - depth_pad, -lo[2] + depth_pad)
    return proj @ view, texel, (hi[2] - lo[2]) + 2.0 * depth_pad


class ShadowPass:
    def __init__(self):
        self._res = None
        self._depth = None
        self._dummy_color = None
        self._fb = None
        self.light_view_projection = None
        self.texel_world = 0.0
        self.depth_range = 0.0
        self.caster_count = 0

    def _ensure(self, res: int):
        import gpu

        if self._res != res:
            self._depth = gpu.types.GPUTexture((res, res), format="DEPTH_COMPONENT32F")
            self._fb = gpu.types.GPUFrameBuffer(depth_slot=self._depth)
            self._res = res

    @property
    def texture(self):
        return self._depth

    def fit(self, frame, casters, light) -> bool:
        """Fit the light projection to ``casters`` (culled ones included). False: nothing casts."""
        res = int(max(16, min(8192, frame.settings.shadow_resolution)))
        self.caster_count = len(casters)
        vp, texel, depth_range = fit_shadow_matrix(light.direction, casters, res) if casters else (None, 0.0, 0.0)
        self.light_view_projection = vp
        self.texel_world = texel
        self.depth_range = depth_range
        if vp is not None:
            self._ensure(res)
        return vp is not None

    def draw(self, shader, casters, bind_material) -> None:
        """Render the depth map (the frame block ``fr`` must already hold the light matrix)."""
        import gpu
        from ..runtime.gpu_backend import bind_deform

        res = self._res
        with self._fb.bind():
            gpu.state.viewport_set(0, 0, res, res)
            self._fb.clear(depth=1.0)
            gpu.state.depth_test_set("LESS_EQUAL")
            gpu.state.depth_mask_set(True)
            gpu.state.face_culling_set("NONE")   # both sides cast: no leaks through thin geometry
            gpu.state.blend_set("NONE")
            shader.bind()
            current = None
            for it in casters:
                if it.material_name != current:
                    bind_material(shader, it.material_name, shadow_pass=True)
                    current = it.material_name
                shader.uniform_float("model", gl_matrix(it.world))
                bind_deform(shader, it)
                it.stream.batch.draw(shader)

    def free(self):
        self._depth = None
        self._fb = None
        self._res = None
