"""The VRM Add-on's ``update_pose_bone_rotations`` step (handler.py H:519-692, summarised in
/work/notes/springs_rules.md sec. 2), vectorised over every chain of every character of a
``core.SpringRig`` with as few numpy calls per step as the algorithm allows.

A frame's world-only terms are computed once by ``prepare`` (armature matrices and inverses, the
first pair's ``before`` matrix and its decomposition, the stiffness + gravity force of the first
level, bone lengths, collider shapes, centre positions, the map from world space to the first
head's rest space); ``advance`` then runs the fixed steps of that frame, which all read the same
evaluation as the add-on's frame handler does: a step touches only the state (Verlet, length,
collisions) on the first level; the rotation of a pair is computed only where the next level
needs it, and for every pair after the frame's last step.

Rows (chains) are sorted by length at build, so the chains that have a pair at level k are the
first ``rig.level_rows[k]`` rows: a level is a slice, not a gather.
"""
from __future__ import annotations

import numpy as np

from ..finite import affine_inv
from .spring_rig import EPS, SpringRig, SpringState

DOWN = np.array([0.0, 0.0, -1.0])


class Frame:
    """World-only terms of one evaluation (see the module doc)."""
    __slots__ = ("W", "Winv", "Wr", "T0", "Q0", "S0", "head0", "F0", "E0", "e0", "L", "tail_now",
                 "ca", "ab", "inv_l2", "cn", "c_now", "dt")


def _sq(v):
    return np.einsum("...i,...i->...", v, v)


def _decompose(m3):
    """mathutils ``decompose`` of (n,3,3): (rotation with normalised columns, scale); a negative
    determinant negates the scale; a zero column stays zero in the rotation."""
    s = np.sqrt(np.einsum("nij,nij->nj", m3, m3))
    neg = np.linalg.det(m3) < 0
    if neg.any():
        s = np.where(neg[:, None], -s, s)
    return m3 / np.where(s != 0.0, s, 1.0)[:, None, :], s


def _level_terms(rig, k, T, Q, S, W, Winv, Wr, dt):
    """head_w, force, (E, e): the world -> head rest space map ``diag(1/S) Q^T (Winv p - T)``."""
    n = rig.level_rows[k]
    W3, Wt = W[..., :3, :3], W[..., :3, 3]
    head = np.einsum("nij,nj->ni", W3[:n] if W3.ndim == 3 else W3[None], T) + (Wt[:n] if Wt.ndim == 2 else Wt)
    d = (Wr[:n] if Wr.ndim == 3 else Wr) @ (Q @ rig.lv_start[k][..., None])
    d = d[..., 0]
    ln = np.sqrt(_sq(d))
    F = d * (rig.lv_stiff[k] * dt / np.where(ln > 0, ln, 1.0))[:, None] + rig.lv_grav[k] * dt
    QtS = np.swapaxes(Q, 1, 2) / np.where(S != 0.0, S, 1.0)[:, :, None]
    Wi3, Wit = Winv[..., :3, :3], Winv[..., :3, 3]
    E = QtS @ (Wi3[:n] if Wi3.ndim == 3 else Wi3)
    e = np.einsum("nij,nj->ni", QtS, (Wit[:n] if Wit.ndim == 2 else Wit) - T)
    return head, F, E, e


def prepare(rig: SpringRig, world: np.ndarray, dt: float) -> Frame:
    """The world-only terms of an evaluation ``world`` ((N,4,4) node world matrices)."""
    f = Frame()
    f.dt = dt
    if not rig.chain_count:
        return f
    Wu = world[rig.arm_unique]
    Wiu = affine_inv(Wu)
    Wru, _ = _decompose(Wu[:, :3, :3])
    if len(rig.arm_unique) == 1:          # one armature: broadcast, no gathers
        f.W, f.Winv, f.Wr = Wu[0], Wiu[0], Wru[0]
    else:
        a = rig.chain_arm
        f.W, f.Winv, f.Wr = Wu[a], Wiu[a], Wru[a]
    G = world[rig.gather]                                   # parents, heads, tails (level-major)
    P = G[rig.g_parent]
    before = (f.Winv @ P) @ rig.parent_rel                  # chains without a parent: W^-1 W Rh
    if rig.no_parent.any():
        before[rig.no_parent] = rig.parent_rel[rig.no_parent]
    f.T0 = before[:, :3, 3]
    f.Q0, f.S0 = _decompose(before[:, :3, :3])
    f.head0, f.F0, f.E0, f.e0 = _level_terms(rig, 0, f.T0, f.Q0, f.S0, f.W, f.Winv, f.Wr, dt)
    ht = G[rig.g_head_tail, :3, 3]                          # (2, pairs, 3)
    f.tail_now = ht[1]
    f.L = np.sqrt(_sq(ht[0] - ht[1]))[:, None]
    if rig.col_node.size:
        B = world[rig.col_node]
        B3, Bt = B[:, :3, :3], B[:, :3, 3]
        ca = np.einsum("nij,nj->ni", B3, rig.col_offset) + Bt
        f.ca = ca
        if rig.any_capsule:
            ab = np.einsum("nij,nj->ni", B3, rig.col_tail) + Bt - ca
            l2 = _sq(ab)
            cap = rig.col_capsule & (l2 >= 2.220446049250313e-16)     # a degenerate capsule is a sphere
            f.ab = np.where(cap[:, None], ab, 0.0)
            f.inv_l2 = np.where(cap, 1.0 / np.where(cap, l2, 1.0), 0.0)
        if rig.any_plane:
            f.cn = np.einsum("nij,nj->ni", _decompose(B3)[0], rig.col_normal)
    if rig.any_center:
        f.c_now = np.where(rig.has_center[:, None], world[rig.center_node][:, :3, 3], 0.0)
    return f


def _collide(rig, k, f, nxt, head, L):
    """Push-out and re-projection against the chains' colliders in the add-on's order (H:627-646):
    slot by slot (a later collider sees the position the earlier one pushed), every chain that has
    the slot at once."""
    for sp in rig.lv_slots[k]:
        rows, cols = sp.rows, sp.ids
        p = nxt[rows]
        c = f.ca[cols]
        if sp.capsule:
            ab = f.ab[cols]
            c = c + ab * np.clip(np.einsum("ij,ij->i", ab, p - c) * f.inv_l2[cols], 0.0, 1.0)[:, None]
        v = p - c
        if sp.inside:
            v = v * sp.sign[:, None]
        ln = np.sqrt(_sq(v))
        d = (ln if not sp.inside else ln * sp.sign) - sp.hr
        tiny = ln < EPS
        if sp.any_plane:
            cn = f.cn[cols]
            d = np.where(sp.plane, np.einsum("ij,ij->i", p - f.ca[cols], cn) - sp.hit, d)
            tiny &= ~sp.plane
        pen = (d < 0.0) | tiny
        if not pen.any():
            continue
        n = v / np.where(tiny, 1.0, ln)[:, None]
        if tiny.any():
            n = np.where(tiny[:, None], DOWN, n)
            d = np.where(tiny, -0.01, d)
        if sp.any_plane:
            n = np.where(sp.plane[:, None], cn, n)
        h = head[rows]
        moved = p - n * d[:, None] - h
        lm = np.sqrt(_sq(moved))[:, None]
        nxt[rows] = np.where(pen[:, None], h + moved * (L[rows] / np.where(lm > 0, lm, 1.0)), p)
    return nxt


def _rotation(rig, k, n, E, e, nxt):
    """Quaternion(start.cross(end), start.angle(end)) (wxyz) of rows [:n] at level k, with
    end = before^-1 Winv nxt; from the half-way vector: (|s||e| + s.e, s x e) normalised, one
    precomputed (4,3) matrix per pair gives (s.e, s x e); a zero axis gives the identity."""
    end = np.einsum("nij,nj->ni", E[:n], nxt[:n]) + e[:n]
    q = np.einsum("nij,nj->ni", rig.lv_dotcross[k][:n], end)
    cross2 = _sq(q[:, 1:])
    q[:, 0] += rig.lv_start_len[k][:n] * np.sqrt(_sq(end))
    ln = np.sqrt(cross2 + q[:, 0] * q[:, 0])
    ok = cross2 > 0.0
    q = q / np.where(ok, ln, 1.0)[:, None]
    if not ok.all():
        q[~ok] = (1.0, 0.0, 0.0, 0.0)
    return q, end


def _next_before(rig, k, n, T, Q, S, rot):
    """before of level k+1 for rows [:n]: T @ (Q @ rot) @ diag(S) @ Rh^-1 @ Rt (H:665-678)."""
    from .spring_rig import quat_to_mat3

    RS = (Q[:n] @ quat_to_mat3(rot[:n])) * S[:n, None, :]
    m3 = RS @ rig.lv_rel[k][:n, :3, :3]
    t = np.einsum("nij,nj->ni", RS, rig.lv_rel[k][:n, :3, 3]) + T[:n]
    Q1, S1 = _decompose(m3)
    return t, Q1, S1


def _no_inherit(rig, k, Q, rot):
    """A bone that does not inherit its parent's rotation gets Q_par @ rot (H:687-692)."""
    from .spring_rig import mat3_to_quat, quat_to_mat3

    n = rot.shape[0]
    full = mat3_to_quat(Q[:n] @ quat_to_mat3(rot))
    return np.where(rig.lv_inherit[k][:, None], rot, full)


def advance(rig: SpringRig, state: SpringState, f: Frame, steps: int):
    """``steps`` add-on steps of ``f.dt`` on the evaluation ``f``.  Returns the last step's basis
    rotations (P,4) wxyz in ``rig.out_nodes`` order, or None when ``steps`` is 0."""
    if steps <= 0:
        return None
    if not rig.chain_count:
        return np.zeros((0, 4))
    K = rig.depth
    out = [None] * K
    if not state.all_initialized:
        init = ~state.initialized_flat
        state.prev_flat[init] = f.tail_now[init]
        state.cur_flat[init] = f.tail_now[init]
        state.initialized_flat[:] = True
        state.all_initialized = True
    for s in range(steps):
        last = s == steps - 1
        dC = None
        if rig.any_center:
            dC = np.where(rig.use_center[:, None], f.c_now - state.prev_center, 0.0)
            state.prev_center[:] = f.c_now
        T, Q, S = f.T0, f.Q0, f.S0
        head, F, E, e = f.head0, f.F0, f.E0, f.e0
        for k in range(K):
            n = rig.level_rows[k]
            sl = rig.level_slice[k]
            if k:
                head, F, E, e = _level_terms(rig, k, T, Q, S, f.W, f.Winv, f.Wr, f.dt)
            cur = state.cur_flat[sl].astype(np.float64)
            prev = state.prev_flat[sl]
            if dC is not None:
                cur += dC[:n]
                prev = prev + dC[:n]
            nxt = cur + (cur - prev) * rig.lv_keep[k] + F
            L = f.L[sl]
            v = nxt - head
            lv = np.sqrt(_sq(v))[:, None]
            nxt = head + v * (L / np.where(lv > 0, lv, 1.0))
            if rig.lv_slots[k]:
                nxt = _collide(rig, k, f, nxt, head, L)
            state.prev_flat[sl] = cur
            state.cur_flat[sl] = nxt
            m = rig.level_rows[k + 1] if k + 1 < K else 0
            need = n if last else m
            if need:
                rot, _ = _rotation(rig, k, need, E, e, nxt)
                if last:
                    out[k] = rot if rig.lv_inherit_all[k] else _no_inherit(rig, k, Q, rot)
                if m:
                    T, Q, S = _next_before(rig, k, m, T, Q, S, rot)
    state.steps += steps
    flat = np.concatenate(out) if K > 1 else out[0]
    return flat[rig.out_order]


def step(rig: SpringRig, state: SpringState, world: np.ndarray, dt: float):
    """One add-on step on the evaluation ``world``: (P,4) rotations in ``rig.out_nodes`` order."""
    return advance(rig, state, prepare(rig, world, dt), 1)
