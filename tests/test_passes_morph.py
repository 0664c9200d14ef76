"""Morphs in the F12 image: a sphere with a strong shape key (it moves vertices and turns the
normals) renders the same whether the key reaches the GPU as a CPU-rebuilt stream or composed in
the vertex shader, and clearly differently from the sphere without the key."""
from __future__ import annotations

import math

import bpy
import numpy as np
import pytest

from conftest import ARTIFACTS, add_camera, add_egg_ball, add_mesh_object, add_sun, save_png
from stylized_renderer.engine.core.world.scene_runtime import SceneRuntime
from tools import render_capture  # noqa: E402  (F12 results: the hook the tests install)

SHADOWS = True


def build(scene, value):
    scene.render.resolution_x = 160
    scene.render.resolution_y = 160
    scene.stylized.fxaa = False
    scene.stylized.outlines = True
    scene.stylized.shadows = SHADOWS
    add_camera(scene, location=(0.0, -6.0, 2.5), rotation=(math.radians(70), 0.0, 0.0))
    add_sun(scene, rotation=(math.radians(-35), math.radians(30), 0.0), strength=1.0)
    ground = bpy.data.materials.new("GroundMat")
    g = ground.stylized_mtoon
    g.enabled = True
    g.base_color = (0.8, 0.8, 0.8, 1.0)
    g.shade_color = (0.1, 0.2, 0.6)
    g.shading_toony = 0.95
    add_mesh_object(scene, "Ground", [(-6, -3, -1), (6, -3, -1), (6, 6, -1), (-6, 6, -1)], [(0, 1, 2, 3)],
                    material=ground)
    ob = add_egg_ball(scene, value=value)
    mat = bpy.data.materials.new("BallMat")
    p = mat.stylized_mtoon
    p.enabled = True
    p.base_color = (0.9, 0.7, 0.2, 1.0)
    p.shade_color = (0.2, 0.1, 0.4)
    p.shading_toony = 0.6
    p.outline_width_mode = "worldCoordinates"
    p.outline_width = 0.03
    p.outline_color = (0.0, 0.0, 0.0)
    ob.data.materials.append(mat)
    return ob


@pytest.fixture
def policy(monkeypatch):
    def use(name):
        monkeypatch.setattr(SceneRuntime, "default_morph_policy", name)
    return use


def test_shader_composed_morph_matches_cpu_rebuild_in_every_pass(empty_scene, render, policy):
    scene = empty_scene
    build(scene, 1.0)

    policy("rebuild")
    rebuilt = render(scene).copy()
    assert render_capture.LAST_RENDER["stats"]["shader_morphs"] == 0
    policy("shader")
    composed = render(scene).copy()
    assert render_capture.LAST_RENDER["stats"]["shader_morphs"] == 1
    scene.objects["Ball"].data.shape_keys.key_blocks["Spike"].value = 0.0
    policy("rebuild")
    plain = render(scene).copy()
    for name, img in (("rebuilt", rebuilt), ("composed", composed), ("no_key", plain)):
        save_png(img, ARTIFACTS / f"morph_{name}.png")
    diff = np.abs(composed[..., :3] - rebuilt[..., :3]).max(axis=2)
    assert np.mean(diff > 2.0 / 255.0) < 0.002, f"max diff {diff.max():.4f}"
    changed = np.abs(plain[..., :3] - rebuilt[..., :3]).max(axis=2) > 0.05
    assert changed.mean() > 0.03          # the key really changes the picture


def test_equal_morph_weights_share_one_texture(empty_scene):
    """Streams drawing the same weights (the primitives of one mesh, a crowd at one expression)
    share one weights texture; other weights get their own, holding their values; the backend
    keeps the last WEIGHT_TEXTURES distinct sets."""
    from stylized_renderer.engine.gpu import backend as gpu_backend
    from stylized_renderer.engine.gpu import util as gpu_util
    from stylized_renderer.engine.gpu.backend import GpuBackend

    def task():
        be = GpuBackend()
        a = np.array([0.25, 0.0, 1.0], np.float32)
        ta = be._weights_texture(a)
        assert be._weights_texture(a.copy()) is ta
        b = np.array([0.25, 0.5, 1.0], np.float32)
        tb = be._weights_texture(b)
        assert tb is not ta
        for w, tex in ((a, ta), (b, tb)):
            got = np.array(tex.read().to_list(), np.float32).reshape(-1)[:3]
            assert np.array_equal(got, w)
        for i in range(gpu_backend.WEIGHT_TEXTURES):
            be._weights_texture(np.array([i, 0.0, 0.0], np.float32))
        assert len(be._weights) == gpu_backend.WEIGHT_TEXTURES
        assert be._weights_texture(a) is not ta        # evicted: made again

    gpu_util.run_in_gpu_context(task)


def test_a_primitives_live_target_check_keeps_one_slot(empty_scene):
    """The GPU backend remembers, per primitive, the last frozen weights that fit the targets its
    shader-morph deltas hold (``_live_ok``): when a key turns on, the primitive's deltas are packed
    again with a new live-target array, and its slot takes that array.  N keys turned on one after
    the other (each then animated a frame, refreshed in place) leave one slot, and every frame
    draws the state's weights.  Before: one entry per live-target array ever seen, kept (with the
    array) until the backend was released."""
    from stylized_renderer.engine.gpu import util as gpu_util
    from stylized_renderer.engine.gpu.backend import GpuBackend
    from support import morph_meshes as M

    n = 6
    deltas = []
    for k in range(n):
        d = np.zeros((4, 3))
        d[k % 4, k % 3] = 0.1 * (k + 1)
        deltas.append(d)

    def task():
        be = GpuBackend()
        _mesh, rm, inst, _be = M.build([M.target(f"k{k}", deltas[k]) for k in range(n)], be)
        inst.morph_policy = "shader"
        p = inst.primitives[0]
        st = inst.morph_state(0)
        assert st is not None
        w = np.zeros(n, np.float32)
        sizes, refreshed = [], []
        try:
            for k in range(n):
                for value in (0.5, 0.75):        # turned on (new deltas), then animated (refreshed)
                    w[k] = value
                    before = p.stream
                    assert st.set_weights(np.arange(n), w) and inst.update() and p.shader_morph
                    assert p.stream is not None and np.array_equal(p.stream.morph_weights, w)
                refreshed.append(p.stream is before)
                sizes.append(len(be._live_ok))
        finally:
            inst.release()
            rm.release()
            be.release_all()
        return sizes, refreshed

    sizes, refreshed = gpu_util.run_in_gpu_context(task)
    assert all(refreshed), refreshed
    assert sizes == [1] * n, sizes
