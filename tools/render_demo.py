# SPDX-License-Identifier: GPL-3.0-or-later
"""Render the demo character animation headless with the Stylized engine.

    .venv/bin/python tools/render_demo.py --out out/demo [--frames 48] [--resolution 640x480]

Imports the extension from the repository root (whatever the checkout folder is called),
registers it, builds the demo scene (demo/character.py), renders one PNG per frame into the
output folder with per-frame progress, composes a contact sheet (contact_sheet.png) and, with
``--readme-image``, refreshes docs/demo.png.
"""

from __future__ import annotations

import argparse
import math
import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = "stylized_renderer"


def load_extension():
    """Import the repository root as the package ``stylized_renderer`` (see tools/_bootstrap.py)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tools import _bootstrap

    return _bootstrap.load(register=False)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="out/demo", help="output folder (default: out/demo)")
    p.add_argument("--frames", type=int, default=48, help="number of frames to render (default 48)")
    p.add_argument("--resolution", default="640x480", help="WIDTHxHEIGHT (default 640x480)")
    p.add_argument("--engine", default="STYLIZED", help="render engine (default STYLIZED)")
    p.add_argument("--columns", type=int, default=8, help="contact sheet columns (default 8)")
    p.add_argument("--readme-image", nargs="?", const=str(ROOT / "docs" / "demo.png"), default=None,
                   metavar="PATH", help="also save a frame as the README picture (docs/demo.png)")
    p.add_argument("--readme-frame", type=int, default=9, help="frame used for --readme-image")
    return p.parse_args(argv)


def _load_png(bpy, path):
    import numpy as np

    img = bpy.data.images.load(str(path), check_existing=False)
    try:
        w, h = img.size
        px = np.empty(w * h * 4, dtype=np.float32)
        img.pixels.foreach_get(px)
        return px.reshape(h, w, 4)  # bottom-up rows, display-referred (sRGB) values
    finally:
        bpy.data.images.remove(img)


def _save_png(bpy, pixels, path):
    """Save display-referred float RGBA (bottom-up rows) as an 8-bit PNG, byte-exact."""
    import numpy as np

    h, w = pixels.shape[:2]
    img = bpy.data.images.new("__demo_sheet__", width=w, height=h, alpha=True)
    try:
        img.pixels.foreach_set(np.ascontiguousarray(pixels, dtype=np.float32).ravel())
        img.filepath_raw = str(path)
        img.file_format = "PNG"
        img.save()
    finally:
        bpy.data.images.remove(img)


def _downscale(px, factor):
    """Box-filter downscale by an integer factor."""
    h, w = px.shape[:2]
    h2, w2 = h // factor, w // factor
    return px[:h2 * factor, :w2 * factor].reshape(h2, factor, w2, factor, 4).mean(axis=(1, 3))


def contact_sheet(bpy, frames, out_path, columns=8, thumb_factor=4, pad=2):
    """Compose the frame PNGs into one grid image (row-major from the top-left)."""
    import numpy as np

    thumbs = [_downscale(_load_png(bpy, f), thumb_factor) for f in frames]
    th, tw = thumbs[0].shape[:2]
    rows = int(math.ceil(len(thumbs) / columns))
    H = rows * th + (rows + 1) * pad
    W = columns * tw + (columns + 1) * pad
    sheet = np.ones((H, W, 4), dtype=np.float32)
    sheet[..., :3] = 0.12
    for i, t in enumerate(thumbs):
        r, c = divmod(i, columns)
        y0 = H - pad - (r + 1) * th - r * pad  # images are stored bottom-up
        x0 = pad + c * (tw + pad)
        sheet[y0:y0 + th, x0:x0 + tw] = t
    sheet[..., 3] = 1.0
    _save_png(bpy, sheet, out_path)
    return out_path


def main(argv=None):
    args = parse_args(argv)
    out = pathlib.Path(args.out)
    if not out.is_absolute():
        out = pathlib.Path.cwd() / out
    out.mkdir(parents=True, exist_ok=True)
    try:
        width, height = (int(v) for v in args.resolution.lower().split("x"))
    except ValueError:
        sys.exit(f"render_demo: bad --resolution {args.resolution!r} (expected WIDTHxHEIGHT)")
    if args.frames < 1:
        sys.exit("render_demo: --frames must be at least 1")

    import bpy

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    ext = load_extension()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    ext.register()
    try:
        from demo.character import build_demo_scene

        t0 = time.perf_counter()
        demo = build_demo_scene()
        scene = bpy.context.scene
        print(f"demo: built the character in {time.perf_counter() - t0:.2f} s "
              f"({len(demo['armature'].data.bones)} bones, body {len(demo['body'].data.vertices)} "
              f"verts, face {len(demo['face'].data.vertices)} verts, actions {demo['action_names']})",
              flush=True)
        scene.render.engine = args.engine
        scene.render.resolution_x = width
        scene.render.resolution_y = height
        scene.render.resolution_percentage = 100
        scene.render.image_settings.file_format = "PNG"
        scene.render.image_settings.color_mode = "RGBA"
        scene.render.film_transparent = False
        start = scene.frame_start
        scene.frame_end = start + args.frames - 1

        # Clear stale frames of an earlier, longer run.
        for old in out.glob("frame_*.png"):
            old.unlink()

        files = []
        times = []
        t_all = time.perf_counter()
        for i in range(args.frames):
            frame = start + i
            path = out / f"frame_{frame:04d}.png"
            t = time.perf_counter()
            scene.frame_set(frame)
            scene.render.filepath = str(path)
            bpy.ops.render.render(write_still=True)
            dt = time.perf_counter() - t
            times.append(dt)
            if not path.exists():
                sys.exit(f"render_demo: frame {frame} was not written to {path}")
            files.append(path)
            print(f"demo: frame {i + 1}/{args.frames} -> {os.path.relpath(path)} ({dt:.2f} s)", flush=True)
        total = time.perf_counter() - t_all

        sheet = contact_sheet(bpy, files, out / "contact_sheet.png", columns=args.columns)
        print(f"demo: contact sheet -> {os.path.relpath(sheet)}", flush=True)

        if args.readme_image:
            import shutil

            idx = min(max(args.readme_frame - start, 0), len(files) - 1)
            dst = pathlib.Path(args.readme_image)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(files[idx], dst)
            print(f"demo: README picture -> {os.path.relpath(dst)}", flush=True)

        avg = sum(times) / len(times)
        print(f"demo: {len(files)} frames at {width}x{height} with {args.engine} in {total:.1f} s "
              f"({avg:.2f} s/frame)", flush=True)
        print(f"demo: done. Frames: {out}/frame_####.png ({files[0].name} .. {files[-1].name}); "
              f"contact sheet: {sheet}", flush=True)
    finally:
        try:
            ext.unregister()
        except Exception:  # noqa: BLE001 - exiting anyway
            pass


if __name__ == "__main__":
    main()
