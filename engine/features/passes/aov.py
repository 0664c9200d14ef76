"""AOVs (issue 36 item 2): the view layer's AOVs filled from the materials' *AOV Output* nodes.

Each AOV is a pass named as the AOV (COLOR: RGBA, VALUE: X, as EEVEE writes them).  A material's
AOV Output node whose *AOV Name* is the AOV gives its value: the *Color* input for a COLOR AOV,
*Value* for a VALUE AOV.  ``material_values`` reads each input as:

* a constant: unlinked, linked from an RGB or Value node, or a colour path the material reader
  (engine/features/materials/node_tree.py ``Reader.color``) folds to a constant (Mix of
  constants, reroutes);
* drawn (``Drawn``): what the reader evaluates per pixel, factor x Image Texture (its UV map,
  Mapping node) x Color Attribute; a VALUE AOV takes such a colour through Blender's implicit
  colour -> float conversion (the luminance, ``LUMINANCE``: GPU materials' ``float_from_vec4``
  with the scene-linear Rec.709 coefficients), or an Image Texture's / Color Attribute's *Alpha*
  output (x constant factors through Math Multiply);
* anything else (a Math node, a procedural texture, an alpha clip): not evaluated; the
  material, node and AOV are named in the render log, and the AOV is 0 on that material.

A material without such a node writes 0, the background 0 (EEVEE).

Per pixel, constants: the anti-aliasing's coverage samples draw each object + material's key
(engine/features/passes/cryptomatte.py ``CryptoIds``); the constant part is the mean over the
samples of each key's material value (coverage-weighted, as EEVEE accumulates it).  Drawn inputs:
engine/gpu/passes/aov_draw.py draws the frame's surfaces once more per AOV that has any, each
material with its input as a material block (the image in the base colour slot; 0 for the
materials whose input is a constant or absent), and the render passes' resolve averages that
image over the same coverage samples as Diffuse Color (engine/gpu/passes/render_passes.py
``averaged_sources``).  The AOV is the sum of the two parts.  Nothing of this runs without AOVs,
and an AOV whose inputs are all constants draws nothing more.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

PREFIX = "AOV:"
#: the resolved drawn part of an AOV in a frame's passes (summed into "AOV:<name>" by ``fill``)
DRAWN_PREFIX = "AOVGPU:"
#: Blender's implicit colour -> float conversion in GPU materials (``float_from_vec4``: a dot
#: with the colour management's luminance coefficients; scene-linear Rec.709 by default)
LUMINANCE = (0.2126, 0.7152, 0.0722)


@dataclass(frozen=True)
class Drawn:
    """An AOV input drawn per pixel: ``factor`` (RGBA) x the image of ``texture`` (a TextureRef;
    None: no image) x the colour attribute (``vertex``: its RGB, ``vertex_alpha``: its alpha).
    ``mode``: "COLOR" (RGB, alpha 1), "LUMINANCE" (the colour's luminance), "ALPHA" (the alpha
    channel)."""
    factor: tuple
    texture: Any = None
    vertex: bool = False
    vertex_alpha: bool = False
    mode: str = "COLOR"


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


def _as(value, color: bool) -> tuple:
    """A constant as the AOV's value: RGBA for COLOR (a float x 3, alpha 1), one float for VALUE
    (a colour's luminance)."""
    try:
        v = tuple(float(x) for x in value)
    except TypeError:
        v = (float(value),)
    if color:
        return (v * 3)[:3] + (1.0,) if len(v) == 1 else (v + (1.0,))[:4]
    return v if len(v) == 1 else (float(np.dot(v[:3], LUMINANCE)),)


def _evaluate(material, socket, color: bool) -> tuple:
    """(constant value tuple or None, Drawn or None, [what the reader could not evaluate],
    [approximations]) of an AOV Output node's input."""
    from ..materials.node_tree import Reader

    reader = Reader(material)
    src = reader.link(socket)
    if src is None:                          # unlinked, or through muted nodes / reroutes to nothing
        return _as(socket.default_value, color), None, [], []
    node, out = src
    if not color and (node.type == "MATH" or out.name == "Alpha"):
        a = reader.alpha(socket)
        failed = list(reader.unmapped) + (["an alpha clip"] if a.cutoff is not None else [])
        if failed:
            return None, None, failed, []
        if a.image is None and not a.vertex:
            return (float(a.factor),), None, [], []
        ref = reader.tex_ref(a.image) if a.image is not None else None
        return None, Drawn((0.0, 0.0, 0.0, float(a.factor)), ref, False, a.vertex, "ALPHA"), [], reader.unmapped
    term = reader.color(socket)
    if reader.unmapped:
        return None, None, list(reader.unmapped), []
    if term.image is None and not term.vertex:
        return _as(term.factor, color), None, [], []
    ref = reader.tex_ref(term.image) if term.image is not None else None
    if term.vertex:
        reader._check_vertex_colors(term.vertex_layer)     # (a layer other than the drawn one: noted)
    mode = "COLOR" if color else "LUMINANCE"
    return None, Drawn(tuple(float(c) for c in term.factor) + (1.0,), ref, term.vertex, False, mode), [], \
        reader.unmapped


def _nodes(notes) -> str:
    """The nodes the material reader's ``notes`` name ("node 'Noise Texture' (Noise Texture)"),
    or the notes themselves."""
    found = [m.group(1) for m in (re.match(r"material '.*?': (node '.*?' \(.*?\))", n) for n in notes) if m]
    return ", ".join(dict.fromkeys(found)) or "; ".join(notes)


def material_values(material, aovs) -> tuple:
    """({aov name: value tuple (4 for COLOR, 1 for VALUE) or ``Drawn``}, [log lines]) of
    ``material``."""
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
        if value is not None:
            out[name] = _as(value, color)
            continue
        value, drawn, failed, approx = _evaluate(material, socket, color)
        where = f"material '{material.name}': AOV Output node '{node.name}' (AOV '{name}')"
        if failed:
            nodes = _nodes(failed)
            inner = "" if nodes == f"node '{src.name}' ({src.bl_label})" else f" (not evaluated: {nodes})"
            lines.append(f"{where}: its {socket.name} comes from '{src.name}', which Stylized does not "
                         f"evaluate: the AOV is 0 on this material{inner}")
            continue
        lines += [f"{msg} (AOV '{name}')" for msg in approx]
        out[name] = drawn if drawn is not None else value
    return out, lines


def drawn_inputs(aovs, material_names, material_for) -> dict:
    """{AOV name: {material name: Drawn}} of the AOVs with inputs drawn per pixel, for the
    materials ``material_names`` (the frame's); ``material_for``: material name -> bpy Material
    (or None).  Empty when every input is a constant.  (The log lines come with ``fill``.)"""
    out: dict = {}
    for m in sorted({m for m in material_names if m}):
        for name, v in material_values(material_for(m), aovs)[0].items():
            if isinstance(v, Drawn):
                out.setdefault(name, {})[m] = v
    return out


def fill(ids, aovs, material_for, drawn=None) -> tuple:
    """({AOV name: (H, W, C) float32}, [log lines]) from ``ids`` (a ``CryptoIds`` holding the
    frame's sample id images); ``material_for``: material name -> bpy Material (or None);
    ``drawn``: {DRAWN_PREFIX + AOV name: (H, W, C)} the resolved drawn parts, added (their
    inputs' log lines came with ``drawn_inputs``)."""
    samples = ids.stacked()
    if samples is None:
        return {}, []
    drawn = drawn or {}
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
            if v is not None and not isinstance(v, Drawn):
                lut[k] = v
        img = lut[flat[0]]
        if mixed.size:
            img[mixed] = lut[flat[:, mixed]].sum(0) / np.float32(n)
        img = img.reshape(h, w, c)
        part = drawn.get(DRAWN_PREFIX + name)
        if part is not None:
            img = img + np.asarray(part, np.float32)[..., :c]
        out[PREFIX + name] = img
    return out, lines
