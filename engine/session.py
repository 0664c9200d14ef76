"""StylizedSession: the per-engine state shared by final renders and the viewport.

sync(depsgraph)      brings GPU resources up to date with the depsgraph
render_texture(...)  builds the frame (extraction + lights + camera) and runs the FramePipeline
render_pixels(...)   the same, read back as a linear float (H, W, 4) array
"""
from __future__ import annotations

import time

import numpy as np

from .animation.mixer import MatrixMixer
from .cameras import camera_for_view, camera_from_matrices, camera_from_object  # noqa: F401 (re-exported)
from .fallback import DRAWABLE_TYPES, FallbackDrawer, FallbackItem  # noqa: F401 (re-exported)
from .materials.losses import frame_losses
from .passes import render_passes
from .passes.frame import CameraData, FrameData, FrameSettings, LightData
from .passes.visibility import fill_visibility
from .springs.runtime import report as springs_report
from .world.transform_guard import skip_message, split_drawable


def world_color(scene) -> np.ndarray:
    world = scene.world
    if world is None:
        return np.zeros(3)
    if world.use_nodes and world.node_tree is not None:
        for node in world.node_tree.nodes:
            if node.type == "BACKGROUND":
                c = node.inputs["Color"].default_value
                s = node.inputs["Strength"].default_value
                return np.array(c[:3], np.float64) * float(s)
    return np.array(world.color[:3], np.float64)


def scene_lights(depsgraph) -> list:
    """The depsgraph's lamps as LightData in Blender's units: ``color`` is the lamp's colour x power
    as Blender computes it for rendering (BKE_light_power x BKE_light_color, times EEVEE's diffuse
    factor): ``energy * 2^exposure``, tinted by the blackbody ``temperature_color`` when
    ``use_temperature``; an area lamp with *Normalize* off has a strength per m^2 (x its area).
    W/m^2 for a sun, W for the others; the passes convert them to MToon's light colour
    (engine/passes/pipeline.mtoon_light_colors, README "Light units").  Lamps hidden from diffuse
    rays (Object > Visibility > Diffuse) light nothing, as in EEVEE."""

    def power_color(light, matrix_world):
        color = np.array(light.color[:3], np.float64)
        if getattr(light, "use_temperature", False):
            color = color * np.array(light.temperature_color[:3], np.float64)
        power = float(light.energy) * 2.0 ** float(getattr(light, "exposure", 0.0))
        if light.type == "AREA" and not getattr(light, "normalize", True):
            power *= float(light.area(matrix_world=matrix_world))
        return color * power * float(getattr(light, "diffuse_factor", 1.0))

    out = []
    for inst in depsgraph.object_instances:
        ob = inst.object
        if ob.type != "LIGHT" or not getattr(ob, "visible_diffuse", True):
            continue
        light = ob.data
        m = np.array(inst.matrix_world)
        direction = -m[:3, 2]
        direction = direction / max(np.linalg.norm(direction), 1e-12)
        color = power_color(light, inst.matrix_world)
        if not np.all(np.isfinite(color)) or not np.all(np.isfinite(m)):
            continue
        out.append(LightData(
            kind=light.type, color=color, direction=direction, position=m[:3, 3].copy(),
            radius=float(getattr(light, "shadow_soft_size", 0.0)),
            spot_size=float(getattr(light, "spot_size", np.pi)),
            spot_blend=float(getattr(light, "spot_blend", 0.0)),
            cast_shadow=bool(getattr(light, "use_shadow", True)), name=ob.name,
        ))
    return out


def settings_from_scene(scene, width: int, height: int, film_transparent: bool) -> FrameSettings:
    st = getattr(scene, "stylized", None)
    fps = scene.render.fps / max(scene.render.fps_base, 1e-9)

    def g(name, default):
        return getattr(st, name, default) if st is not None else default

    ssc = g("screen_space_outline_color", (0.0, 0.0, 0.0, 1.0))
    return FrameSettings(
        width=width, height=height, film_transparent=film_transparent, world_color=world_color(scene),
        time_seconds=(scene.frame_current - scene.frame_start + scene.frame_subframe) / max(fps, 1e-9),
        shadows=bool(g("shadows", True)), shadow_resolution=int(g("shadow_resolution", "2048")),
        shadow_cascades=int(g("shadow_cascades", 3)), shadow_distance=float(g("shadow_distance", 100.0)),
        shadow_split_lambda=float(g("shadow_split_lambda", 0.8)),
        shadow_cascade_fade=float(g("shadow_cascade_fade", 0.1)),
        shadow_bias=float(g("shadow_bias", 0.5)), shadow_normal_offset=float(g("shadow_normal_offset", 2.0)),
        shadow_min_offset=float(g("shadow_min_offset", 0.02)),
        shadow_pcf=1 if g("shadow_pcf", True) else 0, max_lights=int(min(16, g("max_lights", 8))),
        outlines=bool(g("outlines", True)), screen_space_outline=bool(g("screen_space_outline", False)),
        screen_space_outline_width=float(g("screen_space_outline_width", 1.0)),
        screen_space_outline_color=np.array(ssc[:3], np.float64), fxaa=bool(g("fxaa", True)),
        profile_gpu=bool(g("profile_gpu", False)), samples=max(1, int(g("render_samples", 1))),
    )


def _mark_bakes_dirty() -> None:
    from .importer import bake as _bake

    _bake.BAKES.mark_dirty()


class _BakeFeed:
    """A baked clip's matrix source (``bake.BakedPose``): the exact local matrices of the non-root
    bones and the B-Bone segments at the time the player samples.  The player calls ``write``
    right after its clock set that time (``AnimationPlayer.set_matrix_source``), so the pose and
    palettes are made once per frame; while crossfading, the matrices of the fade's start and the
    bake's go through the mixer (``animation.mixer.MatrixMixer``) with the player's fade weights."""

    def __init__(self, baked, clip, runtime):
        self.baked = baked
        self.clip = clip
        self.runtime = runtime
        self.fade_from = None
        self.mixer = None
        self.joints = None       # bake.joint_table for the palette set's rows, False: not every joint baked
        self.checked = None      # the pose that accepted the bake's nodes (later writes skip the checks)

    def write(self, t: float, player) -> bool:
        b = self.baked
        pose = self.runtime.pose
        smp = b.sample(t)            # the clip's exact matrices at t (bake.BakedPose.sample)
        fast = not player.is_fading and b.anchors is not None
        m = smp.locals
        if player.is_fading:
            if self.fade_from is None or self.fade_from.shape != m.shape:
                self.fade_from = np.array(pose.local_matrices[b.inner_nodes])
            if self.mixer is None or self.mixer.count != m.shape[0]:
                self.mixer = MatrixMixer(m.shape[0])
            w_out, w_in = player.fade_weights
            rows = np.arange(m.shape[0])
            self.mixer.reset()
            self.mixer.accumulate(rows, self.fade_from, w_out)
            self.mixer.accumulate(rows, m, w_in)
            m = self.mixer.apply(rows, self.fade_from)
        else:
            self.fade_from = None
        if self.checked is not pose:      # the bake's nodes and matrices, once per pose
            ok = pose.set_local_matrices(b.inner_nodes, m)
            self.checked = pose if ok and b.finite else None
        else:
            pose.write_local_matrices(b.inner_nodes, m)
            ok = True
        if ok and fast:
            # the same pose as root-relative matrices: the worlds in one step per flat level
            pose.set_world_shortcut(b.inner_nodes, b.anchors, smp.relative_t)
        ps = self.runtime.palette_set
        rel = b.relations(smp, ps.segment_keys)[None] if b.bbone_nodes else None
        if self.joints is None:
            self.joints = b.joint_map(ps.joint_rows) or False
        if self.joints and not player.is_fading:
            # the palettes straight from the sampled joints and their root bones' worlds
            ok = ps.set_baked_joints(b.joints(smp, self.joints), self.joints[2], rel, 0, 0.0) and ok
        elif rel is not None:
            ok = ps.set_bbone_relation_frame(rel, 0, 0.0) and ok
        return ok


_last_viewport_session = None


def last_viewport_session():
    """The most recent viewport session (panels read its stats), or None."""
    return _last_viewport_session() if _last_viewport_session is not None else None


class StylizedSession:
    """Per-engine state.  GPU objects are created lazily inside a GPU context.

    ``assets`` (an ``importer.AssetCache``) is the one place where imported assets are kept and
    reused: final renders verify every cached mesh's content (``verify_imports``), the viewport
    trusts Blender's depsgraph updates (``sync``) to drop what changed."""

    def __init__(self, viewport: bool = False):
        from .importer import AssetCache

        self.viewport = viewport
        self.verify_imports = not viewport
        self.want_clips = viewport      # the preview player's clips; final renders need none
        self.runtime_reuses = 0          # syncs that found nothing changed and kept the runtime
        self.render_steps = 0            # of those, final renders that imported nothing (sync_render_step)
        self._structure_key = None       # importer.structure_key of the last import (final renders)
        self._remember_after_import = False
        self.last_sync = ""              # how the last final-render sync went (import / a step)
        self.pipeline = None
        self.backend = None
        self.scene_asset = None
        self.runtime = None
        self.reader = None
        from .importer.edits import EditSignals

        self.assets = AssetCache(edits=None if viewport else EditSignals())   # final renders: edit signals
        self.fallback = FallbackDrawer()
        from .materials.cache import MaterialCache

        self.material_cache = MaterialCache()   # viewport: MToon params until a depsgraph update names the material
        self.import_error = None
        self.update_error = None
        self.problems = []
        self.fallbacks = {}          # object name -> reason (drawn from Blender's evaluated mesh)
        self.stats = {}
        self.timings = None
        self._need_import = True
        self._synced_frame = None    # the frame the last sync saw (a change = animation evaluation)
        self.reimport_reasons = []   # why sync asked for the pending re-import (cleared by it)
        self.import_count = 0        # scene imports by this session (the Stats panel shows them)
        self.last_import_reason = ""
        self._last_time = None
        self._gpu_nodes = set()
        if viewport:
            import weakref

            global _last_viewport_session
            _last_viewport_session = weakref.ref(self)
            from .viewer_timings import ViewerCpuTimings

            self.timings = ViewerCpuTimings()

    # ------------------------------------------------------------------------------------------
    def _ensure_gpu(self):
        if self.pipeline is None:
            from .passes.pipeline import FramePipeline
            from .runtime.gpu_backend import GpuBackend

            self.pipeline = FramePipeline()
            self.backend = GpuBackend()

    def sync(self, depsgraph, updates=None) -> None:
        """Note what changed (``updates``: the depsgraph's updates; None = everything, which
        re-imports through the asset cache: unchanged assets are reused, edited ones rebuilt).

        * A frame change (playback, scrubbing) re-evaluates animated objects, meshes, shape keys
          and actions: nothing to re-import, the timeline reader reads the new pose and values.
        * Without a frame change, an object geometry update re-imports only when the object's
          structure changed (modifiers, parenting, vertex groups, materials, shape-key layout:
          ``importer.object_signature``); a pose edit or a transform does not.
        * A mesh geometry update re-imports that mesh (the cache keeps the others), unless it only
          follows a shape-key value change (the key is updated with it, its layout is unchanged
          and the mesh is not being edited).
        * Actions and armatures edited re-import; new or deleted objects re-import; a changed
          material refreshes its cached values.
        """
        if self.reader is not None:
            self.reader.sync_token += 1      # its cached object -> shape-key look-ups are re-made
        scene = getattr(depsgraph, "scene", None)
        frame = (scene.frame_current, round(float(scene.frame_subframe), 6)) if scene is not None else None
        animated = updates is not None and self._synced_frame is not None and frame != self._synced_frame
        self._synced_frame = frame
        if updates is None:
            self._reimport("full sync")
            _mark_bakes_dirty()
            return
        import bpy

        known = self.assets.known
        live = []
        for u in updates:
            try:
                idb = getattr(u.id, "original", u.id)
                idb.name
            except ReferenceError:          # the datablock is gone: a deletion
                self._reimport("a datablock was removed")
                continue
            live.append((u, idb))
        keys = {idb.name for _u, idb in live if isinstance(idb, bpy.types.Key)}
        if any(isinstance(idb, (bpy.types.Object, bpy.types.Armature, bpy.types.Action)) for _u, idb in live):
            # a preview bake's rig or action may have changed: its next lookup re-checks
            _mark_bakes_dirty()
        for u, idb in live:
            if isinstance(idb, bpy.types.Material):
                self.material_cache.invalidate(idb.name)
                continue
            if isinstance(idb, (bpy.types.NodeTree, bpy.types.Image)):
                self.material_cache.invalidate()     # a node group or image any material may use
                continue
            if animated and isinstance(idb, (bpy.types.Object, bpy.types.Mesh, bpy.types.Key,
                                             bpy.types.Action, bpy.types.Armature)):
                continue
            if isinstance(idb, bpy.types.Object):
                if u.is_updated_geometry and known.object_structure_changed(idb):
                    self.assets.invalidate_object(idb.name)
                    self._reimport(f"object '{idb.name}' changed its structure")
                continue
            if isinstance(idb, bpy.types.Key):
                if known.key_layout_changed(idb):
                    self.assets.invalidate_id(idb)
                    self._reimport(f"shape keys '{idb.name}' changed their layout")
                continue
            if isinstance(idb, bpy.types.Mesh):
                if not u.is_updated_geometry:
                    continue
                key = idb.shape_keys
                values_only = (key is not None and key.name in keys and not idb.is_editmode
                               and not known.key_layout_changed(key))
                if not values_only:
                    self.assets.invalidate_mesh(idb.name)
                    self._reimport(f"mesh '{idb.name}' edited")
                continue
            if isinstance(idb, bpy.types.Armature):
                # a pose edit updates the armature too; only a rest/bone change re-imports
                if u.is_updated_geometry and known.armature_changed(idb):
                    self.assets.invalidate_id(idb)
                    self._reimport(f"armature '{idb.name}' edited")
                continue
            if isinstance(idb, bpy.types.Action):
                # re-evaluating the same frame reports the action too; only edited keys count
                if known.action_changed(idb):
                    self.assets.invalidate_action(idb.name)
                    self._reimport(f"action '{idb.name}' edited")
                continue
            if isinstance(idb, (bpy.types.Collection, bpy.types.Scene)) and u.is_updated_geometry:
                # relations are re-evaluated for many reasons; objects added, removed or renamed
                # are what needs a re-import
                if known.objects_changed(scene):
                    self._reimport("objects added, removed or renamed")

    def sync_render_step(self, depsgraph, verify_all: bool = False) -> None:
        """A final render that re-imports nothing while the scene's structure is unchanged: the
        timeline reader reads the new pose, shape-key values and matrices, and the passes read
        the materials anew.  Without ``verify_all``: a later frame of the animation render
        (Ctrl+F12) whose earlier frame this session drew from the same depsgraph, whose updates
        name what Blender re-evaluated since then.  With ``verify_all`` (F12: a new depsgraph,
        whose updates name everything, and edits Blender was not told about must show): every
        held mesh's content fingerprint is checked, as the full import would, but the nodes,
        the assets and their validation are not rebuilt.  The full verified re-import (``sync``
        without updates) runs instead when

        * the node structure differs (``importer.structure_key``: objects, types, data,
          parents, parent inverses, bones), or a datablock was removed;
        * a held object's structure signature, a held shape-key layout or a held armature's
          rest data changed (all read every frame: cheap, and no depsgraph tag is trusted);
        * a collection or the scene reports a geometry (relations) update;
        * a mesh we hold reports a geometry update (``verify_all``: any mesh we hold) and its
          content fingerprint differs (the content-keyed cache is the safety net; an animated
          shape key re-checks its mesh).
        """
        if self.runtime is None or self.scene_asset is None or self._need_import or self.viewport:
            self.sync(depsgraph)
            return
        t0 = time.perf_counter()
        scene = depsgraph.scene
        self._synced_frame = (scene.frame_current, round(float(scene.frame_subframe), 6))
        try:
            reasons = self._step_changes(depsgraph, verify_all)
        except Exception as ex:     # unexpected data: the full import names what is wrong
            reasons = [f"the re-sync check failed ({type(ex).__name__}: {ex})"]
        self.stats["step_ms"] = (time.perf_counter() - t0) * 1e3
        if verify_all:
            _mark_bakes_dirty()         # as a full sync does: the preview's bakes re-check
        if not reasons:
            self.render_steps += 1
            self.runtime_reuses += 1
            self.last_sync = "verified, nothing re-imported" if verify_all else "depsgraph updates, nothing re-imported"
            return
        for why in reasons:
            self._reimport(why)
        self._remember_after_import = True
        if not verify_all:
            _mark_bakes_dirty()

    def _step_changes(self, depsgraph, verify_all: bool) -> list:
        """Why ``sync_render_step`` must re-import (empty: nothing we hold changed)."""
        import bpy

        reasons = self._structure_changes(depsgraph)
        if reasons:
            return reasons
        meshes = {e.mesh_name for e in self.assets.meshes.values()} if verify_all else set()
        if self.assets.edits is not None:
            self.assets.edits.start()   # (again, if a file load removed its handler)
        self.assets.begin_check()       # (reads the view layers' pending edit tags: EditSignals)
        for u in depsgraph.updates:
            try:
                idb = getattr(u.id, "original", u.id)
                name = idb.name
            except ReferenceError:
                return ["a datablock was removed"]
            if isinstance(idb, bpy.types.Mesh):
                if u.is_updated_geometry and self.assets.holds_mesh(name):
                    meshes.add(name)
            elif isinstance(idb, bpy.types.Material):
                self.material_cache.invalidate(name)
            elif isinstance(idb, (bpy.types.Collection, bpy.types.Scene)) and u.is_updated_geometry:
                reasons.append(f"{type(idb).__name__.lower()} '{name}' changed its relations")
        if reasons:
            return reasons
        edits = self.assets.edits
        if edits is not None and not verify_all and not edits.pending_read:
            # a UI render's thread cannot read the view layers' pending tags: the render
            # depsgraph's own geometry updates stand in for them (conservative: animation too)
            edits.note(depsgraph.updates)
        meshes |= self.assets.edited_meshes()
        for name in sorted(meshes):
            # F12 (verify_all) hashes every shape key (an untagged edit shows, as in Blender's
            # fresh render depsgraph); a later Ctrl+F12 frame only those reported edited
            why = self.assets.mesh_content_changed(name, keys=verify_all)
            if why:
                reasons.append(why)
        if verify_all and not reasons and edits is not None:
            edits.trusted()             # every held mesh was read anew and matched
        return reasons

    def _structure_changes(self, depsgraph) -> list:
        """Why the held runtime's structure no longer matches the scene (empty: it does)."""
        import bpy

        from . import importer

        known = self.assets.known
        _scene, view_layer = importer.resolve_scene(depsgraph)
        key = importer.structure_key(importer.collect_objects(view_layer))
        if key is None or key != self._structure_key:
            return ["objects, parents or bones changed"]
        out = []
        memo = {}                       # datablocks shared by many objects: read once per check
        for name in known.objects:
            ob = bpy.data.objects.get(name)
            if ob is None or known.object_structure_changed(ob, memo):
                out.append(f"object '{name}' changed its structure")
        for name in known.keys:
            key = bpy.data.shape_keys.get(name)
            if key is None or known.key_layout_changed(key):
                out.append(f"shape keys '{name}' changed their layout")
        for name in known.armatures:
            arm = bpy.data.armatures.get(name)
            if arm is None or known.armature_changed(arm):
                out.append(f"armature '{name}' edited")
        return out

    def _reimport(self, reason: str) -> None:
        self._need_import = True
        self.reimport_reasons.append(reason)

    # ------------------------------------------------------------------------------------------
    def _ensure_runtime(self, depsgraph) -> None:
        """Import the scene and (re)build the runtime when needed.  On invalid input the whole
        scene is drawn through the fallback path and the error is kept for the stats/report."""
        if not self._need_import and self.runtime is not None:
            return
        from . import importer
        from .assets import AssetError
        from .timeline import TimelineReader
        from .world.scene_runtime import SceneRuntime

        self._need_import = False
        if self.assets.edits is not None:
            self.assets.edits.start()   # depsgraph_update_post: weights re-read only after an edit
        self.import_count += 1
        self.last_sync = "import"
        self.last_import_reason = "; ".join(dict.fromkeys(self.reimport_reasons)) or "first import"
        self.reimport_reasons = []
        try:
            asset, problems = importer.import_scene_with_problems(depsgraph, cache=self.assets,
                                                                  verify=self.verify_imports,
                                                                  clips=self.want_clips)
        except AssetError as ex:
            asset, problems = None, []
            error = str(ex)
        else:
            error = None
            if self.assets.edits is not None:
                self.assets.edits.trusted()     # every mesh was fingerprinted anew
        if error is None and not self.viewport:
            _scene, view_layer = importer.resolve_scene(depsgraph)
            self._structure_key = importer.structure_key(importer.collect_objects(view_layer))
        if error is None and self.runtime is not None and importer.same_structure(
                self.scene_asset, asset, compare_bind_pose=self.viewport):
            # nothing changed (every asset came back from the cache): keep the runtime and its
            # GPU streams (a frame of an animation render pays the check, not a rebuild)
            self.runtime_reuses += 1
            self.problems = list(problems)
            if self._remember_after_import:
                self.assets.known.remember(asset, depsgraph.scene)
            self._remember_after_import = False
            return
        self._remember_after_import = False
        if self.runtime is not None:
            self.runtime.release()
        self.runtime = None
        self.reader = None
        self.scene_asset = None
        self.import_error = None
        self.fallbacks = {}
        self._gpu_nodes = set()
        if error is not None:
            self.import_error = error
            return
        runtime = SceneRuntime(asset, self.backend)
        if not runtime.initialize():
            self.import_error = f"runtime initialisation failed: {runtime.last_error}"
            return
        self.backend.retain([p for m in asset.meshes for p in m.primitives])
        self.scene_asset = asset
        self.assets.known.remember(asset, depsgraph.scene)
        self.problems = list(problems)
        self.runtime = runtime
        self.reader = TimelineReader(asset, runtime)
        for i, nd in enumerate(asset.nodes):
            mi = int(asset.mesh_indices[i])
            if mi < 0:
                continue
            reason = asset.meshes[mi].fallback_reason
            if reason:
                self.fallbacks[nd.object_name] = reason
            else:
                self._gpu_nodes.add(i)

    def update_frame(self, depsgraph, preview_state=None) -> bool:
        """The seed's update step: pose source -> palettes -> morph instances."""
        if self.runtime is None:
            return False
        now = time.perf_counter()
        dt = 0.0 if self._last_time is None else now - self._last_time
        self._last_time = now
        if preview_state is not None:
            from . import preview_follow as _follow

            _follow.follow_after_sync(self, preview_state)    # a renamed armature or action is followed,
            # a deleted one stops
        if preview_state is not None and preview_state.active and preview_state.scene_mode:
            from . import preview_scene

            return preview_scene.update(self, depsgraph, preview_state, dt)   # Scene: every animated object
        if preview_state is not None and preview_state.active:
            from . import preview as _preview

            if not self.runtime.player.is_playing and ("play",) in preview_state.commands:
                # Play / resume starts from the shown time: the clock's time since the last
                # redraw (an idle viewport: seconds) is not clip time
                dt = 0.0
            clips = {c.name: c for c in self.scene_asset.animations
                     if c.target_object == preview_state.armature}
            _follow.reimport_renamed(self, preview_state, clips)
            before = None
            if clips:
                baked = self._baked_clips(preview_state, clips)
                if baked is None:
                    # the clip needs Blender's evaluation and has no current bake: never play a
                    # wrong pose; timeline mode until the bake is made (Play / clip choice)
                    preview_state.active = False
                    preview_state.playing = False
                    return self._update_timeline(depsgraph)
                clips, before = baked
                if preview_state.crowd:
                    from .importer import bake as _bake

                    why = _preview.crowd_bake_conflict(preview_state, self.runtime, _bake.BAKES.reasons,
                                                       _bake.BAKES.reasons_generation)
                    if why is not None:
                        # a bake drives its own armature's bones only: never play a wrong pose
                        # on the other characters; timeline mode until crowd mode is turned off
                        preview_state.last_error = why
                        preview_state.active = False
                        preview_state.playing = False
                        return self._update_timeline(depsgraph)
            player = self.runtime.player
            from . import preview_hold, preview_morphs

            _follow.resume(self, preview_state, clips)     # a re-import or a rename: the clip plays on
            # what the clip does not play holds the pose shown when the preview started
            # a baked clip's matrices are a source the player samples with its clip (no write before or after it)
            player.set_matrix_source(before.clip if before is not None else None,
                                     before.write if before is not None else None)
            # after the player sampled, before the uploads: the shape keys through the morph mixer
            # (the clip's channels, the panel's values filling the rest: preview_morphs)
            before_update, after_sample = preview_hold.hooks(self, depsgraph, preview_state,
                                                             lambda: preview_morphs.push(self))

            if self.reader is not None and self.runtime.guard is not None:
                # what Blender's own matrices cannot draw (NaN, 1e20) is skipped here too
                self.runtime.guard.hold_undrawable(self.reader.undrawable_objects(depsgraph))
            _preview.apply_commands(preview_state, self.runtime, clips, dt, before_update,
                                    after_sample=after_sample if self.reader is not None else None)
            return True
        return self._update_timeline(depsgraph)

    def _update_timeline(self, depsgraph) -> bool:
        self._hold = None       # timeline mode: the next preview frame starts anew
        nodes, mats, weights = self.reader.read(depsgraph)
        return self.runtime.update_timeline(nodes, mats, weights)

    def _baked_clips(self, state, clips: dict):
        """``(clips, before_update)`` for the preview: ``clips`` unchanged when the armature needs
        no bake; otherwise the clips with the bakes of ``engine.importer.bake.BAKES`` substituted
        (converted once per bake and scene asset) and a hook that feeds the bake's B-Bone segments.
        None (``state.last_error`` says why) when the clip about to play needs a bake it lacks."""
        from . import preview as _preview
        from .importer import bake as _bake

        arm = state.armature
        reasons = _bake.BAKES.reasons(arm)
        if not reasons:
            return clips, None
        name = _preview.pending_clip_name(state)
        if name is None or name not in clips:
            return clips, None      # no clip, or one the player reports as not compatible
        b, why = _bake.BAKES.lookup(arm, name)
        if b is None:
            state.last_error = f"clip '{name}' needs a bake: {why}; it is driven by {'; '.join(reasons)}"
            return None
        conv = getattr(self, "_bake_clip_cache", None)
        if conv is None or conv[0] is not self.scene_asset or conv[2] is not self.runtime:
            conv = self._bake_clip_cache = (self.scene_asset, {}, self.runtime)
        hit = conv[1].get((arm, name))
        if hit is None or hit[0] is not b:
            template = clips.get(name)
            try:
                clip, bbones = _bake.baked_clip(b, self.scene_asset, template)
            except _bake.BakeError as ex:
                state.last_error = f"clip '{name}' needs a bake: {ex}"
                return None
            old = hit[1] if hit is not None else None
            hit = (b, clip, _BakeFeed(bbones, clip, self.runtime))
            conv[1][(arm, name)] = hit
            player = self.runtime.player
            if old is not None and player.clip is old and not state.commands:
                # re-baked while it plays: the new bake at the same time
                state.commands[:0] = [("clip", name), ("seek", float(player.current_time))]
        if state.last_error and state.last_error.startswith(f"clip '{name}' needs a bake"):
            state.last_error = None
        out = dict(clips)
        out[name] = hit[1]
        return out, hit[2]

    def _update(self, depsgraph, preview_state) -> None:
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

    # ------------------------------------------------------------------------------------------
    def _fallback_items(self, depsgraph, skip_objects: set, camera=None, height: int = 0) -> list:
        """Blender's evaluated mesh for everything the GPU path does not draw itself (hair curves
        as ribbons facing ``camera``)."""
        items, self._fallback_skipped = split_drawable(     # a NaN / 1e20 transform: skipped, named
            self.fallback.items(depsgraph, self.backend, skip_objects, self.fallbacks, self.import_error or "",
                                camera=camera, height=height))
        return items

    def _gpu_items(self, depsgraph) -> list:
        if self.runtime is None:
            return []
        import bpy

        visible = {inst.object.name for inst in depsgraph.object_instances if not inst.is_instance and inst.show_self}
        # Object Properties > Visibility > Shadow, per drawn mesh object (not per node: no loop
        # over bones per frame)
        casts = np.ones(self.scene_asset.node_count, bool)
        nodes = self.scene_asset.nodes
        for n in self._gpu_nodes:
            casts[n] = bool(getattr(bpy.data.objects.get(nodes[n].object_name), "visible_shadow", True))
        items = self.runtime.extract(shadow_casters=casts)
        return [it for it in items if it.node_index in self._gpu_nodes and it.object_name in visible]

    def _materials(self, items) -> dict:
        """MToon parameters of the frame's materials.  The viewport uses the cache that Blender's
        depsgraph updates invalidate; a final render reads every material anew each frame (a few
        node trees: cheap), so a script that recolours a material between frames is never stale."""
        import bpy

        from .materials import vrm_binds
        from .materials.resolve import resolve_uncached

        resolve = self.material_cache.resolve if self.viewport else resolve_uncached
        binds = getattr(self.reader, "material_binds", None)     # the reader's frame (timeline.py)
        out = {}
        for name in {it.material_name for it in items}:
            # this frame's VRM expression colour/UV binds on a copy (never on the cached params)
            out[name] = vrm_binds.apply(name, resolve(bpy.data.materials.get(name) if name else None), binds)
        return out

    def build_frame(self, depsgraph, camera: CameraData, width: int, height: int,
                    film_transparent: bool = False, preview_state=None, passes=()) -> FrameData:
        self._ensure_gpu()
        scene = depsgraph.scene
        t0 = time.perf_counter()
        self._ensure_runtime(depsgraph)
        t1 = time.perf_counter()
        self._update(depsgraph, preview_state)
        t2 = time.perf_counter()
        gpu_items = self._gpu_items(depsgraph)
        drawn = {it.object_name for it in gpu_items} | {self.scene_asset.nodes[n].object_name for n in self._gpu_nodes} \
            if self.scene_asset is not None else set()
        items = gpu_items + self._fallback_items(depsgraph, drawn, camera, height)
        t3 = time.perf_counter()
        settings = settings_from_scene(scene, width, height, film_transparent)
        settings.gpu_passes = render_passes.needs_gpu(passes)
        frame = FrameData(items=items, camera=camera, lights=scene_lights(depsgraph), settings=settings,
                          materials=self._materials(items),
                          palette_rows=self.runtime.palette_set.texel_rows() if self.runtime is not None else None)
        fill_visibility(depsgraph, frame)     # holdouts, camera-hidden objects, material pass indices
        rs = self.runtime.stats if self.runtime is not None else None
        fallback_list = sorted({(i.object_name, i.fallback_reason) for i in items if getattr(i, "fallback_reason", "")}
                               | {(n, r) for n, r in self.fallbacks.items() if n in self.fallback.present
                                  and n not in getattr(self, "_fallback_skipped", {})})
        self.stats.update(
            import_ms=(t1 - t0) * 1e3, update_ms=(t2 - t1) * 1e3, extraction_ms=(t3 - t2) * 1e3,
            import_count=self.import_count, last_import_reason=self.last_import_reason,
            runtime_reuses=self.runtime_reuses, render_steps=self.render_steps, last_sync=self.last_sync,
            animation_ms=rs.animation_ms if rs else 0.0, skinning_ms=rs.skinning_ms if rs else 0.0,
            morph_ms=rs.morph_ms if rs else 0.0, palette_uploads=rs.palette_uploads if rs else 0,
            morph_uploads=rs.morph_uploads if rs else 0, morph_uploads_total=rs.morph_uploads_total if rs else 0,
            shader_morphs=rs.shader_morph_primitives if rs else 0,
            palette_count=rs.palette_count if rs else 0, joint_matrix_count=rs.joint_matrix_count if rs else 0,
            morph_target_count=rs.morph_target_count if rs else 0,
            active_target_count=rs.active_target_count if rs else 0,
            items=len(items), gpu_items=len(gpu_items), fallbacks=fallback_list,
            import_error=self.import_error, update_error=self.update_error,
            problems=list(self.problems) + list(getattr(self.reader, "vrm_problems", None) or [])
            + (self.runtime.skip_messages() if self.runtime is not None else [])
            + springs_report(self.runtime)
            + [skip_message(n, r) for n, r in sorted(getattr(self, "_fallback_skipped", {}).items())],
            fingerprint_ms=self.assets.stats.get("fingerprint_s", 0.0) * 1e3,
            live_fallback_streams=self.fallback.live_stream_count,
            unmapped=sorted({m for p in frame.materials.values() for m in (getattr(p, "unmapped", ()) or ())}),
            losses=frame_losses(items, frame.materials) + self.fallback.not_drawn_lines(),
        )
        return frame

    def render_texture(self, depsgraph, camera: CameraData, width: int, height: int, film_transparent=False,
                       preview_state=None, passes=(), after_first=None):
        """The frame's texture; a final render draws the scene's anti-aliasing samples
        (engine/passes/samples.py: ``after_first`` runs on the first, centre sample), the viewport
        one sample with FXAA."""
        from .passes.samples import Accumulator, render_samples

        t0 = time.perf_counter()
        frame = self.build_frame(depsgraph, camera, width, height, film_transparent, preview_state, passes)
        self.last_frame = frame
        t1 = time.perf_counter()
        if self.viewport:
            frame.settings.samples = 1
        if getattr(self, "_accumulator", None) is None:
            self._accumulator = Accumulator()
        tex = render_samples(self.pipeline, frame, self._accumulator, after_first)
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

    def render_pixels(self, depsgraph, camera: CameraData, width: int, height: int,
                      film_transparent: bool = False, final: bool = True) -> np.ndarray:
        from .gpu_util import texture_to_numpy

        tex = self.render_texture(depsgraph, camera, width, height, film_transparent)
        return texture_to_numpy(tex, width, height)

    def render_layers(self, depsgraph, camera: CameraData, width: int, height: int,
                      film_transparent: bool = False, passes=()) -> dict:
        """A final frame with its render passes: {"Combined": (H, W, 4), pass name: (H, W, C)}
        (engine/passes/render_passes.py); only the requested passes are read or drawn."""
        from .gpu_util import texture_to_numpy

        out = {}

        def read_passes():          # on the first (centre) sample, while its targets are current
            frame = self.last_frame
            ids = {}
            if "IndexOB" in passes:
                import bpy

                for it in frame.items:
                    ob = bpy.data.objects.get(it.object_name)
                    ids[int(getattr(it, "object_id", 0))] = int(getattr(ob, "pass_index", 0))
            out.update(render_passes.read(self.pipeline, frame, passes, depsgraph.scene, ids))

        tex = self.render_texture(depsgraph, camera, width, height, film_transparent, passes=passes,
                                  after_first=read_passes if passes else None)
        out["Combined"] = texture_to_numpy(tex, width, height)
        self.last_frame = None
        return out

    def free(self) -> None:
        if self.runtime is not None:
            self.runtime.release()
        if self.pipeline is not None:
            self.pipeline.free()
        if getattr(self, "_accumulator", None) is not None:
            self._accumulator.free()
        if self.backend is not None:
            self.backend.release_all()
        self.runtime = None
        self.reader = None
        self.scene_asset = None
        self.pipeline = None
        self.backend = None
        self.fallback.clear()
        self.assets.clear()
        if self.assets.edits is not None:
            self.assets.edits.stop()    # its depsgraph_update_post handler goes with the session
        self._need_import = True
