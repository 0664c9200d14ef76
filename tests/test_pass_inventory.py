"""Issue 36 item 6, nothing silent: every pass the view layer enables that Stylized does not write
is named once per render in the log (and listed by the Stats panel), and EEVEE's pass set on the
same view layer is contained in what we write plus what we name."""
from __future__ import annotations

from support import compositing_scene as S
from tools import render_capture

#: what a compositor enables (issue 36): Blender's switches and one AOV
ENABLED = ("use_pass_z", "use_pass_mist", "use_pass_normal", "use_pass_diffuse_color", "use_pass_emit",
           "use_pass_ambient_occlusion", "use_pass_position", "use_pass_vector", "use_pass_shadow",
           "use_pass_cryptomatte_object", "use_pass_cryptomatte_material", "use_pass_cryptomatte_asset")


def _enable_all(layer):
    for name in ENABLED + ("use_pass_diffuse_direct",):
        setattr(layer, name, True)
    layer.aovs.add().name = "myaov"


def _pass_names(channels, layer="ViewLayer"):
    """The pass names of ``layer`` in a multilayer EXR's channels (Cryptomatte's ranked layers
    CryptoObject00.. under their pass name)."""
    out = set()
    for ch in channels:
        parts = ch.split(".")
        if len(parts) == 3 and parts[0] == layer:
            name = parts[1]
            if name.startswith("Crypto") and name[-2:].isdigit():
                name = name[:-2]
            out.add(name)
    return out


def test_unwritten_passes_are_named_once_and_eevee_passes_are_covered(empty_scene, tmp_path):
    scene = empty_scene
    S.stage(scene)
    layer = scene.view_layers[0]
    _enable_all(layer)
    ours = S.render_exr(scene, tmp_path / "ours.exr")
    log = render_capture.LAST_RENDER["log"]
    named = [line for line in log if "not written by Stylized" in line]
    assert len(named) == 1, log                                     # once per render
    eevee = S.render_exr(scene, tmp_path / "eevee.exr", engine="EEVEE", samples=1)
    emit = layer.bl_rna.properties["use_pass_emit"].name            # "Emission" ("Emit" in 4.5)
    label = {"Depth": "Z", "DiffCol": "Diffuse Color", "Emit": emit, "AO": "Ambient Occlusion",
             "Vector": "Vector", "Position": "Position", "Shadow": "Shadow", "myaov": "AOV 'myaov'",
             "CryptoObject": "Cryptomatte Object", "CryptoMaterial": "Cryptomatte Material",
             "CryptoAsset": "Cryptomatte Asset"}
    direct = layer.bl_rna.properties["use_pass_diffuse_direct"].name  # (not written: named)
    label.update({"DiffDir": direct, "Diffuse Direct": direct})
    missing = _pass_names(eevee) - _pass_names(ours)
    assert missing, "every EEVEE pass written: this test would no longer check the naming"
    for name in sorted(missing):
        assert f"{label.get(name, name)}" in named[0], (name, named[0])
    for written in _pass_names(ours) - {"Combined"}:      # what is written is not named
        assert f" {label.get(written, written)}," not in named[0] + ",", (written, named[0])
    # nothing enabled beyond what we write: no line
    for name in ENABLED + ("use_pass_diffuse_direct",):
        setattr(layer, name, False)
    layer.aovs.remove(layer.aovs[0])
    layer.use_pass_z = True
    S.render_exr(scene, tmp_path / "plain.exr")
    assert not [line for line in render_capture.LAST_RENDER["log"] if "not written" in line]


def test_motion_blur_is_named_while_it_is_not_applied(empty_scene, tmp_path):
    """Render > Motion Blur spreads the samples over the shutter (issue 36 item 5): with one
    render sample it cannot, and an F12 with it on names it in the log line of what is not
    written, and the Stats panel lists it; with 8 samples (applied) or off, nothing is named."""
    from stylized_renderer.panels import viewport_panels as vp
    from support.panels import Ctx, draw_panel

    scene = empty_scene
    S.stage(scene)
    scene.render.use_motion_blur = True
    scene.stylized.render_samples = 8
    S.render_exr(scene, tmp_path / "applied.exr")
    assert not [line for line in render_capture.LAST_RENDER["log"] if "not written" in line]
    scene.stylized.render_samples = 1
    S.render_exr(scene, tmp_path / "blur.exr")
    named = [line for line in render_capture.LAST_RENDER["log"] if "not written by Stylized" in line]
    assert len(named) == 1 and "Motion Blur" in named[0], render_capture.LAST_RENDER["log"]
    labels = draw_panel(vp.STYLIZED_PT_viewport_stats, Ctx(scene, None)).labels()
    assert [lab for lab in labels if "Motion Blur" in lab], labels
    scene.render.use_motion_blur = False
    S.render_exr(scene, tmp_path / "sharp.exr")
    assert not [line for line in render_capture.LAST_RENDER["log"] if "not written" in line]


def test_stats_panel_lists_the_unwritten_passes(empty_scene):
    from stylized_renderer.panels import viewport_panels as vp
    from support.panels import Ctx, draw_panel

    layer = empty_scene.view_layers[0]
    _enable_all(layer)
    labels = draw_panel(vp.STYLIZED_PT_viewport_stats, Ctx(empty_scene, None)).labels()
    head = [lab for lab in labels if lab.startswith("Passes not written")]
    assert head, labels
    assert "Shadow" not in labels, labels            # Blender's switch: the toon Shadow pass
    assert layer.bl_rna.properties["use_pass_diffuse_direct"].name in labels, labels   # (not written)
    emit = layer.bl_rna.properties["use_pass_emit"].name            # "Emission" ("Emit" in 4.5)
    for written in ("Z", "Mist", "Normal", "Position", "Diffuse Color", emit, "Cryptomatte Object", "AOV 'myaov'",
                    "Ambient Occlusion", "Vector"):
        assert written not in labels, (written, labels)
    for name in ENABLED + ("use_pass_diffuse_direct",):
        setattr(layer, name, False)
    layer.aovs.remove(layer.aovs[0])
    labels = draw_panel(vp.STYLIZED_PT_viewport_stats, Ctx(empty_scene, None)).labels()
    assert not [lab for lab in labels if lab.startswith("Passes not written")]


def test_blenders_shadow_switch_writes_the_toon_shadow_pass(empty_scene, tmp_path):
    """Blender's *Shadow* switch (``use_pass_shadow``, EEVEE's Shadow pass: RGB, 1 = lit) writes
    our toon Shadow pass under EEVEE's name and layout, and is no longer named as not written;
    its values are the toon switch's."""
    import numpy as np

    from support.exr_read import layer_pass

    scene = empty_scene
    S.stage(scene)
    layer = scene.view_layers[0]
    layer.use_pass_z = True
    layer.use_pass_shadow = True
    ch = S.render_exr(scene, tmp_path / "switch.exr")
    assert not [line for line in render_capture.LAST_RENDER["log"] if "not written" in line], \
        render_capture.LAST_RENDER["log"]
    rgb = layer_pass(ch, "ViewLayer.Shadow", "RGB")
    assert np.array_equal(rgb[..., 0], rgb[..., 1]) and np.array_equal(rgb[..., 0], rgb[..., 2])
    drawn = layer_pass(ch, "ViewLayer.Depth", "Z")[..., 0] < 1e9
    assert (rgb[~drawn] == 1.0).all()
    assert np.count_nonzero(drawn & (rgb[..., 0] < 0.5)) > 30          # the ball's shadow on the ground
    layer.use_pass_shadow = False
    layer.stylized_passes.use_shadow = True
    toon = layer_pass(S.render_exr(scene, tmp_path / "toon.exr"), "ViewLayer.Shadow", "X")[..., 0]
    np.testing.assert_allclose(rgb[..., 0], toon, atol=1e-6)
