"""GUI journeys 4-5: F12 and Ctrl+F12, viewports and memory (tools/gui/journeys.py runs them)."""
from __future__ import annotations

import sys

import bpy
import numpy as np

sys.path.insert(0, "/repo/tools/gui")
import harness as H  # noqa: E402
from common import (  # noqa: E402
    DEMO_COLOURS,
    close_other_windows,
    colour_share,
    ensure_rendered_camera,
    main_view,
    other_windows,
)
from harness import region, screen_rect, view3d_areas, window  # noqa: E402

# ------------------------------------------------------------------------------------------------
# 4. F12 through Blender's own operator and window; Ctrl+F12 with progress, Esc cancels
# ------------------------------------------------------------------------------------------------

def png_rgba(path):
    """(H, W, 4) uint8 of a PNG, through ImageMagick."""
    import subprocess

    size = subprocess.run(["identify", "-format", "%w %h", str(path)], check=True, capture_output=True, text=True).stdout
    w, hh = map(int, size.split())
    raw = subprocess.run(["convert", str(path), "-depth", "8", "rgba:-"], check=True, capture_output=True).stdout
    return np.frombuffer(raw, dtype=np.uint8).reshape(hh, w, 4)


class RenderEvents:
    def __init__(self):
        self.counts = {"complete": 0, "cancel": 0, "write": 0, "stats": 0}
        self.handlers = []
        for name in self.counts:
            fn = (lambda key: (lambda *_a: self.counts.__setitem__(key, self.counts[key] + 1)))(name)
            getattr(bpy.app.handlers, f"render_{name}").append(fn)
            self.handlers.append((name, fn))

    def remove(self):
        for name, fn in self.handlers:
            lst = getattr(bpy.app.handlers, f"render_{name}")
            if fn in lst:
                lst.remove(fn)


def j_render(h: H.Harness):
    import os
    import subprocess

    area = main_view()
    yield from ensure_rendered_camera(area)
    win = window()
    scene = bpy.context.scene
    work = os.path.join(os.environ["HOME"], "render")
    os.makedirs(work, exist_ok=True)
    snap = os.path.join(work, "f12.blend")
    bpy.ops.wm.save_as_mainfile(filepath=snap, copy=True)
    frame = scene.frame_current
    proc = subprocess.run(["blender", "-b", snap, "--gpu-backend", h.backend, "-o", os.path.join(work, "head_####"),
                           "-F", "PNG", "-f", str(frame)], capture_output=True, text=True, timeout=180)
    head = os.path.join(work, f"head_{frame:04d}.png")
    h.check(proc.returncode == 0 and os.path.isfile(head), f"headless render of frame {frame} written "
            f"({proc.stdout[-300:] if proc.returncode else ''})")
    ev = RenderEvents()
    try:
        vx0, vy0, vx1, vy1 = screen_rect(region(area))
        yield from h.move((vx0 + vx1) // 2, (vy0 + vy1) // 2)
        yield from h.key("F12", settle=0.5)
        t0 = __import__("time").perf_counter()
        while ev.counts["complete"] == 0 and __import__("time").perf_counter() - t0 < 30:
            yield 0.2
        h.shot("f12-window")
        h.log(f"after F12: events {ev.counts}, windows {len(bpy.context.window_manager.windows)}, "
              f"job {bpy.app.is_job_running('RENDER')}")
        h.check(ev.counts["complete"] == 1, "F12: Blender's render finished (render_complete)")
        h.check(len(other_windows(win)) == 1, "F12 opened Blender's render window")
        yield 1.0
        h.shot("f12-window")
        gui = os.path.join(work, "gui_f12.png")
        bpy.data.images["Render Result"].save_render(gui)
        a, b = png_rgba(gui), png_rgba(head)
        h.check(a.shape == b.shape, f"F12 picture size {a.shape} equals the headless one {b.shape}")
        diff = int(np.abs(a.astype(np.int16) - b.astype(np.int16)).max())
        h.measure("f12_vs_headless_max_diff", diff)
        h.check(diff == 0, f"F12 picture equals the headless render of frame {frame} pixel for pixel (max diff {diff})")
        h.check(colour_share(a[..., :3], DEMO_COLOURS["clothes"]) > 0.005, "the F12 picture shows the character")
        close_other_windows(win)
        yield 0.5
    finally:
        ev.remove()


def j_render_anim(h: H.Harness):
    """Ctrl+F12, then Esc while it renders."""
    import os

    area = main_view()
    yield from ensure_rendered_camera(area)
    win = window()
    scene = bpy.context.scene
    work = os.path.join(os.environ["HOME"], "render")
    os.makedirs(work, exist_ok=True)
    vx0, vy0, vx1, vy1 = screen_rect(region(area))
    ev = RenderEvents()
    try:
        scene.render.filepath = os.path.join(work, "anim_")
        n_frames = scene.frame_end - scene.frame_start + 1
        yield from h.move((vx0 + vx1) // 2, (vy0 + vy1) // 2)
        yield from h.key("ctrl+F12", settle=0.3)
        t0 = __import__("time").perf_counter()
        while ev.counts["write"] < 3 and __import__("time").perf_counter() - t0 < 20:
            yield 0.1
        w1 = ev.counts["write"]
        h.shot("ctrl-f12-progress")
        h.log(f"after Ctrl+F12: events {ev.counts}, windows {len(bpy.context.window_manager.windows)}")
        h.check(w1 >= 3 and bpy.app.is_job_running("RENDER"), f"Ctrl+F12: frames are written one by one ({w1} so far)")
        h.measure("stats_updates_before_esc", ev.counts["stats"])
        h.check(ev.counts["stats"] > 0, "Ctrl+F12: the render reports its progress (render_stats)")
        rw = other_windows(win)
        h.check(len(rw) == 1, "Ctrl+F12 opened the render window")
        r = rw[0]
        yield from h.move(r.x + r.width // 2, (win.y + win.height) - (r.y + r.height // 2))
        yield from h.key("Escape", settle=0.5)
        t0 = __import__("time").perf_counter()
        while bpy.app.is_job_running("RENDER") and __import__("time").perf_counter() - t0 < 20:
            yield 0.2
        h.check(not bpy.app.is_job_running("RENDER"), "Esc: the animation render stopped")
        written = sorted(f for f in os.listdir(work) if f.startswith("anim_"))
        h.measure("ctrl_f12_frames_written", len(written))
        h.check(ev.counts["cancel"] == 1, "Esc: Blender reports the render cancelled (render_cancel)")
        h.check(3 <= len(written) < n_frames, f"Esc: {len(written)} of {n_frames} frames written")
        close_other_windows(win)
        yield 0.5
        yield from h.settled("after-render", (vx0, vy0, vx1, vy1))
        h.check(colour_share(h._settled, DEMO_COLOURS["clothes"]) > 0.002, "the Rendered viewport still draws after the renders")
    finally:
        ev.remove()


# ------------------------------------------------------------------------------------------------
# 5. two Rendered viewports, window resize, Solid/Rendered switched 20 times: no error, memory flat
# ------------------------------------------------------------------------------------------------

def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def blender_xwindow():
    import subprocess

    out = subprocess.run(["xdotool", "search", "--name", "Blender"], capture_output=True, text=True).stdout.split()
    return out[0] if out else None


def switch_twenty(h: H.Harness, space, out: list):
    """Solid/Rendered switched 20 times through the Z pie (Z, then its right (Solid) or top
    (Rendered) item) over the pointer's viewport; ``out`` gets ([RSS after 5, after 20 switches],
    the count of switches that did not take)."""
    rss = []
    missed = 0
    for i in range(20):
        for target, item in (("SOLID", "6"), ("RENDERED", "8")):
            yield from h.key("z", settle=0.15)
            yield from h.key(item, settle=0.25)  # one draw in each mode
            missed += space.shading.type != target
        if i in (4, 19):
            yield 1.0
            rss.append(rss_mb())
    out.extend((rss, missed))


def j_viewports(h: H.Harness):
    import subprocess

    area = main_view()
    yield from ensure_rendered_camera(area)
    area.spaces.active.show_region_ui = False
    with H.override(area):
        bpy.ops.screen.area_split(direction="VERTICAL", factor=0.5)
    yield 0.5
    views = view3d_areas()
    h.check(len(views) == 2, f"two 3D viewports ({len(views)})")
    for i, a in enumerate(views):                     # over each view: Numpad 0, then Solid and Rendered from the Z pie
        x0, y0, x1, y1 = screen_rect(region(a))
        yield from h.move((x0 + x1) // 2, (y0 + y1) // 2)
        space = a.spaces.active
        if space.region_3d.view_perspective != "CAMERA":
            yield from h.key("KP_0", settle=0.4)
        h.check(space.region_3d.view_perspective == "CAMERA", f"viewport {i + 1} of 2 looks through the camera")
        for target, item in (("SOLID", "6"), ("RENDERED", "8")):   # (the split copied the view: Rendered)
            yield from h.key("z", settle=0.3)
            yield from h.key(item, settle=0.3)
            h.check(space.shading.type == target, f"viewport {i + 1} of 2: the Z pie set {target} ({space.shading.type})")
    yield 3.0
    for i, a in enumerate(views):
        yield from h.settled(f"two-views-{i}", screen_rect(region(a)))
        h.check(colour_share(h._settled, DEMO_COLOURS["clothes"]) > 0.001,
                f"viewport {i + 1} of 2 draws the character")
    xid = blender_xwindow()
    h.check(xid is not None, "found Blender's X window")
    assert xid is not None                       # (h.check raised otherwise)
    subprocess.run(["xdotool", "windowsize", xid, "1200", "760"], check=True)
    yield 2.0
    win = window()
    h.check((win.width, win.height) == (1200, 760), f"the window was resized to {win.width}x{win.height}")
    for i, a in enumerate(view3d_areas()):
        yield from h.settled(f"resized-{i}", screen_rect(region(a)))
        h.check(colour_share(h._settled, DEMO_COLOURS["clothes"]) > 0.001, f"after the resize viewport {i + 1} draws")
    subprocess.run(["xdotool", "windowsize", xid, "1600", "900"], check=True)
    yield 2.0
    a = view3d_areas()[0]
    x0, y0, x1, y1 = screen_rect(region(a))
    yield from h.move((x0 + x1) // 2, (y0 + y1) // 2)
    space = a.spaces.active
    out = []
    yield from switch_twenty(h, space, out)
    rss, missed = out
    h.check(missed == 0, f"40 Solid/Rendered switches through the Z pie ({missed} missed)")
    h.measure("rss_mb_after_5_and_20_switches", [round(r, 1) for r in rss])
    growth = rss[1] - rss[0]
    if h.backend == "vulkan":
        # Vulkan (lavapipe) grows a few MB a switch, OpenGL does not; measured alone with Blender's
        # own engines doing the same switches, Workbench and Cycles grow nearly as much
        # (docs/gui-tests.md): reported, not failed on
        h.log(f"Vulkan: memory over 15 more switches: {rss[0]:.0f} -> {rss[1]:.0f} MB (not checked)")
    else:
        h.check(growth < 40.0, f"memory flat over 15 more switches: {rss[0]:.0f} -> {rss[1]:.0f} MB")
    yield from h.settled("after-switches", (x0, y0, x1, y1))
    h.check(colour_share(h._settled, DEMO_COLOURS["clothes"]) > 0.001, "after 20 switches the viewport draws the character")
    other = [v for v in view3d_areas() if v != a]
    with H.override(other[0]):
        bpy.ops.screen.area_close()
    yield 0.5
