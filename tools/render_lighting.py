"""The picture of docs/lighting.md: the demo character with a cyan rim lamp behind it whose Light
Linking receiver collection holds only the character (body, face, wand), so the ground stays
untouched; left the same lamp unlinked (it floods the ground), right linked.  F12 with the
Stylized engine, headless:

  .venv/bin/python tools/render_lighting.py [--out docs/lighting.png] [--width 480 --height 360]
"""
from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from tools import (
    _bootstrap,  # noqa: E402
    render_capture,  # noqa: E402  (F12 results: the hook _bootstrap installs)
)


def main():
    import bpy
    import numpy as np
    from mathutils import Vector

    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parents[1] / "docs" / "lighting.png"))
    ap.add_argument("--width", type=int, default=480)
    ap.add_argument("--height", type=int, default=360)
    args = ap.parse_args(sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:])
    _bootstrap.load(register=True)
    from demo.character import build_demo_scene

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    demo = build_demo_scene(scene)
    scene.render.engine = "STYLIZED"
    scene.render.resolution_x, scene.render.resolution_y = args.width, args.height
    scene.render.resolution_percentage = 100
    demo["sun"].data.energy *= 0.6
    rim_data = bpy.data.lights.new("Rim", "SPOT")
    rim_data.energy = 2500.0
    rim_data.color = (0.2, 0.9, 1.0)
    rim_data.spot_size = 1.2
    rim_data.use_shadow = False
    rim = bpy.data.objects.new("Rim", rim_data)
    scene.collection.objects.link(rim)
    rim.location = (-2.2, 1.0, 2.2)               # behind the character (it faces -Y), to its right
    direction = Vector((0.0, 0.0, 1.1)) - rim.location          # at the character's chest
    rim.rotation_euler = direction.to_track_quat("-Z", "Y").to_euler()
    receivers = bpy.data.collections.new("RimReceivers")
    for key in ("body", "face", "prop"):
        receivers.objects.link(demo[key])
    images = []
    for linked in (False, True):
        rim.light_linking.receiver_collection = receivers if linked else None
        render_capture.LAST_RENDER.clear()
        bpy.ops.render.render(write_still=False, scene=scene.name)
        images.append(np.asarray(render_capture.LAST_RENDER["pixels"], np.float32).copy())
    pixels = np.concatenate(images, 1)
    img = bpy.data.images.new("lighting", pixels.shape[1], pixels.shape[0], alpha=True, float_buffer=True)
    img.pixels.foreach_set(np.ascontiguousarray(pixels).ravel())
    img.filepath_raw = args.out
    img.file_format = "PNG"
    img.save()
    print(f"render-lighting: wrote {args.out} ({pixels.shape[1]}x{pixels.shape[0]})")


if __name__ == "__main__":
    main()
