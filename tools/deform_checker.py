"""The deform checker behind tools/check_deform.py and tools/check_scene.py: ``Checker`` reads our
GPU-deformed vertices back (through the variants the passes draw with) and compares them with
Blender's evaluated meshes in world space; the tolerances and the frames it checks between frames.
tools/check_deform.py (the command and its summary) and tools/check_scene.py (``--mode scene``)
import it; it imports neither."""
from __future__ import annotations

import math

import numpy as np

from tools.gpu_readback import GpuReadback

_bake = None     # engine.blender.bake.isolate, bound by Checker (after the extension is loaded)
_actions = None  # engine.blender.importer.actions, likewise

TOLERANCE = 1e-4
NORMAL_TOLERANCE = 0.5         # median 1 - cos(angle): 60 degrees = inverted/unskinned/unmorphed normals
MAX_FRAMES = 250
BETWEEN_FRAMES = 4             # baked clips: frames (spread over the clip) checked between frames ...
BETWEEN_SUBFRAMES = (0.25, 0.5, 0.75, 0.3, 0.62)   # ... at these fractions past each (pass/fail: BETWEEN_TOLERANCE;
#                                                 0.3 and 0.62 lie off the adaptive bake's 1/2**k samples)
BETWEEN_TOLERANCE = 1e-3       # baked clips between frames: the adaptive bake's target (issue 22)
FRACTION_FRAMES = 4            # plain clips: frames (spread over the clip) checked between frames ...
FRACTION_SUBFRAMES = (0.25, 0.5, 0.75)   # ... at these fractions past each (part of the pass/fail)

def parse_frames(spec, scene):
    if not spec:
        start, end = scene.frame_start, scene.frame_end
        frames = list(range(start, end + 1))
        if len(frames) > MAX_FRAMES:
            step = math.ceil(len(frames) / MAX_FRAMES)
            frames = frames[::step]
        return frames
    out = []
    for part in spec.split(","):
        step = 1
        if ":" in part:
            part, s = part.split(":")
            step = int(s)
        if "-" in part[1:]:
            a, b = part.split("-", 1) if not part.startswith("-") else part[1:].split("-", 1)
            out.extend(range(int(a), int(b) + 1, step))
        else:
            out.append(int(part))
    return out[:MAX_FRAMES]


def blender_world_corner_normals(depsgraph, name):
    """(loop vertex index (L,), world corner normals (L,3)) of Blender's evaluated mesh."""
    import bpy

    ob = bpy.data.objects[name].evaluated_get(depsgraph)
    me = ob.data
    nl = len(me.loops)
    lv = np.empty(nl, np.int64)
    me.loops.foreach_get("vertex_index", lv)
    cn = np.empty(nl * 3, np.float32)
    if nl:
        me.corner_normals.foreach_get("vector", cn)
    m = np.array(ob.matrix_world)[:3, :3]
    nm = np.linalg.pinv(m).T      # an object scaled to 0 has no inverse
    w = cn.reshape(nl, 3).astype(np.float64) @ nm.T
    ln = np.linalg.norm(w, axis=1, keepdims=True)
    return lv, w / np.maximum(ln, 1e-12)


def normal_error(ours: np.ndarray, src: np.ndarray, loop_vert: np.ndarray, corner_normals: np.ndarray):
    """(median, 90th percentile) over vertices of min over that vertex's corners of 1 - dot(ours,
    Blender's) (vectorised).  A percentile, because on flat-shaded low-poly meshes the faces that
    span several joints get recomputed normals no skinned base normal reproduces (linear blend
    skinning transforms normals; Blender recomputes them from the deformed faces)."""
    if ours.shape[0] == 0:
        return 0.0, 0.0
    order = np.argsort(loop_vert, kind="stable")
    nverts = int(max(loop_vert.max() if loop_vert.size else 0, src.max()) + 1)
    counts = np.bincount(loop_vert, minlength=nverts)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    c = counts[src]
    if np.any(c == 0):
        return float("inf"), float("inf")
    rep = np.repeat(np.arange(src.shape[0]), c)
    offs = np.arange(rep.shape[0]) - np.repeat(np.cumsum(c) - c, c)
    loops = order[starts[src][rep] + offs]
    ln = np.linalg.norm(ours, axis=1, keepdims=True)
    o = ours / np.maximum(ln, 1e-12)
    err = 1.0 - np.einsum("ij,ij->i", o[rep], corner_normals[loops])
    first = np.cumsum(c) - c
    per_vertex = np.minimum.reduceat(err, first)
    return float(np.median(per_vertex)), float(np.percentile(per_vertex, 90.0))


def blender_world_vertices(depsgraph, name):
    import bpy

    ob = bpy.data.objects[name].evaluated_get(depsgraph)
    me = ob.data
    n = len(me.vertices)
    co = np.empty(n * 3, np.float32)
    me.vertices.foreach_get("co", co)
    m = np.array(ob.matrix_world)
    return co.reshape(n, 3).astype(np.float64) @ m[:3, :3].T + m[:3, 3]


class Checker:
    def __init__(self, morph_policy="auto"):
        import bpy

        from stylized_renderer.engine.blender.session import StylizedSession

        global _bake, _actions
        from stylized_renderer.engine.blender.bake import isolate as bake
        from stylized_renderer.engine.blender.importer import actions

        _bake, _actions = bake, actions
        self.morph_policy = morph_policy
        self.morph_paths = {"rebuild": 0, "shader": 0}
        self.bpy = bpy
        from stylized_renderer.engine.blender import render_engine

        # the add-on's bakes when it is registered (what the preview's Play makes), else its own
        self.session = StylizedSession(addon=render_engine.addon_state())
        self.session.imports.want_clips = True     # the player check plays the clips
        self.readback = None
        self.results = {}      # (object, mode) -> dict(verts, err, path); mode "between": reported only
        self.skipped = []
        self.baked = []        # (clip, target, frames, seconds) of the clips baked for player mode
        self.bake_failures = []   # (clip, target, message): the check fails
        self.between_frames = BETWEEN_FRAMES
        self.fraction_frames = FRACTION_FRAMES
        self.clips_checked = []     # (clip, target) compared in player mode
        self.unplayed = []          # names of actions animating the file that no clip checked
        self.clip_rows = None       # player mode: one dict per checked clip (its worst error per mode)
        self.import_frame = None    # the scene frame of the session's last import (timeline mode)

    def _record(self, mode, name, verts, err, path, nerr=0.0, nmed=0.0):
        key = (name, mode)
        r = self.results.setdefault(key, {"verts": verts, "err": 0.0, "nerr": 0.0, "nmed": 0.0, "path": path})
        r["err"] = max(r["err"], err)
        r["nerr"] = max(r["nerr"], nerr)
        r["nmed"] = max(r["nmed"], nmed)
        if self.clip_rows is not None and mode != "timeline" and path == "gpu":
            row = self.clip_rows[-1]
            row[mode] = max(row.get(mode, 0.0), err)

    def _compare(self, mode, depsgraph, only=None):
        """GPU task body: read every GPU item back (of the objects named in ``only``, when given)
        and compare with Blender."""
        s = self.session
        items = [it for it in s.runtime.extract() if it.node_index in s.imports.gpu_nodes] if s.runtime else []
        if only is not None:
            items = [it for it in items if it.object_name in only]
        if self.readback is None:
            self.readback = GpuReadback()
        by_object = {}
        for it in items:
            by_object.setdefault(it.object_name, []).append(it)
        for name, its in by_object.items():
            ref = blender_world_vertices(depsgraph, name)
            loop_vert, corner_n = blender_world_corner_normals(depsgraph, name)
            diag = float(np.linalg.norm(ref.max(axis=0) - ref.min(axis=0))) if len(ref) else 0.0
            diag = max(diag, 1e-6)
            err = 0.0
            nerr = nmed = 0.0
            nverts = 0
            for it in its:
                if it.morphed:
                    self.morph_paths["shader" if getattr(it.stream, "morph", None) is not None else "rebuild"] += 1
                ours = self.readback.read(it)
                src = it.primitive.source_vertices
                if src.shape[0] and int(src.max()) >= ref.shape[0]:
                    err = float("inf")
                    continue
                if ours.shape[0]:
                    err = max(err, float(np.abs(ours - ref[src]).max()) / diag)
                    med, p90 = normal_error(self.readback.read(it, normals=True), src, loop_vert, corner_n)
                    nerr = max(nerr, p90)
                    nmed = max(nmed, med)
                nverts += ours.shape[0]
            self._record(mode, name, nverts, err, "gpu", nerr, nmed)
        for name, reason in s.imports.fallbacks.items():
            if only is None or name in only:
                self._record(mode, name, 0, 0.0, f"fallback:{reason}")

    def _played_by(self, target_name: str) -> set:
        """The objects a clip on ``target_name`` moves in the preview: the target, its children
        and the meshes it deforms (recursively).  The rest of the scene holds still in the
        preview and is not what the player check compares."""
        names = {target_name}
        changed = True
        while changed:
            changed = False
            for ob in self.bpy.data.objects:
                if ob.name in names:
                    continue
                arm = ob.find_armature() if ob.type == "MESH" else None
                if (ob.parent is not None and ob.parent.name in names) or (arm is not None and arm.name in names):
                    names.add(ob.name)
                    changed = True
        return names

    def _apply_policy(self):
        rt = self.session.runtime
        if rt is not None and rt.morph_policy != self.morph_policy:
            rt.set_morph_policy(self.morph_policy)

    # ------------------------------------------------------------------------------------------
    def run_timeline(self, frames):
        from stylized_renderer.engine.gpu import util as gpu_util

        bpy = self.bpy
        scene = bpy.context.scene
        for f in frames:
            scene.frame_set(f)
            dg = bpy.context.evaluated_depsgraph_get()

            def task(f=f):
                s = self.session
                s.ensure_gpu()
                before = s.imports.import_count
                s.ensure_runtime(dg)
                if s.imports.import_count != before:
                    self.import_frame = f
                self._apply_policy()
                s.update_frame(dg)
                self._compare("timeline", dg)

            gpu_util.run_in_gpu_context(task)
        return len(frames)

    def _skip_reason(self, clip):
        """Why a clip cannot be checked in player mode (None: it can).  Armatures whose clips
        need Blender's evaluation (constraints, IK, drivers, B-Bones) are baked instead
        (engine/blender/bake/cache.py), as the preview does; constraints or drivers on a plain
        object's clip and shape-key drivers on a morph clip are not baked: skipped."""
        bpy = self.bpy
        ob = bpy.data.objects.get(clip.target_object)
        if ob is None:
            return "target object missing"
        if ob.type != "ARMATURE":
            if ob.constraints and len(ob.constraints):
                return "object constraints on the target"
            ad = ob.animation_data
            if ad is not None and len(ad.drivers):
                return "drivers on the target"
        key = getattr(getattr(ob, "data", None), "shape_keys", None)
        kad = key.animation_data if key is not None else None
        if clip.morph_channels and kad is not None:
            animated = {f'key_blocks["{c.target_name}"].value' for c in clip.morph_channels}
            driven = sorted(d.data_path for d in kad.drivers if d.data_path in animated)
            if driven:
                return f"shape key driver on {driven[0]}"
        return None

    def run_player(self, frames_limit=None, step: int = 1):
        from stylized_renderer.engine.features.preview.control import PreviewState
        from stylized_renderer.engine.gpu import util as gpu_util

        bpy = self.bpy
        scene = bpy.context.scene
        frames_done = 0
        # the frame the session imported at (a timeline check before: its first frame): the
        # player holds what a clip does not key at the pose of the import, Blender's side is
        # set up from that frame too
        if self.import_frame is not None:
            scene.frame_set(self.import_frame)
        import_frame = scene.frame_current
        # import once (GPU task), as the viewport session does, to know the clips
        dg = bpy.context.evaluated_depsgraph_get()
        gpu_util.run_in_gpu_context(lambda: (self.session.ensure_gpu(), self.session.ensure_runtime(dg)))
        asset = self.session.scene_asset
        if asset is None:
            return 0
        assert _bake is not None and _actions is not None      # bound by Checker.__init__
        saved = _bake.save_animation()
        self.clip_rows = []
        written = []      # the pose / key values the last checked action wrote (restored after it)
        try:
            for clip in asset.animations:
                _bake.restore_values(written)
                written = []
                reason = self._skip_reason(clip)
                if reason:
                    self.skipped.append((clip.name, clip.target_object, reason))
                    print(f"  skipped: clip '{clip.name}' on '{clip.target_object}': {reason}")
                    continue
                action = bpy.data.actions.get(clip.action_name or clip.name)
                ob = bpy.data.objects.get(clip.target_object)
                owner = ob
                if clip.morph_channels and not clip.channels and ob.type == "MESH":
                    owner = ob.data.shape_keys
                if action is None or owner is None:
                    self.skipped.append((clip.name, clip.target_object, "action or owner missing"))
                    continue
                # Blender's side: the file's state at import, then that action alone
                _bake.restore_animation(saved)
                scene.frame_set(import_frame)
                # evaluating an action writes its values into the user's data (pose bones, key
                # values): put them back after the clip, so the next clip's reference starts from
                # the file's pose as the preview's does
                written = [w for idb in ((owner, ob.data) if ob.type == "ARMATURE" else (owner,))
                           for w in _bake.written_values(idb, action, _actions.pick_slot(action, idb.id_type))]
                _bake.isolate(owner, action, with_data=True)
                baked = None
                played = self._played_by(clip.target_object)
                if ob.type == "ARMATURE" and self.session.bakes.reasons(ob.name):
                    # what the preview's Play does: bake the clip through Blender's evaluation
                    from stylized_renderer.engine.blender.bake.reasons import BakeError

                    try:
                        baked = self.session.bakes.ensure(ob, clip.name, clip.action_name or None)
                    except BakeError as ex:   # the preview cannot play it: a failure
                        print(f"  bake failed: clip '{clip.name}' on '{clip.target_object}': {ex}")
                        self.bake_failures.append((clip.name, clip.target_object, str(ex)))
                        continue
                    assert baked is not None      # the armature has bake reasons: ensure baked it
                    self.baked.append((clip.name, clip.target_object, baked.frame_count, baked.seconds))
                    print(f"  baked: clip '{clip.name}' on '{clip.target_object}' ({baked.frame_count} frames, "
                          f"{baked.seconds:.2f} s): {'; '.join(baked.reasons)}")
                n_frames = int(round(clip.duration_seconds * clip.fps)) + 1
                every = [int(round(clip.frame_start)) + k for k in range(n_frames)]
                frames = every[::max(1, int(step))]
                if frames_limit:
                    frames = frames[:frames_limit]
                    every = every[:frames_limit]
                # between integer frames (baked clips): the bake is interpolated between its
                # samples there (exact within BETWEEN_TOLERANCE: a failure above)
                # (spread over every frame of the clip, whatever ``step`` checks at integer frames)
                between = []
                if baked is not None and len(every) > 1:
                    pick = np.unique(np.linspace(0, len(every) - 2, min(self.between_frames, len(every) - 1))
                                     .round().astype(int))
                    between = [(every[int(i)], sub) for i in pick for sub in BETWEEN_SUBFRAMES]
                # plain clips: between frames too, at a few frames spread over the clip
                exact = baked is None and not any(
                    "sampled at every frame" in n for n in getattr(clip, "notes", ()))
                if baked is None and len(every) > 1:
                    pick = np.unique(np.linspace(0, len(every) - 2, min(self.fraction_frames, len(every) - 1))
                                     .round().astype(int))
                    between += [(every[int(i)], sub) for i in pick for sub in FRACTION_SUBFRAMES]
                for note in getattr(clip, "notes", ()):
                    print(f"  note: clip '{clip.name}': {note}")
                self.clips_checked.append((clip.name, clip.target_object))
                self.clip_rows.append({"clip": clip.name, "target": clip.target_object, "baked": baked})
                for f, sub in [(f, 0.0) for f in frames] + between:
                    scene.frame_set(f, subframe=sub)
                    dg = bpy.context.evaluated_depsgraph_get()
                    # ours: the preview player as the viewport drives it
                    state = PreviewState(armature=clip.target_object, active=True)
                    state.push("clip", clip.name)
                    state.push("seek", (f + sub - clip.frame_start) / clip.fps)
                    state.push("pause")
                    mode = ("player" if sub == 0.0 else "baked-between" if baked is not None
                            else "fraction" if exact else "between")

                    def task():
                        s = self.session
                        s.ensure_runtime(dg)
                        self._apply_policy()
                        if not s.update_frame(dg, state):
                            rt = s.runtime
                            why = rt.last_failure() if rt is not None else "the session has no runtime"
                            raise RuntimeError(f"preview update failed: {why}")
                        if not state.active:
                            # the preview refused the clip (e.g. a bake is missing): a failure,
                            # never a comparison of Blender with itself
                            print(f"  refused: clip '{clip.name}' at frame {f + sub:g}: {state.last_error}")
                            assert s.scene_asset is not None      # update_frame returned True
                            for name in played:
                                if name in s.imports.fallbacks or not any(s.scene_asset.nodes[n].object_name == name
                                                                  for n in s.imports.gpu_nodes):
                                    continue
                                self._record(mode, name, 0, float("inf"), "gpu")
                            return
                        self._compare(mode, dg, played)

                    gpu_util.run_in_gpu_context(task)
                    frames_done += sub == 0.0
        finally:
            _bake.restore_values(written)
            _bake.restore_animation(saved)
            scene.frame_set(import_frame)
        offered = {c.action_name or c.name for c in asset.animations}
        self.unplayed = sorted(a.name for a in bpy.data.actions if a.name not in offered and _animates_file(a))
        for name in self.unplayed:
            print(f"  not offered: action '{name}' animates the file's objects but no clip plays it")
        return frames_done


def _animates_file(action) -> bool:
    """Whether ``action`` keys a bone, an object transform or a shape key of an object in the file."""
    import bpy

    bones = {b.name for ob in bpy.data.objects if ob.type == "ARMATURE" for b in ob.data.bones}
    assert _actions is not None     # bound by Checker.__init__ (Checker.run_player calls this)
    for slot in action.slots:
        for fc in _actions.slot_fcurves(action, slot):
            m = _actions.RE_BONE_ANY.match(fc.data_path)
            if (m and _actions._unescape(m.group(1)) in bones) or _actions.RE_OBJ.match(fc.data_path) \
                    or _actions.RE_KEY_ANY.match(fc.data_path):
                return True
    return False
