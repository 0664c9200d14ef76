"""MToon materials: spec defaults, resolution order (ours / VRM Add-on nodes / Principled / diffuse),
the VRM Add-on node layout, caching, the convert operator, tooltips and registration."""
from __future__ import annotations

import dataclasses

import bpy

import conftest as C
from support.panels import draw_logged
from support.vrm_materials import VRM_SOCKETS, make_vrm_material

SPEC_DEFAULTS = dict(   # VRMC_materials_mtoon-1.0 README column (mtoon-facts §1)
    base_color=(1.0, 1.0, 1.0, 1.0), shade_color=(0.0, 0.0, 0.0), shading_shift=0.0, shading_toony=0.9,
    gi_equalization=0.9, emissive=(0.0, 0.0, 0.0), normal_scale=1.0, matcap_factor=(1.0, 1.0, 1.0),
    rim_color=(0.0, 0.0, 0.0), rim_fresnel_power=5.0, rim_lift=0.0, rim_lighting_mix=1.0,
    outline_width_mode="none", outline_width=0.0, outline_color=(0.0, 0.0, 0.0), outline_lighting_mix=1.0,
    uv_scroll_x=0.0, uv_scroll_y=0.0, uv_rotation=0.0, alpha_mode="OPAQUE", alpha_cutoff=0.5,
    double_sided=False, transparent_with_zwrite=False, render_queue_offset=0, cast_shadow=True,
    receive_shadow=True,
)


def _approx(a, b, tol=1e-5):
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(abs(float(x) - float(y)) <= tol for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return abs(float(a) - float(b)) <= tol
    return a == b


def _assert_params(p, expected: dict):
    bad = {k: (getattr(p, k), v) for k, v in expected.items() if not _approx(getattr(p, k), v)}
    assert not bad, bad


def _mats():
    from stylized_renderer.engine.features import materials

    return materials


def _image(name, w=4, h=4):
    return bpy.data.images.new(name, width=w, height=h)


# ---------------------------------------------------------------------------------------------
# VRM Add-on node layout, built without that add-on
# ---------------------------------------------------------------------------------------------


VRM_EXPECTED = dict(
    base_color=(0.5, 0.25, 0.125, 0.75), shade_color=(0.2, 0.1, 0.3), shading_shift=-0.3, shading_toony=0.7,
    gi_equalization=0.4, emissive=(1.0, 1.0, 0.0), matcap_factor=(0.9, 0.8, 0.7), rim_color=(0.1, 0.2, 0.3),
    rim_fresnel_power=3.0, rim_lift=0.15, rim_lighting_mix=0.6, outline_width_mode="worldCoordinates",
    outline_width=0.01, outline_color=(0.3, 0.0, 0.0), outline_lighting_mix=0.25, alpha_mode="MASK",
    alpha_cutoff=0.33, double_sided=True, transparent_with_zwrite=False, render_queue_offset=3,
)


# ---------------------------------------------------------------------------------------------
# defaults
# ---------------------------------------------------------------------------------------------

def test_params_defaults_equal_spec():
    from stylized_renderer.engine.core.assets.material import TEXTURE_SLOTS, MToonParams, TextureRef

    p = MToonParams()
    _assert_params(p, SPEC_DEFAULTS)
    assert p.textures == {} and p.source == "default" and not p.is_vrm_outline_material
    assert TextureRef(None) == TextureRef(image=None, uv_offset=(0.0, 0.0), uv_scale=(1.0, 1.0), scale=1.0)
    assert set(TEXTURE_SLOTS) == {"base_color", "shade_multiply", "normal", "shading_shift", "emissive",
                                  "rim_multiply", "matcap", "outline_width_multiply", "uv_animation_mask"}
    names = [f.name for f in dataclasses.fields(MToonParams)]
    for required in list(SPEC_DEFAULTS) + ["textures", "source", "is_vrm_outline_material"]:
        assert required in names


def test_property_defaults_resolve_to_spec(empty_scene):
    mat = bpy.data.materials.new("Fresh")
    props = mat.stylized_mtoon
    assert props.enabled is False
    props.enabled = True
    p = _mats().resolve_material(mat)
    assert p.source == "stylized"
    _assert_params(p, SPEC_DEFAULTS)
    assert p.textures == {}
    colour_props = [k for k in ("base_color", "shade_color", "emissive_color", "matcap_factor", "rim_color",
                                "outline_color")]
    for k in colour_props:
        assert props.bl_rna.properties[k].subtype == "COLOR", k
    rq = props.bl_rna.properties["render_queue_offset"]
    assert (rq.hard_min, rq.hard_max) == (-9, 9)
    st = empty_scene.stylized
    assert st.shadows and st.shadow_resolution == "2048" and st.outlines and not st.screen_space_outline
    assert st.fxaa and not st.profile_gpu and st.max_lights == 128 and st.screen_space_outline_width == 1.0


def test_every_property_has_a_tooltip(ext):
    from stylized_renderer.engine.blender import render_settings
    from stylized_renderer.engine.features.materials import properties

    missing = []
    for cls in properties.CLASSES + (render_settings.StylizedSceneSettings,):
        for prop in cls.bl_rna.properties:
            if prop.identifier == "rna_type":
                continue
            if not prop.description.strip():
                missing.append(f"{cls.__name__}.{prop.identifier}")
    assert not missing, missing
    assert "synchron" in render_settings.StylizedSceneSettings.bl_rna.properties["profile_gpu"].description
    assert bpy.types.Material.bl_rna.properties["stylized_mtoon"].description
    assert bpy.types.Scene.bl_rna.properties["stylized"].description


# ---------------------------------------------------------------------------------------------
# resolution
# ---------------------------------------------------------------------------------------------

def test_resolution_order(empty_scene):
    m = _mats()
    mat = make_vrm_material("Order")
    assert m.resolve_material(mat).source == "vrm_addon"          # (2) beats the Principled BSDF
    mat.stylized_mtoon.enabled = True
    mat.stylized_mtoon.shading_toony = 0.42
    p = m.resolve_material(mat)
    assert p.source == "stylized" and _approx(p.shading_toony, 0.42)   # (1) ours when enabled
    mat.stylized_mtoon.enabled = False
    mat.node_tree.nodes.remove(mat.node_tree.nodes["Mtoon1Material.Mtoon1Output"])
    assert m.resolve_material(mat).source == "principled"         # (3)
    mat.node_tree.nodes.clear()
    mat.diffuse_color = (0.1, 0.6, 0.2, 1.0)
    p = m.resolve_material(mat)
    assert p.source == "default" and _approx(p.base_color, (0.1, 0.6, 0.2, 1.0))   # (4)
    assert m.resolve_material(None).base_color[3] == 1.0


def test_vrm_addon_layout_resolves_to_its_values(empty_scene):
    img = _image("vrm_base")
    mat = make_vrm_material("VrmValues", with_principled=False, base_image=img)
    p = _mats().resolve_material(mat)
    assert p.source == "vrm_addon" and not p.is_vrm_outline_material
    _assert_params(p, VRM_EXPECTED)
    assert set(p.textures) == {"base_color"}        # image nodes without an image are not used
    ref = p.textures["base_color"]
    assert ref.image == img
    # KHR_texture_transform (glTF, V down) -> Blender UV space (V up): offset_y = 1 - scale_y - offset_y
    assert _approx(ref.uv_scale, (2.0, 0.5)) and _approx(ref.uv_offset, (0.25, 1.0 - 0.5 - 0.125))


def test_vrm_sockets_read_by_label_from_the_group_interface(empty_scene):
    """Sockets are found by the node group's interface names, regardless of their order."""
    ng = bpy.data.node_groups.new("VRM Add-on MToon 1.0 Output Revision 1", "ShaderNodeTree")
    for sname, stype, _ in reversed(VRM_SOCKETS):   # different order than usual
        ng.interface.new_socket(sname, in_out="INPUT", socket_type=stype)
    mat = bpy.data.materials.new("Reordered")
    mat.use_nodes = True
    node = mat.node_tree.nodes.new("ShaderNodeGroup")
    node.node_tree = ng
    node.name = "SomethingElse"            # found through the node group name prefix
    node.inputs["Shading Toony"].default_value = 0.55
    node.inputs["Alpha Mode"].default_value = 2
    p = _mats().resolve_material(mat)
    assert p.source == "vrm_addon"
    assert _approx(p.shading_toony, 0.55) and p.alpha_mode == "BLEND"


def test_vrm_outline_material_flagged(empty_scene):
    from stylized_renderer.engine.features.vrm import materials as vrm_addon

    outline = make_vrm_material("MToon Outline (Body)")
    assert _mats().resolve_material(outline).is_vrm_outline_material
    plain = C.add_material("MToon Outline (Hair)", (1, 1, 1))   # no VRM nodes: still the add-on's by name
    assert _mats().resolve_material(plain).is_vrm_outline_material
    assert not _mats().resolve_material(make_vrm_material("Body")).is_vrm_outline_material
    me = bpy.data.meshes.new("m")
    ob = bpy.data.objects.new("o", me)
    mod = ob.modifiers.new("MToon Outline (Body)", "NODES")
    assert vrm_addon.is_outline_modifier(mod)
    assert not vrm_addon.is_outline_modifier(ob.modifiers.new("GeometryNodes", "NODES"))


def test_principled_fallback(empty_scene):
    mat = C.add_material("Toon", (0.8, 0.2, 0.1))
    bsdf = next(n for n in mat.node_tree.nodes if n.type == "BSDF_PRINCIPLED")
    bsdf.inputs["Emission Color"].default_value = (1.0, 0.5, 0.0, 1.0)
    bsdf.inputs["Emission Strength"].default_value = 2.0
    bsdf.inputs["Alpha"].default_value = 0.5
    mat.use_backface_culling = True
    p = _mats().resolve_material(mat)
    assert p.source == "principled"
    _assert_params(p, dict(base_color=(0.8, 0.2, 0.1, 0.5), emissive=(2.0, 1.0, 0.0), alpha_mode="BLEND",
                           double_sided=False, shading_toony=0.9, shading_shift=0.0))
    # shade colour: darker than the base, same hue, a little more saturated
    s = p.shade_color
    assert all(sc < bc for sc, bc in zip(s, (0.8, 0.2, 0.1)))
    assert s[0] > s[1] > s[2]
    assert s[0] / max(s[2], 1e-6) > 0.8 / 0.1


def test_principled_textures(empty_scene):
    mat = C.add_material("Textured", (1, 1, 1))
    tree = mat.node_tree
    bsdf = next(n for n in tree.nodes if n.type == "BSDF_PRINCIPLED")
    base, nimg = _image("albedo"), _image("normals")
    tex = tree.nodes.new("ShaderNodeTexImage")
    tex.image = base
    tree.links.new(tex.outputs["Color"], bsdf.inputs["Base Color"])
    tree.links.new(tex.outputs["Alpha"], bsdf.inputs["Alpha"])
    ntex = tree.nodes.new("ShaderNodeTexImage")
    ntex.image = nimg
    nmap = tree.nodes.new("ShaderNodeNormalMap")
    nmap.inputs["Strength"].default_value = 0.7
    tree.links.new(ntex.outputs["Color"], nmap.inputs["Color"])
    tree.links.new(nmap.outputs["Normal"], bsdf.inputs["Normal"])
    p = _mats().resolve_material(mat)
    assert p.textures["base_color"].image == base
    assert p.textures["shade_multiply"].image == base
    assert p.textures["normal"].image == nimg and _approx(p.textures["normal"].scale, 0.7)
    assert _approx(p.normal_scale, 0.7)
    assert p.alpha_mode == "MASK" and _approx(p.base_color, (1.0, 1.0, 1.0, 1.0))


def test_our_textures_and_uv_animation_convention(empty_scene):
    mat = bpy.data.materials.new("Scroll")
    props = mat.stylized_mtoon
    props.enabled = True
    img = _image("scroll")
    t = props.texture("emissive")
    t.image = img
    t.uv_offset = (0.5, 0.25)
    t.uv_scale = (2.0, 3.0)
    props.uv_animation_scroll_x = 0.1
    props.uv_animation_scroll_y = 0.2
    props.uv_animation_rotation = 0.3
    p = _mats().resolve_material(mat)
    assert set(p.textures) == {"emissive"}
    assert p.textures["emissive"].image == img
    assert _approx(p.textures["emissive"].uv_offset, (0.5, 0.25))
    assert _approx(p.textures["emissive"].uv_scale, (2.0, 3.0))
    # mtoon-facts §2.7: Blender V-up = CCW rotation about 0.5 and scroll (sx, -sy)
    assert _approx((p.uv_scroll_x, p.uv_scroll_y, p.uv_rotation), (0.1, -0.2, 0.3))


# ---------------------------------------------------------------------------------------------
# cache
# ---------------------------------------------------------------------------------------------

def test_cache_and_invalidation(empty_scene):
    """A session's MaterialCache: a hit walks no node tree; an invalidation (what the session does
    for a Material in Blender's depsgraph updates) or a structural change re-reads."""
    from stylized_renderer.engine.features.materials.cache import MaterialCache

    m = MaterialCache()
    mat = C.add_material("Cached", (0.5, 0.5, 0.5))
    a = m.resolve(mat)
    assert m.resolve(mat) is a                               # cached: no node walk on a hit
    bsdf = next(n for n in mat.node_tree.nodes if n.type == "BSDF_PRINCIPLED")
    bsdf.inputs["Base Color"].default_value = (0.1, 0.2, 0.3, 1.0)
    assert m.resolve(mat) is a                               # socket edits wait for an invalidation ...
    m.invalidate(mat.name)                                   # ... (the session's depsgraph sync calls it)
    b = m.resolve(mat)
    assert b is not a and _approx(b.base_color, (0.1, 0.2, 0.3, 1.0))
    mat.node_tree.nodes.new("ShaderNodeTexImage")            # structural change: fingerprint catches it
    assert m.resolve(mat) is not b
    c = m.resolve(mat)
    mat.stylized_mtoon.enabled = True                        # the enabled flag is in the fingerprint
    assert m.resolve(mat) is not c and m.resolve(mat).source == "stylized"
    assert MaterialCache().resolve(mat) is not m.resolve(mat)   # each owner has its own entries
    m.invalidate()
    assert len(m) == 0


def _synced_viewport_session(scene):
    """A viewport session fed Blender's depsgraph updates, as view_update feeds it."""
    from stylized_renderer.engine.blender.session import StylizedSession

    s = StylizedSession(viewport=True)

    def on_update(_scene, depsgraph):
        s.sync(depsgraph, depsgraph.updates)

    bpy.app.handlers.depsgraph_update_post.append(on_update)
    return s, on_update


def test_depsgraph_update_invalidates(empty_scene):
    """Through the viewport session's sync: a node edit and an edit of our MToon properties reach
    the session's cache through Blender's depsgraph updates (no module-level cache, no callback)."""
    mat = C.add_material("Dg", (0.5, 0.5, 0.5))
    ob = C.add_mesh_object(empty_scene, "DgCube", *C.cube_geometry(), material=mat)
    assert ob is not None
    bpy.context.view_layer.update()
    s, hook = _synced_viewport_session(empty_scene)
    try:
        cache = s.materials.cache
        a = cache.resolve(mat)
        bsdf = next(n for n in mat.node_tree.nodes if n.type == "BSDF_PRINCIPLED")
        bsdf.inputs["Base Color"].default_value = (0.9, 0.1, 0.1, 1.0)
        mat.node_tree.update_tag()
        bpy.context.view_layer.update()
        b = cache.resolve(mat)
        assert b is not a and _approx(b.base_color, (0.9, 0.1, 0.1, 1.0))
        mat.stylized_mtoon.enabled = True
        bpy.context.view_layer.update()
        c = cache.resolve(mat)
        mat.stylized_mtoon.rim_lift = 0.3                    # a value outside the fingerprint
        bpy.context.view_layer.update()
        assert _approx(cache.resolve(mat).rim_lift, 0.3) and cache.resolve(mat) is not c
    finally:
        bpy.app.handlers.depsgraph_update_post.remove(hook)
        s.free()


# ---------------------------------------------------------------------------------------------
# operators
# ---------------------------------------------------------------------------------------------

def test_convert_operator_from_vrm_nodes(empty_scene):
    from stylized_renderer.operators.materials_ops import STYLIZED_OT_convert_to_mtoon

    assert {"REGISTER", "UNDO"} <= set(STYLIZED_OT_convert_to_mtoon.bl_options)
    img = _image("conv_base")
    mat = make_vrm_material("ConvVrm", base_image=img)
    ob = C.add_mesh_object(empty_scene, "ConvCube", *C.cube_geometry(), material=mat)
    before = _mats().resolve_material(mat)
    with bpy.context.temp_override(object=ob, material=mat):
        assert bpy.ops.stylized.convert_to_mtoon() == {"FINISHED"}
    props = mat.stylized_mtoon
    assert props.enabled
    after = _mats().resolve_material(mat)
    assert after.source == "stylized"
    fields = [f.name for f in dataclasses.fields(before) if f.name not in ("source", "textures", "images")]
    _assert_params(after, {k: getattr(before, k) for k in fields})
    assert {i.name for i in after.images} == {i.name for i in before.images} == {img.name}
    assert after.textures["base_color"].image == img
    assert _approx(after.textures["base_color"].uv_offset, before.textures["base_color"].uv_offset)
    # already MToon: nothing to do unless overwrite
    with bpy.context.temp_override(object=ob, material=mat):
        assert bpy.ops.stylized.convert_to_mtoon() == {"CANCELLED"}


def test_convert_operator_all_selected_from_principled(empty_scene):
    m1 = C.add_material("SelA", (0.7, 0.3, 0.2))
    m2 = C.add_material("SelB", (0.2, 0.3, 0.7))
    o1 = C.add_mesh_object(empty_scene, "A", *C.cube_geometry(), material=m1)
    o2 = C.add_mesh_object(empty_scene, "B", *C.cube_geometry(), material=m2)
    with bpy.context.temp_override(object=o1, material=m1, selected_objects=[o1, o2]):
        assert bpy.ops.stylized.convert_to_mtoon(all_selected=True) == {"FINISHED"}
    for mat, col in ((m1, (0.7, 0.3, 0.2)), (m2, (0.2, 0.3, 0.7))):
        assert mat.stylized_mtoon.enabled
        assert _approx(tuple(mat.stylized_mtoon.base_color), col + (1.0,))
        assert tuple(mat.stylized_mtoon.shade_color) != (0.0, 0.0, 0.0)


def test_standard_view_transform_operator(empty_scene):
    from stylized_renderer.operators.materials_ops import STYLIZED_OT_set_standard_view_transform

    assert "UNDO" in STYLIZED_OT_set_standard_view_transform.bl_options
    empty_scene.view_settings.view_transform = "AgX"
    with bpy.context.temp_override(scene=empty_scene):
        assert bpy.ops.stylized.set_standard_view_transform() == {"FINISHED"}
    assert empty_scene.view_settings.view_transform == "Standard"


# ---------------------------------------------------------------------------------------------
# panels and registration
# ---------------------------------------------------------------------------------------------

def test_panels_registered_for_stylized(ext):
    names = ["STYLIZED_PT_material_mtoon", "STYLIZED_PT_material_mtoon_lighting", "STYLIZED_PT_material_mtoon_shading",
             "STYLIZED_PT_material_mtoon_rim", "STYLIZED_PT_material_mtoon_outline",
             "STYLIZED_PT_material_mtoon_uv_animation", "STYLIZED_PT_material_mtoon_rendering",
             "STYLIZED_PT_render_settings"]
    for n in names:
        cls = getattr(bpy.types, n, None)
        assert cls is not None and cls.is_registered, n
        assert cls.COMPAT_ENGINES == {"STYLIZED"}
    assert bpy.types.STYLIZED_PT_material_mtoon.bl_context == "material"
    assert bpy.types.STYLIZED_PT_render_settings.bl_context == "render"


def test_register_unregister_leaves_no_properties(ext):
    ext.unregister()
    C.set_registered(False)
    try:
        for owner in (bpy.types.Material, bpy.types.Scene):
            assert not hasattr(owner, "stylized_mtoon") and not hasattr(owner, "stylized")
        assert "stylized_mtoon" not in bpy.types.Material.bl_rna.properties
        assert "stylized" not in bpy.types.Scene.bl_rna.properties
        for name in dir(bpy.app.handlers):
            lst = getattr(bpy.app.handlers, name)
            if isinstance(lst, list):
                assert not [h for h in lst if getattr(h, "__module__", "").startswith("stylized_renderer.engine.features.materials")]
    finally:
        C.ensure_registered()
    assert hasattr(bpy.types.Material, "stylized_mtoon") and hasattr(bpy.types.Scene, "stylized")


def test_panels_draw(empty_scene):
    from types import SimpleNamespace

    from stylized_renderer.panels import materials_panel, render_panel

    mat = C.add_material("Panel", (0.5, 0.4, 0.3))
    ctx = SimpleNamespace(material=mat, scene=empty_scene, engine="STYLIZED")
    assert materials_panel.STYLIZED_PT_material_mtoon.poll(ctx)
    assert not materials_panel.STYLIZED_PT_material_mtoon_lighting.poll(ctx)   # sub-panels need "Use MToon"
    log = draw_logged(materials_panel.STYLIZED_PT_material_mtoon, ctx)
    assert ("operator", "stylized.convert_to_mtoon") in log
    assert any(k == "label" and "Principled" in t for k, t in log)
    assert ("prop", "enabled") in draw_logged(materials_panel.STYLIZED_PT_material_mtoon, ctx, header=True)
    mat.stylized_mtoon.enabled = True
    drawn = set()
    for cls in materials_panel.CLASSES:
        assert cls.poll(ctx)
        drawn |= {a for k, a in draw_logged(cls, ctx) if k in ("prop", "template_ID")}
    props = mat.stylized_mtoon.bl_rna.properties
    expected = {p.identifier for p in props if p.identifier not in ("rna_type", "enabled", "name")
                and not p.identifier.startswith("tex_")}
    assert expected <= drawn, expected - drawn
    assert not render_panel.STYLIZED_PT_render_settings.poll(SimpleNamespace(scene=empty_scene, engine="CYCLES"))
    empty_scene.view_settings.view_transform = "AgX"
    log = draw_logged(render_panel.STYLIZED_PT_render_settings, ctx)
    assert ("operator", "stylized.set_standard_view_transform") in log
    empty_scene.view_settings.view_transform = "Standard"
    assert ("operator", "stylized.set_standard_view_transform") not in draw_logged(render_panel.STYLIZED_PT_render_settings, ctx)
    drawn = set()
    for cls in render_panel.CLASSES:
        drawn |= {a for k, a in draw_logged(cls, ctx) if k == "prop"}
        if hasattr(cls, "draw_header"):
            drawn |= {a for k, a in draw_logged(cls, ctx, header=True) if k == "prop"}
    scene_props = {p.identifier for p in empty_scene.stylized.bl_rna.properties if p.identifier not in ("rna_type", "name")}
    assert scene_props <= drawn, scene_props - drawn
