"""AOVs (issue 36 item 2): the view layer's AOVs filled from the materials' *AOV Output* nodes.

Each AOV is a pass named as the AOV (COLOR: RGBA, VALUE: X, as EEVEE writes them).  A material's
AOV Output node whose *AOV Name* is the AOV gives its value: the *Color* input for a COLOR AOV,
*Value* for a VALUE AOV, read when it is a constant (unlinked, or linked from an RGB or Value
node).  What is linked to anything else (textures, maths, attributes) is not evaluated: the
material, node and AOV are named in the render log, and the AOV is 0 on that material.  A
material without such a node writes 0, the background 0 (EEVEE).

Per pixel: the anti-aliasing's coverage samples draw each object + material's key
(engine/features/passes/cryptomatte.py ``CryptoIds``); the AOV is the mean over the samples of
each key's material value (coverage-weighted, as EEVEE accumulates it).
"""
from __future__ import annotations

from typing import Any

import numpy as np

PREFIX = "AOV:"


def requested(view_layer) -> list:
    """(name, type) of the view layer's AOVs (``render_passes.requested`` lists them as
    "AOV:<name>")."""
    return [(a.name, a.type) for a in getattr(view_layer, "aovs", ()) or () if a.name]


def _aov_name(node) -> str:
    return getattr(node, "aov_name", None) or getattr(node, "name", "")


def _constant(socket) -> tuple[Any, Any]:
    """(the socket's value, None) when it is a constant (unlinked, or from an RGB / Value node), else
    (None, the node it comes from)."""
    if not socket.is_linked:
        return socket.default_value, None
    link = socket.links[0]
    src = link.from_node
    if src.type in ("RGB", "VALUE") and not link.is_muted:
        return link.from_socket.default_value, None
    return None, src


def material_values(material, aovs) -> tuple:
    """({aov name: value tuple (4 for COLOR, 1 for VALUE)}, [log lines]) of ``material``."""
    out, lines = {}, []
    tree = getattr(material, "node_tree", None) if material is not None else None
    if tree is None or material is None or not getattr(material, "use_nodes", True):
        return out, lines
    kinds = dict(aovs)
    for node in tree.nodes:
        if node.type != "OUTPUT_AOV" or node.mute:
            continue
        name = _aov_name(node)
        if name not in kinds or name in out:
            continue
        color = kinds[name] == "COLOR"
        socket = node.inputs["Color" if color else "Value"]
        value, src = _constant(socket)
        if value is None:
            lines.append(f"material '{material.name}': AOV Output node '{node.name}' (AOV '{name}'): its "
                         f"{socket.name} comes from '{src.name}', which Stylized does not evaluate: "
                         f"the AOV is 0 on this material")
            continue
        v = tuple(float(x) for x in value) if color else (float(value),)
        out[name] = (v + (1.0,))[:4] if color and len(v) == 3 else v
    return out, lines


def fill(ids, aovs, material_for) -> tuple:
    """({AOV name: (H, W, C) float32}, [log lines]) from ``ids`` (a ``CryptoIds`` holding the
    frame's sample id images); ``material_for``: material name -> bpy Material (or None)."""
    samples = ids.stacked()
    if samples is None:
        return {}, []
    mats = ids.names("Material")
    values, lines = {}, []
    for m in sorted({m for m in mats if m}):
        vals, ls = material_values(material_for(m), aovs)
        values[m] = vals
        lines += ls
    out = {}
    n, h, w = samples.shape
    flat = samples.reshape(n, -1)
    # pixels whose samples all see one key take its value; the mean over the samples runs on the
    # others (the edges: few) only
    mixed = np.flatnonzero(~ids.uniform().reshape(-1))
    for name, kind in aovs:
        c = 4 if kind == "COLOR" else 1
        lut = np.zeros((len(mats), c), np.float32)
        for k, m in enumerate(mats):
            v = values.get(m, {}).get(name) if m else None
            if v is not None:
                lut[k] = v
        img = lut[flat[0]]
        if mixed.size:
            img[mixed] = lut[flat[:, mixed]].sum(0) / np.float32(n)
        out[PREFIX + name] = img.reshape(h, w, c)
    return out, lines
