"""Compare the Stylized look of a .blend with Workbench's flat albedo (and optionally EEVEE).

    .venv/bin/python tools/compare_look.py FILE.blend [--out DIR] [--eevee] [--frame N] [--size 480]

Renders the scene's camera at one frame with

* STYLIZED (our engine; its linear result),
* BLENDER_WORKBENCH with flat lighting and the Texture colour type: the albedo Blender's own viewport
  shows (image texture or viewport display colour; Workbench's Texture mode shows no vertex colours;
  the VRM Add-on's outline hulls are switched off for it, as Stylized skips them),
* BLENDER_EEVEE with the scene's own settings (``--eevee``; slow on software GL),

writes ``<name>_sheet.png`` (side by side, left to right in that order; linear values shown with the
plain sRGB transfer, i.e. the Standard view transform, for all of them) plus one PNG per engine into
``--out``, and prints per material what the Stylized resolver made of it (source, base texture,
vertex colours, alpha mode, unlit, metallic, unmapped nodes) and its mean linear colour in each
render over that material's pixels.  The per-material pixels come from an extra Workbench render
in which every material gets a unique flat ID colour (no anti-aliasing, transparent film); pixels
of several materials blended by Stylized's anti-aliasing sit on mask edges, so the means include a
little of the neighbours.  The difference printed is Stylized minus Workbench (lighting included:
Workbench is unlit albedo, so a lit Stylized surface differs by its light level; ``chroma`` compares
colour proportions r/g/b / (r+g+b) and is independent of brightness).
Last line: ``compare-look: file=... materials=N mean_abs_diff=X mean_chroma_diff=Y``.
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from tools import (
    _bootstrap,  # noqa: E402
    render_capture,  # noqa: E402  (F12 results: the hook _bootstrap installs)
)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("blend", help=".blend file to render (its scene camera)")
    p.add_argument("--out", default=None, help="folder for the sheet and the renders (default out/compare_look)")
    p.add_argument("--eevee", action="store_true", help="also render with EEVEE")
    p.add_argument("--frame", type=int, default=None, help="frame to render (default: the file's current frame)")
    p.add_argument("--size", type=int, default=480, help="longest image side in pixels (default 480)")
    return p.parse_args(argv)


# ------------------------------------------------------------------------------------------------
# rendering
# ------------------------------------------------------------------------------------------------

def _load_exr(bpy, path) -> np.ndarray:
    img = bpy.data.images.load(str(path), check_existing=False)
    try:
        w, h = img.size
        px = np.empty(w * h * 4, np.float32)
        img.pixels.foreach_get(px)
        return px.reshape(h, w, 4)
    finally:
        bpy.data.images.remove(img)


def _render_exr(bpy, scene, engine, path) -> np.ndarray:
    r = scene.render
    saved = (r.engine, r.filepath, r.image_settings.file_format, r.image_settings.color_depth)
    try:
        r.engine = engine
        r.filepath = str(path)
        r.image_settings.file_format = "OPEN_EXR"
        r.image_settings.color_depth = "32"
        bpy.ops.render.render(write_still=True, scene=scene.name)
    finally:
        r.engine, r.filepath, r.image_settings.file_format, r.image_settings.color_depth = saved
    return _load_exr(bpy, path)


def render_stylized(bpy, scene) -> np.ndarray:

    saved = scene.render.engine
    scene.render.engine = "STYLIZED"
    try:
        render_capture.LAST_RENDER.clear()
        bpy.ops.render.render(scene=scene.name)
    finally:
        scene.render.engine = saved
    px = render_capture.LAST_RENDER.get("pixels")
    if px is None:
        raise SystemExit("compare-look: the Stylized engine produced no image")
    return np.asarray(px, np.float32)


class _Workbench:
    """Workbench display settings for one render, restored afterwards."""

    KEYS = ("light", "color_type", "show_shadows", "show_cavity", "show_object_outline", "show_specular_highlight",
            "show_xray", "use_dof")

    def __init__(self, scene, **shading):
        self.scene = scene
        self.shading = shading

    def __enter__(self):
        sh = self.scene.display.shading
        self.saved = {k: getattr(sh, k) for k in self.KEYS}
        self.saved_aa = self.scene.display.render_aa
        self.saved_film = self.scene.render.film_transparent
        for k, v in dict(show_shadows=False, show_cavity=False, show_object_outline=False,
                         show_specular_highlight=False, show_xray=False, use_dof=False, **self.shading).items():
            if k == "render_aa":
                self.scene.display.render_aa = v
            elif k == "film_transparent":
                self.scene.render.film_transparent = v
            else:
                setattr(sh, k, v)
        return self

    def __exit__(self, *exc):
        sh = self.scene.display.shading
        for k, v in self.saved.items():
            setattr(sh, k, v)
        self.scene.display.render_aa = self.saved_aa
        self.scene.render.film_transparent = self.saved_film


class _NoVrmOutlineHulls:
    """The VRM Add-on's outline hulls (Geometry Nodes modifiers ``MToon Outline (...)``) switched off
    for render: Workbench draws them as closed shells over the body; Stylized draws its own outlines
    and skips them."""

    def __init__(self, bpy):
        from stylized_renderer.engine.features.vrm import materials as vrm_addon

        self.mods = [m for ob in bpy.data.objects for m in getattr(ob, "modifiers", ())
                     if vrm_addon.is_outline_modifier(m) and m.show_render]

    def __enter__(self):
        for m in self.mods:
            m.show_render = False
        return self

    def __exit__(self, *exc):
        for m in self.mods:
            m.show_render = True


def render_workbench_albedo(bpy, scene, tmp) -> np.ndarray:
    with _Workbench(scene, light="FLAT", color_type="TEXTURE"), _NoVrmOutlineHulls(bpy):
        return _render_exr(bpy, scene, "BLENDER_WORKBENCH", tmp / "workbench.exr")


def _id_colour(k: int) -> tuple:
    # distinct, exactly representable values (multiples of 1/64) in each channel
    return (((k * 37) % 61 + 2) / 64.0, ((k * 17) % 59 + 3) / 64.0, ((k * 11) % 53 + 4) / 64.0)


def material_masks(bpy, scene, tmp) -> dict:
    """{material name: (H, W) bool} from a Workbench render with flat ID colours per material."""
    mats = [m for m in bpy.data.materials if m.users]
    saved = {m.name: tuple(m.diffuse_color) for m in mats}
    ids = {}
    try:
        for k, m in enumerate(mats):
            c = _id_colour(k)
            m.diffuse_color = c + (1.0,)
            ids[m.name] = np.array(c, np.float32)
        with _Workbench(scene, light="FLAT", color_type="MATERIAL", render_aa="OFF", film_transparent=True), \
                _NoVrmOutlineHulls(bpy):
            px = _render_exr(bpy, scene, "BLENDER_WORKBENCH", tmp / "ids.exr")
    finally:
        for m in mats:
            m.diffuse_color = saved[m.name]
    drawn = px[..., 3] > 0.5
    out = {}
    for name, c in ids.items():
        mask = drawn & np.all(np.abs(px[..., :3] - c) < 0.5 / 64.0, axis=-1)
        if mask.any():
            out[name] = mask
    return out


# ------------------------------------------------------------------------------------------------
# report
# ------------------------------------------------------------------------------------------------

def _chroma(rgb) -> np.ndarray:
    rgb = np.maximum(np.asarray(rgb, np.float64), 0.0)
    s = rgb.sum()
    return rgb / s if s > 1e-6 else np.full(3, 1.0 / 3.0)


def _fmt(rgb) -> str:
    return "(" + ", ".join(f"{float(c):.3f}" for c in rgb) + ")"


def report(bpy, renders: dict, masks: dict) -> tuple:
    from stylized_renderer.engine.features.materials import describe, resolve_material

    diffs, chromas = [], []
    for name in sorted(masks):
        mat = bpy.data.materials.get(name)
        d = describe(resolve_material(mat))
        mask = masks[name]
        print(f"material '{name}': {int(mask.sum())} px")
        print(f"  source={d['source']} base_texture={d['base_texture']} vertex_colors={d['vertex_colors']} "
              f"alpha={d['alpha_mode']} unlit={d['unlit']} metallic={d['metallic']:.2f}")
        for msg in d["unmapped"]:
            print(f"  unmapped: {msg}")
        means = {k: px[..., :3][mask].mean(0) for k, px in renders.items()}
        print("  mean linear rgb: " + "  ".join(f"{k}={_fmt(v)}" for k, v in means.items()))
        diff = means["stylized"] - means["workbench"]
        ch = float(np.abs(_chroma(means["stylized"]) - _chroma(means["workbench"])).sum())
        print(f"  stylized - workbench = {_fmt(diff)}  |diff|={float(np.abs(diff).mean()):.3f}  chroma_diff={ch:.3f}")
        diffs.append(float(np.abs(diff).mean()))
        chromas.append(ch)
    return (float(np.mean(diffs)) if diffs else float("nan"), float(np.mean(chromas)) if chromas else float("nan"))


def save_sheet(bpy, images: list, path: pathlib.Path, pad: int = 4) -> None:
    """Images side by side (linear RGBA, bottom-up rows), written as an sRGB PNG."""
    h = max(im.shape[0] for im in images)
    w = sum(im.shape[1] for im in images) + pad * (len(images) - 1)
    sheet = np.zeros((h, w, 4), np.float32)
    sheet[..., 3] = 1.0
    x = 0
    for im in images:
        rgb = np.clip(np.nan_to_num(im[..., :3], nan=0.0, posinf=1.0), 0.0, 1.0)
        a = np.clip(im[..., 3:4], 0.0, 1.0)
        sheet[h - im.shape[0]:, x:x + im.shape[1], :3] = rgb * a + 0.18 * (1.0 - a)   # transparent: grey
        x += im.shape[1] + pad
    img = bpy.data.images.new("__compare_look__", width=w, height=h, alpha=True, float_buffer=True)
    try:
        img.pixels.foreach_set(sheet.ravel())
        img.filepath_raw = str(path)
        img.file_format = "PNG"
        img.save()
    finally:
        bpy.data.images.remove(img)


def main(argv=None):
    args = parse_args(argv)
    blend = pathlib.Path(args.blend).resolve()
    if not blend.exists():
        raise SystemExit(f"compare-look: {blend} does not exist")
    _bootstrap.load()
    import bpy

    bpy.ops.wm.open_mainfile(filepath=str(blend))
    scene = bpy.context.scene
    if scene.camera is None:
        raise SystemExit(f"compare-look: scene '{scene.name}' of {blend.name} has no camera")
    if args.frame is not None:
        scene.frame_set(args.frame)
    r = scene.render
    w, h = r.resolution_x * r.resolution_percentage / 100.0, r.resolution_y * r.resolution_percentage / 100.0
    k = args.size / max(w, h)
    r.resolution_x, r.resolution_y, r.resolution_percentage = max(1, round(w * k)), max(1, round(h * k)), 100
    out = pathlib.Path(args.out) if args.out else _bootstrap.ROOT / "out" / "compare_look"
    out.mkdir(parents=True, exist_ok=True)
    stem = blend.stem
    print(f"compare-look: {blend.name} frame {scene.frame_current} camera '{scene.camera.name}' "
          f"{r.resolution_x}x{r.resolution_y}")
    hulls = _NoVrmOutlineHulls(bpy).mods
    if hulls:
        print(f"Workbench renders without the VRM Add-on's {len(hulls)} outline hull modifier(s) "
              "(Stylized skips them and draws its own outlines)")
    with tempfile.TemporaryDirectory() as td:
        tmp = pathlib.Path(td)
        renders = {"stylized": render_stylized(bpy, scene), "workbench": render_workbench_albedo(bpy, scene, tmp)}
        if args.eevee:
            renders["eevee"] = _render_exr(bpy, scene, _bootstrap.eevee_engine_id(), tmp / "eevee.exr")
        masks = material_masks(bpy, scene, tmp)
    shapes = {k: v.shape for k, v in renders.items()}
    if len(set(shapes.values())) != 1:
        raise SystemExit(f"compare-look: renders differ in size: {shapes}")
    for name, px in renders.items():
        save_sheet(bpy, [px], out / f"{stem}_{name}.png")
    sheet = out / f"{stem}_sheet.png"
    save_sheet(bpy, list(renders.values()), sheet)
    print(f"sheet (left to right: {', '.join(renders)}; Standard view): {sheet}")
    whole = {k: v[..., :3].reshape(-1, 3).mean(0) for k, v in renders.items()}
    print("whole image mean linear rgb: " + "  ".join(f"{k}={_fmt(v)}" for k, v in whole.items()))
    mad, mch = report(bpy, renders, masks)
    print(f"compare-look: file={blend.name} materials={len(masks)} mean_abs_diff={mad:.3f} mean_chroma_diff={mch:.3f}")


if __name__ == "__main__":
    main()
