"""Shared helpers of the MToon passes: std140 packing, material normalisation,
frustum culling and draw ordering."""
from __future__ import annotations

import numpy as np

from ...core.assets.material import MToonParams
from .shader_lib import load_glsl

MAX_LIGHTS = 16
TEX_SLOTS = ("base_color", "shade_multiply", "normal", "shading_shift", "emissive", "rim_multiply",
             "matcap", "outline_width_multiply", "uv_animation_mask", "metallic_roughness")
SAMPLER_NAMES = ("tex_base", "tex_shade", "tex_normal", "tex_shift", "tex_emissive", "tex_rim",
                 "tex_matcap", "tex_outline_w", "tex_uvmask", "tex_metal")
ALPHA_MODES = {"OPAQUE": 0, "MASK": 1, "BLEND": 2}
OUTLINE_MODES = {"none": 0, "worldCoordinates": 1, "screenCoordinates": 2}
# bits of the material block's flags word (MToonMaterial.pad0, read by mtoon_shaders.py)
MAT_FLAG_VERTEX_COLOR = 1    # base and shade colour x the vertex colour RGB
MAT_FLAG_VERTEX_ALPHA = 2    # base alpha x the vertex colour alpha
MAT_FLAG_UNLIT = 4           # the base colour is the result (no lights, shadows, GI, rim)

# std140 sizes (bytes) of the blocks in glsl/mtoon_blocks.glsl
FRAME_BLOCK_FLOATS = (16 * 2 + 4 * 9 + 4 * MAX_LIGHTS * 3 + 16 * 4 + 4 * 4   # ... + cascade matrices, splits
                      + 16 * 24 + 4 * 4 + 4                                   # + local lamps' shadow faces
                      + 8)                                                    # + lamp clusters' parameters
MATERIAL_BLOCK_FLOATS = 4 * 10 + 4 * len(TEX_SLOTS) + 4
MAT_INT_WORDS = 4 * 10 + 4 * len(TEX_SLOTS)   # the block's four ints: tex_mask, flags, pass index, pad
MAT_PASS_INDEX_WORD = MAT_INT_WORDS + 2       # MToonMaterial.pad1: Material > Pass Index

def blocks_source() -> str:
    return load_glsl("mtoon_blocks.glsl")


def fullscreen_shader(name: str, fragment_source: str, samplers=(), push_constants=()):
    """A screen-space shader (not geometry: no skinning include) drawing one big triangle."""
    import gpu

    info = gpu.types.GPUShaderCreateInfo()
    info.vertex_in(0, "VEC2", "p")
    iface = gpu.types.GPUStageInterfaceInfo(name + "_iface")
    iface.smooth("VEC2", "v_uv")
    info.vertex_out(iface)
    for slot, (stype, sname) in enumerate(samplers):
        info.sampler(slot, stype, sname)
    for pc in push_constants:
        info.push_constant(*pc)
    info.fragment_out(0, "VEC4", "frag_color")
    info.vertex_source("void main() { v_uv = p * 0.5 + 0.5; gl_Position = vec4(p, 0.0, 1.0); }")
    info.fragment_source(fragment_source)
    return gpu.shader.create_from_info(info)


class FullscreenPass:
    """A screen-space pass: one full-screen triangle into its own RGBA32F target, recreated when
    the frame size changes (the screen-space outline and the post process)."""

    def __init__(self, cache):
        self.cache = cache          # the pipeline's GpuCache (engine/gpu/passes/gpu_cache.py)
        self._size = None
        self._out = None
        self._fb = None

    def draw(self, width: int, height: int, shader, samplers=(), floats=()):
        """Draw ``shader`` with ``samplers`` / ``floats`` ((name, value) pairs); returns the target."""
        import gpu

        size = (width, height)
        if self._size != size:
            self._out = gpu.types.GPUTexture(size, format="RGBA32F")
            self._fb = gpu.types.GPUFrameBuffer(color_slots=(self._out,))
            self._size = size
        fb = self._fb
        assert fb is not None       # made above on the first draw (_size starts None)
        with fb.bind():
            gpu.state.viewport_set(0, 0, width, height)
            gpu.state.depth_test_set("NONE")
            gpu.state.blend_set("NONE")
            gpu.state.face_culling_set("NONE")
            shader.bind()
            for name, tex in samplers:
                shader.uniform_sampler(name, tex)
            for name, value in floats:
                shader.uniform_float(name, value)
            self.cache.fullscreen_batch(shader).draw(shader)
        return self._out

    def free(self):
        self._out = None
        self._fb = None
        self._size = None


# ------------------------------------------------------------------------------------------------
# Materials
# ------------------------------------------------------------------------------------------------

# The passes consume the materials layer's MToonParams (one definition of the parameter set).
Mat = MToonParams
_PASS_DEFAULT_BASE = (0.8, 0.8, 0.8, 1.0)   # an item without any material draws light grey


_FIELDS = tuple(f for f in MToonParams.__dataclass_fields__ if f not in ("source", "is_vrm_outline_material"))


def normalize_material(m) -> Mat:
    """Read an MToonParams-like object with defaults for anything missing.

    An object with only ``base_color`` (the foundation's SimpleMaterial, a plain Principled
    fallback) gets a shade colour of 0.6 x base so it still reads as a toon material."""
    if isinstance(m, MToonParams):
        return m
    out = MToonParams(base_color=_PASS_DEFAULT_BASE)
    if m is None:
        out.shade_color = tuple(0.6 * c for c in out.base_color[:3])
        return out
    for f in _FIELDS:
        v = getattr(m, f, None)
        if v is not None:
            setattr(out, f, v)
    if getattr(m, "shade_color", None) is None:
        out.shade_color = tuple(0.6 * float(c) for c in out.base_color[:3])
    if out.textures is None:
        out.textures = {}
    return out


def _v(x, n, default=0.0):
    a = [float(c) for c in list(x)[:n]]
    return a + [default] * (n - len(a))


def material_flags(mat: Mat) -> int:
    """The flags word of the material block (see the MAT_FLAG_* bits)."""
    return ((MAT_FLAG_VERTEX_COLOR if getattr(mat, "vertex_colors", False) else 0)
            | (MAT_FLAG_VERTEX_ALPHA if getattr(mat, "vertex_alpha", False) else 0)
            | (MAT_FLAG_UNLIT if getattr(mat, "unlit", False) else 0))


def receive_shadow_word(mat: Mat) -> float:
    """``MToonMaterial.uv_anim.w``: 0 = receives no shadow, else 0.5 + rate / 2 (1 = full shadow).
    The fragment stages sample the shadow when it is above 0.5; ``shadow_visibility`` decodes the
    rate (MToon 0.x _ReceiveShadowRate: visibility = mix(1, shadow, rate))."""
    rate = float(getattr(mat, "receive_shadow_rate", 1.0))
    if not mat.receive_shadow or not rate > 0.0:
        return 0.0
    return 0.5 + 0.5 * min(rate, 1.0)


def pack_material(mat: Mat, tex_present: int) -> np.ndarray:
    """std140 MToonMaterial block as float32 (the trailing ints are written as raw bits)."""
    d = np.zeros(MATERIAL_BLOCK_FLOATS, np.float32)
    d[0:4] = _v(mat.base_color, 4, 1.0)
    d[4:7] = _v(mat.shade_color, 3); d[7] = mat.shading_shift
    d[8:11] = _v(mat.emissive, 3); d[11] = min(max(float(mat.shading_toony), 0.0), 1.0)
    d[12:15] = _v(mat.matcap_factor, 3); d[15] = mat.gi_equalization
    d[16:19] = _v(mat.rim_color, 3); d[19] = mat.rim_fresnel_power
    d[20:23] = _v(mat.outline_color, 3); d[23] = mat.outline_lighting_mix
    ss = (mat.textures or {}).get("shading_shift")
    d[24:28] = (mat.rim_lift, mat.rim_lighting_mix, mat.normal_scale, mat.alpha_cutoff)
    d[28:32] = (mat.outline_width, OUTLINE_MODES.get(mat.outline_width_mode, 0),
                float(getattr(ss, "scale", 1.0) if ss is not None else 1.0), ALPHA_MODES.get(mat.alpha_mode, 0))
    d[32:36] = (mat.uv_scroll_x, mat.uv_scroll_y, mat.uv_rotation, receive_shadow_word(mat))
    d[36:40] = (float(getattr(mat, "metallic", 0.0)), float(getattr(mat, "roughness", 0.5)),
                float(getattr(mat, "metallic_channel", -1)), float(getattr(mat, "roughness_channel", -1)))
    for i, slot in enumerate(TEX_SLOTS):
        ref = (mat.textures or {}).get(slot)
        off = _v(getattr(ref, "uv_offset", (0.0, 0.0)) or (0.0, 0.0), 2)
        sc = _v(getattr(ref, "uv_scale", (1.0, 1.0)) or (1.0, 1.0), 2, 1.0)
        d[40 + 4 * i: 44 + 4 * i] = off + sc
    d[MAT_INT_WORDS:MAT_INT_WORDS + 4].view(np.int32)[:] = (tex_present, material_flags(mat), 0, 0)
    return d


def make_ubo(data: np.ndarray):
    import gpu

    return gpu.types.GPUUniformBuf(gpu.types.Buffer("FLOAT", data.size, data))


# ------------------------------------------------------------------------------------------------
# Geometry helpers
# ------------------------------------------------------------------------------------------------

def bounds_valid(b) -> bool:
    if b is None:
        return False
    lo = np.asarray(b.minimum)
    hi = np.asarray(b.maximum)
    return bool(np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(lo <= hi))


def frustum_visible(items, view_projection: np.ndarray) -> list:
    """Items whose world bounds intersect the camera frustum (conservative: a box is culled only
    when all its corners lie outside one clip plane; the extractor's test). Items without valid
    bounds are kept.  One vectorised test for all items."""
    from ...core.world.extractor import bounds_outside_many, frustum_planes

    items = list(items)
    if not items:
        return []
    lo = np.full((len(items), 3), np.nan)
    hi = np.full((len(items), 3), np.nan)
    for i, it in enumerate(items):
        b = getattr(it, "world_bounds", None)
        if b is not None:
            lo[i], hi[i] = b.minimum, b.maximum
    valid = np.all(np.isfinite(lo) & np.isfinite(hi) & (lo <= hi), axis=1)
    outside = np.zeros(len(items), bool)
    if valid.any():
        outside[valid] = bounds_outside_many(frustum_planes(view_projection), lo[valid], hi[valid])
    return [it for it, o in zip(items, outside) if not o]


def view_depth(item, view: np.ndarray) -> float:
    b = getattr(item, "world_bounds", None)
    if b is not None and bounds_valid(b):
        c = 0.5 * (np.asarray(b.minimum) + np.asarray(b.maximum))
    else:
        c = np.asarray(item.world)[:3, 3]
    return float(-(np.asarray(view) @ np.append(c, 1.0))[2])


def gl_matrix(m) -> np.ndarray:
    """Row-major numpy (4,4) -> column-major flat float32 as GLSL expects."""
    return np.asarray(m, np.float32).T.ravel()
