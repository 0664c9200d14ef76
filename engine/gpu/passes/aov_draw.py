"""The AOVs' inputs drawn per pixel (engine/features/passes/aov.py ``Drawn``: factor x Image
Texture x Color Attribute, as the material reader evaluates them).

For each AOV with such an input on some material of the frame, the frame's surfaces (and
outlines) are drawn once more at the pixel centres (``FramePipeline.draw_override``, the
coverage samples' instances) into an RGBA32F target of the AOV's own, each material bound as a
material block of its input: the factor in the base colour, the image in the base colour slot
(its UV transform), the colour attribute flags, and the shader variants' ``SPEC_AOV`` mode
(engine/gpu/passes/mtoon_shaders.py ``_AOV_OUT``: colour, luminance or alpha); the materials
whose input is a constant, or who have none, are drawn as 0 (their constants are added by
``aov.fill``), so the surfaces still hide what lies behind them.  Outline width, mode and
double-sidedness stay the material's, so the same surfaces are drawn as in the frame.

The targets are one render's (made per call, nothing kept): ``draw`` returns them as extra
sources of the averaged passes' resolve (engine/gpu/passes/render_passes.py
``averaged_sources``), which averages them over the coverage samples as Diffuse Color is.
"""
from __future__ import annotations

from ...core.assets.material import MToonParams

#: ``Drawn.mode`` -> the SPEC_AOV define
MODES = {"COLOR": "1", "LUMINANCE": "2", "ALPHA": "3"}


def _material(mat, drawn) -> MToonParams:
    """The block an AOV draw binds for ``mat`` (MToonParams): ``drawn``'s input, or 0 (None);
    what shapes the drawn surface stays ``mat``'s."""
    textures = {}
    width = (mat.textures or {}).get("outline_width_multiply")
    if width is not None:
        textures["outline_width_multiply"] = width
    if drawn is not None and drawn.texture is not None:
        textures["base_color"] = drawn.texture
    return MToonParams(base_color=tuple(drawn.factor) if drawn is not None else (0.0, 0.0, 0.0, 0.0),
                       textures=textures, unlit=True, receive_shadow=False,
                       vertex_colors=bool(drawn is not None and drawn.vertex),
                       vertex_alpha=bool(drawn is not None and drawn.vertex_alpha),
                       double_sided=mat.double_sided, outline_width_mode=mat.outline_width_mode,
                       outline_width=mat.outline_width)


def _target(width: int, height: int):
    import gpu

    tex = gpu.types.GPUTexture((width, height), format="RGBA32F")
    depth = gpu.types.GPUTexture((width, height), format="DEPTH_COMPONENT32F")
    return tex, depth, gpu.types.GPUFrameBuffer(color_slots=(tex,), depth_slot=depth)


def draw(pipeline, frame, inputs: dict, kinds: dict, prefix: str) -> tuple:
    """Draw ``inputs`` ({AOV name: {material name: Drawn}}, aov.drawn_inputs) of the frame the
    pipeline just drew; ``kinds``: AOV name -> "COLOR" / "VALUE".  Returns the resolve's extra
    sources: ((pass name (``prefix`` + AOV name), channels, GLSL expression at ``q``, sampler
    name, texture), ...)."""
    s = frame.settings
    out = []
    for k, (name, per_material) in enumerate(sorted(inputs.items())):
        def material_for(mat_name, mat, per_material=per_material):
            drawn = per_material.get(mat_name)
            mode = MODES.get(drawn.mode, "1") if drawn is not None else "1"
            return _material(mat, drawn), (("SPEC_AOV", mode),)

        target = _target(s.width, s.height)
        pipeline.draw_override(frame, target, material_for)
        sampler = f"aov{k}"
        if kinds.get(name) == "VALUE":
            out.append((prefix + name, 1, f"texelFetch({sampler}, q, 0).r", sampler, target[0]))
        else:
            out.append((prefix + name, 4, f"texelFetch({sampler}, q, 0)", sampler, target[0]))
    return tuple(out)
