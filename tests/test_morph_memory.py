"""Issue 23, memory of the lazy shape-key deltas: while a key's rows are not made, the mesh's key
rows (``importer/morph_build._KeyRows``) hold only what a later key needs: each key's moved
vertices until its rows are made, no solver until the first key is made (what one is made from,
as read at import), then the normal and tangent solvers' tables in compact form (int32 indices,
no float64 copies of the primitive's arrays, nothing a key's rows can gather or make again row
by row); once every key is made the solvers go, even while another primitive has not read its
rows yet.  Measured as the bytes of the numpy arrays the targets' makers reach
beyond the asset's own (``tools/bench_runtime.numpy_arrays``, each owning array once: what
``bench_runtime --memory`` counts)."""
from __future__ import annotations

import bpy
import numpy as np

from stylized_renderer.engine.blender import importer
from tools import bench_runtime, scenes

#: bytes per mesh corner the unmade keys' tables may hold once a key is made (they held 330-360
#: before: loop-sized int64 tables, float64 copies of positions / normals / UVs, each triangle's
#: corner positions), and before any key is made (no solver: what one is made from)
MAX_BYTES_PER_CORNER = 200
MAX_BYTES_PER_CORNER_AT_REST = 40


def _rig():
    arm, body = scenes.build_heavy_rig(bones=40, vertices=6000, shape_keys=8, actions=1, frames=4,
                                       resting_expressions=True)
    return body


def _held(asset) -> tuple:
    """(bytes the unmade targets' makers hold beyond the asset's own arrays, the primitives'
    unmade targets)."""
    prims = [p for m in asset.meshes for p in m.primitives]
    own = bench_runtime.numpy_arrays({"prim": [{k: getattr(p, k, None) for k in (
        "positions", "normals", "indices", "source_vertices", "smooth_normals", "tangents", "uv0", "colors",
        "joints", "weights")} for p in prims]})
    own.update(bench_runtime.numpy_arrays({"rows": [(t.indices, t.position_rows, t.normal_rows, t.tangent_rows)
                                                    for p in prims for t in p.morph_targets if t.resolved]}))
    makers = [t.__dict__["_rows"] for p in prims for t in p.morph_targets if not t.resolved]
    found = bench_runtime.numpy_arrays({"makers": makers})
    return sum(a.nbytes for k, (a, _) in found.items() if k not in own), makers


def test_unmade_keys_hold_only_what_a_later_key_needs(empty_scene):
    body = _rig()
    corners = len(body.data.loops)
    asset = importer.import_scene(bpy.context.evaluated_depsgraph_get())
    prims = asset.meshes[0].primitives
    assert len(prims) == 2 and all(len(p.morph_targets) == 8 for p in prims)
    # every expression at rest (an avatar's first frame): no solver is made, only what one is
    # made from is kept (as read at import)
    held, makers = _held(asset)
    assert makers and held > 0
    assert held / corners <= MAX_BYTES_PER_CORNER_AT_REST, held / corners
    assert makers[0].func.__self__.solvers is None
    # one key made (an avatar with one expression on): the solvers the others need, compact;
    # that key's own deltas are no longer held
    _ = prims[0].morph_targets[0].tangent_rows
    _ = prims[1].morph_targets[0].tangent_rows
    after, _ = _held(asset)
    assert makers[0].func.__self__.keys[0] is None
    assert after / corners <= MAX_BYTES_PER_CORNER, after / corners


def test_every_key_made_drops_the_solvers(empty_scene):
    """Every key's rows made (primitive 0 read them all): what the makers of primitive 1's unread
    targets hold is their rows, no solver."""
    _rig()
    asset = importer.import_scene(bpy.context.evaluated_depsgraph_get())
    p0, p1 = asset.meshes[0].primitives
    for t in p0.morph_targets:
        _ = t.normal_rows
    held, makers = _held(asset)
    assert len(makers) == len(p1.morph_targets)
    rows = makers[0].func.__self__.made            # the rows made for primitive 1, not read yet
    kept = sum(a.nbytes for per in rows.values() for r in per if r is not None for a in r if a is not None)
    assert held <= kept, (held, kept)
    # and the rows read afterwards are the ones a fresh import makes
    fresh = importer.import_scene(bpy.context.evaluated_depsgraph_get()).meshes[0].primitives[1]
    for t, f in zip(p1.morph_targets, fresh.morph_targets):
        for name in ("indices", "position_rows", "normal_rows", "tangent_rows"):
            u, v = getattr(t, name), getattr(f, name)
            assert (u is None) == (v is None) and (u is None or np.array_equal(u, v)), name


def test_smooth_normal_deltas_hold_no_float64_copies(empty_scene):
    """The runtime's maker of the outline's smooth-normal deltas (``geometry.SmoothNormalDeltas``,
    kept while a target is unmade) reads the primitive's normals as they are and keeps the base
    smooth normals in float32: beyond the primitive's own arrays it holds at most 40 bytes a
    vertex (it held two float64 copies, 48 bytes, plus its index tables before)."""
    from stylized_renderer.engine.core.geometry import SmoothNormalDeltas

    _rig()
    asset = importer.import_scene(bpy.context.evaluated_depsgraph_get())
    for p in asset.meshes[0].primitives:
        own = bench_runtime.numpy_arrays({"prim": [getattr(p, k, None) for k in ("positions", "normals",
                                                                                "source_vertices", "indices")]})
        s = SmoothNormalDeltas(p)
        found = bench_runtime.numpy_arrays({"smooth": {k: v for k, v in vars(s).items() if k != "primitive"}})
        held = sum(a.nbytes for k, (a, _) in found.items() if k not in own)
        assert held / p.vertex_count <= 40, held / p.vertex_count
