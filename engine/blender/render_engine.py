"""The ``bpy.types.RenderEngine`` adapter: F12 / Ctrl+F12 / farm renders and the viewport.

Both ``render()`` and ``view_draw()`` go through ``StylizedSession`` and the same FramePipeline;
``view_draw`` only adds the region matrices and Blender's display colour management.
"""
from __future__ import annotations

import time

import bpy
import numpy as np

from ..gpu.passes import render_passes
from . import heap
from .addon_state import AddonState, FinalSessionKeeper
from .cameras import camera_for_view, camera_from_matrices, camera_from_object
from .session import StylizedSession


def _follow_default_policy(session) -> None:
    """A reused runtime follows SceneRuntime's current default morph policy, as a new one would."""
    rt = getattr(session, "runtime", None)
    if rt is None:
        return
    default = type(rt).default_morph_policy
    if getattr(rt, "morph_policy", default) != default:
        rt.set_morph_policy(default)


# Final renders of one scene share one session across F12 calls.  Blender makes a new engine
# instance for every F12, so a session owned by the instance re-imported the whole scene, rebuilt
# every GPU stream and recreated the render targets each time.  The shared session syncs in full
# on every F12 (Blender gives each F12 a new depsgraph, whose updates name everything): the
# structure is compared and every held mesh's content fingerprint verified, so an edit between
# renders is never stale, and only a change re-imports (through the content-keyed asset cache,
# which keeps what did not change).  The later frames of an animation render come from the same
# engine instance and depsgraph: they sync from its updates (``StylizedSession.sync_render_step``),
# fingerprinting only the meshes Blender re-evaluated.  Keyed by the scene's ``session_uid`` (never
# reused within a Blender session, unlike its name or pointer); only the last rendered scene's
# session is kept.  The keeper (addon_state.FinalSessionKeeper) is part of the add-on's AddonState,
# made by ``register()`` and held by the registered engine class (the add-on's registration
# object), released by ``unregister()`` and at interpreter exit.


def addon_state():
    """The add-on's ``AddonState`` (engine/blender/addon_state.py: the F12 session keeper, the preview
    states and bakes, the last viewport session); None while the engine is not registered."""
    return getattr(StylizedRenderEngine, "addon", None)


def last_viewport_session():
    """The most recent viewport session (panels read its stats), or None."""
    a = addon_state()
    return a.viewport_session() if a is not None else None


def _keeper(create: bool = False) -> FinalSessionKeeper | None:
    a = addon_state()
    keeper = a.final_sessions if a is not None else None
    if keeper is None and create:       # (the class used without register(): a session per F12)
        return FinalSessionKeeper()
    return keeper


def kept_final_session():
    """The final-render session kept between F12s (None when none is kept)."""
    keeper = _keeper()
    return keeper.session if keeper is not None else None


def free_final_session() -> None:
    """Release the shared final-render session (GPU streams, targets, runtime)."""
    keeper = _keeper()
    if keeper is not None:
        keeper.free()


def _targets_do_not_fit(depsgraph, width: int, height: int):
    """The message stopping a final render whose targets a software GPU cannot hold (None: they
    fit, or the GPU does not say: engine/gpu/passes/target_budget.py)."""
    import gpu

    from ..gpu.passes import target_budget

    renderer = gpu.platform.renderer_get()
    if not target_budget.software_renderer(renderer):
        return None
    st = getattr(depsgraph.scene, "stylized", None)
    need = target_budget.frame_bytes(width, height, int(getattr(st, "render_samples", 1)),
                                     passes=bool(render_passes.requested(depsgraph.view_layer)),
                                     screen_outline=bool(getattr(st, "screen_space_outline", False)))
    return target_budget.check(width, height, need, renderer, target_budget.available_bytes())


class StylizedRenderEngine(bpy.types.RenderEngine):
    bl_idname = "STYLIZED"
    bl_label = "Stylized"
    bl_use_gpu_context = True
    bl_use_preview = False
    bl_use_shading_nodes_custom = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.session: StylizedSession | None = None
        self.view_session: StylizedSession | None = None
        self.last_result = {}       # what this instance's last final render produced (pixels, stats, log)
        self._drawn_from = None     # (depsgraph, session, frame) of this instance's last final render

    def __del__(self):
        # Engine instances are freed by Blender; GPU objects are released with the session (the
        # final-render session is shared by the scene's renders: free_final_session releases it).
        try:
            view_session = getattr(self, "view_session", None)
            if view_session is not None:
                view_session.free()
        except Exception:
            pass

    # ------------------------------------------------------------------------------------------
    # Final render
    # ------------------------------------------------------------------------------------------
    def update_render_passes(self, scene=None, renderlayer=None):
        """The passes of ``renderlayer`` under Blender's names (engine/gpu/passes/render_passes.py),
        so the compositor's Render Layers node offers them."""
        render_passes.register(self, scene, renderlayer)

    def render(self, depsgraph):
        self.last_result = {}
        scene = depsgraph.scene
        rd = scene.render
        width = max(1, int(rd.resolution_x * rd.resolution_percentage / 100))
        height = max(1, int(rd.resolution_y * rd.resolution_percentage / 100))
        cam = scene.camera
        if cam is None:
            self.report({"ERROR"}, f"Stylized: scene '{scene.name}' has no active camera")
            return
        import gpu

        limit = int(gpu.capabilities.max_texture_size_get())
        if width > limit or height > limit:
            msg = (f"Stylized: the render size {width}x{height} exceeds this GPU's texture limit of "
                   f"{limit}x{limit} pixels; lower the resolution (or its percentage) to at most {limit}")
            self.report({"ERROR"}, msg)
            self.last_result = {"error": msg, "frame": scene.frame_current}
            return
        msg = _targets_do_not_fit(depsgraph, width, height)
        if msg is not None:
            self.report({"ERROR"}, msg)
            self.last_result = {"error": msg, "frame": scene.frame_current}
            return
        t0 = time.perf_counter()
        self.update_stats("Stylized", "Syncing scene")
        self.update_progress(0.0)
        try:
            if self.session is None:
                keeper = _keeper(create=True)
                assert keeper is not None       # (create=True always gives one)
                self.session = keeper.session_for(scene)
            self.session.follow_gpu_context()     # the render window closed: a new GPU context
            # Blender keeps one engine instance and one depsgraph for every frame of an
            # animation render (a new instance for each F12): a later frame reads the
            # depsgraph's updates instead of re-importing (sync_render_step).  The same frame
            # again (an engine kept with Persistent Data) verifies everything, as an F12 does.
            frame = (scene.frame_current, float(scene.frame_subframe))
            drawn_from = (depsgraph.as_pointer(), id(self.session))
            imports = self.session.imports.import_count
            if (self._drawn_from is not None and self._drawn_from[:2] == drawn_from
                    and self._drawn_from[2] != frame and self.session is kept_final_session()):
                self.session.sync_render_step(depsgraph)
            else:
                self.session.sync_render_step(depsgraph, verify_all=True)
            self._drawn_from = None
            _follow_default_policy(self.session)
            if self.test_break():
                return
            self.update_progress(0.4)
            self.update_stats("Stylized", "Drawing")
            pixels, result_ms = self._render_views(depsgraph, cam.evaluated_get(depsgraph), width, height)
            if self.session.imports.import_count != imports:
                self.session.imports.last_imported = True     # (collected after the render: heap.py)
        except Exception as ex:  # report, never leave a traceback as the only message
            self.report({"ERROR"}, f"Stylized render failed: {ex}")
            raise
        if pixels is None or self.test_break():
            return
        self._drawn_from = drawn_from + (frame,)
        log = render_log_lines(scene.frame_current, self.session.stats)
        for line in log:
            print(line, flush=True)
        pipe = getattr(self.session.pipeline, "stats", None) or {}
        # (Blender's own "Render Result" image cannot be read back in background mode: tests and
        # tools read this through a hook they install, tools/render_capture.py)
        self.last_result = dict(pixels=pixels, width=width, height=height, frame=scene.frame_current,
                                seconds=time.perf_counter() - t0, stats=dict(self.session.stats), log=log,
                                pipeline=dict(pipe), result_ms=result_ms)
        self.update_progress(1.0)

    def _render_views(self, depsgraph, cam_eval, width: int, height: int):
        """Every view Blender asks for (one, or left and right with Stereoscopy) of this view
        layer, with its passes, into this layer of the result; only the Render Region is written
        (Blender hands a result of the region's size: the frame is drawn whole and cropped, so
        the region equals the full render inside it).  Returns (the first view's Combined as
        written, ms spent writing the result); (None, 0) when the render was cancelled."""
        if self.session is None:
            raise RuntimeError("_render_views: no session to draw with (render() makes it first)")
        rd = depsgraph.scene.render
        layer = depsgraph.view_layer
        passes = render_passes.requested(layer)
        # nothing silent: every enabled pass this render does not write, named once (log, Stats)
        self.session.stats["aov_losses"] = []
        self.session.stats["unwritten_passes"] = self.session.passes.unwritten_line(layer, passes, rd)
        result = self.begin_result(0, 0, width, height, layer=layer.name)
        written, result_s = None, 0.0
        try:
            rw, rh = int(result.resolution_x), int(result.resolution_y)
            x0, y0 = render_region_origin(rd, width, height) if (rw, rh) != (width, height) else (0, 0)
            views = [v.name for v in result.views]
            target = result.layers[0].passes
            for view in views:
                if len(views) > 1:
                    self.active_view_set(view)
                multiview = len(views) > 1
                motion = None
                if "Vector" in passes:      # the other instants first (engine/features/passes/vector.py)
                    motion = self.session.passes.motion(self, self.session, depsgraph, lambda mv=multiview: self._view_camera(
                        depsgraph, depsgraph.scene.camera.evaluated_get(depsgraph), width, height, mv))
                blur = self.session.passes.blur(self, depsgraph, lambda mv=multiview: self._view_camera(
                    depsgraph, depsgraph.scene.camera.evaluated_get(depsgraph), width, height, mv))
                camera = self._view_camera(depsgraph, cam_eval, width, height, multiview)
                stamp = {}
                images = self.session.render_layers(depsgraph, camera, width, height,
                                                    film_transparent=rd.film_transparent, passes=passes,
                                                    stamp=stamp, motion=motion, blur=blur)
                if stamp:       # Cryptomatte's metadata: into the final result, as Cycles writes it
                    final = self.get_result()
                    for field, value in stamp.items():
                        final.stamp_data_add_field(field, value)
                t = time.perf_counter()    # (result_ms: mostly first touches of Blender's new buffers)
                for name, image in images.items():
                    rpass = target.find_by_name(render_passes.blender_name(name), view)
                    if rpass is None:
                        continue
                    image = render_passes.to_channels(image, int(rpass.channels))
                    crop = np.ascontiguousarray(image[y0:y0 + rh, x0:x0 + rw], np.float32)
                    rpass.rect.foreach_set(crop.reshape(-1))
                    if written is None and name == "Combined":
                        written = crop
                result_s += time.perf_counter() - t
                if self.test_break():
                    return None, 0.0
        finally:
            t = time.perf_counter()
            self.end_result(result)
            result_s += time.perf_counter() - t
        return written, result_s * 1e3

    def _view_camera(self, depsgraph, cam_eval, width: int, height: int, multiview: bool):
        """The camera of the active view: with several views, Blender's per-view model matrix
        and lens shift (``camera_model_matrix`` / ``camera_shift_x``: stereo convergence modes)."""
        if not multiview:
            return camera_from_object(depsgraph, cam_eval, width, height)
        spherical = bool(self.use_spherical_stereo(cam_eval))
        model = np.array(self.camera_model_matrix(cam_eval, use_spherical_stereo=spherical))
        shift = float(self.camera_shift_x(cam_eval, use_spherical_stereo=spherical))
        return camera_for_view(depsgraph, cam_eval, width, height, model, shift)

    # ------------------------------------------------------------------------------------------
    # Viewport
    # ------------------------------------------------------------------------------------------
    def view_update(self, context, depsgraph):
        if self.view_session is None:
            self.view_session = StylizedSession(viewport=True, addon=addon_state())
            self.view_session.sync(depsgraph)
        else:
            self.view_session.sync(depsgraph, updates=depsgraph.updates)

    def view_draw(self, context, depsgraph):
        import gpu

        region = context.region
        r3d = context.region_data
        if self.view_session is None:
            self.view_session = StylizedSession(viewport=True, addon=addon_state())
            self.view_session.sync(depsgraph)
        width, height = region.width, region.height
        texture = draw_view(self.view_session, depsgraph, np.array(r3d.view_matrix), np.array(r3d.window_matrix),
                            not r3d.is_perspective, width, height)
        gpu.state.blend_set("ALPHA_PREMULT")
        self.bind_display_space_shader(depsgraph.scene)
        draw_texture_fullscreen(texture, width, height)
        self.unbind_display_space_shader()
        gpu.state.blend_set("NONE")


def render_region_origin(rd, width: int, height: int):
    """The Render Region's lower-left pixel, as Blender computes it (render_init_from_main:
    border x size in single precision, truncated)."""
    if not rd.use_border:
        return 0, 0
    return (int(np.float32(rd.border_min_x) * np.float32(width)),
            int(np.float32(rd.border_min_y) * np.float32(height)))


def render_log_lines(frame: int, stats: dict) -> list:
    """What a final render tells the log (one line per object drawn through the fallback, per
    material the reader could not fully map, per import problem (actions, VRM expression data),
    any import/update error, and one line naming the enabled passes not written), as a farm operator reads it: ``Stylized frame 12: ...``."""
    out = []
    head = f"Stylized frame {frame}:"
    for key, what in (("import_error", "import failed, every mesh is drawn from Blender's evaluated mesh"),
                      ("update_error", "the runtime update failed, the last good pose is drawn")):
        if stats.get(key):
            out.append(f"{head} {what}: {stats[key]}")
    for name, reason in stats.get("fallbacks") or ():
        source = "curves" if reason.startswith("hair curves") else "mesh"     # engine/blender/sources/hair.py
        out.append(f"{head} object '{name}' is drawn from Blender's evaluated {source} ({reason})")
    for msg in stats.get("unmapped") or ():
        out.append(f"{head} {msg}")
    for msg in stats.get("problems") or ():
        out.append(f"{head} {msg}")
    for msg in stats.get("losses") or ():        # missing images, invisible objects (materials/losses.py)
        out.append(f"{head} {msg}")
    for msg in stats.get("aov_losses") or ():    # AOV inputs not evaluated (engine/features/passes/aov.py)
        out.append(f"{head} {msg}")
    if stats.get("unwritten_passes"):            # engine/features/passes/inventory.py
        out.append(f"{head} {stats['unwritten_passes']}")
    return out


def draw_view(session, depsgraph, view_matrix, window_matrix, is_ortho: bool, width: int, height: int):
    """The viewport's frame: the same session/pipeline as F12 with the region's matrices.

    Kept free of ``context`` so tests can call it headless with the matrices and size a viewport
    would pass (perspective, orthographic or camera view)."""
    a = addon_state()
    state = a.previews.get(depsgraph.scene) if a is not None else None
    camera = camera_from_matrices(view_matrix, window_matrix, is_ortho=is_ortho)
    return session.render_texture(depsgraph, camera, width, height,
                                  film_transparent=depsgraph.scene.render.film_transparent, preview_state=state)


def draw_texture_fullscreen(texture, width: int, height: int) -> None:
    """Draw ``texture`` over the region with the currently bound (display space) shader."""
    from gpu_extras.presets import draw_texture_2d

    draw_texture_2d(texture, (0, 0), width, height)


def register() -> None:
    """Register the engine with the add-on's AddonState (freed at exit if never unregistered)."""
    import atexit

    addon = AddonState()
    StylizedRenderEngine.addon = addon
    atexit.register(addon.free)       # released before Blender's own teardown (no leaked blocks)
    bpy.utils.register_class(StylizedRenderEngine)
    addon.render_complete = _release_after_render
    bpy.app.handlers.render_complete.append(_release_after_render)


@bpy.app.handlers.persistent
def _release_after_render(*_args) -> None:
    """render_complete (Blender has freed the render's depsgraph): after one of our final renders
    whose import replaced assets, they are collected and the freed memory goes back to the
    system; after any other (a first import replaced nothing), the render's freed scratch does
    (heap.py)."""
    keeper = _keeper()
    s = keeper.session if keeper is not None else None
    if s is not None:
        t = time.perf_counter()
        if s.imports.last_imported and s.imports.replaced_assets:
            heap.release_freed()
        else:
            heap.trim()
        s.imports.last_imported = False
        s.stats["heap_release_ms"] = (time.perf_counter() - t) * 1e3


def unregister() -> None:
    """Release the add-on's state (the kept F12 session holds GPU memory) and unregister the engine."""
    import atexit

    addon = addon_state()
    if addon is not None:
        handler = getattr(addon, "render_complete", None)
        if handler in bpy.app.handlers.render_complete:
            bpy.app.handlers.render_complete.remove(handler)
        addon.free()
        atexit.unregister(addon.free)
        del StylizedRenderEngine.addon
    if StylizedRenderEngine.is_registered:
        bpy.utils.unregister_class(StylizedRenderEngine)
