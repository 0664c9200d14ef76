"""The bake: Blender's evaluation of one action on one armature, per sampled frame
(``bake.bake_action``)."""
from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from ..importer import actions as _actions
from . import adaptive as _adaptive
from .isolate import (
    isolate,
    quiet_geometry,
    restore_animation,
    restore_geometry,
    restore_values,
    save_animation,
    written_values,
)
from .mesh_anchors import mesh_anchors, segment_sizes
from .reasons import BakeError, bake_reasons, weighted_bbones
from .signature import bake_signature, read_bulk
from .tables import MatrixTable, chain, levels


@dataclass
class Bake:
    """Blender's evaluation of one action on one armature, per sample (name-keyed, so it is
    independent of any scene asset's node order), stored compactly (``tables.MatrixTable``:
    float32 translation / rotation / stretch, matrices that never change once).

    ``locals``: every bone's pose relative to its Blender parent bone (armature space for root
    bones), (F,B) matrices; ``pose`` composes the armature-space (F,B,4,4) float64 matrices from it
    (transient, bake time).  ``bbone_table``: the weighted B-Bones' segment matrices (bone space),
    ``bbone_slices`` naming each bone's rows.  ``frames`` holds the integer frames of
    ``actions.sample_frames`` and the sub-frame samples the adaptive bake added
    (``added``); ``between_error``: the largest error between samples the bake measured against
    Blender (each deformed mesh's relative to its size, the bones' to ``size``, the rig's rest
    extent: ``worst`` says which), ``checked`` how many mid-points; ``unmeasured``: the
    mid-points the sample budget (``budget`` evaluations) left at their estimated error."""
    armature: str
    clip_name: str
    action_name: str
    frames: np.ndarray                 # (F,) sampled frames (sorted)
    frame_start: float
    fps: float
    bone_names: List[str]              # (B,) pose.bones order
    parents: np.ndarray                # (B,) Blender parent of each bone (index), -1 for roots
    locals: MatrixTable                # (F,B) parent-relative pose matrices
    world: np.ndarray                  # (F,4,4) armature matrix_world
    parent_world: Optional[np.ndarray]  # (F,4,4) the armature parent's world (object channel), or None
    object_channel: bool               # the armature object's own transform is baked too
    bbone_table: Optional[MatrixTable] = None                          # (F,S) segment matrices
    bbone_slices: Dict[str, slice] = field(default_factory=dict)       # bone -> its rows of bbone_table
    bbone_rest: Dict[str, np.ndarray] = field(default_factory=dict)    # bone -> (S+1,4,4)
    reasons: List[str] = field(default_factory=list)
    seconds: float = 0.0
    signature: tuple = ()
    version: int = 0
    substeps: int = 1                  # samples per frame interval before the adaptive ones
    added: int = 0                     # sub-frame samples the adaptive bake added
    checked: int = 0                   # mid-points checked against Blender
    between_error: float = 0.0         # largest measured error between samples / size
    size: float = 1.0                  # the rig's rest extent (armature space)
    worst: str = ""                    # what between_error is relative to ("the size of mesh 'Body'", ...)
    budget: int = 0                    # the mid-point evaluations the adaptive bake was allowed
    unmeasured: int = 0                # mid-points left at their estimate once that was spent

    @property
    def frame_count(self) -> int:
        return int(self.frames.shape[0])

    @property
    def duration_seconds(self) -> float:
        return float((self.frames[-1] - self.frames[0]) / self.fps) if self.frames.size else 0.0

    @property
    def pose(self) -> np.ndarray:
        """(F,B,4,4) float64 armature-space pose matrices (``PoseBone.matrix``), made from ``locals``."""
        return chain(self.locals.all_frames(), levels(self.parents))

    @pose.setter
    def pose(self, value: np.ndarray) -> None:
        value = np.asarray(value, np.float64)
        same = self.frames.shape[0] == value.shape[0]
        self.locals = MatrixTable(_adaptive.locals_of(value, self.parents), times=self.frames if same else None,
                                  modes=self.locals.modes if same and self.locals is not None else None,
                                  knots=self.locals.knots if same and self.locals is not None else None)

    @property
    def nbytes(self) -> int:
        """Bytes the bake holds (tables, frames, object matrices)."""
        n = self.locals.nbytes + self.world.nbytes + self.frames.nbytes
        n += self.parent_world.nbytes if self.parent_world is not None else 0
        n += self.bbone_table.nbytes if self.bbone_table is not None else 0
        return int(n + sum(r.nbytes for r in self.bbone_rest.values()))


def _object_channel_needed(armature, action, slot) -> bool:
    if any(c.enabled for c in armature.constraints):
        return True
    ad = armature.animation_data
    if ad is not None and any(_actions.RE_OBJ.match(d.data_path) for d in ad.drivers if not d.mute):
        return True
    _names, has_obj = _actions.action_bone_names(action, slot)
    return bool(has_obj)


def _parent_world(ob_eval) -> Optional[np.ndarray]:
    """World matrix of the node an armature object is parented to (object or bone), evaluated."""
    p = ob_eval.parent
    if p is None:
        return None
    w = np.array(p.matrix_world, np.float64)
    if ob_eval.parent_type == "BONE" and p.type == "ARMATURE" and ob_eval.parent_bone:
        pb = p.pose.bones.get(ob_eval.parent_bone)
        if pb is not None:
            w = w @ np.array(pb.matrix, np.float64)
    return w


def bake_frames(action, substeps: int = 1) -> Tuple[np.ndarray, float, float]:
    """``actions.sample_frames(action)`` with ``substeps - 1`` evenly spaced subframes inserted
    in every interval (``substeps`` 1: the frames themselves)."""
    frames, start, end = _actions.sample_frames(action)
    n = max(1, int(substeps))
    if n > 1 and frames.size > 1:
        a = frames[:-1, None] + (frames[1:] - frames[:-1])[:, None] * (np.arange(n) / n)[None]
        frames = np.concatenate([a.ravel(), frames[-1:]])
    return frames, start, end


def bake_action(armature, action, slot=None, clip_name: Optional[str] = None, scene=None,
                progress: Optional[Callable[[int, int], None]] = None, reasons=None,
                substeps: int = 1, quiet: Optional[Callable] = None) -> Bake:
    """Blender's evaluation of ``action`` (its ``slot``) on ``armature`` alone, at every frame of
    ``actions.sample_frames(action)`` (and ``substeps - 1`` subframes between each: the preview
    interpolates linearly between baked samples, so more substeps cut the error between frames
    at that cost).  The scene's frame, subframe, actions, slots, NLA mute flags and the pose
    values the action writes are restored exactly, also on error.  ``progress(done, total)`` is
    called per sample.  ``quiet()``: a context manager the scene's frame changes run in (the
    preview's owner: they do not hand the preview back to the timeline).  Raises BakeError with a
    message naming the armature and action."""
    import bpy

    quiet = quiet or contextlib.nullcontext

    if armature is None or armature.type != "ARMATURE":
        raise BakeError(f"cannot bake: '{getattr(armature, 'name', armature)}' is not an armature")
    if action is None:
        raise BakeError(f"cannot bake armature '{armature.name}': no action")
    try:
        _ = action.name                 # a deleted action raises ReferenceError
    except ReferenceError:
        raise BakeError(f"cannot bake armature '{armature.name}': the action was deleted") from None
    if armature.mode == "EDIT" or getattr(armature.data, "is_editmode", False):
        raise BakeError(f"cannot bake action '{action.name}' on '{armature.name}': the armature is in Edit Mode")
    scene = scene or bpy.context.scene
    if armature.name not in scene.objects:
        raise BakeError(f"cannot bake action '{action.name}': armature '{armature.name}' is not in scene '{scene.name}'")
    ad0 = armature.animation_data
    slot = slot if slot is not None else _actions.pick_slot(action, "OBJECT", ad0, armature.name)
    if len(getattr(action, "slots", ())) and slot is None:
        raise BakeError(f"cannot bake action '{action.name}' on '{armature.name}': it has no object slot")
    fps = _actions.scene_fps(scene)
    frames, start, end = bake_frames(action, substeps)
    if not (np.isfinite(frames).all() and frames.size):
        raise BakeError(f"cannot bake action '{action.name}': its frame range {tuple(action.frame_range)} is not finite")
    for fc in _actions.slot_fcurves(action, slot):
        co = read_bulk(fc.keyframe_points, "co", 2)
        if not np.isfinite(co).all():
            raise BakeError(f"cannot bake action '{action.name}' on '{armature.name}': curve "
                            f"{fc.data_path}[{fc.array_index}] has a non-finite key")
    t0 = time.perf_counter()
    signature = bake_signature(armature, action, slot, fps, substeps)
    reasons = list(reasons) if reasons is not None else bake_reasons(armature)
    names, parents = bone_parents(armature)
    lengths, size = _adaptive.rig_extent(armature)
    bent = weighted_bbones(armature)
    obj_chan = _object_channel_needed(armature, action, slot)
    saved = save_animation()
    written = written_values(armature, action, slot)
    # values the armature's own current action writes too (restored after the re-evaluation)
    ad = armature.animation_data
    if ad is not None and ad.action is not None and ad.action != action:
        written += written_values(armature, ad.action, getattr(ad, "action_slot", None))
    ev = Evaluator(armature, names, bent, obj_chan and armature.parent is not None)
    label = f"baking action '{action.name}' on '{armature.name}'"

    def restore():
        restore_animation(saved)
        restore_values(written)

    rec = record_in(scene, ev, frames, parents, lengths, size, label, progress,
                    setup=lambda: isolate(armature, action, slot), restore=restore,
                    after=lambda: restore_values(written), quiet=quiet,
                    knots=lambda first: _key_samples(action, slot, first))
    frames, table, world, pworld, btable = tables(ev, rec, parents, label)
    ref = rec[1]
    return Bake(armature=armature.name, clip_name=clip_name or action.name, action_name=action.name,
                frames=frames, frame_start=float(start), fps=fps, bone_names=names, parents=parents,
                locals=table, world=world, parent_world=pworld, object_channel=obj_chan,
                bbone_table=btable, bbone_slices=dict(ev.bbone_slices), bbone_rest=dict(ev.bbone_rest),
                reasons=reasons, seconds=time.perf_counter() - t0, signature=signature,
                substeps=max(1, int(substeps)), added=ref.added, checked=ref.checked,
                between_error=ref.residual, size=size, worst=ref.worst, budget=ref.budget,
                unmeasured=ref.unmeasured)


def bone_parents(armature):
    """(bone names in pose.bones order, each bone's parent index or -1)."""
    names = [pb.name for pb in armature.pose.bones]
    index = {n: i for i, n in enumerate(names)}
    parents = np.array([index.get(pb.parent.name, -1) if pb.parent is not None else -1
                        for pb in armature.pose.bones], np.int64)
    return names, parents


def record_in(scene, ev, frames, parents, lengths, size: float, label: str, progress=None, setup=None,
              restore=None, after=None, quiet=None, knots=None):
    """``record`` with the scene set up by ``setup()`` and put back afterwards, also on error:
    the bodies' modifiers quieted while baking (``quiet_geometry``) and restored, ``restore()``,
    the scene's frame and subframe, ``after()``, all in ``quiet()`` (the preview's owner: its frame
    changes do not hand the preview back).  Any failure is a BakeError naming ``label``."""
    quiet = quiet or contextlib.nullcontext
    saved = (scene.frame_current, float(scene.frame_subframe))
    muted = []
    try:
        with quiet():
            if setup is not None:
                setup()
            muted = quiet_geometry(ev.armature, scene)
            return record(ev, scene, frames, parents, levels(parents), lengths, size, label, progress, knots)
    except BakeError:
        raise
    except Exception as ex:
        raise BakeError(f"{label} failed: {type(ex).__name__}: {ex}") from ex
    finally:
        with quiet():
            restore_geometry(muted)
            if restore is not None:
                restore()
            scene.frame_set(int(saved[0]), subframe=saved[1])
            if after is not None:
                after()


def record(ev, scene, frames: np.ndarray, parents, plan, lengths, size: float, label: str, progress=None,
           knots=None):
    """Blender's pose (``Evaluator``) at ``frames`` and the adaptive bake's sub-frame samples
    (``adaptive.Refiner``): (samples {frame: evaluation}, the refiner).  ``knots(first)``:
    (F,) bool, the samples at a source key (no tangent is read across one), or None.  The caller
    sets the scene up (isolation) and restores it."""
    samples = ev.run(scene, frames.tolist(), progress, int(frames.size))
    first = sorted(samples)
    pose0 = np.stack([samples[f][0] for f in first])
    _check_finite(pose0, first, ev.names, label)
    segs0 = np.stack([samples[f][3] for f in first]) if ev.nseg else None
    index = {n: i for i, n in enumerate(ev.names)}
    ref = _adaptive.Refiner(first, pose0, segs0, parents, plan, ev.measure(lengths, size, index),
                            knots=knots(first) if knots is not None else None)
    del pose0, segs0
    ref.run(lambda at: ev.run(scene, at), int(math.ceil(_adaptive.BUDGET * len(first))))
    _check_finite(ref.loc, ref.T.tolist(), ev.names, label)
    for m, (_pts, smp) in ref.truth.items():
        samples.setdefault(m, smp)
    return samples, ref


def tables(ev, rec, parents, label: str):
    """(frames, locals MatrixTable, world (F,4,4), parent world or None, B-Bone MatrixTable or
    None) of a ``record``."""
    samples, ref = rec
    frames = ref.T
    order = frames.tolist()
    world = np.stack([samples[f][1] for f in order])
    pworld = np.stack([samples[f][2] for f in order]) if ev.with_parent else None
    table = MatrixTable(ref.loc, parts=ref.parts, times=frames, modes=ref.modes, knots=ref.knots)
    btable = (MatrixTable(ref.segs, parts=ref.seg_parts, times=frames, modes=ref.modes, knots=ref.knots)
              if ev.bbone_slices else None)
    return frames, table, world, pworld, btable


def _key_samples(action, slot, frames) -> np.ndarray:
    """(F,) bool: the samples at a key of the action's curves (where keyed motion may change its
    acceleration: ``bake_interp`` reads no tangent across one)."""
    keys = [read_bulk(fc.keyframe_points, "co", 2)[:, 0] for fc in _actions.slot_fcurves(action, slot)]
    fr = np.asarray(frames, np.float64)
    if not keys:
        return np.zeros(fr.size, bool)
    k = np.unique(np.concatenate(keys))
    j = np.clip(np.searchsorted(k, fr), 1, max(k.size - 1, 1))
    near = np.minimum(np.abs(k[np.minimum(j, k.size - 1)] - fr), np.abs(k[j - 1] - fr))
    return near < 1e-4


def _check_finite(pose: np.ndarray, order, names, label: str) -> None:
    nf, nb = pose.shape[:2]
    bad = ~np.isfinite(pose.reshape(nf, nb, 16)).all(axis=2)
    if bad.any():
        f, b = (int(x[0]) for x in np.nonzero(bad))
        raise BakeError(f"{label}: bone '{names[b]}' has a non-finite pose at frame {order[f]:g}")


class Evaluator:
    """Reads Blender's evaluated pose of one armature at given frames (bake time)."""

    def __init__(self, armature, names, bent, with_parent: bool):
        self.armature = armature
        self.names = list(names)
        self.nb = len(names)
        self.bent = list(bent)
        self.with_parent = with_parent
        self.flat = np.empty(self.nb * 16, np.float32)
        self.bbone_slices: Dict[str, slice] = {}
        self.bbone_rest: Dict[str, np.ndarray] = {}
        o = 0
        for bname in self.bent:
            segs = armature.data.bones[bname].bbone_segments
            self.bbone_slices[bname] = slice(o, o + segs + 1)
            o += segs + 1
        self.nseg = o
        # the meshes it deforms, read before the bake quiets their modifiers
        self.anchors = mesh_anchors(armature, self.names)

    def measure(self, lengths, size, index) -> "_adaptive.Measure":
        """What the adaptive bake measures: deform bones, the weighted B-Bones' segments and the
        meshes the armature deforms (``bake_mesh_anchors``)."""
        bones = self.armature.data.bones
        seg_bone = np.zeros(self.nseg, np.int64)
        seg_len = np.zeros(self.nseg)
        for bname, sl in self.bbone_slices.items():
            seg_bone[sl] = index[bname]
            seg_len[sl] = bones[bname].length / max(bones[bname].bbone_segments, 1)
        return _adaptive.Measure(lengths, size, seg_bone, seg_len, segment_sizes(self.anchors, seg_bone, size),
                                 self.anchors)

    def run(self, scene, frames, progress=None, total=0, out=None) -> dict:
        """{frame: (pose (B,4,4), world (4,4), parent world or None, segments (S,4,4))}."""
        import bpy

        out = {} if out is None else out
        for k, f in enumerate(frames):
            fi = math.floor(f)
            scene.frame_set(int(fi), subframe=float(f - fi))
            dg = bpy.context.evaluated_depsgraph_get()
            ob = self.armature.evaluated_get(dg)
            ob.pose.bones.foreach_get("matrix", self.flat)
            pose = self.flat.reshape(self.nb, 4, 4).transpose(0, 2, 1).astype(np.float64)
            world = np.array(ob.matrix_world, np.float64)
            pw = None
            if self.with_parent:
                pw = _parent_world(ob)
                pw = pw if pw is not None else np.eye(4)
            segs = np.empty((self.nseg, 4, 4))
            for bname in self.bent:
                pb = ob.pose.bones[bname]
                sl = self.bbone_slices[bname]
                n = sl.stop - sl.start
                if bname not in self.bbone_rest:
                    self.bbone_rest[bname] = np.array([np.array(pb.bbone_segment_matrix(a, rest=True), np.float64)
                                                       for a in range(n)])
                seg = pb.bbone_segment_matrix
                segs[sl] = np.array([seg(a, rest=False) for a in range(n)], np.float64)
            out[float(f)] = (pose, world, pw, segs)
            if progress is not None and total:
                progress(min(k + 1, total), total)
        return out
