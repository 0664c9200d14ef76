"""Small GPU helpers shared by the passes, the runtime and the tools.

In background mode Blender only provides a GPU context inside ``RenderEngine.render()`` of an
engine with ``bl_use_gpu_context = True``.  ``run_in_gpu_context`` uses that: it registers a
temporary render engine whose ``render()`` runs the callable (held by that class alone, for the
length of the call), renders a tiny temporary scene with it, then removes both again.  Tools
(check_deform) and tests use it to read GPU results back.
"""
from __future__ import annotations

from typing import Callable, TypeVar

import numpy as np

T = TypeVar("T")

TASK_SCENE_NAME = ".stylized_gpu_task"
TASK_ENGINE_ID = "STYLIZED_GPU_TASK"


class GpuContextMark:
    """Which GPU context the owner's framebuffers were made in.  A final render draws in its
    Render's own GPU context; in a window Blender frees that context once the render is done
    (RE_FreeUnusedGPUResources, unless the GPU compositor shows the result) and makes a new one
    for the next render, and an OpenGL framebuffer does not move between contexts: binding one of
    the old context's silently binds nothing ("Framebuffer is not bound").  The context is told by
    its active framebuffer at the start of a render: ``gpu.state.active_framebuffer_get`` hands
    back the same Python object for a framebuffer while one is held, and a freed context's
    framebuffer never comes back, so another object means another context (a false alarm would
    only make the owner's framebuffers again)."""

    def __init__(self):
        self._mark = None
        self.changes = 0     # calls that found another context than the last

    def moved(self) -> bool:
        """True when the current GPU context is not the one of the last call (the first call: False)."""
        import gpu

        current = gpu.state.active_framebuffer_get()
        previous, self._mark = self._mark, current
        if previous is None or previous is current:
            return False
        self.changes += 1
        return True


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


def _task_engine(task: dict):
    """A RenderEngine class whose ``render()`` runs ``task["fn"]`` once with the GPU context
    current and writes an empty result (the task travels in this class, made per call)."""
    import bpy

    class StylizedGpuTask(bpy.types.RenderEngine):
        bl_idname = TASK_ENGINE_ID
        bl_label = "Stylized GPU task"
        bl_use_gpu_context = True
        bl_use_preview = False

        def render(self, depsgraph):
            if "fn" in task:
                fn = task.pop("fn")
                try:
                    task["result"] = fn()
                except BaseException as ex:  # handed back to the caller of run_in_gpu_context
                    task["error"] = ex
            rd = depsgraph.scene.render
            result = self.begin_result(0, 0, max(1, rd.resolution_x), max(1, rd.resolution_y))
            self.end_result(result)

    return StylizedGpuTask


def run_in_gpu_context(fn: Callable[[], T]) -> T:
    """Run ``fn()`` with a GPU context and return its result (re-raising its exception).

    Works headless. Creates a temporary render engine and a temporary scene with a camera and
    removes them again, so the user's scenes and engines are untouched.
    """
    import bpy

    if not _engine_registered():
        raise RuntimeError("the Stylized engine is not registered")
    task: dict = {"fn": fn}
    engine = _task_engine(task)
    bpy.utils.register_class(engine)
    scene = cam_data = cam = None
    try:
        scene = bpy.data.scenes.new(TASK_SCENE_NAME)
        cam_data = bpy.data.cameras.new(TASK_SCENE_NAME)
        cam = bpy.data.objects.new(TASK_SCENE_NAME, cam_data)
        scene.collection.objects.link(cam)
        scene.camera = cam
        scene.render.engine = TASK_ENGINE_ID
        scene.render.resolution_x = 4
        scene.render.resolution_y = 4
        scene.render.resolution_percentage = 100
        bpy.ops.render.render(scene=scene.name)
    finally:
        if cam is not None:
            bpy.data.objects.remove(cam)
        if cam_data is not None:
            bpy.data.cameras.remove(cam_data)
        if scene is not None:
            bpy.data.scenes.remove(scene)
        bpy.utils.unregister_class(engine)
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
