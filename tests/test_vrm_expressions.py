"""VRM expressions as a source of morph weights (engine/features/vrm/expressions.py, docs/vrm.md).

* The evaluator against the VRM 1.0 specification (isBinary, override none/block/blend, the
  interaction of both), on numpy inputs.
* The real VRM 0.x avatar (../shared/testdata/vrm/Godette_vrm0.blend) with the VRM Add-on enabled:
  keyed expression previews change the face in ``render(animation=True)`` frames (the add-on only
  copies previews into shape keys from a frame-change handler on the original data, so before this
  the face stayed blank); the same file opened WITHOUT the add-on renders the same frames.
* A VRM 1.0 avatar authored with the add-on on the same face: presets, a custom expression,
  isBinary and overrides evaluated from the real data.
Tests needing ../shared or the add-on skip with the reason.
"""
from __future__ import annotations

import bpy
import numpy as np
import pytest

import conftest as C
from stylized_renderer.engine.features.preview import control as preview
from stylized_renderer.engine.features.vrm import rules as vrm_rules
from support.vrm_addon import disable_vrm_addon
from support.vrm_scenes import (
    ANGRY,
    ANGRY_BINDS,
    key_preview,
    make_vrm1,
    needs_godette,
    open_godette,
    runtime_for_scene,
)

ART = C.ARTIFACTS / "vrm"


# ------------------------------------------------------------------------------------------------
# the evaluator (VRM 1.0 expressions.md) on numpy inputs
# ------------------------------------------------------------------------------------------------

def _ev(values, binary=None, overrides=None, category=None):
    from stylized_renderer.engine.features.vrm import expressions as vx

    n = len(values)
    return vx.evaluate(np.asarray(values, float), np.zeros(n, bool) if binary is None else binary,
                       np.zeros((n, 3), int) if overrides is None else overrides,
                       np.full(n, vrm_rules.CAT_NONE) if category is None else category)


def test_values_are_clamped_and_binary_thresholds_at_half(ext):
    out = _ev([-0.5, 0.3, 1.7, float("nan"), 0.5, 0.51, 0.2],
              binary=np.array([False, False, False, False, True, True, True]))
    assert np.allclose(out, [0.0, 0.3, 1.0, 0.0, 0.0, 1.0, 0.0])


def test_override_block_blend_and_same_kind(ext):

    B, L, M, N = vrm_rules.CAT_BLINK, vrm_rules.CAT_LOOK_AT, vrm_rules.CAT_MOUTH, vrm_rules.CAT_NONE
    NONE, BLOCK, BLEND = vrm_rules.OVERRIDE_NONE, vrm_rules.OVERRIDE_BLOCK, vrm_rules.OVERRIDE_BLEND
    # happy (blocks blink), blink, aa, lookUp, custom
    cat = np.array([N, B, M, L, N])
    ov = np.zeros((5, 3), int)
    ov[0] = (BLOCK, NONE, BLEND)          # happy: blink blocked, mouth blended
    out = _ev([0.01, 1.0, 1.0, 1.0, 1.0], overrides=ov, category=cat)
    # block: any weight > 0 zeroes the blink group; blend: mouth x (1 - 0.01); lookAt and custom untouched
    assert np.allclose(out, [0.01, 0.0, 0.99, 1.0, 1.0])
    out = _ev([0.0, 1.0, 1.0, 1.0, 1.0], overrides=ov, category=cat)
    assert np.allclose(out, [0.0, 1.0, 1.0, 1.0, 1.0])          # a zero weight overrides nothing
    # blend amounts add up and saturate: 0.3 + 0.4 -> x0.3, 0.8 + 0.7 -> x0
    ov2 = np.zeros((3, 3), int)
    ov2[0, 2] = ov2[1, 2] = BLEND
    cat2 = np.array([N, N, M])
    assert np.allclose(_ev([0.3, 0.4, 1.0], overrides=ov2, category=cat2), [0.3, 0.4, 0.3])
    assert np.allclose(_ev([0.8, 0.7, 1.0], overrides=ov2, category=cat2), [0.8, 0.7, 0.0])
    # settings of the same kind are invalid: blinkLeft blocking blink does nothing
    ov3 = np.zeros((2, 3), int)
    ov3[0, 0] = BLOCK
    assert np.allclose(_ev([1.0, 1.0], overrides=ov3, category=np.array([B, B])), [1.0, 1.0])


def test_binary_and_override_interaction(ext):
    """expressions.md 'Interaction between override and isBinary'."""

    B, N = vrm_rules.CAT_BLINK, vrm_rules.CAT_NONE
    ov = np.zeros((2, 3), int)
    ov[0, 0] = vrm_rules.OVERRIDE_BLEND
    cat = np.array([N, B])
    # an overriding binary expression uses its binary output: 0.4 -> 0 -> blink unaffected
    assert np.allclose(_ev([0.4, 0.6], binary=np.array([True, False]), overrides=ov, category=cat), [0.0, 0.6])
    # 0.6 -> 1 -> blink fully suppressed (blend with output 1)
    assert np.allclose(_ev([0.6, 0.6], binary=np.array([True, False]), overrides=ov, category=cat), [1.0, 0.0])
    # an overridden binary expression is suppressed completely as soon as the effect is > 0
    assert np.allclose(_ev([0.1, 1.0], binary=np.array([False, True]), overrides=ov, category=cat), [0.1, 0.0])
    assert np.allclose(_ev([0.1, 1.0], binary=np.array([False, False]), overrides=ov, category=cat), [0.1, 0.9])


def test_bind_matrix_product(ext):
    """Key weights = bind matrix @ outputs (a key bound by two expressions sums their binds)."""
    from stylized_renderer.engine.features.vrm import expressions as vx

    src = vx.VrmMorphSource.__new__(vx.VrmMorphSource)
    src.bind_matrix = np.array([[1.0, 0.0, 0.25], [0.0, 1.0, 0.25]])   # keys: blink_l, blink_r
    assert np.allclose(src.key_weights(np.array([0.5, 0.0, 1.0])), [0.75, 0.25])


# ------------------------------------------------------------------------------------------------
# the real avatar, with and without the VRM Add-on
# ------------------------------------------------------------------------------------------------


def render_animation(scene, first, last) -> dict:
    """{frame: linear RGBA pixels} of render(animation=True) over first..last."""
    from tools.render_capture import LAST_RENDER as last_render

    frames = {}

    def grab(sc, *_a):
        px = last_render.get("pixels")
        if px is not None:
            frames[sc.frame_current] = px.copy()

    scene.frame_start, scene.frame_end = first, last
    scene.render.filepath = str(ART / "anim" / "f_")
    bpy.app.handlers.render_post.append(grab)
    try:
        bpy.ops.render.render(animation=True, scene=scene.name)
    finally:
        bpy.app.handlers.render_post.remove(grab)
    assert sorted(frames) == list(range(first, last + 1)), sorted(frames)
    return frames


def face_diff(a, b) -> int:
    """Pixels of the face region (the image's centre) that changed visibly."""
    h, w = a.shape[:2]
    box = (slice(h // 6, h - h // 6), slice(w // 4, w - w // 4))
    return int((np.abs(a[box][..., :3] - b[box][..., :3]).max(axis=2) > 0.05).sum())


def reference_stills(scene, drop_vrm) -> dict:
    """Stills of frames 1 and 3 WITHOUT any VRM expression: the angry binds typed into the shape
    keys by hand (frame 3) or zero (frame 1).  ``drop_vrm`` removes the expression data."""
    arm = bpy.data.objects["Armature"]
    arm.data.animation_data_clear()
    drop_vrm(arm)
    from stylized_renderer.engine.features.vrm import expressions as vx

    assert vx.expression_set_of(arm) is None
    keys = bpy.data.objects["Face"].data.shape_keys.key_blocks
    out = {}
    for f, scale in ((1, 0.0), (3, 1.0)):
        for name, w in ANGRY_BINDS.items():
            keys[name].value = w * scale
        scene.frame_set(f)
        out[f] = C.render_scene(scene)
    return out


def _vrm0_groups(arm):
    """The VRM 0 blend shape groups stored on ``arm`` (the add-on's data, read without it)."""
    from stylized_renderer.engine.features.vrm import expressions as vx

    ext = vx.extension_props(arm.data)
    assert ext is not None, f"{arm.name}: no VRM data"
    return ext["vrm0"]["blend_shape_master"]["blend_shape_groups"]


def _drop_with_addon(arm):
    arm.data.vrm_addon_extension.spec_version = "1.0"     # VRM 1.0 without binds: no expressions


def _drop_raw(arm):
    from stylized_renderer.engine.features.vrm import expressions as vx

    holder = arm.data.bl_system_properties_get() if hasattr(arm.data, "bl_system_properties_get") else arm.data
    del holder[vx.EXT]


@needs_godette
def test_keyed_previews_change_the_face_in_animation_renders(vrm_addon, tmp_path):
    scene = open_godette()
    arm = bpy.data.objects["Armature"]
    grp = key_preview(arm, ANGRY, [(1, 0.0), (3, 1.0)])
    assert grp.name == "Angry"
    keyed = tmp_path / "godette_keyed.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(keyed), copy=True)
    frames = render_animation(scene, 1, 3)
    for f, px in frames.items():
        C.save_png(px, ART / f"addon_frame{f}.png")
    # frame 1: expression 0, frame 3: expression 1 (angry brows, half-closed eyes, open mouth)
    changed = face_diff(frames[1], frames[3])
    assert changed > 60, changed
    assert 0 < face_diff(frames[1], frames[2])
    # each frame equals a still of the expression's binds typed into the shape keys by hand
    ref = reference_stills(scene, _drop_with_addon)
    for f in (1, 3):
        assert np.abs(ref[f] - frames[f]).max() < 2e-3, (f, np.abs(ref[f] - frames[f]).max())


@needs_godette
def test_the_same_file_without_the_addon_renders_the_same_expressions(vrm_addon, tmp_path):
    scene = open_godette()
    key_preview(bpy.data.objects["Armature"], ANGRY, [(1, 0.0), (3, 1.0)])
    keyed = tmp_path / "godette_keyed.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(keyed), copy=True)
    disable_vrm_addon()
    scene = open_godette(keyed)
    assert not hasattr(bpy.types.Armature, "vrm_addon_extension")
    bpy.data.objects["Armature"].stylized_spring_bones = False   # the hair would settle (engine/features/springs)
    raw = render_animation(scene, 1, 3)
    for f, px in raw.items():
        C.save_png(px, ART / f"raw_frame{f}.png")
    assert face_diff(raw[1], raw[3]) > 60
    # (the materials differ slightly from the add-on run: with the add-on, its RNA supplies MToon
    # values that have no socket, so the pictures are compared within each run)
    ref = reference_stills(scene, _drop_raw)
    for f in (1, 3):
        assert np.abs(ref[f] - raw[f]).max() < 2e-3, (f, np.abs(ref[f] - raw[f]).max())


@needs_godette
def test_without_the_addon_the_stored_previews_drive_the_keys(ext):
    """No add-on, no keyframes: the stored preview of a group is its value; bound keys take the
    expression result, unbound keys (HideBlush is bound by Sorrow only) keep their values."""
    assert not hasattr(bpy.types.Armature, "vrm_addon_extension")
    open_godette()
    from stylized_renderer.engine.features.vrm import expressions as vx

    arm = bpy.data.objects["Armature"]
    s = vx.expression_set_of(arm)
    assert s is not None and s.spec == vx.SPEC_VRM0 and s.count == 17
    angry, joy = s.by_name("Angry"), s.by_name("Joy")
    assert angry is not None and angry.preset == "angry" and joy is not None and joy.preset == "happy"
    groups = _vrm0_groups(arm)
    groups[ANGRY]["preview"] = 1.0
    keys = bpy.data.objects["Face"].data.shape_keys.key_blocks
    keys["angled_eyebrows"].value = 0.0           # stale key value: ignored for a bound key
    keys["HideHairBalls"].value = 1.0              # a key no expression binds keeps its own value
    from stylized_renderer.engine.blender.sources.timeline import TimelineReader
    from stylized_renderer.engine.features.vrm.driver import VrmDriver

    rt = runtime_for_scene()
    reader = TimelineReader(rt.scene, rt, expressions=VrmDriver())
    node = next(n for n, ob, _ in reader.morph_bindings if ob == "Face")
    names = rt.morph_key_names(node)
    w = dict(zip(names, reader.read_morph_weights(None)[node]))
    assert w["angled_eyebrows"] == pytest.approx(1.0)
    assert w["ah"] == pytest.approx(0.25) and w["blink_left"] == pytest.approx(0.25)
    assert w["HideHairBalls"] == pytest.approx(1.0) and w["look_up"] == 0.0


# ------------------------------------------------------------------------------------------------
# a VRM 1.0 avatar authored with the add-on
# ------------------------------------------------------------------------------------------------


@needs_godette
def test_vrm1_avatar_expressions_binary_and_overrides(vrm_addon):
    scene = open_godette()
    arm = bpy.data.objects["Armature"]
    ex = make_vrm1(arm)
    from stylized_renderer.engine.blender.sources.timeline import TimelineReader
    from stylized_renderer.engine.features.vrm import expressions as vx
    from stylized_renderer.engine.features.vrm.driver import VrmDriver

    s = vx.expression_set_of(arm)
    assert s is not None and s.spec == vx.SPEC_VRM1
    assert s.names[:18] == list(vrm_rules.PRESET_NAMES) and s.names[18:] == ["wink"]
    happy = s.by_name("happy")
    assert happy is not None and happy.overrides == (vrm_rules.OVERRIDE_BLOCK, vrm_rules.OVERRIDE_NONE, vrm_rules.OVERRIDE_BLEND)
    rt = runtime_for_scene()
    reader = TimelineReader(rt.scene, rt, expressions=VrmDriver())
    node = next(n for n, ob, _ in reader.morph_bindings if ob == "Face")
    names = rt.morph_key_names(node)

    keys = bpy.data.objects["Face"].data.shape_keys.key_blocks

    def weights(**previews):
        for e in vx.PRESETS:
            getattr(ex.preset, e[1]).preview = previews.get(e[0], 0.0)
        ex.custom[0].preview = previews.get("wink", 0.0)
        for kb in keys[1:]:     # stale key values (as in F12 animations): the expressions decide
            kb.value = 0.0
        return dict(zip(names, reader.read_morph_weights(bpy.context.evaluated_depsgraph_get())[node]))

    w = weights(angry=1.0, blink=1.0, aa=0.8)
    assert (w["angled_eyebrows"], w["blink_left"], w["blink_right"], w["ah"]) == pytest.approx((1, 1, 1, 0.8))
    w = weights(happy=0.25, blink=1.0, aa=0.8)           # blink blocked, mouth x 0.75
    assert (w["blink_left"], w["ah"], w["look_up"]) == pytest.approx((0.0, 0.6, 0.125))
    w = weights(happy=0.25, blink=1.0, wink=1.0)         # a custom expression is not overridden
    assert w["blink_left"] == pytest.approx(1.0) and w["blink_right"] == 0.0
    assert weights(surprised=0.5)["oh"] == 0.0            # binary: 0.5 -> 0
    assert weights(surprised=0.51)["oh"] == pytest.approx(1.0)
    # and a frame rendered through F12 shows it
    weights()
    base = C.render_scene(scene)
    weights(angry=1.0, blink=1.0)
    px = C.render_scene(scene)
    C.save_png(px, ART / "vrm1_angry_blink.png")
    assert face_diff(base, px) > 60
    # the panel: 18 presets (greyed where unbound), then the custom expression
    lay = _panel(scene, arm)
    assert lay.labels()[0] == "Armature: VRM 1.0 | 18 presets, 1 custom"
    sliders = list(_sliders(lay))
    assert sliders[:19] == ["happy", "angry", "sad (not bound)", "relaxed (not bound)", "surprised", "aa",
                            "ih (not bound)", "ou (not bound)", "ee (not bound)", "oh (not bound)", "blink",
                            "blinkLeft (not bound)", "blinkRight (not bound)", "lookUp (not bound)",
                            "lookDown (not bound)", "lookLeft (not bound)", "lookRight (not bound)",
                            "neutral (not bound)", "wink"], sliders


# ------------------------------------------------------------------------------------------------
# material colour binds
# ------------------------------------------------------------------------------------------------

def test_colour_and_uv_binds_on_params(ext):
    """base + sum_e w_e (target_e - base) per colour type; UV lerps towards the bind (V-up form)."""
    from stylized_renderer.engine.core.assets.material import MToonParams, TextureRef
    from stylized_renderer.engine.features.vrm import binds as vrm_binds

    p = MToonParams(base_color=(0.8, 0.6, 0.5, 1.0), shade_color=(0.4, 0.3, 0.2),
                    textures={"base_color": TextureRef(uv_offset=(0.0, 0.0), uv_scale=(1.0, 1.0)),
                              "matcap": TextureRef()})
    # two expressions at 0.5 each towards red and towards blue
    frame = {"M": {"color": (0.5 * np.array([1, 0, 0, 1.0]) + 0.5 * np.array([0, 0, 1, 1.0]), 1.0),
                   "uv": (0.5 * np.array([2.0, 2.0, 0.5, 0.0]), 0.5)}}
    q = vrm_binds.apply("M", p, frame)
    assert q.base_color == pytest.approx((0.5, 0.0, 0.5, 1.0))
    assert q.shade_color == p.shade_color and p.base_color == (0.8, 0.6, 0.5, 1.0)   # a copy
    # glTF scale 1 -> 1.5, offset (0,0) -> (0.25, 0); Blender's V-up offset = 1 - sy - oy
    assert q.textures["base_color"].uv_scale == pytest.approx((1.5, 1.5))
    assert q.textures["base_color"].uv_offset == pytest.approx((0.25, 1.0 - 1.5 - 0.0))
    assert q.textures["matcap"] is p.textures["matcap"]
    assert vrm_binds.apply("Other", p, frame) is p
    assert vrm_binds.apply("M", p, {}) is p          # another frame's binds never reach this one


@needs_godette
def test_colour_bind_changes_the_face_colour(vrm_addon):
    """F12 through the session: the reader's frame binds reach the materials (a regression fails
    here; it used to be a skip when the session's source lacked "vrm_binds")."""
    scene = open_godette()
    arm = bpy.data.objects["Armature"]
    grp = arm.data.vrm_addon_extension.vrm0.blend_shape_master.blend_shape_groups[ANGRY]
    mv = grp.material_values.add()
    mv.material = bpy.data.materials["Face"]
    mv.property_name = "_Color"
    mv.target_value_as_rgb = (1.0, 0.0, 0.0)
    grp.preview = 0.0
    base = C.render_scene(scene)
    grp.preview = 1.0
    red = C.render_scene(scene)
    C.save_png(red, ART / "angry_red_face.png")
    h, w = base.shape[:2]
    box = (slice(h // 4, h // 2), slice(w // 3, 2 * w // 3))      # cheeks / mouth
    b, r = base[box][..., :3].reshape(-1, 3), red[box][..., :3].reshape(-1, 3)
    assert r[:, 0].mean() > 0.8 * b[:, 0].mean()
    assert r[:, 1].mean() < 0.5 * b[:, 1].mean(), (b.mean(axis=0), r.mean(axis=0))   # green gone: red face


# ------------------------------------------------------------------------------------------------
# the Expressions panel speaks VRM
# ------------------------------------------------------------------------------------------------

def _panel(scene, obj):
    from stylized_renderer.engine.features.expressions import character as ex
    from stylized_renderer.panels import expressions_panel
    from support.panels import Ctx, draw_panel

    ex.sync_items(scene, obj)
    return draw_panel(expressions_panel.STYLIZED_PT_viewport_expressions, Ctx(scene, obj))


def _sliders(lay):
    return {kw.get("text"): d for d, p, kw in lay.props() if p == "value"}


@needs_godette
def test_panel_lists_presets_custom_and_raw_keys(vrm_addon):
    scene = open_godette()
    arm = bpy.data.objects["Armature"]
    groups = arm.data.vrm_addon_extension.vrm0.blend_shape_master.blend_shape_groups
    smirk = groups.add()
    smirk.name = "Smirk"
    b = smirk.binds.add()
    b.mesh.mesh_object_name = "Face"
    b.index = "look_left"
    lay = _panel(scene, bpy.data.objects["Face"])
    labels = lay.labels()
    assert labels[0] == "Armature: VRM 0.x | 17 presets, 1 custom", labels
    panels = [a[0] for k, a, kw in lay.log if k == "panel"]
    assert panels[:3] == ["stylized_expr_vrm_presets", "stylized_expr_vrm_custom", "stylized_expr_shape_keys"]
    assert lay.log[[i for i, (k, a, kw) in enumerate(lay.log) if k == "panel"][2]][2]["default_closed"] is True
    sliders = list(_sliders(lay))

    # presets first in the VRM 1.0 order (a VRM 0.x group shows its own name), then custom
    presets = [t.split(" ")[0] for t in sliders[:17]]
    assert presets == [p for p in vrm_rules.PRESET_NAMES if p != "surprised"], sliders
    assert sliders[0] == "happy (Joy)" and "neutral (Neutral) (not bound)" in sliders
    assert "surprised (not defined)" in labels
    assert sliders[17] == "Smirk"
    # then the raw shape keys (collapsed); keys an expression binds are marked
    assert "angled_eyebrows (expression)" in sliders and "HideHairBalls" in sliders
    # a slider writes the add-on's preview (the add-on's own panel shows the same value)
    joy = _sliders(lay)["happy (Joy)"]
    joy.value = 0.75
    assert groups[7].name == "Joy" and groups[7].preview == pytest.approx(0.75)
    assert joy.value == pytest.approx(0.75)
    # keyframes on the add-on's property; Reset All zeroes previews and keys
    with bpy.context.temp_override(active_object=arm, object=arm):
        scene.frame_set(5)
        assert bpy.ops.stylized.vrm_expression_keyframe(name="Joy") == {"FINISHED"}
        fcs = [fc.data_path for fc in _fcurves(arm.data)]
        assert "vrm_addon_extension.vrm0.blend_shape_master.blend_shape_groups[7].preview" in fcs
        arm.data.animation_data_clear()
        assert bpy.ops.stylized.vrm_expression_set(name="Angry", value=1.0) == {"FINISHED"}
        assert groups[ANGRY].preview == 1.0
        bpy.data.objects["Face"].data.shape_keys.key_blocks["HideBlush"].value = 1.0
        assert bpy.ops.stylized.expression_reset_all() == {"FINISHED"}
        with pytest.raises(RuntimeError, match="No VRM expression named 'Nope' on 'Armature'"):
            bpy.ops.stylized.vrm_expression_set(name="Nope", value=1.0)
    assert all(g.preview == 0.0 for g in groups)
    assert all(kb.value == 0.0 for kb in bpy.data.objects["Face"].data.shape_keys.key_blocks[1:])


def _fcurves(id_data):
    from stylized_renderer.engine.blender.importer.actions import pick_slot, slot_fcurves

    ad = id_data.animation_data
    return slot_fcurves(ad.action, pick_slot(ad.action, "ARMATURE", ad, id_data.name))


@needs_godette
def test_panel_without_the_addon_writes_and_keys_the_stored_previews(ext):
    assert not hasattr(bpy.types.Armature, "vrm_addon_extension")
    scene = open_godette()
    arm = bpy.data.objects["Armature"]
    lay = _panel(scene, arm)
    assert lay.labels()[0] == "Armature: VRM 0.x | 17 presets, 0 custom"
    from stylized_renderer.engine.features.vrm import expressions as vx

    angry = _sliders(lay)["angry (Angry)"]
    angry.value = 0.5
    stored = _vrm0_groups(arm)[ANGRY]
    assert stored["preview"] == 0.5 and angry.value == 0.5
    # keyed without the add-on: an F-Curve on the add-on's path, evaluated by the engine
    with bpy.context.temp_override(active_object=arm, object=arm):
        scene.frame_set(1)
        angry.value = 0.0
        assert bpy.ops.stylized.vrm_expression_keyframe(name="Angry") == {"FINISHED"}
        scene.frame_set(11)
        angry.value = 1.0
        assert bpy.ops.stylized.vrm_expression_keyframe(name="Angry") == {"FINISHED"}
    s = vx.expression_set_of(arm)
    assert s is not None
    for f, want in ((1, 0.0), (6, 0.5), (11, 1.0)):
        scene.frame_set(f)
        got = s.read_values(arm, bpy.context.evaluated_depsgraph_get())[ANGRY]
        assert got == pytest.approx(want, abs=0.03), (f, got)   # Bezier ease at the midpoint: ~0.5
    # undoable: the operator's change is in Blender's data
    stored["preview"] = 0.2
    bpy.ops.ed.undo_push(message="before")
    with bpy.context.temp_override(active_object=arm, object=arm):
        arm.data.animation_data_clear()
        assert bpy.ops.stylized.vrm_expression_set(name="Sorrow", value=0.9) == {"FINISHED"}
    bpy.ops.ed.undo_push(message="Set VRM Expression")
    bpy.ops.ed.undo()
    arm = bpy.data.objects["Armature"]
    g = _vrm0_groups(arm)
    assert g[9]["name"] == "Sorrow" and g[9].get("preview", 0.0) == 0.0
    assert g[ANGRY]["preview"] == pytest.approx(0.2)


def test_vrm_panel_properties_have_tooltips(ext):
    from stylized_renderer.engine.features.expressions import properties as expr_props

    rnas = [expr_props.StylizedVrmExpressionItem.bl_rna, expr_props.StylizedExpressionProps.bl_rna,
            bpy.ops.stylized.vrm_expression_set.get_rna_type(), bpy.ops.stylized.vrm_expression_keyframe.get_rna_type()]
    for rna in rnas:
        for p in rna.properties:
            if p.identifier not in ("rna_type", "name"):
                assert p.description, f"{rna.identifier}.{p.identifier} has no description"


# ------------------------------------------------------------------------------------------------
# the viewport: timeline mode and the preview player
# ------------------------------------------------------------------------------------------------

@needs_godette
def test_viewport_and_preview_player_show_the_expressions(ext, monkeypatch):
    assert not hasattr(bpy.types.Armature, "vrm_addon_extension")
    # headless, every draw runs inside a render operator whose frame change would hand the
    # preview back to the timeline; a real viewport draw does not change the frame
    monkeypatch.setattr(preview, "hand_back_to_timeline", lambda scene: False)
    from stylized_renderer.engine.blender import session as session_mod
    from stylized_renderer.engine.gpu import util as gpu_util
    from support.viewport import draw

    scene = open_godette()
    preview.clear_states()
    arm = bpy.data.objects["Armature"]
    lay = _panel(scene, arm)
    angry = _sliders(lay)["angry (Angry)"]
    dg = bpy.context.evaluated_depsgraph_get()
    cam = scene.camera.evaluated_get(dg)
    view = np.linalg.inv(np.array(cam.matrix_world))
    window = np.array(cam.calc_matrix_camera(dg, x=160, y=120))
    s = session_mod.StylizedSession(viewport=True, addon=C.addon())
    try:
        base = draw(s, view, window, False, 160, 120)
        angry.value = 1.0                                   # the panel's slider (ID property, no add-on)
        timeline = draw(s, view, window, False, 160, 120)
        assert s.imports.import_count == 1                          # expressions never re-import
        st = preview.get_state(scene, arm)
        st.active = True                                    # the preview player drives the pose
        player = draw(s, view, window, False, 160, 120)
        assert st.active and s.runtime is not None and s.runtime.stats.palette_count >= 1
        assert s.imports.import_count == 2                          # the first preview frame imports the clips
        angry.value = 0.0
        player_reset = draw(s, view, window, False, 160, 120)
        assert st.active
        assert s.imports.import_count == 2                          # expressions never re-import
    finally:
        gpu_util.run_in_gpu_context(s.free)
        addon = C.addon()
        assert addon is not None
        addon.forget_viewport_session()
        preview.clear_states()
    C.save_png(timeline, ART / "viewport_angry.png")
    assert face_diff(base, timeline) > 60
    assert face_diff(timeline, player) < 5 and face_diff(base, player_reset) < 5


@needs_godette
def test_bad_vrm_data_is_named_and_never_breaks_a_frame(ext):
    assert not hasattr(bpy.types.Armature, "vrm_addon_extension")
    scene = open_godette()
    arm = bpy.data.objects["Armature"]
    from stylized_renderer.engine.blender.sources.timeline import TimelineReader
    from stylized_renderer.engine.features.vrm.driver import VrmDriver

    groups = _vrm0_groups(arm)
    groups[ANGRY]["binds"][0]["index"] = "no_such_key"
    groups[ANGRY]["preview"] = float("nan")
    groups[7]["preview"] = 1.0                               # Joy: oh 0.5, look_up 0.25
    rt = runtime_for_scene()
    reader = TimelineReader(rt.scene, rt, expressions=VrmDriver())
    node = next(n for n, ob, _ in reader.morph_bindings if ob == "Face")
    w = dict(zip(rt.morph_key_names(node), reader.read_morph_weights(None)[node]))
    assert w["oh"] == pytest.approx(0.5) and w["blink_left"] == 0.0        # NaN counts as 0
    assert reader.expressions is not None
    msgs = reader.expressions.problems
    assert "expression 'Angry' of 'Armature': shape key 'no_such_key' not found on mesh 'Face'" in msgs, msgs
    assert any(m.startswith("expression 'Angry' of 'Armature': value nan is not a finite number") for m in msgs)
    # the panel shows the data problem; a render still succeeds
    lay = _panel(scene, arm)
    assert any("no_such_key" in l for l in lay.labels())
    px = C.render_scene(scene)
    assert np.isfinite(px).all()


@needs_godette
def test_bind_edits_show_in_the_viewport_within_half_a_second(ext):
    open_godette()
    arm = bpy.data.objects["Armature"]
    from stylized_renderer.engine.blender.sources.timeline import TimelineReader
    from stylized_renderer.engine.features.vrm.driver import VrmDriver

    groups = _vrm0_groups(arm)
    groups[7]["preview"] = 1.0                               # Joy: oh 0.5, look_up 0.25
    rt = runtime_for_scene()
    reader = TimelineReader(rt.scene, rt, expressions=VrmDriver())
    node = next(n for n, ob, _ in reader.morph_bindings if ob == "Face")
    names = rt.morph_key_names(node)
    w = dict(zip(names, reader.read_morph_weights(bpy.context.evaluated_depsgraph_get())[node]))
    assert w["oh"] == pytest.approx(0.5) and w["ee"] == 0.0
    groups[7]["binds"][0]["index"] = "ee"                    # edited in the add-on's panel
    assert reader.expressions is not None
    reader.expressions.checked -= 1.0                               # half a second later
    w = dict(zip(names, reader.read_morph_weights(bpy.context.evaluated_depsgraph_get())[node]))
    assert w["ee"] == pytest.approx(0.5) and w["oh"] == 0.0
    assert not reader.expressions.refresh()                          # up to date: nothing rebuilt
