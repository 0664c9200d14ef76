# SPDX-License-Identifier: GPL-3.0-or-later
"""A composite made from the Stylized engine's render passes (README "Compositing").

    .venv/bin/python tools/render_compositing.py [--out docs/compositing.png] [--resolution 480x360]

Builds the demo scene (demo/character.py), switches on the Mist, Depth and toon passes, renders
F12 into a multilayer EXR (out/compositing/passes.exr) and composes three panels from that file:
the Combined pass as rendered; the outlines retinted through the Outline pass (combined - outline
+ outline coverage x a new colour) with the received Shadow tinted blue; depth fog over the
Mist pass; and a Cryptomatte matte: the character's asset (the rig and everything parented to
it), picked by name through the file's manifest as the compositor's Cryptomatte node does,
keeps its colour while the rest is greyed and darkened; and frame 25, where the arm swings
fastest, rendered with Render > Motion Blur on (shutter 3 frames, so the demo's slow swing shows:
its 8 samples spread over it, the wand and the arm smeared).  Each panel is made only from passes and metadata of the written files.
The first file's Vector pass is also saved, visualised (x to red, y to green, 0.5 = still), as
out/compositing/vector.png.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=str(ROOT / "docs" / "compositing.png"))
    p.add_argument("--resolution", default="480x360")
    args = p.parse_args(argv)
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT))
    import bpy

    from tools import _bootstrap

    ext = _bootstrap.load(register=False)
    ext.register()
    from demo.character import build_demo_scene
    from support.exr_read import layer_pass, read_exr, read_exr_header

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.render.engine = "STYLIZED"
    build_demo_scene(scene)
    w, h = (int(v) for v in args.resolution.split("x"))
    scene.render.resolution_x, scene.render.resolution_y = w, h
    scene.frame_set(20)
    layer = scene.view_layers[0]
    layer.use_pass_mist = layer.use_pass_z = True
    layer.use_pass_cryptomatte_asset = True
    layer.use_pass_vector = True
    toon = layer.stylized_passes
    toon.use_outline = toon.use_shadow = True
    ms = scene.world.mist_settings
    ms.start, ms.depth, ms.falloff = 4.0, 10.0, "QUADRATIC"
    imf = scene.render.image_settings
    if hasattr(imf, "media_type"):
        imf.media_type = "MULTI_LAYER_IMAGE"
    else:
        imf.file_format = "OPEN_EXR_MULTILAYER"
    if hasattr(imf, "use_exr_interleave"):
        imf.use_exr_interleave = True
    imf.exr_codec = "NONE"
    imf.color_depth = "32"
    exr = ROOT / "out" / "compositing" / "passes.exr"
    exr.parent.mkdir(parents=True, exist_ok=True)
    scene.render.filepath = str(exr)
    bpy.ops.render.render(write_still=True)
    ch = read_exr(exr)
    comb = layer_pass(ch, "ViewLayer.Combined")
    outline = layer_pass(ch, "ViewLayer.Outline")
    shadow = layer_pass(ch, "ViewLayer.Shadow", "X")
    mist = layer_pass(ch, "ViewLayer.Mist", "Z")
    cov = outline[..., 3:4]
    # 1. outlines retinted (a warm orange) and the received shadow tinted blue
    tint = np.array([1.0, 0.35, 0.05])
    retint = comb[..., :3] - outline[..., :3] + cov * tint
    retint = retint * (shadow + (1.0 - shadow) * np.array([0.55, 0.65, 1.0]))
    # 2. depth fog over the Mist pass
    fog = np.array([0.75, 0.8, 0.9])
    fogged = comb[..., :3] * (1.0 - 0.85 * mist) + fog * 0.85 * mist
    # 3. a Cryptomatte matte: the character's asset picked by name
    matte = cryptomatte_matte(ch, read_exr_header(exr), "ViewLayer.CryptoAsset", "DemoRig")[::-1, :, None]
    grey = comb[..., :3].mean(-1, keepdims=True) * 0.45
    picked = comb[..., :3] * matte + grey * (1.0 - matte)
    # 4. frame 25 motion-blurred (Render > Motion Blur, shutter 3 frames)
    vec = layer_pass(ch, "ViewLayer.Vector", "XYZW")
    save_png(bpy, np.concatenate([0.5 + vec[..., :2] / 20.0, np.full((h, w, 1), 0.5), np.ones((h, w, 1))], -1),
             exr.parent / "vector.png")
    scene.render.use_motion_blur = True
    scene.render.motion_blur_shutter = 3.0
    scene.frame_set(25)
    blur_exr = exr.parent / "blurred.exr"
    scene.render.filepath = str(blur_exr)
    bpy.ops.render.render(write_still=True)
    blurred = layer_pass(read_exr(blur_exr), "ViewLayer.Combined")
    panels = [comb[..., :3], retint, fogged, picked, blurred[..., :3]]
    img = np.concatenate([np.concatenate([p, np.ones((h, w, 1))], -1) for p in panels], 1).astype(np.float32)
    out = pathlib.Path(args.out)
    save_png(bpy, img, out)
    print(f"composite: {out} ({img.shape[1]}x{img.shape[0]}) from {exr} and {blur_exr}")
    ext.unregister()


def save_png(bpy, img: np.ndarray, out: pathlib.Path) -> None:
    """``img`` (H, W, 4) linear float, bottom row first, as a PNG at ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    im = bpy.data.images.new(out.stem, width=img.shape[1], height=img.shape[0], alpha=True, float_buffer=True)
    im.pixels.foreach_set(np.ascontiguousarray(img, np.float32).ravel())
    im.filepath_raw = str(out)
    im.file_format = "PNG"
    im.save()


def cryptomatte_matte(channels, header, layer: str, name: str) -> np.ndarray:
    """The coverage of ``name`` in the Cryptomatte ``layer`` (e.g. "ViewLayer.CryptoAsset") of
    a written file (top row first): the manifest gives its id; its coverage is summed over the
    ranked layers."""
    import json

    key = next(k.split("/")[1] for k, v in header.items() if k.endswith("/name") and v == layer)
    h = int(json.loads(header[f"cryptomatte/{key}/manifest"])[name], 16)
    exp = min(max((h >> 23) & 0xFF, 1), 254)
    want = np.uint32((h & 0x807FFFFF) | (exp << 23))
    out = 0.0
    i = 0
    while f"{layer}{i:02d}.r" in channels:
        for id_ch, cov_ch in (("r", "g"), ("b", "a")):
            ids = channels[f"{layer}{i:02d}.{id_ch}"].view(np.uint32)
            out = out + np.where(ids == want, channels[f"{layer}{i:02d}.{cov_ch}"], 0.0)
        i += 1
    return np.asarray(out, np.float32)


if __name__ == "__main__":
    main()
