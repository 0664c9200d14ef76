"""The batched numpy F-Curve evaluation equals Blender's FCurve.evaluate."""
from __future__ import annotations

import bpy
import numpy as np
import pytest

from stylized_renderer.engine.blender.importer import fcurve_eval as fe
from stylized_renderer.engine.blender.importer.actions import sample_curves
from tools import scenes


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_batched_fcurve_evaluation_matches_blender(seed):
    bpy.ops.wm.read_factory_settings(use_empty=True)
    ob = scenes.make_mesh("o", [(0, 0, 0), (1, 0, 0), (0, 1, 0)], [(0, 1, 2)])
    act, cb = scenes.new_action("A", ob)
    rng = np.random.default_rng(seed)
    fcs = []
    for i in range(40):
        n = int(rng.integers(1, 8))
        fr = np.sort(rng.choice(np.arange(-5, 40), n, replace=False)).astype(float)
        if i % 3 == 0:
            fr += rng.uniform(0, 0.5, n)
        fc = scenes.add_curve(cb, f'["p{i}"]', 0, fr, rng.normal(size=n) * 3)
        for k in fc.keyframe_points:
            k.interpolation = str(rng.choice(["BEZIER", "BEZIER", "LINEAR", "CONSTANT", "SINE"]))
            ht = str(rng.choice(["AUTO_CLAMPED", "AUTO", "VECTOR", "ALIGNED", "FREE"]))
            k.handle_left_type = k.handle_right_type = ht
            if ht in ("FREE", "ALIGNED"):
                k.handle_left = (k.co[0] - rng.uniform(0, 8), k.co[1] + rng.normal() * 3)
                k.handle_right = (k.co[0] + rng.uniform(0, 8), k.co[1] + rng.normal() * 3)
        if i % 7 == 0:
            fc.extrapolation = "LINEAR"
        fc.update()
        fcs.append(fc)
    frames = np.arange(-10, 50, dtype=np.float64)
    got = sample_curves("A", fcs, frames)
    for fc, v in zip(fcs, got):
        ref = np.array([fc.evaluate(f) for f in frames])
        np.testing.assert_allclose(v, ref, rtol=1e-5, atol=1e-5, err_msg=fc.data_path)
    n_fast = sum(fe.eligible(fc, *[fe.read_keys(fc)[i] for i in (0, 3)]) for fc in fcs)
    assert n_fast > 10
