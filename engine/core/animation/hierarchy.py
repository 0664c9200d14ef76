"""The pose's world matrices (ScenePose's hierarchy half, numpy only): ``world = parent_world @
local`` by pointer jumping (log2(depth) batched products) through a plan made once per scene,
level by level where bones have non-default inheritance flags (animation/inherit.py), and a
bake's shortcut (``set_world_shortcut``: worlds from root-relative matrices, one step per level
of a flat hierarchy).  Each world update bumps the pose version (``next_version``)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

from ..finite import affine_inv
from . import inherit as _inh
from .trs import compose_trs_fast

if TYPE_CHECKING:
    from ..assets.types import SceneAsset

UNRESOLVED = 0
RESOLVING = 1
RESOLVED = 2

_U64 = 0xFFFFFFFFFFFFFFFF


def next_version(v: int) -> int:
    """64-bit wrap that skips 0 (0 means 'initial / cleared')."""
    v = (int(v) + 1) & _U64
    if v == 0:
        v = 1
    return v


def readonly_view(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v


def safe_inverse(m: np.ndarray) -> np.ndarray:   # a singular parent: affine pseudo-inverse
    return affine_inv(m)


class WorldHierarchy:
    """ScenePose's world-matrix half (a mixin: the state is ScenePose's)."""

    # ScenePose's state read here (set in ScenePose.__init__ / initialize; declarations only)
    _scene: Optional[SceneAsset]
    _n: int
    _parents: np.ndarray
    _pre: np.ndarray
    _t: np.ndarray
    _q: np.ndarray
    _s: np.ndarray
    _local: np.ndarray
    _world: np.ndarray
    _resolution_states: np.ndarray
    _special: np.ndarray
    _from_matrix: np.ndarray
    _any_special: bool
    _shortcut_mask: np.ndarray
    _flat_plans: dict[tuple[int, int], tuple]
    _below_plans: dict[int, tuple]
    _is_bone: np.ndarray
    _bone_parent: np.ndarray
    _inh_rot: np.ndarray
    _inh_mode: np.ndarray
    _inh_loc: np.ndarray
    _arm_node: np.ndarray
    _arm_rest: np.ndarray
    _valid_nodes: Callable[[Any], Optional[np.ndarray]]

    def set_world_shortcut(self, nodes, anchors, relative_t) -> bool:
        """For the next ``update_world_matrices`` only: ``world[nodes] = world[anchors] @ relative``
        instead of chaining their locals, ``relative_t`` being the (k,4,4) *transposed* relative
        matrices (a preview bake: every baked bone relative to its root bone, Blender's
        ``inverse(root pose) @ pose``).  The worlds then take one step per level of a flat
        hierarchy, and a run of at least 8 consecutive nodes with the same anchor one matrix
        product (``relative^T @ anchor^T`` as one (4k,4) x (4,4) product).  ``anchors`` must be
        proper ancestors of ``nodes`` and not in ``nodes``; nodes below ``nodes`` (bone-parented
        objects) chain as usual.  The locals of ``nodes`` are not changed: the caller writes the
        same pose there (``set_local_matrices``) first.  Dropped by any later write to ``nodes``
        (or ``set_local_matrices``, ``reset_to_bind_pose``), and ignored while bones with
        non-default inheritance take the inheritance path.  False on bad input (no shortcut
        then); the matrices are the caller's finite values (not checked per call)."""
        self._clear_shortcut()
        hit = self._flat_plans.get((id(nodes), id(anchors)))
        if hit is not None and hit[0] is nodes and hit[1] is anchors:
            idx, plan = hit[2], hit[3]        # the same arrays as before (a bake's, per frame)
        else:
            idx = self._valid_nodes(nodes)
            anc = self._valid_nodes(anchors)
            if idx is None or anc is None or anc.shape != idx.shape:
                return False
            plan = self._build_flat_plan(idx, anc) if idx.size else None
            if plan is None:
                return idx.size == 0
            if len(self._flat_plans) > 8:
                self._flat_plans.clear()
            self._flat_plans[(id(nodes), id(anchors))] = (nodes, anchors, idx, plan)
        rel_t = relative_t
        if not isinstance(rel_t, np.ndarray) or rel_t.shape != (idx.shape[0], 4, 4) or rel_t.dtype != np.float64:
            try:
                rel_t = np.asarray(relative_t, dtype=np.float64).reshape(idx.shape[0], 4, 4)
            except ValueError:
                return False
        self._shortcut = (plan, rel_t)
        self._shortcut_mask[idx] = True
        self._dirty = True
        return True

    def _clear_shortcut(self) -> None:
        if self._shortcut is not None:
            self._shortcut = None
            self._shortcut_mask[:] = False

    def _build_flat_plan(self, idx: np.ndarray, anc: np.ndarray):
        """The hierarchy where each shortcut node hangs from its anchor, level by level:
        ``(order, positions of the chained shortcut nodes in it, their rows in the input,
        levels)``, each level ``(start, stop, parent positions, runs)``: positions start..stop of
        the order are chained (``parent world @ local``), each run ``(dst start, dst stop, anchor
        position, src start, src stop)`` is one product from the input rows src start..stop.
        None when an anchor is not a proper ancestor of its node or is itself a shortcut node.
        Once per set of nodes."""
        n = self._n
        k = idx.shape[0]
        par = np.array(self._parents, np.int64)
        par[(par < 0) | (par >= n)] = -1
        inset = np.zeros(n, bool)
        inset[idx] = True
        if inset[anc].any() or np.unique(idx).size != k:
            return None
        up = par[idx].copy()                      # anchors must be proper ancestors
        found = np.zeros(k, bool)
        for _ in range(n):
            found |= up == anc
            live = (up >= 0) & ~found
            if not live.any():
                break
            up[live] = par[up[live]]
        if not found.all():
            return None
        par[idx] = anc
        depth = np.full(n, -1, np.int64)
        depth[par < 0] = 0
        for d in range(1, n + 1):                 # init only: one step per flat level
            nxt = (depth < 0) & (par >= 0)
            nxt[nxt] = depth[par[nxt]] == d - 1
            if not nxt.any():
                break
            depth[nxt] = d
        if (depth < 0).any():
            return None
        # runs: >= 32 consecutive input rows with one anchor (one product each; shorter ones
        # cost less as rows of their level's batched product)
        brk = np.flatnonzero(np.diff(anc)) + 1
        starts = np.concatenate([[0], brk])
        stops = np.concatenate([brk, [k]])
        long_runs = [(int(a), int(b)) for a, b in zip(starts, stops) if b - a >= 8]
        in_run = np.zeros(n, bool)
        for a, b in long_runs:
            in_run[idx[a:b]] = True
        # order: by depth; in each level the chained nodes, then the runs' nodes in input order
        run_key = np.full(n, -1, np.int64)
        for r, (a, b) in enumerate(long_runs):
            run_key[idx[a:b]] = r
        within = np.zeros(n, np.int64)
        within[idx] = np.arange(k)
        perm = np.lexsort((within, run_key, depth)).astype(np.intp)
        pos = np.empty(n, np.intp)
        pos[perm] = np.arange(n)
        ds = depth[perm]
        levels = []
        for d in range(1, int(ds.max()) + 1 if n else 1):
            lo, hi = int(np.searchsorted(ds, d, "left")), int(np.searchsorted(ds, d, "right"))
            if hi <= lo:
                continue
            chained = perm[lo:hi][~in_run[perm[lo:hi]]]
            c = chained.size
            runs = []
            for a, b in long_runs:
                if depth[idx[a]] == d:
                    runs.append((int(pos[idx[a]]), int(pos[idx[a]]) + b - a, int(pos[anc[a]]), a, b))
            levels.append((lo, lo + c, pos[par[chained]], runs))
        chained_sc = ~in_run[idx]
        return perm, pos[idx[chained_sc]], np.flatnonzero(chained_sc), levels

    # ---------------------------------------------------------------- reads

    def world_matrix(self, node: int) -> Optional[np.ndarray]:
        """The node's world matrix, or None while the pose is dirty (or the index is invalid)."""
        if self._dirty or self._scene is None or not (0 <= int(node) < self._n):
            return None
        return readonly_view(self._world[int(node)])

    @property
    def world_matrices(self) -> Optional[np.ndarray]:
        """(N,4,4) world matrices, or None while dirty."""
        if self._dirty or self._scene is None:
            return None
        return readonly_view(self._world)

    # ---------------------------------------------------------------- hierarchy
    def _build_plan(self):
        """Resolve the hierarchy level by level; None (states left 1 = resolving) on a cycle."""
        n = self._n
        parents = self._parents
        states = self._resolution_states
        states[:] = UNRESOLVED
        plan = []
        has_parent = (parents >= 0) & (parents < n)
        safe_parent = np.where(has_parent, parents, 0)
        self._parents_safe = np.where(has_parent, parents, -1)
        frontier = np.flatnonzero(~has_parent)
        while frontier.size:
            states[frontier] = RESOLVED
            plan.append((frontier, parents[frontier]))
            frontier = np.flatnonzero((states == UNRESOLVED) & has_parent & (states[safe_parent] == RESOLVED))
        left = states == UNRESOLVED
        if left.any():
            states[left] = RESOLVING   # stuck while resolving: a parent cycle
            bad = int(np.flatnonzero(left)[0])
            name = self._scene.nodes[bad].name if self._scene is not None else str(bad)
            self.last_error = f"parent cycle through node '{name}'"
            return None
        return plan

    def update_world_matrices(self) -> bool:
        """world = parent_world @ local for every node; clears dirty and bumps version on success."""
        if self._scene is None:
            return False
        if self._plan is None:
            plan = self._build_plan()
            if plan is None:
                return False
            self._plan = plan
            self._world_plan = None
            self._inh_levels = None
        if self._any_special:
            active = self._special & ~self._from_matrix
            if active.any():
                self._clear_shortcut()
                self._update_with_inheritance(active)
                self._dirty = False
                self._version = next_version(self._version)
                return True
        if self._shortcut is not None:
            (perm, at, src, levels), rel_t = self._shortcut
            self._clear_shortcut()
            w = self._local[perm]
            if src.size:
                w[at] = rel_t[src].transpose(0, 2, 1)
            for a, b, parents, runs in levels:     # parents lie in earlier levels: no overlap
                if b > a:
                    np.matmul(w[parents], w[a:b], out=w[a:b])
                for da, db, p, sa, sb in runs:     # world^T = relative^T @ anchor^T, one product
                    w[da:db] = np.dot(rel_t[sa:sb].reshape(-1, 4), w[p].T).reshape(-1, 4, 4).transpose(0, 2, 1)
            self._world[perm] = w
            self.shortcut_updates += 1
            self._dirty = False
            self._version = next_version(self._version)
            return True
        # The plan was resolved (and checked for cycles, with the three resolution states) when
        # it was built.  Worlds by segments (_build_world_plan): about 2 matrix products per node
        # in about 2 * sqrt(depth) vectorised steps.
        wp = self._world_plan
        if wp is None:
            wp = self._world_plan = self._build_world_plan()
        perm, seg_steps, roots, anchor_steps, rest = wp
        local = self._local[perm]   # plan order: every step below works on one slice
        seg = local.copy()
        for a, b, parents in seg_steps:     # reads other blocks of seg: no overlap, no temporary
            np.matmul(seg[parents], local[a:b], out=seg[a:b])
        world = np.empty_like(seg)
        world[roots[0]:roots[1]] = seg[roots[0]:roots[1]]
        for a, b, anchors in anchor_steps:
            np.matmul(world[anchors], seg[a:b], out=world[a:b])
        a, b, anchors = rest
        if b > a:
            np.matmul(world[anchors], seg[a:b], out=world[a:b])
        self._world[perm] = world
        self._dirty = False
        self._version = next_version(self._version)
        return True

    def update_world_below(self, nodes: np.ndarray) -> bool:
        """The world update after a write to the locals of ``nodes`` only (an intp array, the same
        object each frame), the pose having been clean before it: the worlds of ``nodes`` and of
        their descendants, one product per level below them; every other world is kept.  The full
        ``update_world_matrices`` where that does not hold (bones with non-default inheritance,
        a bake's shortcut, a root among ``nodes``, a plan not built yet)."""
        if self._scene is None or self._plan is None or self._any_special or self._shortcut is not None:
            return self.update_world_matrices()
        hit = self._below_plans.get(id(nodes))
        if hit is None or hit[0] is not nodes or hit[1] is not self._plan:
            hit = (nodes, self._plan, self._below_plan(nodes))
            if len(self._below_plans) > 8:
                self._below_plans.clear()
            self._below_plans[id(nodes)] = hit
        levels = hit[2]
        if levels is None:
            return self.update_world_matrices()
        world, local = self._world, self._local
        for idx, par in levels:
            world[idx] = np.matmul(world[par], local[idx])
        self._dirty = False
        self._version = next_version(self._version)
        return True

    def _below_plan(self, nodes):
        """[(nodes, their parents)] level by level from ``nodes`` down (once per set of nodes);
        None when one of them is a root."""
        n = self._n
        init = np.zeros(n, bool)
        init[np.asarray(nodes, np.intp)] = True
        if (self._parents_safe[init] < 0).any():
            return None
        affected = np.zeros(n, bool)
        rel = np.full(n, -1, np.int64)
        for lv_nodes, _lv_parents in self._plan:       # absolute depth order: parents first
            par = self._parents_safe[lv_nodes]
            par_aff = (par >= 0) & affected[np.maximum(par, 0)]
            aff = init[lv_nodes] | par_aff
            affected[lv_nodes] = aff
            rel[lv_nodes[aff]] = np.where(par_aff[aff], rel[np.maximum(par[aff], 0)] + 1, 0)
        levels = []
        for r in range(int(rel.max()) + 1 if n else 0):
            idx = np.flatnonzero(rel == r).astype(np.intp)
            levels.append((idx, self._parents_safe[idx].astype(np.intp)))
        return levels

    def _build_world_plan(self):
        """Segments of K levels (K ~ sqrt(depth)): nodes at depths 0, K, 2K, ... are checkpoints.
        ``seg[i]`` = the product of the locals from below i's anchor (nearest checkpoint
        ancestor) down to i, made level by level inside the segments (all segments at once:
        K - 1 steps); checkpoint worlds follow anchor to anchor (depth / K steps); every other
        node is ``world[anchor] @ seg`` in one step.  The nodes are put in an order where each
        step is one slice: depth residue classes 1, 2, ..., K - 1, then the checkpoints (roots
        first) by depth.  Returns (order, seg steps, root count, anchor steps, rest step), the
        steps as (start, stop, positions of the parents / anchors).  Once per hierarchy."""
        n = self._n
        depth = np.zeros(n, np.int64)
        for d, (nodes, _parents) in enumerate(self._plan):
            depth[nodes] = d
        dmax = int(depth.max()) if n else 0
        # the segment length with the lowest estimated cost (numpy calls and matrix products,
        # measured orders of magnitude: ~1.6 us a call, ~0.09 us a gathered 4x4 product);
        # K = 1 is level by level (best for shallow hierarchies with many nodes, e.g. crowds)
        def cost(plan) -> float:
            steps = len(plan[1]) + len(plan[3]) + 1
            products = sum(b - a for a, b, _ in plan[1]) + sum(b - a for a, b, _ in plan[3]) + plan[4][1]
            return 3.2 * steps + 0.09 * products

        ks = sorted({1, 2, max(2, int(round(np.sqrt(dmax + 1)))), max(2, int(round(np.sqrt(dmax + 1)))) + 1})
        return min((self._segment_plan(depth, dmax, k) for k in ks), key=cost)   # the first cheapest

    def _segment_plan(self, depth: np.ndarray, dmax: int, k: int):
        n = self._n
        par = self._parents_safe
        res = depth % k
        rank = np.where(res == 0, k - 1, res - 1)
        perm = np.lexsort((depth, rank)).astype(np.intp)
        pos = np.empty(n, np.intp)
        pos[perm] = np.arange(n)
        # anchor = nearest checkpoint ancestor (exclusive), resolved level by level (init only)
        anchor = np.full(n, -1, np.int64)
        for nodes, _parents in self._plan[1:]:
            p = par[nodes]
            anchor[nodes] = np.where(depth[p] % k == 0, p, anchor[p])
        r_sorted = rank[perm]
        d_sorted = depth[perm]

        def block(mask):
            idx = np.flatnonzero(mask)
            return (int(idx[0]), int(idx[-1]) + 1) if idx.size else None

        seg_steps = []
        for r in range(2, k):                          # residue r: parents of residue r - 1
            blk = block(r_sorted == r - 1)
            if blk is not None:
                seg_steps.append(blk + (pos[par[perm[blk[0]:blk[1]]]],))
        blk = block((r_sorted == k - 1) & (d_sorted > 0)) if k > 1 else None   # checkpoints below the roots
        if blk is not None:
            seg_steps.append(blk + (pos[par[perm[blk[0]:blk[1]]]],))
        roots = int(np.count_nonzero(depth == 0))
        first_ck = int(np.count_nonzero(rank < k - 1))
        anchor_steps = []
        for d in range(k, dmax + 1, k):
            blk = block((r_sorted == k - 1) & (d_sorted == d))
            if blk is not None:
                anchor_steps.append(blk + (pos[anchor[perm[blk[0]:blk[1]]]],))
        rest = (0, first_ck, pos[anchor[perm[:first_ck]]])
        # the roots (depth 0) are the first checkpoints
        return perm, seg_steps, (first_ck, first_ck + roots), anchor_steps, rest

    # ---------------------------------------------------------------- bone inheritance
    def _update_with_inheritance(self, active: np.ndarray) -> None:
        """Level by level: world = parent_world @ local, and for the ``active`` bones (non-default
        inheritance, local from a TRS write) Blender's parent transform in armature space.

        ``ap`` holds each bone's armature-space pose matrix (pose_mat); a root bone's parent (its
        armature object) counts as identity there, so no armature world is ever inverted.  One
        batched step per hierarchy depth (plus one per depth holding active bones)."""
        n = self._n
        world = np.empty((n + 1, 4, 4))
        world[n] = np.eye(4)               # index -1: identity (roots, bones without armature)
        ap = np.empty((n + 1, 4, 4))
        ap[n] = np.eye(4)
        local = self._local
        for nodes, par, b, bp, s, bps, arm, pre_s, arm_rest_s, flags in self._inheritance_levels(active):
            world[nodes] = np.matmul(world[par], local[nodes])
            if b is None:
                continue
            ap[b] = np.matmul(ap[bp], local[b])
            if s is None:
                continue
            chan = compose_trs_fast(self._t[s], self._q[s], self._s[s])
            rs, loc, post = _inh.parent_transforms(pre_s, arm_rest_s, ap[bps], *flags)
            pose = _inh.apply_parent_transforms(rs, loc, post, chan)
            ap[s] = pose
            world[s] = np.matmul(world[arm], pose)
        self._world[:] = world[:n]

    def _inheritance_levels(self, active: np.ndarray) -> list:
        """Per hierarchy level, what ``_update_with_inheritance`` indexes with (cached per set of
        active bones): nodes, parents (-1: the identity row), bones and their bone parents, the
        active bones, their bone parents, armature nodes, rest offsets, parents' rest and flags."""
        key = active.tobytes()
        cache = self._inh_levels
        if cache is not None and cache[0] == key:
            return cache[1]
        n = self._n
        is_bone = self._is_bone
        bpar = np.where(self._bone_parent, self._parents, -1)
        levels = []
        for nodes, parents in self._plan:
            par = np.where((parents >= 0) & (parents < n), parents, -1)
            b = nodes[is_bone[nodes]]
            s = b[active[b]] if b.size else b
            if s.size:
                flags = (self._bone_parent[s], self._inh_rot[s], self._inh_mode[s], self._inh_loc[s])
                levels.append((nodes, par, b, bpar[b], s, bpar[s], self._arm_node[s], self._pre[s],
                               self._arm_rest[bpar[s]], flags))
            else:
                levels.append((nodes, par, b if b.size else None, bpar[b], None, None, None, None, None, None))
        self._inh_levels = (key, levels)
        return levels
