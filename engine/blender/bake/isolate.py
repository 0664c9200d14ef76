"""Isolation: Blender evaluating one action alone (shared with tools/check_deform.py), and the
values an action writes (saved and restored around a bake)."""
from __future__ import annotations

from ..importer import actions as _actions


def animated_ids() -> list:
    """Every ID with animation data whose actions or NLA tracks an isolation touches."""
    import bpy

    out = []
    for coll in (bpy.data.objects, bpy.data.shape_keys, bpy.data.meshes, bpy.data.armatures,
                 bpy.data.materials, bpy.data.scenes):
        for idb in coll:
            if getattr(idb, "animation_data", None) is not None:
                out.append(idb)
    return out


def save_animation() -> list:
    """[(id, action, slot, [(track, mute)])] of every animated ID (``restore_animation``)."""
    saved = []
    for idb in animated_ids():
        ad = idb.animation_data
        saved.append((idb, ad.action, getattr(ad, "action_slot", None),
                      [(tr, tr.mute) for tr in ad.nla_tracks]))
    return saved


def restore_animation(saved) -> None:
    """Put back what ``save_animation`` recorded; animation data created since (``isolate`` on an
    ID that had none) is removed again."""
    held = {idb.as_pointer() for idb, _a, _s, _t in saved}
    for idb in animated_ids():
        if idb.as_pointer() not in held:
            idb.animation_data_clear()
    for idb, action, slot, tracks in saved:
        ad = idb.animation_data
        if ad is None:
            continue
        if ad.action != action:
            ad.action = action
        if action is not None and slot is not None and getattr(ad, "action_slot", None) != slot:
            try:
                ad.action_slot = slot
            except Exception:
                pass
        for tr, mute in tracks:
            if tr.mute != mute:
                tr.mute = mute


def isolate(owner, action, slot=None, with_data: bool = False) -> None:
    """Unassign every action and mute every NLA track, then assign ``action`` (and ``slot``) to
    ``owner`` alone (``with_data``: its data's slot too, see ``_isolate_data_slot``)."""
    for idb in animated_ids():
        ad = idb.animation_data
        if ad.action is not None:
            ad.action = None
        for tr in ad.nla_tracks:
            tr.mute = True
    ad = owner.animation_data or owner.animation_data_create()
    ad.action = action
    if hasattr(ad, "action_slot"):
        if slot is None and getattr(ad, "action_slot", None) is None and len(action.slots):
            slot = action.slots[0]
        if slot is not None:
            try:
                ad.action_slot = slot
            except Exception:
                pass
    if with_data:
        _isolate_data_slot(owner, action)


def _isolate_data_slot(owner, action) -> None:
    """An armature's action can also key its data (the VRM Add-on's expression previews live on
    the armature data, in the action's ARMATURE slot): assign that slot to the data too, so the
    isolated evaluation plays the whole clip. Only where the data already has animation data
    (nothing is created on the user's data)."""
    data = getattr(owner, "data", None)
    dad = getattr(data, "animation_data", None)
    if dad is None or not hasattr(dad, "action_slot"):
        return
    slots = [s for s in getattr(action, "slots", ()) if s.target_id_type == "ARMATURE"]
    if not slots:
        return
    dad.action = action
    try:
        dad.action_slot = slots[0]
    except Exception:
        pass


# ------------------------------------------------------------------------------------------------
# values the action writes (saved and restored around a bake)
# ------------------------------------------------------------------------------------------------

def _split_path(path: str):
    """('container path', key): key is an attribute name or a ('["name"]') custom property."""
    if path.endswith('"]'):
        i = path.rfind('["')
        return path[:i], ("item", path[i + 2:-2].replace('\\"', '"').replace("\\\\", "\\"))
    i = path.rfind(".")
    return (path[:i], ("attr", path[i + 1:])) if i >= 0 else ("", ("attr", path))


def written_values(owner, action, slot) -> list:
    """[(container, key, value)] of every property the action's curves write on ``owner``."""
    out = []
    seen = set()
    for fc in _actions.slot_fcurves(action, slot):
        if fc.data_path in seen:
            continue
        seen.add(fc.data_path)
        base, (kind, key) = _split_path(fc.data_path)
        try:
            cont = owner.path_resolve(base) if base else owner
            val = cont[key] if kind == "item" else getattr(cont, key)
        except Exception:   # a path Blender cannot resolve writes nothing either
            continue
        if hasattr(val, "to_list"):
            val = val.to_list()
        elif not isinstance(val, (int, float, bool, str)) and hasattr(val, "__len__"):
            val = tuple(val)
        out.append((cont, kind, key, val))
    return out


def restore_values(written) -> None:
    for cont, kind, key, val in written:
        try:
            if kind == "item":
                cont[key] = val
            else:
                setattr(cont, key, val)
        except Exception:
            pass



# ------------------------------------------------------------------------------------------------
# what the bake does not need evaluated (issue 22: bake time)
# ------------------------------------------------------------------------------------------------

def _refs_of(ob) -> list:
    """Objects ``ob``'s evaluation reads: its parent, constraint targets (object and bone
    constraints), driver targets (objects, or the objects using a driven datablock)."""
    import bpy

    out = [ob.parent] if ob.parent is not None else []
    cons = list(ob.constraints)
    pose = getattr(ob, "pose", None)
    if pose is not None:
        for pb in pose.bones:
            cons.extend(pb.constraints)
    for c in cons:
        for name in ("target", "pole_target", "space_object"):
            out.append(getattr(c, name, None))
        for t in getattr(c, "targets", ()):
            out.append(getattr(t, "target", None))
    for idb in (ob, getattr(ob, "data", None)):
        ad = getattr(idb, "animation_data", None)
        if ad is None:
            continue
        for d in ad.drivers:
            for v in d.driver.variables:
                for t in v.targets:
                    tid = t.id
                    if tid is None:
                        continue
                    if isinstance(tid, bpy.types.Object):
                        out.append(tid)
                    else:       # a datablock (mesh, curve, shape keys): the objects using it
                        out.extend(o for o in bpy.data.objects
                                   if o.data == tid or getattr(o.data, "shape_keys", None) == tid)
    return [o for o in out if o is not None and isinstance(o, bpy.types.Object)]


def quiet_geometry(armature, scene) -> list:
    """Switch off (viewport) the modifiers of every object of ``scene`` that the armature's
    evaluation does not read (its parents, constraint and driver targets, transitively): a bake
    reads the armature only, and deforming a body is most of a frame's evaluation.  Returns what
    was switched off (``restore_geometry`` puts it back)."""
    need = {armature.as_pointer()}
    todo = [armature]
    while todo:                       # the dependency closure (a few objects)
        for o in _refs_of(todo.pop()):
            if o.as_pointer() not in need:
                need.add(o.as_pointer())
                todo.append(o)
    off = []
    for ob in scene.objects:
        if ob.as_pointer() in need:
            continue
        for m in getattr(ob, "modifiers", ()):
            if m.show_viewport:
                m.show_viewport = False
                off.append(m)
    return off


def restore_geometry(off) -> None:
    """Undo ``quiet_geometry``."""
    for m in off:
        try:
            m.show_viewport = True
        except ReferenceError:
            pass
