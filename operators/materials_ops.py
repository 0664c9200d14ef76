"""MToon operators: convert a material to our MToon properties; switch to the Standard view transform."""
from __future__ import annotations

import bpy
from bpy.props import BoolProperty

_SOURCE_LABELS = {"vrm_addon": "VRM Add-on MToon", "principled": "Principled BSDF", "default": "viewport colour",
                  "stylized": "Stylized MToon", "unlit": "unlit Emission"}


def _target_materials(context, all_selected: bool) -> list:
    mats = []
    if all_selected:
        for ob in getattr(context, "selected_objects", None) or ():
            for slot in getattr(ob, "material_slots", ()):
                if slot.material is not None and slot.material not in mats:
                    mats.append(slot.material)
    mat = getattr(context, "material", None)
    if mat is None:
        ob = getattr(context, "object", None)
        mat = getattr(ob, "active_material", None) if ob is not None else None
    if mat is not None and mat not in mats:
        mats.insert(0, mat)
    return mats


class STYLIZED_OT_convert_to_mtoon(bpy.types.Operator):
    """Copy the values the Stylized engine currently derives for this material (from the VRM Add-on's
    MToon node group or the Principled BSDF) into its editable MToon properties and enable them"""

    bl_idname = "stylized.convert_to_mtoon"
    bl_label = "Convert to MToon"
    bl_options = {"REGISTER", "UNDO"}

    all_selected: BoolProperty(
        name="All Selected Objects", default=False,
        description="Convert every material of every selected object, not only the active material")
    overwrite: BoolProperty(
        name="Overwrite MToon Materials", default=False,
        description="Also re-convert materials that already use our MToon properties (their values are replaced)")

    @classmethod
    def poll(cls, context):
        return bool(_target_materials(context, True))

    def execute(self, context):
        from ..engine.features.materials.resolve import resolve_uncached, write_properties
        from ..engine.features.vrm.materials import is_outline_material

        done, skipped = [], []
        for mat in _target_materials(context, self.all_selected):
            props = mat.stylized_mtoon
            if is_outline_material(mat):
                skipped.append(f"{mat.name} (VRM outline material)")
                continue
            if props.enabled and not self.overwrite:
                skipped.append(f"{mat.name} (already MToon)")
                continue
            params = resolve_uncached(mat, use_properties=False)
            write_properties(props, params)
            props.enabled = True     # (tags the material: the viewport session re-reads it)
            done.append(f"{mat.name} (from {_SOURCE_LABELS.get(params.source, params.source)})")
        if not done:
            self.report({"WARNING"}, "Nothing converted" + (": skipped " + ", ".join(skipped) if skipped else ""))
            return {"CANCELLED"}
        msg = f"Converted {len(done)} material(s) to MToon: " + ", ".join(done)
        if skipped:
            msg += "; skipped " + ", ".join(skipped)
        self.report({"INFO"}, msg)
        return {"FINISHED"}


class STYLIZED_OT_set_standard_view_transform(bpy.types.Operator):
    """Set the scene's colour-management view transform to Standard, so toon colours are shown as authored
    (AgX and Filmic compress and desaturate them)"""

    bl_idname = "stylized.set_standard_view_transform"
    bl_label = "Use Standard View Transform"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        return getattr(context, "scene", None) is not None

    def execute(self, context):
        vs = context.scene.view_settings
        old = vs.view_transform
        if old == "Standard":
            self.report({"INFO"}, "View transform is already Standard")
            return {"CANCELLED"}
        vs.view_transform = "Standard"
        self.report({"INFO"}, f"View transform changed from {old} to Standard")
        return {"FINISHED"}


CLASSES = (STYLIZED_OT_convert_to_mtoon, STYLIZED_OT_set_standard_view_transform)


register, unregister = bpy.utils.register_classes_factory(CLASSES)
