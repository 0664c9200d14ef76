"""StylizedSession: the per-engine state shared by final renders and the viewport.

sync(depsgraph)      brings GPU resources up to date with the depsgraph
render_texture(...)  builds the frame (extraction + lights + camera) and runs the FramePipeline
"""
from __future__ import annotations

import time
from typing import Callable, Optional

import numpy as np

from ..core.assets import SceneAsset
from ..core.world import scene_runtime as _scene_runtime  # noqa: F401,E402
from ..core.world.frame import CameraData, FrameData
from ..core.world.transform_guard import skip_message, split_drawable
from ..features.materials.driver import MaterialsDriver
from ..features.passes.driver import PassesDriver
from ..features.preview.driver import PreviewDriver
from ..features.springs.driver import SpringsDriver
from ..features.vrm.driver import VrmDriver
from ..gpu import backend as _gpu_backend  # noqa: F401,E402
from ..gpu.passes import pipeline as _pipeline  # noqa: F401,E402
from ..gpu.passes import render_passes
from ..gpu.passes.frame_lamps import lamp_losses
from ..gpu.passes.local_shadows import local_shadow_losses
from ..gpu.passes.visibility import VisibilityCache

# the modules every frame uses, loaded with the add-on rather than inside the first render of a
# file (their import, compiled where Python keeps no bytecode cache, was part of the first F12);
# the functions below still import what they use where they use it
from . import importer as _importer  # noqa: F401,E402
from . import session_sync
from .importer import edits as _edits  # noqa: F401,E402
from .scene_settings import scene_lights, settings_from_scene
from .sources import timeline as _timeline  # noqa: F401,E402
from .sources.fallback import FallbackDrawer


class StylizedSession:
    """Per-engine state.  GPU objects are created lazily inside a GPU context.

    ``assets`` (an ``importer.AssetCache``) is the one place where imported assets are kept and
    reused: final renders verify every cached mesh's content (``imports.verify_imports``), the viewport
    trusts Blender's depsgraph updates (``sync``) to drop what changed.

    ``addon``: the add-on's ``AddonState`` that made this session (render_engine's viewport, or a
    caller standing in for it): the session plays its preview bakes (``bakes``) and, as a
    viewport session, is noted as the most recent one (the Stats panel reads it).  Without one the
    session has bakes of its own, cleared by ``free``."""

    def __init__(self, viewport: bool = False, addon=None):
        from .bake.cache import BakeCache
        from .importer import AssetCache
        from .importer.edits import EditSignals

        self.viewport = viewport
        self.imports = session_sync.SyncState(viewport)   # what the syncs and imports keep (session_sync.py)
        self.pipeline: Optional[_pipeline.FramePipeline] = None
        self.backend: Optional[_gpu_backend.GpuBackend] = None
        self.scene_asset: Optional[SceneAsset] = None
        self.runtime: Optional[_scene_runtime.SceneRuntime] = None
        self.reader: Optional[_timeline.TimelineReader] = None
        self.assets = AssetCache(edits=None if viewport else EditSignals())   # final renders: edit signals
        self.fallback = FallbackDrawer()
        self.scene_epoch = 0             # syncs that reported a change (view_update): see _read_scene
        self.visibility = VisibilityCache()     # viewport: holdouts / camera-hidden until an update may change them
        self.update_error = None
        self.stats = {}
        self.timings = None
        self.last_update_time = None     # when update_frame last ran (the preview clock's dt starts there)
        self._reset_frame_state()
        self.bakes = addon.bakes if addon is not None else BakeCache()   # the preview's bakes (preview/bakes.py)
        self._own_bakes = addon is None
        # the features, each behind its driver (docs/architecture.md)
        self.preview = PreviewDriver(self)     # the viewport preview's state (engine/features/preview)
        self.springs = SpringsDriver()         # the spring bones' simulation (engine/features/springs)
        self.materials = MaterialsDriver(viewport)   # the frame's MToon parameters (engine/features/materials)
        self.passes = PassesDriver()           # Cryptomatte, AOVs, the passes not written (engine/features/passes)
        if viewport:
            if addon is not None:
                addon.note_viewport_session(self)
            from ..core.world.viewer_timings import ViewerCpuTimings

            self.timings = ViewerCpuTimings()

    def _reset_frame_state(self) -> None:
        """What the frames of this session keep between draws (emptied by ``free``)."""
        self.last_frame = None           # the frame being drawn (render_layers reads its passes)
        self._accumulator = None         # passes.samples.Accumulator: the anti-aliasing targets
        self._fallback_skipped = {}      # object name -> why its transform is not drawable
        self._scene_reads = None         # viewport: (key, fallback items, lamps) a redraw may reuse

    # ------------------------------------------------------------------------------------------
    def ensure_gpu(self) -> None:
        """The frame pipeline and GPU backend (made once, inside a GPU context)."""
        if self.pipeline is None:
            from ..gpu.backend import GpuBackend
            from ..gpu.passes.pipeline import FramePipeline

            self.pipeline = FramePipeline()
            self.backend = GpuBackend()

    def follow_gpu_context(self) -> bool:
        """A final render's first step: when it runs in another GPU context than the last render
        (the render window closed: FramePipeline.follow_gpu_context), the pipeline's and the
        anti-aliasing targets are dropped and the frame makes them again (True)."""
        self.ensure_gpu()
        assert self.pipeline is not None        # (ensure_gpu made it)
        if not self.pipeline.follow_gpu_context():
            return False
        if self._accumulator is not None:
            self._accumulator.free()
        return True

    def sync(self, depsgraph, updates=None) -> None:
        """Note what changed (``updates``: the depsgraph's updates; None = everything):
        ``session_sync.sync``."""
        self.visibility.note(updates)
        if updates is None or len(updates):
            self.scene_epoch += 1
        session_sync.sync(self, depsgraph, updates)

    def sync_render_step(self, depsgraph, verify_all: bool = False) -> None:
        """A final render's sync that re-imports nothing while the scene's structure is unchanged:
        ``session_sync.sync_render_step``."""
        session_sync.sync_render_step(self, depsgraph, verify_all)

    def reimport(self, reason: str) -> None:
        """Import the scene again before the next frame (``reason``: why, for the Stats panel)."""
        self.imports.need_import = True
        self.imports.reimport_reasons.append(reason)

    # ------------------------------------------------------------------------------------------
    def ensure_runtime(self, depsgraph) -> None:
        """Import the scene and (re)build the runtime when needed: ``session_sync.ensure_runtime``."""
        session_sync.ensure_runtime(self, depsgraph)

    def update_frame(self, depsgraph, preview_state=None) -> bool:
        """The frame's update step (pose source -> palettes -> morph instances): the preview
        driver's (``preview``: engine/features/preview/driver.py), which plays ``preview_state``
        when it drives the pose and otherwise takes Blender's pose (``update_timeline``)."""
        if self.runtime is None:
            return False
        now = time.perf_counter()
        dt = 0.0 if self.last_update_time is None else now - self.last_update_time
        self.last_update_time = now
        return self.preview.update(depsgraph, preview_state, dt)

    def update_timeline(self, depsgraph) -> bool:
        """Blender's evaluated pose and shape-key values at the shown frame (the reader's) into
        the runtime: palettes and morphs."""
        if self.reader is None or self.runtime is None:
            raise RuntimeError("update_timeline: no scene runtime or timeline reader (ensure_runtime makes them)")
        nodes, mats, weights = self.reader.read(depsgraph)
        return self.runtime.update_timeline(nodes, mats, weights, bbone_segments=self.reader.bbone_segments)

    # the VRM feature's hooks (engine/features/vrm/driver.py): the importer's check of expression
    # preview curves, and the expression step of each timeline reader the session makes
    @staticmethod
    def expression_check(armature_data, data_path: str):
        """The importer's ``expression_check``: why a VRM expression preview curve animates nothing
        on its armature, or None (``VrmDriver.preview_problem``)."""
        return VrmDriver.preview_problem(armature_data, data_path)

    def new_reader(self, asset, runtime):
        """The timeline reader of a new runtime, with the VRM feature's expression step (one
        ``VrmDriver`` per reader: its index arrays belong to the runtime's shape keys)."""
        from .sources.timeline import TimelineReader

        return TimelineReader(asset, runtime, expressions=VrmDriver())

    def import_clips(self, depsgraph) -> bool:
        """From now on import the scene's clips too (the preview player's): a viewport session
        imports them when a clip preview first draws, not for its first frames (a Rendered
        viewport that never plays a clip never reads an action); final renders need none.
        Returns whether the session has a runtime."""
        if self.viewport and not self.imports.want_clips:
            self.imports.want_clips = True
            self.imports.need_import = True
            self.ensure_runtime(depsgraph)
        return self.runtime is not None

    def update_and_report(self, depsgraph, preview_state) -> None:
        """update_frame, with its failure kept for the Stats panel and the render log."""
        self.update_error = None
        if self.runtime is None:
            return
        try:
            ok = self.update_frame(depsgraph, preview_state)
        except Exception as ex:   # keep drawing the last good state; say why
            ok = False
            self.update_error = f"{type(ex).__name__}: {ex}"
        if not ok and self.update_error is None:
            self.update_error = self.runtime.last_failure() or "the runtime update failed"

    def _expressions(self, member: str, default):
        """``member`` of the reader's expression step (the VRM feature's), or ``default``."""
        hook = getattr(self.reader, "expressions", None)
        return getattr(hook, member) if hook is not None else default

    # ------------------------------------------------------------------------------------------
    def _fallback_items(self, depsgraph, skip_objects: set, camera=None, height: int = 0) -> list:
        """Blender's evaluated mesh for everything the GPU path does not draw itself (hair curves
        as ribbons facing ``camera``)."""
        items, self._fallback_skipped = split_drawable(     # a NaN / 1e20 transform: skipped, named
            self.fallback.items(depsgraph, self.backend, skip_objects, self.imports.fallbacks,
                                self.imports.import_error or "", camera=camera, height=height))
        return items

    def _read_scene(self, depsgraph, skip_objects: set, camera, height: int):
        """(fallback items, lamps) of the frame.  A viewport redraw with no change reported since
        the last read (``sync`` with updates: Blender calls ``view_update`` whenever its
        depsgraph changed) and nothing camera-dependent drawn (hair ribbons) reuses that read:
        the evaluated meshes, instances and lamps are the ones it read.  Besides the work (every
        fallback mesh read and hashed), a read costs memory Blender never gives back: it keeps
        the Python wrapper of each Geometry Nodes instance's temporary object read (120 bytes a
        read).  A final render reads every frame."""
        key = (self.scene_epoch, depsgraph.as_pointer(), self.imports.import_count, frozenset(skip_objects),
               self.imports.import_error, id(self.backend), self.fallback.generation)
        r = self._scene_reads
        if self.viewport and r is not None and r[0] == key and not self.fallback.camera_dependent:
            return list(r[1]), r[2]
        items = self._fallback_items(depsgraph, skip_objects, camera, height)
        lamps = scene_lights(depsgraph)
        self._scene_reads = (key, list(items), lamps) if self.viewport else None
        return items, lamps

    def gpu_items(self, depsgraph) -> list:
        """The runtime's items of the pose it holds now that the frame draws itself (visible
        GPU-path objects; the Vector pass reads them at other instants too)."""
        if self.runtime is None or self.scene_asset is None:     # (set and dropped together)
            return []
        import bpy

        visible = {inst.object.name for inst in depsgraph.object_instances if not inst.is_instance and inst.show_self}
        # Object Properties > Visibility > Shadow, per drawn mesh object (not per node: no loop
        # over bones per frame)
        casts = np.ones(self.scene_asset.node_count, bool)
        nodes = self.scene_asset.nodes
        for n in self.imports.gpu_nodes:
            casts[n] = bool(getattr(bpy.data.objects.get(nodes[n].object_name), "visible_shadow", True))
        items = self.runtime.extract(shadow_casters=casts)
        return [it for it in items if it.node_index in self.imports.gpu_nodes and it.object_name in visible]

    def build_frame(self, depsgraph, camera: CameraData, width: int, height: int,
                    film_transparent: bool = False, preview_state=None, passes=()) -> FrameData:
        self.ensure_gpu()
        scene = depsgraph.scene
        t0 = time.perf_counter()
        self.ensure_runtime(depsgraph)
        t1 = time.perf_counter()
        self.update_and_report(depsgraph, preview_state)
        t2 = time.perf_counter()
        gpu_items = self.gpu_items(depsgraph)
        gpu_nodes = self.imports.gpu_nodes
        drawn = {it.object_name for it in gpu_items} | {self.scene_asset.nodes[n].object_name for n in gpu_nodes} \
            if self.scene_asset is not None else set()
        fallback_items, lamps = self._read_scene(depsgraph, drawn, camera, height)
        items = gpu_items + fallback_items
        t3 = time.perf_counter()
        settings = settings_from_scene(scene, width, height, film_transparent)
        settings.alpha_threshold = float(getattr(depsgraph.view_layer, "pass_alpha_threshold", 0.5))
        frame = FrameData(items=items, camera=camera, lights=lamps, settings=settings,
                          materials=self.materials.frame(items, self._expressions("material_binds", None)),
                          palette_rows=self.runtime.palette_set.texel_rows() if self.runtime is not None else None)
        settings.gpu_passes = render_passes.needs_gpu(passes, frame.materials)
        # holdouts, camera-hidden objects, material pass indices: a final render reads them every frame
        self.visibility.fill(depsgraph, frame, fresh=not self.viewport)
        rs = self.runtime.stats if self.runtime is not None else None
        fallback_list = sorted({(i.object_name, i.fallback_reason) for i in items if getattr(i, "fallback_reason", "")}
                               | {(n, r) for n, r in self.imports.fallbacks.items() if n in self.fallback.present
                                  and n not in self._fallback_skipped})
        im = self.imports
        self.stats.update(
            import_ms=(t1 - t0) * 1e3, update_ms=(t2 - t1) * 1e3, extraction_ms=(t3 - t2) * 1e3,
            import_count=im.import_count, last_import_reason=im.last_import_reason,
            runtime_reuses=im.runtime_reuses, render_steps=im.render_steps, last_sync=im.last_sync,
            animation_ms=rs.animation_ms if rs else 0.0, skinning_ms=rs.skinning_ms if rs else 0.0,
            morph_ms=rs.morph_ms if rs else 0.0, palette_uploads=rs.palette_uploads if rs else 0,
            morph_uploads=rs.morph_uploads if rs else 0, morph_uploads_total=rs.morph_uploads_total if rs else 0,
            shader_morphs=rs.shader_morph_primitives if rs else 0,
            palette_count=rs.palette_count if rs else 0, joint_matrix_count=rs.joint_matrix_count if rs else 0,
            morph_target_count=rs.morph_target_count if rs else 0,
            active_target_count=rs.active_target_count if rs else 0,
            items=len(items), gpu_items=len(gpu_items), fallbacks=fallback_list,
            import_error=im.import_error, update_error=self.update_error,
            problems=list(im.problems) + list(self._expressions("problems", []))
            + (self.runtime.skip_messages() if self.runtime is not None else [])
            + self.springs.report(self.runtime)
            + [skip_message(n, r) for n, r in sorted(self._fallback_skipped.items())],
            fingerprint_ms=self.assets.stats.get("fingerprint_s", 0.0) * 1e3,
            live_fallback_streams=self.fallback.live_stream_count,
            unmapped=sorted({m for p in frame.materials.values() for m in (getattr(p, "unmapped", ()) or ())}),
            losses=self.materials.losses(items, frame.materials) + self.fallback.not_drawn_lines()
            + local_shadow_losses(frame) + lamp_losses(frame),
        )
        return frame

    def render_texture(self, depsgraph, camera: CameraData, width: int, height: int, film_transparent=False,
                       preview_state=None, passes=(), after_first=None, ids=None, blur=None):
        """The frame's texture; a final render draws the scene's anti-aliasing samples
        (engine/gpu/passes/samples.py: ``after_first`` runs on the first, centre sample), the viewport
        one sample with FXAA.  ``blur`` (a final render's ``MotionBlur``,
        engine/features/passes/motion_blur.py): each sample built and drawn at its own instant."""
        from ..gpu.passes.samples import Accumulator, render_samples

        t0 = time.perf_counter()
        frame_at: Optional[Callable] = None   # a motion-blurred final render's frame of sample i
        if blur is not None and not self.viewport:
            camera = blur.enter()

            def blurred_frame(i):
                frame = blur.frame_at(i, lambda cam: self.build_frame(depsgraph, cam, width, height, film_transparent,
                                                                      None, passes))
                self.last_frame = frame
                return frame

            frame_at = blurred_frame
        try:
            frame = self.build_frame(depsgraph, camera, width, height, film_transparent, preview_state, passes)
            if blur is not None and frame_at is not None:
                blur.hold(frame)
            self.last_frame = frame
            t1 = time.perf_counter()
            if self.viewport:
                frame.settings.samples = 1
            if self._accumulator is None:
                self._accumulator = Accumulator()
            tex = render_samples(self.pipeline, frame, self._accumulator, after_first, ids=ids, frame_at=frame_at)
        finally:
            if frame_at is not None and blur is not None:     # (frame_at is made only with a blur)
                blur.leave()
        t2 = time.perf_counter()
        self.stats["pipeline_ms"] = (t2 - t1) * 1e3
        self.stats["render_ms"] = (t2 - t0) * 1e3
        self.stats["gpu_ms"] = dict(getattr(self.pipeline, "gpu_times", {}) or {})
        if self.timings is not None:
            self.timings.mark_frame()
            st = self.stats
            self.timings.sample(animation_ms=st["animation_ms"], skinning_ms=st["skinning_ms"],
                                morph_ms=st["morph_ms"], update_ms=st["update_ms"],
                                extraction_ms=st["extraction_ms"], pipeline_ms=st["pipeline_ms"],
                                render_ms=st["render_ms"])
        return tex

    def render_layers(self, depsgraph, camera: CameraData, width: int, height: int,
                      film_transparent: bool = False, passes=(), stamp=None, motion=None, blur=None) -> dict:
        """A final frame with its render passes: {"Combined": (H, W, 4), pass name: (H, W, C)}
        (engine/gpu/passes/render_passes.py); only the requested passes are read or drawn.
        Cryptomatte's ranked layers come under their own names (CryptoObject00, ...), and its
        metadata (stamp fields) goes into ``stamp`` (a dict) when given.  ``motion``: the Vector
        pass's capture of the other instants (engine/features/passes/vector.py), or None;
        ``blur``: the render's motion blur (``render_texture``), or None."""
        from ..gpu.util import texture_to_numpy

        out = {}
        # the coverage samples' ids (one per object + material): Cryptomatte's and the AOVs'
        crypto = self.passes.ids_for(depsgraph.view_layer, passes)

        layout = []                 # where the averaged passes lie in the resolve's outputs
        dropped = []                # drawn AOV passes the resolve had no room for

        def read_passes():          # on the first (centre) sample, while its targets are current
            frame = self.last_frame
            if frame is None:
                raise RuntimeError("render_layers: no frame to read the passes of (render_texture sets it)")
            ids = {}
            if "IndexOB" in passes:
                import bpy

                for it in frame.items:
                    ob = bpy.data.objects.get(it.object_name)
                    ids[int(getattr(it, "object_id", 0))] = int(getattr(ob, "pass_index", 0))
            out.update(render_passes.read(self.pipeline, frame, passes, depsgraph.scene, ids,
                                          view_layer=depsgraph.view_layer))
            if motion is not None:
                out["Vector"] = motion.finish(self.pipeline, frame)
            # averaged with the samples, in one draw (engine/gpu/passes/pass_resolve.py); the
            # AOVs' inputs drawn per pixel too (engine/features/passes/aov.py)
            extra = self.passes.draw_aovs(self.pipeline, frame, depsgraph.view_layer, passes)
            sources = render_passes.averaged_sources(self.pipeline, frame, passes, depsgraph.scene, extra)
            layout[:] = sources.layout if sources is not None else ()
            placed = {entry[0] for entry in layout}
            dropped[:] = [e[0] for e in extra if e[0] not in placed]
            return sources

        tex = self.render_texture(depsgraph, camera, width, height, film_transparent, passes=passes,
                                  after_first=read_passes if passes else None, ids=crypto, blur=blur)
        assert self._accumulator is not None    # (render_texture made it)
        render_passes.apply_averaged(out, self._accumulator.averaged, layout, width, height)
        if crypto is not None:
            self.stats["aov_losses"] = self.passes.finish(crypto, depsgraph.view_layer, out, stamp, dropped)
        out["Combined"] = texture_to_numpy(tex, width, height)
        self.last_frame = None
        return out

    def drop_runtime(self) -> None:
        """Release the runtime (its GPU streams and palettes) and forget what it was built from."""
        if self.runtime is not None:
            self.runtime.release()
        self.runtime = None
        self.reader = None
        self.scene_asset = None
        self.springs.reset()

    def free(self) -> None:
        self.drop_runtime()
        if self.pipeline is not None:
            self.pipeline.free()
        if self._accumulator is not None:
            self._accumulator.free()
        if self.backend is not None:
            self.backend.release_all()
        self.pipeline = None
        self.backend = None
        self.fallback.clear()
        self.assets.clear()
        if self.assets.edits is not None:
            self.assets.edits.stop()    # its depsgraph_update_post handler goes with the session
        self._reset_frame_state()
        self.preview.reset()
        if self._own_bakes:
            self.bakes.clear()          # the bakes this session made for itself (an owner's stay with it)
        self.imports.need_import = True
