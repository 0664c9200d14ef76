"""Small GPU helpers shared by the passes, the runtime and the tools.

In background mode Blender only provides a GPU context inside ``RenderEngine.render()`` of an
engine with ``bl_use_gpu_context = True``.  ``run_in_gpu_context`` uses that: it queues a callable,
renders a tiny temporary scene with the STYLIZED engine, and our ``render()`` runs the queued
callable instead of drawing.  Tools (check_deform) and tests use it to read GPU results back.
"""
from __future__ import annotations

import numpy as np

_pending_tasks: list = []
TASK_SCENE_NAME = ".stylized_gpu_task"


def texture_to_numpy(texture, width: int, height: int, channels: int = 4) -> np.ndarray:
    """Read an RGBA32F ``GPUTexture`` back as a (height, width, channels) float32 array.

    ``gpu.types.Buffer`` exposes wrong strides through the buffer protocol in Blender 5.0
    (Fortran-like), so the raw C-ordered memory is re-viewed with explicit strides.
    """
    buf = texture.read()
    raw = np.asarray(buf)
    item = raw.dtype.itemsize
    view = np.lib.stride_tricks.as_strided(
        raw, shape=(height, width, channels), strides=(width * channels * item, channels * item, item)
    )
    return np.array(view, dtype=np.float32, copy=True)


def has_pending_task() -> bool:
    return bool(_pending_tasks)


def run_pending_tasks() -> None:
    """Called from inside ``render()``: run every queued callable with the GPU context current."""
    while _pending_tasks:
        task = _pending_tasks.pop(0)
        try:
            task["result"] = task["fn"]()
        except BaseException as ex:  # handed back to the caller of run_in_gpu_context
            task["error"] = ex


def run_in_gpu_context(fn):
    """Run ``fn()`` with a GPU context and return its result (re-raising its exception).

    Works headless. Creates a temporary scene with a camera and removes it again, so the user's
    scenes are untouched.
    """
    import bpy

    if not _engine_registered():
        raise RuntimeError("the Stylized engine is not registered")
    task = {"fn": fn}
    _pending_tasks.append(task)
    scene = bpy.data.scenes.new(TASK_SCENE_NAME)
    cam_data = bpy.data.cameras.new(TASK_SCENE_NAME)
    cam = bpy.data.objects.new(TASK_SCENE_NAME, cam_data)
    try:
        scene.collection.objects.link(cam)
        scene.camera = cam
        scene.render.engine = "STYLIZED"
        scene.render.resolution_x = 4
        scene.render.resolution_y = 4
        scene.render.resolution_percentage = 100
        bpy.ops.render.render(scene=scene.name)
    finally:
        if task in _pending_tasks:
            _pending_tasks.remove(task)
        bpy.data.objects.remove(cam)
        bpy.data.cameras.remove(cam_data)
        bpy.data.scenes.remove(scene)
    if "error" in task:
        raise task["error"]
    if "result" not in task:
        raise RuntimeError("the GPU task did not run (no GPU context could be made)")
    return task["result"]


ENGINE_ID = "STYLIZED"


def _engine_registered() -> bool:
    """Whether a RenderEngine called STYLIZED is registered (asked through bpy, so this module
    does not import the engine adapter that imports it)."""
    import bpy

    return any(getattr(c, "bl_idname", "") == ENGINE_ID and c.is_registered
               for c in bpy.types.RenderEngine.__subclasses__())
