"""The adaptive part of a bake (issue 22 item 2): where the interpolation between two samples
(``bake_tables``: translation lerp, rotation slerp, stretch lerp of each bone's parent-relative
matrix) is not within ``TOLERANCE`` of Blender's evaluation half-way, a sub-frame sample is
added, down to 1 / 2**MAX_DEPTH of a frame (IK flips and stepped keys: the jump lands where
Blender has it, within that), at most BUDGET mid-point evaluations per sample (the worst first;
what is left unrefined counts in the error the bake reports).  Which mid-points are checked against Blender: those where a cubic
through the neighbouring samples disagrees with the interpolation (``estimate``), and every
``AUDIT``-th interval regardless.  The error is measured on every bone's head and tail in
armature space, relative to the rig's rest extent.  numpy only (the caller evaluates Blender).
"""
from __future__ import annotations

import numpy as np

from .bake_tables import affine_inv, chain, compose, decompose, slerp

TOLERANCE = 5e-4     # of the rig's size, half the preview's 1e-3 (skinning blends several bones)
MAX_DEPTH = 6        # sub-frame samples down to 1/64 of a frame (a kink: IK reaching full stretch)
AUDIT = 8            # every AUDIT-th interval's mid-point is measured even where the estimate is low
BUDGET = 16.0        # at most this many mid-point evaluations per sample of the plain bake (bake time)


def locals_of(pose: np.ndarray, parents: np.ndarray) -> np.ndarray:
    """(...,B,4,4) parent-relative matrices of armature-space ``pose`` (roots unchanged)."""
    out = pose.copy()
    child = parents >= 0
    if child.any():
        out[..., child, :, :] = affine_inv(pose[..., parents[child], :, :]) @ pose[..., child, :, :]
    return out


def midpoints(pose_a: np.ndarray, pose_b: np.ndarray, parents: np.ndarray, plan) -> np.ndarray:
    """(k,B,4,4) armature-space poses half-way between ``pose_a`` and ``pose_b`` (k,B,4,4) as the
    preview interpolates them (each bone's parent-relative matrix decomposed, then chained)."""
    ta, qa, pa = decompose(locals_of(pose_a, parents))
    tb, qb, pb = decompose(locals_of(pose_b, parents))
    loc = compose(0.5 * (ta + tb), slerp(qa, qb, 0.5), 0.5 * (pa + pb))
    return chain(loc, plan)


def sequence_midpoints(parts, plan) -> np.ndarray:
    """(F-1,B,4,4) the half-way poses of every interval of a sample sequence, from its locals'
    decomposition ``parts`` = (t, q, p) (F,B,...), decomposed once for the whole sequence."""
    t, q, p = parts
    loc = compose(0.5 * (t[:-1] + t[1:]), slerp(q[:-1], q[1:], 0.5), 0.5 * (p[:-1] + p[1:]))
    return chain(loc, plan)


def points(pose: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """(...,B',2,3) head and tail of every bone with a length (not NaN: the deform bones)."""
    use = np.flatnonzero(np.isfinite(lengths))
    sub = pose[..., use, :, :]
    head = sub[..., :3, 3]
    tail = head + sub[..., :3, 1] * lengths[use, None]
    return np.stack([head, tail], axis=-2)


def error(pose: np.ndarray, truth: np.ndarray, lengths: np.ndarray, size: float) -> np.ndarray:
    """(k,) the largest head/tail distance per pose, relative to ``size``."""
    d = np.linalg.norm(points(pose, lengths) - points(truth, lengths), axis=-1)
    return d.reshape(d.shape[0], -1).max(axis=1) / size if d.size else np.zeros(pose.shape[0])


def estimate(pose: np.ndarray, mids: np.ndarray, lengths: np.ndarray, size: float) -> np.ndarray:
    """(F-1,) how far each interval's interpolated mid-point (``mids``) lies from a cubic
    (Catmull-Rom) through the neighbouring samples' heads and tails: a guess of its error."""
    p = points(pose, lengths)
    pad = np.concatenate([p[:1], p, p[-1:]])
    cubic = (-pad[:-3] + 9.0 * pad[1:-2] + 9.0 * pad[2:-1] - pad[3:]) / 16.0
    d = np.linalg.norm(cubic - points(mids, lengths), axis=-1)
    return d.reshape(d.shape[0], -1).max(axis=1) / size if d.size else np.zeros(0)


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
