"""Foundation: registration, built-in panels, F12 stills, animation renders, transparency,
missing camera, bad input, packaging."""
from __future__ import annotations

import subprocess
import sys
import zipfile

import bpy
import numpy as np
import pytest

import conftest as C

# ---------------------------------------------------------------------------------------------
# registration
# ---------------------------------------------------------------------------------------------

def _engine_accepted(scene) -> bool:
    prev = scene.render.engine
    try:
        scene.render.engine = "STYLIZED"
    except TypeError:
        return False
    scene.render.engine = prev
    return True


def test_register_unregister_register_leaves_nothing_behind(ext):
    from stylized_renderer import registration
    from stylized_renderer.engine.blender.render_engine import StylizedRenderEngine

    handlers_before = {name: list(getattr(bpy.app.handlers, name)) for name in dir(bpy.app.handlers)
                       if not name.startswith("_") and isinstance(getattr(bpy.app.handlers, name), list)}
    panels = registration.compat_panels()
    assert panels, "no built-in panel got STYLIZED"
    from stylized_renderer.engine.blender import render_engine
    from stylized_renderer.engine.features.preview import control as preview

    addon = render_engine.StylizedRenderEngine.addon
    keeper = addon.final_sessions
    kept = keeper.session_for(bpy.context.scene)   # what an F12 keeps between renders
    assert render_engine.kept_final_session() is kept
    assert preview.get_state(bpy.context.scene) is preview.get_state(bpy.context.scene)    # kept by the add-on
    assert addon.previews.states
    ext.unregister()
    assert keeper.session is None, "the kept F12 session outlived the add-on"
    assert render_engine.kept_final_session() is None
    assert not addon.previews.states, "the preview states outlived the add-on"
    assert render_engine.addon_state() is None
    C.set_registered(False)
    try:
        assert not StylizedRenderEngine.is_registered
        assert not _engine_accepted(bpy.context.scene)
        for p in panels:
            assert "STYLIZED" not in p.COMPAT_ENGINES, p.__name__
        for name, _before in handlers_before.items():
            now = getattr(bpy.app.handlers, name)
            ours = [h for h in now if getattr(h, "__module__", "").startswith("stylized_renderer")]
            assert not ours, f"handler left in {name}: {ours}"
        leftovers = [k for k in ("stylized", "stylized_mtoon", "stylized_preview")
                     if hasattr(bpy.types.Scene, k) or hasattr(bpy.types.Material, k) or hasattr(bpy.types.Object, k)]
        assert not leftovers, leftovers
        for cls_name in dir(bpy.types):
            if cls_name.startswith(("STYLIZED_", "StylizedRender")):
                cls = getattr(bpy.types, cls_name)
                assert not getattr(cls, "is_registered", False), cls_name
        timers = ext.registration.active_timers() if hasattr(registration, "active_timers") else []
        assert not timers
    finally:
        C.ensure_registered()
    assert StylizedRenderEngine.is_registered
    assert _engine_accepted(bpy.context.scene)
    fresh = render_engine.addon_state()
    assert fresh is not None and fresh is not addon and not fresh.previews.states and not fresh.bakes.entries
    # registering again after a full cycle gives the same panels (no duplicates)
    assert sorted(p.__name__ for p in registration.compat_panels()) == sorted(p.__name__ for p in panels)


def test_builtin_panels_show_under_stylized(ext):
    expected = ["RENDER_PT_format", "RENDER_PT_output", "RENDER_PT_frame_range", "RENDER_PT_color_management",
                "DATA_PT_context_mesh", "DATA_PT_shape_keys", "DATA_PT_vertex_groups", "DATA_PT_light",
                "DATA_PT_camera", "DATA_PT_lens", "EEVEE_MATERIAL_PT_context_material", "OBJECT_PT_visibility"]
    for name in expected:
        panel = getattr(bpy.types, name, None)
        if panel is None:
            continue
        assert "STYLIZED" in panel.COMPAT_ENGINES, name


# ---------------------------------------------------------------------------------------------
# rendering
# ---------------------------------------------------------------------------------------------

def _cube_scene(scene, color=(0.8, 0.1, 0.1), location=(0, 0, 0)):
    C.add_camera(scene)
    C.add_sun(scene, rotation=(0.6, 0.2, 0.0))
    v, f = C.cube_geometry(2.0)
    return C.add_mesh_object(scene, "Cube", v, f, location=location, material=C.add_material("Red", color))


def test_still_shows_mesh_where_camera_sees_it(empty_scene, render):
    scene = empty_scene
    _cube_scene(scene, location=(1.5, 0, 0))   # right half of the image
    scene.world = bpy.data.worlds.new("W")
    scene.world.color = (0.0, 0.0, 0.0)
    px = render(scene)
    h, w = px.shape[:2]
    assert px.shape == (120, 160, 4)
    red = (px[..., 0] > 0.2) & (px[..., 1] < 0.2)
    # the cube is seen right of the centre, nothing on the left
    assert red[:, w // 2 + 10:].mean() > 0.15
    assert red[:, : w // 2 - 10].mean() == 0.0
    # bottom row of the render result is the bottom of the image: cube centred vertically
    ys = np.nonzero(red.any(axis=1))[0]
    assert abs((ys.min() + ys.max()) / 2 - h / 2) < 4


def test_resolution_percentage_is_respected(empty_scene, render):
    scene = empty_scene
    _cube_scene(scene)
    scene.render.resolution_percentage = 50
    px = render(scene)
    assert px.shape == (60, 80, 4)


def test_depth_test_nearer_object_wins(empty_scene, render):
    scene = empty_scene
    _cube_scene(scene, color=(0.8, 0.1, 0.1))
    v, f = C.cube_geometry(1.0)
    C.add_mesh_object(scene, "Near", v, f, location=(0, -2.0, 0), material=C.add_material("Blue", (0.1, 0.1, 0.8)))
    px = render(scene)
    centre = px[60, 80]
    assert centre[2] > centre[0], centre


def test_film_transparent_gives_alpha_zero_on_background(empty_scene, render):
    scene = empty_scene
    _cube_scene(scene, location=(1.5, 0, 0))
    scene.render.film_transparent = True
    px = render(scene)
    assert px[60, 5, 3] == 0.0
    assert px[60, 120, 3] == pytest.approx(1.0)
    scene.render.film_transparent = False
    px = render(scene)
    assert px[60, 5, 3] == pytest.approx(1.0)


def test_empty_scene_renders_world_colour(empty_scene, render):
    scene = empty_scene
    C.add_camera(scene)
    scene.world = bpy.data.worlds.new("W")
    scene.world.color = (0.2, 0.3, 0.4)
    if scene.world.node_tree is not None:   # a node world: its Background node is what renders
        bg = next(n for n in scene.world.node_tree.nodes if n.type == "BACKGROUND")
        bg.inputs["Color"].default_value = (0.2, 0.3, 0.4, 1.0)
        bg.inputs["Strength"].default_value = 1.0
    px = render(scene)
    np.testing.assert_allclose(px[..., :3].reshape(-1, 3).mean(axis=0), (0.2, 0.3, 0.4), atol=1e-3)


def test_missing_camera_gives_error_report(empty_scene):
    scene = empty_scene
    v, f = C.cube_geometry(2.0)
    C.add_mesh_object(scene, "Cube", v, f)
    with pytest.raises(RuntimeError, match="(?i)camera"):
        bpy.ops.render.render(scene=scene.name)


def test_mesh_without_faces_and_ngons_render(empty_scene, render):
    scene = empty_scene
    C.add_camera(scene)
    C.add_sun(scene, rotation=(1.2, 0.0, 0.0))   # shines from behind the camera onto the hexagon
    C.add_mesh_object(scene, "Loose", [(0, 0, 0), (1, 0, 0), (0, 0, 1)], [])           # no faces
    me = bpy.data.meshes.new("EdgesOnly")
    me.from_pydata([(0, 0, 0), (1, 0, 1)], [(0, 1)], [])
    ob = bpy.data.objects.new("EdgesOnly", me)
    scene.collection.objects.link(ob)
    hexagon = [(np.cos(a), 0.0, np.sin(a)) for a in np.linspace(0, 2 * np.pi, 7)[:-1]]
    C.add_mesh_object(scene, "Ngon", hexagon, [tuple(range(6))], material=C.add_material("G", (0.1, 0.8, 0.1)))
    px = render(scene)
    green = (px[..., 1] > 0.2) & (px[..., 0] < 0.2)
    assert green.mean() > 0.02


def test_animation_render_writes_one_file_per_frame(empty_scene, tmp_path):
    scene = empty_scene
    cube = _cube_scene(scene)
    cube.location = (-1.0, 0.0, 0.0)
    cube.keyframe_insert("location", frame=1)
    cube.location = (1.0, 0.0, 0.0)
    cube.keyframe_insert("location", frame=3)
    scene.frame_start, scene.frame_end = 1, 3
    scene.render.resolution_x, scene.render.resolution_y = 64, 48
    scene.render.filepath = str(tmp_path / "frame_####")
    bpy.ops.render.render(animation=True, scene=scene.name)
    files = sorted(p.name for p in tmp_path.glob("frame_*.png"))
    assert files == ["frame_0001.png", "frame_0002.png", "frame_0003.png"]
    a = bpy.data.images.load(str(tmp_path / "frame_0001.png"))
    b = bpy.data.images.load(str(tmp_path / "frame_0003.png"))
    pa, pb = np.array(a.pixels[:]), np.array(b.pixels[:])
    assert np.abs(pa - pb).max() > 0.1, "the object moved between frames"


def test_gpu_task_runs_inside_render_and_leaves_no_scene(ext):
    from stylized_renderer.engine.gpu import util as gpu_util

    n_scenes = len(bpy.data.scenes)
    info = gpu_util.run_in_gpu_context(lambda: __import__("gpu").platform.backend_type_get())
    assert info in {"OPENGL", "VULKAN", "METAL"}
    assert len(bpy.data.scenes) == n_scenes


def test_texture_readback_layout(ext):
    from stylized_renderer.engine.gpu import util as gpu_util

    def task():
        import gpu

        data = np.arange(3 * 5 * 4, dtype=np.float32)
        tex = gpu.types.GPUTexture((5, 3), format="RGBA32F", data=gpu.types.Buffer("FLOAT", data.size, data))
        return gpu_util.texture_to_numpy(tex, 5, 3)

    out = gpu_util.run_in_gpu_context(task)
    np.testing.assert_array_equal(out, np.arange(60, dtype=np.float32).reshape(3, 5, 4))


# ---------------------------------------------------------------------------------------------
# packaging
# ---------------------------------------------------------------------------------------------

def test_package_zip_contents_and_install(tmp_path):
    root = C.ROOT
    proc = subprocess.run([sys.executable, str(root / "tools" / "package.py"), "--out", str(tmp_path)],
                          capture_output=True, text=True, cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    zips = list(tmp_path.glob("stylized_renderer-*.zip"))
    assert len(zips) == 1
    names = zipfile.ZipFile(zips[0]).namelist()
    for required in ("blender_manifest.toml", "__init__.py", "registration.py", "engine/blender/render_engine.py",
                     "glsl/skinning.glsl", "operators/__init__.py", "panels/__init__.py"):
        assert required in names, required
    for n in names:
        top = n.split("/")[0]
        assert top not in {"tests", "tools", "demo", ".venv", ".git", ".ci", "out", "dist", "docs"}, n
        assert "__pycache__" not in n and not n.endswith(".pyc"), n
    # install and enable it with Blender's own extension operators, in a clean process
    proc = subprocess.run([sys.executable, str(root / "tests" / "support" / "install_check.py"), "--", str(zips[0])],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert "RESULT OK" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
