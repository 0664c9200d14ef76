"""Every source of a preview frame writes into the one mixer (issue 24): the Expressions panel's
shape-key values next to a clip's morph channels (engine/features/preview/morphs.py), and a crowd's shared
clip (AnimationPlayer.set_targets).  A weight given to the mixer changes what is drawn, by the
mixer's rule (lerp of the sources by weight), with each source's values taken from Blender."""
from __future__ import annotations

import bpy
import numpy as np
import pytest

from stylized_renderer.engine.features.preview import control as preview
from support.preview_sessions import clocked_session
from tools import scenes


@pytest.fixture
def view(monkeypatch, ext):
    yield from clocked_session(monkeypatch, strict=True)


def drawn_weights(rt, node, names):
    """{key name: weight the morph state of the node's primitive holds} (what the GPU draws)."""
    out = {}
    for p in rt.mesh_instances[node].primitives:
        if p.morph_state is not None:
            tn = [t.name for t in p.primitive.morph_targets]
            for n in names:
                out[n] = float(p.morph_state.weights[tn.index(n)])
    return out


def _raised_key(ob, name, dz, value=None):
    """A shape key of ``ob`` raising every vertex by ``dz`` (a Basis first when it has none)."""
    if ob.data.shape_keys is None:
        ob.shape_key_add(name="Basis", from_mix=False)
    kb = ob.shape_key_add(name=name, from_mix=False)
    co = np.empty(len(kb.data) * 3, np.float32)
    kb.data.foreach_get("co", co)
    co[2::3] += dz
    kb.data.foreach_set("co", co)
    if value is not None:
        kb.value = value
    return kb


def _face_character(scene):
    """tools/scenes.build_character with shape keys on the Body (Smile, Blink, Wide)."""
    arm, body, _hat, _ring = scenes.build_character(scene)
    for name, dz in (("Smile", 0.05), ("Blink", -0.03), ("Wide", 0.02)):
        _raised_key(body, name, dz)
    scenes.finish()
    return arm, body


def _with_key_channels(session, arm, body, keys):
    """The armature's clip, also keying Body's shape keys ``keys`` ({name: (times, values)}), as a
    glTF clip keys its meshes' weights: put in the session's scene asset in place of the clip."""
    import dataclasses

    from stylized_renderer.engine.core.assets import MorphWeightChannelAsset

    asset = session.scene_asset
    node = asset.node_index(body.name)
    clips = list(asset.animations)
    k = next(i for i, c in enumerate(clips) if c.target_object == arm.name and c.channels)
    morph = [MorphWeightChannelAsset(node_index=node, target_name=n, times=np.asarray(t, np.float64),
                                     values=np.asarray(v, np.float64)) for n, (t, v) in keys.items()]
    clips[k] = dataclasses.replace(clips[k], curves=None, morph_channels=tuple(morph))
    asset.animations = tuple(clips)
    return clips[k], node


def test_the_panels_shape_keys_and_the_clips_channels_mix_by_weight(empty_scene, view):
    """A clip keying Body's Smile, the panel setting Smile, Blink and Wide: the preview draws the
    clip's value on Smile and the panel's on the others; the clip's weight 0.25 in the mixer
    gives 25 % clip and 75 % panel on Smile (the panel fills what the clip leaves), the others
    unchanged.  Before: the clip's values were written over the panel's (no weight to give)."""

    arm, body = _face_character(empty_scene)
    kb = body.data.shape_keys.key_blocks
    kb["Smile"].value, kb["Blink"].value, kb["Wide"].value = 0.3, 0.6, 0.45
    st = preview.get_state(empty_scene, arm)
    st.active = True
    view.update(st)
    clip, node = _with_key_channels(view.session, arm, body, {"Smile": ([0.0, 1.0], [0.9, 0.1])})
    st.push("clip", clip.name)
    st.push("seek", 0.25)
    rt = view.update(st)
    names = ("Smile", "Blink", "Wide")
    clip_smile = 0.9 + (0.1 - 0.9) * 0.25          # the channel's linear keys at 0.25 s
    panel = {"Smile": 0.3, "Blink": 0.6, "Wide": 0.45}
    got = drawn_weights(rt, node, names)
    assert got == pytest.approx({"Smile": clip_smile, "Blink": 0.6, "Wide": 0.45}, abs=1e-6)

    mixer = view.session.preview.morphs()
    mixer.clip_weight = 0.25
    rt = view.update(st)
    got = drawn_weights(rt, node, names)
    want = dict(panel, Smile=0.25 * clip_smile + 0.75 * panel["Smile"])
    assert got == pytest.approx(want, abs=1e-6)
    kb["Blink"].value = 0.2                       # a panel edit still shows at the next frame
    rt = view.update(st)
    assert drawn_weights(rt, node, names) == pytest.approx(dict(want, Blink=0.2), abs=1e-6)
    mixer.clip_weight = 1.0
    rt = view.update(st)
    assert drawn_weights(rt, node, names)["Smile"] == pytest.approx(clip_smile, abs=1e-6)


def test_a_crowds_shared_clip_goes_through_the_mixer(empty_scene):
    """A crowd's clip is one source of the mixer: at weight 0.5 every character's bones take
    half of Blender's pose basis (the action on each rig, at that frame) from the rest basis
    (Blender's slerp and lerp, mathutils), at 1 the basis itself.  Before: the crowd's sampled
    rows were scattered to the targets with no mixer (no weight to give)."""
    from mathutils import Matrix, Quaternion, Vector

    from stylized_renderer.engine.blender import importer
    from stylized_renderer.engine.core.runtime.backend import CpuBackend
    from stylized_renderer.engine.core.world.scene_runtime import SceneRuntime
    from support.crowds import build_crowd, clip_of, seek_frame

    names = build_crowd(empty_scene, 3)
    asset = importer.import_scene(bpy.context.evaluated_depsgraph_get())
    clip = clip_of(asset, names[0])
    rt = SceneRuntime(asset, CpuBackend())
    assert rt.initialize(), rt.last_error
    assert rt.set_clip(clip, targets=names), rt.last_error
    frame = 9
    bones = [(i, nd.object_name, nd.bone_name) for i, nd in enumerate(asset.nodes)
             if nd.object_name in names and nd.bone_name is not None]
    animated = {asset.nodes[int(n)].bone_name for n in rt.player.node_ids()}
    empty_scene.frame_set(frame)
    dg = bpy.context.evaluated_depsgraph_get()
    basis = {}
    for i, ob, bone in bones:
        if bone in animated:
            t, q, s = Matrix(bpy.data.objects[ob].evaluated_get(dg).pose.bones[bone].matrix_basis).decompose()
            basis[i] = (t, q, s)
    assert len(basis) >= 2 * 3          # the animated bones of every character
    for w in (1.0, 0.5, 0.2):
        assert rt.player.set_weight(w)
        seek_frame(rt, clip, frame)
        nodes = np.array(sorted(basis), np.int64)
        t, q, s = rt.pose.local_trs(nodes)
        for k, i in enumerate(nodes):
            bt, bq, bs = basis[int(i)]
            want_t = Vector((0, 0, 0)).lerp(bt, w)
            want_q = Quaternion().slerp(bq, w)
            want_s = Vector((1, 1, 1)).lerp(bs, w)
            assert np.allclose(t[k], want_t, atol=1e-5), (w, i, t[k], want_t)
            assert abs(abs(float(np.dot(q[k], want_q))) - 1.0) < 1e-6, (w, i, q[k], want_q)
            assert np.allclose(s[k], want_s, atol=1e-5), (w, i, s[k], want_s)
    assert not rt.player.set_weight(1.5) and not rt.player.set_weight(float("nan"))
    rt.release()


def test_a_crowd_crossfades_through_the_mixer(empty_scene):
    """A crowd switching clips with a crossfade (before: the crowd cancelled the fade and switched
    at once): half-way through, every character's bones hold the blend a single character gets
    from the same fade (both clips through the mixer at the fade's weights), which differs from
    both clips alone; after the fade every character plays the new clip as Blender does."""
    from stylized_renderer.engine.blender import importer
    from stylized_renderer.engine.core.runtime.backend import CpuBackend
    from stylized_renderer.engine.core.world.scene_runtime import SceneRuntime
    from support.crowds import build_crowd, clip_of

    names = build_crowd(empty_scene, 3)
    rig = bpy.data.objects[names[0]]
    act, cb = scenes.new_action("Nod", rig, assign=False)
    for c, vals in enumerate(((1.0, 0.8, 1.0), (0.0, 0.6, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0))):
        scenes.add_curve(cb, 'pose.bones["Head"].rotation_quaternion', c, (1, 12, 24), vals)
    scenes.add_curve(cb, 'pose.bones["Spine"].location', 0, (1, 24), (0.0, 0.3))
    scenes.finish()
    asset = importer.import_scene(bpy.context.evaluated_depsgraph_get())
    wave = clip_of(asset, names[0])
    nod = next(c for c in asset.animations if c.target_object == names[0] and c.name == "Nod")

    def runtime(targets):
        rt = SceneRuntime(asset, CpuBackend())
        assert rt.initialize(), rt.last_error
        assert rt.player.set_crossfade(0.5)
        assert rt.set_clip(wave, targets=targets), rt.last_error
        rt.player.play()
        assert rt.update(0.3)
        assert rt.set_clip(nod, targets=targets), rt.last_error
        return rt

    crowd, alone = runtime(names), runtime(None)
    assert crowd.player.is_fading and crowd.player.target_count == 3
    for rt in (crowd, alone):
        assert rt.update(0.25), rt.last_failure()          # half the fade
    bones = ("Root", "Spine", "Head")
    ref = alone.pose.local_trs([asset.node_index(names[0], b) for b in bones])
    for name in names:
        got = crowd.pose.local_trs([asset.node_index(name, b) for b in bones])
        for g, r in zip(got, ref):
            assert np.allclose(g, r, atol=1e-12), (name, g, r)
    # the blend is neither clip alone: Head's rotation lies between them
    solo = {}
    for clip in (wave, nod):
        r = SceneRuntime(asset, CpuBackend())
        assert r.initialize() and r.set_clip(clip)
        assert r.player.seek(0.55 if clip is wave else 0.25) and r.update(0.0)
        solo[clip.name] = r.pose.local_trs([asset.node_index(names[0], "Head")])[1][0]
    q = ref[1][2]
    assert all(abs(abs(float(np.dot(q, o))) - 1.0) > 1e-4 for o in solo.values())
    # the fade over: each character plays Nod as Blender does (the action on every rig)
    assert crowd.update(0.5) and not crowd.player.is_fading
    t = crowd.player.current_time
    frame = nod.frame_start + t * nod.fps
    for name in names:
        ob = bpy.data.objects[name]
        ob.animation_data.action = act
        ob.animation_data.action_slot = act.slots[0]
    empty_scene.frame_set(int(frame), subframe=frame - int(frame))
    dg = bpy.context.evaluated_depsgraph_get()
    for name in names:
        arm = bpy.data.objects[name].evaluated_get(dg)
        aw = np.array(arm.matrix_world)
        for b in bones:
            want = aw @ np.array(arm.pose.bones[b].matrix)
            got = crowd.pose.world_matrix(asset.node_index(name, b))
            assert got is not None and np.allclose(got, want, atol=1e-4), (name, b)
    for rt in (crowd, alone):
        rt.release()


def test_a_crowds_crossfade_blends_every_characters_shape_keys(empty_scene, view):
    """A crowd switching between two clips that key Body's Smile differently (0.8 and 0.2): half
    way through the fade every character's Body holds the blend (0.5), as the previewed one does;
    the panel's value (0.05) shows nowhere, and after the fade every Body holds the new clip's.
    The two sides of the fade and the panel accumulate in the one morph mixer of the preview.
    Before: the crowd's other Bodies kept the panel's value (the clip drove the previewed
    armature's meshes only)."""
    from support.crowds import build_crowd

    names = build_crowd(empty_scene, 3)
    rig = bpy.data.objects[names[0]]
    body = bpy.data.objects["Body"]
    _raised_key(body, "Smile", 0.05, value=0.05)
    act, cb = scenes.new_action("Nod", rig, assign=False)
    scenes.add_curve(cb, 'pose.bones["Spine"].location', 0, (1, 24), (0.0, 0.3))
    scenes.finish()
    st = preview.get_state(empty_scene, rig)
    st.active = True
    view.update(st)
    first, node = _with_key_channels(view.session, rig, body, {"Smile": ([0.0, 1.0], [0.8, 0.8])})
    asset = view.session.scene_asset
    clips = list(asset.animations)
    k = next(i for i, c in enumerate(clips) if c.target_object == rig.name and c.name == "Nod")
    import dataclasses

    from stylized_renderer.engine.core.assets import MorphWeightChannelAsset

    clips[k] = dataclasses.replace(clips[k], curves=None, morph_channels=(MorphWeightChannelAsset(
        node_index=node, target_name="Smile", times=np.array([0.0, 1.0]), values=np.array([0.2, 0.2])),))
    asset.animations = tuple(clips)
    bodies = sorted(i for i, nd in enumerate(asset.nodes)
                    if nd.mesh_index >= 0 and bpy.data.objects[nd.object_name].data == body.data)
    assert len(bodies) == 3 and node in bodies
    with bpy.context.temp_override(active_object=rig, object=rig):
        empty_scene.stylized_preview.crowd = True
    st.push("fade", 0.5)
    st.push("clip", first.name)
    st.push("play")
    view.update(st)
    rt = view.update(st, 0.3)
    assert st.crowd_count == 3
    assert [drawn_weights(rt, b, ("Smile",))["Smile"] for b in bodies] == pytest.approx([0.8] * 3, abs=1e-6)
    st.push("clip", "Nod")
    view.update(st)
    rt = view.update(st, 0.25)                            # half the fade
    assert rt.player.is_fading and rt.player.fade_weights == pytest.approx((0.5, 0.5))
    got = [drawn_weights(rt, b, ("Smile",))["Smile"] for b in bodies]
    assert got == pytest.approx([0.5] * 3, abs=1e-6), got
    rt = view.update(st, 0.5)                             # the fade over
    assert not rt.player.is_fading
    assert [drawn_weights(rt, b, ("Smile",))["Smile"] for b in bodies] == pytest.approx([0.2] * 3, abs=1e-6)


def _counted_states(rt, nodes):
    """{node: [set_weights calls]} on the one MorphState of each node's primitives, counted on the
    state objects themselves (the real method runs)."""
    calls = {}
    for node in nodes:
        states = {id(p.morph_state): p.morph_state for p in rt.mesh_instances[node].primitives
                  if p.morph_state is not None}
        assert len(states) == 1, "the node's primitives share one MorphState"
        st = next(iter(states.values()))
        log = calls[node] = []

        def counted(indices, values, finite=False, _real=st.set_weights, _log=log):
            _log.append(1)
            return _real(indices, values, finite=finite)

        st.set_weights = counted
    return calls


def _face_and_hat(scene):
    """``_face_character`` with a shape key on the Hat too (a morphed node no clip drives)."""
    arm, body = _face_character(scene)
    hat = bpy.data.objects["Hat"]
    _raised_key(hat, "Tall", 0.1, value=0.4)
    scenes.finish()
    return arm, body, hat


def _playing_smile(scene, view, clip_weight):
    """``_face_and_hat`` (panel: Smile 0.3, Blink 0.6, Tall 0.4) previewing a clip that keys Body's
    Smile from 0.9 at 0 s to 0.1 at 1 s, at ``clip_weight`` in the mixer, started at 0 s:
    (state, Body, Hat, Body's node, Hat's node, runtime)."""

    arm, body, hat = _face_and_hat(scene)
    kb = body.data.shape_keys.key_blocks
    kb["Smile"].value, kb["Blink"].value = 0.3, 0.6
    st = preview.get_state(scene, arm)
    st.active = True
    view.update(st)
    clip, node = _with_key_channels(view.session, arm, body, {"Smile": ([0.0, 1.0], [0.9, 0.1])})
    hat_node = view.session.scene_asset.node_index(hat.name)
    view.session.preview.morphs().clip_weight = clip_weight
    st.push("clip", clip.name)
    st.push("seek", 0.0)
    st.push("play")
    rt = view.update(st)
    return st, body, hat, node, hat_node, rt


@pytest.mark.parametrize("clip_weight", [1.0, 0.5])
def test_a_clip_driven_key_is_pushed_once_per_preview_frame(empty_scene, view, clip_weight):
    """A clip keying Body's Smile plays in the preview (the session's update_frame): each frame
    Body's MorphState takes its weights once, the panel filling what the clip leaves, and the Hat
    (shape keys no clip drives, panel values unchanged) is not pushed at all.  Before: the runtime
    pushed the clip's keys with the mixer's 0 fill, which bumped the morph epoch, and the preview's
    panel fill then pushed every node again (Body twice a frame, the Hat every frame)."""
    from stylized_renderer.engine.core.world.scene_runtime import SceneRuntime

    st, _body, _hat, node, hat_node, rt = _playing_smile(empty_scene, view, clip_weight)
    calls = _counted_states(rt, (node, hat_node))
    pushes = []
    real = SceneRuntime.set_node_morph_weights

    def counted(self, n, values):
        pushes.append(int(n))
        return real(self, n, values)

    view_pushes = pytest.MonkeyPatch()
    view_pushes.setattr(SceneRuntime, "set_node_morph_weights", counted)
    try:
        for k in range(1, 5):
            for log in calls.values():
                log.clear()
            pushes.clear()
            rt = view.update(st, 0.1)
            t = rt.player.current_time
            assert t == pytest.approx(0.1 * k)
            smile = clip_weight * (0.9 - 0.8 * t) + (1.0 - clip_weight) * 0.3
            got = drawn_weights(rt, node, ("Smile", "Blink"))
            assert got == pytest.approx({"Smile": smile, "Blink": 0.6}, abs=1e-6)
            assert drawn_weights(rt, hat_node, ("Tall",)) == pytest.approx({"Tall": 0.4}, abs=1e-6)
            assert len(calls[node]) == 1, f"frame {k}: Body's MorphState took {len(calls[node])} pushes"
            assert calls[hat_node] == [] and hat_node not in pushes, f"frame {k}: the Hat was pushed again"
    finally:
        view_pushes.undo()


def test_a_clip_driven_node_the_reader_does_not_return_still_gets_the_clips_weights(empty_scene, view):
    """The preview's panel fill covers only the nodes the reader returns; a node the clip drives
    that the read leaves out (here: Body renamed, read before the session re-syncs) still takes
    the clip's weights each frame (the runtime's blend, the 0 fill: the clip's share of its keys),
    its other keys kept; the Hat keeps the panel's value."""
    st, body, hat, node, hat_node, _rt = _playing_smile(empty_scene, view, 0.5)
    body.name = "BodyRenamed"
    hat.data.shape_keys.key_blocks["Tall"].value = 0.7
    for k in range(1, 4):
        rt = view.update(st, 0.1)
        read = view.session.reader.read_morph_weights(None)
        assert node not in read and hat_node in read
        t = rt.player.current_time
        got = drawn_weights(rt, node, ("Smile", "Blink"))
        assert got == pytest.approx({"Smile": 0.5 * (0.9 - 0.8 * t), "Blink": 0.6}, abs=1e-6), (k, got)
        assert drawn_weights(rt, hat_node, ("Tall",)) == pytest.approx({"Tall": 0.7}, abs=1e-6)


def test_a_key_the_new_clip_does_not_drive_goes_back_to_the_panel(empty_scene, view):
    """A clip keying Body's Smile, then (no fade) a clip keying bones only: Smile shows the
    panel's value again at the next frame.  Before: the node's last push was kept while the
    reader's array was the same, so Smile held the first clip's last value."""
    arm, body, _hat = _face_and_hat(empty_scene)
    act, cb = scenes.new_action("Nod", arm, assign=False)
    scenes.add_curve(cb, 'pose.bones["Spine"].location', 0, (1, 24), (0.0, 0.3))
    scenes.finish()
    body.data.shape_keys.key_blocks["Smile"].value = 0.3
    st = preview.get_state(empty_scene, arm)
    st.active = True
    view.update(st)
    clip, node = _with_key_channels(view.session, arm, body, {"Smile": ([0.0, 1.0], [0.9, 0.1])})
    st.push("fade", 0.0)
    st.push("clip", clip.name)
    st.push("play")
    view.update(st)
    rt = view.update(st, 0.2)
    assert drawn_weights(rt, node, ("Smile",))["Smile"] == pytest.approx(0.9 - 0.8 * 0.2, abs=1e-6)
    st.push("clip", "Nod")
    for _ in range(2):
        rt = view.update(st, 0.2)
        assert rt.player.clip.name == "Nod"
        assert drawn_weights(rt, node, ("Smile",))["Smile"] == pytest.approx(0.3, abs=1e-6)
