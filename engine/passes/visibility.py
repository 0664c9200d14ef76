"""What the view layer being rendered shows of each drawn object (read from Blender per frame;
the pipeline only reads the sets it leaves in FrameData):

* holdout: Object > Visibility > Holdout, or a collection set to Holdout in this view layer
  (``Object.holdout_get(view_layer)``), and materials whose active output takes a Holdout shader:
  drawn with alpha 0 and RGB 0 while still occluding (as EEVEE and Cycles);
* not seen by the camera: Object > Visibility > Ray Visibility > Camera off
  (``Object.visible_camera``) or an indirect-only collection (``indirect_only_get``): not drawn
  in the colour pass, still a shadow caster (EEVEE: the body's shadow stays);
* Material > Settings > Pass Index for the IndexMA pass.

Excluded collections, hidden collections and disabled-in-render objects never reach the
depsgraph of the view layer, so they are not drawn at all."""
from __future__ import annotations


def _holdout_material(mat) -> bool:
    tree = getattr(mat, "node_tree", None) if getattr(mat, "use_nodes", True) else None
    if tree is None:
        return False
    outs = [n for n in tree.nodes if n.type == "OUTPUT_MATERIAL"]
    active = [n for n in outs if getattr(n, "is_active_output", False)] or outs
    for out in active[:1]:
        surface = out.inputs.get("Surface")
        if surface is not None and surface.is_linked:
            return surface.links[0].from_node.type == "HOLDOUT"
    return False


def fill_visibility(depsgraph, frame) -> None:
    """Set ``frame.holdout_objects``, ``holdout_materials``, ``camera_hidden`` and
    ``material_pass_index`` from the depsgraph's view layer (one look per drawn object and material)."""
    import bpy

    layer = depsgraph.view_layer
    names = {it.object_name for it in frame.items}
    holdout, hidden = set(), set()
    for name in names:
        ob = bpy.data.objects.get(name)
        if ob is None:
            continue
        try:
            if ob.holdout_get(view_layer=layer):
                holdout.add(name)
            if ob.indirect_only_get(view_layer=layer):
                hidden.add(name)
        except (RuntimeError, TypeError):        # not in this view layer (an instance's source)
            if getattr(ob, "is_holdout", False):
                holdout.add(name)
        if not getattr(ob, "visible_camera", True):
            hidden.add(name)
    mats, index = set(), {}
    for name in {it.material_name for it in frame.items if it.material_name}:
        mat = bpy.data.materials.get(name)
        if mat is None:
            continue
        index[name] = int(getattr(mat, "pass_index", 0))
        if _holdout_material(mat):
            mats.add(name)
    frame.holdout_objects = frozenset(holdout)
    frame.camera_hidden = frozenset(hidden)
    frame.holdout_materials = frozenset(mats)
    frame.material_pass_index = index
