"""GUI journey 6: the extension disabled and enabled through the Preferences window while a
viewport is Rendered; save (Ctrl+S) and reopen (tools/gui/journeys.py runs it)."""
from __future__ import annotations

import subprocess
import sys

import bpy

sys.path.insert(0, "/repo/tools/gui")
import harness as H  # noqa: E402
from common import (  # noqa: E402
    DEMO_COLOURS,
    EXT,
    colour_share,
    ensure_rendered_camera,
    main_view,
    other_windows,
    viewport_session,
    wait_until,
)
from harness import region, screen_rect, window, window_rect, xwindows  # noqa: E402

PREFS_AT = (1000, 40)        # where the Preferences window is moved: over the Properties editor, clear of the character
PREFS_SIZE = (600, 700)


def open_preferences(h: H.Harness, main, out: dict):
    """Ctrl+Comma over the viewport; the Preferences window moved to PREFS_AT. Sets out["win"]
    (Blender's window) and out["xid"] (its X window)."""
    x0, y0, x1, y1 = screen_rect(region(main_view()))
    yield from h.move((x0 + x1) // 2, (y0 + y1) // 2)
    yield from h.key("ctrl+comma", settle=1.0)
    yield from wait_until(lambda: bool(other_windows(main)), 6.0)
    wins = other_windows(main)
    h.check(len(wins) == 1 and wins[0].screen.areas[0].type == "PREFERENCES",
            f"Ctrl+Comma opened the Preferences window ({[w.screen.areas[0].type for w in wins]})")
    ids = xwindows("Preferences")
    h.check(len(ids) == 1, f"the Preferences window is one X window ({ids})")
    subprocess.run(["xdotool", "windowsize", ids[0], *map(str, PREFS_SIZE)], check=True)
    subprocess.run(["xdotool", "windowmove", ids[0], *map(str, PREFS_AT)], check=True)
    pw = wins[0]
    yield from wait_until(lambda: (pw.x, pw.width) == (PREFS_AT[0], PREFS_SIZE[0]), 4.0)
    geo = subprocess.run(["xdotool", "getwindowgeometry", ids[0]], capture_output=True, text=True).stdout
    h.log(f"Preferences window: Blender {pw.x},{pw.y} {pw.width}x{pw.height}; X: {' '.join(geo.split()[2:])}")
    yield 1.0
    h.shot("prefs-open")
    out["win"], out["xid"] = pw, ids[0]


def addon_row_checkbox(h: H.Harness, main_reg, pw, search_y, want_op, out: dict):
    """The enable checkbox of the one add-on row under the search field: probed to the right of
    the row's expand arrow. Sets out["box"] (x, y, copied call) or None."""
    x0, _y0, x1, y1 = window_rect(main_reg, pw)
    out["box"] = None
    for y in range(search_y + 14, min(search_y + 120, y1 - 4), 6):
        for x in range(x0 + 20, min(x0 + 110, x1), 8):
            yield from h.probe(x, y)
            kind, text = h._probed
            if kind == "op" and want_op in text and EXT in text:
                out["box"] = (x, y, text)
                return
            if kind == "op" and "addon_expand" not in text:
                break                                 # past the arrow and the checkbox of this line
        h.log(f"no checkbox on y={y}")


def j_extension_cycle(h: H.Harness):
    import os

    area = main_view()
    yield from ensure_rendered_camera(area)
    rect = screen_rect(region(area))
    main = window()
    prefs = bpy.context.preferences
    wm = bpy.context.window_manager
    st: dict = {}
    yield from open_preferences(h, main, st)
    pw = st["win"]
    parea = pw.screen.areas[0]
    # the section list down the left (region type UI): click down it until Add-ons is the section
    nx0, ny0, nx1, ny1 = window_rect(region(parea, "UI"), pw)
    for y in range(ny0 + 12, ny1 - 12, 10):
        if prefs.active_section == "ADDONS":
            break
        yield from h.click((nx0 + nx1) // 2, y, settle=0.3)
    h.check(prefs.active_section == "ADDONS", f"a click in its section list opened Add-ons ({prefs.active_section})")
    yield 0.5
    h.shot("prefs-addons")
    # the search field: located by its copied data path, clicked, typed into, Enter
    main_reg = region(parea)
    yield from h.locate(main_reg, {"search": lambda k, t: k == "prop" and t.endswith("addon_search")},
                        x_fracs=(0.2,), step=8, win=pw)
    h.check("search" in h.found, "found the add-ons' search field")
    sx, sy, _ = h.found["search"]
    yield from h.click(sx, sy, settle=0.3)
    yield from h.type_text("stylized")
    yield from h.key("Return", settle=0.8)
    h.check(wm.addon_search == "stylized", f"typed 'stylized' in the search field ({wm.addon_search!r})")
    h.shot("prefs-addons-search")
    # the row's checkbox: off
    yield from addon_row_checkbox(h, main_reg, pw, sy, "addon_disable", st)
    h.check(st["box"] is not None, "found the Stylized Renderer row's enable checkbox (ticked)")
    bx, by, _ = st["box"]
    yield from h.click(bx, by, settle=1.0)
    yield from wait_until(lambda: EXT not in prefs.addons, 6.0)
    h.check(EXT not in prefs.addons, "a click on the checkbox disabled the extension")
    yield 1.0
    yield from h.settled("ext-disabled", rect)
    h.check(colour_share(h._settled, DEMO_COLOURS["clothes"]) < 0.0005,
            "disabled: the Stylized drawing is gone from the viewport")
    # the same checkbox (now addon_enable): on
    yield from h.probe(bx, by)
    kind, text = h._probed
    h.check(kind == "op" and "addon_enable" in text and EXT in text, f"the checkbox now enables it ({text})")
    yield from h.click(bx, by, settle=1.0)
    yield from wait_until(lambda: EXT in prefs.addons, 6.0)
    h.check(EXT in prefs.addons, "a second click on the checkbox enabled the extension again")
    area = main_view()
    yield 3.0
    yield from h.settled("ext-enabled", screen_rect(region(area)))
    h.check(colour_share(h._settled, DEMO_COLOURS["clothes"]) > 0.002, "enabled: the viewport draws the character again")
    h.check(viewport_session() is not None, "enabled: a new viewport session draws")
    # close the Preferences window the way a window manager's close button does
    H.close_xwindow(st["xid"])
    yield from wait_until(lambda: not other_windows(main), 6.0)
    h.check(not other_windows(main), "the Preferences window closed")
    key = bpy.data.objects["DemoFace"].data.shape_keys.key_blocks["angry"]
    key.value = 0.75
    path = bpy.data.filepath
    before = os.path.getmtime(path)
    x0, y0, x1, y1 = rect
    yield from h.move((x0 + x1) // 2, (y0 + y1) // 2)
    yield from h.key("ctrl+s", settle=1.0)
    h.check(os.path.getmtime(path) > before, f"Ctrl+S saved {os.path.basename(path)}")
    bpy.ops.wm.open_mainfile(filepath=path)
    yield 4.0
    area = main_view()
    h.check(bpy.context.scene.render.engine == "STYLIZED", "reopened: the engine is Stylized")
    h.check(abs(bpy.data.objects["DemoFace"].data.shape_keys.key_blocks["angry"].value - 0.75) < 1e-6,
            "reopened: the expression value saved is there")
    yield from ensure_rendered_camera(area)
    yield from h.settled("reopened", screen_rect(region(area)))
    h.check(colour_share(h._settled, DEMO_COLOURS["clothes"]) > 0.002, "reopened: the viewport draws the character")
