"""Issue 36 item 1: Cryptomatte Object / Material / Asset in Blender's layout, through F12 into a
multilayer EXR: ranked CryptoObject00.. layers of (id, coverage) pairs and the metadata Blender
writes; a matte decoded from our file (manifest -> id -> coverage summed over the ranks) matches
the one decoded from EEVEE's file of the same scene."""
from __future__ import annotations

import json

import bpy
import numpy as np

import conftest as C
from support import compositing_scene as S
from support.exr_read import read_exr_header


def _encode(hex_id: str) -> np.float32:
    """Blender's float of a manifest id (exponent clamped to 1..254)."""
    h = int(hex_id, 16)
    exp = min(max((h >> 23) & 0xFF, 1), 254)
    return np.array([(h & 0x807FFFFF) | (exp << 23)], np.uint32).view(np.float32)[0]


def matte(channels, header, kind: str, name: str, layer="ViewLayer") -> np.ndarray:
    """Coverage of ``name`` decoded as a compositor does: the manifest of the layer named
    "<layer>.Crypto<kind>" gives its id; its coverage is summed over every ranked layer."""
    full = f"{layer}.Crypto{kind}"
    keys = [k.split("/")[1] for k, v in header.items() if k.endswith("/name") and v == full]
    assert len(keys) == 1, (full, sorted(header))
    k = keys[0]
    assert header[f"cryptomatte/{k}/hash"] == "MurmurHash3_32"
    assert header[f"cryptomatte/{k}/conversion"] == "uint32_to_float32"
    manifest = json.loads(header[f"cryptomatte/{k}/manifest"])
    want = _encode(manifest[name]).view(np.uint32)
    out = np.zeros(channels[f"{full}00.r"].shape, np.float32)
    i = 0
    while f"{full}{i:02d}.r" in channels:
        for id_ch, cov_ch in (("r", "g"), ("b", "a")):
            ids = channels[f"{full}{i:02d}.{id_ch}"].view(np.uint32)
            out += np.where(ids == want, channels[f"{full}{i:02d}.{cov_ch}"], 0.0)
        i += 1
    return out


def _scene(scene):
    ball, box, ground = S.stage(scene)
    box.parent = ball                     # asset: Box belongs to Ball's
    box.matrix_parent_inverse = ball.matrix_world.inverted()
    layer = scene.view_layers[0]
    layer.use_pass_cryptomatte_object = layer.use_pass_cryptomatte_material = True
    layer.use_pass_cryptomatte_asset = True
    return ball, box, ground


def test_cryptomatte_mattes_match_eevee(empty_scene, tmp_path):
    scene = empty_scene
    _scene(scene)
    scene.stylized.render_samples = 8
    ours = S.render_exr(scene, tmp_path / "ours.exr")
    eevee = S.render_exr(scene, tmp_path / "eevee.exr", engine="EEVEE", samples=8)
    h_o, h_e = read_exr_header(tmp_path / "ours.exr"), read_exr_header(tmp_path / "eevee.exr")
    # the layout: the same ranked layers (Levels 6: three RGBA layers per type) and metadata keys
    crypto = lambda ch: sorted(c for c in ch if ".Crypto" in c)          # noqa: E731
    assert crypto(ours) == crypto(eevee) and len(crypto(ours)) == 3 * 3 * 4
    assert sorted(k for k in h_o if k.startswith("cryptomatte/")) == \
        sorted(k for k in h_e if k.startswith("cryptomatte/"))
    mattes = []
    for kind, name in (("Object", "Ball"), ("Object", "Box"), ("Object", "Ground"),
                       ("Material", "Red"), ("Material", "Grey"), ("Asset", "Ball")):
        m_o, m_e = matte(ours, h_o, kind, name), matte(eevee, h_e, kind, name)
        iou = S.coverage_iou(m_o > 0.5, m_e > 0.5)
        assert iou >= 0.95, (kind, name, iou)
        mattes.append(np.concatenate([m_o, m_e], 1))
    # anti-aliased: fractional coverage along edges; the coverages of a pixel sum to at most 1
    # (1 where every sample sees something; less on the horizon, where the sky takes the rest)
    m = matte(ours, h_o, "Object", "Ball")
    assert np.count_nonzero((m > 0.05) & (m < 0.95)) > 20
    total = np.asarray(sum(matte(ours, h_o, "Object", n) for n in ("Ball", "Box", "Ground")))
    assert total.max() <= 1.0 + 1e-5 and np.mean(total[total > 0] > 1.0 - 1e-5) > 0.9
    # the asset matte of Ball holds its child Box too
    asset = matte(ours, h_o, "Asset", "Ball")
    both = matte(ours, h_o, "Object", "Ball") + matte(ours, h_o, "Object", "Box")
    assert np.abs(asset - both).max() < 1e-5 and "Box" not in json.loads(
        next(v for k, v in h_o.items() if k.endswith("manifest") and "Ground" in v and "Red" not in v
             and "Box" not in v))
    img = np.concatenate(mattes, 0)[::-1]        # top to bottom: the mattes in order, ours | EEVEE
    C.save_png(np.stack([img] * 3 + [np.ones_like(img)], -1), C.ARTIFACTS / "cryptomatte_mattes.png")


def test_outlines_carry_their_objects_id(empty_scene, tmp_path):
    """An outline's pixels are in its object's matte (and the Combined there is the outline)."""
    scene = empty_scene
    ball, box, ground = _scene(scene)
    ground.hide_render = True
    scene.render.film_transparent = True
    st = bpy.data.materials["Red"].stylized_mtoon
    st.enabled = True
    st.base_color = (0.8, 0.1, 0.1, 1.0)
    st.outline_width_mode = "worldCoordinates"
    st.outline_width = 0.08
    ours = S.render_exr(scene, tmp_path / "ours.exr")
    h = read_exr_header(tmp_path / "ours.exr")
    alpha = ours["ViewLayer.Combined.A"]
    m = matte(ours, h, "Object", "Ball")
    st.outline_width = 0.0
    plain = S.render_exr(scene, tmp_path / "plain.exr")
    ring = (alpha > 0.5) & (plain["ViewLayer.Combined.A"] < 0.5)        # drawn only as outline
    assert np.count_nonzero(ring) > 30
    assert np.mean(m[ring] > 0.5) > 0.95


def test_skinned_and_morphed_character_parts_get_their_own_ids(ext, tmp_path):
    """The demo character posed (skinned on the GPU, the face's shape keys on, outlines): each
    part's Cryptomatte matte covers what the Object Index pass shows of it."""
    from demo.character import build_demo_scene

    bpy.ops.wm.read_factory_settings(use_empty=True)
    build_demo_scene()
    scene = bpy.context.scene
    scene.render.engine = "STYLIZED"
    scene.render.resolution_x, scene.render.resolution_y = 160, 120
    scene.frame_set(20)
    layer = scene.view_layers[0]
    layer.use_pass_cryptomatte_object = layer.use_pass_object_index = True
    for i, name in enumerate(("DemoBody", "DemoFace", "DemoWand"), start=1):
        bpy.data.objects[name].pass_index = i
    ours = S.render_exr(scene, tmp_path / "demo.exr")
    h = read_exr_header(tmp_path / "demo.exr")
    index_name = "Object Index" if bpy.app.version >= (5, 0, 0) else "IndexOB"
    index = ours[f"ViewLayer.{index_name}.X"]
    for i, name in enumerate(("DemoBody", "DemoFace", "DemoWand"), start=1):
        m = matte(ours, h, "Object", name)
        assert np.count_nonzero(index == i) > 20, name
        iou = S.coverage_iou(m > 0.5, index == i)
        print(f"{name}: matte IoU {iou:.3f} with the Object Index pass")
        assert iou >= 0.9, (name, iou)


def test_compositor_cryptomatte_node_picks_the_matte_by_name(empty_scene, tmp_path):
    """Blender's own Cryptomatte node (source Render, matte "Ball") reads our layers and metadata:
    its matte, written through the compositor, is the ball's matte decoded from our file."""
    scene = empty_scene
    _scene(scene)
    layer_file = S.render_exr(scene, tmp_path / "layers.exr")
    want = matte(layer_file, read_exr_header(tmp_path / "layers.exr"), "Object", "Ball")
    if hasattr(scene, "compositing_node_group"):            # Blender 5.0+
        tree = bpy.data.node_groups.new("Comp", "CompositorNodeTree")
        scene.compositing_node_group = tree
        tree.interface.new_socket("Image", in_out="OUTPUT", socket_type="NodeSocketColor")
        out = tree.nodes.new("NodeGroupOutput").inputs[0]
    else:
        scene.use_nodes = True
        scene.render.use_compositing = True
        tree = scene.node_tree
        for n in list(tree.nodes):
            tree.nodes.remove(n)
        out = tree.nodes.new("CompositorNodeComposite").inputs["Image"]
    rl = tree.nodes.new("CompositorNodeRLayers")
    node = tree.nodes.new("CompositorNodeCryptomatteV2")
    node.source, node.scene = "RENDER", scene
    node.layer_name = "ViewLayer.CryptoObject"
    node.matte_id = "Ball"
    tree.links.new(rl.outputs["Image"], node.inputs["Image"])
    tree.links.new(node.outputs["Matte"], out)
    comp = S.render_exr(scene, tmp_path / "comp.exr", multilayer=False)
    got = comp["R"]
    assert np.count_nonzero(got > 0.5) > 300
    assert S.coverage_iou(got > 0.5, want > 0.5) >= 0.99
    assert np.abs(got - want).max() < 1e-3                  # the same anti-aliased coverage
