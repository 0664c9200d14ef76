"""GUI journeys 6-7, where the user works with files and add-ons: the extension disabled and enabled
in the Preferences while the viewport is Rendered, Ctrl+S and File > Revert; a VRM avatar imported
through File > Import > VRM and its expression previewed in the add-on's panel (tools/gui/journeys.py
runs them). Every step is real X input; where a button is, the journey asks Blender the way a user
could (Ctrl+C / Ctrl+Shift+Alt+C over it, tools/gui/harness.py: probe, locate)."""
from __future__ import annotations

import os
import sys

import bpy
import numpy as np

sys.path.insert(0, "/repo/tools/gui")
import harness as H  # noqa: E402
from common import (  # noqa: E402
    DEMO_COLOURS,
    EXT,
    changed_share,
    colour_share,
    ensure_rendered_camera,
    main_view,
    viewport_session,
    wait_until,
)
from harness import region, screen_rect, window  # noqa: E402

TOPBAR_FILE = (45, 13)      # the top bar's File menu (the main window sits at the X screen's 0 0)
MENU_ROW = 23               # rows of a menu, pixels at UI scale 1


def area_of(ui_type):
    return next((a for a in window().screen.areas if a.ui_type == ui_type), None)


def highlighted_row(h: H.Harness, name, below_y):
    """Centre (x, y) of the highlighted item of the open menu (a run of at least 100 pixels of the
    theme's selected-menu-item colour, below ``below_y``), or None."""
    img = h.shot(name)
    sel = bpy.context.preferences.themes[0].user_interface.wcol_menu_item.inner_sel
    col = np.array([round(c * 255) for c in sel[:3]])
    mask = np.abs(img.astype(int) - col).max(axis=2) <= 10
    mask[: below_y + 2] = False
    rows = np.nonzero(mask.sum(axis=1) >= 100)[0]
    if len(rows) == 0:
        return None
    xs = np.nonzero(mask[rows].any(axis=0))[0]
    return (int(xs.min() + xs.max()) // 2, int(rows.min() + rows.max()) // 2)


def switch_editor(h: H.Harness, area, rows, want, shot):
    """Click the area's Editor Type button; in its menu (which opens with the current editor
    highlighted) click the item ``rows`` rows below it (above when negative)."""
    hx0, hy0, _hx1, hy1 = screen_rect(region(area, "HEADER"))
    yield from h.click(hx0 + 16, (hy0 + hy1) // 2, settle=0.8)
    at = highlighted_row(h, shot, hy1)
    h.check(at is not None, "the Editor Type menu opened with the current editor highlighted")
    assert at is not None
    yield from h.click(at[0], at[1] + rows * MENU_ROW, settle=1.0)
    h.check(area_of(want) is not None, f"the Editor Type menu switched the area to {want}")


def file_menu_item(h: H.Harness, pred, x=80, y_end=470):
    """Open File in the top bar and probe down its items for one whose copied call matches ``pred``;
    leaves the menu open; sets ``h.found_item`` (x, y) or None."""
    yield from h.click(*TOPBAR_FILE, settle=0.6)
    h.found_item = None
    for y in range(34, y_end, 10):
        yield from h.probe(x, y)
        if h._probed[0] == "op" and pred(h._probed[1]):
            h.found_item = (x, y)
            return


# ------------------------------------------------------------------------------------------------
# 6. the extension disabled and enabled while a viewport is Rendered; Ctrl+S and File > Revert
# ------------------------------------------------------------------------------------------------

def j_extension_cycle(h: H.Harness):
    view_area = main_view()
    yield from ensure_rendered_camera(view_area)
    rect = screen_rect(region(view_area))
    # the Properties area becomes a Preferences editor (Editor Type menu: Preferences is four rows
    # below Properties), maximized with Ctrl+Space; its Add-ons section; "stylized" in its search
    yield from switch_editor(h, area_of("PROPERTIES"), 4, "PREFERENCES", "ext-editor-menu")
    px0, py0, px1, py1 = screen_rect(region(area_of("PREFERENCES")))
    pref_spot = ((px0 + px1) // 2, (py0 + py1) // 2)
    yield from h.move(*pref_spot)
    yield from h.key("ctrl+space", settle=1.0)
    prefs_area = area_of("PREFERENCES")
    nx0, ny0, nx1, ny1 = screen_rect(region(prefs_area, "UI"))       # the section tabs
    for y in range(ny0 + 10, ny1 - 10, 12):
        yield from h.click((nx0 + nx1) // 2, y, settle=0.25)
        if bpy.context.preferences.active_section == "ADDONS":
            break
    h.check(bpy.context.preferences.active_section == "ADDONS", "a click on the Add-ons tab")
    yield 0.5
    prefs = region(prefs_area)
    yield from h.locate(prefs, {"search": lambda k, t: k == "prop" and t.endswith("addon_search")}, x_fracs=(0.2,), step=8)
    h.check("search" in h.found, "found the Add-ons search field")
    sx, sy, _ = h.found["search"]
    yield from h.click(sx, sy, settle=0.4)
    yield from h.type_text("stylized")
    yield from h.key("Return", settle=0.6)
    h.check(bpy.context.window_manager.addon_search == "stylized", "typed 'stylized' into the search field")
    box = {"box": lambda k, t: k == "op" and "addon_disable" in t and EXT.rsplit(".", 1)[1] in t}
    yield from h.locate(prefs, box, x_fracs=(0.02, 0.03, 0.04, 0.05, 0.06), step=6)
    h.check("box" in h.found, "found the extension's checkbox (enabled)")
    bx, by, _ = h.found["box"]
    h.shot("ext-addons")
    yield from h.click(bx, by, settle=1.5)                   # off
    h.check(EXT not in bpy.context.preferences.addons, "a click on its checkbox disabled the extension")
    yield from h.key("ctrl+space", settle=1.0)               # back to the layout: the viewport
    yield from h.settled("ext-disabled", rect)
    h.check(colour_share(h._settled, DEMO_COLOURS["clothes"]) < 0.0005,
            "disabled: the Stylized drawing is gone from the viewport")
    yield from h.move(*pref_spot)
    yield from h.key("ctrl+space", settle=1.0)
    yield from h.probe(bx, by)
    h.check(h._probed[0] == "op" and "addon_enable" in h._probed[1], f"the checkbox now enables: {h._probed[1]}")
    yield from h.click(bx, by, settle=2.0)                   # on
    h.check(EXT in bpy.context.preferences.addons, "a second click enabled the extension again")
    yield from h.key("ctrl+space", settle=1.0)
    view_area = main_view()
    view_area.tag_redraw()
    yield 2.0
    yield from h.settled("ext-enabled", screen_rect(region(view_area)))
    h.check(colour_share(h._settled, DEMO_COLOURS["clothes"]) > 0.002, "enabled: the viewport draws the character again")
    h.check(viewport_session() is not None, "enabled: a new viewport session draws")
    # the area back to Properties (four rows above Preferences)
    yield from switch_editor(h, area_of("PREFERENCES"), -4, "PROPERTIES", "ext-editor-menu-back")

    # a change (Right arrow over the viewport: the next frame), Ctrl+S, File > Revert
    scene = bpy.context.scene
    f0 = scene.frame_current
    x0, y0, x1, y1 = rect
    yield from h.move((x0 + x1) // 2, (y0 + y1) // 2)
    yield from h.key("Right", settle=0.6)
    h.check(scene.frame_current == f0 + 1, f"Right arrow: frame {f0} -> {scene.frame_current}")
    path = bpy.data.filepath
    before = os.path.getmtime(path)
    yield from h.key("ctrl+s", settle=1.0)
    h.check(os.path.getmtime(path) > before, f"Ctrl+S saved {os.path.basename(path)}")
    loads = []
    handler = bpy.app.handlers.persistent(lambda *_a: loads.append(1))   # (others go with the old file)
    bpy.app.handlers.load_post.append(handler)
    try:
        yield from file_menu_item(h, lambda t: "wm.revert_mainfile" in t)
        item = h.found_item
        h.check(item is not None, "found File > Revert")
        assert item is not None
        yield from h.click(*item, settle=1.5)
        if not loads:                                        # Blender asks first: confirm
            yield from h.key("Return", settle=1.0)
        yield from wait_until(lambda: bool(loads), 8.0)
    finally:
        if handler in bpy.app.handlers.load_post:
            bpy.app.handlers.load_post.remove(handler)
    h.check(bool(loads), "File > Revert reloaded the saved file")
    yield 3.0
    scene = bpy.context.scene
    h.check(scene.render.engine == "STYLIZED", "reverted: the engine is Stylized")
    h.check(scene.frame_current == f0 + 1, f"reverted: the saved frame {f0 + 1} is there ({scene.frame_current})")
    view_area = main_view()
    yield from ensure_rendered_camera(view_area)
    yield from h.settled("reverted", screen_rect(region(view_area)))
    h.check(colour_share(h._settled, DEMO_COLOURS["clothes"]) > 0.002, "reverted: the viewport draws the character")


# ------------------------------------------------------------------------------------------------
# 7. a VRM avatar imported through File > Import > VRM; its expression preview in the add-on's
#    panel shows in the Stylized view
# ------------------------------------------------------------------------------------------------

VRM_ADDON = "/shared/vendor/vrm_addon"
VRM_DIR = "/shared/testdata/vrm/"
VRM_NAME = "Godette_vrm0.vrm"


def import_vrm(h: H.Harness):
    """File > Import > VRM (.vrm); in the file browser the folder typed, the file clicked, Return."""
    yield from file_menu_item(h, lambda t: "TOPBAR_MT_file_import" in t)
    h.check(h.found_item is not None, "found File > Import")
    import_row = h.found_item
    assert import_row is not None
    yield from h.move(*import_row)
    yield 0.8                                                # the submenu opens on hover
    item = None
    for x in (330, 420):
        for y in range(import_row[1] - 10, import_row[1] + 320, 12):
            yield from h.probe(x, y)
            if h._probed[0] == "op" and "import_scene.vrm" in h._probed[1]:
                item = (x, y)
                break
        if item:
            break
    h.check(item is not None, "found File > Import > VRM (.vrm)")
    assert item is not None
    yield from h.click(*item, settle=2.0)
    fb = next((a for a in window().screen.areas if a.type == "FILE_BROWSER"), None)
    h.check(fb is not None, "the file browser opened")
    assert fb is not None
    params = fb.spaces.active.params
    yield from h.locate(region(fb, "UI"), {"dir": lambda k, t: k == "prop" and t.endswith("params.directory")},
                        x_fracs=(0.3,), step=6)
    h.check("dir" in h.found, "found the file browser's folder field")
    dx, dy, _ = h.found["dir"]
    yield from h.click(dx, dy, settle=0.4)                   # editing starts with the text selected
    yield from h.type_text(VRM_DIR)
    yield from h.key("Return", settle=1.0)
    h.check(os.path.normpath(params.directory.decode() if isinstance(params.directory, bytes) else params.directory)
            == os.path.normpath(VRM_DIR), f"typed the folder: {params.directory}")
    # a click on each row of the list until the file is the selected one, then Return
    wx0, wy0, wx1, wy1 = screen_rect(region(fb))
    for y in range(wy0 + 12, min(wy1, wy0 + 200), 10):
        yield from h.click(wx0 + 120, y, settle=0.3)
        if params.filename == VRM_NAME:
            break
    h.check(params.filename == VRM_NAME, f"a click on {VRM_NAME} in the list selected it ({params.filename!r})")
    h.shot("vrm-file-browser")
    yield from h.key("Return", settle=1.0)


def properties_search(h: H.Harness, area, text):
    """Ctrl+F over the Properties editor and ``text`` typed into its search (panels with matches open)."""
    x0, y0, x1, y1 = screen_rect(region(area))
    yield from h.move((x0 + x1) // 2, (y0 + y1) // 2)
    yield from h.key("ctrl+f", settle=0.5)
    yield from h.type_text(text)
    yield from h.key("Return", settle=0.8)


def set_field(h: H.Harness, x, y, value):
    """A click on a number field (starts editing it), Ctrl+A, the value typed, Return."""
    yield from h.click(x, y, settle=0.4)
    yield from h.key("ctrl+a", settle=0.2)
    yield from h.type_text(value)
    yield from h.key("Return", settle=0.6)


def j_vrm(h: H.Harness):
    import addon_utils

    h.check(os.path.isdir(VRM_ADDON) and os.path.isfile(VRM_DIR + VRM_NAME), "the VRM Add-on and Godette are in ../shared")
    # set-up, as a user who has the add-on installed: enabled; the file browser in a maximized area
    if VRM_ADDON not in sys.path:
        sys.path.insert(0, VRM_ADDON)
    addon_utils.enable("io_scene_gltf2", default_set=True)
    addon_utils.enable("io_scene_vrm", default_set=True)
    h.check("io_scene_vrm" in bpy.context.preferences.addons, "the VRM Add-on is enabled")
    bpy.context.preferences.view.filebrowser_display_type = "SCREEN"
    area = main_view()
    yield from ensure_rendered_camera(area)
    before = set(bpy.data.objects)
    yield from import_vrm(h)
    yield from wait_until(lambda: any(o.type == "ARMATURE" for o in bpy.data.objects if o not in before), 30.0)
    yield 1.0
    new = [o for o in bpy.data.objects if o not in before]
    arm = next((o for o in new if o.type == "ARMATURE"), None)
    h.check(arm is not None, f"Godette imported through File > Import > VRM ({len(new)} objects)")
    assert arm is not None      # h.check raised JourneyFailed otherwise
    # framing (set directly): the old scene hidden, the view on Godette's face
    for ob in before:
        if ob.type != "CAMERA":
            ob.hide_set(True)
    meshes = [o for o in new if o.type == "MESH"]
    area = main_view()
    space = area.spaces.active
    space.region_3d.view_perspective = "PERSP"
    for o in bpy.context.view_layer.objects:
        o.select_set(o in meshes)
    bpy.context.preferences.view.smooth_view = 0     # view_selected jumps (no animation after it)
    with H.override(area):
        bpy.ops.view3d.view_selected()
    yield 1.0
    human = arm.data.vrm_addon_extension.vrm0.humanoid.human_bones
    head_name = next((hb.node.bone_name for hb in human if hb.bone == "head"), "")
    head = arm.data.bones.get(head_name)
    if head is not None:
        space.region_3d.view_location = arm.matrix_world @ head.head_local
        space.region_3d.view_distance = 0.9
    space.overlay.show_overlays = False
    area.tag_redraw()
    yield 4.0
    h.log(f"framing: head {head.name if head else None}, view distance {space.region_3d.view_distance:.2f}")
    x0, y0, x1, y1 = screen_rect(region(area))
    rect = (x0 + 60, y0 + 60, x1 - 60, y1 - 70)    # the picture, not the header, toolbar or gizmos
    # the neutral picture: settled twice, 2 s apart, and the same both times (the first Stylized
    # draw of a new avatar can land after two equal screenshots of the old view)
    for _ in range(4):
        yield from h.settled("vrm-neutral", rect)
        first = h._settled
        area.tag_redraw()
        yield 2.0
        yield from h.settled("vrm-neutral", rect)
        if changed_share(first, h._settled) < 0.0002:
            break
    neutral = h._settled

    def key_values():
        return [kb.value for o in meshes if o.data.shape_keys for kb in o.data.shape_keys.key_blocks]

    keys0 = key_values()
    groups = arm.data.vrm_addon_extension.vrm0.blend_shape_master.blend_shape_groups
    # the add-on's "VRM 0.x Blend Shape Proxy" panel (Object properties of the armature, closed by
    # default): the Properties editor's search for "preview" opens it
    props = area_of("PROPERTIES")
    h.check(props is not None and bpy.context.view_layer.objects.active == arm, "Godette's armature is the active object")
    assert props is not None
    nx0, ny0, nx1, ny1 = screen_rect(region(props, "NAVIGATION_BAR"))
    for y in range(ny0 + 8, ny1 - 8, 10):
        if props.spaces.active.context == "OBJECT":
            break
        yield from h.click((nx0 + nx1) // 2, y, settle=0.3)
    h.check(props.spaces.active.context == "OBJECT", "a click on the Object tab")
    yield from properties_search(h, props, "preview")
    h.shot("vrm-search")
    # the group list: each row a group's name and its Preview slider
    def row_pred(i):
        return lambda k, t: k == "prop" and t.endswith(f"blend_shape_groups[{i}].preview")

    wanted = {f"row{i}": row_pred(i) for i in range(1, 5)}
    yield from h.locate(region(props), wanted, x_fracs=(0.55,), step=8)
    rows = sorted(h.found)
    h.check(bool(rows), f"found the group list's Preview sliders: {rows}")
    h.shot("vrm-panel")
    # a group that moves shape keys: the first listed one with binds
    pick = next((int(k[3:]) for k in rows if len(groups[int(k[3:])].binds) > 0), None)
    h.check(pick is not None, "a listed blend shape group has binds")
    assert pick is not None
    grp = groups[pick]
    vx, vy, _ = h.found[f"row{pick}"]
    yield from set_field(h, vx, vy, "1")
    h.check(abs(grp.preview - 1.0) < 1e-6, f"Preview typed 1: '{grp.name}' preview {grp.preview:.2f}")
    yield from wait_until(lambda: key_values() != keys0, 6.0)
    h.check(key_values() != keys0, f"the add-on applied its '{grp.name}' preview to the shape keys")
    area.tag_redraw()
    yield 1.0
    yield from h.settled("vrm-preview", rect)
    share = changed_share(neutral, h._settled)
    h.measure("vrm_preview_changed_share", round(share, 4))
    h.check(share > 0.001, f"the add-on's '{grp.name}' preview changes the face in the Stylized view ({share:.4f})")
    yield from set_field(h, vx, vy, "0")
    h.check(grp.preview == 0.0, f"Preview typed 0: '{grp.name}' preview {grp.preview:.2f}")
    yield from wait_until(lambda: key_values() == keys0, 6.0)   # (a slow Vulkan draw: settle after the keys)
    area.tag_redraw()
    yield 1.0
    yield from h.settled("vrm-back", rect)
    back = changed_share(neutral, h._settled)
    h.measure("vrm_back_changed_share", round(back, 5))
    h.check(back < 0.0005, f"preview back at 0: the neutral face again ({back:.5f})")
