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
from typing import List, Sequence

import numpy as np
import numpy.typing as npt

try:                                   # einsum's C kernel without the Python dispatch (numpy 1.x / 2.x):
    from numpy._core.multiarray import c_einsum as ein  # a small step's calls cost 1 us less each
except ImportError:                    # pragma: no cover - numpy 1.x
    try:
        from numpy.core.multiarray import c_einsum as ein
    except ImportError:
        ein = np.einsum

TINY = 1e-300                          # a zero length stays zero (no 0/0)
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


class SlotPlan:
    """One collider slot of one level: the rows (chains) that test it and their colliders."""

    def __init__(self, rows, ids, hit, sign, radius, plane, capsule: bool):
        self.rows, self.ids, self.hit, self.sign, self.plane = rows, ids, hit, sign, plane
        # the rows as a slice when they are the first ones (chains sorted by length): a view, no gather
        self.sel = slice(0, len(rows)) if np.array_equal(rows, np.arange(len(rows))) else rows
        self.hr = hit + sign * radius            # d = sign * |v| - hr  (outside: |v| - hit - r)
        self.capsule = capsule
        self.inside = bool((sign < 0).any())
        self.any_plane = bool(plane.any())
        self.simple = not (capsule or self.inside or self.any_plane)      # outside spheres only
        self.thr = np.maximum(self.hr, EPS)      # |v| < thr: d < 0 or |v| < EPS (spring_collide)


class SpringRig:
    """Tables of every chain of every character: rows sorted by chain length (the chains with a
    pair at level k are rows [:level_rows[k]]), pairs level-major (level k = ``level_slice[k]``),
    per level the pair constants and the (row, slot, collider) table of its colliders."""

    def __init__(self, characters: Sequence[CharacterSpec], joint_order: str = "addon"):
        rows = []        # (char, spring index, [(head JointSpec, tail JointSpec)], center, colliders)
        col_rows = []
        col_base = 0
        for ci, ch in enumerate(characters):
            for _si, sp in enumerate(ch.springs):
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
        rows.sort(key=lambda r: -len(r[2]))     # stable: the chains with a pair at level k come first
        C = len(rows)
        K = max((len(r[2]) for r in rows), default=0)
        self.chain_count, self.depth = C, K
        self.joint_count = sum(len(r[2]) + 1 for r in rows)
        self.level_rows = [sum(1 for r in rows if len(r[2]) > k) for k in range(K)]
        offs = np.concatenate(([0], np.cumsum(self.level_rows))).astype(int)
        self.level_slice = [slice(int(offs[k]), int(offs[k + 1])) for k in range(K)]
        self.pair_count = P = int(offs[-1])
        pairs = [(r, k) for k in range(K) for r in range(self.level_rows[k])]    # level-major
        eye = np.eye(4)
        self.arm_node = np.array([characters[r[0]].armature_node for r in rows], np.int64)
        self.arm_unique, self.chain_arm = np.unique(self.arm_node, return_inverse=True)
        self.parent_rel = np.tile(eye, (C, 1, 1))      # Rp^-1 @ Rh of the first head (or Rh)
        parent_or_arm = np.zeros(C, np.int64)
        self.has_center = np.array([r[3] >= 0 for r in rows], bool)
        self.center_node = np.array([max(r[3], 0) for r in rows], np.int64)
        self.use_center = np.array([r[4] for r in rows], bool)
        self.any_center = bool(self.use_center.any())
        for i, (ci, _, prs, _c, _u, _cols) in enumerate(rows):
            ch = characters[ci]
            h0 = prs[0][0].node
            p = ch.parent.get(h0, -1)
            rh0 = np.asarray(ch.rest[h0], np.float64)
            if p >= 0:
                parent_or_arm[i] = p
                self.parent_rel[i] = np.linalg.inv(np.asarray(ch.rest[p], np.float64)) @ rh0
            else:
                parent_or_arm[i] = ch.armature_node
                self.parent_rel[i] = rh0
        head = np.array([rows[r][2][k][0].node for r, k in pairs], np.int64).reshape(P)
        tail = np.array([rows[r][2][k][1].node for r, k in pairs], np.int64).reshape(P)
        self.gather = np.concatenate([parent_or_arm, head, tail])
        # the output: the head bones in the chains' original order
        orig = [(rows[r][1], k) for r, k in pairs]
        self.out_order = np.array(sorted(range(P), key=lambda i: orig[i]), np.int64)
        self.out_nodes = head[self.out_order]

        def per_level(fn, dtype: npt.DTypeLike = np.float64):
            return [np.array([fn(rows[r], characters[rows[r][0]], *rows[r][2][k]) for r in range(self.level_rows[k])],
                             dtype) for k in range(K)]

        def rest(ch, node):
            return np.asarray(ch.rest[node], np.float64)

        self.lv_start = per_level(lambda row, ch, h, t: (np.linalg.inv(rest(ch, h.node)) @ rest(ch, t.node)[:, 3])[:3])
        self.lv_rel = per_level(lambda row, ch, h, t: np.linalg.inv(rest(ch, h.node)) @ rest(ch, t.node))
        self.lv_stiff = per_level(lambda row, ch, h, t: np.float32(h.stiffness))
        self.lv_keep = [1.0 - d[:, None] for d in per_level(lambda row, ch, h, t: np.float32(h.drag_force))]
        self.lv_grav = per_level(lambda row, ch, h, t: np.asarray(h.gravity_dir, np.float32).astype(np.float64)
                                 * np.float64(np.float32(h.gravity_power)))
        hit = per_level(lambda row, ch, h, t: np.float32(h.hit_radius))
        self.lv_inherit = per_level(lambda row, ch, h, t: bool(ch.inherit_rotation.get(h.node, True)), bool)
        self.lv_inherit_all = [bool(x.all()) for x in self.lv_inherit]
        self.lv_start_len = [np.sqrt((st * st).sum(-1)) for st in self.lv_start]
        # (s.e, s x e) = D @ e with D = [s^T; skew(s)]
        self.lv_dotcross = []
        for st in self.lv_start:
            D = np.zeros((len(st), 4, 3))
            D[:, 0] = st
            x, y, z = st[:, 0], st[:, 1], st[:, 2]
            D[:, 1, 1], D[:, 1, 2] = -z, y
            D[:, 2, 0], D[:, 2, 2] = z, -x
            D[:, 3, 0], D[:, 3, 1] = -y, x
            self.lv_dotcross.append(D)
        # colliders: one table of (row, slot, collider) per level, ordered by row then slot
        n = len(col_rows)
        self.col_node = np.array([c.node for _, c in col_rows], np.int64).reshape(n)
        self.col_offset = np.array([c.offset for _, c in col_rows], np.float64).reshape(n, 3)
        self.col_tail = np.array([c.tail for _, c in col_rows], np.float64).reshape(n, 3)
        self.col_radius = np.array([c.radius for _, c in col_rows], np.float64).reshape(n)
        self.col_normal = np.array([c.normal for _, c in col_rows], np.float64).reshape(n, 3)
        kind = np.array([c.kind for _, c in col_rows], np.int64).reshape(n)
        self.col_capsule = (kind == CAPSULE) | (kind == INSIDE_CAPSULE)
        self.any_capsule = bool(self.col_capsule.any())
        self.any_plane = bool((kind == PLANE).any())
        sign = np.where((kind == INSIDE_SPHERE) | (kind == INSIDE_CAPSULE), -1.0, 1.0)
        # per level, per collider slot (the add-on's group/collider order): the rows that have it
        self.lv_slots = []
        for k in range(K):
            plans = []
            for m in range(max((len(rows[r][5]) for r in range(self.level_rows[k])), default=0)):
                rr = np.array([r for r in range(self.level_rows[k]) if len(rows[r][5]) > m], np.int64)
                ids = np.array([rows[r][5][m] for r in rr], np.int64)
                plans.append(SlotPlan(rr, ids, hit[k][rr], sign[ids], self.col_radius[ids], kind[ids] == PLANE,
                                      bool(self.col_capsule[ids].any())))
            self.lv_slots.append(plans)
        self.solver_plan = None          # spring_solver's per-step tables, built on first use

    def new_state(self) -> "SpringState":
        return SpringState(self)


class SpringState:
    """Per tail joint (one row per pair, the rig's level-major order): initialized / previous /
    current world position (float32, as the add-on's properties); per chain: the previous centre
    position (the add-on starts from (0,0,0))."""

    def __init__(self, rig: SpringRig):
        P, C = rig.pair_count, rig.chain_count
        self.initialized_flat = np.zeros(P, bool)
        self.all_initialized = P == 0
        self.prev_flat = np.zeros((P, 3), np.float32)
        self.cur_flat = np.zeros((P, 3), np.float32)
        self.prev_center = np.zeros((C, 3), np.float32)
        self.steps = 0

    def reset(self) -> None:
        self.initialized_flat[:] = False
        self.all_initialized = not self.initialized_flat.size
        self.prev_flat[:] = 0.0
        self.cur_flat[:] = 0.0
        self.prev_center[:] = 0.0
        self.steps = 0


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
    done = np.zeros(c0.shape, bool)
    for a, b, c in ((0, 1, 2), (1, 2, 0), (2, 0, 1)):
        sel = ~c0 & (m[..., a, a] >= m[..., b, b]) & (m[..., a, a] >= m[..., c, c]) & ~done
        done |= sel
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
