"""tools/check_deform.py reads the GPU's vertices back through the vertex variant each item is
drawn with (its vertex class's skinning defines, mtoon_shaders.VERTEX_DEFINES, classified by the
pipeline's FrameInstances), not through a general shader of its own: a broken variant fails the
check."""
from __future__ import annotations

import math

import pytest

import conftest as C
from tools import check_deform, scenes


def _animate(arm, frames=(1, 10, 20), angle=0.8):
    for k, pb in enumerate(arm.pose.bones):
        pb.rotation_mode = "XYZ"
        for j, f in enumerate(frames):
            pb.rotation_euler = (angle * math.sin(j + k), 0.3 * j * ((k % 3) - 1), angle * 0.5 * math.cos(k + j))
            pb.keyframe_insert("rotation_euler", frame=f)


def _variants(out):
    return {k: int(v) for k, v in check_deform.summary_fields(out, "readback-variants:").items()}


@pytest.mark.parametrize("counts, vclass", [((1, 3), "lbs4"), ((1, 5), "lbs8"), ((1, 12), "general")])
def test_readback_uses_the_drawn_variant(empty_scene, capsys, counts, vclass):
    arm, _ob = scenes.build_many_influences(counts=counts)
    _animate(arm)
    rc, out, fields = C.run_deform_check(capsys, "10", "timeline")
    assert rc == 0, out
    assert set(_variants(out)) == {vclass}, out


def test_a_broken_variant_fails_the_check(empty_scene, capsys, monkeypatch):
    """Negative control: the LBS8 variant made static (no skinning) fails the check; the general
    shader the check used to read through would still have passed it."""
    from stylized_renderer.engine.gpu.passes import mtoon_shaders

    arm, _ob = scenes.build_many_influences(counts=(1, 5))
    _animate(arm)
    broken = dict(mtoon_shaders.VERTEX_DEFINES, lbs8=("SKIN_LBS8", "SKIN_STATIC"))
    monkeypatch.setattr(mtoon_shaders, "VERTEX_DEFINES", broken)
    rc, out, fields = C.run_deform_check(capsys, "10", "timeline")
    assert rc == 1 and float(fields["max_rel_error"]) > 1e-3, out
