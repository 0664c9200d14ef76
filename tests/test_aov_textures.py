"""Issue 36 item 2: AOVs whose input is an Image Texture (what the material reader evaluates:
factor x image x colour attribute), drawn per pixel on the GPU and anti-aliased like the other
averaged passes, through F12 into a multilayer EXR, against EEVEE's file of the same scene.

The ground's COLOR AOV is a gradient image x a Multiply factor; its VALUE AOV the same image's
colour through Blender's implicit colour -> float conversion (the luminance: Rec.709
coefficients); the ball keeps constants in both (the constant path, summed with the drawn one);
the box's VALUE AOV comes from a Math node, which Stylized does not evaluate (named in the log)."""
from __future__ import annotations

import bpy
import numpy as np

from support import compositing_scene as S
from support.compositing_scene import interior
from tools import render_capture

FACTOR = (1.0, 0.8, 0.6)
LUMA = (0.2126, 0.7152, 0.0722)


def _gradient(n=32):
    """A float (linear) image: R across u, G across v, B their product; alpha 1."""
    img = bpy.data.images.new("AOVGradient", n, n, float_buffer=True)
    u, v = np.meshgrid((np.arange(n) + 0.5) / n, (np.arange(n) + 0.5) / n)
    px = np.stack([0.1 + 0.8 * u, 0.1 + 0.8 * v, 0.2 + 0.6 * u * v, np.ones_like(u)], -1)
    img.pixels.foreach_set(px.astype(np.float32).ravel())
    img.pack()
    return img


def _output(tree, aov, name=None):
    n = tree.nodes.new("ShaderNodeOutputAOV")
    n.aov_name = aov
    if name:
        n.name = name
    return n


def _scene(scene):
    S.stage(scene)
    layer = scene.view_layers[0]
    layer.aovs.add().name = "texcol"
    val = layer.aovs.add()
    val.name, val.type = "texval", "VALUE"
    img = _gradient()
    grey = bpy.data.materials["Grey"].node_tree
    tex = grey.nodes.new("ShaderNodeTexImage")
    tex.image = img
    mix = grey.nodes.new("ShaderNodeMix")
    mix.data_type, mix.blend_type = "RGBA", "MULTIPLY"
    mix.inputs["Factor"].default_value = 1.0
    grey.links.new(tex.outputs["Color"], mix.inputs["A"])
    mix.inputs["B"].default_value = FACTOR + (1.0,)
    grey.links.new(mix.outputs["Result"], _output(grey, "texcol").inputs["Color"])
    grey.links.new(tex.outputs["Color"], _output(grey, "texval").inputs["Value"])
    red = bpy.data.materials["Red"].node_tree
    _output(red, "texcol").inputs["Color"].default_value = (0.2, 0.4, 0.6, 1.0)
    _output(red, "texval").inputs["Value"].default_value = 0.7
    blue = bpy.data.materials["Blue"].node_tree
    math = blue.nodes.new("ShaderNodeMath")
    math.operation = "SINE"
    blue.links.new(math.outputs[0], _output(blue, "texval", "Wave AOV").inputs["Value"])
    return layer


def test_textured_aovs_match_eevee(empty_scene, tmp_path):
    scene = empty_scene
    _scene(scene)
    scene.stylized.render_samples = 8
    ours = S.render_exr(scene, tmp_path / "ours.exr")
    log = render_capture.LAST_RENDER["log"]
    eevee = S.render_exr(scene, tmp_path / "eevee.exr", engine="EEVEE", samples=8)
    c_o = np.stack([ours[f"ViewLayer.texcol.{c}"] for c in "RGBA"], -1)
    c_e = np.stack([eevee[f"ViewLayer.texcol.{c}"] for c in "RGBA"], -1)
    v_o, v_e = ours["ViewLayer.texval.X"], eevee["ViewLayer.texval.X"]
    # the ground: where EEVEE's colour AOV is drawn and is not the ball's constant (the box has
    # no colour AOV: 0), two pixels in from every edge
    ball = np.all(np.abs(c_e[..., :3] - (0.2, 0.4, 0.6)) < 0.01, -1)
    ground = interior(interior((c_e[..., 3] > 0.5) & ~ball))
    assert np.count_nonzero(ground) > 2000
    # the texture's variation is there (a flat value would fail), and ours holds EEVEE's values
    assert np.ptp(c_o[ground][:, 0]) > 0.3 and np.ptp(c_o[ground][:, 1]) > 0.2, c_o[ground].min(0)
    assert np.abs(c_o[ground] - c_e[ground]).mean() < 0.01, np.abs(c_o[ground] - c_e[ground]).mean(0)
    assert np.abs(c_o[ground] - c_e[ground]).max() < 0.08
    assert np.abs(v_o[ground] - v_e[ground]).mean() < 0.01
    assert np.ptp(v_o[ground]) > 0.2
    # the value is the colour's luminance (Blender's implicit conversion), before the factor
    lum = (c_o[ground][:, :3] / FACTOR) @ LUMA
    assert np.abs(lum - v_o[ground]).max() < 1e-3
    # the ball keeps its constants exactly (summed with the drawn AOV, which is 0 there)
    inner = interior(interior(ball))
    assert np.count_nonzero(inner) > 100
    assert np.abs(c_o[inner] - (0.2, 0.4, 0.6, 1.0)).max() < 1e-6 and np.abs(v_o[inner] - 0.7).max() < 1e-6
    # everywhere but the box (EEVEE evaluates its Math node; ours is 0 there): the same within
    # anti-aliasing on the edges
    # edges (EEVEE's film filter is wider than the samples' box, so an edge pixel differs by
    # up to ~0.2 either way): small on the whole, and the colour AOV's total over the frame (what
    # each surface contributes, whatever the filter) the same; the box's value is EEVEE's alone
    # (its Math node: named in the log, ours is 0 there)
    box = interior(np.abs(v_e - v_o) > 0.05) & ~ground & ~ball
    edge = ~box & ~ground & ~inner
    assert np.abs(c_o - c_e).max(-1)[edge].mean() < 0.02 and np.abs(v_o - v_e)[edge].mean() < 0.03
    assert np.percentile(np.abs(c_o - c_e).max(-1)[~box], 95) < 0.05
    total_o, total_e = c_o.sum((0, 1)), c_e.sum((0, 1))
    assert np.all(np.abs(total_o - total_e) < 0.005 * total_e), (total_o, total_e)
    named = [line for line in log if "AOV Output node 'Wave AOV'" in line]
    assert len(named) == 1 and "'Blue'" in named[0] and "Math" in named[0], log
    assert not [line for line in log if "Grey" in line and "AOV" in line], log


def _attribute_scene(scene):
    """The ground's VALUE AOV from an image's Alpha output (x 0.5 through Math Multiply); the
    ball's COLOR AOV from its colour attribute (a float colour per point, varying with height)."""
    S.stage(scene)
    layer = scene.view_layers[0]
    layer.aovs.add().name = "vcol"
    val = layer.aovs.add()
    val.name, val.type = "alpha", "VALUE"
    n = 32
    img = bpy.data.images.new("AOVAlpha", n, n, float_buffer=True)
    u, v = np.meshgrid((np.arange(n) + 0.5) / n, (np.arange(n) + 0.5) / n)
    img.pixels.foreach_set(np.stack([u, v, u * 0 + 0.5, 0.2 + 0.7 * v], -1).astype(np.float32).ravel())
    img.pack()
    grey = bpy.data.materials["Grey"].node_tree
    tex = grey.nodes.new("ShaderNodeTexImage")
    tex.image = img
    mul = grey.nodes.new("ShaderNodeMath")
    mul.operation = "MULTIPLY"
    grey.links.new(tex.outputs["Alpha"], mul.inputs[0])
    mul.inputs[1].default_value = 0.5
    grey.links.new(mul.outputs[0], _output(grey, "alpha").inputs["Value"])
    ball = bpy.data.objects["Ball"].data
    attr = ball.color_attributes.new("Paint", "FLOAT_COLOR", "POINT")
    z = np.array([vert.co.z for vert in ball.vertices])
    t = (z - z.min()) / (np.ptp(z) or 1.0)
    attr.data.foreach_set("color", np.stack([t, 1.0 - t, t * 0 + 0.25, t * 0 + 1.0], -1).astype(np.float32).ravel())
    ball.color_attributes.render_color_index = ball.color_attributes.active_color_index = 0
    red = bpy.data.materials["Red"].node_tree
    col = red.nodes.new("ShaderNodeVertexColor")
    col.layer_name = "Paint"
    red.links.new(col.outputs["Color"], _output(red, "vcol").inputs["Color"])


def test_alpha_and_colour_attribute_aovs_match_eevee(empty_scene, tmp_path):
    scene = empty_scene
    _attribute_scene(scene)
    scene.stylized.render_samples = 8
    ours = S.render_exr(scene, tmp_path / "ours.exr")
    log = render_capture.LAST_RENDER["log"]
    eevee = S.render_exr(scene, tmp_path / "eevee.exr", engine="EEVEE", samples=8)
    c_o = np.stack([ours[f"ViewLayer.vcol.{c}"] for c in "RGBA"], -1)
    c_e = np.stack([eevee[f"ViewLayer.vcol.{c}"] for c in "RGBA"], -1)
    v_o, v_e = ours["ViewLayer.alpha.X"], eevee["ViewLayer.alpha.X"]
    ball = interior(interior(c_e[..., 3] > 0.5))
    ground = interior(interior(v_e > 0.05)) & ~interior(c_e[..., 3] > 0.01)
    assert np.count_nonzero(ball) > 100 and np.count_nonzero(ground) > 2000
    assert np.ptp(c_o[ball][:, 0]) > 0.3 and np.ptp(v_o[ground]) > 0.15
    assert np.abs(c_o[ball] - c_e[ball]).mean() < 0.01, np.abs(c_o[ball] - c_e[ball]).mean(0)
    assert np.abs(v_o[ground] - v_e[ground]).mean() < 0.01
    assert np.abs(v_o[ground] - v_e[ground]).max() < 0.05
    assert not [line for line in log if "AOV" in line], log


def test_constants_convert_as_blender_does(empty_scene):
    """An RGB node on a VALUE AOV is its luminance, a Value node on a COLOR AOV grey with alpha 1
    (Blender's implicit conversions); an image behind a node the reader does not evaluate
    (Hue/Saturation) is not drawn, and the log names that node."""
    from engine.features.passes import aov

    mat = bpy.data.materials.new("Consts")
    mat.use_nodes = True
    tree = mat.node_tree
    rgb = tree.nodes.new("ShaderNodeRGB")
    rgb.outputs[0].default_value = (0.2, 0.5, 0.8, 1.0)
    tree.links.new(rgb.outputs[0], _output(tree, "val").inputs["Value"])
    value = tree.nodes.new("ShaderNodeValue")
    value.outputs[0].default_value = 0.3
    tree.links.new(value.outputs[0], _output(tree, "col").inputs["Color"])
    tex = tree.nodes.new("ShaderNodeTexImage")
    tex.image = _gradient()
    hue = tree.nodes.new("ShaderNodeHueSaturation")
    tree.links.new(tex.outputs["Color"], hue.inputs["Color"])
    tree.links.new(hue.outputs["Color"], _output(tree, "hue", "Hue AOV").inputs["Color"])
    tree.links.new(tex.outputs["Color"], _output(tree, "tex").inputs["Color"])
    values, lines = aov.material_values(mat, [("val", "VALUE"), ("col", "COLOR"), ("hue", "COLOR"),
                                              ("tex", "COLOR")])
    assert abs(values["val"][0] - float(np.dot((0.2, 0.5, 0.8), LUMA))) < 1e-6
    assert np.allclose(values["col"], (0.3, 0.3, 0.3, 1.0))
    assert "hue" not in values and isinstance(values["tex"], aov.Drawn) and values["tex"].texture.image == tex.image
    assert len(lines) == 1 and "'Hue AOV'" in lines[0] and "'Hue/Saturation/Value'" in lines[0], lines
    # deeper: an evaluated Mix whose input is not evaluated names that input's node
    mix = tree.nodes.new("ShaderNodeMix")
    mix.data_type, mix.blend_type = "RGBA", "MULTIPLY"
    noise = tree.nodes.new("ShaderNodeTexNoise")
    tree.links.new(noise.outputs["Color"], mix.inputs["A"])
    tree.links.new(mix.outputs["Result"], _output(tree, "deep", "Deep AOV").inputs["Color"])
    values, lines = aov.material_values(mat, [("deep", "COLOR")])
    assert values == {} and len(lines) == 1 and "comes from 'Mix'" in lines[0], lines
    assert "not evaluated: node 'Noise Texture' (Noise Texture)" in lines[0], lines
