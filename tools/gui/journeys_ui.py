"""GUI journeys 1-3: the Rendered view, the Stylized tab, expressions (tools/gui/journeys.py runs them)."""
from __future__ import annotations

import sys

import bpy

sys.path.insert(0, "/repo/tools/gui")
import harness as H  # noqa: E402
from common import (  # noqa: E402
    DEMO_COLOURS,
    changed_share,
    colour_share,
    main_view,
    open_stylized_tab,
    preview_state,
    viewport_session,
    wait_until,
)
from harness import region, screen_rect  # noqa: E402

# ------------------------------------------------------------------------------------------------
# 1. open a scene, Rendered view through the camera
# ------------------------------------------------------------------------------------------------

def j_rendered_view(h: H.Harness):
    area = main_view()
    space = area.spaces.active
    x0, y0, x1, y1 = screen_rect(region(area))
    cx, cy = (x0 + x1) // 2, (y0 + y1) // 2
    yield from h.move(cx, cy)
    yield from h.key("KP_0", settle=0.5)                       # Numpad 0: view through the camera
    h.check(space.region_3d.view_perspective == "CAMERA", "Numpad 0 switched the viewport to the camera")
    yield from h.key("z", settle=0.5)                          # the shading pie menu
    yield from h.key("8", settle=0.3)                          # its top item: Rendered
    h.check(space.shading.type == "RENDERED", f"Z pie, top item: shading is {space.shading.type}")
    yield 4.0                                                  # the first import and draw
    img = h.crop(h.shot("rendered-view"), (x0, y0, x1, y1))
    shares = {k: colour_share(img, c) for k, c in DEMO_COLOURS.items()}
    h.measure("colour_shares", {k: round(v, 4) for k, v in shares.items()})
    h.check(shares["clothes"] > 0.002 and shares["hair"] > 0.002 and shares["skin"] > 0.002,
            "the character's clothes, hair and skin colours are on screen")
    s = viewport_session()
    h.check(s is not None, "a Stylized viewport session draws the view")


def j_stylized_tab(h: H.Harness):
    area = main_view()
    ui = yield from open_stylized_tab(h)
    props = bpy.context.scene.stylized_preview
    wanted = {
        "play": lambda k, t: k == "op" and "stylized.preview_play" in t,
        "time": lambda k, t: k == "prop" and t.endswith("stylized_preview.time"),
        "scene_play": lambda k, t: k == "op" and "stylized.preview_scene" in t,
        "crowd": lambda k, t: k == "prop" and t.endswith("stylized_preview.crowd"),
    }
    yield from h.locate(ui, wanted, x_fracs=(0.12,), step=10)
    found = h.found
    h.check(set(found) == set(wanted), f"found the Play, Time, Scene and Play on All Characters buttons: {sorted(found)}")
    vx0, vy0, vx1, vy1 = screen_rect(region(area))
    ux0, _uy0, ux1, _uy1 = screen_rect(ui)
    view = (vx0 + 60, vy0 + 60, ux0 - 60, vy1 - 70)   # the picture, not the header text, toolbar, gizmos or the redo panel
    px, py, _ = found["play"]
    row_w = ux1 - ux0

    # Play
    yield from h.click(px, py, settle=0.6)
    st = preview_state()
    h.check(st is not None and st.playing and not st.scene_mode, "Play: the clip preview plays")
    t_a = props.time
    a = h.crop(h.shot("tab-playing-a"), view)
    yield from wait_until(lambda: props.time > t_a + 0.1, 6.0)
    b = h.crop(h.shot("tab-playing-b"), view)
    h.check(props.time > t_a, f"Play: the preview time advances ({t_a:.2f} -> {props.time:.2f} s)")
    h.check(changed_share(a, b) > 0.002, f"Play: the viewport moves ({changed_share(a, b):.4f} of pixels changed)")

    # Pause (the middle button of the same row)
    yield from h.click(ux0 + row_w // 2, py, settle=0.6)
    h.check(not preview_state().playing, "Pause: the preview stops")
    yield from h.settled("tab-paused-a", view)
    a = h._settled
    t_p = props.time
    yield 0.8
    b = h.crop(h.shot("tab-paused-b"), view)
    h.check(abs(props.time - t_p) < 1e-6 and t_p > 0.0, f"Pause: the time holds at {t_p:.2f} s")
    h.check(changed_share(a, b) < 0.0005, f"Pause: the viewport holds still ({changed_share(a, b):.4f} changed)")

    # Stop (the right button)
    yield from h.click(ux0 + int(row_w * 0.8), py, settle=0.6)
    h.check(not preview_state().playing and props.time == 0.0, f"Stop: time back to 0 (now {props.time:.2f} s)")
    yield from h.settled("tab-stopped", view)
    stopped = h._settled

    # Time: drag the slider to the right
    tx, ty, _ = found["time"]
    yield from h.drag(tx, ty, tx + 8, ty, steps=4, settle=0.8)
    h.check(0.05 < props.time < 1.9, f"Time slider dragged: preview time {props.time:.2f} s")
    yield from h.settled("tab-scrubbed", view)
    scrubbed = h._settled
    h.check(changed_share(stopped, scrubbed) > 0.002, "Time slider: the viewport shows the new pose")

    # Scene Play, then Scene Pause
    sx, sy, _ = found["scene_play"]
    yield from h.click(sx, sy, settle=0.6)
    st = preview_state()
    h.check(st.playing and st.scene_mode, "Scene Play: every animated object plays")
    f0 = st.scene_frame
    a = h.crop(h.shot("tab-scene-a"), view)
    yield from wait_until(lambda: preview_state().scene_frame > f0 + 2, 6.0)
    b = h.crop(h.shot("tab-scene-b"), view)
    h.check(preview_state().scene_frame > f0, f"Scene Play: the scene frame advances ({f0:.2f} -> {preview_state().scene_frame:.2f})")
    h.check(changed_share(a, b) > 0.002, "Scene Play: the viewport moves")
    yield from h.click(ux0 + row_w // 2, sy, settle=0.5)
    h.check(not preview_state().playing, "Scene Pause: the scene preview stops")

    # Play on All Characters
    cx, cy, _ = found["crowd"]
    before = props.crowd
    yield from h.click(cx, cy, settle=0.5)
    h.check(props.crowd != before, f"Play on All Characters toggled to {props.crowd}")
    yield from h.click(px, py, settle=0.8)
    h.check(preview_state().playing, "Play with Play on All Characters on: the preview plays")
    h.shot("tab-crowd-playing")
    yield from h.click(ux0 + int(row_w * 0.8), py, settle=0.4)
    yield from h.click(cx, cy, settle=0.3)
    h.check(props.crowd == before, "Play on All Characters toggled back")


# ------------------------------------------------------------------------------------------------
# 3. an expression slider dragged, its keyframe button, Reset All, Ctrl+Z and Ctrl+Shift+Z
# ------------------------------------------------------------------------------------------------

def fcurve_paths(id_data):
    """Data paths of the F-curves of the action ``id_data`` plays (slotted actions or not)."""
    ad = id_data.animation_data
    act = ad.action if ad else None
    if act is None:
        return set()
    paths = set()
    if hasattr(act, "fcurves") and not hasattr(act, "layers"):
        return {fc.data_path for fc in act.fcurves}
    for layer in act.layers:
        for strip in layer.strips:
            for bag in strip.channelbags:
                paths |= {fc.data_path for fc in bag.fcurves}
    return paths


def _owner_name(path):
    """The name of what a copied '....value' data path belongs to (a shape key or an expression item)."""
    try:
        return getattr(eval(path.rsplit(".", 1)[0], {"bpy": bpy}), "name", None)
    except Exception:
        return None


def j_expressions(h: H.Harness):
    area = main_view()
    ui = yield from open_stylized_tab(h)
    wanted = {
        "slider": lambda k, t: k == "prop" and t.endswith(".value") and _owner_name(t) == "surprised",
        "reset": lambda k, t: k == "op" and "stylized.expression_reset_all" in t,
    }
    yield from h.locate(ui, wanted, x_fracs=(0.7,), step=10, start=0.45)
    h.check(set(h.found) == set(wanted), f"found the 'surprised' slider and Reset All: {sorted(h.found)}")
    sx, sy, path = h.found["slider"]
    rx, ry, _ = h.found["reset"]
    value = lambda: eval(path, {"bpy": bpy})  # noqa: E731  (the path Blender copied for that slider)
    ux0, _uy0, ux1, _uy1 = screen_rect(ui)
    vx0, vy0, _vx1, vy1 = screen_rect(region(area))
    view = (vx0 + 60, vy0 + 60, ux0 - 60, vy1 - 70)   # the picture, not the header text, toolbar, gizmos or the redo panel
    kx = None
    for dx in (36, 42, 48, 54, 60, 30):                 # left of the category tabs
        yield from h.probe(ux1 - dx, sy)
        kind, text = h._probed
        if kind == "op" and "expression_keyframe" in text:
            kx = ux1 - dx
            break
    h.check(kx is not None and "surprised" in text, f"the keyframe button right of the slider: {text}")
    yield from h.settled("expr-before", view)
    before = h._settled
    v0 = value()
    yield from h.drag(sx - 40, sy, sx + 60, sy, steps=10, settle=0.8)
    v1 = value()
    h.check(v1 > v0 + 0.2, f"dragging the slider raised 'surprised' {v0:.2f} -> {v1:.2f}")
    yield from h.settled("expr-dragged", view)
    dragged = h._settled
    h.check(changed_share(before, dragged) > 0.0005,
            f"the face changes in the viewport ({changed_share(before, dragged):.4f} of pixels)")
    key_id = bpy.data.objects["DemoFace"].data.shape_keys
    yield from h.click(kx, sy, settle=0.5)
    h.check(any("surprised" in p for p in fcurve_paths(key_id)), "the keyframe button keyed 'surprised'")
    yield from h.click(rx, ry, settle=0.3)
    yield from wait_until(lambda: value() == 0.0, 6.0)
    h.check(value() == 0.0, f"Reset All: 'surprised' is {value():.2f}")
    yield from h.settled("expr-reset", view)
    reset = h._settled
    h.check(changed_share(dragged, reset) > 0.0005, "Reset All: the face in the viewport goes back")
    yield from h.move((vx0 + ux0) // 2, (vy0 + vy1) // 2)
    yield from h.key("ctrl+z", settle=0.3)
    yield from wait_until(lambda: abs(value() - v1) < 1e-4, 6.0)
    h.check(abs(value() - v1) < 1e-4, f"Ctrl+Z undid Reset All: 'surprised' is {value():.2f} again")
    yield from h.settled("expr-undo", view)
    undone = h._settled
    h.check(changed_share(dragged, undone) < 0.0005, "Ctrl+Z: the viewport shows the raised expression again")
    yield from h.key("ctrl+shift+z", settle=0.3)
    yield from wait_until(lambda: value() == 0.0, 6.0)
    h.check(value() == 0.0, f"Ctrl+Shift+Z redid Reset All: 'surprised' is {value():.2f}")
    yield from h.settled("expr-redo", view)
    redone = h._settled
    h.check(changed_share(reset, redone) < 0.0005, "Ctrl+Shift+Z: the viewport matches Reset All again")
