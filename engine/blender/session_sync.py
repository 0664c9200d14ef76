"""How a ``StylizedSession`` follows the scene: ``sync`` (the viewport's depsgraph updates),
``sync_render_step`` (a final render's frame: re-import only what changed) and ``ensure_runtime``
(the import and the runtime build); the session's methods of the same names call these.  What
they keep between frames is the session's ``SyncState`` (``session.imports``)."""
from __future__ import annotations

import time
from typing import Optional


class SyncState:
    """What a session's syncs and imports keep between frames (``StylizedSession.imports``)."""

    def __init__(self, viewport: bool):
        self.verify_imports = not viewport   # final renders verify every cached mesh's content
        # the preview player's clips: a viewport session imports them when a clip preview first
        # draws (StylizedSession.import_clips), not for its first frames; final renders need none
        self.want_clips = False
        self.need_import = True
        self.reimport_reasons = []           # why sync asked for the pending re-import (cleared by it)
        self.import_count = 0                # scene imports by this session (the Stats panel shows them)
        self.last_imported = False           # a final render imported (render_engine's render_complete: heap.py)
        self.replaced_assets = False         # the last import replaced a runtime's assets (collected after it)
        self.last_import_reason = ""
        self.import_error = None             # why the last import failed (everything drawn by the fallback)
        self.problems = []                   # the last import's problems (Stats panel, render log)
        self.fallbacks = {}                  # object name -> reason (drawn from Blender's evaluated mesh)
        self.gpu_nodes: set = set()          # the nodes the GPU path draws
        self.runtime_reuses = 0              # syncs that found nothing changed and kept the runtime
        self.render_steps = 0                # of those, final renders that imported nothing (sync_render_step)
        self.last_sync = ""                  # how the last final-render sync went (import / a step)
        self.structure_key = None            # importer.structure_key of the last import (final renders)
        self.remember_after_import = False
        self.stale_meshes = False            # sync_render_step dropped edited meshes from the cache (release_stale)
        self.synced_frame: Optional[tuple] = None   # (frame, subframe) the last sync saw (a change = animation evaluation)


def sync(session, depsgraph, updates=None) -> None:
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
    if session.reader is not None:
        session.reader.sync_token += 1      # its cached object -> shape-key look-ups are re-made
    scene = getattr(depsgraph, "scene", None)
    frame = (scene.frame_current, round(float(scene.frame_subframe), 6)) if scene is not None else None
    last = session.imports.synced_frame
    animated = updates is not None and last is not None and frame != last
    session.imports.synced_frame = frame
    if updates is None:
        session.reimport("full sync")
        session.bakes.mark_dirty()
        return
    import bpy

    known = session.assets.known
    live = []
    for u in updates:
        try:
            idb = getattr(u.id, "original", u.id)
            _ = idb.name                # a removed datablock raises ReferenceError
        except ReferenceError:          # the datablock is gone: a deletion
            session.reimport("a datablock was removed")
            continue
        live.append((u, idb))
    keys = {idb.name for _u, idb in live if isinstance(idb, bpy.types.Key)}
    if any(isinstance(idb, (bpy.types.Object, bpy.types.Armature, bpy.types.Action)) for _u, idb in live):
        # a preview bake's rig or action may have changed: its next lookup re-checks
        session.bakes.mark_dirty()
    for u, idb in live:
        if isinstance(idb, bpy.types.Material):
            session.materials.invalidate(idb.name)
            continue
        if isinstance(idb, (bpy.types.NodeTree, bpy.types.Image)):
            session.materials.invalidate()     # a node group or image any material may use
            continue
        if animated and isinstance(idb, (bpy.types.Object, bpy.types.Mesh, bpy.types.Key,
                                         bpy.types.Action, bpy.types.Armature)):
            continue
        if isinstance(idb, bpy.types.Object):
            if u.is_updated_geometry and known.object_structure_changed(idb):
                session.assets.invalidate_object(idb.name)
                session.reimport(f"object '{idb.name}' changed its structure")
            continue
        if isinstance(idb, bpy.types.Key):
            if known.key_layout_changed(idb):
                session.assets.invalidate_id(idb)
                session.reimport(f"shape keys '{idb.name}' changed their layout")
            continue
        if isinstance(idb, bpy.types.Mesh):
            if not u.is_updated_geometry:
                continue
            key = idb.shape_keys
            values_only = (key is not None and key.name in keys and not idb.is_editmode
                           and not known.key_layout_changed(key))
            if not values_only:
                session.assets.invalidate_mesh(idb.name)
                session.reimport(f"mesh '{idb.name}' edited")
            continue
        if isinstance(idb, bpy.types.Armature):
            # a pose edit updates the armature too; only a rest/bone change re-imports
            if u.is_updated_geometry and known.armature_changed(idb):
                session.assets.invalidate_id(idb)
                session.reimport(f"armature '{idb.name}' edited")
            continue
        if isinstance(idb, bpy.types.Action):
            # re-evaluating the same frame reports the action too; only edited keys count (and
            # only where clips were imported: the timeline reads Blender's pose)
            if session.imports.want_clips and known.action_changed(idb):
                session.assets.invalidate_action(idb.name)
                session.reimport(f"action '{idb.name}' edited")
            continue
        if isinstance(idb, (bpy.types.Collection, bpy.types.Scene)) and u.is_updated_geometry:
            # relations are re-evaluated for many reasons; objects added, removed or renamed
            # are what needs a re-import
            if known.objects_changed(scene):
                session.reimport("objects added, removed or renamed")


def sync_render_step(session, depsgraph, verify_all: bool = False) -> None:
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
    session.assets.forget_fingerprints()
    if session.runtime is None or session.scene_asset is None or session.imports.need_import or session.viewport:
        session.sync(depsgraph)
        return
    t0 = time.perf_counter()
    scene = depsgraph.scene
    session.imports.synced_frame = (scene.frame_current, round(float(scene.frame_subframe), 6))
    try:
        reasons = _step_changes(session, depsgraph, verify_all)
    except Exception as ex:     # unexpected data: the full import names what is wrong
        reasons = [f"the re-sync check failed ({type(ex).__name__}: {ex})"]
    session.stats["step_ms"] = (time.perf_counter() - t0) * 1e3
    if verify_all:
        session.bakes.mark_dirty()         # as a full sync does: the preview's bakes re-check
    if not reasons:
        session.imports.render_steps += 1
        session.imports.runtime_reuses += 1
        session.imports.last_sync = ("verified, nothing re-imported" if verify_all
                                     else "depsgraph updates, nothing re-imported")
        return
    for why in reasons:
        session.reimport(why)
    session.assets.carry_check()       # (the import below, in this render, reads the same data)
    session.imports.remember_after_import = True
    if not verify_all:
        session.bakes.mark_dirty()


def _step_changes(session, depsgraph, verify_all: bool) -> list:
    """Why ``sync_render_step`` must re-import (empty: nothing we hold changed)."""
    import bpy

    reasons = _structure_changes(session, depsgraph)
    if reasons:
        return reasons
    meshes = {e.mesh_name for e in session.assets.meshes.values()} if verify_all else set()
    if session.assets.edits is not None:
        session.assets.edits.start()   # (again, if a file load removed its handler)
    session.assets.begin_check()       # (reads the view layers' pending edit tags: EditSignals)
    for u in depsgraph.updates:
        try:
            idb = getattr(u.id, "original", u.id)
            name = idb.name
        except ReferenceError:
            return ["a datablock was removed"]
        if isinstance(idb, bpy.types.Mesh):
            if u.is_updated_geometry and session.assets.holds_mesh(name):
                meshes.add(name)
        elif isinstance(idb, bpy.types.Material):
            session.materials.invalidate(name)
        elif isinstance(idb, (bpy.types.Collection, bpy.types.Scene)) and u.is_updated_geometry:
            reasons.append(f"{type(idb).__name__.lower()} '{name}' changed its relations")
    if reasons:
        return reasons
    edits = session.assets.edits
    if edits is not None and not verify_all and not edits.pending_read:
        # a UI render's thread cannot read the view layers' pending tags: the render
        # depsgraph's own geometry updates stand in for them (conservative: animation too)
        edits.note(depsgraph.updates)
    meshes |= session.assets.edited_meshes()
    for name in sorted(meshes):
        # F12 (verify_all) hashes every shape key (an untagged edit shows, as in Blender's
        # fresh render depsgraph); a later Ctrl+F12 frame only those reported edited
        why = session.assets.mesh_content_changed(name, keys=verify_all)
        if why:
            reasons.append(why)
            # its assets are rebuilt whatever happens: forgotten now, so that the import can
            # release them before it reads the new ones (ensure_runtime: release_stale)
            session.assets.invalidate_mesh(name)
            session.imports.stale_meshes = True
    if verify_all and not reasons and edits is not None:
        edits.trusted()             # every held mesh was read anew and matched
    return reasons


def _structure_changes(session, depsgraph) -> list:
    """Why the held runtime's structure no longer matches the scene (empty: it does)."""
    import bpy

    from . import importer

    known = session.assets.known
    _scene, view_layer = importer.resolve_scene(depsgraph)
    key = importer.structure_key(importer.render_objects(depsgraph, view_layer))
    if key is None or key != session.imports.structure_key:
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


def release_stale(session) -> None:
    """Before a final render re-imports edited meshes: drop the runtime and the GPU buffers of
    every primitive the asset cache no longer holds, and collect them, so that the process never
    holds an edited big mesh's old assets and buffers while it reads the new ones (the runtime is
    rebuilt after such an import anyway; unchanged primitives keep their buffers).  The render
    targets stay: releasing them here grew the resident size over edit rounds on Blender 4.5
    (tests/test_memory_over_edits.py, 12 MB in one full-suite run)."""
    from .heap import release_freed

    session.imports.stale_meshes = False
    session.drop_runtime()
    if session.pipeline is not None:
        session.pipeline.forget_items()
    if session.backend is not None:
        session.backend.retain([p for e in session.assets.meshes.values() for p in e.asset.primitives],
                               static_only=session.assets.moved_primitives())
    release_freed()


def ensure_runtime(session, depsgraph) -> None:
    """Import the scene and (re)build the runtime when needed.  On invalid input the whole
    scene is drawn through the fallback path and the error is kept for the stats/report."""
    if not session.imports.need_import and session.runtime is not None:
        return
    from ..core.assets import AssetError
    from ..core.world.scene_runtime import SceneRuntime
    from . import importer

    session.imports.need_import = False
    session.imports.replaced_assets = False
    if session.assets.edits is not None:
        session.assets.edits.start()   # depsgraph_update_post: weights re-read only after an edit
    session.imports.import_count += 1
    session.imports.last_sync = "import"
    session.imports.last_import_reason = ("; ".join(dict.fromkeys(session.imports.reimport_reasons))
                                          or "first import")
    session.imports.reimport_reasons = []
    stale = session.imports.stale_meshes
    if stale:
        release_stale(session)
    try:
        asset, problems = importer.import_scene_with_problems(depsgraph, cache=session.assets,
                                                              verify=session.imports.verify_imports,
                                                              clips=session.imports.want_clips,
                                                              expression_check=session.expression_check)
    except AssetError as ex:
        asset, problems = None, []
        error = str(ex)
    else:
        error = None
        if session.assets.edits is not None:
            session.assets.edits.trusted()     # every mesh was fingerprinted anew
    if error is None and not session.viewport:
        _scene, view_layer = importer.resolve_scene(depsgraph)
        session.imports.structure_key = importer.structure_key(importer.render_objects(depsgraph, view_layer))
    if error is None and session.runtime is not None and importer.same_structure(
            session.scene_asset, asset, compare_bind_pose=session.viewport):
        # nothing changed (every asset came back from the cache): keep the runtime and its
        # GPU streams (a frame of an animation render pays the check, not a rebuild)
        session.imports.runtime_reuses += 1
        session.imports.problems = list(problems)
        if session.imports.remember_after_import:
            session.assets.known.remember(asset, depsgraph.scene)
        session.imports.remember_after_import = False
        return
    session.imports.remember_after_import = False
    replaced = session.runtime is not None or stale
    session.imports.replaced_assets = replaced
    session.drop_runtime()
    session.imports.import_error = None
    session.imports.fallbacks = {}
    session.imports.gpu_nodes = set()
    if error is not None:
        session.imports.import_error = error
        return
    assert asset is not None        # (no import error: the import gave one)
    import bpy

    # the buffers of replaced primitives go before the new ones are made (an edited big mesh
    # would otherwise hold its old and new buffers at once); unchanged primitives keep theirs
    session.backend.retain([p for m in asset.meshes for p in m.primitives])
    if replaced and not session.viewport:
        # a final render after an edit: the replaced assets (in reference cycles, unless
        # release_stale let them go before the import) and the import's scratch pages go back
        # before the new buffers are made (the render's end collects again: render_engine, heap.py);
        # after release_stale only the scratch is left (no second collection: ~30 ms on a set)
        from .heap import release_freed, trim

        if stale:
            trim()
        else:
            release_freed()
    runtime = SceneRuntime(asset, session.backend, after_mixer=session.springs.after_mixer,
                           after_timeline=session.springs.after_timeline,
                           zero_singular_inverse=tuple(bpy.app.version) < (5, 0, 0))
    if not runtime.initialize():
        session.imports.import_error = f"runtime initialisation failed: {runtime.last_error}"
        return
    if replaced and not session.viewport:
        # the uploads' scratch (chunk ordering, index conversions) goes back before the draws
        from .heap import trim

        trim()
    session.scene_asset = asset
    session.assets.known.remember(asset, depsgraph.scene)
    session.imports.problems = list(problems)
    session.runtime = runtime
    session.reader = session.new_reader(asset, runtime)
    for i, nd in enumerate(asset.nodes):
        mi = int(asset.mesh_indices[i])
        if mi < 0:
            continue
        reason = asset.meshes[mi].fallback_reason
        if reason:
            session.imports.fallbacks[nd.object_name] = reason
        else:
            session.imports.gpu_nodes.add(i)

