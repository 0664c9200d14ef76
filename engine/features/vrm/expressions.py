"""VRM expressions as a source of morph weights (and material colour / UV binds).

The rules and tables are in ``rules.py``, the reading of the add-on's data in ``read.py``
(both re-exported here); this module flattens an avatar (``ExpressionSet``), binds it to the
runtime's morph slots (``VrmMorphSource``) and materials (``MaterialBinds``) and writes previews.

The VRM Add-on for Blender keeps a character's expressions on its armature data
(``armature.data.vrm_addon_extension``):

* VRM 1.0 (``spec_version`` "1.0"): ``vrm1.expressions.preset.<name>`` (18 presets) and
  ``vrm1.expressions.custom[]``, each with ``preview`` (the expression's value, 0..1, keyframable),
  ``is_binary``, ``override_blink`` / ``override_look_at`` / ``override_mouth`` (none / block /
  blend), ``morph_target_binds`` (mesh object, shape-key name, weight), ``material_color_binds``
  and ``texture_transform_binds``;
* VRM 0.x (``spec_version`` "0.0"): ``vrm0.blend_shape_master.blend_shape_groups[]`` with
  ``preview``, ``preset_name``, ``is_binary``, ``binds`` and ``material_values`` (no overrides in
  VRM 0.x).

The add-on copies previews into shape-key values itself, but only from a ``frame_change_post``
handler on the original data: during ``render(animation=True)`` the evaluated armature carries
the animated preview while the shape keys keep stale values.  This module reads the data the
add-on stores, WITH or WITHOUT the add-on installed: every value is read from the ID properties
the add-on leaves in the .blend (``ID.bl_system_properties_get()`` in Blender 5.0+, the ID's own
custom properties before), so one code path serves both.  Without the add-on Blender cannot
resolve the preview F-Curves (their RNA path is unknown), so animated previews are evaluated here
from the armature data's action.

Per import, ``ExpressionSet.from_armature`` flattens an avatar into numpy arrays; per frame
``read_values`` reads the previews (one ``get`` per expression, ~20) and ``evaluate`` applies the
VRM 1.0 rules vectorised:

* a value is clamped to [0, 1]; ``isBinary``: 1 when the value is > 0.5, else 0;
* override amounts: ``block`` = 1 while the (binary-processed) output is > 0, ``blend`` = the
  output, ``none`` = 0; the override of a kind on an expression of the same kind is ignored
  (the spec: "settings for the same kind are treated as invalid");
* each procedural group (blink: blink/blinkLeft/blinkRight, lookAt: lookUp/Down/Left/Right,
  mouth: aa/ih/ou/ee/oh) is multiplied by ``max(0, 1 - sum of amounts)``; a binary expression
  that receives any override (multiplier < 1) is suppressed completely.

Morph weight of a shape key = ``bind_matrix @ outputs`` (sum of bind weight x expression output
over every expression binding it), clamped later by MorphState to the key's slider range.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .read import (
    Expression,
    addon_registered,
    as_float,
    check_binds,
    expression_containers,
    extension_props,
    group_at,
    idprop,
    prop_list,
    read_v0_group,
    read_v1_expression,
    spec_version,
)

# (re-exported: the VRM names stay reachable as vrm_expressions.X)
from .rules import (
    EXT,
    PRESETS,
    SPEC_VRM0,
    SPEC_VRM1,
    evaluate,
)


class ExpressionSet:
    """One avatar's expressions, flattened for per-frame evaluation."""

    def __init__(self, armature_name: str, spec: str, expressions: List[Expression], problems=None):
        self.armature_name = armature_name
        self.spec = spec
        self.expressions = expressions
        self.problems = list(problems or [])
        self.is_binary = np.array([e.is_binary for e in expressions], bool)
        self.overrides = np.array([e.overrides for e in expressions], np.int64).reshape(-1, 3)
        self.category = np.array([e.category for e in expressions], np.int64)
        self.names = [e.name for e in expressions]

    @property
    def count(self) -> int:
        return len(self.expressions)

    def by_name(self, name: str) -> Optional[Expression]:
        for e in self.expressions:
            if e.name == name:
                return e
        return None

    def index(self, name: str) -> int:
        for i, e in enumerate(self.expressions):
            if e.name == name:
                return i
        return -1

    def signature(self) -> tuple:
        """What the per-frame arrays were built from (names, rules and binds), for staleness checks."""
        return (self.spec,) + tuple((e.name, e.preset, e.is_binary, e.overrides, tuple(e.morph_binds),
                                     tuple(e.color_binds), tuple(e.uv_binds)) for e in self.expressions)

    # -------------------------------------------------------------------------------- build
    @classmethod
    def from_armature(cls, armature_obj) -> Optional["ExpressionSet"]:
        """The expressions of an armature object (its data's ID properties), None without VRM data."""
        data = getattr(armature_obj, "data", None)
        ext = extension_props(data)
        if ext is None:
            return None
        spec = spec_version(ext)
        problems: list = []
        exprs: List[Expression] = []
        if spec == SPEC_VRM0:
            master = idprop(idprop(ext, "vrm0", None) or {}, "blend_shape_master", None)
            groups = prop_list(master, "blend_shape_groups") if master is not None else []
            for i, grp in enumerate(groups):
                exprs.append(read_v0_group(i, grp, problems))
            if not exprs:
                return None
        elif spec == SPEC_VRM1:
            ex = idprop(idprop(ext, "vrm1", None) or {}, "expressions", None)
            if ex is None:
                return None
            preset = idprop(ex, "preset", None)
            for name, key in PRESETS:
                grp = idprop(preset, key, None) if preset is not None else None
                exprs.append(read_v1_expression(name, name, grp if grp is not None else {}, ("preset", key),
                                                 f"{EXT}.vrm1.expressions.preset.{key}.preview", problems))
            for i, grp in enumerate(prop_list(ex, "custom")):
                nm = str(idprop(grp, "custom_name", "") or idprop(grp, "name", "") or f"custom {i}")
                exprs.append(read_v1_expression(nm, None, grp, ("custom", i),
                                                 f"{EXT}.vrm1.expressions.custom[{i}].preview", problems))
            if not any(e.is_bound for e in exprs):
                return None
        else:
            return None
        check_binds(armature_obj.name, exprs, problems)
        return cls(armature_obj.name, spec, exprs, problems)

    # -------------------------------------------------------------------------------- per frame
    def _groups(self, ext):
        """The IDProperty groups of the expressions (parallel to ``expressions``; None if gone)."""
        c = expression_containers(ext)
        return [group_at(ext, e.location, c) for e in self.expressions]

    def stored_values(self, armature_data) -> np.ndarray:
        """The previews stored on ``armature_data`` (original or evaluated), 0 where unset."""
        groups = self._groups(extension_props(armature_data))
        return np.array([as_float(idprop(g, "preview", 0.0)) if g is not None else 0.0 for g in groups], np.float64)

    def animated_values(self, armature_data, frame: float, values: np.ndarray) -> np.ndarray:
        """``values`` with every preview that the armature data's action animates evaluated at
        ``frame`` (used where Blender cannot: the add-on is not installed)."""
        fcs = preview_fcurves(armature_data, [e.data_path for e in self.expressions])
        if not fcs:
            return values
        out = values.copy()
        for i, fc in fcs.items():
            out[i] = fc.evaluate(frame)
        return out

    def read_values(self, armature_obj, depsgraph=None, frame: Optional[float] = None) -> np.ndarray:
        """The raw expression values at the current frame.

        * A render depsgraph (F12, Ctrl+F12, farm): the evaluated armature data's previews, which
          Blender's animation system has written there (the add-on's handler has not copied them
          anywhere yet).
        * A viewport depsgraph or none (viewport, preview player, panel): the original data, where
          the active depsgraph flushes animated values and where UI edits land at once (the
          add-on's preview setter does not tag the armature for re-evaluation, so its evaluated
          copy can lag behind a dragged slider).
        * Without the add-on Blender cannot resolve the preview F-Curves: they are evaluated here
          at the depsgraph's frame (else ``frame``)."""
        data = armature_obj.data
        if depsgraph is not None and getattr(depsgraph, "mode", "VIEWPORT") == "RENDER":
            vals = self.stored_values(armature_obj.evaluated_get(depsgraph).data)
        else:
            vals = self.stored_values(data)
        if depsgraph is not None:
            sc = depsgraph.scene
            frame = float(sc.frame_current) + float(sc.frame_subframe)
        if frame is not None and not addon_registered():
            vals = self.animated_values(data, frame, vals)
        return vals

    def outputs(self, values) -> np.ndarray:
        return evaluate(values, self.is_binary, self.overrides, self.category)


def preview_fcurves(armature_data, data_paths: Sequence[str]) -> Dict[int, Any]:
    """{expression index: F-Curve (bpy)} of the armature data's active action that animate a preview."""
    ad = getattr(armature_data, "animation_data", None)
    action = getattr(ad, "action", None) if ad is not None else None
    if action is None:
        return {}
    from ...blender.importer.actions import pick_slot, slot_fcurves

    try:
        slot = pick_slot(action, "ARMATURE", ad, armature_data.name)
        fcs = slot_fcurves(action, slot)
    except Exception:
        fcs = list(getattr(action, "fcurves", []) or [])
    if not fcs:
        return {}
    wanted = {p: i for i, p in enumerate(data_paths)}
    out = {}
    for fc in fcs:
        i = wanted.get(fc.data_path)
        if i is not None and not fc.mute and len(fc.keyframe_points):
            out[i] = fc
    return out


def expression_set_of(armature_obj) -> Optional[ExpressionSet]:
    """ExpressionSet of an armature object (None when it has no VRM expression data)."""
    if armature_obj is None or getattr(armature_obj, "type", "") != "ARMATURE":
        return None
    try:
        return ExpressionSet.from_armature(armature_obj)
    except Exception:   # malformed add-on data must never break a render or a panel
        return None


# ------------------------------------------------------------------------------------------------
# expressions -> morph weights of the imported meshes
# ------------------------------------------------------------------------------------------------

class VrmMorphSource:
    """Every avatar's expressions of a scene, bound to the runtime's morph slots.

    ``bound[node]`` = (slots into the node's key names, rows into the bound-key vector);
    per frame ``weights = bind_matrix @ outputs`` for all bound keys at once."""

    signature: tuple        # sets_signature of its sets (set by build_source)

    def __init__(self, sets: List[ExpressionSet], mesh_keys: Dict[int, Tuple[str, List[str]]]):
        """sets: the avatars; mesh_keys: {node: (mesh object name, key names of the node)}."""
        import bpy

        self.sets = sets
        offsets = np.cumsum([0] + [s.count for s in sets])
        self.offsets = offsets
        # bound keys by (mesh data name, key name): the add-on sums binds per mesh data
        rows: Dict[Tuple[str, str], int] = {}
        entries = []
        for si, s in enumerate(sets):
            for ei, e in enumerate(s.expressions):
                for mesh, key, w in e.morph_binds:
                    ob = bpy.data.objects.get(mesh)
                    if ob is None or ob.type != "MESH":
                        continue        # reported by ExpressionSet (problems)
                    r = rows.setdefault((ob.data.name, key), len(rows))
                    entries.append((r, int(offsets[si]) + ei, w))
        self.bind_matrix = np.zeros((len(rows), int(offsets[-1])), np.float64)
        for r, c, w in entries:
            self.bind_matrix[r, c] += w
        self.bound: Dict[int, Tuple[np.ndarray, np.ndarray]] = {}
        for node, (ob_name, names) in mesh_keys.items():
            ob = bpy.data.objects.get(ob_name)
            if ob is None or ob.type != "MESH":
                continue
            pairs = [(k, rows[(ob.data.name, n)]) for k, n in enumerate(names) if (ob.data.name, n) in rows]
            if pairs:
                self.bound[node] = (np.array([p[0] for p in pairs], np.int64),
                                    np.array([p[1] for p in pairs], np.int64))
        self.material = MaterialBinds(sets, offsets)
        self.last_outputs = np.zeros(int(offsets[-1]))
        self.frame_problems: List[str] = []     # the last frame's (non-finite previews)

    @property
    def problems(self) -> list:
        return [p for s in self.sets for p in s.problems]

    def channel_columns(self, keys, armature_nodes: Dict[str, int]) -> Tuple[np.ndarray, np.ndarray]:
        """(channel positions in ``keys``, expression columns) of the clip channels that carry an
        expression preview of these avatars.  ``keys``: (node, name) pairs as the preview player
        lists them (``AnimationPlayer.morph_keys``); ``armature_nodes``: {armature object name:
        its scene node}.  Run once per clip (a look-up per channel), not per frame."""
        col_of: Dict[Tuple[int, str], int] = {}
        for si, s in enumerate(self.sets):
            node = armature_nodes.get(s.armature_name, -1)
            if node < 0:
                continue
            for ei, e in enumerate(s.expressions):
                ck = e.channel_key
                if ck is not None:
                    col_of[(int(node), ck)] = int(self.offsets[si]) + ei
        pairs = [(c, col_of[(int(n), str(k))]) for c, (n, k) in enumerate(keys) if (int(n), str(k)) in col_of]
        return (np.array([p[0] for p in pairs], np.int64), np.array([p[1] for p in pairs], np.int64))

    def outputs(self, depsgraph=None, frame=None, given=None) -> np.ndarray:
        """Every avatar's expression outputs (VRM rules applied) at this frame.  ``given``:
        (expression columns, raw values) that replace the stored / scene-frame previews of those
        expressions (the preview's clip channels); the values may be ``fill(previews)``, given
        the previews those columns hold (the morph mixer fills what the clips leave with them);
        the others are read as usual."""
        import bpy

        parts = []
        self.frame_problems = []
        for s in self.sets:
            ob = bpy.data.objects.get(s.armature_name)
            if ob is None or ob.type != "ARMATURE":
                parts.append(np.zeros(s.count))
                continue
            parts.append(np.asarray(s.read_values(ob, depsgraph, frame), np.float64))
        raw = np.concatenate(parts) if parts else np.zeros(0)
        if given is not None and len(given[0]):
            cols, vals = np.asarray(given[0], np.int64), given[1]
            raw[cols] = vals(raw[cols]) if callable(vals) else np.asarray(vals, np.float64)  # pyright: ignore[reportCallIssue, reportArgumentType]  (vals: an array or fill(original))
        bad = np.flatnonzero(~np.isfinite(raw))
        for i in bad:        # only on bad input
            si = int(np.searchsorted(self.offsets, i, side="right")) - 1
            s = self.sets[si]
            self.frame_problems.append(f"expression '{s.names[i - int(self.offsets[si])]}' of '{s.armature_name}': "
                                       f"value {raw[i]} is not a finite number: treated as 0")
        out = np.concatenate([s.outputs(raw[int(self.offsets[si]):int(self.offsets[si + 1])])
                              for si, s in enumerate(self.sets)]) if self.sets else np.zeros(0)
        self.last_outputs = out
        return out

    def key_weights(self, outputs: np.ndarray) -> np.ndarray:
        return self.bind_matrix @ outputs if self.bind_matrix.size else np.zeros(self.bind_matrix.shape[0])


def expression_sets(armature_names: Sequence[str]) -> List[ExpressionSet]:
    import bpy

    sets = []
    for name in armature_names:
        s = expression_set_of(bpy.data.objects.get(name))
        if s is not None:
            sets.append(s)
    return sets


def sets_signature(sets: Sequence[ExpressionSet]) -> tuple:
    return tuple((s.armature_name, s.signature()) for s in sets)


def build_source(armature_names: Sequence[str], mesh_keys, sets=None) -> Optional[VrmMorphSource]:
    """A VrmMorphSource for the armatures with VRM data among ``armature_names`` (None if none)."""
    sets = expression_sets(armature_names) if sets is None else sets
    if not sets:
        return None
    src = VrmMorphSource(sets, mesh_keys)
    src.signature = sets_signature(sets)
    return src


# ------------------------------------------------------------------------------------------------
# material colour / UV binds (applied to MToonParams by engine.features.vrm.binds)
# ------------------------------------------------------------------------------------------------

class MaterialBinds:
    """Colour and texture-transform binds flattened into arrays.  Per frame:
    ``sum_target[row] = sum_e output_e x target`` and ``sum_weight[row] = sum_e output_e`` for each
    (material, type) row, so the spec's ``base + sum_e w_e (target_e - base)`` is
    ``base + sum_target - sum_weight x base`` with the material's own base value."""

    def __init__(self, sets: List[ExpressionSet], offsets):
        color_rows: Dict[Tuple[str, str], int] = {}
        uv_rows: Dict[str, int] = {}
        c_row, c_expr, c_target = [], [], []
        u_row, u_expr, u_target = [], [], []
        for si, s in enumerate(sets):
            for ei, e in enumerate(s.expressions):
                col = int(offsets[si]) + ei
                for mat, kind, tv in e.color_binds:
                    c_row.append(color_rows.setdefault((mat, kind), len(color_rows)))
                    c_expr.append(col)
                    c_target.append(tv)
                for mat, sc, of in e.uv_binds:
                    u_row.append(uv_rows.setdefault(mat, len(uv_rows)))
                    u_expr.append(col)
                    u_target.append(tuple(sc) + tuple(of))
        self.color_keys = list(color_rows)
        self.uv_keys = list(uv_rows)
        self._c = (np.array(c_row, np.int64), np.array(c_expr, np.int64),
                   np.array(c_target, np.float64).reshape(-1, 4))
        self._u = (np.array(u_row, np.int64), np.array(u_expr, np.int64),
                   np.array(u_target, np.float64).reshape(-1, 4))

    @property
    def empty(self) -> bool:
        return not self.color_keys and not self.uv_keys

    def frame_state(self, outputs: np.ndarray) -> dict:
        """{material name: {type: (sum_target (4,), sum_weight)}} with 'uv' -> ((scale, offset)
        weighted sums (4,), sum_weight); only rows with a non-zero weight."""
        state: Dict[str, dict] = {}
        for (rows, expr, target), keys in ((self._c, self.color_keys), (self._u, None)):
            if rows.size == 0:
                continue
            w = outputs[expr]
            n = len(keys) if keys is not None else len(self.uv_keys)
            st = np.zeros((n, 4))
            np.add.at(st, rows, w[:, None] * target)
            sw = np.bincount(rows, weights=w, minlength=n)
            for r in np.flatnonzero(sw != 0.0):
                if keys is not None:
                    mat, kind = keys[r]
                else:
                    mat, kind = self.uv_keys[r], "uv"
                state.setdefault(mat, {})[kind] = (st[r].copy(), float(sw[r]))
        return state


# ------------------------------------------------------------------------------------------------
# writing previews (panel / operators; never called by the renderer)
# ------------------------------------------------------------------------------------------------

def _rna_owner(armature_data, expr: Expression):
    """The add-on's RNA property group of ``expr`` (None when the add-on is not installed)."""
    ext = getattr(armature_data, EXT, None)
    if ext is None:
        return None
    try:
        if expr.location[0] == "vrm0":
            return ext.vrm0.blend_shape_master.blend_shape_groups[expr.location[1]]
        if expr.location[0] == "preset":
            return getattr(ext.vrm1.expressions.preset, expr.location[1])
        return ext.vrm1.expressions.custom[expr.location[1]]
    except (AttributeError, IndexError):
        return None


def get_preview(armature_obj, expr: Expression) -> float:
    """The stored preview of ``expr`` (the add-on's RNA when installed, else its ID property)."""
    owner = _rna_owner(armature_obj.data, expr)
    if owner is not None:
        return float(owner.preview)
    grp = group_at(extension_props(armature_obj.data), expr.location)
    return as_float(idprop(grp, "preview", 0.0)) if grp is not None else 0.0


def set_preview(armature_obj, expr: Expression, value: float) -> None:
    """Write an expression's preview: through the add-on's RNA when installed (its own update
    writes the shape keys and the add-on's panel shows it), else into the ID property the add-on
    stores.  ValueError for a non-finite value or a missing expression (nothing is written)."""
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"expression '{expr.name}' of '{armature_obj.name}': value {value} is not a finite number")
    v = min(max(v, 0.0), 1.0)
    data = armature_obj.data
    owner = _rna_owner(data, expr)
    if owner is not None:
        if abs(float(owner.preview) - v) > 0.0:
            owner.preview = v
        return
    grp = group_at(extension_props(data), expr.location)
    if grp is None:
        raise ValueError(f"expression '{expr.name}' of '{armature_obj.name}' has no stored data")
    grp["preview"] = v
    data.update_tag()


def keyframe_preview(armature_obj, expr: Expression, frame: float) -> None:
    """Key the preview at ``frame`` (the add-on's RNA path; without the add-on an F-Curve on the
    same path is created in the armature data's action, which the add-on resolves once installed
    and this module evaluates meanwhile)."""
    data = armature_obj.data
    if _rna_owner(data, expr) is not None:
        data.keyframe_insert(expr.data_path, frame=frame)
        return
    import bpy

    value = get_preview(armature_obj, expr)
    ad = data.animation_data or data.animation_data_create()
    if ad.action is None:
        ad.action = bpy.data.actions.new(f"{data.name}Action")
    fc = None
    ensure = getattr(ad.action, "fcurve_ensure_for_datablock", None)
    if ensure is not None:
        fc = ensure(data, expr.data_path)
    else:   # Blender before 4.4
        fc = ad.action.fcurves.find(expr.data_path) or ad.action.fcurves.new(expr.data_path)
    fc.keyframe_points.insert(frame, value, options={"FAST"})
    fc.update()
