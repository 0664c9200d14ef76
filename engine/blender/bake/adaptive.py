"""The adaptive part of a bake (issue 22 item 2).

The preview interpolates between baked samples per ``bake_interp`` (cubic Hermite per interval
by default, with tangents from the neighbouring samples; linear or held where that is closer to
Blender).  ``Refiner`` decides where that is not enough: per interval it estimates the error
half-way (the interpolated pose against cubic and quintic Lagrange interpolations of the
samples' points: a smooth motion's estimate is small, a kink's or a step's large; a half of a
measured interval: its error over ``CONVERGE``, if smaller), measures the
estimated-bad ones (and every ``AUDIT``-th interval regardless) against Blender's evaluation
half-way, and where the interpolation is off by more than ``TOLERANCE``: holds the interval's
first sample when that is within it and the interval ends at a source key (a stepped key: the
pose switches exactly there, as in Blender), switches it to linear when a lerp is within it
(motion keyed linearly per frame), else adds the half-way pose
as a sample, down to 1 / 2**MAX_DEPTH of a frame (IK snapping straight, stepped keys: there the
interval is held or lerped, whichever is closer, and what remains counts in the bake's error).
Adding a sample or changing a mode changes the neighbouring intervals' tangents: they are
estimated (or, when their half-way truth is known, measured) again.  At most ``BUDGET``
evaluations per sample of the plain bake (the worst first; what is left unmeasured counts in the
error with its estimate).

The error is measured on every deform bone's head, tail and a point off its axis (its roll) and
on every weighted B-Bone segment's head, tail and X axis (what deforms) in armature space,
relative to the rig's rest extent, and on every deformed mesh (issue 38 item 3): per mesh and
bone the corners of the box around the vertices the bone moves, relative to that mesh's size
(``Measure``): the measure tools/check_deform.py applies per object.  ``Bake.worst`` names what
the largest error is relative to; ``Refiner.unmeasured`` counts what the budget left to its
estimate (the panel and the log say so: ``cache.budget_line``).  numpy only (the caller evaluates
Blender; ``mesh_anchors`` reads the meshes).
"""
from __future__ import annotations

import numpy as np

from . import interp as _interp
from .tables import affine_inv, chain, compose, continuous, decompose, decompose_moving, levels

TOLERANCE = 5e-4     # of each deformed mesh's size (of the rig's for the bones), half the check's 1e-3
MAX_DEPTH = 6        # sub-frame samples down to 1/64 of a frame (a kink: IK reaching full stretch)
AUDIT = 8            # every AUDIT-th interval's mid-point is measured even where the estimate is low
BUDGET = 6.0         # at most this many mid-point evaluations per sample of the plain bake (bake time)
CONVERGE = 4.0       # a half of a measured interval is assumed within its error over this (smooth
#                      motion: ~16x per halving; an IK leg near full stretch, MaleCasual's Death at 37.5:
#                      1.7x): the halves of one off by more than twice TOLERANCE are measured
UNMEASURED = "a mesh's or the rig's size (an estimate: the budget left it unmeasured)"
FINEST = "a mesh's or the rig's size (held or lerped at the finest sub-frame)"
CHUNK = 16           # intervals interpolated at once (bounds the transient memory)


def locals_of(pose: np.ndarray, parents: np.ndarray) -> np.ndarray:
    """(...,B,4,4) parent-relative matrices of armature-space ``pose`` (roots unchanged)."""
    out = pose.copy()
    child = parents >= 0
    if child.any():
        out[..., child, :, :] = affine_inv(pose[..., parents[child], :, :]) @ pose[..., child, :, :]
    return out


def points(pose: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """(...,B',3,3) head, tail and a point off the axis (head + X axis * length: the bone's roll,
    which turns the skin around it and moves neither head nor tail) of every bone with a length
    (not NaN: the deform bones)."""
    use = np.flatnonzero(np.isfinite(lengths))
    sub = pose[..., use, :, :]
    head = sub[..., :3, 3]
    tail = head + sub[..., :3, 1] * lengths[use, None]
    side = head + sub[..., :3, 0] * lengths[use, None]
    return np.stack([head, tail, side], axis=-2)


class Measure:
    """Where a pose is measured, each point's error relative to a size (``weights``: one over it):

    * deform bones' heads, tails and roll (``points``; ``lengths``, NaN: not measured), relative
      to ``size`` (the rig's rest extent);
    * weighted B-Bone segments (``seg_bone`` (S,): the bone of each segment row, ``seg_len``
      (S,): its length), relative to ``seg_size`` (S,) (the smallest mesh the bone deforms, else
      ``size``);
    * ``anchors`` (``MeshAnchors``): per deformed mesh and bone, the corners of the box around
      the mesh's vertices that bone moves (in the bone's rest space), relative to that mesh's
      size.  Linear blend skinning moves a vertex by a convex mix of its bones' matrices, and an
      affine map's error is largest at a corner of a box, so the corners' error bounds every
      vertex's error relative to its mesh: what tools/check_deform.py measures."""

    def __init__(self, lengths: np.ndarray, size: float, seg_bone=None, seg_len=None, seg_size=None,
                 anchors=None):
        self.lengths = np.asarray(lengths, np.float64)
        self.size = float(size)
        self.seg_bone = np.zeros(0, np.int64) if seg_bone is None else np.asarray(seg_bone, np.int64)
        self.seg_len = np.zeros(0) if seg_len is None else np.asarray(seg_len, np.float64)
        self.seg_size = (np.full(self.seg_bone.size, self.size) if seg_size is None
                         else np.asarray(seg_size, np.float64))
        self.anchors = anchors if anchors is not None else MeshAnchors.empty()
        nb = 3 * int(np.isfinite(self.lengths).sum())
        self.weights = np.concatenate([np.full(nb, 1.0 / self.size), np.tile(1.0 / self.seg_size, 3),
                                       1.0 / self.anchors.size])

    def of(self, pose: np.ndarray, segs) -> np.ndarray:
        """(K,N,3) measured points of (K,B,4,4) armature-space poses and (K,S,4,4) segments."""
        k = pose.shape[0]
        pts = points(pose, self.lengths).reshape(k, -1, 3)
        if self.seg_bone.size and segs is not None and segs.shape[1]:
            arm = pose[:, self.seg_bone] @ segs
            head = arm[..., :3, 3]
            y = head + arm[..., :3, 1] * self.seg_len[:, None]
            x = head + arm[..., :3, 0] * self.seg_len[:, None]
            pts = np.concatenate([pts, head, y, x], axis=1)
        a = self.anchors
        if a.bone.size:
            m = pose[:, a.bone]
            corners = np.einsum("kaij,aj->kai", m[..., :3, :3], a.local) + m[..., :3, 3]
            pts = np.concatenate([pts, corners], axis=1)
        return pts

    def error(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """(K,) the largest distance between (K,N,3) point sets, each relative to its size."""
        if not a.shape[1]:
            return np.zeros(a.shape[0])
        d = np.linalg.norm(a - b, axis=-1)
        return (d * self.weights).max(axis=1)

    def what(self, a: np.ndarray, b: np.ndarray) -> str:
        """What the largest weighted distance between (N,3) point sets ``a`` and ``b`` is
        relative to: "the rig's size" or "the size of mesh 'NAME'"."""
        j = int((np.linalg.norm(a - b, axis=-1) * self.weights).argmax())
        nb = self.weights.size - 3 * self.seg_bone.size - self.anchors.bone.size
        if j >= self.weights.size - self.anchors.bone.size:
            return f"the size of mesh '{self.anchors.names[self.anchors.mesh[j - (self.weights.size - self.anchors.bone.size)]]}'"
        if j >= nb and self.seg_size[(j - nb) % max(self.seg_bone.size, 1)] != self.size:
            return "a deformed mesh's size (at a B-Bone segment)"
        return "the rig's size"

    def remapped(self, sub: np.ndarray, where: np.ndarray) -> "Measure":
        """This measure on the bones ``sub`` (``where``: each bone's row in ``sub``)."""
        a = self.anchors
        return Measure(self.lengths[sub], self.size, where[self.seg_bone], self.seg_len, self.seg_size,
                       MeshAnchors(where[a.bone], a.local, a.size, a.mesh, a.names))


class MeshAnchors:
    """Measured points of the deformed meshes: (A,) ``bone`` rows, (A,3) ``local`` (the bone's
    rest space), (A,) ``size`` (their mesh's size), (A,) ``mesh`` (index into ``names``)."""

    def __init__(self, bone, local, size, mesh, names):
        self.bone = np.asarray(bone, np.int64)
        self.local = np.asarray(local, np.float64).reshape(-1, 3)
        self.size = np.asarray(size, np.float64)
        self.mesh = np.asarray(mesh, np.int64)
        self.names = list(names)

    @classmethod
    def empty(cls) -> "MeshAnchors":
        return cls(np.zeros(0, np.int64), np.zeros((0, 3)), np.zeros(0), np.zeros(0, np.int64), [])


def _lagrange(times: np.ndarray, pts: np.ndarray, i: np.ndarray, order: int) -> np.ndarray:
    """(K,N,3) the Lagrange interpolation of ``order`` + 1 samples around interval ``i`` (K,)
    (shifted to stay in range) at each interval's middle."""
    f = times.size
    lo = np.clip(i - (order - 1) // 2, 0, f - order - 1)
    idx = lo[:, None] + np.arange(order + 1)[None]
    x = 0.5 * (times[i] + times[i + 1])
    tn = times[idx]                                       # (K,n)
    w = np.ones(idx.shape)
    for j in range(order + 1):                            # order + 1 nodes (a few)
        for m in range(order + 1):
            if m != j:
                w[:, j] *= (x - tn[:, m]) / (tn[:, j] - tn[:, m])
    return np.einsum("kn,kn...->k...", w, pts[idx])


class Refiner:
    """The adaptive bake's state: the samples (times ``T``, armature-space points ``P``, the
    locals' decomposition ``parts`` and the B-Bone segments' ``seg_parts``), the intervals'
    ``modes`` and the half-way truths measured so far."""

    def __init__(self, frames, poses, segs, parents, plan, measure: Measure, knots=None):
        self.T = np.asarray(frames, np.float64)
        self.knots = np.zeros(self.T.size, bool) if knots is None else np.asarray(knots, bool)
        self.parents = parents
        self.plan = plan
        self.measure = measure
        self.loc = locals_of(poses, parents)
        t, q, p = decompose_moving(self.loc)
        self.parts = [t, continuous(q), p]
        self.segs = segs
        if segs is not None and segs.shape[1]:
            st, sq, sp = decompose_moving(segs)
            self.seg_parts = [st, continuous(sq), sp]
        else:
            self.seg_parts = None
        self.P = measure.of(poses, segs)
        self._focus()
        self.modes = np.full(max(self.T.size - 1, 0), _interp.CUBIC, np.int8)
        self.truth = {}          # mid time -> (points (N,3), Blender's sample)
        self.added = 0
        self.checked = 0
        self.residual = 0.0
        self.worst = ""          # what ``residual`` is relative to ("the rig's size", "the size of mesh 'Body'")
        self.budget = 0          # the evaluations ``run`` was allowed
        self.unmeasured = 0      # mid-points left at their estimate once the budget was spent

    def _focus(self) -> None:
        """What the interpolated poses need: the measured bones and their ancestors (``sub``,
        their own hierarchy ``sub_plan`` and ``sub_measure``), of those the ones whose local
        changes over the samples (``mov``: only those are interpolated)."""
        m = self.measure
        need = np.isfinite(m.lengths)
        need[m.seg_bone] = True
        need[m.anchors.bone] = True
        up = np.flatnonzero(need)
        while up.size:                       # one step per bone level, all bones at once
            par = self.parents[up]
            par = np.unique(par[par >= 0])
            up = par[~need[par]]
            need[up] = True
        sub = np.flatnonzero(need)
        where = np.full(need.size, -1, np.int64)
        where[sub] = np.arange(sub.size)
        par = self.parents[sub]
        self.sub = sub
        self.sub_plan = levels(np.where(par >= 0, where[np.maximum(par, 0)], -1))
        self.sub_measure = m.remapped(sub, where)
        f = self.loc.shape[0]
        dev = np.abs(self.loc[:, sub] - self.loc[:1, sub]).reshape(f, sub.size, 16).max(axis=(0, 2))
        self.mov = np.flatnonzero(dev > 0.0)

    # -- the interpolation, as the preview does it -------------------------------------------
    def interpolated(self, k: np.ndarray, modes=None) -> np.ndarray:
        """(K,N,3) points half-way through intervals ``k`` as the preview interpolates them
        (the measured bones and their ancestors; the still ones as sampled)."""
        modes = self.modes if modes is None else modes
        tang = _interp.plan(self.T, modes, self.knots)
        # root bones play from the clip's LINEAR TRS tracks (baked_pose.baked_clip): lerp / slerp
        lin = np.full(modes.shape, _interp.LINEAR, np.int8)
        groups = []
        for sel, md, tg in ((self.parents[self.sub[self.mov]] >= 0, modes, tang),
                            (self.parents[self.sub[self.mov]] < 0, lin, None)):
            at = self.mov[sel]
            if at.size:
                groups.append((at, [x[:, self.sub[at]] for x in self.parts], md,
                               tg if tg is not None else _interp.plan(self.T, md, self.knots)))
        out = []
        for s in range(0, k.size, CHUNK):             # chunks of intervals (memory)
            kk = k[s:s + CHUNK]
            half = np.full(kk.size, 0.5)
            loc = np.broadcast_to(self.loc[0, self.sub], (kk.size, self.sub.size, 4, 4)).copy()
            for at, parts, md, tg in groups:
                loc[:, at] = compose(*_interp.evaluate(_interp.intervals(parts, self.T, md, tg, kk), half))
            pose = chain(loc, self.sub_plan)
            segs = None
            if self.seg_parts is not None:
                segs = compose(*_interp.evaluate(_interp.intervals(self.seg_parts, self.T, modes, tang, kk), half))
            out.append(self.sub_measure.of(pose, segs))
        return np.concatenate(out) if out else np.zeros((0,) + self.P.shape[1:])

    def estimate(self, k: np.ndarray, ours: np.ndarray) -> np.ndarray:
        """(K,) a guess of the error half-way through intervals ``k`` (no Blender)."""
        f = self.T.size
        if f < 4:
            return np.full(k.size, np.inf)
        c3 = _lagrange(self.T, self.P, k, 3)
        e = self.measure.error(ours, c3)
        if f >= 6:
            e = np.maximum(e, self.measure.error(c3, _lagrange(self.T, self.P, k, 5)))
        return e

    # -- the loop -------------------------------------------------------------------------
    def run(self, evaluate, budget: int) -> None:
        """Refine until every interval is within TOLERANCE (measured or estimated) or the
        budget of evaluations is spent.  ``evaluate(frames) -> {frame: sample}``, a sample
        ``(pose (B,4,4), ..., segments (S,4,4))``."""
        self.budget = int(budget)
        if self.T.size < 2:
            return
        dirty = np.arange(self.T.size - 1)
        first = True
        tiny = 1.0 / 2 ** MAX_DEPTH + 1e-9
        settled = set()          # half-way times of intervals left held / linear at the finest width
        bound = {}               # half-way time -> error expected from the measured parent interval
        rounds = 0
        while dirty.size and rounds < 4 * (MAX_DEPTH + 4):
            rounds += 1
            ours = self.interpolated(dirty)
            mids = 0.5 * (self.T[dirty] + self.T[dirty + 1])
            known = np.array([m in self.truth for m in mids.tolist()], bool)
            est = np.zeros(dirty.size)
            if (~known).any():
                est[~known] = self.estimate(dirty[~known], ours[~known])
                # a half of a measured interval: its error shrinks at least CONVERGE times
                est[~known] = np.minimum(est[~known], [bound.get(m, np.inf) for m in mids[~known].tolist()])
            want = ~known & (est > 0.5 * TOLERANCE)
            if first:
                want |= ~known & (dirty % AUDIT == AUDIT // 2)
            pick = np.flatnonzero(want)
            room = max(budget - self.checked, 0)
            if pick.size > room:                      # the worst first, the rest estimated
                order = pick[np.argsort(-est[pick], kind="stable")]
                left = order[room:]
                if est[left].max() > self.residual:
                    self.residual, self.worst = float(est[left].max()), UNMEASURED
                self.unmeasured += int(left.size)
                pick = order[:room]
            if pick.size:
                got = evaluate(mids[pick].tolist())
                self.checked += pick.size
                tp = self.measure.of(np.stack([got[float(m)][0] for m in mids[pick]]),
                                     np.stack([got[float(m)][3] for m in mids[pick]]) if self.seg_parts else None)
                for j, m in enumerate(mids[pick].tolist()):
                    self.truth[m] = (tp[j], got[float(m)])
                known[pick] = True
            first = False
            kn = np.flatnonzero(known)
            if not kn.size:
                break
            tru = np.stack([self.truth[m][0] for m in mids[kn].tolist()])
            err = self.measure.error(ours[kn], tru)
            bad = (err > TOLERANCE) & ~np.array([m in settled for m in mids[kn].tolist()], bool)
            if not bad.any():
                break
            fail = dirty[kn[bad]]
            ftru = tru[bad]
            lin = self.modes.copy()
            lin[fail] = _interp.LINEAR
            e_lin = self.measure.error(self.interpolated(fail, lin), ftru)
            hold = self.modes.copy()
            hold[fail] = _interp.HOLD
            e_hold = self.measure.error(self.interpolated(fail, hold), ftru)
            width = self.T[fail + 1] - self.T[fail]
            # held: a stepped key switches exactly at the next key (a knot), as Blender does
            to_hold = (e_hold <= TOLERANCE) & (e_hold <= e_lin) & self.knots[fail + 1]
            to_lin = ~to_hold & (e_lin <= TOLERANCE)
            split = ~to_lin & ~to_hold & (width > 2 * tiny)
            rest = ~to_lin & ~to_hold & ~split
            self.modes[fail[to_hold]] = _interp.HOLD
            self.modes[fail[to_lin]] = _interp.LINEAR
            self.modes[fail[rest]] = np.where(e_hold[rest] < e_lin[rest], _interp.HOLD, _interp.LINEAR)
            if rest.any():
                e = float(np.minimum(e_hold[rest], e_lin[rest]).max())
                if e > self.residual:
                    self.residual, self.worst = e, FINEST
            settled.update(mids[kn[bad]][rest].tolist())
            touched = fail[to_lin | to_hold]
            cut = fail[split]
            new = 0.5 * (self.T[cut] + self.T[cut + 1])
            for a, m, b, e in zip(self.T[cut].tolist(), new.tolist(), self.T[cut + 1].tolist(), err[bad][split].tolist()):
                bound[0.5 * (a + m)] = bound[0.5 * (m + b)] = e / CONVERGE
            touched = touched + np.searchsorted(cut, touched)       # indices after the insertion
            if new.size:
                self._insert(cut, new)
            # intervals whose tangents changed: within two of a change
            at = np.concatenate([touched, np.searchsorted(self.T, new)])
            near = (at[:, None] + np.arange(-2, 3)[None]).ravel()
            dirty = np.unique(near[(near >= 0) & (near < self.T.size - 1)])
        # what the final interpolation leaves at every measured half-way point
        if self.truth and self.T.size > 1:
            k = np.arange(self.T.size - 1)
            mids = 0.5 * (self.T[:-1] + self.T[1:])
            known = np.array([m in self.truth for m in mids.tolist()], bool)
            if known.any():
                tru = np.stack([self.truth[m][0] for m in mids[known].tolist()])
                ours = self.interpolated(k[known])
                err = self.measure.error(ours, tru)
                if float(err.max()) >= self.residual:
                    self.residual = float(err.max())
                    self.worst = self.sub_measure.what(ours[int(err.argmax())], tru[int(err.argmax())])

    def _insert(self, after: np.ndarray, new: np.ndarray) -> None:
        """Add the measured half-way samples ``new`` (times) of intervals ``after``."""
        samples = [self.truth[float(m)][1] for m in new.tolist()]
        pose = np.stack([s[0] for s in samples])
        loc = locals_of(pose, self.parents)
        at = after + 1
        self.loc = np.insert(self.loc, at, loc, axis=0)
        for j, x in enumerate(decompose(loc)):
            self.parts[j] = np.insert(self.parts[j], at, x, axis=0)
        self.parts[1] = continuous(self.parts[1])
        if self.seg_parts is not None:
            segs = np.stack([s[3] for s in samples])
            self.segs = np.insert(self.segs, at, segs, axis=0)
            for j, x in enumerate(decompose(segs)):
                self.seg_parts[j] = np.insert(self.seg_parts[j], at, x, axis=0)
            self.seg_parts[1] = continuous(self.seg_parts[1])
        self.P = np.insert(self.P, at, np.stack([self.truth[float(m)][0] for m in new.tolist()]), axis=0)
        self._focus()
        # the split interval's mode goes to both halves
        self.modes = np.insert(self.modes, after, self.modes[after])
        self.T = np.insert(self.T, at, new)
        self.knots = np.insert(self.knots, at, False)
        self.added += new.size


def rig_extent(armature) -> tuple:
    """(lengths (B,) in pose.bones order, size): bone lengths and the rest extent of the rig."""
    bones = armature.data.bones
    n = len(bones)
    head = np.empty(n * 3, np.float32)
    tail = np.empty(n * 3, np.float32)
    bones.foreach_get("head_local", head)
    bones.foreach_get("tail_local", tail)
    # only deform bones move the meshes (controls and mechanism bones need no sub-frame sample
    # of their own): the others get no points (NaN, ignored); all when none deforms
    deform = {b.name for b in bones if b.use_deform} or {b.name for b in bones}
    sel = np.array([b.name in deform for b in bones], bool)
    pts = np.concatenate([head.reshape(n, 3)[sel], tail.reshape(n, 3)[sel]]).astype(np.float64)
    size = float(np.linalg.norm(pts.max(0) - pts.min(0))) if pts.size else 1.0
    by_name = {b.name: float(b.length) for b in bones}
    lengths = np.array([by_name.get(pb.name, 0.0) if pb.name in deform else np.nan
                        for pb in armature.pose.bones], np.float64)
    return lengths, max(size, 1e-6)
