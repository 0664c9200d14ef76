"""pytest fixtures: import the extension from the repository root (whatever the folder is called),
reset Blender to an empty scene per test, render with the Stylized engine to numpy, and save the
image as an artifact when a pixel assertion fails."""
from __future__ import annotations

import os
import pathlib
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = "stylized_renderer"
TESTDATA = ROOT.parent / "shared" / "testdata"
ARTIFACTS = ROOT / "out" / "test-artifacts"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))   # tools/ and demo/ are importable as top-level packages

from tools import render_capture  # noqa: E402  (F12 results: the hook tools/_bootstrap installs)


def load_extension():
    """Import the repository root as the package ``stylized_renderer`` (once)."""
    from tools import _bootstrap

    return _bootstrap.load(register=False)


import bpy  # noqa: E402  (after sys.path set-up)

EXT = load_extension()
_registered = False


def ensure_registered():
    global _registered
    if not _registered:
        EXT.register()
        _registered = True
    return EXT


def set_registered(flag: bool):
    global _registered
    _registered = flag


from support.vrm_addon import vrm_addon  # noqa: E402,F401  (fixture: the VRM Add-on for one test)


@pytest.fixture
def ext():
    """The extension package, registered."""
    return ensure_registered()


_factory_addons = None


def reset_to_empty():
    """Blender on its factory startup file, empty.  ``wm.read_factory_settings`` reloads the
    preferences too, five times as long as the startup file alone (0.15 s against 0.03 s a test on
    the loaded machine, ~600 tests): it runs only while the enabled add-ons differ from the factory
    set (a test enabled the VRM Add-on or Rigify), the one preference the suite changes."""
    global _factory_addons
    if _factory_addons is None or frozenset(bpy.context.preferences.addons.keys()) != _factory_addons:
        bpy.ops.wm.read_factory_settings(use_empty=True)
        _factory_addons = frozenset(bpy.context.preferences.addons.keys())
    else:
        bpy.ops.wm.read_homefile(use_empty=True, use_factory_startup=True)


@pytest.fixture
def clean_preview(ext):
    """No preview state or timer left from another test, before and after."""
    from stylized_renderer.engine.features.preview import control as preview
    preview.clear_states()
    yield
    preview.stop_timer()
    preview.clear_states()


@pytest.fixture
def empty_scene(ext):
    """Blender reset to an empty scene with the Stylized engine selected."""
    reset_to_empty()
    scene = bpy.context.scene
    scene.render.engine = "STYLIZED"
    scene.render.resolution_x = 160
    scene.render.resolution_y = 120
    scene.render.resolution_percentage = 100
    scene.render.image_settings.file_format = "PNG"
    if hasattr(scene, "stylized"):
        scene.stylized.render_samples = 1   # one sample + FXAA (what the pixel tests were written for)
    return scene


def render_scene(scene=None, write_still=False) -> np.ndarray:
    """F12 through bpy.ops; returns the linear float RGBA (H, W, 4) array our engine produced."""

    scene = scene or bpy.context.scene
    render_capture.LAST_RENDER.clear()
    bpy.ops.render.render(write_still=write_still, scene=scene.name)
    if "pixels" not in render_capture.LAST_RENDER:
        raise AssertionError("the Stylized engine produced no image")
    return render_capture.LAST_RENDER["pixels"]


@pytest.fixture
def render():
    return render_scene


def save_png(pixels: np.ndarray, path: pathlib.Path) -> pathlib.Path:
    """Save a linear float RGBA array as a PNG (sRGB-encoded) for people to look at."""
    path.parent.mkdir(parents=True, exist_ok=True)
    h, w = pixels.shape[:2]
    img = bpy.data.images.new("__artifact__", width=w, height=h, alpha=True, float_buffer=True)
    try:
        img.pixels.foreach_set(np.ascontiguousarray(pixels, dtype=np.float32).ravel())
        img.filepath_raw = str(path)
        img.file_format = "PNG"
        img.save()
    finally:
        bpy.data.images.remove(img)
    return path


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" and rep.failed:
        try:

            px = render_capture.LAST_RENDER.get("pixels")
            if px is not None:
                p = save_png(px, ARTIFACTS / f"{item.name}.png")
                rep.sections.append(("artifact", f"last render saved to {p}"))
        except Exception as ex:  # an artifact must never hide the real failure
            rep.sections.append(("artifact", f"could not save the last render: {ex}"))


def addon():
    """The registered add-on's AddonState (engine/blender/addon_state.py): what render_engine's viewport
    sessions, the operators and the panels share (preview states, bakes, the last viewport session)."""
    from stylized_renderer.engine.blender import render_engine

    ensure_registered()
    state = render_engine.addon_state()
    assert state is not None, "the registered add-on has its AddonState"
    return state


class BakeModule:
    """``engine.blender.bake.cache`` with the add-on's bake cache as ``cache`` (the one the operators
    bake into and the viewport sessions made with the add-on play); other names are the module's,
    also for monkeypatch (set on the module)."""

    def __init__(self, module, cache):
        object.__setattr__(self, "_module", module)
        object.__setattr__(self, "cache", cache)

    def __getattr__(self, name):
        return getattr(self._module, name)

    def __setattr__(self, name, value):
        setattr(self._module, name, value)

    def __delattr__(self, name):
        delattr(self._module, name)


@pytest.fixture(scope="session")
def rigify_generated(tmp_path_factory):
    """A .blend holding only a freshly generated Rigify rig (tools/rigify_rig.generate_rigify: the
    slow step, once per run instead of once per module); ``rigify_character`` dresses it."""
    from tools import rigify_rig

    ensure_registered()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    rigify_rig.generate_rigify()
    path = tmp_path_factory.mktemp("rigify_generated") / "rigify_generated.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


def rigify_character(generated, **kw):
    """tools/rigify_rig.build_rigify(**kw) on the rig of ``generated`` (the session's
    rigify_generated file, opened): (rig, body, action)."""
    from tools import rigify_rig

    bpy.ops.wm.open_mainfile(filepath=str(generated))
    return rigify_rig.build_rigify(rig=bpy.data.objects["rig"], **kw)


@pytest.fixture
def bakes(ext):
    """The preview bake module with the add-on's bake cache emptied, at one substep (test_bake,
    test_bake_between, ...)."""
    from stylized_renderer.engine.blender.bake import cache as bake

    cache = addon().bakes
    cache.clear()
    cache.substeps = 1
    yield BakeModule(bake, cache)
    cache.clear()
    cache.substeps = 1


@pytest.fixture
def crig(empty_scene, bakes):
    """A constraint rig (tools/rigify_rig.py) with the bake cache of ``bakes``."""
    from tools import rigify_rig

    return rigify_rig.build_constraint_rig()


def add_camera(scene, location=(0.0, -6.0, 0.0), rotation=(1.5707963, 0.0, 0.0), ortho=False, lens=50.0):
    cam_data = bpy.data.cameras.new("Camera")
    cam_data.lens = lens
    if ortho:
        cam_data.type = "ORTHO"
    cam = bpy.data.objects.new("Camera", cam_data)
    scene.collection.objects.link(cam)
    cam.location = location
    cam.rotation_euler = rotation
    scene.camera = cam
    return cam


def add_sun(scene, rotation=(0.0, 0.0, 0.0), strength=1.0, color=(1.0, 1.0, 1.0), name="Sun"):
    data = bpy.data.lights.new(name, "SUN")
    data.energy = strength
    data.color = color
    ob = bpy.data.objects.new(name, data)
    ob.rotation_euler = rotation
    scene.collection.objects.link(ob)
    return ob


def add_material(name, color):
    mat = bpy.data.materials.new(name)
    mat.use_nodes = True
    bsdf = next(n for n in mat.node_tree.nodes if n.type == "BSDF_PRINCIPLED")
    bsdf.inputs["Base Color"].default_value = tuple(color) + ((1.0,) if len(color) == 3 else ())
    mat.diffuse_color = tuple(color) + ((1.0,) if len(color) == 3 else ())
    return mat


def add_egg_ball(scene, name="Ball", segments=(32, 16), radius=1.0, value=1.0):
    """A smooth UV sphere linked to ``scene`` with a strong shape key "Spike" at ``value``: an
    egg with a long top (it moves vertices and turns the normals)."""
    import bmesh

    me = bpy.data.meshes.new(name)
    bm = bmesh.new()
    bmesh.ops.create_uvsphere(bm, u_segments=segments[0], v_segments=segments[1], radius=radius)
    bm.to_mesh(me)
    bm.free()
    for poly in me.polygons:
        poly.use_smooth = True
    ob = bpy.data.objects.new(name, me)
    scene.collection.objects.link(ob)
    ob.shape_key_add(name="Basis", from_mix=False)
    kb = ob.shape_key_add(name="Spike", from_mix=False)
    co = np.empty(len(me.vertices) * 3, np.float32)
    me.vertices.foreach_get("co", co)
    co = co.reshape(-1, 3)
    up = np.clip(co[:, 2], 0.0, None)
    co[:, 0] *= 1.0 - 0.5 * up
    co[:, 1] *= 1.0 - 0.5 * up
    co[:, 2] += 0.9 * up ** 2
    kb.data.foreach_set("co", co.ravel())
    kb.value = value
    return ob


def add_mesh_object(scene, name, verts, faces, location=(0, 0, 0), material=None):
    me = bpy.data.meshes.new(name)
    me.from_pydata([tuple(v) for v in verts], [], [tuple(f) for f in faces])
    me.update()
    ob = bpy.data.objects.new(name, me)
    ob.location = location
    scene.collection.objects.link(ob)
    if material is not None:
        me.materials.append(material)
    return ob


def cube_geometry(size=1.0):
    s = size / 2.0
    verts = [(-s, -s, -s), (s, -s, -s), (s, s, -s), (-s, s, -s), (-s, -s, s), (s, -s, s), (s, s, s), (-s, s, s)]
    faces = [(0, 3, 2, 1), (4, 5, 6, 7), (0, 1, 5, 4), (1, 2, 6, 5), (2, 3, 7, 6), (3, 0, 4, 7)]
    return verts, faces


#: EEVEE's render engine id on this Blender (BLENDER_EEVEE_NEXT before 5.0)
EEVEE = "BLENDER_EEVEE" if bpy.app.version >= (5, 0, 0) else "BLENDER_EEVEE_NEXT"

_exit_status = 0


def pytest_sessionfinish(session, exitstatus):
    global _exit_status
    _exit_status = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """bpy 4.x blocks forever at interpreter exit (in its global state's destructor) while a
    RenderEngine, handler or timer is still registered, which the suite leaves behind: end the
    process with pytest's status once pytest is done (docs/versions.md)."""
    if bpy.app.version < (5, 0, 0):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_exit_status)


def render_eevee(scene, path, samples=4):
    """F12 with EEVEE (``samples`` samples) into an EXR at ``path``: the linear float RGBA (H, W, 4)
    array; the scene is left on the Stylized engine afterwards.  On llvmpipe an EEVEE render costs
    a fixed ~2.4 s plus ~1-2 s a sample (2 loaded cores, 128 x 96; hardly the resolution)."""
    scene.render.engine = EEVEE
    scene.eevee.taa_render_samples = samples
    scene.render.image_settings.file_format = "OPEN_EXR"
    scene.render.filepath = str(path)
    bpy.ops.render.render(write_still=True, scene=scene.name)
    img = bpy.data.images.load(str(path), check_existing=False)
    try:
        a = np.array(img.pixels[:], np.float32).reshape(img.size[1], img.size[0], 4)
    finally:
        bpy.data.images.remove(img)
    scene.render.engine = "STYLIZED"
    scene.render.image_settings.file_format = "PNG"
    return a


def run_deform_check(capsys, frames=None, mode="both", morph="auto", player_step: int = 1):
    """tools/check_deform.py on the open scene: (exit status, printed output, summary fields)."""
    from tools import check_deform

    rc = check_deform.run_checks(frames, mode, morph, player_step)
    out = capsys.readouterr().out
    return rc, out, check_deform.summary_fields(out)


# --- viewport matrices and a hand-driven clock (test_viewport_draw, test_preview_hostile,
#     test_vrm_preview_channels)

def look_at(eye, target=(0.0, 0.0, 0.0), up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """A view matrix (world -> camera) looking from ``eye`` at ``target``."""
    eye, target, up = (np.asarray(v, np.float64) for v in (eye, target, up))
    f = target - eye
    f /= np.linalg.norm(f)
    r = np.cross(f, up)
    r /= np.linalg.norm(r)
    u = np.cross(r, f)
    m = np.eye(4)
    m[0, :3], m[1, :3], m[2, :3] = r, u, -f
    m[:3, 3] = -m[:3, :3] @ eye
    return m


def perspective(fov_y, aspect, near=0.1, far=100.0) -> np.ndarray:
    """An OpenGL perspective projection matrix."""
    import math

    t = 1.0 / math.tan(fov_y / 2.0)
    m = np.zeros((4, 4))
    m[0, 0], m[1, 1] = t / aspect, t
    m[2, 2], m[2, 3] = (far + near) / (near - far), 2.0 * far * near / (near - far)
    m[3, 2] = -1.0
    return m


class Clock:
    """The session's frame clock (``time.perf_counter`` in engine/blender/session.py), advanced by hand
    (``now``): so that "wait 2 s" or each preview update is an exact time."""

    def __init__(self):
        import time

        self.now = 1000.0
        self._time = time

    def perf_counter(self):
        return self.now

    def __getattr__(self, name):
        return getattr(self._time, name)


@pytest.fixture
def view_session(ext):
    """A viewport session (the Stats panel reads the last one), freed in a GPU context and
    forgotten as the last viewport session."""
    from stylized_renderer.engine.blender.session import StylizedSession
    from stylized_renderer.engine.gpu import util as gpu_util

    s = StylizedSession(viewport=True, addon=addon())     # as render_engine's view_update makes it
    yield s
    gpu_util.run_in_gpu_context(s.free)
    addon().forget_viewport_session()
