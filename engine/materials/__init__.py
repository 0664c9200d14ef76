"""Material parameters for the passes (foundation version: base colour only).

The MToon work replaces this with the full MToon 1.0 parameter set resolved from our
properties, the VRM Add-on's node group, or the Principled BSDF.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SimpleMaterial:
    base_color: tuple = (0.8, 0.8, 0.8, 1.0)


def resolve_material(material) -> SimpleMaterial:
    if material is None:
        return SimpleMaterial()
    if material.use_nodes and material.node_tree is not None:
        for node in material.node_tree.nodes:
            if node.type == "BSDF_PRINCIPLED":
                c = node.inputs["Base Color"].default_value
                return SimpleMaterial(tuple(float(x) for x in c))
    return SimpleMaterial(tuple(float(x) for x in material.diffuse_color))
