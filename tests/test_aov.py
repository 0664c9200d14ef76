"""Issue 36 item 2: the view layer's AOVs filled from the materials' AOV Output nodes (constants,
and constants through RGB / Value nodes), through F12 into a multilayer EXR, against EEVEE's file
of the same scene; an input Stylized does not evaluate is named in the log with its material and
node."""
from __future__ import annotations

import bpy
import numpy as np

from support import compositing_scene as S
from support.compositing_scene import interior
from tools import render_capture


def _aov_scene(scene):
    S.stage(scene)
    layer = scene.view_layers[0]
    layer.aovs.add().name = "myaov"
    val = layer.aovs.add()
    val.name, val.type = "myval", "VALUE"
    red = bpy.data.materials["Red"].node_tree
    n = red.nodes.new("ShaderNodeOutputAOV")
    n.aov_name = "myaov"
    n.inputs["Color"].default_value = (0.2, 0.4, 0.6, 1.0)
    v = red.nodes.new("ShaderNodeValue")
    v.outputs[0].default_value = 0.7
    n2 = red.nodes.new("ShaderNodeOutputAOV")
    n2.aov_name = "myval"
    red.links.new(v.outputs[0], n2.inputs["Value"])
    blue = bpy.data.materials["Blue"].node_tree
    n3 = blue.nodes.new("ShaderNodeOutputAOV")
    n3.name = "Glow AOV"
    n3.aov_name = "myaov"
    tex = blue.nodes.new("ShaderNodeTexChecker")
    blue.links.new(tex.outputs["Color"], n3.inputs["Color"])
    return layer


def test_aovs_hold_the_materials_values_as_eevee(empty_scene, tmp_path):
    scene = empty_scene
    _aov_scene(scene)
    scene.stylized.render_samples = 8
    ours = S.render_exr(scene, tmp_path / "ours.exr")
    log = render_capture.LAST_RENDER["log"]
    eevee = S.render_exr(scene, tmp_path / "eevee.exr", engine="EEVEE", samples=4)
    for ch in ("myaov.R", "myaov.G", "myaov.B", "myaov.A", "myval.X"):
        assert f"ViewLayer.{ch}" in ours and f"ViewLayer.{ch}" in eevee, sorted(ours)
    c_o = np.stack([ours[f"ViewLayer.myaov.{c}"] for c in "RGB"], -1)
    c_e = np.stack([eevee[f"ViewLayer.myaov.{c}"] for c in "RGB"], -1)
    v_o, v_e = ours["ViewLayer.myval.X"], eevee["ViewLayer.myval.X"]
    ball = interior(interior(np.all(np.abs(c_e - (0.2, 0.4, 0.6)) < 0.01, -1)))
    assert np.count_nonzero(ball) > 100
    assert np.abs(c_o[ball] - (0.2, 0.4, 0.6)).max() < 1e-6 and np.abs(v_o[ball] - 0.7).max() < 1e-6
    assert np.abs(v_e[ball] - 0.7).max() < 2e-3                          # (EEVEE writes half floats)
    # everywhere: the same within anti-aliasing on the ball's edge (the checker on the box is
    # EEVEE's alone: it is named in the log, ours is 0 there)
    box = np.any(np.abs(c_e - (0.2, 0.4, 0.6)) > 0.05, -1) & np.any(c_e > 0, -1)
    rest = interior(interior(~box))
    assert np.percentile(np.abs(v_o - v_e)[rest], 99) < 0.02
    assert np.percentile(np.abs(c_o - c_e).max(-1)[rest], 99) < 0.02
    edge = (v_o > 0.05) & (v_o < 0.65)
    assert np.count_nonzero(edge) > 20                  # anti-aliased: the edge averages the samples
    named = [line for line in log if "AOV Output node 'Glow AOV'" in line]
    assert len(named) == 1 and "'Blue'" in named[0] and "Checker Texture" in named[0], log
    assert not [line for line in log if "not written by Stylized" in line and "myaov" in line], log
