"""The lamp clusters (engine/gpu/passes/clusters.py) against the plain rule: every point a lamp
reaches, seen by the camera, lies in a cluster whose list holds that lamp; a lamp far from a
cluster is not in it; the budget keeps the strongest and names the others."""
from __future__ import annotations

import numpy as np

import conftest as C
from stylized_renderer.engine.core.world.frame import CameraData, LightData
from stylized_renderer.engine.gpu.passes.clusters import SLICES, TILE, build_clusters

W, H = 200, 120


def _camera(ortho=False):
    view = C.look_at(np.array([0.0, -12.0, 6.0]), (0.0, 0.0, 0.0))
    proj = C.perspective(np.radians(50.0), W / H, 0.5, 60.0)
    if ortho:
        proj = np.diag([1 / 8.0, 1 / (8.0 * H / W), -2 / 59.5, 1.0])
        proj[2, 3] = -(60.0 + 0.5) / 59.5
    return CameraData(view=view, projection=proj, is_ortho=ortho)


def _lamps(rng, n):
    return [LightData(kind="POINT", color=np.ones(3), direction=np.array([0, 0, -1.0]),
                      position=rng.uniform((-8, -8, 0.2), (8, 8, 4)), influence=float(rng.uniform(0.5, 5.0)),
                      name=f"L{i}") for i in range(n)]


def _cluster_of(camera, pts, clusters):
    vp = camera.projection @ camera.view
    h = np.c_[pts, np.ones(len(pts))] @ vp.T
    ndc = h[:, :3] / h[:, 3:]
    px = (ndc[:, 0] * 0.5 + 0.5) * W
    py = (ndc[:, 1] * 0.5 + 0.5) * H
    depth = -(np.c_[pts, np.ones(len(pts))] @ camera.view.T)[:, 2]
    near, scale, ortho = clusters.depth
    s = (depth - near) * scale if ortho else np.log(np.maximum(depth, near) / near) * scale
    ok = (np.abs(ndc) <= 1.0).all(1)
    return ok, (px // TILE).astype(int), (py // TILE).astype(int), np.clip(np.floor(s), 0, SLICES - 1).astype(int)


def _list(clusters, tx, ty, s):
    rows = clusters.rows
    col = clusters.lists[ty * rows:(ty + 1) * rows, tx * SLICES + s]
    return set(col[1:].ravel()[:int(col[0, 0])].astype(int).tolist())


def test_every_reached_point_lists_its_lamp():
    rng = np.random.default_rng(3)
    for ortho in (False, True):
        cam = _camera(ortho)
        lamps = _lamps(rng, 40)
        cl = build_clusters(lamps, np.arange(40.0), cam, W, H, budget=1000)
        assert not cl.left_out
        checked = 0
        for i, l in enumerate(cl.lamps):
            d = rng.normal(size=(300, 3))
            d *= (rng.uniform(0, 1, 300) ** (1 / 3) * l.influence / np.linalg.norm(d, axis=1))[:, None]
            ok, tx, ty, s = _cluster_of(cam, l.position + d, cl)
            for k in np.flatnonzero(ok):
                assert i in _list(cl, tx[k], ty[k], s[k])
                checked += 1
        assert checked > 1000
        # and the lists are far from "every lamp everywhere"
        assert cl.mean < 0.5 * len(lamps), cl.mean


def test_budget_keeps_the_strongest_and_names_the_rest():
    rng = np.random.default_rng(5)
    cam = _camera()
    lamps = _lamps(rng, 30)
    for l in lamps:
        l.position = np.array([0.0, 0.0, 1.0]) + rng.normal(scale=0.1, size=3)
        l.influence = 4.0
    strength = np.arange(30.0)
    cl = build_clusters(lamps, strength, cam, W, H, budget=8)
    assert cl.most == 8
    kept = {l.name for l in cl.lamps[:8]}
    assert kept == {f"L{i}" for i in range(22, 30)}
    assert set(cl.left_out) == {f"L{i}" for i in range(22)}
