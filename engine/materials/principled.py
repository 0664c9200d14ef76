"""A toon look derived from an ordinary Principled BSDF material (resolution step 3 and 4)."""
from __future__ import annotations

from .params import MToonParams, TextureRef

SHADE_VALUE = 0.6        # shade = base colour x 0.6 ...
SHADE_SATURATION = 1.2   # ... pushed slightly away from grey, as hand-painted toon shades are


def shade_from_base(rgb) -> tuple:
    r, g, b = (float(c) for c in rgb[:3])
    lum = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return tuple(max(0.0, min(1.0, (lum + (c - lum) * SHADE_SATURATION) * SHADE_VALUE)) for c in (r, g, b))


def find_principled(material):
    """The Principled BSDF feeding the active material output (else the first one), or None."""
    tree = getattr(material, "node_tree", None)
    if tree is None:
        return None
    out = None
    for node in tree.nodes:
        if node.type == "OUTPUT_MATERIAL" and (out is None or node.is_active_output):
            out = node
    if out is not None:
        surf = out.inputs.get("Surface")
        if surf is not None and surf.is_linked:
            src = _upstream(surf)
            if src is not None and src.type == "BSDF_PRINCIPLED":
                return src
    for node in tree.nodes:
        if node.type == "BSDF_PRINCIPLED":
            return node
    return None


def _upstream(socket, depth=0):
    """Node linked into ``socket``, looking through reroutes."""
    if socket is None or not socket.is_linked or depth > 8:
        return None
    node = socket.links[0].from_node
    if node.type == "REROUTE":
        return _upstream(node.inputs[0], depth + 1)
    return node


def _linked_image(socket):
    node = _upstream(socket)
    if node is not None and node.type == "TEX_IMAGE" and node.image is not None:
        return node, socket.links[0].from_socket.name if socket.links else "Color"
    return None, None


def _tex_ref(node, scale=1.0) -> TextureRef:
    ref = TextureRef(image=node.image, scale=float(scale))
    mapping = _upstream(node.inputs.get("Vector"))
    if mapping is not None and mapping.type == "MAPPING" and mapping.vector_type in {"POINT", "TEXTURE"}:
        try:
            loc = mapping.inputs["Location"].default_value
            sc = mapping.inputs["Scale"].default_value
            if mapping.vector_type == "POINT":
                ref.uv_scale, ref.uv_offset = (sc[0], sc[1]), (loc[0], loc[1])
        except (KeyError, AttributeError):
            pass
    return ref


def read_principled(material, bsdf) -> MToonParams:
    p = MToonParams(source="principled")
    textures = {}
    base_in = bsdf.inputs["Base Color"]
    base = tuple(float(c) for c in base_in.default_value[:3])
    img, _ = _linked_image(base_in)
    if img is not None:
        textures["base_color"] = _tex_ref(img)
        textures["shade_multiply"] = _tex_ref(img)
        base = (1.0, 1.0, 1.0)
    elif base_in.is_linked:
        # a procedural/other input: approximate with the material's viewport colour
        base = tuple(float(c) for c in material.diffuse_color[:3])

    alpha_in = bsdf.inputs.get("Alpha")
    alpha = float(alpha_in.default_value) if alpha_in is not None else 1.0
    aimg, aout = _linked_image(alpha_in) if alpha_in is not None else (None, None)
    blended = getattr(material, "surface_render_method", "DITHERED") == "BLENDED"
    if aimg is not None:
        alpha = 1.0
        if "base_color" not in textures:
            textures["base_color"] = _tex_ref(aimg)
        p.alpha_mode = "BLEND" if blended else "MASK"
        p.alpha_cutoff = float(getattr(material, "alpha_threshold", 0.5) or 0.5)
    elif alpha < 0.999:
        p.alpha_mode = "BLEND"
    p.base_color = base + (alpha,)
    p.shade_color = shade_from_base(base)

    em_in = bsdf.inputs.get("Emission Color")
    st_in = bsdf.inputs.get("Emission Strength")
    strength = float(st_in.default_value) if st_in is not None else 1.0
    if em_in is not None:
        eimg, _ = _linked_image(em_in)
        if eimg is not None:
            textures["emissive"] = _tex_ref(eimg)
            p.emissive = (strength,) * 3
        else:
            p.emissive = tuple(float(c) * strength for c in em_in.default_value[:3])

    nrm = _upstream(bsdf.inputs.get("Normal"))
    if nrm is not None and nrm.type == "NORMAL_MAP":
        nimg, _ = _linked_image(nrm.inputs.get("Color"))
        if nimg is not None:
            s = float(nrm.inputs["Strength"].default_value)
            textures["normal"] = _tex_ref(nimg, s)
            p.normal_scale = s

    p.double_sided = not getattr(material, "use_backface_culling", False)
    p.textures = textures
    return p


def read_diffuse(material) -> MToonParams:
    """No usable node tree: the material's viewport display colour."""
    c = tuple(float(x) for x in material.diffuse_color)
    p = MToonParams(base_color=c[:3] + (1.0,), shade_color=shade_from_base(c), source="default")
    p.double_sided = not getattr(material, "use_backface_culling", False)
    return p
