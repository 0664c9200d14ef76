"""LocalShadowPass: shadow maps of point, spot and area lamps (the sun's are engine/gpu/passes/shadow.py).

* **Spot lamps** get one perspective map looking down the lamp's axis, its field of view the cone
  (``spot_size``) widened by the PCF margin; a cone wider than ``CUBE_SPOT_ANGLE`` gets a cube
  map instead (a perspective map cannot hold it).
* **Point and area lamps** (an area lamp shades as a point at its centre: README "Light units")
  get a cube map: six 90-degree perspective faces (+X, -X, +Y, -Y, +Z, -Z), each widened by the
  same margin so a PCF footprint near a face's edge stays inside its tile; the shader picks the
  face by the major axis of the lamp-to-fragment vector (glsl/mtoon_shadows.glsl).

Every face is a tile of one 2D depth atlas: one spot uses one tile, a cube six consecutive
tiles, at most ``ATLAS_COLUMNS`` tiles per row.  (Blender's ``gpu`` module does offer cube-map
textures on 4.5, 5.0 and 5.2 (``GPUTexture(is_cubemap=True)``, a face attached as a framebuffer
``layer``); the atlas is used instead so that every lamp is read through one sampler (the
shaders use 11 of their 16) and filtered by the sun's own texel-space PCF (shadow_pcf in
glsl/mtoon_shadows.glsl); the faces' margins keep the filter inside a face, so cube seams do not
show.)  A tile has ``tile_size(resolution)`` texels a
side.  The near plane is the lamp's *Shadow > Clip Start* (``shadow_buffer_clip_start``), the
far plane the farthest finite corner of what the frame draws; a face draws the casters whose
boxes touch its frustum.  Bias, normal offset and PCF are the sun's (the same settings, in
texels of the face at the fragment's depth).

Which lamps cast: those with *Cast Shadow* (``use_shadow``) on, among the lamps that shade the
frame; at most ``MAX_LOCAL_SHADOWS`` of them, the strongest (``local_shadow_lamps``); the others
light without a shadow and the frame names them (``limit_message``).  Casters follow the sun's
rules (Object > Visibility > Shadow, the material's shadow mode).  A frame without such a lamp
draws nothing here and its shaders compile without the lookup.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..chunks import lamp_face_cull
from .lights import mtoon_light_colors, shading_lights
from .shadow import ShadowPass, caster_boxes, light_rotation

MAX_LOCAL_SHADOWS = 4
CUBE_FACES = 6
ATLAS_COLUMNS = 6
CUBE_SPOT_ANGLE = np.radians(150.0)   # a spot cone wider than this casts through a cube map
LOCAL_KINDS = ("POINT", "SPOT", "AREA")
MARGIN_TEXELS = 4                     # each side of a face: the PCF footprint and the offsets
LOCAL_FACE0 = 4                       # the shadow shader's face index of slot 0 (after the sun's cascades)
FLOATS = 16 * MAX_LOCAL_SHADOWS * CUBE_FACES + 4 * MAX_LOCAL_SHADOWS + 4   # FrameBlock's local part

# the cube's faces: the direction each looks along and its up vector
_CUBE = ((np.array([1.0, 0, 0]), np.array([0, -1.0, 0])), (np.array([-1.0, 0, 0]), np.array([0, -1.0, 0])),
         (np.array([0, 1.0, 0]), np.array([0, 0, 1.0])), (np.array([0, -1.0, 0]), np.array([0, 0, -1.0])),
         (np.array([0, 0, 1.0]), np.array([0, -1.0, 0])), (np.array([0, 0, -1.0]), np.array([0, -1.0, 0])))


def tile_size(resolution: int) -> int:
    """Texels per side of one face: a quarter of the sun's shadow resolution, 128-2048."""
    return int(min(2048, max(128, int(resolution) // 4)))


def local_shadow_lamps(lights) -> tuple:
    """(indices into ``lights`` of the lamps that get a shadow map, indices of the shadow-casting
    local lamps left without one: over ``MAX_LOCAL_SHADOWS``, the weakest)."""
    cand = [i for i, l in enumerate(lights) if l.kind in LOCAL_KINDS and getattr(l, "cast_shadow", True)]
    if len(cand) <= MAX_LOCAL_SHADOWS:
        return cand, []
    strength = mtoon_light_colors([lights[i] for i in cand]).max(-1)
    order = [cand[k] for k in np.argsort(-strength, kind="stable")]
    return sorted(order[:MAX_LOCAL_SHADOWS]), sorted(order[MAX_LOCAL_SHADOWS:])


def limit_message(light) -> str:
    """What the frame says of a shadow-casting lamp over the limit (Stats panel, render log)."""
    return (f"lamp '{light.name}' casts no shadow: only the {MAX_LOCAL_SHADOWS} strongest point, spot and "
            f"area lamps cast shadows (more would multiply the shadow pass)")


def local_shadow_losses(frame) -> list:
    """``limit_message`` of each shadow-casting lamp the frame leaves without a shadow map (the
    same choice as the pipeline's: the lamps that shade it, then ``local_shadow_lamps``)."""
    s = frame.settings
    if not getattr(s, "shadows", True):
        return []
    lights = shading_lights(frame.lights, getattr(s, "max_lights", 16))
    return [limit_message(lights[i]) for i in local_shadow_lamps(lights)[1]]


def perspective(tan_half: float, near: float, far: float) -> np.ndarray:
    m = np.zeros((4, 4))
    m[0, 0] = m[1, 1] = 1.0 / tan_half
    m[2, 2] = -(far + near) / (far - near)
    m[2, 3] = -2.0 * far * near / (far - near)
    m[3, 2] = -1.0
    return m


def _view(rotation: np.ndarray, position: np.ndarray) -> np.ndarray:
    v = np.eye(4)
    v[:3, :3] = rotation
    v[:3, 3] = -rotation @ position
    return v


def _look(forward, up) -> np.ndarray:
    """(3,3) world -> view rotation of a view looking along ``forward`` (its -Z) with ``up``."""
    z = -forward
    x = np.cross(up, z)
    x /= np.linalg.norm(x)
    return np.array([x, np.cross(z, x), z])


@dataclass
class LocalFit:
    lights: list                       # per shadowed lamp: its index into the frame's lights
    first: list                        # per lamp: its first tile (slot)
    faces: list                        # per lamp: 1 (spot) or 6 (cube)
    texel: list                        # per lamp: world size of one texel per metre of depth
    matrices: list                     # per slot: (4,4) world -> clip
    casters: list = field(default_factory=list)   # per slot: indices into the casters it draws
    tile: int = 512
    reach: list = field(default_factory=list)     # per slot: (lamp position, its influence radius)

    @property
    def slots(self) -> int:
        return len(self.matrices)

    @property
    def columns(self) -> int:
        return min(ATLAS_COLUMNS, max(1, self.slots))


def _far(position, boxes) -> float:
    """The distance from ``position`` to the farthest finite corner of ``boxes`` ((K,2,3))."""
    if not len(boxes):
        return 0.0
    lo, hi = boxes[:, 0], boxes[:, 1]
    far = np.maximum(np.abs(lo - position), np.abs(hi - position))     # farthest corner per axis
    return float(np.sqrt((far ** 2).sum(1)).max())


def fit_local(lights, indices, receivers, casters, resolution: int = 2048) -> LocalFit | None:
    """The faces of each lamp of ``lights[indices]``; None when nothing can cast."""
    from ...core.world.extractor import bounds_outside_many, frustum_planes

    if not indices or not casters:
        return None
    tile = tile_size(resolution)
    widen = tile / max(tile - 2 * MARGIN_TEXELS, 1)
    cbox, cvalid = caster_boxes(casters)
    rbox, rvalid = caster_boxes(receivers)
    boxes = np.concatenate([cbox[cvalid], rbox[rvalid]])
    boxes = boxes[np.all(np.abs(boxes) < 1e7, axis=(1, 2))]
    fit = LocalFit([], [], [], [], [], tile=tile)
    for i in indices:
        l = lights[i]
        pos = np.asarray(l.position, np.float64)
        far = _far(pos, boxes) * 1.01 + 1e-3
        near = float(min(max(getattr(l, "clip_start", 0.05), 1e-4), 0.5 * far))
        if not far > near:
            continue
        cube = l.kind != "SPOT" or float(l.spot_size) > CUBE_SPOT_ANGLE
        if cube:
            tan_half = widen
            rots = [_look(f, u) for f, u in _CUBE]
        else:
            tan_half = float(np.tan(0.5 * float(l.spot_size))) * widen
            rots = [light_rotation(l.direction)]
        proj = perspective(tan_half, near, far)
        fit.lights.append(int(i))
        fit.first.append(fit.slots)
        fit.faces.append(CUBE_FACES if cube else 1)
        fit.texel.append(2.0 * tan_half / tile)
        for r in rots:
            vp = proj @ _view(r, pos)
            fit.matrices.append(vp)
            fit.reach.append((pos, float(getattr(l, "influence", np.inf))))
            planes = frustum_planes(vp)
            if len(casters):
                out = bounds_outside_many(planes, np.where(cvalid[:, None], cbox[:, 0], 0.0),
                                          np.where(cvalid[:, None], cbox[:, 1], 0.0))
                fit.casters.append(np.flatnonzero(~out | ~cvalid))
            else:
                fit.casters.append(np.zeros(0, int))
    return fit if fit.lights else None


def pack_local(fit: LocalFit | None) -> np.ndarray:
    """FrameBlock's local part (glsl/mtoon_blocks.glsl): ``local_matrix[24]``, ``local_shadow[4]``
    (light index, first slot, faces, texel per metre), ``local_params`` (count, columns, tile)."""
    from .common import gl_matrix

    d = np.zeros(FLOATS, np.float32)
    if fit is None:
        return d
    for s, m in enumerate(fit.matrices):
        d[16 * s:16 * (s + 1)] = gl_matrix(m)
    o = 16 * MAX_LOCAL_SHADOWS * CUBE_FACES
    for j in range(len(fit.lights)):
        d[o + 4 * j:o + 4 * j + 4] = (fit.lights[j], fit.first[j], fit.faces[j], fit.texel[j])
    o += 4 * MAX_LOCAL_SHADOWS
    d[o:o + 3] = (len(fit.lights), fit.columns, fit.tile)
    return d


class LocalShadowPass(ShadowPass):
    """The local lamps' depth atlas (ShadowPass's texture and framebuffer handling)."""

    @property
    def count(self) -> int:
        return 0 if self.fit_result is None else len(self.fit_result.lights)

    def fit(self, frame, lights, indices, receivers, casters) -> bool:
        """Fit the faces of ``lights[indices]``; False: nothing to draw (the atlas is kept)."""
        res = int(max(16, min(8192, frame.settings.shadow_resolution)))
        self.fit_result = fit = fit_local(lights, indices, receivers, casters, res)
        if fit is None:
            return False
        cols = fit.columns
        self._ensure((cols * fit.tile, ((fit.slots + cols - 1) // cols) * fit.tile))
        return True

    def draw(self, shader_for, casters, bind_material, instances, material_key=None, mspec=None,
             cull: bool = True) -> None:
        """Render every face into its tile (the frame block ``fr`` must hold the matrices);
        ``material_key`` / ``mspec``: ShadowPass.draw's (the static depth cache); ``cull``: big
        static casters draw only their chunks inside each face and the lamp's reach (chunks.py)."""
        fit = self.fit_result
        if fit is None:
            raise RuntimeError("local shadow draw: no faces fitted (fit() returned False or was not called)")
        cols, t = fit.columns, fit.tile
        tiles = [((s % cols) * t, (s // cols) * t, t, LOCAL_FACE0 + s, fit.casters[s], fit.matrices[s],
                  lamp_face_cull(fit.matrices[s], *fit.reach[s]) if cull else None) for s in range(fit.slots)]
        self._draw_atlas(tiles, casters, instances, shader_for, bind_material, material_key, mspec)

    def free(self):
        super().free()
        self.fit_result = None
