"""FramePipeline: renders one frame's RenderItems into a linear RGBA32F texture.

Passes, in order (each consumes the same RenderItems: vertex stream, palette, bounds):

1. ShadowPass            cascaded shadow maps of the strongest sun, fitted to the camera's view
                         of the visible items; every caster overlapping a cascade is drawn into
                         it (view-culled casters included), skinned with the item's palette.
2. ForwardOpaquePass     MToon 1.0: OPAQUE, then MASK, into colour + aux (normal, object id) + depth.
3. OutlineMaskPass       inverse hull (front faces culled) of OPAQUE/MASK items.
   (forward BLEND)       BLEND items sorted by queue (ZWrite group first, then offset) and back to
                         front, each with its hull first.
4. ScreenSpaceOutlinePass optional, edges from the aux target and depth.
5. PostProcessPass       FXAA; the result stays linear (Blender colour-manages it).

Every geometry draw uses the shader variant of its material, the frame and its deformation
(engine/gpu/passes/mtoon_shaders.py ``surface_spec`` / ``shadow_spec``: the choices llvmpipe would
otherwise pay for on every fragment and vertex are compile-time constants).
View-frustum culling uses each item's dynamic ``world_bounds``; culled casters still cast.
Draws are grouped (engine/gpu/passes/instancing.py): items that share a batch, material, mirroring
and deformation layout (linked duplicates) are one instanced draw per pass; ``stats`` counts
``draw_calls``, ``instanced_draws`` and ``batches_drawn``.
``stats`` records per-pass CPU submission times (ms) of the last frame.  Blender's Python ``gpu``
module has neither timer queries nor glFinish, so these are not GPU times; the whole-frame GPU cost
shows up in the session's read-back time.
"""
from __future__ import annotations

import time

import numpy as np

from ..chunks import camera_cull
from ..util import GpuContextMark
from .ambient_occlusion import AmbientOcclusionPass
from .common import (
    MAT_PASS_INDEX_WORD,
    SAMPLER_NAMES,
    TEX_SLOTS,
    frustum_visible,
    make_ubo,
    normalize_material,
    pack_material,
    view_depth,
)
from .frame_block import pack_frame
from .frame_lamps import FrameLamps
from .gpu_cache import GpuCache
from .instancing import FrameInstances
from .lamp_links import blocks
from .lights import shading_lights
from .local_shadows import LocalShadowPass, local_shadow_lamps
from .mtoon_shaders import (
    forward_shader,
    frame_spec,
    material_spec,
    outline_shader,
    shadow_shader,
    shadow_spec,
    surface_spec,
)
from .post import PostProcessPass
from .screen_outline import ScreenSpaceOutlinePass
from .shadow import ShadowPass, strongest_sun
from .shadow_cache import StaticDepthCache
from .shadow_softness import frame_soft, link_local_casters
from .skin_once import SkinOnce
from .textures import TextureCache

#: pipeline stat key -> the pass name the Stats panel shows (blend joins the forward pass)
GPU_TIME_KEYS = {"skin_once_ms": "skin_once", "shadow_ms": "shadow", "forward_ms": "forward", "blend_ms": "forward",
                 "outline_ms": "outline_mask", "screen_outline_ms": "screen_space_outline", "post_ms": "post_process"}


def _sync(fb, depth=False) -> None:
    """Wait for the GPU to finish writing ``fb`` (reading one pixel back blocks until then)."""
    if fb is None:
        return
    with fb.bind():
        if depth:
            fb.read_depth(0, 0, 1, 1)
        else:
            fb.read_color(0, 0, 1, 1, 4, 0, "FLOAT")


class FramePipeline:
    def __init__(self):
        self.gpu = GpuCache()         # this pipeline's shaders, full-screen batches, fallback textures
        # each keeps its static casters' depth between frames (shadow_cache.py)
        self.shadow = ShadowPass(StaticDepthCache(self.gpu))
        self.local_shadow = LocalShadowPass(StaticDepthCache(self.gpu))   # point, spot and area lamps (local_shadows.py)
        self.skin_once = SkinOnce(self.gpu)   # skin once per frame (skin_once.py)
        self.screen_outline = ScreenSpaceOutlinePass(self.gpu)
        self.post = PostProcessPass(self.gpu)
        self.ambient_occlusion = AmbientOcclusionPass(self.gpu)   # the AO render pass (made when requested)
        self.textures = TextureCache()
        self._size = None
        self._color = self._aux = self._depth = None
        self._fb_main = self._fb_blend = self._fb_plain = self._fb_passes = None
        self.pass_targets = None   # (pass0, pass1) textures while render passes are requested
        self._passes = False
        self.last_color = None     # the frame's colour before the screen-space outline and FXAA
        self._shadow_on = None     # whether the last frame drew shadow maps (None: none kept)
        self._local_on = False     # whether the last frame drew local lamps' shadow maps
        self._local_tex = None
        self._lamp_tex = None      # the frame's (lamp_data, lamp_lists) textures (frame_lamps.py)
        self.lamp_losses = []      # what the last frame says of lamps it left out (frame_lamps.py)
        self._drawn = []           # the last frame's items seen by the camera (draw_ids' coverage samples)
        self._id_instances = None  # their FrameInstances, shared by the frame's coverage samples
        self._key_instances = None  # (key, frame's instances, FrameInstances drawing key's ids): Cryptomatte
        self._frame_ubo = None
        self._mats = {}
        self._mspec = {}           # material name -> material_spec (the shader variant's material part)
        self._blocks = {}          # material name -> its std140 block's bytes (the shadow cache's key)
        self._frame_spec = frame_spec([], False)   # the variants' frame part (mtoon_shaders.frame_spec)
        self._mat_cache = {}       # material name -> (resolved source, params, texture bits, ubo)
        self.gpu_context = GpuContextMark()   # the GPU context the targets were made in
        self.stats = {}
        self.gpu_times = {}        # pass -> ms, measured only with Profile GPU (else empty: pending)
        self._settings = None
        self._instances = None
        self.last_aux = None       # (tests) the aux target of the last frame: normal xyz, object id
        self.chunk_culling = True  # big static meshes draw only their chunks a pass sees (chunks.py)
        self._camera_cull = None   # the current frame's camera frustum (chunks.Cull) or None

    # -- resources ---------------------------------------------------------------------------------
    def _ensure_targets(self, width: int, height: int, passes: bool = False):
        """Colour, aux (normal, object id) and depth; with ``passes`` (render passes that need the
        forward pass's extra outputs, engine/gpu/passes/render_passes.py) four more targets: pass0
        (shadow, shade, material pass index, outline coverage), pass1 (rim rgb), pass2 (diffuse
        colour rgb) and pass3 (emission rgb).  Without
        passes they are not made, and the shaders write none (no cost)."""
        import gpu

        if self._size != (width, height):
            self._color = gpu.types.GPUTexture((width, height), format="RGBA32F")
            self._aux = gpu.types.GPUTexture((width, height), format="RGBA32F")
            self._depth = gpu.types.GPUTexture((width, height), format="DEPTH_COMPONENT32F")
            self._fb_plain = gpu.types.GPUFrameBuffer(color_slots=(self._color, self._aux), depth_slot=self._depth)
            self._fb_blend = gpu.types.GPUFrameBuffer(color_slots=(self._color,), depth_slot=self._depth)
            self._fb_passes = self.pass_targets = None
            self._size = (width, height)
        if passes and self._fb_passes is None:
            self.pass_targets = tuple(gpu.types.GPUTexture((width, height), format="RGBA32F") for _ in range(4))
            self._fb_passes = gpu.types.GPUFrameBuffer(color_slots=(self._color, self._aux) + self.pass_targets,
                                                       depth_slot=self._depth)
        self._fb_main = self._fb_passes if passes else self._fb_plain

    def _prepare_materials(self, frame):
        """One std140 block and one texture set per material used this frame."""
        self._mats = {}
        self._mspec = {}
        self._blocks = {}
        names = {it.material_name for it in frame.items}
        cache = self._mat_cache
        for name in names:
            src = frame.materials.get(name) if name else None
            hit = cache.get(name)
            mat = hit[1] if hit is not None and hit[0] is src and src is not None else normalize_material(src)
            texs = []
            present = 0
            for i, slot in enumerate(TEX_SLOTS):
                ref = (mat.textures or {}).get(slot)
                tex = self.textures.get(getattr(ref, "image", None)) if ref is not None else None
                if tex is not None:
                    present |= 1 << i
                texs.append(tex)
            # the resolved parameters are cached per material (and replaced when it changes), so
            # the same object with the same textures reuses its uniform block
            index = int(frame.material_pass_index.get(name, 0))
            if hit is not None and hit[0] is src and src is not None and hit[2] == (present, index):
                ubo, block = hit[3], hit[4]
            else:
                data = pack_material(mat, present)
                data[MAT_PASS_INDEX_WORD:MAT_PASS_INDEX_WORD + 1].view(np.int32)[:] = index   # Material > Pass Index
                ubo, block = make_ubo(data), data.tobytes()
                cache[name] = (src, mat, (present, index), ubo, block)
            self._mats[name] = (mat, ubo, texs)
            self._blocks[name] = block
            self._mspec[name] = material_spec(mat, present)

    def _bind_material(self, shader, name, shadow_pass=False):
        mat, ubo, texs = self._mats[name]
        try:
            shader.uniform_block("mt", ubo)
        except ValueError:          # a variant that reads nothing of the material (OPAQUE shadow)
            pass
        shader.uniform_block("fr", self._frame_ubo)
        white = self.gpu.dummy_texture("white")
        for sname, tex in zip(SAMPLER_NAMES, texs):
            shader.uniform_sampler(sname, tex if tex is not None else white)
        shader.uniform_sampler("shadow_map", white if shadow_pass or self._shadow_tex is None else self._shadow_tex)
        shader.uniform_sampler("local_shadow_map", white if shadow_pass or self._local_tex is None else self._local_tex)
        data, lists = self._lamp_tex if self._lamp_tex is not None else (None, None)
        shader.uniform_sampler("lamp_data", white if shadow_pass or data is None else data)
        shader.uniform_sampler("lamp_lists", white if shadow_pass or lists is None else lists)
        return mat

    def _material_key(self, name) -> tuple:
        """What a material's shadow draw reads: its block's bytes and its textures (objects, held
        by the key) -- the static depth cache redraws a caster's tiles when one changes
        (shadow_cache.py)."""
        return (self._blocks[name],) + tuple(t for t in self._mats[name][2] if t is not None)

    def _flush(self, key, t0, fb=None, depth=False):
        """End of a pass: its CPU time; with Profile GPU on, first wait until the GPU finished
        the pass (a one-pixel read of the pass's target: Python's gpu has no timer queries or
        finish()), so the time includes the GPU work and lands in ``gpu_times``."""
        profiling = bool(getattr(self._settings, "profile_gpu", False))
        if profiling:
            _sync(fb if fb is not None else self._fb_main, depth)
        t1 = time.perf_counter()
        ms = (t1 - t0) * 1000.0
        self.stats[key] = ms
        if profiling:
            name = GPU_TIME_KEYS.get(key, key)
            self.gpu_times[name] = self.gpu_times.get(name, 0.0) + ms
        return t1

    # -- frame -------------------------------------------------------------------------------------
    def execute(self, frame):
        import gpu

        s = frame.settings
        self._settings = s
        self.gpu_times = {}
        t0 = time.perf_counter()
        self._passes = bool(getattr(s, "gpu_passes", False))
        self._ensure_targets(s.width, s.height, self._passes)
        self._prepare_materials(frame)
        lights = shading_lights(frame.lights)          # suns first, then point, spot and area lamps
        # the VRM Add-on's own outline material (Geometry Nodes hull) is never drawn: ours replaces it
        items = [it for it in frame.items
                 if not getattr(frame.materials.get(it.material_name), "is_vrm_outline_material", False)]
        lamps = FrameLamps(lights, items, frame.camera, s.width, s.height, getattr(s, "max_lights", 128))
        self.lamp_losses = lamps.losses

        # ---- 1. shadow -------------------------------------------------------------------------
        sun_i = strongest_sun(lights) if s.shadows else -1
        local_i = local_shadow_lamps(lights)[0] if s.shadows else []
        casters = []
        if sun_i >= 0 or local_i:
            casters = [it for it in items
                       if getattr(it, "cast_shadow", True) and self._mats[it.material_name][0].cast_shadow]
            casters.sort(key=lambda it: it.material_name)
        # Object > Visibility > Camera off (and indirect-only collections): casts, is not seen
        hidden = frame.camera_hidden
        seen = [it for it in items if it.object_name not in hidden] if hidden else items
        visible = frustum_visible(seen, frame.camera.view_projection)
        self._camera_cull = camera_cull(frame.camera.view_projection) if self.chunk_culling else None
        for k in ("chunks_drawn", "chunks_culled"):     # (counted by FrameInstances.draw_group)
            self.stats.pop(k, None)
        # instance data of every item the passes may draw; items sharing a batch, material and
        # deformation layout are drawn with one instanced call (engine/gpu/passes/instancing.py)
        self._instances = FrameInstances(items, palette_rows=frame.palette_rows, tally=self.stats)
        self._instances.rows[:, 4, 3] = lamps.words           # light linking (lamp_links.py)
        t0 = self.skin_once.frame(self._instances, s, self._flush, t0, self.stats)   # ---- 0. skin once
        # Shadow Linking: the casters each lamp's blocker collection lets block it
        sun_casters = blocks(lights[sun_i], casters) if sun_i >= 0 else []
        # a later anti-aliasing sample of the same frame keeps its shadow maps (engine/gpu/passes/samples.py)
        reuse = bool(getattr(s, "reuse_shadow", False)) and self._shadow_on is not None
        if reuse:
            shadows_on, local_on = bool(self._shadow_on), self._local_on   # (reuse: _shadow_on is not None)
        else:
            shadows_on = sun_i >= 0 and self.shadow.fit(frame, visible, sun_casters, lights[sun_i])
            local_on = bool(local_i) and self.local_shadow.fit(frame, lights, local_i, visible, casters)
            if local_on:
                link_local_casters(self.local_shadow.fit_result, lights, casters)
            self._shadow_on, self._local_on = shadows_on, local_on
        lfit = self.local_shadow.fit_result if local_on else None
        self._lamp_tex = lamps.textures({id(lights[li]): j for j, li in enumerate(lfit.lights)} if lfit else {})
        self._frame_ubo = make_ubo(pack_frame(frame, lamps.suns, self.shadow.fit_result if shadows_on else None,
                                              sun_i if shadows_on else -1, lfit, lamps))
        self._shadow_tex = self._local_tex = None
        sfit = self.shadow.fit_result if shadows_on else None
        self._frame_spec = frame_spec(lamps.suns, shadows_on, max(0, int(getattr(s, "shadow_pcf", 1))),
                                      sfit.count if sfit is not None else 0,
                                      self.local_shadow.count if local_on else 0, lamps.clusters is not None,
                                      frame_soft(s, lights, sun_i, self.shadow.fit_result if shadows_on else None,
                                                 lfit))
        inst = self._instances
        if shadows_on and not reuse:
            self.shadow.draw(lambda name, group: shadow_shader(self.gpu, shadow_spec(self._mspec[name], inst.vertex_class(group))),
                             sun_casters, self._bind_material, inst, self._material_key, self._mspec.get,
                             cull=self.chunk_culling)
        if local_on and not reuse:
            self.local_shadow.draw(lambda name, group: shadow_shader(
                self.gpu, shadow_spec(self._mspec[name], inst.vertex_class(group), local=True)),
                casters, self._bind_material, inst, self._material_key, self._mspec.get, cull=self.chunk_culling)
        if shadows_on:
            self._shadow_tex = self.shadow.texture
        if local_on:
            self._local_tex = self.local_shadow.texture
        self.stats.update(lamps.stats())
        self.stats.update(local_shadows=self.local_shadow.count if local_on else 0,
                          local_shadow_draws=self.local_shadow.draw_count if local_on else 0)
        if not reuse:     # the static depth caches' work this frame (shadow_cache.py)
            drawn = [p.depth_cache.stats for p, on in ((self.shadow, shadows_on), (self.local_shadow, local_on))
                     if on and p.depth_cache is not None]
            for k in ("static_tiles_drawn", "static_draws", "moving_draws", "restored_texels", "bypassed"):
                if drawn:
                    self.stats["shadow_" + k] = sum(int(d.get(k, 0)) for d in drawn)
                else:
                    self.stats.pop("shadow_" + k, None)
        t0 = self._flush("shadow_ms", t0, (self.shadow._fb if shadows_on else self.local_shadow._fb)
                         if (shadows_on or local_on) and not reuse else None, depth=True)

        # ---- 2. forward opaque / mask -------------------------------------------------------------
        self.stats.update(items=len(items), visible=len(visible), casters=len(casters))
        opaque, mask, blend, holdout = [], [], [], []
        for it in visible:
            if it.object_name in frame.holdout_objects or it.material_name in frame.holdout_materials:
                holdout.append(it)       # alpha 0 and RGB 0 where it covers, still occluding
                continue
            mode = self._mats[it.material_name][0].alpha_mode
            (blend if mode == "BLEND" else mask if mode == "MASK" else opaque).append(it)
        holdout.sort(key=lambda it: it.material_name)
        self._drawn = sorted(visible, key=lambda it: it.material_name)   # (coverage samples: draw_ids)
        self._id_instances = None
        opaque.sort(key=lambda it: it.material_name)
        mask.sort(key=lambda it: it.material_name)
        # premultiplied colour, as Blender's results are: an empty transparent film is (0, 0, 0, 0)
        wc = np.zeros(3) if s.film_transparent else np.asarray(s.world_color, np.float64)
        alpha = 0.0 if s.film_transparent else 1.0
        # colour + depth through the colour-only framebuffer, the aux target to zero on its own:
        # each target is cleared once (a clear of the main framebuffer also wrote the aux target)
        fb_blend, fb_main = self._fb_blend, self._fb_main
        assert fb_blend is not None and fb_main is not None     # made by _ensure_targets above
        with fb_blend.bind():
            fb_blend.clear(color=(float(wc[0]), float(wc[1]), float(wc[2]), alpha), depth=1.0)
        self._aux_clear()
        with fb_main.bind():
            gpu.state.viewport_set(0, 0, s.width, s.height)
            gpu.state.depth_test_set("LESS_EQUAL")
            gpu.state.depth_mask_set(True)
            gpu.state.blend_set("NONE")
            self._draw_list(forward_shader, opaque + mask, outline=False)
            if holdout:
                self._draw_list(forward_shader, holdout, outline=False, extra=("SPEC_HOLDOUT",))
            t0 = self._flush("forward_ms", t0)
            # ---- 3. outline mask (inverse hull) ----------------------------------------------------
            if s.outlines:
                self._draw_list(outline_shader, opaque + mask, outline=True)
            t0 = self._flush("outline_ms", t0)
        # ---- forward BLEND: queue order, back to front -------------------------------------------------
        if blend:
            view = frame.camera.view

            def key(it):
                m = self._mats[it.material_name][0]
                return (0 if m.transparent_with_zwrite else 1, int(m.render_queue_offset), -view_depth(it, view))

            blend.sort(key=key)
            with fb_blend.bind():
                gpu.state.viewport_set(0, 0, s.width, s.height)
                gpu.state.depth_test_set("LESS_EQUAL")
                gpu.state.blend_set("ALPHA")
                for it in blend:
                    m = self._mats[it.material_name][0]
                    gpu.state.depth_mask_set(bool(m.transparent_with_zwrite))
                    if s.outlines and m.outline_width_mode in ("worldCoordinates", "screenCoordinates") and m.outline_width > 0:
                        self._draw_list(outline_shader, [it], outline=True)
                    self._draw_list(forward_shader, [it], outline=False)
                    if self._passes:
                        self._blend_into_passes(it, s)
                gpu.state.blend_set("NONE")
                gpu.state.depth_mask_set(True)
        gpu.state.face_culling_set("NONE")
        gpu.state.front_facing_set(False)
        t0 = self._flush("blend_ms", t0)

        color = self._color
        self.last_color = color
        # ---- 4. screen-space outline ------------------------------------------------------------------
        if s.screen_space_outline:
            color = self.screen_outline.execute(frame, color, self._aux, self._depth)
        t0 = self._flush("screen_outline_ms", t0, self.screen_outline._fb if s.screen_space_outline else None)
        # ---- 5. post ---------------------------------------------------------------------------------
        color = self.post.execute(frame, color)
        gpu.state.depth_test_set("NONE")
        gpu.state.depth_mask_set(False)
        self._flush("post_ms", t0, self.post._fb if color is getattr(self.post, "_out", None) else None)
        self.last_aux = self._aux
        self.stats.update(self._instances.stats())
        self._id_instances = self._instances      # (the coverage samples draw the frame's items again)
        self._instances = None
        return color

    def draw_ids(self, frame, target, key=None) -> None:
        """A coverage sample of the frame just drawn (engine/gpu/passes/samples.py): which surface
        covers each pixel under ``frame.camera`` (a jittered projection), as object id x 2 (+1 on
        its outline; 0 where nothing is drawn), into ``target`` (an R32F texture with its depth),
        with the ID-only shader variants (nothing is shaded).  ``key``: item -> the id to draw
        instead of its object id (Cryptomatte: one per object and material)."""
        items = self._drawn
        # the instance data (palette and weight textures, each group's instance rows) is the
        # frame's: the shaded frame's, reused by every coverage sample (only the jittered
        # projection in the frame block changes from sample to sample); with ``key`` (other ids)
        # this sample's own
        if key is not None:
            # (one keyed set per frame: the samples of a frame share ``key`` and its ids)
            kept = self._key_instances
            if kept is None or kept[0] is not key or kept[1] is not self._id_instances:
                kept = self._key_instances = (key, self._id_instances, FrameInstances(
                    items, palette_rows=frame.palette_rows, ids=[key(it) for it in items], skinned=self._id_instances))
            self._instances = kept[2]
        else:
            if self._id_instances is None:
                self._id_instances = FrameInstances(items, palette_rows=frame.palette_rows, tally=self.stats)
            self._instances = self._id_instances
        self._draw_into(frame, target, ("SPEC_ID_ONLY",))

    def draw_override(self, frame, target, material_for) -> None:
        """The frame just drawn (its items seen by the camera, the coverage samples' instances)
        once more into ``target`` ((texture, depth texture, framebuffer): cleared, its own
        depth), each material drawn as ``material_for(name, params)`` gives it: (MToonParams
        bound instead, its images from the texture cache; defines added to its variants).  The
        AOVs' drawn inputs (engine/gpu/passes/aov_draw.py)."""
        mats, mspecs, extras = {}, {}, {}
        for name, (mat, _ubo, _texs) in self._mats.items():
            sub, extra = material_for(name, mat)
            texs, present = [], 0
            for i, slot in enumerate(TEX_SLOTS):
                ref = (sub.textures or {}).get(slot)
                tex = self.textures.get(getattr(ref, "image", None)) if ref is not None else None
                present |= (1 << i) if tex is not None else 0
                texs.append(tex)
            mats[name] = (sub, make_ubo(pack_material(sub, present)), texs)
            mspecs[name], extras[name] = material_spec(sub, present), tuple(extra)
        if self._id_instances is None:
            self._id_instances = FrameInstances(self._drawn, palette_rows=frame.palette_rows, tally=self.stats)
        self._instances = self._id_instances
        saved = self._mats, self._mspec
        self._mats, self._mspec = mats, mspecs
        try:
            self._draw_into(frame, target, (), extras)
        finally:
            self._mats, self._mspec = saved

    def _draw_into(self, frame, target, extra, extra_for=None) -> None:
        """Draw the frame's items (and outlines) into ``target`` (cleared) with the shader
        variants' ``extra`` defines (and ``extra_for[material name]``'s), no render passes."""
        import gpu

        s = frame.settings
        items = self._drawn
        self._camera_cull = camera_cull(frame.camera.view_projection) if self.chunk_culling else None
        self._frame_ubo = make_ubo(pack_frame(frame, [], None, -1))
        passes, self._passes = self._passes, False
        tex, depth, fb = target
        with fb.bind():
            fb.clear(color=(0.0, 0.0, 0.0, 0.0), depth=1.0)
            gpu.state.viewport_set(0, 0, s.width, s.height)
            gpu.state.depth_test_set("LESS_EQUAL")
            gpu.state.depth_mask_set(True)
            gpu.state.blend_set("NONE")
            self._draw_list(forward_shader, items, outline=False, extra=extra, extra_for=extra_for)
            if s.outlines:
                self._draw_list(outline_shader, items, outline=True, extra=extra, extra_for=extra_for)
        gpu.state.face_culling_set("NONE")
        gpu.state.front_facing_set(False)
        gpu.state.depth_test_set("NONE")
        self._passes = passes
        self._instances = None

    def _blend_into_passes(self, it, s):
        """Composite the BLEND item ``it`` (just drawn into the colour) into the aux and pass
        targets: multiplied by 1 - alpha, then alpha x its values added (mtoon_shaders.py
        ``_PASS_BLEND``); restores the BLEND loop's state."""
        import gpu

        thr = ("SPEC_ALPHA_THRESHOLD", repr(float(min(max(getattr(s, "alpha_threshold", 0.5), 0.0), 1.0))))
        mask = bool(self._mats[it.material_name][0].transparent_with_zwrite)
        fb_main = self._fb_main
        assert fb_main is not None      # made by _ensure_targets (execute's BLEND loop calls this)
        with fb_main.bind():
            gpu.state.viewport_set(0, 0, s.width, s.height)
            gpu.state.depth_mask_set(False)
            for mode, blend in (("1", "MULTIPLY"), ("2", "ADDITIVE_PREMULT")):
                gpu.state.blend_set(blend)
                self._draw_list(forward_shader, [it], outline=False, extra=(("SPEC_PASS_BLEND", mode), thr))
        gpu.state.blend_set("ALPHA")
        gpu.state.depth_mask_set(mask)

    def _aux_clear(self):
        # the aux target must read (0,0,0,0) (object id 0) where nothing was drawn
        import gpu

        fb_aux = getattr(self, "_fb_aux", None)
        if fb_aux is None or self._fb_aux_src is not self._aux:
            fb_aux = self._fb_aux = gpu.types.GPUFrameBuffer(color_slots=(self._aux,))
            self._fb_aux_src = self._aux
        with fb_aux.bind():
            fb_aux.clear(color=(0.0, 0.0, 0.0, 0.0))
        if self._passes:
            # the pass targets where nothing is drawn: Shadow 1 (nothing received), the rest 0
            if getattr(self, "_fb_pass_src", None) is not self.pass_targets:
                self._fb_pass_clear = tuple(gpu.types.GPUFrameBuffer(color_slots=(t,))
                                            for t in self.pass_targets or ())
                self._fb_pass_src = self.pass_targets
            clears = self._fb_pass_clear
            assert clears is not None   # made above for the pass targets (_passes: _ensure_targets made them)
            for fb, c in zip(clears, ((1.0, 0.0, 0.0, 0.0),) + ((0.0, 0.0, 0.0, 0.0),) * 3):
                with fb.bind():
                    fb.clear(color=c)

    def _draw_list(self, shader_for, items, outline: bool, extra=(), extra_for=None):
        """Draw ``items`` (sorted by material) grouped: one draw per group of instances
        (engine/gpu/passes/instancing.py; a group of one is drawn alone, as before), each with
        ``shader_for(self.gpu, spec)``'s variant for its material, the frame and its deformation
        (mtoon_shaders.surface_spec), plus ``extra`` (and ``extra_for[material]``) defines."""
        import gpu

        inst = self._instances
        if inst is None:
            raise RuntimeError("FramePipeline._draw_list: no FrameInstances (called outside execute / draw_ids)")
        fspec = self._frame_spec
        bound = None
        current = None
        inst.cull = None if outline else self._camera_cull     # (an outline hull reaches past its chunk)
        for group in inst.groups(items):
            i0, it = group[0]
            name = it.material_name
            mat = self._mats[name][0]
            if outline and (mat.outline_width_mode not in ("worldCoordinates", "screenCoordinates")
                            or mat.outline_width <= 0):
                continue
            spec = surface_spec(self._mspec[name], fspec, inst.vertex_class(group), outline) + tuple(extra)
            if extra_for:
                spec = spec + extra_for.get(name, ())
            if self._passes:
                spec = spec + ("SPEC_PASSES",)
            shader = shader_for(self.gpu, spec)
            if shader is not bound:
                shader.bind()
                bound = shader
                current = None
            if name != current:
                self._bind_material(shader, name)
                current = name
            if outline:
                gpu.state.face_culling_set("FRONT")
            else:
                gpu.state.face_culling_set("NONE" if mat.double_sided else "BACK")
            gpu.state.front_facing_set(bool(inst.mirrored[i0]))
            inst.draw_group(shader, group)

    def follow_gpu_context(self) -> bool:
        """Drop the render targets when this frame runs in another GPU context than the last
        (True when dropped; the frame makes them again): ``util.GpuContextMark``."""
        if not self.gpu_context.moved():
            return False
        self.release_targets()
        return True

    def release_targets(self):
        """Drop every render target and framebuffer (the next frame makes them again); shaders,
        streams, image textures and the runtime stay (follow_gpu_context)."""
        for p in (self.shadow, self.local_shadow, self.skin_once, self.screen_outline, self.ambient_occlusion, self.post):
            p.free()
        self._color = self._aux = self._depth = None
        self._fb_main = self._fb_blend = self._fb_plain = self._fb_passes = None
        self._fb_aux = self._fb_aux_src = self._fb_pass_clear = self._fb_pass_src = None
        self.pass_targets = self._size = self.last_color = self._shadow_on = self._local_tex = None
        self._local_on = False

    def forget_items(self):
        """Drop the last frame's draw items (and the assets they hold): before a re-import
        replaces those assets, or when the pipeline is freed."""
        self._drawn = []
        self._key_instances = self._id_instances = self._instances = None

    def free(self):
        self.release_targets()
        self.gpu.free()
        self.textures.clear()
        self._lamp_tex = None
        self._frame_ubo = None
        self.forget_items()
        self._mats = {}
        self._mspec = {}
        self._mat_cache = {}
        self._size = None
