"""The expressions feature's panel in the sidebar tab "Stylized": Expressions (a character's VRM
expressions and shape keys as sliders; engine/features/expressions)."""
from __future__ import annotations

import bpy

from ..engine.features.expressions import character as expr
from .viewport_panels import SidebarPanel, session_stats, timed


def _draw_vrm_expressions(layout, props, root, presets, custom, flt, stale):
    """Presets in the VRM 1.0 order (greyed where the avatar binds nothing), then custom ones."""
    items = {} if stale else {it.name: it for it in props.vrm_items}

    def slider(col, e):
        row = col.row(align=True)
        row.active = e.is_bound
        label = expr.vrm_label(e)
        it = items.get(e.name)
        if it is not None:
            row.prop(it, "value", text=label if e.is_bound else f"{label} (not bound)", slider=True)
        else:   # before the deferred sync
            row.label(text=label)
        k = row.operator("stylized.vrm_expression_keyframe", text="", icon="KEY_HLT")
        k.name = e.name
        k.character = root.name

    shown = [(p, e) for p, e in presets if not flt or flt in p.lower() or (e is not None and flt in e.name.lower())]
    if shown:
        header, body = layout.panel("stylized_expr_vrm_presets", default_closed=False)
        header.label(text=f"Presets ({sum(1 for _p, e in shown if e is not None)})", icon="USER")
        if body is not None:
            col = body.column(align=True)
            for p, e in shown:
                if e is None:
                    row = col.row(align=True)
                    row.enabled = False
                    row.label(text=f"{p} (not defined)")
                else:
                    slider(col, e)
    shown = [e for e in custom if not flt or flt in e.name.lower()]
    if shown:
        header, body = layout.panel("stylized_expr_vrm_custom", default_closed=False)
        header.label(text=f"Custom ({len(shown)})", icon="SHAPEKEY_DATA")
        if body is not None:
            col = body.column(align=True)
            for e in shown:
                slider(col, e)


def _draw_shape_keys(layout, props, root, meshes, groups, flt, stale, bound):
    """One collapsible group per mesh, one slider per shape-key name; keys an expression binds
    are greyed (their value comes from the expressions)."""
    items = {} if stale else {it.name: it for it in props.items}
    for mesh_name, names in expr.names_by_mesh(meshes).items():
        shown = [n for n in names if not flt or flt in n.lower()]
        if not shown:
            continue
        header, body = layout.panel(f"stylized_expr_{mesh_name}", default_closed=False)
        header.label(text=f"{mesh_name} ({len(shown)})", icon="MESH_DATA")
        if body is None:
            continue
        col = body.column(align=True)
        for n in shown:
            blocks = groups[n]
            row = col.row(align=True)
            it = items.get(n)
            label = n if len(blocks) == 1 else f"{n} (x{len(blocks)})"
            if n in bound:
                row.active = False
                label += " (expression)"
            if it is not None:
                row.prop(it, "value", text=label, slider=True)
            else:   # before the deferred sync: the first key's own slider
                row.prop(blocks[0], "value", text=label, slider=True)
            k = row.operator("stylized.expression_keyframe", text="", icon="KEY_HLT")
            k.name = n
            k.character = root.name


class STYLIZED_PT_viewport_expressions(SidebarPanel, bpy.types.Panel):
    bl_label = "Expressions"
    bl_idname = "STYLIZED_PT_viewport_expressions"

    @timed
    def draw(self, context):
        layout = self.layout
        scene = context.scene
        obj = getattr(context, "active_object", None)
        root, meshes = expr.character_of(obj, scene)
        if root is None or not meshes:
            layout.label(text="Select a character with shape keys", icon="INFO")
            return
        props = scene.stylized_expressions
        stale = expr.items_stale(scene, root, meshes)
        if stale:
            expr.request_sync(scene, obj)
        es = expr.vrm_set(root)
        groups = expr.expression_groups(meshes)
        total, active = expr.counts(meshes)
        stats = session_stats()
        if es is not None:
            presets, custom = expr.vrm_presets_and_custom(es)
            layout.label(text=f"{root.name}: VRM {es.spec} | {sum(1 for _p, e in presets if e is not None)} presets, "
                              f"{len(custom)} custom", icon="SHAPEKEY_DATA")
        else:
            layout.label(text=f"{root.name}: {len(groups)} expressions", icon="SHAPEKEY_DATA")
        layout.label(text=f"Targets: {total} | Active: {active}")
        layout.label(text=f"Morph uploads: {stats.get('morph_uploads', 0)} this frame | "
                          f"{stats.get('morph_uploads_total', 0)} total")
        row = layout.row(align=True)
        row.prop(props, "filter", text="", icon="VIEWZOOM")
        op = row.operator("stylized.expression_reset_all", text="Reset All", icon="LOOP_BACK")
        op.character = root.name
        flt = props.filter.strip().lower()
        linked = expr.linked_problem(root, meshes, vrm=es is not None)
        if linked:          # read-only: an edit of linked data would be lost on save
            for k, part in enumerate(linked.split("; ")):
                layout.label(text=part, icon="LIBRARY_DATA_DIRECT" if k == 0 else "BLANK1")
            layout = layout.column()
            layout.enabled = False
        if es is not None:
            for msg in es.problems:
                layout.label(text=msg, icon="ERROR")
            _draw_vrm_expressions(layout, props, root, presets, custom, flt, stale)
            header, body = layout.panel("stylized_expr_shape_keys", default_closed=True)
            header.label(text=f"Shape Keys ({len(groups)})", icon="SHAPEKEY_DATA")
            if body is None:
                return
            _draw_shape_keys(body, props, root, meshes, groups, flt, stale, expr.vrm_bound_keys(es))
        else:
            _draw_shape_keys(layout, props, root, meshes, groups, flt, stale, set())


classes = (STYLIZED_PT_viewport_expressions,)


register, unregister = bpy.utils.register_classes_factory(classes)
