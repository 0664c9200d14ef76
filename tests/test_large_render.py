"""Very large final renders fit or stop with a message (engine/gpu/passes/target_budget.py, issue 37).

On a software GPU (llvmpipe: the targets are the process's memory) a render whose targets need
more than the system has available stops before drawing: the F12 names the size, the need and the
limit, no traceback, no session is kept half-built, and the next render of a sane size works.
"""
from __future__ import annotations

import bpy
import numpy as np
import pytest

import conftest as C
from stylized_renderer.engine.gpu.passes import target_budget as TB


def test_target_estimate_grows_with_the_settings_that_add_targets():
    base = TB.frame_bytes(1000, 1000, 1)
    assert base == 1000 * 1000 * (52 + 32)
    assert TB.frame_bytes(1000, 1000, 8) > base
    assert TB.frame_bytes(1000, 1000, 8, passes=True, screen_outline=True) == TB.frame_bytes(1000, 1000, 8) + 48 * 10 ** 6
    assert TB.frame_bytes(2000, 1000, 8) == 2 * TB.frame_bytes(1000, 1000, 8)
    assert TB.check(8192, 8192, 10 * 2 ** 30, "NVIDIA GeForce RTX", 1) is None      # hardware: not known
    assert TB.check(8192, 8192, 10 * 2 ** 30, "llvmpipe (LLVM 15.0.7, 256 bits)", 20 * 2 ** 30) is None
    msg = TB.check(8192, 8192, 10 * 2 ** 30, "llvmpipe (LLVM 15.0.7, 256 bits)", 4 * 2 ** 30) or ""
    assert "8192x8192" in msg and "10.0 GB" in msg and "4.0 GB" in msg


def test_a_render_too_large_for_the_software_gpu_stops_with_a_message(empty_scene):
    from stylized_renderer.engine.blender import render_engine
    from stylized_renderer.engine.gpu import util
    from tools import render_capture

    def info():
        import gpu

        return int(gpu.capabilities.max_texture_size_get()), gpu.platform.renderer_get()

    limit, renderer = util.run_in_gpu_context(info)
    scene = empty_scene
    C.add_mesh_object(scene, "Box", *C.cube_geometry(1.0))
    C.add_sun(scene)
    C.add_camera(scene)
    scene.stylized.render_samples = 8
    side = min(limit, 16384)
    need = TB.frame_bytes(side, side, 8)
    avail = TB.available_bytes()
    if not TB.software_renderer(renderer) or avail is None or need <= avail:
        pytest.skip(f"not a software GPU ({renderer}), or it could hold a {side}x{side} render ({need / 2 ** 30:.1f} GB of "
                    f"{(avail or 0) / 2 ** 30:.1f} GB available)")
    render_engine.free_final_session()
    scene.render.resolution_x = scene.render.resolution_y = side
    render_capture.LAST_RENDER.clear()
    try:
        bpy.ops.render.render(scene=scene.name)
    except RuntimeError as ex:             # (the operator turns the ERROR report into an exception)
        assert f"{side}x{side}" in str(ex)
    err = render_capture.LAST_RENDER.get("error", "")
    if TB.software_renderer(renderer):
        assert f"{side}x{side}" in err and "GB" in err and "available" in err, err
    assert "pixels" not in render_capture.LAST_RENDER
    assert render_engine.kept_final_session() is None        # nothing half-built kept
    scene.render.resolution_x, scene.render.resolution_y = 64, 48
    px = C.render_scene(scene)
    assert px.shape == (48, 64, 4) and np.isfinite(px).all()
