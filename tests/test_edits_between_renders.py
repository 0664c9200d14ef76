"""Trust on real scenes: what users do between renders never shows a stale picture, the viewport
does not grow, nothing is drawn twice, and errors name what went wrong.

Each test drives the path users hit: F12 through ``bpy.ops.render.render``, the viewport through
``StylizedSession.sync`` fed with the depsgraph updates Blender really reports and
``render_engine.draw_view``."""
from __future__ import annotations

import gc
import math
import tracemalloc

import bpy
import numpy as np
import pytest

from conftest import (
    add_camera,
    add_material,
    add_mesh_object,
    add_sun,
    cube_geometry,
    look_at,
    perspective,
    render_scene,
)
from stylized_renderer.engine.blender.cameras import camera_from_matrices
from stylized_renderer.engine.blender.render_engine import draw_view
from stylized_renderer.engine.blender.session import StylizedSession
from stylized_renderer.engine.gpu import util as gpu_util
from support.edit_scenes import edit_positions, edit_weights, mask_of, render_animation, skinned_grid
from support.viewport import CapturedUpdates, draw
from tools import scenes
from tools.render_capture import LAST_RENDER as last_render


@pytest.fixture
def session(view_session):
    return view_session


@pytest.fixture
def captured():
    c = CapturedUpdates()
    yield c
    c.close()


# ------------------------------------------------------------------------------------------------
# 1. F12 after an edit
# ------------------------------------------------------------------------------------------------


def _edit_key(arm, ob):
    kb = ob.data.shape_keys.key_blocks["Wide"]
    co = np.empty(len(kb.data) * 3, np.float32)
    kb.data.foreach_get("co", co)
    co = co.reshape(-1, 3)
    co[:, 2] += 0.5
    kb.data.foreach_set("co", co.ravel())
    ob.data.update()


EDITS = [("positions", edit_positions), ("shape key", _edit_key), ("weights", edit_weights)]


@pytest.mark.parametrize("what,edit", EDITS, ids=[e[0] for e in EDITS])
def test_f12_after_an_edit_is_never_stale(empty_scene, what, edit):
    scene = empty_scene
    add_camera(scene, location=(0.0, -7.0, 1.0))
    add_sun(scene, rotation=(0.6, 0.2, 0.0))
    arm, ob = skinned_grid(scene)
    before = render_scene(scene).copy()
    assert last_render["stats"]["fallbacks"] == []
    edit(arm, ob)
    after = render_scene(scene).copy()
    # the reference: the same edited data imported by a session that never saw the old data
    from stylized_renderer.engine.blender import importer

    importer_asset = importer.import_scene(scene)
    assert importer_asset.meshes[0].fallback_reason is None
    m0, m1 = mask_of(before), mask_of(after)
    assert (m0 != m1).sum() > 40, f"a {what} edit rendered the old shape"


def test_animation_render_picks_up_an_edit_between_frames(empty_scene, tmp_path):
    """One engine and session draw every frame of Ctrl+F12: assets are reused only while the
    data is unchanged (the verified cache), so an edit made between frames is drawn."""
    scene = empty_scene
    add_camera(scene, location=(0.0, -7.0, 1.0))
    add_sun(scene, rotation=(0.6, 0.2, 0.0))
    arm, ob = skinned_grid(scene)
    scene.frame_start, scene.frame_end = 1, 3
    scene.render.filepath = str(tmp_path / "f")
    frames = {}

    def edit(sc, *_):
        if sc.frame_current == 3:
            edit_positions(arm, ob)

    def grab(sc, *_):
        frames[sc.frame_current] = (last_render["pixels"].copy(), dict(last_render["stats"]))

    render_animation(scene, edit, grab)
    assert sorted(frames) == [1, 2, 3]
    assert (mask_of(frames[1][0]) != mask_of(frames[2][0])).sum() == 0      # nothing changed
    assert (mask_of(frames[2][0]) != mask_of(frames[3][0])).sum() > 40      # the edit is drawn
    # frame 2 found nothing changed and kept the runtime; frame 3's edit rebuilt it
    assert frames[1][1]["runtime_reuses"] == 0 and frames[2][1]["runtime_reuses"] == 1
    assert frames[3][1]["runtime_reuses"] == 1


# ------------------------------------------------------------------------------------------------
# 2./3. fallbacks: no leak over 600 viewport redraws, curves/text/metaballs drawn once
# ------------------------------------------------------------------------------------------------

class LiveGpuObjects:
    """Counts live GPU objects (vertex/index buffers, batches, textures, uniform buffers) made
    through ``gpu.types``: the constructors are wrapped and every object is kept in a list; an
    object only that list refers to is dead (the gpu types take no weak references)."""

    NAMES = ("GPUVertBuf", "GPUIndexBuf", "GPUBatch", "GPUTexture", "GPUUniformBuf")

    def __init__(self):
        import gpu

        self._types = gpu.types
        self._orig = {n: getattr(gpu.types, n) for n in self.NAMES}
        self.objects = []

        def wrap(cls):
            def make(*args, **kw):
                obj = cls(*args, **kw)
                self.objects.append(obj)
                return obj
            return make

        for n, cls in self._orig.items():
            setattr(gpu.types, n, wrap(cls))

    def live(self) -> int:
        import sys

        gc.collect()
        self.objects = [o for o in self.objects if sys.getrefcount(o) > 3]
        return len(self.objects)

    def close(self):
        for n, cls in self._orig.items():
            setattr(self._types, n, cls)
        self.objects = []


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2 ** 20


def _every_kind(scene):
    """A subdivided sphere, text, a curve with bevel, a metaball, a collection instance of a
    cube, two linked duplicates, an animated skinned sheet and a cube that moves each frame."""
    add_sun(scene, rotation=(0.6, 0.2, 0.0))
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.5, location=(-2.0, 0.0, 1.0))
    sphere = bpy.context.object
    sphere.modifiers.new("Subdivision", "SUBSURF")
    txt = bpy.data.objects.new("Txt", bpy.data.curves.new("Txt", "FONT"))
    txt.location = (-1.0, 0.0, -1.5)
    scene.collection.objects.link(txt)
    cu = bpy.data.curves.new("Crv", "CURVE")
    cu.dimensions = "3D"
    cu.bevel_depth = 0.1
    sp = cu.splines.new("BEZIER")
    sp.bezier_points.add(1)
    sp.bezier_points[0].co = (-1.0, 0.0, 2.0)
    sp.bezier_points[1].co = (1.0, 0.0, 2.0)
    crv = bpy.data.objects.new("Crv", cu)
    scene.collection.objects.link(crv)
    mb = bpy.data.objects.new("Meta", bpy.data.metaballs.new("Meta"))
    mb.data.elements.new()
    mb.location = (2.0, 0.0, 1.0)
    scene.collection.objects.link(mb)
    col = bpy.data.collections.new("Props")
    v, f = cube_geometry(0.4)
    prop = add_mesh_object(scene, "Prop", v, f, material=add_material("PropMat", (0.2, 0.5, 0.9)))
    scene.collection.objects.unlink(prop)
    col.objects.link(prop)
    inst = bpy.data.objects.new("Inst", None)
    inst.instance_type = "COLLECTION"
    inst.instance_collection = col
    inst.location = (2.0, 0.0, -1.0)
    scene.collection.objects.link(inst)
    a = add_mesh_object(scene, "DupA", v, f, location=(0.0, 0.0, -1.0), material=add_material("DupMat", (0.9, 0.9, 0.2)))
    b = bpy.data.objects.new("DupB", a.data)
    b.location = (0.6, 0.0, -1.0)
    scene.collection.objects.link(b)
    arm, sheet = skinned_grid(scene)
    act, cb = scenes.new_action("Wave", arm)
    scenes.add_curve(cb, 'pose.bones["Top"].rotation_euler', 1, [1, 10, 20], [0.0, 0.9, 0.0])
    mover = add_mesh_object(scene, "Mover", v, f, location=(0.0, 0.0, 2.5))
    mover.animation_data_create()
    act2, cb2 = scenes.new_action("Move", mover)
    scenes.add_curve(cb2, "location", 0, [1, 20], [-1.0, 1.0])
    scene.frame_start, scene.frame_end = 1, 20
    scenes.finish()
    return txt


def test_viewport_soak_every_object_kind(empty_scene, session, captured):
    """600 redraws through view_update's updates + draw_view, the timeline playing (a new
    frame every 10th redraw) over every object kind: live GPU objects, RSS and the Python memory
    the engine allocates stay flat over the last 400 (Python memory: the last 150; every frame of the range seen twice; RSS
    bound 20 MB: 50 kB per redraw).

    Python memory: Blender keeps every Python wrapper made of the temporary object behind a
    curve's, text's, surface's or metaball's generated mesh (``DepsgraphObjectInstance.object``
    of that instance: 120 bytes each read, never freed, in 4.5, 5.0 and 5.2; reading
    ``inst.parent`` or a real object keeps nothing).  The session reads those meshes through
    their own objects (sources/fallback.py ``own_geometry``).  Measured over the last 150: 400-510
    bytes a redraw left (small objects numpy's calls keep, fewer a redraw the longer the run:
    bounded caches) against 1,510-1,590 when each generated instance's object was read three
    times a redraw (3 objects x 3 reads x 120 bytes more); bound 900."""
    scene = empty_scene
    _every_kind(scene)
    view, proj = look_at((0.0, -10.0, 0.5)), perspective(math.radians(45), 4 / 3)
    w, h = 64, 48
    counter = LiveGpuObjects()
    try:
        session.sync(bpy.context.evaluated_depsgraph_get())
        captured.take()

        def redraw(i):
            if i % 10 == 0:
                scene.frame_set(1 + (i // 10) % 20)
            session.sync(bpy.context.evaluated_depsgraph_get(), captured.take())
            dg = bpy.context.evaluated_depsgraph_get()
            return draw_view(session, dg, view, proj, False, w, h)

        def run(n, start):
            return gpu_util.run_in_gpu_context(lambda: [redraw(start + i) and None for i in range(n)])

        run(200, 0)                        # warm-up: shaders, caches, every frame seen once
        live0, rss0 = counter.live(), rss_mb()
        run(250, 200)
        tracemalloc.start()                # the last 150 traced (tracing slows Python ~2x)
        py0 = _engine_python_bytes()
        run(150, 450)
        py1 = _engine_python_bytes()
        live1, rss1 = counter.live(), rss_mb()
    finally:
        tracemalloc.stop()
        counter.close()
    st = session.stats
    print(f"soak: live GPU objects {live0} -> {live1}, RSS {rss0:.1f} -> {rss1:.1f} MB, Python memory "
          f"{(py1 - py0) / 150:.0f} bytes a redraw (last 150), over 400 redraws")
    assert st["items"] > st["gpu_items"] > 0, st             # both paths drew
    names = {n for n, _r in st["fallbacks"]}
    assert {"Sphere", "Txt", "Crv", "Meta"} <= names, names
    assert live1 <= live0 + 4, (live0, live1)
    assert rss1 - rss0 < 20.0, (rss0, rss1)
    assert (py1 - py0) / 150 < 900.0, (py1 - py0) / 150
    assert session.imports.import_count == 1, session.imports.reimport_reasons


def _engine_python_bytes() -> int:
    """The Python objects' memory traced now, after a collection: without numpy's array buffers
    (their own tracemalloc domain: numpy keeps freed small buffers in a bounded cache, which
    tracemalloc still counts at the site that first made them) and without what this file
    allocates (the GPU-object counter's list)."""
    gc.collect()
    snap = tracemalloc.take_snapshot().filter_traces([
        tracemalloc.Filter(False, __file__), tracemalloc.DomainFilter(False, np.lib.tracemalloc_domain)])
    return sum(t.size for t in snap.traces)


def test_curves_text_and_metaballs_are_drawn_once(empty_scene, session):
    scene = empty_scene
    txt = _every_kind(scene)
    # a half-transparent text: drawn twice it would be visibly more opaque
    mat = add_material("Glass", (0.1, 0.9, 0.1))
    bsdf = mat.node_tree.nodes["Principled BSDF"]
    bsdf.inputs["Alpha"].default_value = 0.5
    txt.data.materials.append(mat)
    scenes.finish()
    dg = bpy.context.evaluated_depsgraph_get()
    session.sync(dg)
    frame = gpu_util.run_in_gpu_context(lambda: session.build_frame(
        dg, camera_from_matrices(
            look_at((0.0, -10.0, 0.5)), perspective(math.radians(45), 4 / 3)), 64, 48))
    per_object = {}
    for it in frame.items:
        per_object[it.object_name] = per_object.get(it.object_name, 0) + 1
    assert per_object.get("Txt") == 1 and per_object.get("Crv") == 1 and per_object.get("Meta") == 1, per_object
    assert per_object.get("Sphere") == 1 and per_object.get("Prop") == 1, per_object


# ------------------------------------------------------------------------------------------------
# 4./5./6. bounds, the armature relation, uploads
# ------------------------------------------------------------------------------------------------

def test_vertices_without_weights_are_not_culled(empty_scene, render):
    scene = empty_scene
    add_sun(scene, rotation=(0.6, 0.2, 0.0))
    arm = scenes.make_armature("Rig", [("B", None, (0, 0, 0), (0, 0, 1))])
    # two separate quads: the left one weighted, the right one (far away) without weights
    verts = [(-6, 0, 0), (-5, 0, 0), (-5, 0, 1), (-6, 0, 1), (5, 0, 0), (6, 0, 0), (6, 0, 1), (5, 0, 1)]
    ob = scenes.make_mesh("Split", verts, [(0, 1, 2, 3), (4, 5, 6, 7)], materials=("SplitMat",))
    scenes.skin_to(ob, arm, {"B": (np.arange(4), np.ones(4))})
    add_camera(scene, location=(5.5, -4.0, 0.5))          # only the unweighted quad is in view
    scenes.finish()
    px = render(scene)
    assert last_render["stats"]["fallbacks"] == [] and last_render["stats"]["gpu_items"] == 1
    assert mask_of(px).sum() > 200


def test_moving_an_armature_that_is_not_the_parent_deforms_as_blender(empty_scene, session, captured, capsys):
    """Blender's Armature modifier deforms in the armature's space with the current mesh and
    armature transforms.  The rig moves (animated object location, the mesh is not its child)
    and a bone is posed: our GPU vertices match Blender's evaluated mesh on every frame without a
    re-import, and the parts the posed bone does not move stay where they are."""
    from tools import check_deform

    scene = empty_scene
    add_sun(scene, rotation=(0.6, 0.2, 0.0))
    arm, ob = skinned_grid(scene)
    ob.parent = None
    act, cb = scenes.new_action("Walk", arm)
    scenes.add_curve(cb, "location", 0, [1, 10], [0.0, 1.5])
    scenes.add_curve(cb, "location", 2, [1, 10], [0.0, 0.5])
    scene.frame_start, scene.frame_end = 1, 10
    scenes.finish()
    rc = check_deform.run_checks("1-10:3", "timeline")
    out = capsys.readouterr().out
    assert rc == 0 and "path=gpu" in out, out
    # the viewport: moving the rig is a transform update (no re-import), the lower half (on the
    # rest bone) stays, as Blender's does
    view, proj = look_at((0.0, -9.0, 1.0), (0.0, 0.0, 1.0)), perspective(math.radians(45), 4 / 3)
    scene.frame_set(1)
    session.sync(bpy.context.evaluated_depsgraph_get())
    before = draw(session, view, proj, False, 96, 72)
    captured.take()
    arm.animation_data.action = None
    arm.location = (1.5, 0.0, 0.0)
    session.sync(bpy.context.evaluated_depsgraph_get(), captured.take())
    assert not session.imports.need_import
    after = draw(session, view, proj, False, 96, 72)
    lower = slice(0, 30)                      # image rows near the bottom: the unposed half
    assert (mask_of(before)[lower] != mask_of(after)[lower]).sum() <= 3


def _viewport_sheet(scene, session):
    """The skinned sheet under a sun, synced into the viewport session: (rig, mesh, view, proj)."""
    add_sun(scene, rotation=(0.6, 0.2, 0.0))
    arm, ob = skinned_grid(scene)
    view, proj = look_at((0.0, -9.0, 1.0), (0.0, 0.0, 1.0)), perspective(math.radians(45), 4 / 3)
    session.sync(bpy.context.evaluated_depsgraph_get())
    return arm, ob, view, proj


def test_a_static_timeline_frame_uploads_nothing(empty_scene, session):
    arm, ob, view, proj = _viewport_sheet(empty_scene, session)
    draw(session, view, proj, False, 64, 48)
    for _ in range(3):
        draw(session, view, proj, False, 64, 48)
        assert session.stats["palette_uploads"] == 0 and session.stats["morph_uploads"] == 0, session.stats
    arm.pose.bones["Top"].rotation_euler = (0.0, 0.2, 0.0)      # a pose edit uploads once
    scenes.finish()
    draw(session, view, proj, False, 64, 48)
    assert session.stats["palette_uploads"] == 1


# ------------------------------------------------------------------------------------------------
# 7. stats that tell the truth
# ------------------------------------------------------------------------------------------------

def test_fps_and_update_failures_reach_the_stats(empty_scene, session):
    arm, ob, view, proj = _viewport_sheet(empty_scene, session)
    for _ in range(3):
        draw(session, view, proj, False, 64, 48)
    assert session.timings.fps > 0.0
    assert session.stats["update_error"] is None
    arm.location.x = float("nan")                 # Blender's evaluated pose is now non-finite
    scenes.finish()
    draw(session, view, proj, False, 64, 48)
    # the sheet it deforms is skipped and named (issue 27 item 5), the update itself goes on
    assert any(f"'{ob.name}'" in p and "not finite" in p for p in session.stats["problems"]), session.stats


# ------------------------------------------------------------------------------------------------
# 9. errors that name things
# ------------------------------------------------------------------------------------------------

def test_errors_name_the_size_the_object_and_the_value(empty_scene, capfd):
    scene = empty_scene
    add_camera(scene, location=(0.0, -7.0, 1.0))
    add_sun(scene, rotation=(0.6, 0.2, 0.0))
    arm, ob = skinned_grid(scene)
    prop = add_mesh_object(scene, "BadProp", [(0, 0, 0), (1, 0, 0), (0, 0, 1)], [(0, 1, 2)])
    prop.data.vertices[1].co = (float("nan"), 0.0, 0.0)
    txt = bpy.data.objects.new("Label", bpy.data.curves.new("Label", "FONT"))
    scene.collection.objects.link(txt)
    scenes.finish()
    px = render_scene(scene)
    st = last_render["stats"]
    # one non-finite vertex falls back that object only; the sheet stays on the GPU path
    assert dict(st["fallbacks"]).get("BadProp", "").startswith("has a non-finite vertex position")
    assert st["gpu_items"] >= 1 and st["import_error"] is None
    assert np.isfinite(px).all()
    out = capfd.readouterr().out
    assert "object 'BadProp' is drawn from Blender's evaluated mesh (has a non-finite vertex position" in out
    assert "object 'Label' is drawn from Blender's evaluated mesh (font object)" in out

    # a render wider than the GPU's texture limit says the size and the limit
    limit = gpu_util.run_in_gpu_context(lambda: __import__("gpu").capabilities.max_texture_size_get())
    scene.render.resolution_x = limit + 8
    scene.render.resolution_y = 4
    msg = f"{limit + 8}x4 exceeds this GPU's texture limit of {limit}x{limit}"
    with pytest.raises(RuntimeError, match=msg):
        bpy.ops.render.render(scene=scene.name)
    assert msg in last_render.get("error", "")


def test_operators_refuse_bad_values_and_unknown_armatures(empty_scene):
    scene = empty_scene
    arm, ob = skinned_grid(scene)
    kb = ob.data.shape_keys.key_blocks["Wide"]
    kb.value = 0.3
    with pytest.raises(RuntimeError, match="not a finite number"):
        bpy.ops.stylized.expression_set(name="Wide", value=float("nan"), character=arm.name)
    assert kb.value == pytest.approx(0.3)
    other = scenes.make_armature("Other", [("X", None, (0, 0, 0), (0, 0, 1))])
    bpy.context.view_layer.objects.active = other
    with pytest.raises(RuntimeError, match="No object named 'Ghost'"):
        bpy.ops.stylized.preview_play(armature="Ghost")
    with pytest.raises(RuntimeError, match="'Sheet' is not an armature"):
        bpy.ops.stylized.preview_play(armature="Sheet")


def test_animation_render_picks_up_a_material_edit_between_frames(empty_scene, tmp_path):
    """A script (a frame-change handler, a farm job) that recolours a material between frames of
    Ctrl+F12: the next frame is drawn with the new colour."""
    scene = empty_scene
    add_camera(scene, location=(0.0, -6.0, 0.0))
    add_sun(scene, rotation=(0.6, 0.2, 0.0))
    v, f = cube_geometry()
    mat = add_material("Paint", (0.9, 0.1, 0.1))
    add_mesh_object(scene, "Box", v, f, material=mat)
    scene.frame_start, scene.frame_end = 1, 2
    scene.render.filepath = str(tmp_path / "f")
    frames = {}

    def edit(sc, *_):
        if sc.frame_current == 2:
            mat.node_tree.nodes["Principled BSDF"].inputs["Base Color"].default_value = (0.1, 0.1, 0.9, 1.0)

    def grab(sc, *_):
        frames[sc.frame_current] = last_render["pixels"].copy()

    render_animation(scene, edit, grab)
    m = mask_of(frames[1])
    assert frames[1][m][:, 0].mean() > frames[1][m][:, 2].mean()     # red
    assert frames[2][m][:, 2].mean() > frames[2][m][:, 0].mean()     # blue


@pytest.mark.parametrize("fallback", [False, True], ids=["gpu", "fallback"])
def test_object_visibility_shadow_switch_is_honoured(empty_scene, fallback):
    """Object Properties > Visibility > Shadow off: the object is drawn but casts no shadow, on
    the GPU path and through the fallback."""
    scene = empty_scene
    add_camera(scene, location=(0.0, -8.0, 5.0), rotation=(math.radians(55), 0.0, 0.0))
    add_sun(scene, rotation=(0.0, 0.0, 0.0), strength=3.0)
    add_mesh_object(scene, "Ground", [(-4, -4, 0), (4, -4, 0), (4, 4, 0), (-4, 4, 0)], [(0, 1, 2, 3)],
                             material=add_material("GroundMat", (0.8, 0.8, 0.8)))
    v, f = cube_geometry()
    box = add_mesh_object(scene, "Box", v, f, location=(0.0, 0.0, 1.5), material=add_material("BoxMat", (0.9, 0.2, 0.2)))
    if fallback:
        box.modifiers.new("Bevel", "BEVEL")
    scenes.finish()
    on = render_scene(scene).copy()
    box.visible_shadow = False
    scenes.finish()
    off = render_scene(scene).copy()
    # the ground under the box: darker with the shadow, lit without it; the box itself still drawn
    g = np.abs(on[..., :3] - off[..., :3]).max(axis=2) > 0.05
    assert g.sum() > 100, "switching Visibility > Shadow off changed nothing"
    assert (mask_of(off) & (off[..., 0] > off[..., 1] + 0.2)).sum() > 100     # the red box is drawn
    assert off[g][:, 1].mean() > on[g][:, 1].mean()                          # lit where it was shadowed


def test_linked_duplicates_share_assets_and_static_streams(empty_scene, capsys):
    """Three linked duplicates of a skinned, morphed mesh, each on its own copy of the rig:
    one import of the geometry, one static GPU upload per primitive, each deformed by its own
    rig exactly as Blender does."""
    from stylized_renderer.engine.blender import importer
    from tools import check_deform

    scene = empty_scene
    add_sun(scene, rotation=(0.6, 0.2, 0.0))
    arm, ob = skinned_grid(scene)
    act, cb = scenes.new_action("Bend", arm)
    scenes.add_curve(cb, 'pose.bones["Top"].rotation_euler', 1, [1, 10], [0.0, 0.9])
    copies = []
    for k in (1, 2):
        a2 = arm.copy()                       # a copy of the rig object, sharing the armature data
        a2.animation_data.action = None
        a2.location.x = 3.0 * k
        a2.pose.bones["Top"].rotation_euler = (0.0, -0.4 * k, 0.0)
        scene.collection.objects.link(a2)
        o2 = ob.copy()                        # a linked duplicate: the same mesh datablock
        o2.modifiers["Armature"].object = a2
        o2.parent = a2 if ob.parent is not None else None
        o2.location.x = 3.0 * k if ob.parent is None else 0.0
        scene.collection.objects.link(o2)
        copies.append((a2, o2))
    scene.frame_start, scene.frame_end = 1, 10
    scenes.finish()
    cache = importer.AssetCache()
    asset = importer.import_scene(scene, cache=cache)
    meshes = [asset.meshes[asset.nodes[asset.node_index(o.name)].mesh_index] for o in [ob] + [c[1] for c in copies]]
    p = [m.primitives[0] for m in meshes]
    assert p[1].positions is p[0].positions and p[2].morph_targets is p[0].morph_targets
    assert not np.array_equal(p[1].skin.joint_node_indices, p[0].skin.joint_node_indices)
    rc = check_deform.run_checks("1-10:3", "timeline")
    out = capsys.readouterr().out
    assert rc == 0, out
    for o in [ob] + [c[1] for c in copies]:
        assert f"{o.name}: " in out and "path=gpu" in out
    # one static upload per distinct primitive, not per object

    s = StylizedSession()
    dg = bpy.context.evaluated_depsgraph_get()
    gpu_util.run_in_gpu_context(lambda: (s.ensure_gpu(), s.ensure_runtime(dg)))
    prims = len(meshes[0].primitives)
    try:
        assert s.backend is not None, "ensure_gpu made no backend"
        assert s.backend.static_uploads == prims, (s.backend.static_uploads, prims)
    finally:
        gpu_util.run_in_gpu_context(s.free)
