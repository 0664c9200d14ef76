"""GUI journeys in a real Blender window (make test-gui; tools/gui/session.sh starts Blender on the
demo scene with this script). Each journey drives Blender with real X input events, checks
screenshots and Blender's state, and records a result in OUT/BACKEND-results.json.

Usage (inside the GUI root): blender DEMO.blend --python tools/gui/journeys.py -- --backend opengl \
    --out /repo/out/gui [--only name,name]
"""
from __future__ import annotations

import argparse
import sys

import bpy

sys.path.insert(0, "/repo/tools/gui")
import harness as H  # noqa: E402
from common import close_other_windows, main_view, preview_state  # noqa: E402
from harness import window  # noqa: E402
from journeys_files import j_extension_cycle, j_vrm  # noqa: E402
from journeys_scene import j_render, j_render_anim, j_viewports  # noqa: E402
from journeys_ui import j_expressions, j_rendered_view, j_stylized_tab  # noqa: E402

JOURNEYS = {
    "rendered_view": j_rendered_view,
    "stylized_tab": j_stylized_tab,
    "expressions": j_expressions,      # after the preview has played: undo and redo (docs/gui-tests.md)
    "render": j_render,
    # after "render": the Ctrl+F12 runs in a new GPU context (Blender freed the F12's), the case
    # that failed with "Framebuffer is not bound" (FramePipeline.follow_gpu_context)
    "render_anim": j_render_anim,
    "viewports": j_viewports,
    "extension_cycle": j_extension_cycle,
    "vrm": j_vrm,
}


def all_journeys(h, names):
    yield 2.0
    for name in names:
        if name not in JOURNEYS:            # (run.sh reports it as not run)
            h.log(f"no journey named {name!r}; known: {', '.join(JOURNEYS)}")
            continue
        yield from h.run_journey(name, JOURNEYS[name])
        h.write_results()


def cleanup():
    """After each journey: no preview or timeline playback left running, only the main window."""
    win = window()
    area = main_view()
    with H.override(area):
        if bpy.context.screen.is_animation_playing:
            bpy.ops.screen.animation_cancel(restore_frame=True)
        st = preview_state()
        if st is not None and st.playing:
            bpy.ops.stylized.preview_stop()
    close_other_windows(win)


def main():
    argv = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else []
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", required=True)
    ap.add_argument("--out", default="/repo/out/gui")
    ap.add_argument("--only", default="")
    ap.add_argument("--append", action="store_true",
                    help="add to the results and requested list an earlier session of this backend wrote")
    args = ap.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(JOURNEYS)
    # the requested list, written before any journey runs: run.sh names those with no result (a
    # Blender crash mid-run leaves the journeys after it without one)
    import json
    import pathlib
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    req_path, res_path = out / f"{args.backend}-requested.json", out / f"{args.backend}-results.json"
    earlier = json.loads(req_path.read_text()) if args.append and req_path.is_file() else []
    req_path.write_text(json.dumps(earlier + names))
    # a pie's key released later than the tap timeout closes the pie without choosing (Blender's
    # "hold" pie): under software Vulkan one event tick can outlast the default 0.2 s
    bpy.context.preferences.view.pie_tap_timeout = 100
    h = H.Harness(args.out, args.backend, cleanup=cleanup)
    if args.append and res_path.is_file():
        h.results = json.loads(res_path.read_text())
    H.Runner(all_journeys(h, names), on_done=h.write_results).start(first=1.0)


main()
