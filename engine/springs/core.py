"""VRM 1.0 spring bones, bpy-free: the VRM Add-on's ``update_pose_bone_rotations`` vectorised.

Reference: io_scene_vrm/editor/spring_bone1/handler.py (add-on 4.5.0), summarised in
/work/notes/springs_rules.md.  One ``SpringRig`` holds every sub-chain of every spring of every
character (rows = chains, columns = joint pairs along the chain); ``step`` advances all of them by
one time step with a loop over chain depth only (pairs of a chain are sequential in the add-on:
each uses the previous pair's new head matrix) and over collider slots (push-out then re-projection
is sequential per collider).  State (tail positions, centre positions) lives in ``SpringState``,
owned by whoever owns the rig (a session's preview); it is float32 like the add-on's properties.

Inputs per step: the world matrices of all scene nodes (the pose BEFORE this step's rotations, as
the add-on reads the last evaluated ``pose_bone.matrix``).  Output: per pair the head bone's basis
rotation (wxyz), to be written as the bone's rotation (``pose_rotations``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Sequence

import numpy as np

from ..finite import affine_inv

EPS = np.finfo(np.float64).eps          # sys.float_info.epsilon, as the add-on's collision code
SPHERE, CAPSULE, INSIDE_SPHERE, INSIDE_CAPSULE, PLANE = 0, 1, 2, 3, 4


@dataclass
class JointSpec:
    node: int                     # scene node of the joint's bone (-1: bone missing)
    stiffness: float = 1.0
    drag_force: float = 0.5
    gravity_power: float = 0.0
    gravity_dir: tuple = (0.0, 0.0, -1.0)
    hit_radius: float = 0.0


@dataclass
class SpringSpec:
    name: str
    joints: List[JointSpec]
    colliders: List[int] = field(default_factory=list)   # collider indices, group order, repeats kept
    center_node: int = -1


@dataclass
class ColliderSpec:
    node: int                     # bone node the collider follows
    kind: int = SPHERE
    offset: tuple = (0.0, 0.0, 0.0)   # in the bone's pose space
    tail: tuple = (0.0, 0.0, 0.0)
    radius: float = 0.0
    normal: tuple = (0.0, 1.0, 0.0)   # plane normal in the bone's pose space


@dataclass
class CharacterSpec:
    """One armature: its node, the bone nodes' parents/rest (object space) and its springs."""
    armature_node: int
    springs: List[SpringSpec]
    colliders: List[ColliderSpec]
    rest: dict                     # bone node -> (4,4) bone.matrix_local (armature space)
    parent: dict                   # bone node -> parent bone node (-1 root bone)
    inherit_rotation: dict = field(default_factory=dict)   # bone node -> bool


def _is_descendant(node: int, ancestor: int, parent: dict) -> bool:
    p = parent.get(node, -1)
    while p != -1:
        if p == ancestor:
            return True
        p = parent.get(p, -1)
    return False


def sort_joints(joints: Sequence[JointSpec], parent: dict) -> List[List[JointSpec]]:
    """The add-on's ``sort_spring_bone_joints`` (H:751-854) on node indices."""
    fast = []
    for j in joints:
        if j.node < 0:
            break
        if fast and not _is_descendant(j.node, fast[-1].node, parent):
            break
        fast.append(j)
    else:
        return [list(joints)]
    chains: List[List[JointSpec]] = []
    for j in joints:
        if j.node < 0:
            continue
        if not chains:
            chains.append([j])
            continue
        if any(j.node == c.node for ch in chains for c in ch):
            continue
        assigned = False
        for ch in chains:
            if _is_descendant(ch[0].node, j.node, parent):          # ancestor of the head
                ch.insert(0, j)
                assigned = True
                break
            if _is_descendant(j.node, ch[-1].node, parent):         # descendant of the tail
                ch.append(j)
                assigned = True
                break
            for i in range(len(ch) - 1):
                p = parent.get(ch[i + 1].node, -1)
                while p != -1:
                    if p == j.node:
                        ch.insert(i + 1, j)
                        assigned = True
                        break
                    if p == ch[i].node:
                        break
                    p = parent.get(p, -1)
                if assigned:
                    break
            if assigned:
                break
        if not assigned:
            chains.append([j])
    return chains


class SpringRig:
    """Padded (chain, pair) tables for all characters."""

    def __init__(self, characters: Sequence[CharacterSpec], joint_order: str = "addon"):
        rows = []        # (char, spring index, [(head JointSpec, tail JointSpec)], center, colliders)
        col_rows = []
        col_base = 0
        for ci, ch in enumerate(characters):
            for si, sp in enumerate(ch.springs):
                # "listed": the joints as listed, unsorted (a negative control of the checks)
                chains = sort_joints(sp.joints, ch.parent) if joint_order == "addon" else \
                    [[j for j in sp.joints if j.node >= 0]]
                for chain in chains:
                    pairs = []
                    for h, t in zip(chain, chain[1:]):
                        if not _is_descendant(t.node, h.node, ch.parent):
                            break
                        pairs.append((h, t))
                    if not pairs:
                        continue
                    center = sp.center_node
                    use_c = center >= 0 and (center == chain[0].node or
                                             _is_descendant(chain[0].node, center, ch.parent))
                    rows.append((ci, len(rows), pairs, center, use_c,
                                 [c + col_base for c in sp.colliders if 0 <= c < len(ch.colliders)]))
            for c in ch.colliders:
                col_rows.append((ci, c))
            col_base += len(ch.colliders)
        C = len(rows)
        K = max((len(r[2]) for r in rows), default=0)
        M = max((len(r[5]) for r in rows), default=0)
        self.chain_count, self.depth, self.collider_slots = C, K, M
        self.joint_count = sum(len(r[2]) + 1 for r in rows)
        self.valid = np.zeros((C, K), bool)
        self.head = np.zeros((C, K), np.int64)
        self.tail = np.zeros((C, K), np.int64)
        eye = np.eye(4)
        self.rest_h = np.tile(eye, (C, K, 1, 1))
        self.rel = np.tile(eye, (C, K, 1, 1))          # Rh^-1 @ Rt
        self.start = np.zeros((C, K, 3))
        self.stiff = np.zeros((C, K))
        self.drag = np.zeros((C, K))
        self.gpow = np.zeros((C, K))
        self.gdir = np.zeros((C, K, 3))
        self.hit = np.zeros((C, K))
        self.inherit = np.ones((C, K), bool)
        self.parent_node = np.full(C, -1, np.int64)
        self.parent_rel = np.tile(eye, (C, 1, 1))      # Rp^-1 @ Rh of the first head (or Rh)
        self.arm_node = np.zeros(C, np.int64)
        self.center_node = np.zeros(C, np.int64)
        self.has_center = np.zeros(C, bool)
        self.use_center = np.zeros(C, bool)
        self.col_idx = np.full((C, M), -1, np.int64)
        for r, (ci, _, pairs, center, use_c, cols) in enumerate(rows):
            ch = characters[ci]
            self.arm_node[r] = ch.armature_node
            self.has_center[r] = center >= 0
            self.center_node[r] = max(center, 0)
            self.use_center[r] = use_c
            self.col_idx[r, :len(cols)] = cols
            h0 = pairs[0][0].node
            p = ch.parent.get(h0, -1)
            rh0 = np.asarray(ch.rest[h0], np.float64)
            if p >= 0:
                self.parent_node[r] = p
                self.parent_rel[r] = np.linalg.inv(np.asarray(ch.rest[p], np.float64)) @ rh0
            else:
                self.parent_rel[r] = rh0
            for k, (h, t) in enumerate(pairs):
                rh = np.asarray(ch.rest[h.node], np.float64)
                rt = np.asarray(ch.rest[t.node], np.float64)
                self.valid[r, k] = True
                self.head[r, k], self.tail[r, k] = h.node, t.node
                self.rest_h[r, k] = rh
                self.rel[r, k] = np.linalg.inv(rh) @ rt
                self.start[r, k] = (np.linalg.inv(rh) @ rt[:, 3])[:3]
                self.stiff[r, k] = np.float32(h.stiffness)
                self.drag[r, k] = np.float32(h.drag_force)
                self.gpow[r, k] = np.float32(h.gravity_power)
                self.gdir[r, k] = np.asarray(h.gravity_dir, np.float32)
                self.hit[r, k] = np.float32(h.hit_radius)
                self.inherit[r, k] = bool(ch.inherit_rotation.get(h.node, True))
        n = len(col_rows)
        self.col_node = np.array([c.node for _, c in col_rows], np.int64).reshape(n)
        self.col_arm = np.array([characters[ci].armature_node for ci, _ in col_rows], np.int64).reshape(n)
        self.col_kind = np.array([c.kind for _, c in col_rows], np.int64).reshape(n)
        self.col_offset = np.array([c.offset for _, c in col_rows], np.float64).reshape(n, 3)
        self.col_tail = np.array([c.tail for _, c in col_rows], np.float64).reshape(n, 3)
        self.col_radius = np.array([c.radius for _, c in col_rows], np.float64).reshape(n)
        self.col_normal = np.array([c.normal for _, c in col_rows], np.float64).reshape(n, 3)
        self.spring_bone_nodes = np.unique(self.head[self.valid])

    def new_state(self) -> "SpringState":
        return SpringState(self)


class SpringState:
    """Per tail joint: initialized / previous / current world position (float32, as the add-on's
    properties); per chain: the previous centre position (the add-on starts from (0,0,0))."""

    def __init__(self, rig: SpringRig):
        C, K = rig.valid.shape
        self.initialized = np.zeros((C, K), bool)
        self.prev = np.zeros((C, K, 3), np.float32)
        self.cur = np.zeros((C, K, 3), np.float32)
        self.prev_center = np.zeros((C, 3), np.float32)
        self.steps = 0

    def reset(self) -> None:
        self.initialized[:] = False
        self.prev[:] = 0.0
        self.cur[:] = 0.0
        self.prev_center[:] = 0.0
        self.steps = 0


def _len(v: np.ndarray) -> np.ndarray:
    """Row lengths (np.linalg.norm(axis=-1) without its dispatch cost)."""
    return np.sqrt(np.einsum("...i,...i->...", v, v))


def _norm(v: np.ndarray) -> np.ndarray:
    """mathutils ``normalized()``: a zero vector stays zero."""
    n = _len(v)[..., None]
    return np.divide(v, n, out=np.zeros_like(v), where=n > 0)


def _rot3(m: np.ndarray):
    """decompose(): (translation, rotation 3x3, scale) of (...,4,4) affine matrices."""
    m3 = m[..., :3, :3]
    s = np.sqrt(np.einsum("...ij,...ij->...j", m3, m3))
    neg = np.linalg.det(m3) < 0
    s = np.where(neg[..., None], -s, s) if neg.any() else s
    safe = np.where(np.abs(s) > 0, s, 1.0)
    return m[..., :3, 3], m3 / safe[..., None, :], s


def _quat_axis_angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Quaternion(a.cross(b), a.angle(b, 0)) as wxyz (zero axis -> identity)."""
    axis = np.cross(a, b)
    ln = _len(axis)
    la, lb = _len(a), _len(b)
    den = la * lb
    cos = np.divide(np.einsum("...i,...i->...", a, b), den, out=np.ones_like(den), where=den > 0)
    ang = np.where(den > 0, np.arccos(np.clip(cos, -1.0, 1.0)), 0.0)
    ok = ln > 0
    axis = np.divide(axis, ln[..., None], out=np.zeros_like(axis), where=ok[..., None])
    half = np.where(ok, ang * 0.5, 0.0)
    q = np.empty(a.shape[:-1] + (4,))
    q[..., 0] = np.cos(half)
    q[..., 1:] = axis * np.sin(half)[..., None]
    return q


def quat_to_mat3(q: np.ndarray) -> np.ndarray:
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    m = np.empty(q.shape[:-1] + (3, 3))
    m[..., 0, 0] = 1 - 2 * (y * y + z * z)
    m[..., 0, 1] = 2 * (x * y - w * z)
    m[..., 0, 2] = 2 * (x * z + w * y)
    m[..., 1, 0] = 2 * (x * y + w * z)
    m[..., 1, 1] = 1 - 2 * (x * x + z * z)
    m[..., 1, 2] = 2 * (y * z - w * x)
    m[..., 2, 0] = 2 * (x * z - w * y)
    m[..., 2, 1] = 2 * (y * z + w * x)
    m[..., 2, 2] = 1 - 2 * (x * x + y * y)
    return m


def mat3_to_quat(m: np.ndarray) -> np.ndarray:
    """wxyz of rotation matrices (vectorised, branch by the largest diagonal term)."""
    t = np.trace(m, axis1=-2, axis2=-1)
    q = np.empty(m.shape[:-2] + (4,))
    c0 = t > 0
    s = np.sqrt(np.maximum(t + 1.0, 1e-300)) * 2
    q[..., 0] = np.where(c0, 0.25 * s, 0)
    q[..., 1] = np.where(c0, (m[..., 2, 1] - m[..., 1, 2]) / s, 0)
    q[..., 2] = np.where(c0, (m[..., 0, 2] - m[..., 2, 0]) / s, 0)
    q[..., 3] = np.where(c0, (m[..., 1, 0] - m[..., 0, 1]) / s, 0)
    for i, (a, b, c) in enumerate(((0, 1, 2), (1, 2, 0), (2, 0, 1))):
        sel = ~c0 & (m[..., a, a] >= m[..., b, b]) & (m[..., a, a] >= m[..., c, c])
        if i:
            sel &= ~done
        done = sel if i == 0 else (done | sel)
        if not sel.any():
            continue
        ss = np.sqrt(np.maximum(1.0 + m[..., a, a] - m[..., b, b] - m[..., c, c], 1e-300)) * 2
        v = np.empty(q.shape)
        v[..., 0] = (m[..., c, b] - m[..., b, c]) / ss
        v[..., 1 + a] = 0.25 * ss
        v[..., 1 + b] = (m[..., b, a] + m[..., a, b]) / ss
        v[..., 1 + c] = (m[..., c, a] + m[..., a, c]) / ss
        q = np.where(sel[..., None], v, q)
    return q


def _collide(p, hit, kind, a, b, r, nrm):
    """(direction, distance) of H:46-165 for points p (n,3) against colliders (n,...)."""
    ab = b - a
    l2 = np.einsum("ij,ij->i", ab, ab)
    s = np.clip(np.divide(np.einsum("ij,ij->i", ab, p - a), l2, out=np.zeros_like(l2), where=l2 > 0), 0, 1)
    capsule = (kind == CAPSULE) | (kind == INSIDE_CAPSULE)
    c = np.where(capsule[:, None], a + ab * s[:, None], a)
    inside = (kind == INSIDE_SPHERE) | (kind == INSIDE_CAPSULE)
    v = np.where(inside[:, None], c - p, p - c)
    ln = _len(v)
    tiny = ln < EPS
    n = np.divide(v, ln[:, None], out=np.zeros_like(v), where=~tiny[:, None])
    d = np.where(inside, -ln - hit + r, ln - hit - r)
    n = np.where(tiny[:, None], np.array([0.0, 0.0, -1.0]), n)
    d = np.where(tiny, -0.01, d)
    plane = kind == PLANE
    if plane.any():
        n = np.where(plane[:, None], nrm, n)
        d = np.where(plane, np.einsum("ij,ij->i", p - a, nrm) - hit, d)
    return n, d


def step(rig: SpringRig, state: SpringState, world: np.ndarray, dt: float) -> np.ndarray:
    """One add-on step for every chain. ``world``: (N,4,4) node world matrices (armature objects
    and bones).  Returns (C,K,4) basis rotations (wxyz) of the head bones (invalid pairs identity)."""
    C, K = rig.valid.shape
    out = np.zeros((C, K, 4))
    out[..., 0] = 1.0
    if C == 0:
        return out
    W = world[rig.arm_node]                                     # (C,4,4)
    Winv = affine_inv(W)                 # an armature scaled to 0 must not raise
    _, Wr, _ = _rot3(W)
    # colliders in world space (B = W @ pose_bone.matrix = the bone node's world matrix)
    if rig.col_node.size:
        B = world[rig.col_node]
        ca = (B[:, :3, :3] @ rig.col_offset[..., None])[..., 0] + B[:, :3, 3]
        cb = (B[:, :3, :3] @ rig.col_tail[..., None])[..., 0] + B[:, :3, 3]
        _, Br, _ = _rot3(B)
        cn = (Br @ rig.col_normal[..., None])[..., 0]
        deg = (rig.col_kind == CAPSULE) | (rig.col_kind == INSIDE_CAPSULE)
        deg &= np.einsum("ij,ij->i", cb - ca, cb - ca) < 2.220446049250313e-16
        ckind = np.where(deg, rig.col_kind - 1, rig.col_kind)
    # centre
    c_now = np.where(rig.has_center[:, None], world[rig.center_node][:, :3, 3], 0.0)
    dC = np.where(rig.use_center[:, None], c_now - state.prev_center.astype(np.float64), 0.0)
    # the first head's "before" matrix
    pn = rig.parent_node
    hasp = pn >= 0
    Pm = np.where(hasp[:, None, None], Winv @ world[np.maximum(pn, 0)], np.eye(4))   # pose_bone.matrix
    before = np.where(hasp[:, None, None], Pm @ rig.parent_rel, rig.parent_rel)
    rows = np.arange(C)
    for k in range(K):
        v = rig.valid[:, k]
        r = rows[v]
        if r.size == 0:
            break
        bf = before[r]
        T, Q, S = _rot3(bf)
        Wk, Wik = W[r], Winv[r]
        head_w = (Wk[:, :3, :3] @ T[..., None])[..., 0] + Wk[:, :3, 3]
        tail_now = world[rig.tail[r, k]][:, :3, 3]
        init = ~state.initialized[r, k]
        prev = np.where(init[:, None], tail_now, state.prev[r, k].astype(np.float64)) + dC[r]
        cur = np.where(init[:, None], tail_now, state.cur[r, k].astype(np.float64)) + dC[r]
        inertia = (cur - prev) * (1.0 - rig.drag[r, k])[:, None]
        start = rig.start[r, k]
        sdir = _norm((Wr[r] @ (Q @ start[..., None]))[..., 0])
        nxt = cur + inertia + sdir * (dt * rig.stiff[r, k])[:, None] + rig.gdir[r, k] * (dt * rig.gpow[r, k])[:, None]
        L = _len(world[rig.head[r, k]][:, :3, 3] - tail_now)[:, None]
        nxt = head_w + _norm(nxt - head_w) * L
        for m in range(rig.collider_slots):
            ci = rig.col_idx[r, m]
            has = ci >= 0
            if not has.any():
                continue
            rr = np.flatnonzero(has)
            cc = ci[has]
            n, d = _collide(nxt[rr], rig.hit[r[rr], k], ckind[cc], ca[cc], cb[cc], rig.col_radius[cc], cn[cc])
            pen = d < 0
            if pen.any():
                q = rr[pen]
                p2 = nxt[q] - n[pen] * d[pen][:, None]
                nxt[q] = head_w[q] + _norm(p2 - head_w[q]) * L[q]
        local = (Wik[:, :3, :3] @ nxt[..., None])[..., 0] + Wik[:, :3, 3]
        # before^-1 @ local, before = T @ R @ diag(S): diag(1/S) @ R^T @ (local - T)
        end = np.einsum("nji,nj->ni", Q, local - T) / np.where(S != 0, S, 1.0)
        rot = _quat_axis_angle(start, end)
        R = Q @ quat_to_mat3(rot)
        new_head = np.zeros_like(bf)
        new_head[:, :3, :3] = R * S[:, None, :]
        new_head[:, :3, 3] = T
        new_head[:, 3, 3] = 1.0
        before[r] = new_head @ rig.rel[r, k]
        state.prev[r, k] = cur
        state.cur[r, k] = nxt
        state.initialized[r, k] = True
        inh = rig.inherit[r, k]
        out[r, k] = rot if inh.all() else np.where(inh[:, None], rot, mat3_to_quat(R))
    state.prev_center[:] = c_now
    state.steps += 1
    return out


def pose_rotations(rig: SpringRig, rotations: np.ndarray):
    """(nodes, wxyz) of the valid pairs, for ScenePose.set_local_trs."""
    v = rig.valid
    return rig.head[v], rotations[v]
