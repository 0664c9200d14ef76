"""The sparse-morph grid (test_sparse_morph, test_morph_init_once): ``bump_grid`` a 40x40 grid whose
shape keys move small patches, their values keyed over frames 1-20; ``morph_targets_of`` its
imported primitive and morph targets by name."""
from __future__ import annotations

import bpy
import numpy as np

from stylized_renderer.engine.blender import importer
from tools import scenes

N = 40          # 1600 vertices; each bump moves a patch of a few dozen


def bump_grid():
    """A grid with keys 'Bump' and 'Dent' moving small patches, 'Nothing' equal to the basis,
    and their values keyed over frames 1-20 (so both morph paths run)."""
    verts, quads, uv = scenes.grid(N, N, size=(2.0, 2.0), origin=(-1.0, 0.0, 0.0))
    ob = scenes.make_mesh("SparseGrid", verts, quads, uv=uv)
    ob.shape_key_add(name="Basis", from_mix=False)
    base = verts.astype(np.float64)
    for name, centre, height in (("Bump", (0.3, 1.2), 0.2), ("Dent", (-0.5, 0.6), -0.15)):
        kb = ob.shape_key_add(name=name, from_mix=False)
        r2 = (base[:, 0] - centre[0]) ** 2 + (base[:, 2] - centre[1]) ** 2
        bump = np.where(r2 < 0.04, np.exp(-r2 / 0.01), 0.0)
        co = base.copy()
        co[:, 1] += bump * height
        kb.data.foreach_set("co", co.astype(np.float32).ravel())
    ob.shape_key_add(name="Nothing", from_mix=False)
    for k, kb in enumerate(ob.data.shape_keys.key_blocks[1:]):
        for f, v in ((1, 0.0), (10, 0.9), (20, 0.3 + 0.2 * k)):
            kb.value = v
            kb.keyframe_insert("value", frame=f)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 20
    scenes.finish()
    return ob


def morph_targets_of(ob):
    asset = importer.import_scene(bpy.context.evaluated_depsgraph_get())
    mesh = next(m for m in asset.meshes if m.name == ob.name)
    assert len(mesh.primitives) == 1
    prim = mesh.primitives[0]
    return prim, {t.name: t for t in prim.morph_targets}
