"""The VRM Add-on's ``update_pose_bone_rotations`` step (handler.py H:519-692, summarised in
/work/notes/springs_rules.md sec. 2), vectorised over every chain of every character of a
``core.SpringRig`` with as few numpy calls per step as the algorithm allows (numpy's per-call cost,
not the joints, bounds a small avatar: ``tools/bench_springs.py``).

Everything is done in world space from ``B``, the world matrix of a pair's head before its
rotation (the add-on's ``before``, put into world space: ``B = W @ before``; for the first pair
``parent world @ Rp^-1 @ Rh``, one batched product of gathered matrices):

- the head's world position is ``B``'s translation;
- ``before = Q diag(S)`` (mathutils ``decompose``), so with ``Y = N @ B3`` (``N = Winv3^T Winv3``)
  ``S^2 = diag(B3^T Y)`` and ``end = before^-1 Winv next = diag(1/S^2) Y^T (next - head)``;
- the stiffness direction ``Wr @ Q @ start = M @ B3 @ (start / S)`` (``M = Wr @ Winv3``), the sign of
  ``S`` that of ``det(before)`` (mathutils negates the scale of a mirrored matrix);
- the next pair's ``B' = B @ diag(1/S) R diag(S) @ Rh^-1 Rt``.

``M``, ``N`` and ``det(Winv3)`` depend on the armature's world matrix only: computed when it
changes (an armature turned and scaled uniformly, the usual case, needs neither).  A frame's
world-only terms are computed once by ``prepare``; ``advance`` runs the frame's 60 Hz steps on them
(all read the same evaluation, as the add-on's frame handler's steps do), computing a pair's
rotation only where the next level needs it and after the last step.  Rows (chains) are sorted by
length at build, so the chains that have a pair at level k are the first ``rig.level_rows[k]``
rows: a level is a slice, not a gather.  Collisions: one test of every (joint, collider) of a level
against the position before the push-out; the exact sequential push-out (``spring_collide``) runs
only when one penetrates.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..finite import affine_inv
from .spring_collide import collide, collide_spheres, quick_plan
from .spring_rig import TINY, SpringRig, SpringState, mat3_to_quat, quat_to_mat3
from .spring_rig import ein as _ein
from .trs import QUAT_PAIR_A, QUAT_PAIR_B, QUAT_PAIR_FORM

_LEVI_CIVITA = np.zeros(27)                   # det(m) = (m0 x m1 x m2 outer product) . Levi-Civita
for _i, _j, _k in ((0, 1, 2), (1, 2, 0), (2, 0, 1)):
    _LEVI_CIVITA[9 * _i + 3 * _j + _k], _LEVI_CIVITA[9 * _i + 3 * _k + _j] = 1.0, -1.0
del _i, _j, _k


def _det3(b3):
    """det of (n,3,3) (rows' triple product), 3 calls."""
    o = b3[:, 0, :, None] * b3[:, 1, None, :]
    return np.dot((o[:, :, :, None] * b3[:, 2, None, None, :]).reshape(-1, 27), _LEVI_CIVITA)


class Frame:
    """World-only terms of one evaluation (see the module doc)."""
    __slots__ = ("B3", "head0", "F0", "E0", "S0", "L", "tail_now", "ca", "ab", "inv_l2", "cn", "cq",
                 "c_now", "dt", "at")


class _Arm:
    """Terms of the armatures' world matrices: ``M`` (stiffness direction), ``N`` (rest-space
    metric), the sign of ``det(Winv3)``, per chain when several armatures; ``uniform`` when every
    armature is a rotation with a uniform positive scale (``M``, ``N`` multiples of I: skipped)."""
    __slots__ = ("key", "M", "N", "neg", "Winv3", "uniform")


class _Plan:
    """The rig's static per-step tables (built once per rig)."""

    def __init__(self, rig: SpringRig):
        C, P = rig.chain_count, rig.pair_count
        nc = rig.col_node.size
        parts = [rig.gather[:C], rig.gather[C:C + 2 * P], rig.col_node]
        self.gp, self.gh, self.gt = slice(0, C), slice(C, C + P), slice(C + P, C + 2 * P)
        o = C + 2 * P
        self.gc = slice(o, o + nc)
        o += nc
        if rig.any_center:
            parts.append(rig.center_node)
            self.gcen = slice(o, o + C)
            o += C
        self.garm = slice(o, o + len(rig.arm_unique))
        parts.append(rig.arm_unique)
        self.gather = np.concatenate(parts).astype(np.intp)
        self.one_arm = len(rig.arm_unique) == 1
        self.rel3 = [r[:, :3, :3].copy() for r in rig.lv_rel]
        self.relt = [r[:, :3, 3].copy() for r in rig.lv_rel]
        self.keep = [k.astype(np.float64) for k in rig.lv_keep]
        self.has_gravity = [bool(g.any()) for g in rig.lv_grav]
        self.identity_out = bool(np.array_equal(rig.out_order, np.arange(P)))
        self.use_center_f = rig.use_center[:, None].astype(np.float64)
        self.start = rig.lv_start
        self.quick = [quick_plan(slots) for slots in rig.lv_slots]
        q_ids = [q[1] for q in self.quick if q is not None]
        self.q_ids = np.concatenate(q_ids) if q_ids else None
        offs, o = [], 0
        for q in self.quick:
            offs.append(None if q is None else slice(o, o + len(q[1])))
            o += 0 if q is None else len(q[1])
        self.q_slice = offs
        self.dt = None
        self.kdt = self.gdt = None
        self.arm: Optional[_Arm] = None

    def for_dt(self, rig, dt):
        if self.dt != dt:
            self.kdt = [s * dt for s in rig.lv_stiff]
            self.gdt = [g * dt for g in rig.lv_grav]
            self.dt = dt


def _plan(rig) -> _Plan:
    p = rig.solver_plan
    if p is None:
        p = rig.solver_plan = _Plan(rig)
    return p


def _arm_terms(rig, p, Wu, key) -> _Arm:
    a = _Arm()
    a.key = key
    Winv = affine_inv(Wu)
    W3, Wi3 = Wu[:, :3, :3], Winv[:, :3, :3]
    s = np.sqrt(np.einsum("nij,nij->nj", W3, W3))
    Wr = W3 / np.where(s != 0.0, s, 1.0)[:, None, :]
    M = Wr @ Wi3
    N = np.swapaxes(Wi3, 1, 2) @ Wi3
    neg = np.linalg.det(Wi3) < 0
    eye = np.eye(3)
    a.uniform = bool(np.allclose(M, M[:, :1, :1] * eye, rtol=0, atol=1e-12 * np.abs(M).max(initial=1.0))
                     and np.allclose(N, N[:, :1, :1] * eye, rtol=0, atol=1e-12 * np.abs(N).max(initial=1.0))
                     and (M[:, 0, 0] > 0).all() and (N[:, 0, 0] > 0).all() and not neg.any())
    if p.one_arm:
        a.M, a.N, a.neg, a.Winv3 = M[0], N[0], bool(neg[0]), Wi3[0]
    else:
        c = rig.chain_arm
        a.M, a.N, a.neg, a.Winv3 = M[c], N[c], (neg[c] if neg.any() else False), Wi3[c]
    return a


def _rows(m, n):
    return m if m.ndim == 2 else m[:n]


def _terms(p, k, B3, head, at, n):
    """(F, E, S) of level ``k``'s ``n`` rows from their ``B3``: the stiffness + gravity force of a
    step, the map ``end = E^T @ (next - head)`` and the signed scale of ``before``."""
    if at.uniform:
        Y = B3
    else:
        Y = np.matmul(_rows(at.N, n), B3)
    S2 = _ein("nji,nji->ni", B3, Y)
    np.maximum(S2, TINY, out=S2)
    E = Y / S2[:, None, :]                     # transposed: end = E^T @ (next - head)
    S = np.sqrt(S2)
    det = _det3(B3)
    if at.neg is True:
        det = -det
    elif at.neg is not False:
        det = np.where(at.neg[:n], -det, det)
    np.copysign(S, det[:, None], out=S)        # mathutils: a mirrored before negates its scale
    st = p.start[k] / S
    if not at.uniform:
        B3 = np.matmul(_rows(at.M, n), B3)
    d = _ein("nij,nj->ni", B3, st)
    ln = np.sqrt(np.maximum(_ein("ni,ni->n", d, d), TINY))
    F = d * (p.kdt[k] / ln)[:, None]
    if p.has_gravity[k]:
        F += p.gdt[k]
    return F, E, S


def prepare(rig: SpringRig, world: np.ndarray, dt: float) -> Frame:
    """The world-only terms of an evaluation ``world`` ((N,4,4) node world matrices)."""
    f = Frame()
    f.dt = dt
    if not rig.chain_count:
        return f
    p = _plan(rig)
    p.for_dt(rig, dt)
    G = world.take(p.gather, axis=0)
    Wu = G[p.garm]
    key = Wu.tobytes()
    at = p.arm
    if at is None or at.key != key:
        at = p.arm = _arm_terms(rig, p, Wu, key)
    f.at = at
    B = np.matmul(G[p.gp], rig.parent_rel)                 # the first pairs' before, in world space
    f.B3 = B[:, :3, :3]
    f.head0 = B[:, :3, 3]
    f.F0, f.E0, f.S0 = _terms(p, 0, f.B3, f.head0, at, rig.chain_count)
    T = G[:, :3, 3]
    f.tail_now = T[p.gt]
    v = T[p.gh] - f.tail_now
    f.L = np.sqrt(_ein("ni,ni->n", v, v))
    if rig.col_node.size:
        Bc = G[p.gc]
        f.ca = _ein("nij,nj->ni", Bc[:, :3, :3], rig.col_offset) + Bc[:, :3, 3]
        if rig.any_capsule:
            ab = _ein("nij,nj->ni", Bc[:, :3, :3], rig.col_tail) + Bc[:, :3, 3] - f.ca
            l2 = _ein("ni,ni->n", ab, ab)
            cap = rig.col_capsule & (l2 >= 2.220446049250313e-16)     # a degenerate capsule is a sphere
            f.ab = np.where(cap[:, None], ab, 0.0)
            f.inv_l2 = np.where(cap, 1.0 / np.where(cap, l2, 1.0), 0.0)
        if rig.any_plane:
            b3 = Bc[:, :3, :3]
            s = np.sqrt(np.einsum("nij,nij->nj", b3, b3))
            f.cn = _ein("nij,nj->ni", b3 / np.where(s != 0.0, s, 1.0)[:, None, :], rig.col_normal)
        f.cq = f.ca.take(p.q_ids, axis=0) if p.q_ids is not None else None
    if rig.any_center:
        f.c_now = np.where(rig.has_center[:, None], T[p.gcen], 0.0)
    return f


def _rotation(rig, k, n, E, u):
    """Quaternion(start.cross(end), start.angle(end)) (wxyz) of rows [:n] at level k, with
    end = E @ u; from the half-way vector: (|s||e| + s.e, s x e) normalised, one precomputed (4,3)
    matrix per pair gives (s.e, s x e); a zero axis gives the identity.  ``E`` transposed."""
    end = _ein("nji,nj->ni", E[:n], u[:n])
    q = _ein("nij,nj->ni", rig.lv_dotcross[k][:n], end)
    q[:, 0] += rig.lv_start_len[k][:n] * np.sqrt(_ein("ni,ni->n", end, end))
    q2 = _ein("ni,ni->n", q, q)
    q /= np.sqrt(np.maximum(q2, TINY))[:, None]
    q[:, 0] += q2 == 0.0                 # start and end opposite (or end zero): the identity
    return q


def _next_level(p, k, m, B3, head, S, rot):
    """B3 and head of level k+1 for rows [:m]: B @ diag(1/S) R diag(S) @ Rh^-1 Rt (H:665-678)."""
    r = rot[:m]
    R = np.dot(r.take(QUAT_PAIR_A, axis=1) * r.take(QUAT_PAIR_B, axis=1), QUAT_PAIR_FORM).reshape(m, 3, 3)
    s = S[:m]
    R *= s[:, None, :]
    R /= s[:, :, None]
    BX = np.matmul(B3[:m], R)
    return np.matmul(BX, p.rel3[k][:m]), _ein("nij,nj->ni", BX, p.relt[k][:m]) + head[:m]


def _no_inherit(rig, k, f, B3, S, rot):
    """A bone that does not inherit its parent's rotation gets Q_par @ rot (H:687-692), Q_par the
    rotation of before = Winv3 @ B3 (columns divided by the signed scale)."""
    n = rot.shape[0]
    Q = np.matmul(_rows(f.at.Winv3, n), B3[:n]) / S[:n, None, :]
    full = mat3_to_quat(Q @ quat_to_mat3(rot))
    return np.where(rig.lv_inherit[k][:, None], rot, full)


def advance(rig: SpringRig, state: SpringState, f: Frame, steps: int):
    """``steps`` add-on steps of ``f.dt`` on the evaluation ``f``.  Returns the last step's basis
    rotations (P,4) wxyz in ``rig.out_nodes`` order, or None when ``steps`` is 0."""
    if steps <= 0:
        return None
    if not rig.chain_count:
        return np.zeros((0, 4))
    p = _plan(rig)
    K = rig.depth
    out: list = [None] * K
    if not state.all_initialized:
        init = ~state.initialized_flat
        state.prev_flat[init] = f.tail_now[init]
        state.cur_flat[init] = f.tail_now[init]
        state.initialized_flat[:] = True
        state.all_initialized = True
    cur_all, prev_all = state.cur_flat, state.prev_flat
    for s in range(steps):
        last = s == steps - 1
        dC = None
        if rig.any_center:
            dC = (f.c_now - state.prev_center) * p.use_center_f
            state.prev_center[:] = f.c_now
        B3, head, S, F, E = f.B3, f.head0, f.S0, f.F0, f.E0
        for k in range(K):
            n = rig.level_rows[k]
            sl = rig.level_slice[k]
            if k:
                F, E, S = _terms(p, k, B3, head, f.at, n)
            cur = cur_all[sl].astype(np.float64)
            prev = prev_all[sl]
            if dC is not None:
                cur += dC[:n]
                prev = prev + dC[:n]
            u = cur - prev                                   # Verlet with drag, stiffness, gravity
            u *= p.keep[k]
            u += cur
            u += F
            prev_all[sl] = cur
            u -= head                                        # length constraint (H:620-625)
            L = f.L[sl]
            u *= (L / np.sqrt(np.maximum(_ein("ni,ni->n", u, u), TINY)))[:, None]
            nxt = u + head
            if rig.lv_slots[k]:
                qs = p.q_slice[k]
                if qs is None:
                    collide(rig, k, f, nxt, head, L)
                    u = nxt - head
                elif collide_spheres(p.quick[k], rig, k, f, nxt, head, L, f.cq[qs]):
                    u = nxt - head
            cur_all[sl] = nxt
            m = rig.level_rows[k + 1] if k + 1 < K else 0
            need = n if last else m
            if need:
                rot = _rotation(rig, k, need, E, u)
                if last:
                    out[k] = rot if rig.lv_inherit_all[k] else _no_inherit(rig, k, f, B3, S, rot)
                if m:
                    B3, head = _next_level(p, k, m, B3, head, S, rot)
    state.steps += steps
    if K == 1:
        return out[0] if p.identity_out else out[0][rig.out_order]
    return np.concatenate(out)[rig.out_order]


def step(rig: SpringRig, state: SpringState, world: np.ndarray, dt: float):
    """One add-on step on the evaluation ``world``: (P,4) rotations in ``rig.out_nodes`` order."""
    return advance(rig, state, prepare(rig, world, dt), 1)
