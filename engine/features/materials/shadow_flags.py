"""Per-material shadow casting and receiving, read where Blender 5.0 and the VRM Add-on keep them.

Casting.  Blender 5.0 materials have no cast-shadow switch (``shadow_method`` went away with EEVEE
Legacy); a material stops casting in EEVEE when its *Transparent Shadows* option
(``use_transparent_shadow``, on by default) is on and what a shadow ray sees of its surface is a
Transparent BSDF.  That is the layout Blender's own versioning inserts for old "Shadow Mode: None"
materials (Mix Shader "Disable Shadow": Light Path *Is Shadow Ray* -> factor, the surface in slot
1, a Transparent BSDF in slot 2), and also what the glTF importer's unlit layout does (Light Path
*Is Camera Ray*: Transparent BSDF for every other ray).  Measured in EEVEE 5.0: both cast no
shadow with transparent shadows on, and cast with them off.  ``casts_shadow`` evaluates the
active output's surface for a shadow ray (Is Shadow Ray = 1, every other "Is ... Ray" = 0,
constant factors 0 / 1) through reroutes and muted nodes.

Receiving.  MToon 1.0 has no receive flag; MToon 0.x had ``_ReceiveShadowRate`` (shadow strength,
0..1), which the VRM Add-on keeps as ``vrm_addon_extension.mtoon1.mtoon0_receive_shadow_rate``
(read through its RNA when the add-on is installed, else from the stored ID properties).
"""
from __future__ import annotations

MAX_DEPTH = 32


def _shadow_ray_value(output_name: str):
    """The Light Path output's value on a shadow ray, or None when it is not a ray-type flag."""
    if output_name == "Is Shadow Ray":
        return 1.0
    if output_name.startswith("Is ") and output_name.endswith(" Ray"):
        return 0.0
    return None


def shadow_ray_surface(material):
    """The shader node a shadow ray sees on ``material`` (None: unknown or none)."""
    from .node_tree import Reader

    if getattr(material, "node_tree", None) is None:
        return None
    r = Reader(material)
    out = r.output_node()
    if out is None:
        return None
    socket = out.inputs.get("Surface")
    for _ in range(MAX_DEPTH):
        src = r.link(socket) if socket is not None else None
        if src is None:
            return None
        node, _out = src
        if node.type != "MIX_SHADER":
            return node
        fac = node.inputs[0]
        fsrc = r.link(fac)
        if fsrc is not None:
            if fsrc[0].type != "LIGHT_PATH":
                return node                        # a factor we cannot evaluate: a mixed surface
            f = _shadow_ray_value(fsrc[1].name)
            if f is None:
                return node
        else:
            f = float(fac.default_value)
        if f <= 0.0:
            socket = node.inputs[1]
        elif f >= 1.0:
            socket = node.inputs[2]
        else:
            return node                            # partly transparent at most: casts
    return None


def casts_shadow(material) -> bool:
    """Whether ``material`` casts a shadow in EEVEE (see the module notes)."""
    if material is None:
        return True
    if not getattr(material, "use_transparent_shadow", True):
        return True                                # opaque shadows: whatever the surface
    node = shadow_ray_surface(material)
    return not (node is not None and node.type == "BSDF_TRANSPARENT")


def vrm_receive_shadow_rate(material):
    """The VRM Add-on's MToon 0.x receive-shadow rate (0..1) of ``material``, or None."""
    ext = getattr(material, "vrm_addon_extension", None)
    if ext is not None:
        try:
            return min(max(float(ext.mtoon1.mtoon0_receive_shadow_rate), 0.0), 1.0)
        except (AttributeError, TypeError, ValueError):
            pass
    try:
        raw = material.get("vrm_addon_extension")
        mt = raw.get("mtoon1") if raw is not None else None
        v = mt.get("mtoon0_receive_shadow_rate") if mt is not None else None
    except (AttributeError, TypeError):
        return None
    if v is None:
        return None
    try:
        return min(max(float(v), 0.0), 1.0)
    except (TypeError, ValueError):
        return None
