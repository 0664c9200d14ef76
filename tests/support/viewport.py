"""The headless viewport of the tests (test_viewport_draw and the tests that draw as it does):
``draw`` runs ``render_engine.draw_view`` with a viewport's matrices and returns the pixels,
``object_mask`` the pixels that are not background, ``CapturedUpdates`` records the depsgraph
updates Blender really reports; the fixtures ``session`` (a viewport session) and ``captured``
(updates recorded while a test runs) work in any test module that imports them by name."""
from __future__ import annotations

import bpy
import numpy as np
import pytest

from stylized_renderer.engine.blender.render_engine import draw_view
from stylized_renderer.engine.gpu import util as gpu_util
from stylized_renderer.engine.gpu.util import texture_to_numpy


def draw(session, view, window, ortho, w, h) -> np.ndarray:
    dg = bpy.context.evaluated_depsgraph_get()
    return gpu_util.run_in_gpu_context(
        lambda: texture_to_numpy(draw_view(session, dg, view, window, ortho, w, h), w, h))


def object_mask(px: np.ndarray) -> np.ndarray:
    """Pixels that differ from the background (the corner pixel)."""
    return np.abs(px[..., :3] - px[0, 0, :3]).max(axis=2) > 0.02


@pytest.fixture
def session(view_session):
    return view_session


class CapturedUpdates:
    """Blender's own depsgraph updates, recorded by a depsgraph_update_post handler."""

    class Update:
        def __init__(self, u):
            self.id = u.id.original if hasattr(u.id, "original") else u.id
            self.is_updated_geometry = u.is_updated_geometry
            self.is_updated_transform = u.is_updated_transform
            self.is_updated_shading = u.is_updated_shading

    def __init__(self):
        self.updates = []
        bpy.app.handlers.depsgraph_update_post.append(self._handler)
        bpy.app.handlers.frame_change_post.append(self._handler)     # a frame's evaluation

    def _handler(self, scene, depsgraph):
        if scene.name.startswith(gpu_util.TASK_SCENE_NAME):
            return
        self.updates += [self.Update(u) for u in depsgraph.updates
                         if not getattr(u.id, "name", "").startswith(gpu_util.TASK_SCENE_NAME)]

    def take(self):
        bpy.context.view_layer.update()
        out, self.updates = self.updates, []
        return out

    def close(self):
        bpy.app.handlers.depsgraph_update_post.remove(self._handler)
        bpy.app.handlers.frame_change_post.remove(self._handler)


@pytest.fixture
def captured():
    c = CapturedUpdates()
    yield c
    c.close()
