"""The VRM Add-on's expression data read from the ID properties it leaves in the .blend (with or
without the add-on installed): ``Expression`` and the VRM 1.0 / 0.x readers (``expressions.py``
flattens them into an ``ExpressionSet``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from .rules import (
    CAT_NONE,
    COLOR_BIND_TYPES,
    EXT,
    OVERRIDE_NAMES,
    PRESET_CATEGORY,
    PRESET_PROPS,
    SPEC_VRM0,
    SPEC_VRM1,
    VRM0_MATERIAL_PROPERTIES,
    VRM0_PRESETS,
    channel_key_for_path,
    location_of_path,
)

# ------------------------------------------------------------------------------------------------
# the add-on's data as ID properties
# ------------------------------------------------------------------------------------------------

def extension_props(id_data):
    """The add-on's ``vrm_addon_extension`` IDPropertyGroup of an ID, or None (add-on not needed)."""
    if id_data is None:
        return None
    get = getattr(id_data, "bl_system_properties_get", None)
    if get is not None:
        try:
            sp = get()
        except Exception:
            sp = None
        if sp is not None:
            ext = sp.get(EXT)
            if ext is not None:
                return ext
    try:
        return id_data.get(EXT)
    except Exception:
        return None


def addon_registered() -> bool:
    """True when the VRM Add-on's properties are registered (its RNA paths resolve)."""
    import bpy

    return hasattr(bpy.types.Armature, EXT)


def idprop(group, key, default=None):
    try:
        v = group.get(key, default)
    except Exception:
        return default
    return default if v is None else v


def prop_list(group, key) -> list:
    v = idprop(group, key, None)
    if v is None:
        return []
    try:
        return list(v)
    except TypeError:
        return []


def as_float(v, default=0.0) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return default
    return f


def spec_version(ext) -> str:
    v = idprop(ext, "spec_version", 1)      # the add-on's default is VRM 1.0 (enum value 1)
    if isinstance(v, str):
        return SPEC_VRM0 if v.startswith("0") else SPEC_VRM1 if v.startswith("1") else str(v)
    return {0: SPEC_VRM0, 1: SPEC_VRM1}.get(int(v), str(v))


def _mesh_object_name(node) -> str:
    """MeshObjectPropertyGroup -> object name (its pointer, else the saved name)."""
    if node is None:
        return ""
    ob = idprop(node, "bpy_object", None)
    name = getattr(ob, "name", None) if ob is not None else None
    if name:
        return str(name)
    return str(idprop(node, "saved_mesh_object_name_to_restore", "") or "")


def _material_name(mat) -> str:
    return str(getattr(mat, "name", "") or "") if mat is not None else ""


@dataclass
class Expression:
    name: str                              # VRM 1.0 preset name, custom name, or VRM 0.x group name
    preset: Optional[str]                  # VRM 1.0 preset it stands for (None: custom)
    is_binary: bool = False
    overrides: Tuple[int, int, int] = (0, 0, 0)    # blink, lookAt, mouth
    morph_binds: List[Tuple[str, str, float]] = field(default_factory=list)     # (mesh object, key, weight)
    color_binds: List[Tuple[str, str, tuple]] = field(default_factory=list)     # (material, type, rgba)
    uv_binds: List[Tuple[str, tuple, tuple]] = field(default_factory=list)      # (material, scale, offset)
    location: tuple = ()                   # where its IDProperty group lives (see _locate)
    data_path: str = ""                    # RNA path of its preview on the armature data

    @classmethod
    def at(cls, name: str, kind: str, key) -> "Expression":
        """A handle on the expression stored at (kind, key): ("vrm0", group index),
        ("preset", the add-on's preset property name) or ("custom", index); no binds read."""
        if kind == "vrm0":
            path = f"{EXT}.vrm0.blend_shape_master.blend_shape_groups[{int(key)}].preview"
            return cls(name=name, preset=None, location=("vrm0", int(key)), data_path=path)
        if kind == "preset":
            return cls(name=name, preset=name, location=("preset", str(key)),
                       data_path=f"{EXT}.vrm1.expressions.preset.{key}.preview")
        return cls(name=name, preset=None, location=("custom", int(key)),
                   data_path=f"{EXT}.vrm1.expressions.custom[{int(key)}].preview")

    @property
    def category(self) -> int:
        return PRESET_CATEGORY.get(self.preset, CAT_NONE) if self.preset else CAT_NONE

    @property
    def channel_key(self) -> Optional[str]:
        """The name of this expression's channel in preview-player clips (see CHANNEL_PREFIX)."""
        return channel_key_for_path(self.data_path)

    @property
    def is_bound(self) -> bool:
        return bool(self.morph_binds or self.color_binds or self.uv_binds)


def read_v1_expression(name, preset, grp, location, data_path, problems) -> Expression:
    e = Expression(name=name, preset=preset, location=location, data_path=data_path)
    e.is_binary = bool(idprop(grp, "is_binary", False))
    ovs = []
    for key in ("override_blink", "override_look_at", "override_mouth"):
        v = idprop(grp, key, 0)
        if isinstance(v, str):
            v = OVERRIDE_NAMES.index(v) if v in OVERRIDE_NAMES else 0
        v = int(v)
        if v not in (0, 1, 2):
            problems.append(f"expression '{name}': unknown {key} value {v}: treated as none")
            v = 0
        ovs.append(v)
    e.overrides = tuple(ovs)
    _read_morph_binds(e, prop_list(grp, "morph_target_binds"), "node")
    for b in prop_list(grp, "material_color_binds"):
        mat = _material_name(idprop(b, "material", None))
        raw = idprop(b, "type", 0)
        t = raw if isinstance(raw, str) else COLOR_BIND_TYPES.get(int(raw))
        tv = [as_float(x) for x in prop_list(b, "target_value")] or [0.0, 0.0, 0.0, 1.0]
        tv = (tv + [0.0, 0.0, 0.0, 1.0][len(tv):])[:4]
        if mat and t:
            e.color_binds.append((mat, t, tuple(tv)))
    for b in prop_list(grp, "texture_transform_binds"):
        mat = _material_name(idprop(b, "material", None))
        sc = [as_float(x, 1.0) for x in prop_list(b, "scale")] or [1.0, 1.0]
        of = [as_float(x) for x in prop_list(b, "offset")] or [0.0, 0.0]
        if mat:
            e.uv_binds.append((mat, tuple((sc + [1.0, 1.0])[:2]), tuple((of + [0.0, 0.0])[:2])))
    return e


def _read_morph_binds(e: Expression, binds, mesh_key: str) -> None:
    """The shape-key binds of an expression (VRM 1.0 ``morph_target_binds`` name their mesh
    ``node``, VRM 0.x ``binds`` ``mesh``): (mesh object, key name, weight) into ``e.morph_binds``."""
    for b in binds:
        mesh = _mesh_object_name(idprop(b, mesh_key, None))
        key = str(idprop(b, "index", "") or "")
        w = as_float(idprop(b, "weight", 1.0), 1.0)
        if mesh and key:
            e.morph_binds.append((mesh, key, w))


def read_v0_group(i, grp, problems) -> Expression:
    pn = idprop(grp, "preset_name", 0)
    preset = VRM0_PRESETS.get(int(pn)) if not isinstance(pn, str) else None
    name = str(idprop(grp, "name", "") or "") or (preset or f"group {i}")
    e = Expression(name=name, preset=preset, location=("vrm0", i),
                   data_path=f"{EXT}.vrm0.blend_shape_master.blend_shape_groups[{i}].preview")
    e.is_binary = bool(idprop(grp, "is_binary", False))
    _read_morph_binds(e, prop_list(grp, "binds"), "mesh")
    for b in prop_list(grp, "material_values"):
        mat = _material_name(idprop(b, "material", None))
        prop = str(idprop(b, "property_name", "") or "")
        kind = VRM0_MATERIAL_PROPERTIES.get(prop)
        tv = [as_float(idprop(x, "value", 0.0)) for x in prop_list(b, "target_value")]
        if not mat or kind is None:
            if mat and prop:
                problems.append(f"blend shape group '{name}': material value '{prop}' of '{mat}' is not applied")
            continue
        if kind == "uv":
            tv = (tv + [1.0, 1.0, 0.0, 0.0][len(tv):])[:4]
            e.uv_binds.append((mat, (tv[0], tv[1]), (tv[2], tv[3])))
        else:
            tv = (tv + [0.0, 0.0, 0.0, 1.0][len(tv):])[:4]
            e.color_binds.append((mat, kind, tuple(tv)))
    # VRM 0.x has no overrides
    return e


def expression_containers(ext) -> dict:
    """The add-on's expression containers of ``ext``: VRM 0.x groups, VRM 1.0 presets and custom."""
    out = {"vrm0": [], "preset": None, "custom": []}
    if ext is None:
        return out
    master = idprop(idprop(ext, "vrm0", None) or {}, "blend_shape_master", None)
    out["vrm0"] = prop_list(master, "blend_shape_groups") if master is not None else []
    ex = idprop(idprop(ext, "vrm1", None) or {}, "expressions", None)
    if ex is not None:
        out["preset"] = idprop(ex, "preset", None)
        out["custom"] = prop_list(ex, "custom")
    return out


def check_binds(armature_name: str, exprs, problems: list) -> None:
    """Messages for binds that point at nothing (a missing mesh object, shape key or material)."""
    import bpy

    for e in exprs:
        for mesh, key, _w in e.morph_binds:
            ob = bpy.data.objects.get(mesh)
            if ob is None or ob.type != "MESH":
                problems.append(f"expression '{e.name}' of '{armature_name}': bound mesh object '{mesh}' "
                                "does not exist")
                continue
            sk = ob.data.shape_keys
            if sk is None or sk.key_blocks.get(key) is None:
                problems.append(f"expression '{e.name}' of '{armature_name}': shape key '{key}' not found "
                                f"on mesh '{mesh}'")
        for mat, _k, _t in list(e.color_binds) + [(m, None, None) for m, _s, _o in e.uv_binds]:
            if bpy.data.materials.get(mat) is None:
                problems.append(f"expression '{e.name}' of '{armature_name}': bound material '{mat}' does not exist")


def group_at(ext, location, containers=None):
    """The IDPropertyGroup of the expression at ``location`` in the add-on data ``ext`` (or None);
    ``containers`` (from ``expression_containers``) saves walking the data again for each expression."""
    if ext is None or not location:
        return None
    c = containers if containers is not None else expression_containers(ext)
    kind, key = location
    if kind == "preset":
        return idprop(c["preset"], key, None) if c["preset"] is not None else None
    seq = c["vrm0"] if kind == "vrm0" else c["custom"]
    return seq[key] if 0 <= key < len(seq) else None


def preview_path_problem(armature_data, data_path: str) -> Optional[str]:
    """Why the preview F-Curve ``data_path`` animates nothing on ``armature_data`` (an unknown
    preset, a custom expression or blend-shape group index past the end), or None when it names
    an expression the avatar has."""
    loc = location_of_path(data_path)
    if loc is None:
        return f"'{data_path}' is not a VRM expression preview"
    kind, key = loc
    c = expression_containers(extension_props(armature_data))
    if kind == "preset":
        if key in PRESET_PROPS:
            return None
        return f"VRM 1.0 preset '{key}' does not exist"
    seq = c["vrm0"] if kind == "vrm0" else c["custom"]
    if 0 <= key < len(seq):
        return None
    what = "blend shape group" if kind == "vrm0" else "custom expression"
    return f"{what} #{key} does not exist (the avatar has {len(seq)})"
