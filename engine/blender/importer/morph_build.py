"""Shape keys of one mesh -> sparse MorphTargetAssets per primitive (numpy, no dense per-key arrays).

Each key is read once (``MeshReads``: shared with the content fingerprint), compared with its
relative key to find the vertices it moves, and only those rows are carried on: the position
rows, the normal deltas of the split vertices around them (``NormalDeltaSolver``) and the
tangent deltas of the triangles they touch (``TangentDeltaSolver``), handed to
``MorphTargetAsset`` in its sparse form.  The normal and tangent deltas of a key are made when
its rows are first read (``MorphTargetAsset.deferred``: most expression keys of an avatar rest
at 0 and are never drawn in a frame); the import reads each key and keeps its moved vertices
and their position deltas.  The rows made later are the
ones an eager build made (the same solvers over the same deltas)."""
from __future__ import annotations

import functools
from typing import Optional

import numpy as np

from ...core.assets import AssetError, MorphTargetAsset
from . import skin as _skin
from .mesh import corner_verts
from .morph import NormalDeltaSolver, TangentDeltaSolver, any3, fallback_key_name, sorted_unique

_EMPTY_I = np.zeros(0, np.int64)


def build_morphs(obj, mesh, key, cs, prims, base_co, vg, reads) -> list:
    """Per primitive, the list of its MorphTargetAssets (one per shape key but the reference)."""
    nv = base_co.shape[0]
    kbs = list(key.key_blocks)
    ref = key.reference_key
    nl, npoly = len(mesh.loops), len(mesh.polygons)
    loop_vert = corner_verts(mesh)
    poly_start = np.empty(npoly, np.int32)
    if npoly:
        mesh.polygons.foreach_get("loop_start", poly_start)
    poly_total = np.diff(poly_start, append=np.int32(nl)).astype(np.int32)   # face offsets are ascending
    # the solvers are made when the first key's rows are (most avatars rest every expression):
    # until then only what they are made from is held, as read now
    make = functools.partial(_solvers, cs.normals, cs.source_vertices.astype(np.int32),
                             cs.corner_to_split.astype(np.int32), cs.positions.shape[0], base_co, loop_vert.astype(np.int32),
                             poly_start, poly_total,
                             [(p.positions, p.normals, p.uv0, p.indices, p.source_vertices, p.split_vertices)
                              for p in prims])
    taken = {kb.name for kb in kbs if kb.name}
    vgroup_index = {g.name: g.index for g in obj.vertex_groups}
    rows = _KeyRows(prims, make, nv)
    out = [[] for _ in prims]
    for ki, kb in enumerate(kbs):
        if kb == ref:
            continue
        name = kb.name if kb.name else fallback_key_name(ki, taken)
        taken.add(name)
        rel = kb.relative_key if kb.relative_key is not None else ref
        ck, cr = reads.key_coords(kb), reads.key_coords(rel)
        ne = ck != cr
        mids = np.flatnonzero(ne[:, 0] | ne[:, 1] | ne[:, 2])
        dm = ck[mids].astype(np.float64) - cr[mids]
        if kb.vertex_group and vg is not None and kb.vertex_group in vgroup_index:
            dm *= _skin.group_weights(*vg, vgroup_index[kb.vertex_group], nv)[mids, None]
        if not np.isfinite(dm.sum()):
            raise AssetError(f"mesh '{obj.name}' shape key '{name}': non-finite vertex positions")
        live = np.any(dm != 0.0, axis=1)
        mids, dm = mids[live], dm[live]
        k = rows.add(mids, dm)
        for pi, p in enumerate(prims):
            out[pi].append(MorphTargetAsset.deferred(
                name, p.positions.shape[0], functools.partial(rows.target, k, pi),
                weight_min=float(kb.slider_min), weight_max=float(kb.slider_max), mute=bool(kb.mute),
                key_name=kb.name))
    return out


def _solvers(split_normals, split_source, corner_to_split, nsplit: int, base_co, loop_vert, poly_start,
             poly_total, prims) -> tuple:
    """(normal solver, tangent solver or None per primitive, split vertex -> primitive-local
    vertex per primitive (-1: none)) of one mesh; ``prims``: per primitive (positions, normals,
    uv0, indices, source vertices, split vertices)."""
    nsolver = NormalDeltaSolver(split_normals, split_source, corner_to_split, base_co, loop_vert, poly_start,
                                poly_total)
    tsolvers = [TangentDeltaSolver(pos, nor, uv, tris, source_vertices=src) if uv is not None else None
                for pos, nor, uv, tris, src, _split in prims]
    split_local = []
    for *_, split in prims:
        lm = np.full(nsplit, -1, np.int32)
        lm[split] = np.arange(split.shape[0])
        split_local.append(lm)
    return nsolver, tsolvers, split_local


class _KeyRows:
    """The shape keys of one mesh as their moved vertices and position deltas (float64), and the
    solvers that turn one key into its sparse MorphTargetAsset rows on every primitive; a key's
    rows are made on first use (``target``), for all primitives at once (one normal solve).

    Only what a later key needs is held: each primitive's vertex count and source vertices
    (int32), a key's deltas until its rows are made, what the solvers are made from until the
    first key is made (``make_solvers``), then the solvers until every key is (then they go;
    ``made`` keeps the rows a primitive has not read)."""

    def __init__(self, prims, make_solvers, nv: int):
        self.prims = [(p.positions.shape[0], p.source_vertices.astype(np.int32)) for p in prims]
        self.make_solvers, self.solvers, self.nv = make_solvers, None, nv
        self.keys = []        # per key: (moved Blender vertices, (M,3) deltas); None once made
        self.made: dict = {}  # key -> its per-primitive rows, until every primitive took them
        self.left = 0         # keys whose rows are not made yet

    def add(self, mids, dm) -> int:
        self.keys.append((mids, dm))
        self.left += 1
        return len(self.keys) - 1

    def target(self, k: int, pi: int) -> tuple:
        """(indices, position, normal, tangent rows) of key ``k`` on primitive ``pi``."""
        per: Optional[list] = self.made.get(k)
        if per is None:
            if self.solvers is None:
                make = self.make_solvers
                assert make is not None           # dropped only once the solvers are made
                self.solvers, self.make_solvers = make(), None
            nsolver, tsolvers, split_local = self.solvers
            mids, dm = self.keys[k]
            self.keys[k] = None
            d = np.zeros((self.nv, 3))
            moved = np.zeros(self.nv, bool)
            d[mids] = dm
            moved[mids] = True
            n_ids, n_d = nsolver.deltas(d, moved)
            prims = self.prims
            assert prims is not None            # dropped only once every key is made
            per = [_target(p, split_local[i], tsolvers[i], d, moved, n_ids, n_d)
                   for i, p in enumerate(prims)]
            self.made[k] = per
            self.left -= 1
            if not self.left:            # every key made: no later key needs the solvers
                self.solvers = self.prims = None
        out = per[pi]
        per[pi] = None
        if all(x is None for x in per):
            del self.made[k]
        return out


def _target(p, lmap, tsolver, d, moved, n_ids, n_d) -> tuple:
    """The sparse rows (indices, position, normal, tangent rows) of one key on primitive ``p``
    ((vertex count, source vertices))."""
    v, src = p
    pos_ids = np.flatnonzero(moved[src])
    loc = lmap[n_ids]
    ok = loc >= 0
    nrm_ids, nrm = loc[ok], n_d[ok]
    if tsolver is not None:
        tan_ids, tan = tsolver.sparse_deltas(d, pos_ids, nrm_ids, nrm)
    else:
        tan_ids, tan = _EMPTY_I, None
    ids = sorted_unique(v, pos_ids, nrm_ids, tan_ids) if (nrm_ids.size or tan_ids.size) else pos_ids
    k = ids.shape[0]
    prow = np.zeros((k, 3), np.float32)
    if pos_ids.size:
        prow[np.searchsorted(ids, pos_ids)] = d[src[pos_ids]]
    nrow = np.zeros((k, 3), np.float32)
    if nrm_ids.size:
        nrow[np.searchsorted(ids, nrm_ids)] = nrm
    trow = None
    if tsolver is not None:
        trow = np.zeros((k, 3), np.float32)
        if tan_ids.size:
            trow[np.searchsorted(ids, tan_ids)] = tan
    # rows whose float32 deltas are all zero are not stored (as the dense form reduced them)
    keep = any3(prow != 0.0) | any3(nrow != 0.0)
    if trow is not None:
        keep |= any3(trow != 0.0)
    if not keep.all():
        ids, prow, nrow = ids[keep], prow[keep], nrow[keep]
        trow = trow[keep] if trow is not None else None
    return ids, prow, nrow, trow
