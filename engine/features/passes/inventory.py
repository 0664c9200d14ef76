"""Nothing silent: the passes a view layer enables that Stylized does not write.

Every boolean ``use_pass_*`` switch Blender's view layer offers (its own and EEVEE's group:
``ViewLayer.eevee``), the view layer's AOVs and its light groups are read from the RNA, so a
pass a later Blender adds is named too, never skipped in silence.  Cycles' own group
(``ViewLayer.cycles``: denoising data, shadow catcher, volume passes) is Cycles' and shows only
under Cycles; it is not listed.  Switches Blender marks deprecated (EEVEE's Bloom) write nothing
in any engine and are left out.

``unwritten(view_layer, written)`` -> the labels of the enabled passes not in ``written`` (pass
names as ``render_passes.requested`` gives them), in RNA order, e.g. ``["Diffuse Color",
"AOV 'myaov'"]``; ``log_line`` words them once for a render's log.
"""
from __future__ import annotations

#: view-layer switch -> the pass name(s) Stylized writes for it (engine/gpu/passes/render_passes.py
#: and engine/features/passes/cryptomatte.py); a switch is written when all of its names are
WRITTEN_BY = {
    "use_pass_combined": ("Combined",),
    "use_pass_z": ("Depth",),
    "use_pass_normal": ("Normal",),
    "use_pass_mist": ("Mist",),
    "use_pass_position": ("Position",),
    "use_pass_diffuse_color": ("DiffCol",),
    "use_pass_emit": ("Emit",),
    "use_pass_vector": ("Vector",),
    "use_pass_ambient_occlusion": ("AO",),
    "use_pass_shadow": ("Shadow",),         # EEVEE's Shadow pass: the toon Shadow, RGB (render_passes)
    "use_pass_object_index": ("IndexOB",),
    "use_pass_material_index": ("IndexMA",),
    "use_pass_cryptomatte_object": ("CryptoObject",),
    "use_pass_cryptomatte_material": ("CryptoMaterial",),
    "use_pass_cryptomatte_asset": ("CryptoAsset",),
}
#: switches that are options of another pass, not passes
NOT_PASSES = frozenset(("use_pass_cryptomatte_accurate",))


def _switches(group):
    """(identifier, label) of ``group``'s boolean ``use_pass_*`` properties that are passes."""
    out = []
    for p in group.bl_rna.properties:
        ident = p.identifier
        if (not ident.startswith("use_pass_") or p.type != "BOOLEAN" or ident in NOT_PASSES
                or "deprecated" in (p.description or "").lower()):
            continue
        out.append((ident, p.name))
    return out


#: the label of Render > Motion Blur while it is on with one render sample: not applied (motion blur
#: spreads the anti-aliasing samples over the shutter: engine/features/passes/motion_blur.py)
MOTION_BLUR = "Motion Blur (render setting: needs Render Samples > 1, frames drawn sharp)"


def unwritten(view_layer, written, render=None) -> list:
    """Labels of the passes ``view_layer`` enables that are not among ``written`` (see above),
    and ``MOTION_BLUR`` when ``render`` (the scene's RenderSettings) has Motion Blur on and the
    scene renders one sample (Render Properties > Stylized > Render Samples)."""
    written = set(written) | {"Combined"}
    out = []
    for group, prefix in ((view_layer, ""), (getattr(view_layer, "eevee", None), "EEVEE ")):
        if group is None:
            continue
        for ident, label in _switches(group):
            if not getattr(group, ident, False):
                continue
            names = WRITTEN_BY.get(ident) if group is view_layer else None
            if names is None or not written.issuperset(names):
                out.append(prefix + label)
    for aov in getattr(view_layer, "aovs", ()) or ():
        if f"AOV:{aov.name}" not in written:            # (written: engine/features/passes/aov.py)
            out.append(f"AOV '{aov.name}'")
    for lg in getattr(view_layer, "lightgroups", ()) or ():
        out.append(f"Light Group '{lg.name}'")
    if render is not None and getattr(render, "use_motion_blur", False):
        st = getattr(getattr(render, "id_data", None), "stylized", None)
        if int(getattr(st, "render_samples", 1)) < 2:
            out.append(MOTION_BLUR)
    return out


def log_line(layer_name: str, labels) -> str:
    """The one log / Stats line for ``labels`` (empty string when there are none)."""
    if not labels:
        return ""
    return (f"view layer '{layer_name}': {len(labels)} enabled pass(es) not written by Stylized "
            f"(absent from the result and the file): " + ", ".join(labels))
