"""What Blender loses too, named (issue 27, items 7 and 14): missing image files, objects whose every
material is fully transparent, hair curves (drawn as ribbons, named as a fallback), and objects
disabled in renders (never named).  Every check renders through F12 (``bpy.ops.render.render``)
and reads the render result, the F12/farm log and the session's stats (what the Stats panel shows)."""
from __future__ import annotations

import os

import bpy
import numpy as np
import pytest

from conftest import TESTDATA, add_camera, add_material, add_mesh_object, add_sun, render_eevee, render_scene
from tools import render_capture  # noqa: E402  (F12 results: the hook the tests install)


def _log() -> list:
    return list(render_capture.LAST_RENDER.get("log") or [])


def _stats() -> dict:
    return dict(render_capture.LAST_RENDER.get("stats") or {})


def _plane(scene, name, x, material):
    s = 0.9
    return add_mesh_object(scene, name, [(-s, 0, -s), (s, 0, -s), (s, 0, s), (-s, 0, s)], [(0, 1, 2, 3)],
                           location=(x, 0, 0), material=material)


def _image_material(name, image):
    mat = add_material(name, (0.8, 0.8, 0.8))
    nt = mat.node_tree
    tex = nt.nodes.new("ShaderNodeTexImage")
    tex.image = image
    bsdf = next(n for n in nt.nodes if n.type == "BSDF_PRINCIPLED")
    nt.links.new(tex.outputs["Color"], bsdf.inputs["Base Color"])
    return mat


def _file_image(name, path, color):
    img = bpy.data.images.new(name, 4, 4)
    img.pixels.foreach_set(np.tile(np.array(color, np.float32), 16))
    img.filepath_raw = str(path)
    img.file_format = "PNG"
    img.save()
    img.source = "FILE"
    img.reload()
    return img


# ------------------------------------------------------------------------------------------------
# 7. missing image files
# ------------------------------------------------------------------------------------------------

def test_missing_image_is_named_once_with_its_materials(empty_scene, tmp_path):
    scene = empty_scene
    add_camera(scene)
    add_sun(scene, rotation=(1.5707963, 0.0, 0.0), strength=3.0)
    gone = _file_image("Skin_BaseColor", tmp_path / "skin.png", (0.2, 0.6, 0.2, 1.0))
    kept = _file_image("Cloth_BaseColor", tmp_path / "cloth.png", (0.2, 0.2, 0.6, 1.0))
    _plane(scene, "Body", -1.0, _image_material("Skin", gone))
    _plane(scene, "Face", 1.0, _image_material("FaceSkin", gone))
    _plane(scene, "Shirt", 0.0, _image_material("Cloth", kept)).location.z = -1.5
    os.remove(tmp_path / "skin.png")
    gone.reload()

    px = render_scene(scene)
    # Blender's magenta for an image it cannot read, on both planes that use it
    body = px[60, 40, :3]
    assert body[0] > 0.3 and body[2] > 0.3 and body[1] < 0.05 * body[0], body
    lines = [l for l in _log() if "image '" in l]
    assert len(lines) == 1, _log()
    line = lines[0]
    assert line.startswith(f"Stylized frame {scene.frame_current}: image 'Skin_BaseColor' of materials "), line
    assert "'FaceSkin'" in line and "'Skin'" in line and "skin.png" in line and "not found" in line, line
    assert "Cloth_BaseColor" not in " ".join(_log())
    assert line.split(": ", 1)[1] in _stats()["losses"]

    # the file restored between renders: nothing named any more
    _file_image("restored", tmp_path / "skin.png", (0.2, 0.6, 0.2, 1.0))
    gone.reload()
    px = render_scene(scene)
    assert not [l for l in _log() if "image '" in l], _log()
    assert px[60, 40, 1] > px[60, 40, 0]          # green again


def test_missing_image_in_the_stats_panel(empty_scene, tmp_path, view_session):
    """The viewport's Stats panel lists the same line (viewport session through draw_view)."""
    from conftest import look_at, perspective
    from stylized_renderer.panels import viewport_panels as vp
    from support.panels import Ctx, draw_panel
    from support.viewport import draw

    scene = empty_scene
    add_sun(scene, rotation=(1.5707963, 0.0, 0.0), strength=3.0)
    gone = _file_image("Skin_BaseColor", tmp_path / "skin.png", (0.2, 0.6, 0.2, 1.0))
    _plane(scene, "Body", 0.0, _image_material("Skin", gone))
    os.remove(tmp_path / "skin.png")
    gone.reload()
    draw(view_session, look_at((0.0, -6.0, 0.0)), perspective(0.7, 1.5), False, 150, 100)
    labels = draw_panel(vp.STYLIZED_PT_viewport_stats, Ctx(scene, None)).labels()
    assert "Missing or invisible: 1" in labels, labels
    hits = [l for l in labels if l.startswith("image 'Skin_BaseColor' of material 'Skin' is missing")]
    assert len(hits) == 1, labels


# ------------------------------------------------------------------------------------------------
# 7. every material fully transparent
# ------------------------------------------------------------------------------------------------

def test_fully_transparent_fbx_character_is_named(ext):
    path = TESTDATA / "rigs" / "Quaternius_FemaleCasual_fbx.blend"
    if not path.exists():
        pytest.skip(f"{path} not present")
    bpy.ops.wm.open_mainfile(filepath=str(path))
    scene = bpy.context.scene
    scene.render.engine = "STYLIZED"
    scene.render.resolution_x, scene.render.resolution_y, scene.render.resolution_percentage = 160, 120, 100
    scene.render.film_transparent = True
    px = render_scene(scene)
    assert int((px[..., 3] > 0.01).sum()) == 0          # empty, as in EEVEE (alpha 0 everywhere)
    lines = [l for l in _log() if "fully transparent" in l]
    assert len(lines) == 1, _log()
    assert lines[0].startswith(f"Stylized frame {scene.frame_current}: object 'Female' is invisible: every "
                               "material is fully transparent"), lines
    assert "'Skin'" in lines[0] and "'Hair'" in lines[0]


def test_object_with_one_visible_material_is_not_named(empty_scene):
    scene = empty_scene
    add_camera(scene)
    add_sun(scene, rotation=(1.5707963, 0.0, 0.0), strength=3.0)
    clear = add_material("Glass", (0.5, 0.5, 0.5))
    bsdf = next(n for n in clear.node_tree.nodes if n.type == "BSDF_PRINCIPLED")
    bsdf.inputs["Alpha"].default_value = 0.0
    ghost = _plane(scene, "Ghost", -1.0, clear)
    both = _plane(scene, "Window", 1.0, clear)
    both.data.materials.append(add_material("Frame", (0.8, 0.2, 0.2)))
    both.data.polygons[0].material_index = 1
    render_scene(scene)
    lines = [l for l in _log() if "fully transparent" in l]
    assert len(lines) == 1 and "object 'Ghost'" in lines[0] and "(alpha 0: 'Glass')" in lines[0], _log()
    assert ghost.name == "Ghost"
    # an Alpha Clip below its threshold (our MToon properties, MASK 0.3 < 0.5): invisible too
    clip = add_material("Leaf", (0.2, 0.8, 0.2))
    clip.stylized_mtoon.enabled = True
    clip.stylized_mtoon.alpha_mode = "MASK"
    clip.stylized_mtoon.alpha_cutoff = 0.5
    clip.stylized_mtoon.base_color = (0.2, 0.8, 0.2, 0.3)
    leaf = _plane(scene, "Leaf", 0.0, clip)
    leaf.location.z = 1.5
    px = render_scene(scene)
    lines = [l for l in _log() if "object 'Leaf'" in l]
    assert lines == [f"Stylized frame {scene.frame_current}: object 'Leaf' is invisible: every material is fully "
                     "transparent (alpha below the clip threshold: 'Leaf'), as in Blender"], _log()
    leaf.hide_render = True
    assert np.array_equal(render_scene(scene), px)        # it drew nothing: the line is true


# ------------------------------------------------------------------------------------------------
# 14. Disable in Renders is never named
# ------------------------------------------------------------------------------------------------

def test_object_disabled_in_renders_is_not_named(empty_scene):
    scene = empty_scene
    add_camera(scene)
    add_sun(scene, rotation=(1.5707963, 0.0, 0.0), strength=3.0)
    mat = add_material("Grey", (0.5, 0.5, 0.5))
    hidden = _plane(scene, "Hidden", -1.0, mat)
    shown = _plane(scene, "Shown", 1.0, mat)
    for ob in (hidden, shown):
        ob.modifiers.new("Bevel", "BEVEL")
    hidden.hide_render = True
    render_scene(scene)
    log = _log()
    assert any("object 'Shown' is drawn from Blender's evaluated mesh" in l for l in log), log
    assert not any("'Hidden'" in l for l in log), log
    assert "Hidden" not in {name for name, _ in _stats()["fallbacks"]}


# ------------------------------------------------------------------------------------------------
# 14. hair curves
# ------------------------------------------------------------------------------------------------

def hair_scene(scene, strands=300, points=4, radius=None):
    """A sphere with ``strands`` straight hairs (bpy.data.hair_curves, headless on 4.5-5.2), a
    brown hair material, a camera and a sun; returns (sphere, hair object)."""
    import bmesh

    add_camera(scene, location=(0.0, -8.0, 0.0))
    add_sun(scene, rotation=(0.6, 0.0, 0.3), strength=3.0)
    me = bpy.data.meshes.new("Head")
    bm = bmesh.new()
    bmesh.ops.create_uvsphere(bm, u_segments=32, v_segments=16, radius=1.0)
    bm.to_mesh(me)
    bm.free()
    head = bpy.data.objects.new("Head", me)
    scene.collection.objects.link(head)
    me.materials.append(add_material("SkinTone", (0.8, 0.6, 0.5)))
    hc = bpy.data.hair_curves.new("Hair")
    hc.add_curves([points] * strands)
    rng = np.random.default_rng(1)
    d = rng.normal(size=(strands, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    t = np.linspace(0.0, 0.6, points)
    # out from the surface, falling under their weight (curved: Catmull-Rom strands)
    fall = np.array([0.0, 0.0, -1.0])[None, None, :] * (t ** 2)[None, :, None]
    pos = (d[:, None, :] * (1.0 + t[None, :, None]) + fall).reshape(-1, 3).astype(np.float32)
    hc.position_data.foreach_set("vector", pos.ravel())
    if radius is not None:
        hc.attributes.new("radius", "FLOAT", "POINT").data.foreach_set(
            "value", np.full(len(hc.points), radius, np.float32))
    hc.materials.append(add_material("HairBrown", (0.35, 0.12, 0.03)))
    hair = bpy.data.objects.new("Hair", hc)
    scene.collection.objects.link(hair)
    return head, hair


def _dilate(mask: np.ndarray) -> np.ndarray:
    out = mask.copy()
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            out |= np.roll(np.roll(mask, dy, 0), dx, 1)
    return out


@pytest.mark.parametrize("shape,radius", [("STRAND", None), ("STRIP", 0.03)])
def test_hair_curves_cover_what_eevee_covers(empty_scene, tmp_path, shape, radius):
    """Hair alone (the head disabled in renders), transparent film: the strands' pixels against
    EEVEE's in the same process, in number and place, with *Render > Curves > Shape* Strand (one
    pixel wide) and Strip (the radius)."""
    from conftest import ARTIFACTS, save_png

    scene = empty_scene
    head, hair = hair_scene(scene, radius=radius)
    head.hide_render = True
    scene.render.film_transparent = True
    scene.render.hair_type = shape
    ours = render_scene(scene)
    save_png(ours, ARTIFACTS / f"hair_{shape.lower()}_stylized.png")
    log = _log()
    ref = render_eevee(scene, tmp_path / "eevee.exr")     # 4 samples: its alpha > 0.5 pixels as at 64 (+-1 %)
    save_png(ref, ARTIFACTS / f"hair_{shape.lower()}_eevee.png")
    mine, theirs = ours[..., 3] > 0.5, ref[..., 3] > 0.5
    n_ours, n_eevee = int(mine.sum()), int(theirs.sum())
    assert n_eevee > 1000
    assert abs(n_ours - n_eevee) < 0.15 * n_eevee, (n_ours, n_eevee)
    # in the same place: nearly every pixel of ours is at most one pixel from one of EEVEE's
    assert float((mine & _dilate(theirs)).sum()) > 0.9 * n_ours
    assert float((theirs & _dilate(mine)).sum()) > 0.85 * n_eevee
    # shaded with the material's toon look: brown, not the default grey
    rgb = ours[mine][:, :3]
    assert np.median(rgb[:, 0]) > 1.5 * np.median(rgb[:, 2]), np.median(rgb, axis=0)
    lines = [l for l in log if "'Hair'" in l]
    assert lines == [f"Stylized frame {scene.frame_current}: object 'Hair' is drawn from Blender's evaluated "
                     "curves (hair curves: strands drawn as camera-facing ribbons)"], log
    assert ("Hair", "hair curves: strands drawn as camera-facing ribbons") in _stats()["fallbacks"]
    assert not any("'Head'" in l for l in log), log


def test_hair_in_front_of_the_head_and_casting_shadows(empty_scene):
    """With the head shown, strands in front of it are drawn over it (depth-tested through the
    same passes) and the hair darkens the head where it shadows it (the sun's shadow pass)."""
    from conftest import ARTIFACTS, save_png

    scene = empty_scene
    head, hair = hair_scene(scene, strands=600)
    scene.render.resolution_x, scene.render.resolution_y = 320, 240
    px = render_scene(scene)
    save_png(px, ARTIFACTS / "hair_on_head_stylized.png")
    hair.visible_shadow = False
    no_shadow = render_scene(scene)
    hair.hide_render = True
    bare = render_scene(scene)
    face = np.linalg.norm(bare[..., :3] - no_shadow[..., :3], axis=-1) < 1e-4   # pixels no strand covers
    head_px = face & (np.abs(bare[..., :3] - bare[0, 0, :3]).sum(-1) > 1e-3)
    assert head_px.sum() > 2000
    # strands in front of the head: pixels where the hair replaced the head's colour
    over = ~face & (np.abs(bare[..., :3] - bare[0, 0, :3]).sum(-1) > 1e-3)
    assert over.sum() > 1000
    # shadows: on head pixels no strand covers, the hair's shadow darkens some of them
    darker = (px[..., :3].sum(-1) < no_shadow[..., :3].sum(-1) - 0.05) & head_px
    assert darker.sum() > 0.02 * head_px.sum(), (int(darker.sum()), int(head_px.sum()))


def test_hair_strands_are_evaluated_as_blender_evaluates_them(empty_scene):
    """Catmull-Rom strands (hair's default curve type) with per-curve resolutions, 2-, 3- and
    5-point curves and a poly curve, against Blender's own evaluation: Object > Convert > Mesh
    of the same curves (one vertex per evaluated point)."""
    from stylized_renderer.engine.blender.sources import hair

    scene = empty_scene
    hc = bpy.data.hair_curves.new("Curly")
    hc.add_curves([5, 2, 3, 4])
    rng = np.random.default_rng(0)
    hc.position_data.foreach_set("vector", rng.normal(size=(14, 3)).astype(np.float32).ravel())
    hc.attributes.new("resolution", "INT", "CURVE").data.foreach_set("value", np.array([12, 4, 3, 5], np.int32))
    hc.attributes.new("radius", "FLOAT", "POINT").data.foreach_set("value", np.linspace(0.01, 0.05, 14, dtype=np.float32))
    hc.set_types(type="POLY", indices=[3])
    ob = bpy.data.objects.new("Curly", hc)
    scene.collection.objects.link(ob)
    ob.location = (1.0, 2.0, 3.0)
    ob.rotation_euler = (0.3, 0.2, 0.1)
    dg = bpy.context.evaluated_depsgraph_get()
    strands = hair.read_strands(ob.evaluated_get(dg), np.array(ob.matrix_world))
    assert strands is not None
    ours = hair.evaluate(strands)
    assert list(np.diff(ours.offsets)) == [4 * 12 + 1, 4 + 1, 2 * 3 + 1, 4]
    bpy.context.view_layer.objects.active = ob
    ob.select_set(True)
    assert bpy.ops.object.convert(target="MESH") == {"FINISHED"}
    conv = bpy.context.object
    co = np.empty(len(conv.data.vertices) * 3, np.float32)
    conv.data.vertices.foreach_get("co", co)
    m = np.array(conv.matrix_world)
    co = co.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3]
    assert co.shape == ours.positions.shape
    assert np.abs(co - ours.positions).max() < 1e-5


def test_hair_in_the_viewport_rebuilds_ribbons_only_when_the_view_or_the_curves_change(empty_scene, view_session):
    """The viewport path (draw_view): hair drawn, named in the Stats panel as drawn through the
    fallback; a redraw of the same view creates no GPU stream, another view builds new ribbons
    (facing it), an edit of the curves shows in the next frame."""
    from conftest import look_at, perspective
    from stylized_renderer.panels import viewport_panels as vp
    from support.panels import Ctx, draw_panel
    from support.viewport import draw, object_mask

    scene = empty_scene
    head, hair = hair_scene(scene)
    head.hide_viewport = True
    window = perspective(0.5, 1.5)
    front = look_at((0.0, -8.0, 0.0))
    first = object_mask(draw(view_session, front, window, False, 150, 100))
    assert first.sum() > 500
    labels = draw_panel(vp.STYLIZED_PT_viewport_stats, Ctx(scene, None)).labels()
    assert "Hair: hair curves: strands drawn as camera-facing ribbons" in labels, labels
    made = view_session.fallback.streams_created
    again = object_mask(draw(view_session, front, window, False, 150, 100))
    assert view_session.fallback.streams_created == made and np.array_equal(first, again)
    side = object_mask(draw(view_session, look_at((8.0, 0.0, 0.0)), window, False, 150, 100))
    assert view_session.fallback.streams_created > made and side.sum() > 500
    # the curves edited (all strands moved up by 1 m): the next frame shows them moved
    co = np.empty(len(hair.data.points) * 3, np.float32)
    hair.data.position_data.foreach_get("vector", co)
    hair.data.position_data.foreach_set("vector", (co.reshape(-1, 3) + [0.0, 0.0, 1.0]).ravel())
    hair.data.update_tag()
    moved = object_mask(draw(view_session, front, window, False, 150, 100))
    rows = np.nonzero(first.any(axis=1))[0], np.nonzero(moved.any(axis=1))[0]
    assert moved.sum() > 500 and not np.array_equal(first, moved)
    assert abs(rows[1].mean() - rows[0].mean()) > 5, rows


def test_point_cloud_is_named_as_not_drawn(empty_scene):
    """Object types these passes cannot draw (a point cloud here; Grease Pencil and volumes alike)
    are named once per frame instead of vanishing without a word."""
    scene = empty_scene
    add_camera(scene)
    cloud = bpy.data.objects.new("Sparks", bpy.data.pointclouds.new("Sparks"))
    scene.collection.objects.link(cloud)
    render_scene(scene)
    line = (f"Stylized frame {scene.frame_current}: object 'Sparks' is not drawn: point cloud objects have no "
            "Stylized drawing (EEVEE draws them)")
    assert _log().count(line) == 1, _log()
    assert line.split(": ", 1)[1] in _stats()["losses"]
    cloud.hide_render = True
    render_scene(scene)
    assert not any("Sparks" in l for l in _log()), _log()


def test_bezier_hair_says_it_follows_the_control_points(empty_scene):
    """Bezier strands are drawn through their control points (not evaluated): the line says so."""
    scene = empty_scene
    head, hair = hair_scene(scene, strands=20)
    hair.data.set_types(type="BEZIER", indices=[0, 1])
    render_scene(scene)
    assert (f"Stylized frame {scene.frame_current}: object 'Hair' is drawn from Blender's evaluated curves "
            "(hair curves: strands drawn as camera-facing ribbons; Bezier and NURBS strands follow their "
            "control points)") in _log(), _log()


@pytest.mark.parametrize("bsdf", ["ShaderNodeBsdfHair", "ShaderNodeBsdfHairPrincipled"])
def test_hair_bsdf_colour_is_read_as_eevee_shades_it(empty_scene, tmp_path, bsdf):
    """EEVEE shades the Hair BSDF and the Principled Hair BSDF as a diffuse surface of their Color
    input (its GPU node falls back to a diffuse closure): the strands take that colour, and the
    material reader names nothing as unmapped."""
    scene = empty_scene
    head, hair = hair_scene(scene)
    head.hide_render = True
    scene.render.hair_type = "STRIP"
    scene.render.film_transparent = True
    mat = hair.data.materials[0]
    nt = mat.node_tree
    node = nt.nodes.new(bsdf)
    node.inputs["Color"].default_value = (0.05, 0.3, 0.6, 1.0)
    out = next(n for n in nt.nodes if n.type == "OUTPUT_MATERIAL")
    nt.links.new(node.outputs[0], out.inputs["Surface"])
    px = render_scene(scene)
    covered = px[..., 3] > 0.5
    assert covered.sum() > 1000
    med = np.median(px[covered][:, :3], axis=0)
    assert med[2] > 1.5 * med[1] > 3.0 * med[0], med             # blue, not the viewport colour
    assert not any("not mapped" in l for l in _log()), _log()
    ref = render_eevee(scene, tmp_path / "eevee.exr")            # EEVEE's strands are blue too
    ref_med = np.median(ref[ref[..., 3] > 0.5][:, :3], axis=0)
    assert ref_med[2] > ref_med[1] > ref_med[0], ref_med


def test_dense_groom_is_evaluated_within_the_point_budget_and_says_so(empty_scene):
    """3,000 strands of 8 points at Blender's default resolution 12 are 255,000 evaluated points:
    over hair.POINT_BUDGET the resolution is lowered for every curve alike, the hair is still
    drawn, and the log line says how far."""
    from stylized_renderer.engine.blender.sources import hair as hair_mod

    scene = empty_scene
    head, hair = hair_scene(scene, strands=3000, points=8)
    head.hide_render = True
    scene.render.film_transparent = True
    px = render_scene(scene)
    assert int((px[..., 3] > 0.5).sum()) > 1000
    assert hair_mod.POINT_BUDGET == 200_000
    assert (f"Stylized frame {scene.frame_current}: object 'Hair' is drawn from Blender's evaluated curves "
            "(hair curves: strands drawn as camera-facing ribbons; Catmull-Rom resolution lowered to 9 of 12 "
            "(255,000 evaluated points over the budget of 200,000))") in _log(), _log()
