"""Metallic and roughness of a Principled BSDF (node_tree.Reader's helper).

The values go to the shader as they are (``MToonParams.metallic`` / ``roughness``), and a texture
feeding them becomes the ``metallic_roughness`` slot with the channel each one reads
(``metallic_channel`` / ``roughness_channel``: 0-3 = R, G, B, A; 4 = the colour as a value, i.e.
its luminance, as Blender converts a colour into a float socket; -1 = no texture). The glTF
importer's layout (Image Texture -> Separate Color: Blue -> Metallic, Green -> Roughness) and an
image's colour or alpha linked directly, each optionally times a constant (Math Multiply), are
read; anything else is reported and read as the socket's constant. The shading of a metal is the
shader's (glsl/mtoon_shading.glsl ``metal_params``): EEVEE's GGX lobe and reflected world.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CHANNELS = {"Red": 0, "R": 0, "Green": 1, "G": 1, "Blue": 2, "B": 2, "Alpha": 3}
LUMINANCE = 4


@dataclass
class ScalarTerm:
    """factor x channel ``channel`` of ``image`` (an Image Texture node) when set."""

    factor: float = 0.0
    image: Any = None               # the Image Texture node (bpy, untyped)
    channel: int = -1


def scalar(reader, socket, depth=0) -> ScalarTerm:
    """The float path feeding ``socket`` (Metallic, Roughness)."""
    src = reader.link(socket)
    if src is None:
        return ScalarTerm(float(socket.default_value))
    node, out = src
    t = node.type
    if t == "VALUE":
        return ScalarTerm(float(out.default_value))
    if t == "TEX_IMAGE" and node.image is not None:
        return ScalarTerm(1.0, node, 3 if out.name == "Alpha" else LUMINANCE)
    if t in ("SEPARATE_COLOR", "SEPRGB") and getattr(node, "mode", "RGB") == "RGB" and out.name in CHANNELS:
        isrc = reader.link(node.inputs[0])
        if isrc is not None and isrc[0].type == "TEX_IMAGE" and isrc[0].image is not None \
                and isrc[1].name == "Color":
            return ScalarTerm(1.0, isrc[0], CHANNELS[out.name])
    if t == "MATH" and node.operation == "MULTIPLY" and depth < 8:
        a, b = node.inputs[0], node.inputs[1]
        if not b.is_linked:
            inner = scalar(reader, a, depth + 1)
            return ScalarTerm(inner.factor * float(b.default_value), inner.image, inner.channel)
        if not a.is_linked:
            inner = scalar(reader, b, depth + 1)
            return ScalarTerm(inner.factor * float(a.default_value), inner.image, inner.channel)
    value = float(socket.default_value)
    reader.note(node, f"{socket.name.lower()} from {node.bl_label} is not mapped: treated as {value:g}")
    return ScalarTerm(value)


def read_metal(reader, bsdf, p, textures) -> None:
    """Fill ``p.metallic`` / ``p.roughness`` (and the ``metallic_roughness`` texture with its
    channels) from the Principled BSDF ``bsdf``."""
    ms, rs = bsdf.inputs.get("Metallic"), bsdf.inputs.get("Roughness")
    metal = scalar(reader, ms) if ms is not None else ScalarTerm(0.0)
    rough = scalar(reader, rs) if rs is not None else ScalarTerm(0.5)
    image = metal.image if metal.image is not None and metal.factor > 0.0 else None
    if rough.image is not None:
        if image is None and metal.factor > 0.0:
            image = rough.image
        elif image is not None and rough.image.image != image.image:
            reader.note(rough.image, f"roughness from '{rough.image.image.name}' while the metallic comes from "
                                     f"'{image.image.name}': roughness {rough.factor:g}")
            rough = ScalarTerm(rough.factor)
    p.metallic = min(max(metal.factor, 0.0), 1.0)
    p.roughness = min(max(rough.factor, 0.0), 1.0)
    if image is None or p.metallic <= 0.0:
        return
    p.metallic_channel = metal.channel if metal.image is not None else -1
    p.roughness_channel = rough.channel if rough.image is not None else -1
    textures["metallic_roughness"] = reader.tex_ref(image)
