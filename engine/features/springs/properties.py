"""The spring bones' saved setting: ``Object.stylized_spring_bones`` ("Animate Spring Bones", per
armature; the Animation panel shows it for an armature with VRM spring bones)."""
from __future__ import annotations

from .runtime import PROP


def register() -> None:
    import bpy

    setattr(bpy.types.Object, PROP, bpy.props.BoolProperty(
        name="Animate Spring Bones", default=True,
        description="Simulate this VRM avatar's spring bones (hair, skirt) in the Stylized preview, "
                    "as the VRM Add-on's spring bone animation does; off: they keep the clip's pose"))


def unregister() -> None:
    import bpy

    if hasattr(bpy.types.Object, PROP):
        delattr(bpy.types.Object, PROP)
