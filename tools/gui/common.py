"""What the GUI journeys share: the installed extension's state, the demo's colours, picture checks."""
from __future__ import annotations

import sys

import bpy
import numpy as np

sys.path.insert(0, "/repo/tools/gui")
from harness import region, screen_rect, view3d_areas  # noqa: E402

EXT = "bl_ext.user_default.stylized_renderer"


def _ext(name):
    """A module of the installed extension (bl_ext.user_default.stylized_renderer.NAME)."""
    import importlib

    return importlib.import_module(f"{EXT}.{name}")


def preview_state():
    return _ext("engine.features.preview.control").peek_state(bpy.context.scene)


def viewport_session():
    return _ext("engine.blender.render_engine").last_viewport_session()


def main_view():
    return max(view3d_areas(), key=lambda a: a.width * a.height)


DEMO_COLOURS = {"clothes": (232, 98, 92), "hair": (84, 62, 128), "skin": (250, 206, 182), "pants": (52, 64, 112)}


def colour_share(img, rgb, tol=40):
    d = np.abs(img.astype(np.int16) - np.array(rgb, dtype=np.int16)).max(axis=2)
    return float((d <= tol).mean())


def wait_until(pred, timeout, every=0.2):
    """Yield until ``pred()`` holds or ``timeout`` seconds pass (the preview's clock moves with its draws)."""
    import time

    t0 = time.perf_counter()
    while not pred() and time.perf_counter() - t0 < timeout:
        yield every


def changed_share(a, b, thresh=12):
    return float((np.abs(a.astype(np.int16) - b.astype(np.int16)).max(axis=2) > thresh).mean())


def ensure_rendered_camera(area=None):
    """The state journey 1 reaches with input, set directly (each journey also runs alone)."""
    area = area or main_view()
    space = area.spaces.active
    if space.region_3d.view_perspective != "CAMERA" or space.shading.type != "RENDERED":
        space.region_3d.view_perspective = "CAMERA"
        space.shading.type = "RENDERED"
        area.tag_redraw()
        yield 3.0


def open_stylized_tab(h):
    area = main_view()
    yield from ensure_rendered_camera(area)
    space = area.spaces.active
    x0, y0, x1, y1 = screen_rect(region(area))
    if not space.show_region_ui:
        yield from h.move((x0 + x1) // 2, (y0 + y1) // 2)
        yield from h.key("n", settle=0.4)                      # N: the sidebar
    h.check(space.show_region_ui, "N opened the sidebar")
    ui = region(area, "UI")
    if ui.active_panel_category != "Stylized":
        # the sidebar's category tabs run down its right edge: click down the strip until the
        # Stylized tab is the active one (each click a real X click; a miss changes nothing)
        ux0, uy0, ux1, uy1 = screen_rect(ui)
        for y in range(uy0 + 12, uy1 - 12, 18):
            yield from h.click(ux1 - 10, y, settle=0.3)
            if ui.active_panel_category == "Stylized":
                break
    h.check(ui.active_panel_category == "Stylized", f"a click on its tab opened the Stylized tab ({ui.active_panel_category})")
    yield 0.3
    return ui


def other_windows(main):
    return [w for w in bpy.context.window_manager.windows if w != main]


def close_other_windows(main):
    for w in other_windows(main):
        with bpy.context.temp_override(window=w):
            bpy.ops.wm.window_close()
