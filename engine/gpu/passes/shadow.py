"""ShadowPass: view-fitted cascaded shadow maps for the strongest sun lamp.

The camera's view between ``near`` and ``far`` is cut into 1-4 slices (3 by default) by the practical split scheme
(a blend of logarithmic and uniform splits, ``split_lambda``).  ``near``/``far`` are the camera's
clip range tightened to the visible geometry's depth and to the shadow distance, so a 2 km
ground, a vertex at 1e20 or a 1000 m clip range does not dilute the maps.  Each cascade is an
orthographic light projection around its slice's bounding sphere:

* **stable**: the light's rotation depends only on the sun's direction, the sphere's radius is
  rounded up to 1/8-octave steps (the slice's depth range too), and the window's centre is
  snapped to whole texels in light space, so a moving or turning camera moves the window by
  whole texels and shadow edges do not swim;
* **casters**: every caster whose light-space box overlaps the window is drawn (culled casters
  included: a swung arm outside the view still casts).  The depth range reaches from the slice
  towards the sun to the farthest such caster, capped at ``DEPTH_CAP_RADII`` radii (float
  precision); casters beyond the cap are clamped onto the near plane in the vertex shader
  ("pancaking"), which only ever moves depths away from the sun, so it never adds false shadow;
* **blend**: the last ``fade`` fraction of each cascade's depth is blended with the next cascade
  (the last one fades out), so cascade boundaries do not show.  Each cascade's slice starts early
  enough to cover the blend band.

The cascades share one depth texture: one map of ``resolution``, or 2-4 tiles of ``resolution / 2``
texels (side by side, 4 as 2x2): no more texels than one map of ``resolution``.  Depth bias and
normal offset are given in shadow texels of the cascade that is sampled; PCF is a
bilinear-weighted (2r+2)^2 texel filter kept inside the tile (textureGather: 2x2 texels a read).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Union

import numpy as np

from ..chunks import sun_tile_cull

MAX_CASCADES = 4
DEPTH_CAP_RADII = 64.0       # casters farther towards the sun than this (x the window radius) are pancaked
_QUANT = 8.0                 # radius / depth-range rounding: 2^(1/8) steps


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


def light_rotation(direction: np.ndarray) -> np.ndarray:
    """(3,3) world -> light rotation; the light looks down its -Z (= the direction of travel)."""
    d = np.asarray(direction, np.float64)
    d = d / max(np.linalg.norm(d), 1e-12)
    up = np.array([0.0, 0.0, 1.0]) if abs(d[2]) < 0.99 else np.array([0.0, 1.0, 0.0])
    x = np.cross(d, up)
    x /= np.linalg.norm(x)
    y = np.cross(x, d)
    return np.array([x, y, -d])


def ortho(l, r, b, t, n, f) -> np.ndarray:
    m = np.eye(4)
    m[0, 0] = 2.0 / (r - l); m[0, 3] = -(r + l) / (r - l)
    m[1, 1] = 2.0 / (t - b); m[1, 3] = -(t + b) / (t - b)
    m[2, 2] = -2.0 / (f - n); m[2, 3] = -(f + n) / (f - n)
    return m


def camera_near_far(camera) -> tuple:
    """(near, far) view depths of a CameraData's projection (far may be inf)."""
    P = np.asarray(camera.projection, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        if camera.is_ortho:
            n, f = (P[2, 3] + 1.0) / P[2, 2], (P[2, 3] - 1.0) / P[2, 2]
        else:
            n = P[2, 3] / (P[2, 2] - 1.0)
            f = P[2, 3] / (P[2, 2] + 1.0) if abs(P[2, 2] + 1.0) > 1e-12 else np.inf
    n = float(n) if np.isfinite(n) else 0.0
    f = float(f) if np.isfinite(f) and f > n else np.inf
    return n, f


def _round_up(x: float) -> float:
    return float(2.0 ** (np.ceil(np.log2(max(x, 1e-6)) * _QUANT) / _QUANT))


def _round_down(x: float) -> float:
    return float(2.0 ** (np.floor(np.log2(max(x, 1e-6)) * _QUANT) / _QUANT))


def caster_boxes(items):
    """(K,2,3) min/max of the items' world bounds and a (K,) mask of the valid (finite) ones."""
    k = len(items)
    box = np.full((k, 2, 3), np.nan)
    for i, it in enumerate(items):
        b = getattr(it, "world_bounds", None)
        if b is not None:
            box[i, 0], box[i, 1] = b.minimum, b.maximum
    valid = np.all(np.isfinite(box), axis=(1, 2)) & np.all(box[:, 0] <= box[:, 1], axis=1)
    return box, valid


_CORNER_SEL = np.array([[x, y, z] for x in (0, 1) for y in (0, 1) for z in (0, 1)])


def _box_corners(box: np.ndarray) -> np.ndarray:
    """(K,8,3) corners of (K,2,3) boxes."""
    idx = np.arange(3)
    return box[:, _CORNER_SEL, idx]


def atlas_layout(count: int) -> tuple:
    """(columns, rows) of the cascades' tiles in the shadow atlas: 1, 2 or 3 side by side, 4 as 2x2."""
    count = int(max(1, min(MAX_CASCADES, count)))
    cols = count if count <= 3 else 2
    return cols, (count + cols - 1) // cols


def practical_splits(near: float, far: float, count: int, split_lambda: float) -> np.ndarray:
    """End depths of ``count`` slices of [near, far]: lambda x logarithmic + (1 - lambda) x uniform."""
    i = np.arange(1, count + 1) / count
    log = near * (far / near) ** i
    uni = near + (far - near) * i
    s = split_lambda * log + (1.0 - split_lambda) * uni
    s[-1] = far
    return s


@dataclass
class CascadeFit:
    matrices: list                     # per cascade (4,4) world -> light clip
    texel: np.ndarray                  # world size of one texel, per cascade
    depth_range: np.ndarray            # world depth covered by each cascade's projection
    splits: np.ndarray                 # view depth where each cascade ends
    blend: np.ndarray                  # view-depth width of the blend band at the end of each cascade
    tile: int                          # texels per side of one cascade's tile
    casters: list = field(default_factory=list)   # per cascade: indices into the casters it draws
    near: float = 0.0                  # view depth where cascade 0 begins

    @property
    def count(self) -> int:
        return len(self.matrices)


def fit_cascades(direction, camera, receivers, casters, count: int = 4, resolution: int = 2048,
                 max_distance: float = 100.0, split_lambda: float = 0.8, fade: float = 0.1):
    """Fit ``count`` cascades of the sun travelling along ``direction`` to ``camera``'s view of
    ``receivers`` (the visible items), drawing ``casters``.  None when nothing can receive."""
    count = int(max(1, min(MAX_CASCADES, count)))
    tile = int(resolution) if count == 1 else int(resolution) // 2
    tile = max(tile, 16)
    fade = float(min(max(fade, 0.0), 0.5))
    view = np.asarray(camera.view, np.float64)
    cam_world = np.linalg.inv(view)
    n_cam, f_cam = camera_near_far(camera)
    n_cam = max(n_cam, 1e-3) if not camera.is_ortho else n_cam
    far_limit = min(f_cam, float(max_distance) if max_distance > 0 else 1e4)

    # the view depth range that holds visible geometry (huge / non-finite boxes cannot widen it
    # beyond the clip range and the shadow distance)
    near, far = n_cam, far_limit
    rbox, rvalid = caster_boxes(receivers)
    if rvalid.any():
        corners = _box_corners(rbox[rvalid])                       # (K,8,3)
        depth = -(corners @ view[2, :3] + view[2, 3])              # (K,8)
        near = max(n_cam, float(depth.min()))
        far = min(far_limit, float(depth.max()) * 1.001 + 1e-4)   # (the farthest surface stays inside)
    if not np.isfinite(far) or far <= near:
        return None
    # quantised so a small camera move keeps the splits (and the texel sizes) unchanged
    near = _round_down(near) if near > 0 else near
    far = min(_round_up(far), far_limit)
    if far <= near:
        return None
    # the shadow fades out at its end only where the shadow distance or the clip range cut it, not
    # where the visible geometry ends
    fade_out = far >= far_limit
    lam = float(min(max(split_lambda, 0.0), 1.0))
    splits = practical_splits(max(near, 1e-3), far, count, lam) if near > 0 else \
        practical_splits(1e-3, far, count, 0.0)
    starts = np.empty(count)
    blend = np.empty(count)
    prev = near
    for i in range(count):
        blend[i] = fade * (splits[i] - prev)
        starts[i] = near if i == 0 else splits[i - 1] - blend[i - 1]
        prev = splits[i]
    if not fade_out:
        blend[-1] = 0.0

    # the view-space corner rays of the frustum
    P = np.asarray(camera.projection, np.float64)
    inv_p = np.linalg.inv(P)
    ndc = np.array([[x, y, -1.0, 1.0] for x in (-1, 1) for y in (-1, 1)])
    pn = ndc @ inv_p.T
    pn = pn[:, :3] / pn[:, 3:4]                                     # near-plane corners (view space)

    def slice_corners(d0, d1):
        out = []
        for d in (d0, d1):
            if camera.is_ortho:
                c = pn.copy()
                c[:, 2] = -d
            else:
                c = pn * (d / max(-pn[0, 2], 1e-12))
            out.append(c)
        v = np.vstack(out)
        return v @ cam_world[:3, :3].T + cam_world[:3, 3]

    R = light_rotation(direction)
    cbox, cvalid = caster_boxes(casters)
    if len(casters):
        lc = _box_corners(np.where(cvalid[:, None, None], cbox, 0.0)) @ R.T      # (K,8,3) light space
        clo, chi = lc.min(1), lc.max(1)
    else:
        clo = chi = np.zeros((0, 3))

    matrices, texels, ranges, drawn = [], np.empty(count), np.empty(count), []
    for i in range(count):
        pts = slice_corners(starts[i], splits[i])
        centre = pts.mean(0)
        radius = float(np.linalg.norm(pts - centre, axis=1).max())
        r = _round_up(radius) * tile / max(tile - 8, 1)             # + 4 texels each side (PCF, offsets)
        texel = 2.0 * r / tile
        cl = R @ centre
        # snapped to whole texels along all three axes: a sample's sub-pixel offset or a camera
        # move smaller than a texel keeps the projection (and the cached static depth)
        cx, cy, cz = np.round(cl / texel) * texel
        z_far = cz - r                                              # away from the sun
        z_near = cz + r                                             # towards the sun
        over = (cvalid & (chi[:, 0] >= cx - r) & (clo[:, 0] <= cx + r) & (chi[:, 1] >= cy - r)
                & (clo[:, 1] <= cy + r) & (chi[:, 2] >= z_far)) if len(casters) else np.zeros(0, bool)
        if over.any() and float(chi[over, 2].max()) > z_near:
            # rounded up (1/8-octave steps of the reach past the centre) so a caster moving a
            # little, as between motion-blur instants or frames, keeps the projection and the
            # static casters' cached depth (shadow_cache.py)
            z_near = cz + _round_up(float(chi[over, 2].max()) - cz)
        z_near = min(z_near, cz + r + DEPTH_CAP_RADII * r)
        pad = 0.01 * r
        z_near += pad
        z_far -= pad
        proj = ortho(cx - r, cx + r, cy - r, cy + r, -z_near, -z_far)
        m = np.eye(4)
        m[:3, :3] = R
        matrices.append(proj @ m)
        texels[i] = texel
        ranges[i] = z_near - z_far
        drawn.append(np.flatnonzero(over | ~cvalid) if len(casters) else np.zeros(0, int))
    return CascadeFit(matrices=matrices, texel=texels, depth_range=ranges, splits=splits, blend=blend,
                      tile=tile, casters=drawn, near=float(near))


def drawn_tile(tile) -> tuple:
    """What ``draw_tiles`` takes of a (x, y, size, index, caster indices, projection, cull) tile."""
    return tile[:5] + tile[6:7]


def draw_tiles(fb, tiles, casters, instances, shader_for, bind_material,
               clear: Optional[Union[str, Callable[[int, int, int], None]]] = "all") -> int:
    """Draw ``casters`` into the tiles of the depth atlas ``fb``: ``tiles`` holds (x, y, size,
    index, caster indices, cull) per tile; ``index`` reaches the shader as ``shadow_cascade`` (which
    matrix of the frame block projects); ``cull`` (engine/gpu/chunks.Cull or None): what the
    tile sees, so a big static caster draws only its chunks there.  ``clear``: "all" clears the whole atlas first, a
    callable ``clear(x, y, size)`` clears each tile before it is drawn (engine/gpu/passes/
    shadow_cache.py), None draws over what is there.  Returns the draws made."""
    import gpu

    draws = 0
    before = instances.cull
    with fb.bind():
        if clear == "all":
            fb.clear(depth=1.0)
        gpu.state.depth_test_set("LESS_EQUAL")
        gpu.state.depth_mask_set(True)
        gpu.state.face_culling_set("NONE")   # both sides cast: no leaks through thin geometry
        gpu.state.blend_set("NONE")
        bound = None
        for x, y, size, index, idx, cull in tiles:
            instances.cull = cull
            if callable(clear):
                clear(x, y, size)
                bound = None                 # (the clear binds its own shader)
            if len(idx) == 0:
                continue
            gpu.state.viewport_set(x, y, size, size)
            current = None
            for group in instances.groups([casters[int(k)] for k in idx]):
                it = group[0][1]
                sh = shader_for(it.material_name, group)
                if sh is not bound:
                    sh.bind()
                    bound = sh
                    current = None
                if it.material_name != current:
                    bind_material(sh, it.material_name, shadow_pass=True)
                    sh.uniform_int("shadow_cascade", index)
                    current = it.material_name
                instances.draw_group(sh, group, object_id=False)
                draws += 1
    instances.cull = before
    return draws


class ShadowPass:
    def __init__(self, depth_cache=None):
        self._size = None
        self._depth = None
        self._fb = None
        # names what the atlas holds: renewed with a new texture and by every draw made without the
        # depth cache, which then trusts nothing the atlas held (shadow_cache.py)
        self.atlas_token = None
        self.fit_result = None
        self.caster_count = 0
        self.draw_count = 0           # caster draws over all cascades (last frame)
        # the static casters' depth kept between frames (engine/gpu/passes/shadow_cache.py); None
        # draws every caster every frame
        self.depth_cache = depth_cache

    def _ensure(self, size):
        import gpu

        if self._size != size:
            self._depth = gpu.types.GPUTexture(size, format="DEPTH_COMPONENT32F")
            self._fb = gpu.types.GPUFrameBuffer(depth_slot=self._depth)
            self._size = size
            self.atlas_token = object()

    @property
    def texture(self):
        return self._depth

    def _draw_atlas(self, tiles, casters, instances, shader_for, bind_material, material_key=None,
                    mspec=None) -> None:
        """Draw ``tiles`` ((x, y, size, index, caster indices, projection, cull) each) into the atlas:
        through the depth cache when there is one and the pipeline names the materials' keys."""
        cache = self.depth_cache
        if cache is None or material_key is None or mspec is None:
            self.atlas_token = object()
            self.draw_count = draw_tiles(self._fb, [drawn_tile(t) for t in tiles], casters, instances, shader_for,
                                         bind_material)
            return
        self.draw_count = cache.draw(self._fb, self._depth, self._size, tiles, casters, instances, shader_for,
                                     bind_material, material_key, mspec, token=self.atlas_token)

    @property
    def columns(self) -> int:
        return 1 if self.fit_result is None else atlas_layout(self.fit_result.count)[0]

    def fit(self, frame, receivers, casters, light) -> bool:
        """Fit the cascades to the camera's view of ``receivers``. False: nothing to shadow."""
        s = frame.settings
        res = int(max(16, min(8192, s.shadow_resolution)))
        self.caster_count = len(casters)
        fit = fit_cascades(light.direction, frame.camera, receivers, casters,
                           count=int(getattr(s, "shadow_cascades", 3)), resolution=res,
                           max_distance=float(getattr(s, "shadow_distance", 100.0)),
                           split_lambda=float(getattr(s, "shadow_split_lambda", 0.8)),
                           fade=float(getattr(s, "shadow_cascade_fade", 0.1))) if casters else None
        self.fit_result = fit
        if fit is None:
            return False
        cols, rows = atlas_layout(fit.count)
        self._ensure((cols * fit.tile, rows * fit.tile))
        return True

    def draw(self, shader, casters, bind_material, instances=None, material_key=None, mspec=None,
             cull: bool = True) -> None:
        """Render every cascade into its tile (the frame block ``fr`` must hold the matrices).
        ``cull``: big static casters draw only their chunks inside each cascade (chunks.py).
        ``shader``: the shadow shader, or a callable ``(material name, group) -> shader`` (the
        specialised variant of each draw group); ``instances``: the frame's FrameInstances
        (grouped draws); None draws each caster alone.  ``material_key`` / ``mspec``: see
        ``StaticDepthCache.draw`` (without them every caster is drawn)."""
        from .instancing import FrameInstances

        if instances is None:
            instances = FrameInstances(casters, enabled=False)
        shader_for = shader if callable(shader) and not hasattr(shader, "bind") else (lambda _n, _g: shader)
        fit = self.fit_result
        if fit is None:
            raise RuntimeError("shadow draw: no cascades fitted (fit() returned False or was not called)")
        cols, t = self.columns, fit.tile
        tiles = [((c % cols) * t, (c // cols) * t, t, c, fit.casters[c], fit.matrices[c],
                  sun_tile_cull(fit.matrices[c]) if cull else None) for c in range(fit.count)]
        self._draw_atlas(tiles, casters, instances, shader_for, bind_material, material_key, mspec)

    def free(self):
        self._depth = None
        self._fb = None
        self.atlas_token = None
        self._size = None
        if self.depth_cache is not None:
            self.depth_cache.free()
