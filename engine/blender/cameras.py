"""The render camera as CameraData: a Blender camera object (F12), a viewport's matrices, and
one view of a multi-view (stereo) render."""
from __future__ import annotations

import numpy as np

from ..core.world.frame import CameraData


def camera_from_matrices(view: np.ndarray, projection: np.ndarray, is_ortho: bool = False) -> CameraData:
    return CameraData(view=np.asarray(view, np.float64), projection=np.asarray(projection, np.float64), is_ortho=is_ortho)


def camera_from_object(depsgraph, cam_eval, width: int, height: int) -> CameraData:
    rd = depsgraph.scene.render
    proj = cam_eval.calc_matrix_camera(depsgraph, x=width, y=height,
                                       scale_x=rd.pixel_aspect_x, scale_y=rd.pixel_aspect_y)
    view = np.linalg.inv(np.array(cam_eval.matrix_world))
    is_ortho = getattr(cam_eval.data, "type", "PERSP") == "ORTHO"
    return camera_from_matrices(view, np.array(proj), is_ortho)


def camera_for_view(depsgraph, cam_eval, width: int, height: int, model, shift_x: float) -> CameraData:
    """One view of a multi-view (stereo) render: the view's camera matrix ``model`` and lens shift
    ``shift_x`` as Blender's RenderEngine gives them (camera_model_matrix / camera_shift_x).  The
    camera's own projection is moved by the difference of shifts: Blender's view plane is offset
    by shift x viewfac (BKE_camera_params_compute_viewplane), viewfac the fitted sensor's side in
    pixels, so the projection's x offset changes by 2 dshift viewfac / width."""
    rd = depsgraph.scene.render
    base = camera_from_object(depsgraph, cam_eval, width, height)
    cd = cam_eval.data
    aspx, aspy = float(rd.pixel_aspect_x), float(rd.pixel_aspect_y)
    fit = getattr(cd, "sensor_fit", "AUTO")
    if fit == "AUTO":
        fit = "HORIZONTAL" if aspx * width >= aspy * height else "VERTICAL"
    viewfac = float(width) if fit == "HORIZONTAL" else (aspy / aspx) * float(height)
    d = 2.0 * (float(shift_x) - float(cd.shift_x)) * viewfac / float(width)
    proj = np.array(base.projection)
    if base.is_ortho:
        proj[0, 3] -= d
    else:
        proj[0, 2] += d
    view = np.linalg.inv(np.asarray(model, np.float64))
    return camera_from_matrices(view, proj, base.is_ortho)
