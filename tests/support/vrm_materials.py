"""A material laid out like the VRM Add-on's MToon 1.0 material (its node names and socket labels),
built without that add-on (test_materials, test_shadows_cascades): ``make_vrm_material``, the
output group's sockets ``VRM_SOCKETS`` and ``vrm_group`` (a node group with given input sockets)."""
from __future__ import annotations

import bpy

VRM_SOCKETS = (   # (name, socket type, value)
    ("Lit Color", "NodeSocketColor", (0.5, 0.25, 0.125, 1.0)),
    ("Lit Color Alpha", "NodeSocketFloat", 0.75),
    ("Shade Color", "NodeSocketColor", (0.2, 0.1, 0.3, 1.0)),
    ("Shading Shift", "NodeSocketFloat", -0.3),
    ("Shading Shift Texture Scale", "NodeSocketFloat", 0.5),
    ("Shading Toony", "NodeSocketFloat", 0.7),
    ("GI Equalization Factor", "NodeSocketFloat", 0.4),
    ("Emissive Factor", "NodeSocketColor", (0.5, 0.5, 0.0, 1.0)),
    ("Emissive Strength", "NodeSocketFloat", 2.0),
    ("MatCap Factor", "NodeSocketColor", (0.9, 0.8, 0.7, 1.0)),
    ("Parametric Rim Color", "NodeSocketColor", (0.1, 0.2, 0.3, 1.0)),
    ("Parametric Rim Fresnel Power", "NodeSocketFloat", 3.0),
    ("Parametric Rim Lift", "NodeSocketFloat", 0.15),
    ("Rim LightingMix", "NodeSocketFloat", 0.6),
    ("Outline Width Mode", "NodeSocketInt", 1),
    ("Outline Width", "NodeSocketFloat", 0.01),
    ("Outline Color", "NodeSocketColor", (0.3, 0.0, 0.0, 1.0)),
    ("Outline LightingMix", "NodeSocketFloat", 0.25),
    ("Alpha Mode", "NodeSocketInt", 1),
    ("Alpha Cutoff", "NodeSocketFloat", 0.33),
    ("Double Sided", "NodeSocketBool", True),
    ("Transparent With Z-Write", "NodeSocketBool", False),
    ("Render Queue Offset Number", "NodeSocketInt", 3),
)


def vrm_group(name, sockets):
    ng = bpy.data.node_groups.get(name)
    if ng is not None:
        return ng
    ng = bpy.data.node_groups.new(name, "ShaderNodeTree")
    for sname, stype, _ in sockets:
        ng.interface.new_socket(sname, in_out="INPUT", socket_type=stype)
    ng.interface.new_socket("Surface", in_out="OUTPUT", socket_type="NodeSocketShader")
    return ng


def make_vrm_material(name="VrmBody", with_principled=True, base_image=None):
    """A material laid out like the VRM Add-on's MToon 1.0 material (node names and socket labels)."""
    mat = bpy.data.materials.new(name)
    mat.use_nodes = True
    tree = mat.node_tree
    if not with_principled:
        for n in [n for n in tree.nodes if n.type == "BSDF_PRINCIPLED"]:
            tree.nodes.remove(n)
    out = vrm_group("VRM Add-on MToon 1.0 Output Revision 1", VRM_SOCKETS)
    node = tree.nodes.new("ShaderNodeGroup")
    node.node_tree = out
    node.name = "Mtoon1Material.Mtoon1Output"
    for sname, _, value in VRM_SOCKETS:
        node.inputs[sname].default_value = value
    uvg = vrm_group("VRM Add-on MToon 1.0 UV Revision 1",
                     [(n, "NodeSocketFloat", 0.0) for n in ("UV Offset X", "UV Offset Y", "UV Scale X", "UV Scale Y")])
    for tex in ("BaseColor", "ShadeMultiply", "Normal", "ShadingShift", "Emissive", "RimMultiply", "Matcap",
                "OutlineWidthMultiply", "UvAnimationMask"):
        img = tree.nodes.new("ShaderNodeTexImage")
        img.name = f"Mtoon1{tex}Texture.Image"
        uv = tree.nodes.new("ShaderNodeGroup")
        uv.node_tree = uvg
        uv.name = f"Mtoon1{tex}Texture.Uv"
        uv.inputs["UV Scale X"].default_value = 1.0
        uv.inputs["UV Scale Y"].default_value = 1.0
    if base_image is not None:
        tree.nodes["Mtoon1BaseColorTexture.Image"].image = base_image
        uv = tree.nodes["Mtoon1BaseColorTexture.Uv"]
        uv.inputs["UV Offset X"].default_value = 0.25
        uv.inputs["UV Offset Y"].default_value = 0.125
        uv.inputs["UV Scale X"].default_value = 2.0
        uv.inputs["UV Scale Y"].default_value = 0.5
    return mat
