"""Actions assigned to (or made for) the imported objects -> AnimationClipAsset, through the
AssetCache (cache.py) when one is given."""
from __future__ import annotations

from typing import Dict

from ...core.assets import AssetError, SceneAsset
from . import actions as _actions
from .nodes import NodeBuilder, bone_targets, object_target


def compatible_clips(scene_asset: SceneAsset, object_name: str) -> list:
    return [c for c in scene_asset.animations if c.target_object == object_name]


def _bone_targets(nb: NodeBuilder, arm_name: str) -> Dict[str, "_actions.NodeTarget"]:
    return {k[1]: v for k, v in nb.targets.items() if k[0] == arm_name and k[1] is not None}


def _expression_slot(action, obj):
    """The slot of ``action`` that animates the armature data of ``obj`` (where the VRM Add-on's
    expression previews are keyed; Blender 4.4+ keys them into the object's action, in a slot of
    their own): the data's own slot when it uses this action, else an ARMATURE slot named after
    the data (or the only one).  None when there is none."""
    data = obj.data
    ad = getattr(data, "animation_data", None)
    used = getattr(ad, "action_slot", None) if ad is not None and ad.action == action else None
    if used is not None:
        return used
    cands = [s for s in action.slots if s.target_id_type == "ARMATURE"]
    named = [s for s in cands if s.name_display == data.name]
    return named[0] if named else (cands[0] if len(cands) == 1 else None)


def _expression_curves(action, obj, problems=None, check=None):
    """(slot, [(F-Curve, channel name)]) of the VRM expression previews ``action`` keys for the
    armature ``obj`` (docs/vrm.md: they become clip channels on the armature's node).  ``check``:
    the caller's ``expression_check(armature data, data path) -> why or None`` (the session's is the
    VRM feature's: engine/features/vrm/driver.py); a curve it finds naming an expression the avatar
    does not have is left out, with a message in ``problems`` (None: not reported).  Without
    ``check`` every preview curve is kept.  ((None, []) for other objects.)"""
    if obj.type != "ARMATURE":
        return None, []
    slot = _expression_slot(action, obj)
    if slot is None:
        return None, []
    good = []
    for fc, key in _actions.expression_curves(action, slot):
        why = check(obj.data, fc.data_path) if check is not None else None
        if why is None:
            good.append((fc, key))
        elif problems is not None:
            problems.append(f"action '{action.name}': channel {fc.data_path} of armature '{obj.name}': {why}; "
                            "left out of the clip")
    return slot, good


def _clip_for_object(action, slot, fps, obj, nb: NodeBuilder, cache=None, expressions=(None, []),
                     ignore_missing: bool = False):
    """The clip of ``action`` for ``obj``: ``slot``'s bone / object curves and, for an armature,
    ``expressions`` = (armature data slot, preview curves) from ``_expression_curves``.
    ``ignore_missing``: channels of bones ``obj`` lacks are left out (named in the clip's notes)
    instead of refusing the clip, as Blender plays such an action."""
    target = nb.targets[(obj.name, None)]
    bones = _bone_targets(nb, obj.name) if obj.type == "ARMATURE" else {}
    xslot, xcurves = expressions
    key = sig = None
    if cache is not None:
        key = (action.name, obj.name, "OBJECT")
        sig = (_actions.action_signature(action, slot), fps,
               _actions.bake_inputs_signature(action, slot, target, bones),
               _actions.action_signature(action, xslot) if xcurves else None, tuple(k for _f, k in xcurves),
               ignore_missing)
        hit = cache.find_clip(key, sig)
        if hit is not None:
            return hit
    clip = _actions.bake_object_action(action, slot, fps, obj.name, target, bones,
                                       obj.name if obj.type == "ARMATURE" else "",
                                       expression_curves=xcurves, expression_node=target.index,
                                       ignore_missing=ignore_missing)
    if cache is not None:
        cache.store_clip(key, sig, (), clip)
    return clip


def _clip_for_key(action, slot, fps, obj, nb: NodeBuilder, cache=None):
    kb_names = {kb.name for kb in obj.data.shape_keys.key_blocks}
    node = nb.index[(obj.name, None)]
    key = sig = None
    if cache is not None:
        key = (action.name, obj.name, "KEY")
        sig = (_actions.action_signature(action, slot), fps, tuple(sorted(kb_names)), node)
        hit = cache.find_clip(key, sig)
        if hit is not None:
            return hit
    clip = _actions.bake_key_action(action, slot, fps, obj.name, node, kb_names, obj.data.name)
    if cache is not None:
        cache.store_clip(key, sig, (), clip)
    return clip


def _assigned_actions(anim_data) -> list:
    """(action, slot) pairs assigned through the active action and NLA strips."""
    out = []
    if anim_data is None:
        return out
    if anim_data.action is not None:
        out.append((anim_data.action, getattr(anim_data, "action_slot", None)))
    for tr in anim_data.nla_tracks:
        for st in tr.strips:
            if st.action is not None:
                out.append((st.action, getattr(st, "action_slot", None)))
    return out


def import_animations(scene, objects, nb: NodeBuilder, strict: bool, cache, problems: list,
                      expression_check=None) -> list:
    """The clips of ``objects``' actions (``expression_check``: see ``_expression_curves``)."""
    import bpy
    fps = _actions.scene_fps(scene)
    clips = []
    info_cache = {}

    def bone_info(action, slot):
        k = (action.name, None if slot is None else slot.handle)
        if k not in info_cache:
            info_cache[k] = _actions.action_bone_names(action, slot)
        return info_cache[k]

    def attempt(fn, *args):
        try:
            clips.append(fn(*args))
        except AssetError as e:
            if strict:
                raise
            problems.append(str(e))

    all_actions = list(bpy.data.actions)
    for obj in objects:
        seen = set()
        ad = obj.animation_data
        for action, slot in _assigned_actions(ad):
            slot = slot if slot is not None else _actions.pick_slot(action, "OBJECT", ad, obj.name)
            if slot is None or action.name in seen:
                continue
            seen.add(action.name)
            attempt(_clip_for_object, action, slot, fps, obj, nb, cache,
                    _expression_curves(action, obj, problems, expression_check), not strict)
        if obj.type == "ARMATURE":
            bone_names = set(obj.data.bones.keys())
            other_rig = set()
            for action in all_actions:
                if action.name in seen:
                    continue
                slot = _actions.pick_slot(action, "OBJECT", None, obj.name)
                if slot is None:
                    continue
                names, has_obj = bone_info(action, slot)
                if not names or not (names & bone_names):
                    if names or has_obj:
                        other_rig.add(action.name)
                    continue  # made for another rig
                seen.add(action.name)
                missing = sorted(names - bone_names)
                if missing and strict:
                    raise AssetError(f"action '{action.name}': bone '{missing[0]}' does not exist in armature "
                                     f"'{obj.name}'")
                # an animation pack made for a rig with extra bones: offered, as Blender plays it,
                # the missing bones' channels ignored (the clip's notes name them)
                attempt(_clip_for_object, action, slot, fps, obj, nb, cache,
                        _expression_curves(action, obj, problems, expression_check), True)
            # actions that key only the avatar's VRM expressions (its armature data): face clips
            dad = getattr(obj.data, "animation_data", None)
            assigned = [a for a, _s in _assigned_actions(dad)]
            for action in assigned + [a for a in all_actions if a not in assigned]:
                if action.name in seen or action.name in other_rig:
                    continue
                is_assigned = action in assigned
                xslot, curves = _expression_curves(action, obj, problems if is_assigned else None, expression_check)
                if not curves:
                    continue
                if not is_assigned and len(curves) != len(_actions.expression_curves(action, xslot)):
                    continue  # keys expressions this avatar does not have: made for another one
                seen.add(action.name)
                attempt(_clip_for_object, action, None, fps, obj, nb, cache, (xslot, curves))
        if obj.type == "MESH" and obj.data.shape_keys is not None and len(obj.data.shape_keys.key_blocks) > 1:
            key = obj.data.shape_keys
            kad = key.animation_data
            kseen = set()
            kb_names = {kb.name for kb in key.key_blocks}
            for action, slot in _assigned_actions(kad):
                slot = slot if slot is not None else _actions.pick_slot(action, "KEY", kad, key.name)
                if slot is None or action.name in kseen:
                    continue
                kseen.add(action.name)
                attempt(_clip_for_key, action, slot, fps, obj, nb, cache)
            for action in all_actions:
                if action.name in kseen:
                    continue
                slot = _actions.pick_slot(action, "KEY", None, key.name)
                if slot is None or slot.target_id_type != "KEY":
                    continue
                names = _actions.action_key_names(action, slot)
                if names and names <= kb_names:
                    kseen.add(action.name)
                    attempt(_clip_for_key, action, slot, fps, obj, nb, cache)
    return clips


def import_action(action, scene_asset: SceneAsset, target_object, scene, slot=None, expression_check=None):
    """Bake ``action`` for ``target_object`` (an object whose nodes are in ``scene_asset``).

    A Key action (slot id type KEY) becomes morph weight channels of the mesh object's node; for
    an armature, the VRM expression previews of the action's armature data slot (or of ``slot``
    when it is one) become morph channels of the armature's node (docs/vrm.md).
    Raises AssetError for a channel naming a missing bone / shape key or for non-finite keys.
    ``expression_check``: see ``_expression_curves``.
    """
    fps = _actions.scene_fps(scene)
    obj = target_object
    nb = NodeBuilder()
    for i, nd in enumerate(scene_asset.nodes):
        nb.index[(nd.object_name, nd.bone_name)] = i
    is_key = (slot is not None and slot.target_id_type == "KEY") or (
        slot is None and obj.type == "MESH" and obj.data.shape_keys is not None
        and any(s.target_id_type == "KEY" for s in action.slots)
        and not any(s.target_id_type == "OBJECT" for s in action.slots))
    if (obj.name, None) not in nb.index:
        raise AssetError(f"action '{action.name}': object '{obj.name}' is not in the scene asset")
    if is_key:
        key = obj.data.shape_keys
        if key is None:
            raise AssetError(f"action '{action.name}': object '{obj.name}' has no shape keys")
        slot = slot or _actions.pick_slot(action, "KEY", key.animation_data, key.name)
        return _clip_for_key(action, slot, fps, obj, nb)
    expressions = (None, [])
    if obj.type == "ARMATURE":
        if slot is not None and slot.target_id_type == "ARMATURE":   # a face clip: expressions only
            expressions = (slot, _actions.expression_curves(action, slot))
            slot = None
        else:
            expressions = _expression_curves(action, obj, check=expression_check)
            slot = slot or _actions.pick_slot(action, "OBJECT", obj.animation_data, obj.name)
    else:
        slot = slot or _actions.pick_slot(action, "OBJECT", obj.animation_data, obj.name)
    # rebuild node targets for the object and its bones
    node = nb.index[(obj.name, None)]
    nb.targets[(obj.name, None)] = object_target(obj, node)
    if obj.type == "ARMATURE":
        names = [b.name for b in obj.data.bones if (obj.name, b.name) in nb.index]
        for name, t in zip(names, bone_targets(obj, names, [nb.index[(obj.name, n)] for n in names])):
            nb.targets[(obj.name, name)] = t
    return _clip_for_object(action, slot, fps, obj, nb, None, expressions)
