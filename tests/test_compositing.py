"""Issue 26 items 1-4: render passes under Blender's names (Depth, Normal, Mist against EEVEE;
IndexOB / IndexMA against Cycles; the toon passes Outline, Shadow, Shade, Rim), view layers
(each into its own layer, with its own visibility), holdout and camera visibility, all through F12
into a multilayer EXR read back with tests/support/exr_read.py."""
from __future__ import annotations

import bpy
import numpy as np
from mathutils import Vector

import conftest as C
from support import compositing_scene as S
from support.compositing_scene import interior
from support.exr_read import layer_pass


def test_depth_normal_mist_passes_match_eevee(empty_scene, tmp_path):
    scene = empty_scene
    S.stage(scene)
    layer = scene.view_layers[0]
    layer.use_pass_z = layer.use_pass_normal = layer.use_pass_mist = True
    ms = scene.world.mist_settings
    ms.start, ms.depth, ms.falloff = 3.0, 9.0, "LINEAR"
    ours = S.render_exr(scene, tmp_path / "ours.exr")
    eevee = S.render_exr(scene, tmp_path / "eevee.exr", engine="EEVEE", samples=1)
    for name in ("ViewLayer.Depth.Z", "ViewLayer.Normal.X", "ViewLayer.Mist.Z"):
        assert name in ours, sorted(ours)
    z_o, z_e = layer_pass(ours, "ViewLayer.Depth", "Z")[..., 0], layer_pass(eevee, "ViewLayer.Depth", "Z")[..., 0]
    C.save_png(np.stack([np.concatenate([z_o, z_e], 1) / 12.0] * 3 + [np.ones((S.H, 2 * S.W))], -1),
               C.ARTIFACTS / "pass_depth.png")
    covered = interior((z_e < 1e9) & (z_o < 1e9))
    assert np.count_nonzero(covered) > 0.5 * S.W * S.H
    rel = np.abs(z_o - z_e)[covered] / z_e[covered]
    assert np.median(rel) < 2e-3 and np.percentile(rel, 95) < 0.02
    # the background: both engines write 1e10
    scene.objects["Ground"].hide_render = True
    ours_bg = S.render_exr(scene, tmp_path / "ours_bg.exr")
    zb = layer_pass(ours_bg, "ViewLayer.Depth", "Z")[..., 0]
    assert np.count_nonzero(zb >= 1e9) > 1000 and zb.max() == np.float32(1e10)
    scene.objects["Ground"].hide_render = False
    n_o = layer_pass(ours, "ViewLayer.Normal", "XYZ")
    n_e = layer_pass(eevee, "ViewLayer.Normal", "XYZ")
    dots = np.sum(n_o * n_e, -1)[covered]
    assert np.percentile(dots, 10) > 0.98, np.percentile(dots, [1, 10, 50])
    m_o, m_e = layer_pass(ours, "ViewLayer.Mist", "Z")[..., 0], layer_pass(eevee, "ViewLayer.Mist", "Z")[..., 0]
    assert 0.05 < np.median(m_e[covered]) < 0.95          # the mist range crosses the scene
    assert np.percentile(np.abs(m_o - m_e)[covered], 95) < 0.01


def test_index_passes_match_cycles(empty_scene, tmp_path):
    scene = empty_scene
    ball, box, ground = S.stage(scene)
    layer = scene.view_layers[0]
    layer.use_pass_object_index = layer.use_pass_material_index = True
    ball.pass_index, box.pass_index, ground.pass_index = 3, 5, 1
    bpy.data.materials["Red"].pass_index = 7
    bpy.data.materials["Blue"].pass_index = 9
    ours = S.render_exr(scene, tmp_path / "ours.exr")
    cyc = S.render_exr(scene, tmp_path / "cycles.exr", engine="CYCLES", samples=1)
    # Blender's names: "Object Index" / "Material Index" since 5.0, "IndexOB" / "IndexMA" in 4.5
    names = ("Object Index", "Material Index") if bpy.app.version >= (5, 0, 0) else ("IndexOB", "IndexMA")
    for name in names:
        o = layer_pass(ours, f"ViewLayer.{name}", "X")[..., 0]
        c = layer_pass(cyc, f"ViewLayer.{name}", "X")[..., 0]
        agree = np.mean(o == c)
        assert agree > 0.97, (name, agree, np.unique(o), np.unique(c))
        assert set(np.unique(o)) == set(np.unique(c)), name


def _toon_scene(scene):
    ball, box, ground = S.stage(scene)
    st = scene.stylized
    st.fxaa = False
    mat = bpy.data.materials["Red"]
    mt = mat.stylized_mtoon
    mt.enabled = True
    mt.base_color = (0.8, 0.1, 0.1, 1.0)
    mt.shade_color = (0.2, 0.02, 0.05)
    mt.outline_width_mode = "worldCoordinates"
    mt.outline_width = 0.05
    mt.outline_color = (0.0, 1.0, 0.0)
    mt.outline_lighting_mix = 0.0
    mt.rim_color = (0.0, 0.0, 0.0)
    scene.objects["Sun"].rotation_euler = (0.0, np.radians(60.0), 0.0)     # from the right: a dark side
    toon = scene.view_layers[0].stylized_passes
    toon.use_outline = toon.use_shadow = toon.use_shade = toon.use_rim = True
    scene.view_layers[0].use_pass_normal = True
    scene.view_layers[0].use_pass_z = True
    return ball, mt


def test_toon_passes_outline_shadow_shade_rim(empty_scene, tmp_path):
    scene = empty_scene
    ball, mt = _toon_scene(scene)
    ch = S.render_exr(scene, tmp_path / "toon.exr")
    for name in ("Outline.A", "Shadow.X", "Shade.X", "Rim.R"):
        assert f"ViewLayer.{name}" in ch, sorted(ch)
    comb = S.combined(ch)
    outline = layer_pass(ch, "ViewLayer.Outline")
    cov = outline[..., 3] > 0.5
    assert np.count_nonzero(cov) > 50
    # Outline against what the outlines change in the Combined (not against our outline shader):
    # with them switched off, Combined = plain; on, plain x (1 - a) + colour x a for the outline's
    # coverage a, so a = (on - plain).(colour - plain) / |colour - plain|^2 per pixel
    scene.stylized.outlines = False
    plain = S.combined(S.render_exr(scene, tmp_path / "plain.exr"))
    scene.stylized.outlines = True
    green = np.array(mt.outline_color[:3])
    d = green - plain[..., :3]
    est = np.clip(np.sum((comb[..., :3] - plain[..., :3]) * d, -1) / np.maximum(np.sum(d * d, -1), 1e-6), 0.0, 1.0)
    changed = np.abs(plain - comb).max(-1) > 1e-4
    assert S.coverage_iou(changed, outline[..., 3] > 1e-4) > 0.95
    region = (est > 0.02) | (outline[..., 3] > 0.02)
    assert np.abs(outline[..., 3] - est)[region].mean() < 0.05, np.abs(outline[..., 3] - est)[region].mean()
    # ... and its colour is the material's outline colour (premultiplied by the coverage)
    np.testing.assert_allclose(outline[..., :3], green * outline[..., 3:4], atol=2e-3)
    # Shadow: 0 where the ground lies in the ball's shadow, and exactly there the ground darkens
    shadow = layer_pass(ch, "ViewLayer.Shadow", "X")[..., 0]
    scene.stylized.shadows = False
    unshadowed = S.combined(S.render_exr(scene, tmp_path / "noshadow.exr"))
    scene.stylized.shadows = True
    darker = (unshadowed[..., 0] - comb[..., 0]) > 0.05
    drawn = layer_pass(ch, "ViewLayer.Depth", "Z")[..., 0] < 1e9          # (the sky receives nothing)
    assert (shadow[~drawn] == 1.0).all()            # the sky receives no shadow (and no stale value)
    assert np.abs(layer_pass(ch, "ViewLayer.Shade", "X")[~drawn]).max() == 0.0
    ground = drawn & (np.ptp(unshadowed[..., :3], axis=-1) < 0.02)       # the grey ground
    C.save_png(np.stack([shadow, darker, ground, np.ones_like(shadow)], -1), C.ARTIFACTS / "pass_shadow.png")
    assert np.count_nonzero(ground & (shadow < 0.5)) > 30
    assert S.coverage_iou(interior(darker) & ground, interior(ground & (shadow < 0.5))) > 0.8
    # Shade: the lit/shade ramp follows N.L on the ball (Normal pass, the sun's direction)
    sun = scene.objects["Sun"]
    L = np.array(sun.matrix_world.to_3x3() @ Vector((0.0, 0.0, 1.0)))
    n = layer_pass(ch, "ViewLayer.Normal", "XYZ")
    ndl = n @ L
    shade = layer_pass(ch, "ViewLayer.Shade", "X")[..., 0]
    red = interior((comb[..., 0] > 2 * comb[..., 2]) & ~cov)
    assert (shade[red & (ndl > 0.3)] > 0.9).mean() > 0.95
    assert (shade[red & (ndl < -0.3)] < 0.1).mean() > 0.95
    # Rim: what the rim adds to the colour
    assert np.abs(layer_pass(ch, "ViewLayer.Rim", "RGB")).max() == 0.0        # black rim: nothing
    mt.rim_color = (0.6, 0.6, 1.0)
    mt.rim_fresnel_power = 2.0
    rimmed = S.render_exr(scene, tmp_path / "rim.exr")
    rim = layer_pass(rimmed, "ViewLayer.Rim", "RGB")
    added = S.combined(rimmed)[..., :3] - comb[..., :3]
    assert rim.max() > 0.2
    np.testing.assert_allclose(rim[red], added[red], atol=2e-4)


def test_passes_not_enabled_make_no_targets(empty_scene, tmp_path):
    from stylized_renderer.engine.blender import render_engine

    scene = empty_scene
    _toon_scene(scene)
    S.render_exr(scene, tmp_path / "with.exr")
    kept = render_engine.kept_final_session()
    assert kept is not None and kept.pipeline is not None and kept.pipeline.pass_targets is not None
    scene.objects["Sun"].rotation_euler = (0.0, np.radians(60.0), 0.0)     # from the right: a dark side
    toon = scene.view_layers[0].stylized_passes
    toon.use_outline = toon.use_shadow = toon.use_shade = toon.use_rim = False
    render_engine.free_final_session()
    ch = S.render_exr(scene, tmp_path / "without.exr")
    kept = render_engine.kept_final_session()
    assert kept is not None and kept.pipeline is not None and kept.pipeline.pass_targets is None
    assert not any(k.startswith("ViewLayer.Outline") for k in ch)


def _transparent(scene):
    scene.render.film_transparent = True
    scene.objects["Ground"].hide_render = True


def test_view_layers_render_each_with_its_own_visibility(empty_scene, tmp_path):
    scene = empty_scene
    S.stage(scene)
    _transparent(scene)
    second = scene.view_layers.new("Second")
    second.layer_collection.children["Character"].exclude = True
    third = scene.view_layers.new("Third")
    third.layer_collection.children["Character"].holdout = True
    ours = S.render_exr(scene, tmp_path / "ours.exr")
    eevee = S.render_exr(scene, tmp_path / "eevee.exr", engine="EEVEE", samples=1)
    ball_px = None
    for name in ("ViewLayer", "Second", "Third"):
        o, e = S.combined(ours, name), S.combined(eevee, name)
        assert S.coverage_iou(o[..., 3] > 0.5, e[..., 3] > 0.5) > 0.9, name
        if name == "ViewLayer":
            ball_px = (o[..., 0] > 2 * o[..., 2]) & (o[..., 3] > 0.99)
            assert np.count_nonzero(ball_px) > 300
        else:
            assert o[ball_px, 3].max() == 0.0 and np.abs(o[ball_px, :3]).max() == 0.0, name
    C.save_png(np.concatenate([S.combined(ours, n) for n in ("ViewLayer", "Second", "Third")], 1),
               C.ARTIFACTS / "view_layers.png")
    # per-layer Use and Render Single Layer: only those layers are in the file
    second.use = False
    assert not any(k.startswith("Second.") for k in S.render_exr(scene, tmp_path / "use.exr"))
    second.use = True
    # Render Single Layer: the layers Blender hands the engine are those EEVEE gets
    scene.render.use_single_layer = True
    layers = lambda ch: {k.split(".")[0] for k in ch}     # noqa: E731
    assert layers(S.render_exr(scene, tmp_path / "single.exr")) == \
        layers(S.render_exr(scene, tmp_path / "single_eevee.exr", engine="EEVEE", samples=1))


def test_holdout_object_and_shader_give_alpha_zero_while_occluding(empty_scene, tmp_path):
    scene = empty_scene
    ball, box, ground = S.stage(scene)
    scene.render.film_transparent = True
    ball.is_holdout = True
    # the cube's material outputs a Holdout shader
    mat = bpy.data.materials["Blue"]
    nt = mat.node_tree
    hold = nt.nodes.new("ShaderNodeHoldout")
    out = next(n for n in nt.nodes if n.type == "OUTPUT_MATERIAL")
    nt.links.new(hold.outputs[0], out.inputs["Surface"])
    ours = S.combined(S.render_exr(scene, tmp_path / "ours.exr"))
    eevee = S.combined(S.render_exr(scene, tmp_path / "eevee.exr", engine="EEVEE", samples=1))
    C.save_png(np.concatenate([ours, eevee], 1), C.ARTIFACTS / "holdout.png")
    hole_e = eevee[..., 3] < 0.5
    hole_o = ours[..., 3] < 0.5
    assert np.count_nonzero(hole_e) > 300
    assert S.coverage_iou(hole_o, hole_e) > 0.9
    assert np.abs(ours[ours[..., 3] == 0.0, :3]).max() == 0.0


def test_camera_ray_visibility_off_hides_but_keeps_the_shadow(empty_scene, tmp_path):
    scene = empty_scene
    ball, box, ground = S.stage(scene)
    scene.stylized.outlines = False
    seen = S.combined(S.render_exr(scene, tmp_path / "seen.exr"))
    ball.visible_camera = False
    ours = S.combined(S.render_exr(scene, tmp_path / "ours.exr"))
    eevee = S.combined(S.render_exr(scene, tmp_path / "eevee.exr", engine="EEVEE", samples=1))
    ball.hide_render = True
    gone = S.combined(S.render_exr(scene, tmp_path / "gone.exr"))
    gone_e = S.combined(S.render_exr(scene, tmp_path / "gone_eevee.exr", engine="EEVEE", samples=1))
    C.save_png(np.concatenate([seen, ours, eevee, gone], 1), C.ARTIFACTS / "camera_visibility.png")
    red = lambda px: (px[..., 0] > 2 * px[..., 2]) & (px[..., 0] > 0.2)   # noqa: E731
    assert np.count_nonzero(red(seen)) > 300
    assert np.count_nonzero(red(ours)) == 0 and np.count_nonzero(red(eevee)) == 0
    # its shadow stays on the ground (darker than with the ball not rendered at all)
    shade_o = (gone[..., 1] - ours[..., 1]) > 0.05
    shade_e = (gone_e[..., 1] - eevee[..., 1]) > 0.05
    assert np.count_nonzero(shade_e) > 30 and np.count_nonzero(shade_o) > 30
    assert S.coverage_iou(shade_o, shade_e) > 0.5


def test_render_layers_node_offers_the_passes(empty_scene):
    """update_render_passes: the compositor's Render Layers node shows the enabled passes (and
    follows the toon switches)."""
    scene = empty_scene
    layer = scene.view_layers[0]
    layer.use_pass_z = layer.use_pass_mist = True
    layer.stylized_passes.use_outline = layer.stylized_passes.use_shade = True
    if hasattr(scene, "compositing_node_group"):       # Blender 5.0+
        tree = bpy.data.node_groups.new("Compositing", "CompositorNodeTree")
        scene.compositing_node_group = tree
    else:
        scene.use_nodes = True
        tree = scene.node_tree
    node = tree.nodes.new("CompositorNodeRLayers")
    shown = lambda: {o.name for o in node.outputs if o.enabled}      # noqa: E731
    assert {"Depth", "Mist", "Outline", "Shade"} <= shown()
    layer.stylized_passes.use_shade = False
    assert "Shade" not in shown() and "Outline" in shown()


def test_layer_passes_panel_draws_every_switch(empty_scene):
    """View Layer > Passes (our panel): Blender's data and index switches and every toon pass."""
    from types import SimpleNamespace

    from stylized_renderer.panels import render_panel
    from support.panels import draw_logged

    ctx = SimpleNamespace(scene=empty_scene, view_layer=empty_scene.view_layers[0], engine="STYLIZED")
    panel = render_panel.STYLIZED_PT_layer_passes
    assert panel.poll(ctx) and not panel.poll(SimpleNamespace(view_layer=ctx.view_layer, engine="CYCLES"))
    drawn = {a for k, a in draw_logged(panel, ctx) if k == "prop"}
    toon = {p.identifier for p in ctx.view_layer.stylized_passes.bl_rna.properties if p.identifier.startswith("use_")}
    assert toon == {"use_outline", "use_shadow", "use_shade", "use_rim"}
    assert toon | {"use_pass_z", "use_pass_mist", "use_pass_normal", "use_pass_object_index",
                   "use_pass_material_index"} <= drawn


def test_viewport_reads_visibility_only_after_an_update(empty_scene, view_session):
    """Item 5: the viewport re-reads holdouts / camera visibility only when a depsgraph update may
    have changed them; a Ray Visibility > Camera switch made in between is still seen."""
    import math

    from conftest import look_at, perspective
    from support.viewport import CapturedUpdates, draw

    scene = empty_scene
    ball, box, _ground = S.stage(scene)
    session = view_session
    view, proj = look_at((0.0, -7.0, 2.5)), perspective(math.radians(40), 160 / 120)
    captured = CapturedUpdates()
    try:
        session.sync(bpy.context.evaluated_depsgraph_get())
        draw(session, view, proj, False, 160, 120)
        reads = session.visibility.reads
        assert reads >= 1 and "Ball" not in session.last_frame.camera_hidden
        captured.take()
        for _ in range(3):                                  # redraws without updates: not re-read
            draw(session, view, proj, False, 160, 120)
        assert session.visibility.reads == reads
        ball.visible_camera = False
        session.sync(bpy.context.evaluated_depsgraph_get(), captured.take())
        px = draw(session, view, proj, False, 160, 120)
        assert session.visibility.reads == reads + 1
        assert ball.name in session.last_frame.camera_hidden
        ball.visible_camera = True
        session.sync(bpy.context.evaluated_depsgraph_get(), captured.take())
        px_back = draw(session, view, proj, False, 160, 120)
        assert ball.name not in session.last_frame.camera_hidden
        assert np.abs(px_back[..., :3] - px[..., :3]).max() > 0.1    # the ball drawn again
    finally:
        captured.close()


def test_passes_are_averaged_over_the_samples(empty_scene, tmp_path):
    """Item 3: with Render Samples > 1 the Outline, Normal, Shadow, Shade, Rim and Mist passes are
    averaged over the samples as the Combined is (EEVEE accumulates them); Depth and the index
    passes keep the centre sample's exact value (EEVEE's Depth, Cycles' index passes)."""
    scene = empty_scene
    ball, mt = _toon_scene(scene)
    layer = scene.view_layers[0]
    layer.use_pass_object_index = layer.use_pass_mist = True
    ball.pass_index = 4
    scene.stylized.render_samples = 1
    one = S.render_exr(scene, tmp_path / "one.exr")
    scene.stylized.render_samples = 8
    ch = S.render_exr(scene, tmp_path / "eight.exr")
    scene.stylized.outlines = False
    plain = S.combined(S.render_exr(scene, tmp_path / "plain8.exr"))
    scene.stylized.outlines = True
    comb = S.combined(ch)
    outline = layer_pass(ch, "ViewLayer.Outline")
    # the outline's coverage: fractional on its edges, and what the outlines add to the Combined
    green = np.array(mt.outline_color[:3])
    d = green - plain[..., :3]
    est = np.clip(np.sum((comb[..., :3] - plain[..., :3]) * d, -1) / np.maximum(np.sum(d * d, -1), 1e-6), 0.0, 1.0)
    a = outline[..., 3]
    C.save_png(np.concatenate([np.stack([a] * 3 + [np.ones_like(a)], -1), np.stack([est] * 3 + [np.ones_like(a)], -1),
                               comb], 1), C.ARTIFACTS / "pass_outline_samples.png")
    assert np.count_nonzero((a > 0.05) & (a < 0.95)) > 20
    region = (est > 0.02) | (a > 0.02)
    assert np.abs(a - est)[region].mean() < 0.05, np.abs(a - est)[region].mean()
    # Normal, Shade, Mist: averaged across the ball's silhouette (a mix of two surfaces' values)
    n_len = np.linalg.norm(layer_pass(ch, "ViewLayer.Normal", "XYZ"), axis=-1)
    mixed = (n_len > 0.05) & (n_len < 0.97)
    assert np.count_nonzero(mixed) > 20
    assert not ((n_len > 0.05) & (n_len < 0.97))[interior(n_len > 0.999)].any()
    m1 = layer_pass(one, "ViewLayer.Mist", "Z")[..., 0]
    m8 = layer_pass(ch, "ViewLayer.Mist", "Z")[..., 0]
    assert np.count_nonzero(np.abs(m8 - m1) > 1e-3) > 20          # silhouettes mixed ...
    assert np.abs(m8 - m1).mean() < 0.01                           # ... the rest as one sample's
    # Depth and the object index: the centre sample's, exactly as with one sample
    for name, ids in (("Depth", "Z"), (render_passes_name("IndexOB"), "X")):
        np.testing.assert_array_equal(layer_pass(ch, f"ViewLayer.{name}", ids), layer_pass(one, f"ViewLayer.{name}", ids))
    assert set(np.unique(layer_pass(ch, "ViewLayer." + render_passes_name("IndexOB"), "X"))) <= {0.0, 4.0}


def render_passes_name(name):
    from stylized_renderer.engine.gpu.passes.render_passes import blender_name

    return blender_name(name)


def _glass(scene, alpha):
    """A plane between the camera and the ball, BLEND with ``alpha`` (the Principled Alpha)."""
    import math

    bpy.ops.mesh.primitive_plane_add(size=1.6, location=(-0.4, -2.0, 1.2), rotation=(math.radians(90), 0.0, 0.0))
    glass = bpy.context.active_object
    glass.name = "Glass"
    mat = C.add_material("Glass", (0.9, 0.9, 0.9, 1.0))
    bsdf = next(n for n in mat.node_tree.nodes if n.type == "BSDF_PRINCIPLED")
    bsdf.inputs["Alpha"].default_value = alpha
    if hasattr(mat, "surface_render_method"):
        mat.surface_render_method = "BLENDED"
    else:
        mat.blend_method = "BLEND"
    glass.data.materials.append(mat)
    glass.pass_index = 6
    return glass, bsdf


def test_blend_surfaces_in_index_and_toon_passes(empty_scene, tmp_path):
    """Item 2: a BLEND surface writes the Object Index where its alpha reaches the view layer's
    Alpha Threshold, else what lies behind shows: Cycles' index comes from its first sample's
    camera path, which stops at a surface that opaque and passes a thinner one with probability
    1 - alpha (compared at alpha 0.7 and 0.01, where Cycles' result is certain or nearly so). It
    is composited into the toon passes as into the Combined: Shade = alpha x its own + (1 - alpha)
    x what lies behind."""
    scene = empty_scene
    ball, box, ground = S.stage(scene)
    ball.pass_index, box.pass_index, ground.pass_index = 3, 5, 1
    layer = scene.view_layers[0]
    layer.use_pass_object_index = True
    layer.stylized_passes.use_shade = True
    glass, bsdf = _glass(scene, 0.7)
    name = render_passes_name("IndexOB")
    seen = {}
    for alpha in (0.7, 0.01):
        bsdf.inputs["Alpha"].default_value = alpha
        ours = layer_pass(S.render_exr(scene, tmp_path / f"o{alpha}.exr"), f"ViewLayer.{name}", "X")[..., 0]
        cyc = layer_pass(S.render_exr(scene, tmp_path / f"c{alpha}.exr", engine="CYCLES", samples=1),
                         f"ViewLayer.{name}", "X")[..., 0]
        assert np.mean(ours == cyc) > 0.97, (alpha, np.mean(ours == cyc))
        seen[alpha] = np.count_nonzero(ours == 6)
    assert seen[0.7] > 200 and seen[0.01] == 0, seen
    layer.pass_alpha_threshold = 0.8                                # the threshold is the view layer's
    bsdf.inputs["Alpha"].default_value = 0.7
    ours = layer_pass(S.render_exr(scene, tmp_path / "o_thr.exr"), f"ViewLayer.{name}", "X")[..., 0]
    assert np.count_nonzero(ours == 6) == 0
    layer.pass_alpha_threshold = 0.5
    # Shade composited: alpha x the glass's own (rendered opaque) + (1 - alpha) x what is behind
    bsdf.inputs["Alpha"].default_value = 0.7
    shade = layer_pass(S.render_exr(scene, tmp_path / "s.exr"), "ViewLayer.Shade", "X")[..., 0]
    glass.hide_render = True
    behind = layer_pass(S.render_exr(scene, tmp_path / "behind.exr"), "ViewLayer.Shade", "X")[..., 0]
    glass.hide_render = False
    bsdf.inputs["Alpha"].default_value = 1.0
    own_ch = S.render_exr(scene, tmp_path / "own.exr")
    own = layer_pass(own_ch, "ViewLayer.Shade", "X")[..., 0]
    covered = interior(layer_pass(own_ch, f"ViewLayer.{name}", "X")[..., 0] == 6)
    C.save_png(np.stack([np.concatenate([shade, behind, own], 1)] * 3 + [np.ones((S.H, 3 * S.W))], -1),
               C.ARTIFACTS / "pass_shade_blend.png")
    assert np.count_nonzero(covered) > 200
    assert np.abs(shade - (0.7 * own + 0.3 * behind))[covered].max() < 0.02
    assert np.abs(shade - behind)[covered].max() > 0.1          # (the glass changes it)
