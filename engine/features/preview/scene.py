"""The preview's *Scene* playback: every animated object of the scene plays from the current frame
at the scene's rate, range and loop, as timeline playback would, without evaluating Blender's
depsgraph.  Read once when Scene playback starts (``ScenePlayback``, kept by the session's
preview driver): each Object's and shape-key datablock's active action and NLA stack
(``nla_source``); per frame the
stacks are evaluated (``animation.nla``), their object / pose-bone channels become the nodes' local
TRS through the importer's curve binding (``CurveBindingAsset``: rotation modes, delta transforms,
connected bones, as a plain clip plays them) and the shape-key channels the meshes' morph weights;
the runtime then updates as on a timeline frame (palettes, morphs), after the mixer step W2d's
spring bones hook into (``SceneRuntime.update_timeline``).

Armatures only Blender can evaluate (bone constraints, IK, drivers on their bones or data,
weighted B-Bones) and shape keys whose values drivers set (``bake.scene_keys``) are baked through
Blender when Play starts (``blender/bake/scene.py``: the scene's
range as the timeline shows it, NLA included, adaptive sub-frame samples) and their bones drawn
from the bake (``preview_scene_bake``); the panel names them, why, and the bake's figures.
VRM expression previews keyed on an armature's data (with or without the VRM Add-on) are
evaluated with the other channels and turned into the bound shape keys by the session's
``TimelineReader`` (the VRM 1.0 rules, as on the timeline).  Refused with the reason
(``needs_blender``): object constraints, drivers on object transforms or on a mesh's data or
on shape keys other than their values, other animated armature data, tweak mode, meta / transition strips.
"""
from __future__ import annotations

import math
import time
from typing import Dict, List, Optional

import numpy as np

from ...blender.importer import actions as _actions
from ...blender.importer.curve_read import build_binding
from ...blender.importer.nodes import bone_target, object_target
from ...blender.importer.vrm_paths import channel_key_for_path
from ...blender.sources.nla import SceneAnimation
from ...core.animation.curve_clip import CurveTracks
from ...core.animation.player import as_slice
from ...core.assets.curves import FCurveSetAsset
from . import scene_bake as _bakes


def needs_blender(scene) -> List[str]:
    """Why Scene playback cannot play this scene itself, even with bakes: one message per object
    whose motion needs Blender's evaluation in a way a bake of its bones does not cover (object
    constraints, drivers on object transforms, on a mesh's data or shape keys), naming it and
    what drives it.  Empty when it can.  Bone constraints, IK and drivers on an armature's bones
    or data are baked (``blender/bake/scene.py``)."""
    out = []
    for ob in scene.objects:
        why = []
        cons = [c for c in ob.constraints if not c.mute and c.influence > 0.0]
        if cons:
            why.append("object constraint " + ", ".join(f"'{c.name}' ({c.type})" for c in cons[:3]))
        arm = ob.type == "ARMATURE"
        for idb, what in ((ob, "object"), (getattr(ob, "data", None), "data"),
                          (getattr(getattr(ob, "data", None), "shape_keys", None), "shape keys")):
            ad = getattr(idb, "animation_data", None)
            drivers = [d for d in (ad.drivers if ad is not None else ()) if not d.mute]
            if arm:      # an armature's bones and data: baked; its object transform: not
                drivers = [d for d in drivers if what == "object" and _actions.RE_OBJ.match(d.data_path)]
            elif what == "shape keys":      # a key block's value: baked (bake.scene_keys)
                drivers = [d for d in drivers if not _actions.RE_KEY.match(d.data_path)]
            if drivers:
                why.append(f"{len(drivers)} driver(s) on its {what} (e.g. {drivers[0].data_path})")
        if why:
            out.append(f"object '{ob.name}' is driven by {'; '.join(why)}: Scene playback does not evaluate "
                       "that (an armature's bones and shape-key values are baked, nothing else); play its clip, or use the timeline")
        if getattr(getattr(ob, "animation_data", None), "use_tweak_mode", False):
            out.append(f"object '{ob.name}': its NLA is in tweak mode (a strip is being edited): Scene playback "
                       "does not evaluate tweak mode; leave it, or use the timeline")
        data = getattr(ob, "data", None)
        for idb in (ob, getattr(data, "shape_keys", None)):
            if idb is None:
                continue
            ad = getattr(idb, "animation_data", None)
            odd = [st for t in (ad.nla_tracks if ad is not None else ()) for st in t.strips if st.type != "CLIP"]
            if odd:
                out.append(f"'{idb.name}': NLA strip '{odd[0].name}' is a {odd[0].type.lower()} strip: Scene "
                           "playback evaluates action strips only; use the timeline")
        other = _armature_data_paths(ob)
        if other and data is not None:       # (other is only found on the armature's data)
            out.append(f"armature '{ob.name}': its data '{data.name}' animates {other[0]}: Scene playback "
                       "evaluates VRM expression previews there, nothing else; use the timeline")
    return out


def _armature_data_paths(ob) -> List[str]:
    """The curves an armature's data animation keys besides VRM expression previews."""
    data = getattr(ob, "data", None)
    ad = getattr(data, "animation_data", None) if ob.type == "ARMATURE" else None
    if ad is None or data is None:
        return []
    from ...blender.importer.actions import pick_slot, slot_fcurves

    uses = [(ad.action, pick_slot(ad.action, "ARMATURE", ad, data.name))] if ad.action is not None else []
    uses += [(st.action, getattr(st, "action_slot", None)) for t in ad.nla_tracks for st in t.strips
             if st.action is not None]
    return sorted({fc.data_path for act, slot in uses if slot is not None for fc in slot_fcurves(act, slot)
                   if not fc.mute and channel_key_for_path(fc.data_path) is None})


def _constant_curves(values: np.ndarray) -> FCurveSetAsset:
    """One constant curve per channel at its default value (the binding's curve set: the frame
    passes the NLA's values, these are what an evaluation without them would give)."""
    n = values.shape[0]
    co = np.stack([np.zeros(n), values], axis=1)
    z = np.zeros(n)
    return FCurveSetAsset(counts=np.ones(n, np.int64), co=co, handle_left=co.copy(), handle_right=co.copy(),
                          interpolation=np.ones(n, np.int64), easing=np.zeros(n, np.int64), back=z, amplitude=z,
                          period=z, extrapolation=np.zeros(n, np.int64), has_cycles=np.zeros(n, bool),
                          cycles=np.zeros((n, 4), np.int64))


class ScenePlayback:
    """What Scene playback evaluates per frame for one runtime (one SceneAsset)."""

    def __init__(self, scene, scene_asset, runtime, bakes=None, reader=None):
        import bpy

        self.runtime = runtime
        self.reader = reader        # the session's TimelineReader: VRM expressions -> bound shape keys
        self.build_ms = 0.0
        self.anim = SceneAnimation(scene)
        self.notes: List[str] = [n for a in self.anim.ids for n in a.notes]
        self.feeds = _bakes.feeds(bakes, scene_asset)        # baked armatures: bones from their bake
        self.key_feeds = _bakes.key_feeds(bakes, scene_asset, runtime)    # driven shape keys: their bake
        baked = {f.name for f in self.feeds}
        if bakes is not None:
            self.notes = bakes.lines() + self.notes
        index = {(nd.object_name, nd.bone_name): i for i, nd in enumerate(scene_asset.nodes)}
        offsets = np.cumsum([0] + [len(a.keys) for a in self.anim.ids])
        work = []
        tokens: Dict[int, int] = {}
        keep = []
        self._morphs = []     # (nodes, base weights, positions in their keys, global channels)
        expr_keys, expr_chans = [], []     # VRM expression previews keyed on armature data
        for a, off in zip(self.anim.ids, offsets[:-1]):
            idb = a.id
            if idb.bl_rna.identifier == "Key":
                self._bind_key(bpy, idb, a, int(off), index)
                continue
            if idb.bl_rna.identifier == "Armature":
                for ob in [o for o in scene.objects if o.data == idb]:
                    node = index.get((ob.name, None))
                    for j, (path, _comp) in enumerate(a.keys):
                        ck = channel_key_for_path(path)
                        if node is not None and ck is not None:
                            expr_keys.append((node, ck))
                            expr_chans.append(int(off) + j)
                continue
            node = index.get((idb.name, None))
            if node is None:
                continue
            obj_curves, bone_curves = {}, {}
            for j, (path, comp) in enumerate(a.keys):
                tok = object()
                keep.append(tok)
                tokens[id(tok)] = int(off) + j
                mb = _actions.RE_BONE.match(path)
                if mb:
                    bone_curves.setdefault(_actions._unescape(mb.group(1)), {})[(mb.group(2), comp)] = tok
                elif _actions.RE_OBJ.match(path):
                    obj_curves[(path, comp)] = tok
            if obj_curves:
                tgt = object_target(idb, node)
                work.append((tgt, _actions._used_curves(tgt, obj_curves)))
            pose = getattr(idb, "pose", None) if idb.name not in baked else None
            for bname, cs in bone_curves.items():
                bnode = index.get((idb.name, bname))
                if bnode is None or pose is None:
                    continue
                tgt = bone_target(pose.bones.get(bname), bnode)
                work.append((tgt, _actions._used_curves(tgt, cs)))
        defaults = np.concatenate([a.current for a in self.anim.ids]) if self.anim.ids else np.zeros(0)
        binding = build_binding(_constant_curves(defaults), work, tokens)
        self._tracks = CurveTracks(binding, 0.0, 1.0)
        b = binding
        self._nodes = np.unique(np.concatenate([b.t_nodes, b.r_nodes, b.s_nodes]))
        self._rows = tuple(np.searchsorted(self._nodes, n) for n in (b.t_nodes, b.r_nodes, b.s_nodes))
        # the pose's direct write (slices where the nodes are consecutive)
        self._write = tuple(as_slice(np.asarray(n, np.intp)) for n in (self._nodes, b.t_nodes, b.r_nodes, b.s_nodes))
        # the reader's (node, channel) form of the preview player's clip channels (identity kept:
        # the reader maps them to expression columns once)
        self._expr = (expr_keys, np.array(expr_chans, np.int64)) if expr_keys and reader is not None else None
        self._pushed: Dict[int, np.ndarray] = {}     # node -> the morph weights of its last push
        self._pushed_epoch = None                     # the runtime's morph epoch after that push

    def _bind_key(self, bpy, key, a, off: int, index) -> None:
        users = [ob for ob in bpy.data.objects
                 if getattr(getattr(ob, "data", None), "shape_keys", None) == key]
        groups: Dict[tuple, list] = {}      # the users with the same key names (linked duplicates)
        for ob in users:
            node = index.get((ob.name, None))
            if node is None:
                continue
            names = self.runtime.morph_key_names(node)
            if names:
                groups.setdefault(tuple(names), []).append(node)
        for names, nodes in groups.items():
            pos = {n: i for i, n in enumerate(names)}
            base = np.array([float(key.key_blocks[n].value) if n in key.key_blocks else 0.0 for n in names])
            slots, chans = [], []
            for j, (path, _comp) in enumerate(a.keys):
                m = _actions.RE_KEY.match(path)
                if m and _actions._unescape(m.group(1)) in pos:
                    slots.append(pos[_actions._unescape(m.group(1))])
                    chans.append(off + j)
            if slots:     # the weights are made once for all of the nodes (one Key: one set of values)
                self._morphs.append((tuple(nodes), base, np.array(slots, np.int64), np.array(chans, np.int64)))

    def evaluate(self, frame: float):
        """Every channel's value at scene time ``frame`` (every ID's stack in one pass)."""
        return self.anim.evaluate_all(frame)[0]

    def write_pose(self, frame: float, pose):
        """The animated nodes' TRS at scene time ``frame`` into ``pose``: (ok, channel values)."""
        vals = self.evaluate(frame)
        ok = True
        if self._nodes.size:
            tv, qv, sv = self._tracks.sample(0.0, values=vals)
            if all(v is None or np.isfinite(v).all() for v in (tv, qv, sv)):
                # finite rows, unit quaternions from the sampler: straight into the pose
                nodes, tn, rn, sn = self._write
                pose.write_sampled(nodes, tn, tv, rn, qv, sn, sv)
            else:       # a NaN or infinite value: the pose refuses it (the frame fails, named)
                t, q, s = pose.local_trs(self._nodes)
                tr, rr, sr = self._rows
                if tv is not None:
                    t[tr] = tv
                if qv is not None:
                    q[rr] = qv
                if sv is not None:
                    s[sr] = sv
                ok = pose.set_local_trs(self._nodes, t, q, s)
        for feed in self.feeds:            # after the TRS write: a baked armature's bones (matrices)
            ok = feed.write(frame, pose) and ok
        return ok, vals

    def apply(self, frame: float) -> bool:
        """The scene at ``frame`` into the runtime: node TRS, baked bones and their B-Bone
        segments, morph weights, then the frame's update (palettes, morph streams)."""
        rt = self.runtime
        ok, vals = self.write_pose(frame, rt.pose)
        for feed in self.feeds:
            ok = feed.write_segments(frame, rt.palette_set) and ok
        weights = {}
        read = src = None
        reader = self.reader
        if self._expr is not None and reader is not None:     # (_expr is only set with a reader)
            # the expressions at this scene time: every VRM-bound key from them (the VRM rules),
            # as the timeline reader does with the add-on's previews
            keys, chans = self._expr
            read = reader.read_morph_weights(None, expression_values=(keys, vals[chans]))
            weights.update(read)
            src = getattr(reader.expressions, "source", None)    # the VRM driver's
        for nodes, base, slots, chans in self._morphs:
            shared = base.copy()
            shared[slots] = vals[chans]
            for node in nodes:
                w = shared
                if read is not None and node in read:
                    bound = src.bound.get(node) if src is not None else None
                    if bound is not None:          # a bound key follows its expression (the add-on's write wins)
                        w = shared.copy()
                        w[bound[0]] = read[node][bound[0]]
                weights[node] = w
        for feed in self.key_feeds:          # driven shape keys over the key's NLA (drivers come last)
            feed.write(frame, weights, feed.base)
        # a node whose weights are those of its last push, with no morph weight of the runtime
        # changed since (its morph epoch), is not pushed again (a shape key holding still); the
        # nodes sharing one array are compared once
        last = self._pushed if rt.morph_epoch.value == self._pushed_epoch else {}
        push, same = {}, {}
        for n, w in weights.items():
            prev = last.get(n)
            if prev is not None:
                k = (id(prev), id(w))
                eq = same.get(k)
                if eq is None:
                    eq = same[k] = bool(np.array_equal(prev, w))
                if eq:
                    continue
            push[n] = w
        # the shown frame goes with the update (the spring bones: engine/features/springs/timeline.py)
        done = rt.update_timeline(None, None, push, frame=frame)
        if done:
            last = dict(last)
            last.update(push)
            self._pushed, self._pushed_epoch = last, rt.morph_epoch.value
        else:
            self._pushed, self._pushed_epoch = {}, None
        return done and ok


def scene_clock(scene):
    """(fps, first frame, last frame) of the scene's playback."""
    fps = float(scene.render.fps) / float(scene.render.fps_base or 1.0)
    return fps, float(scene.frame_start), float(scene.frame_end)


def advance(frame: float, dt: float, fps: float, start: float, end: float, loop: bool):
    """(frame after ``dt`` seconds, still playing) as timeline playback moves: at the scene's rate,
    continuously (no frame snapping), wrapping from the last frame to the first (loop) or stopping
    on the last."""
    f = frame + dt * fps
    if f <= end or end <= start:
        return f, True
    if not loop:
        return end, False
    return start + math.fmod(f - start, end - start), True


def update(driver, depsgraph, state, dt: float) -> bool:
    """One preview frame in Scene mode (``PreviewDriver.update``): commands, the clock, then the
    scene at the shown frame.  The playback data lives on the session's preview driver
    (``driver.scene_playback``)."""
    import bpy

    session = driver.session
    scene = depsgraph.scene if depsgraph is not None else bpy.context.scene
    pb: Optional[ScenePlayback] = driver.scene_playback
    reload = ("scene_reload",) in state.commands
    # an edit of an action, a strip or a track re-imports (StylizedSession.sync): a new runtime
    if pb is None or pb.runtime is not session.runtime or reload:
        why = needs_blender(scene)
        stale = _bakes.missing(scene, state)
        if stale and not why:
            why = [f"Scene playback needs a bake: {stale}"]
        if why:
            # never play a wrong pose: timeline mode, and the panel says why
            driver.scene_playback = None
            state.last_error = why[0] + (f" (and {len(why) - 1} more object(s))" if len(why) > 1 else "")
            state.scene_notes = why
            state.active = state.playing = False
            state.commands.clear()
            return driver.timeline(depsgraph)
        t0 = time.perf_counter()
        pb = driver.scene_playback = ScenePlayback(scene, session.scene_asset, session.runtime,
                                                    state.scene_bakes, session.reader)
        pb.build_ms = (time.perf_counter() - t0) * 1e3
        state.scene_notes = list(pb.notes)
        state.last_error = None
    fps, start, end = scene_clock(scene)
    for cmd in state.commands:
        if cmd[0] == "scene_seek":
            state.scene_frame = float(cmd[1])
        elif cmd[0] == "play":
            state.playing = True     # (from the shown frame: StylizedSession.update_frame)
        elif cmd[0] == "pause":
            state.playing = False
    state.commands.clear()
    if state.playing:
        state.scene_frame, state.playing = advance(state.scene_frame, dt * state.speed, fps, start, end,
                                                   state.looping)
    ok = pb.apply(state.scene_frame)
    state.last_palette_uploads = session.runtime.palette_set.last_upload_count
    return ok
