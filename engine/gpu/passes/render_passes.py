"""Render passes: declared in ``RenderEngine.update_render_passes`` under Blender's names, so the
compositor's Render Layers node finds them, and filled after the frame from the pipeline's
targets (numpy over whole images; nothing here loops over pixels or objects per pixel).

=========  ========  =====================================================================
pass       channels  what (the same values EEVEE / Cycles write)
=========  ========  =====================================================================
Combined   RGBA      the frame, premultiplied; alpha 0 where the transparent film is empty
Depth      Z         view-space depth along the camera axis; 1e10 where nothing is drawn (EEVEE)
Normal     XYZ       world-space shading normal; 0 on the background
Mist       Z         the world's Mist Pass settings (start, depth, falloff) over the distance to
                     the camera (along the axis for an orthographic camera); 1 on the background
Position   XYZ       world-space position of the front-most surface (the centre sample, from the
                     depth buffer); 0 on the background (EEVEE)
AO         RGB       screen-space ambient occlusion of the centre sample within the scene's AO
                     distance (engine/core/compositing/ssao.py; 1 = open); 0 on the background
IndexOB    X         Object > Relations > Pass Index of the front-most object (0: background)
IndexMA    X         Material > Settings > Pass Index of the front-most surface
Outline    RGBA      the MToon outline's colour x its coverage, and the coverage (premultiplied)
Shadow     X         the sun's shadow received by the front-most surface (1 = lit, 0 = shadow;
                     1 on the background); RGB, the value in each, with Blender's own Shadow
                     switch (``use_pass_shadow``: EEVEE's name and layout)
Shade      X         MToon's lit/shade ramp before the shadow (1 = lit colour, 0 = shade colour)
Rim        RGB       MToon's rim term (rim colour, matcap, rim lighting) added to the colour
DiffCol    RGB       Diffuse Color: the surface's base colour (texture x factor) as the material
                     reader resolves it; 0 on the background, an unlit surface and outlines
Emit       RGB       Emission: the emissive colour (texture x factor; an unlit surface's colour)
Vector     XYZW      motion to the previous / next frame in pixels, EEVEE's layout (written by
                     engine/features/passes/vector.py from the exact state at frame -1 and +1)
(an AOV)   RGBA, X   a view layer AOV (COLOR, VALUE), named as it is: the materials' AOV Output
                     input (engine/features/passes/aov.py): constants from the coverage samples'
                     keys, image textures / colour attributes drawn per pixel (aov_draw.py) and
                     averaged here (``averaged_sources``' ``extra``); 0 on the background
=========  ========  =====================================================================

With Render Samples > 1, Normal, Mist, the toon passes and the AOVs are averaged over the samples
as the Combined is (``averaged_sources`` / ``apply_averaged``, resolved by
engine/gpu/passes/samples.py); Depth and the index passes keep the centre sample's value.

The toon passes (Outline, Shadow, Shade, Rim) are switched on per view layer under
*View Layer > Passes > Stylized*; Depth, Normal, Mist and the index passes use Blender's own
view-layer switches.  The Outline, Shadow, Shade, Rim, IndexMA (and, where a BLEND material is
drawn, IndexOB and Normal) passes need more from the GPU (two extra targets written by SPEC_PASSES shader
variants); with none of them enabled the frame draws exactly as without passes.

BLEND (alpha-blended) surfaces are composited into the toon passes as into the Combined (each
value x alpha over what lies behind x (1 - alpha)); the Normal and index passes take a BLEND
surface where its alpha reaches the view layer's *Alpha Threshold*, else what lies behind it
(pipeline.py ``_blend_into_passes``). Cycles' index passes come from its first sample's camera
path, which stops at a surface at least that opaque and passes a thinner one with probability
1 - alpha: at the default threshold 0.5 this is its likeliest result.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.compositing import cryptomatte, ssao

#: name -> (channels, channel ids, type, view layer switch (None: ours, ``stylized_passes``))
PASSES = {
    "Depth": (1, "Z", "VALUE", "use_pass_z"),
    "Normal": (3, "XYZ", "VECTOR", "use_pass_normal"),
    "Mist": (1, "Z", "VALUE", "use_pass_mist"),
    "Position": (3, "XYZ", "VECTOR", "use_pass_position"),
    "AO": (3, "RGB", "COLOR", "use_pass_ambient_occlusion"),
    "IndexOB": (1, "X", "VALUE", "use_pass_object_index"),
    "IndexMA": (1, "X", "VALUE", "use_pass_material_index"),
    "DiffCol": (3, "RGB", "COLOR", "use_pass_diffuse_color"),
    "Emit": (3, "RGB", "COLOR", "use_pass_emit"),
    "Vector": (4, "XYZW", "VECTOR", "use_pass_vector"),
    "Outline": (4, "RGBA", "COLOR", None),
    "Shadow": (1, "X", "VALUE", None),
    "Shade": (1, "X", "VALUE", None),
    "Rim": (3, "RGB", "COLOR", None),
}
TOON = ("Outline", "Shadow", "Shade", "Rim")
GPU_PASSES = frozenset(TOON + ("IndexMA", "DiffCol", "Emit"))
BLEND_PASSES = frozenset(("IndexOB", "Normal"))    # drawn by the GPU too where BLEND surfaces are
#: False: the AO pass from engine/core/compositing/ssao.py in numpy (the reference), not the GPU
AO_ON_GPU = True
BACKGROUND_DEPTH = 1e10          # what EEVEE writes to Depth where nothing is drawn
MIST_EXPONENT = {"QUADRATIC": 2.0, "LINEAR": 1.0, "INVERSE_QUADRATIC": 0.5}


def blender_name(name: str) -> str:
    """The name Blender gives pass ``name`` in results and files: the index passes are
    "Object Index" / "Material Index" since Blender 5.0 ("IndexOB" / "IndexMA" in 4.5), Diffuse
    Color, Emission and AO "Diffuse Color" / "Emission" / "Ambient Occlusion" (DiffCol, Emit, AO)."""
    if name in NEW_NAMES:
        import bpy

        if bpy.app.version >= (5, 0, 0):
            return NEW_NAMES[name]
    if name.startswith("AOV:"):
        return name[4:]
    return name


#: Blender 5.0's names of the passes 4.5 calls IndexOB, IndexMA, DiffCol, Emit
NEW_NAMES = {"IndexOB": "Object Index", "IndexMA": "Material Index", "DiffCol": "Diffuse Color",
             "Emit": "Emission", "AO": "Ambient Occlusion"}


def requested(view_layer) -> tuple:
    """The passes (besides Combined) ``view_layer`` asks for, in PASSES order, then the
    Cryptomatte types ("CryptoObject", "CryptoMaterial", "CryptoAsset": written as ranked layers,
    engine/core/compositing/cryptomatte.py), then the AOVs ("AOV:<name>": a pass named as the
    AOV, engine/features/passes/aov.py)."""
    toon = getattr(view_layer, "stylized_passes", None)
    out = []
    for name, (_, _, _, flag) in PASSES.items():
        on = getattr(view_layer, flag, False) if flag else getattr(toon, "use_" + name.lower(), False)
        on = on or (name == "Shadow" and eevee_shadow(view_layer))
        if on:
            out.append(name)
    for kind in cryptomatte.TYPES:
        if getattr(view_layer, "use_pass_cryptomatte_" + kind.lower(), False):
            out.append("Crypto" + kind)
    out += ["AOV:" + a.name for a in getattr(view_layer, "aovs", ()) or () if a.name]
    return tuple(out)


def register(engine, scene, view_layer) -> None:
    """``update_render_passes``: Combined and every requested pass, under Blender's names
    (Cryptomatte: its ranked layers, RGBA as EEVEE names them, lower case)."""
    engine.register_pass(scene, view_layer, "Combined", 4, "RGBA", "COLOR")
    levels = int(getattr(view_layer, "pass_cryptomatte_depth", 6))
    for name in requested(view_layer):
        if name.startswith("Crypto"):
            for layer in cryptomatte.pass_names(name[len("Crypto"):], levels):
                engine.register_pass(scene, view_layer, layer, 4, "rgba", "COLOR")
            continue
        if name.startswith("AOV:"):           # the view layer's AOVs, as EEVEE names them
            kinds = {a.name: a.type for a in view_layer.aovs}
            if kinds.get(name[4:]) == "VALUE":
                engine.register_pass(scene, view_layer, name[4:], 1, "X", "VALUE")
            else:
                engine.register_pass(scene, view_layer, name[4:], 4, "RGBA", "COLOR")
            continue
        ch, ids, kind, _ = PASSES[name]
        if name == "Shadow" and eevee_shadow(view_layer):
            ch, ids, kind = EEVEE_SHADOW
        engine.register_pass(scene, view_layer, blender_name(name), ch, ids, kind)


#: Blender's own Shadow switch (``ViewLayer.use_pass_shadow``) writes the toon Shadow pass in
#: EEVEE's layout: "Shadow", RGB (the value in each channel), 1 = lit
EEVEE_SHADOW = (3, "RGB", "COLOR")


def eevee_shadow(view_layer) -> bool:
    """Whether Blender's Shadow switch is on (the toon Shadow pass then written as EEVEE's)."""
    return bool(getattr(view_layer, "use_pass_shadow", False))


def to_channels(image: np.ndarray, channels: int) -> np.ndarray:
    """``image`` (H, W, C) with ``channels`` channels: a one-channel pass repeated (the Shadow
    pass in EEVEE's RGB layout), else as it is."""
    if image.shape[-1] == 1 and channels > 1:
        return np.repeat(image, channels, -1)
    return image


def needs_gpu(names, materials=None) -> bool:
    """Whether the passes ``names`` need the forward pass's extra targets; the Normal and index
    passes only when a BLEND material (of ``materials``: name -> MToonParams) is drawn."""
    if GPU_PASSES.intersection(names):
        return True
    return bool(BLEND_PASSES.intersection(names)) and any(
        getattr(m, "alpha_mode", "") == "BLEND" for m in (materials or {}).values())


def _view_points(projection, is_ortho, depth):
    """(view z (negative in front), x, y) of every pixel from the depth buffer (0..1)."""
    p = np.asarray(projection, np.float64)
    h, w = depth.shape
    ndc_z = depth.astype(np.float64) * 2.0 - 1.0
    xs = (np.arange(w) + 0.5) / w * 2.0 - 1.0
    ys = (np.arange(h) + 0.5) / h * 2.0 - 1.0
    if is_ortho:
        z = (ndc_z - p[2, 3]) / p[2, 2]
        x = (xs[None, :] - p[0, 3]) / p[0, 0] + 0.0 * z
        y = (ys[:, None] - p[1, 3]) / p[1, 1] + 0.0 * z
    else:
        z = -p[2, 3] / (ndc_z + p[2, 2])
        x = -z * (xs[None, :] + p[0, 2]) / p[0, 0]
        y = -z * (ys[:, None] + p[1, 2]) / p[1, 1]
    return z, x, y


def ao_distance(scene, layer=None) -> float:
    """The AO distance EEVEE's Ambient Occlusion pass uses: the view layer's (Blender 5:
    ``ViewLayer.eevee.ambient_occlusion_distance``), else the scene's (4.5: ``gtao_distance``)."""
    for owner, attr in ((getattr(layer, "eevee", None), "ambient_occlusion_distance"),
                        (getattr(scene, "eevee", None), "gtao_distance")):
        if owner is not None and hasattr(owner, attr):
            return float(getattr(owner, attr))
    return 0.2


def mist_settings(scene):
    """(start, depth, exponent) of the scene world's Mist Pass (EEVEE's film mist)."""
    world = scene.world
    ms = getattr(world, "mist_settings", None)
    if ms is None:
        return 5.0, 25.0, 2.0
    return float(ms.start), max(float(ms.depth), 1e-9), MIST_EXPONENT.get(ms.falloff, 2.0)


def read(pipeline, frame, names, scene, object_pass_index, view_layer=None) -> dict:
    """The requested passes of the centre sample the pipeline just drew that are not averaged
    over the samples (Depth, Position, AO, the index passes), as (H, W, C) float32 arrays
    (bottom row first, as Blender's render result); the averaged ones (``AVERAGED``) come from
    ``averaged_sources`` / ``apply_averaged``.
    ``object_pass_index``: object id (RenderItem.object_id) -> Pass Index."""
    from ..util import texture_to_numpy

    s = frame.settings
    w, h = s.width, s.height
    out = {}
    if not names:
        return out

    read_back: dict = {}     # the centre sample's targets, read once, by the first pass that needs them

    def aux() -> np.ndarray:
        """(H, W, 4) the aux target: normal xyz, object id."""
        if "aux" not in read_back:
            read_back["aux"] = texture_to_numpy(pipeline.last_aux, w, h)
        return read_back["aux"]

    def view() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(H, W) the background mask and view z, x, y of every pixel, from the depth."""
        if "view" not in read_back:
            depth = texture_to_numpy(pipeline._depth, w, h, channels=1)[..., 0]
            z, x, y = _view_points(frame.camera.projection, frame.camera.is_ortho, depth)
            read_back["view"] = (depth >= 1.0, z, x, y)
        return read_back["view"]

    if "Depth" in names:
        empty, z, _x, _y = view()
        out["Depth"] = np.where(empty, BACKGROUND_DEPTH, -z).astype(np.float32)[..., None]
    if "Position" in names:
        empty, z, x, y = view()
        inv = np.linalg.inv(np.asarray(frame.camera.view, np.float64))
        p = (x[..., None] * inv[:3, 0] + y[..., None] * inv[:3, 1] + z[..., None] * inv[:3, 2] + inv[:3, 3])
        out["Position"] = np.where(empty[..., None], 0.0, p).astype(np.float32)
    if "AO" in names:
        dist = ao_distance(scene, view_layer)
        if AO_ON_GPU:
            tex = pipeline.ambient_occlusion.execute(frame, pipeline.last_aux, pipeline._depth, dist)
            out["AO"] = np.ascontiguousarray(texture_to_numpy(tex, w, h)[..., :3])
        else:                   # the plain numpy formula (tests compare the GPU pass with it)
            empty, z, x, y = view()
            rot = np.asarray(frame.camera.view, np.float64)[:3, :3]
            nv = aux()[..., :3] @ rot.T.astype(np.float32)
            ao = ssao.ambient_occlusion(z, x + 0.0 * z, y + 0.0 * z, nv, empty, frame.camera.projection, dist)
            out["AO"] = np.repeat(ao[..., None], 3, -1)
    if "IndexOB" in names:
        ids = np.rint(aux()[..., 3]).astype(np.int64)
        lut = np.zeros(max(ids.max(initial=0), max(object_pass_index, default=0)) + 1, np.float32)
        if object_pass_index:
            k = np.fromiter(object_pass_index.keys(), np.int64)
            lut[k] = np.fromiter(object_pass_index.values(), np.float32)
        out["IndexOB"] = lut[np.clip(ids, 0, None)][..., None]
    if "IndexMA" in names and pipeline.pass_targets is not None:
        out["IndexMA"] = texture_to_numpy(pipeline.pass_targets[0], w, h)[..., 2:3].copy()
    return out


#: the passes averaged over the anti-aliasing samples as the colour is (EEVEE accumulates them);
#: Depth and the index passes keep the centre sample's value
AVERAGED = ("Normal", "Mist", "Outline", "Shadow", "Shade", "Rim", "DiffCol", "Emit")

#: GLSL: Normal xyz and the Mist pass (w) at each pixel, the Mist from the depth buffer (as
#: ``_view_points`` computes the view point in numpy): proj_a = (p00, p11, p02, p12), proj_b =
#: (p22, p23, p03, p13), mist = (start, depth, exponent, orthographic); 1 on the background
_NORMAL_MIST_GLSL = """
void main()
{
  ivec2 q = ivec2(gl_FragCoord.xy);
  float d = texelFetch(depth, q, 0).r;
  vec2 size = vec2(textureSize(depth, 0));
  vec2 ndc = (vec2(q) + 0.5) / size * 2.0 - 1.0;
  float nz = d * 2.0 - 1.0;
  float dist;
  if (mist.w > 0.5) {
    dist = abs((nz - proj_b.y) / proj_b.x);
  }
  else {
    float z = -proj_b.y / (nz + proj_b.x);
    dist = length(vec3(-z * (ndc.x + proj_a.z) / proj_a.x, -z * (ndc.y + proj_a.w) / proj_a.y, z));
  }
  float m = pow(clamp((dist - mist.x) / mist.y, 0.0, 1.0), mist.z);
  frag_color = vec4(texelFetch(aux, q, 0).xyz, (d >= 1.0) ? 1.0 : m);
}
"""


def averaged_sources(pipeline, frame, names, scene, extra=()):
    """The passes among ``names`` to average over the samples, as a ``pass_resolve.Sources``
    (drawn by engine/gpu/passes/samples.py with the colour's coverage samples, packed into as
    few outputs as their channels need; ``Sources.layout`` says where each is); None when none
    is requested.  ``extra``: more passes ((name, channels, GLSL expression at ``q``, sampler
    name, texture), ...: the AOVs' drawn inputs, engine/gpu/passes/aov_draw.py), each taken
    while the resolve's outputs and samplers have room (``layout`` leaves out the others)."""
    from .pass_resolve import Sources, pack

    names = set(names)
    samplers, items = {}, []
    pre: dict[str, Any] = {}        # Sources' pre_body / pre_samplers / pre_floats
    if "Mist" in names:             # Normal and Mist per pixel once (a pre-pass), then resolved
        p = np.asarray(frame.camera.projection, np.float64)
        start, dist, exponent = mist_settings(scene)
        pre = dict(pre_body=_NORMAL_MIST_GLSL,
                   pre_samplers=(("aux", pipeline.last_aux), ("depth", pipeline._depth)),
                   pre_floats=(("proj_a", (p[0, 0], p[1, 1], p[0, 2], p[1, 2])),
                               ("proj_b", (p[2, 2], p[2, 3], p[0, 3], p[1, 3])),
                               ("mist", (start, dist, exponent, 1.0 if frame.camera.is_ortho else 0.0))))
        items.append(("Mist", 1, "texelFetch(pre, q, 0).w"))
        if "Normal" in names:
            items.append(("Normal", 3, "texelFetch(pre, q, 0).xyz"))
    elif "Normal" in names:
        samplers["aux"] = pipeline.last_aux
        items.append(("Normal", 3, "texelFetch(aux, q, 0).xyz"))
    targets = pipeline.pass_targets
    if targets is not None:
        if {"Shadow", "Shade", "Outline"} & names:
            samplers["pass0"] = targets[0]
        for name, c in (("Shadow", "r"), ("Shade", "g")):
            if name in names:
                items.append((name, 1, f"texelFetch(pass0, q, 0).{c}"))
        for slot, name, k in (("pass1", "Rim", 1), ("pass2", "DiffCol", 2), ("pass3", "Emit", 3)):
            if name in names:
                samplers[slot] = targets[k]
                items.append((name, 3, f"texelFetch({slot}, q, 0).rgb"))
        if "Outline" in names:
            samplers["color"] = pipeline.last_color
            items.append(("Outline", 4, "vec4(texelFetch(color, q, 0).rgb, 1.0) * texelFetch(pass0, q, 0).a"))
    room = MAX_RESOLVE_SAMPLERS - len(samplers) - (1 if pre else 0)
    for name, ch, expr, sampler, tex in extra:
        try:
            pack(items + [(name, ch, expr)], MAX_AVERAGED_SLOTS)
        except ValueError:
            continue
        if room < 1:
            break
        room -= 1
        samplers[sampler] = tex
        items.append((name, ch, expr))
    if not items:
        return None
    outputs, layout = pack(items, MAX_AVERAGED_SLOTS)
    return Sources(samplers=tuple(samplers.items()), outputs=outputs, layout=layout, **pre)


#: outputs of the averaged passes' resolve: Blender's framebuffer limit less the colour's
MAX_AVERAGED_SLOTS = 5
#: the resolve's samplers besides the colour and the coverage samples' ids (samples.BATCH + 1):
#: 16 in all, the least a GPU gives a fragment shader
MAX_RESOLVE_SAMPLERS = 16 - 1 - 8


def apply_averaged(out: dict, averaged: dict, layout, width: int, height: int) -> None:
    """Put the averaged passes into ``out`` (``averaged``: slot -> texture, from the resolve of
    ``averaged_sources``; ``layout``: its ``Sources.layout``)."""
    from ..util import texture_to_numpy

    images = {slot: texture_to_numpy(tex, width, height) for slot, tex in averaged.items()}
    for name, slot, c0, ch in layout:
        if slot in images:
            out[name] = np.ascontiguousarray(images[slot][..., c0:c0 + ch])
