"""make bench-gui: viewport redraw rates in one real Blender window (1600x900, Xvfb; tools/gui/session.sh),
counted with a draw handler on the 3D viewport's main region, through the camera, Rendered, the
sidebar open on the Stylized tab (as a user previews):

- timeline playback (screen.animation_play) with Stylized, EEVEE and Workbench;
- the preview's own Play (stylized.preview_play; Stylized only: it is the engine's feature).

Prints one line per case and writes OUT/BACKEND-bench.json.
Usage (inside the GUI root): blender DEMO.blend --python tools/gui/bench.py -- --backend opengl --out DIR
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import bpy

sys.path.insert(0, "/repo/tools/gui")
import harness as H  # noqa: E402

WARMUP = 1.5
MEASURE = 5.0


def eevee_id():
    return "BLENDER_EEVEE" if bpy.app.version >= (5, 0, 0) else "BLENDER_EEVEE_NEXT"


def bench(out, backend):
    area = max(H.view3d_areas(), key=lambda a: a.width * a.height)
    space = area.spaces.active
    space.region_3d.view_perspective = "CAMERA"
    space.shading.type = "RENDERED"
    space.show_region_ui = True
    yield 0.5
    H.region(area, "UI").active_panel_category = "Stylized"
    draws = []
    handle = bpy.types.SpaceView3D.draw_handler_add(lambda: draws.append(time.perf_counter()), (), "WINDOW", "POST_PIXEL")
    scene = bpy.context.scene
    results = []

    def rate(t0, t1):
        n = sum(1 for t in draws if t0 <= t <= t1)
        return n / (t1 - t0)

    def case(label, engine, start, stop):
        scene.render.engine = engine
        area.tag_redraw()
        yield 3.0                                    # the engine's first draw (import, shaders)
        with H.override(area):
            start()
        yield WARMUP
        t0 = time.perf_counter()
        yield MEASURE
        t1 = time.perf_counter()
        fps = rate(t0, t1)
        with H.override(area):
            stop()
        yield 0.5
        results.append({"backend": backend, "case": label, "engine": engine, "redraws_per_s": round(fps, 2)})
        print(f"bench-gui: {backend}: {label:<32} {fps:6.2f} redraws/s", flush=True)

    play = lambda: bpy.ops.screen.animation_play()                      # noqa: E731
    cancel = lambda: bpy.ops.screen.animation_cancel(restore_frame=True)  # noqa: E731
    for label, engine in (("timeline Stylized", "STYLIZED"), ("timeline EEVEE", eevee_id()),
                          ("timeline Workbench", "BLENDER_WORKBENCH")):
        yield from case(label, engine, play, cancel)
    yield from case("preview Play Stylized", "STYLIZED", lambda: bpy.ops.stylized.preview_play(),
                    lambda: bpy.ops.stylized.preview_stop())
    space.show_region_ui = False
    yield 0.5
    yield from case("preview Play Stylized, no sidebar", "STYLIZED", lambda: bpy.ops.stylized.preview_play(),
                    lambda: bpy.ops.stylized.preview_stop())
    yield from case("timeline Stylized, no sidebar", "STYLIZED", play, cancel)
    bpy.types.SpaceView3D.draw_handler_remove(handle, "WINDOW")
    path = pathlib.Path(out) / f"{backend}-bench.json"
    path.write_text(json.dumps(results, indent=1))


def main():
    argv = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else []
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", required=True)
    ap.add_argument("--out", default="/repo/out/gui")
    args = ap.parse_args(argv)
    pathlib.Path(args.out).mkdir(parents=True, exist_ok=True)
    H.Runner(bench(args.out, args.backend)).start(first=2.0)


main()
