"""Read the VRM Add-on for Blender's MToon 1.0 node layout without needing that add-on.

The values live in the input sockets of a group node named ``Mtoon1Material.Mtoon1Output``
(node group ``VRM Add-on MToon 1.0 Output Revision 1``), in image nodes named
``Mtoon1<Name>Texture.Image`` and UV groups ``Mtoon1<Name>Texture.Uv``
(see shared/design/vrm-addon-interop.md). Socket names are looked up through the node group's
own interface, so a renamed/reordered group still resolves by label.
"""
from __future__ import annotations

from ...core.assets.material import MToonParams, TextureRef

OUTPUT_NODE_NAME = "Mtoon1Material.Mtoon1Output"
OUTPUT_GROUP_PREFIX = "VRM Add-on MToon 1.0 Output"
NORMAL_GROUP_PREFIX = "VRM Add-on MToon 1.0 Normal"
UV_ANIMATION_GROUP_PREFIX = "VRM Add-on MToon 1.0 UV Animation"
OUTLINE_PREFIX = "MToon Outline ("
OUTLINE_GEOMETRY_GROUP_PREFIX = "VRM Add-on MToon 1.0 Outline Geometry"

# our slot -> the add-on's <Name>
TEXTURE_NODE_NAMES = {
    "base_color": "BaseColor",
    "shade_multiply": "ShadeMultiply",
    "normal": "Normal",
    "shading_shift": "ShadingShift",
    "emissive": "Emissive",
    "rim_multiply": "RimMultiply",
    "matcap": "Matcap",
    "outline_width_multiply": "OutlineWidthMultiply",
    "uv_animation_mask": "UvAnimationMask",
}

ALPHA_MODES = {0: "OPAQUE", 1: "MASK", 2: "BLEND"}
OUTLINE_MODES = {0: "none", 1: "worldCoordinates", 2: "screenCoordinates"}


def find_output_node(material):
    """The add-on's MToon output group node of ``material``, or None (cheap name look-up first)."""
    tree = getattr(material, "node_tree", None)
    if tree is None:
        return None
    node = tree.nodes.get(OUTPUT_NODE_NAME)
    if node is not None and getattr(node, "node_tree", None) is not None:
        return node
    for node in tree.nodes:
        if node.type == "GROUP" and node.node_tree is not None \
                and node.node_tree.name.startswith(OUTPUT_GROUP_PREFIX):
            return node
    return None


def is_outline_material(material) -> bool:
    """True for the add-on's extra ``MToon Outline (<material>)`` material (skipped by the passes)."""
    if material is None:
        return False
    if material.name.startswith(OUTLINE_PREFIX):
        return True
    ext = getattr(material, "vrm_addon_extension", None)
    if ext is None:
        return False
    try:
        return bool(ext.mtoon1.is_outline_material)
    except AttributeError:
        return False


def is_outline_modifier(modifier) -> bool:
    """True for the add-on's Geometry Nodes outline modifier ``MToon Outline (<material>)``."""
    if modifier is None or modifier.type != "NODES":
        return False
    if modifier.name.startswith(OUTLINE_PREFIX):
        return True
    group = getattr(modifier, "node_group", None)
    return group is not None and group.name.startswith(OUTLINE_GEOMETRY_GROUP_PREFIX)


def group_inputs(node) -> dict:
    """{interface socket name: node input socket} for a group node, via the group's interface."""
    out = {}
    group = getattr(node, "node_tree", None)
    by_id = {s.identifier: s for s in node.inputs}
    interface = getattr(group, "interface", None) if group is not None else None
    if interface is not None:
        for item in interface.items_tree:
            if item.item_type == "SOCKET" and item.in_out == "INPUT":
                sock = by_id.get(item.identifier)
                if sock is not None:
                    out.setdefault(item.name, sock)
    for sock in node.inputs:   # older files / plain nodes: fall back to the socket's own name
        out.setdefault(sock.name, sock)
    return out


def _value(socks, name, default):
    sock = socks.get(name)
    if sock is None or not hasattr(sock, "default_value"):
        return default
    v = sock.default_value
    try:
        return tuple(float(x) for x in v)
    except TypeError:
        return v


def _f(socks, name, default):
    v = _value(socks, name, default)
    return float(v[0] if isinstance(v, tuple) else v)


def _i(socks, name, default):
    return int(round(_f(socks, name, default)))


def _rgb(socks, name, default):
    v = _value(socks, name, default)
    if not isinstance(v, tuple):
        v = (float(v),) * 3
    return tuple(v[:3])


def _group_with_prefix(tree, prefix):
    for node in tree.nodes:
        if node.type == "GROUP" and node.node_tree is not None and node.node_tree.name.startswith(prefix):
            return node
    return None


def _texture(tree, slot) -> TextureRef | None:
    name = TEXTURE_NODE_NAMES[slot]
    img_node = tree.nodes.get(f"Mtoon1{name}Texture.Image")
    image = getattr(img_node, "image", None) if img_node is not None else None
    if image is None:
        return None
    ref = TextureRef(image=image)
    uv = tree.nodes.get(f"Mtoon1{name}Texture.Uv")
    if uv is not None and getattr(uv, "node_tree", None) is not None:
        s = group_inputs(uv)
        ox, oy = _f(s, "UV Offset X", 0.0), _f(s, "UV Offset Y", 0.0)
        sx, sy = _f(s, "UV Scale X", 1.0), _f(s, "UV Scale Y", 1.0)
        # the add-on stores KHR_texture_transform (glTF, V down); convert to Blender UV space (V up)
        ref.uv_scale = (sx, sy)
        ref.uv_offset = (ox, 1.0 - sy - oy)
    return ref


def read(material, node=None) -> MToonParams:
    """MToonParams from the add-on's node layout (``node`` = its output group node)."""
    node = node or find_output_node(material)
    tree = material.node_tree
    s = group_inputs(node)
    lit = _rgb(s, "Lit Color", (1.0, 1.0, 1.0))
    alpha = _f(s, "Lit Color Alpha", 1.0)
    emissive = _rgb(s, "Emissive Factor", (0.0, 0.0, 0.0))
    strength = _f(s, "Emissive Strength", 1.0)
    p = MToonParams(
        base_color=lit + (alpha,),
        shade_color=_rgb(s, "Shade Color", (1.0, 1.0, 1.0)),
        shading_shift=_f(s, "Shading Shift", -0.2),
        shading_toony=_f(s, "Shading Toony", 0.9),
        gi_equalization=_f(s, "GI Equalization Factor", 0.9),
        emissive=tuple(c * strength for c in emissive),
        matcap_factor=_rgb(s, "MatCap Factor", (1.0, 1.0, 1.0)),
        rim_color=_rgb(s, "Parametric Rim Color", (0.0, 0.0, 0.0)),
        rim_fresnel_power=_f(s, "Parametric Rim Fresnel Power", 1.0),
        rim_lift=_f(s, "Parametric Rim Lift", 0.0),
        rim_lighting_mix=_f(s, "Rim LightingMix", 0.0),
        outline_width_mode=OUTLINE_MODES.get(_i(s, "Outline Width Mode", 0), "none"),
        outline_width=_f(s, "Outline Width", 0.0),
        outline_color=_rgb(s, "Outline Color", (0.0, 0.0, 0.0)),
        outline_lighting_mix=_f(s, "Outline LightingMix", 1.0),
        alpha_mode=ALPHA_MODES.get(_i(s, "Alpha Mode", 0), "OPAQUE"),
        alpha_cutoff=_f(s, "Alpha Cutoff", 0.5),
        double_sided=bool(_f(s, "Double Sided", 0.0)),
        transparent_with_zwrite=bool(_f(s, "Transparent With Z-Write", 0.0)),
        render_queue_offset=max(-9, min(9, _i(s, "Render Queue Offset Number", 0))),
        source="vrm_addon",
    )
    if "Double Sided" not in s:
        p.double_sided = not getattr(material, "use_backface_culling", True)

    textures = {}
    for slot in TEXTURE_NODE_NAMES:
        ref = _texture(tree, slot)
        if ref is not None:
            textures[slot] = ref
    normal_group = _group_with_prefix(tree, NORMAL_GROUP_PREFIX)
    if normal_group is not None:
        p.normal_scale = _f(group_inputs(normal_group), "Normal Map Texture Scale", 1.0)
    if "normal" in textures:
        textures["normal"].scale = p.normal_scale
    if "shading_shift" in textures:
        textures["shading_shift"].scale = _f(s, "Shading Shift Texture Scale", 1.0)
    p.textures = textures

    _read_uv_animation(material, tree, p)
    _prefer_rna(material, p)
    p.is_vrm_outline_material = is_outline_material(material) or bool(_f(s, "Is Outline", 0.0))
    return p


def _to_blender_uv_anim(p, sx, sy, rot):
    # mtoon-facts §2.7: Blender V-up form = standard CCW rotation about 0.5, scroll (sx, -sy)
    p.uv_scroll_x, p.uv_scroll_y, p.uv_rotation = float(sx), -float(sy), float(rot)


def _read_uv_animation(material, tree, p):
    node = _group_with_prefix(tree, UV_ANIMATION_GROUP_PREFIX)
    if node is not None:
        s = group_inputs(node)
        _to_blender_uv_anim(p, _f(s, "Translate X", 0.0), _f(s, "Translate Y", 0.0), _f(s, "Rotation", 0.0))


def _prefer_rna(material, p):
    """Where the add-on is installed, its RNA holds values that have no socket (UV animation speeds,
    cast/receive shadow are not in MToon 1.0)."""
    ext = getattr(material, "vrm_addon_extension", None)
    if ext is None:
        return
    try:
        mt = ext.mtoon1.extensions.vrmc_materials_mtoon
    except AttributeError:
        return
    try:
        _to_blender_uv_anim(p, mt.uv_animation_scroll_x_speed_factor, mt.uv_animation_scroll_y_speed_factor,
                            mt.uv_animation_rotation_speed_factor)
        p.outline_width_mode = str(mt.outline_width_mode) or p.outline_width_mode
        p.render_queue_offset = int(mt.render_queue_offset_number)
    except (AttributeError, TypeError, ValueError):
        pass
