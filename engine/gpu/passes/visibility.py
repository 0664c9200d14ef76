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


class VisibilityCache:
    """A viewport session's last ``fill_visibility`` result, re-read only when visibility can have
    changed: a depsgraph update of an object, collection, material, world or scene / view layer
    (``note``, from ``StylizedSession.sync``), another view layer, or other objects or materials
    drawn. A final render reads it anew every frame (``fill(..., fresh=True)``)."""

    KINDS = ("Object", "Collection", "Material", "Scene", "ViewLayer", "World")

    def __init__(self):
        self.dirty = True
        self.key = None
        self.sets = None
        self.reads = 0             # how often fill_visibility ran (the test reads it)

    def note(self, updates) -> None:
        """Depsgraph updates (None: everything may have changed)."""
        if updates is None:
            self.dirty = True
            return
        import bpy

        kinds = tuple(getattr(bpy.types, k) for k in self.KINDS if hasattr(bpy.types, k))
        for u in updates:
            try:
                idb = getattr(u.id, "original", u.id)
            except ReferenceError:
                self.dirty = True
                return
            if isinstance(idb, kinds):
                self.dirty = True
                return

    def fill(self, depsgraph, frame, fresh: bool = False) -> None:
        key = (getattr(depsgraph.view_layer, "name", ""), frozenset(it.object_name for it in frame.items),
               frozenset(it.material_name for it in frame.items))
        if fresh or self.dirty or self.sets is None or key != self.key:
            fill_visibility(depsgraph, frame)
            self.reads += 1
            self.key, self.dirty = key, False
            self.sets = (frame.holdout_objects, frame.camera_hidden, frame.holdout_materials,
                         dict(frame.material_pass_index))
            return
        frame.holdout_objects, frame.camera_hidden, frame.holdout_materials, index = self.sets
        frame.material_pass_index = dict(index)
