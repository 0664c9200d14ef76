"""Bake time (issue 22): a bake evaluates the armature alone.  While it sets the frames, the
modifiers of objects the armature's evaluation does not read (the bodies it deforms) are switched
off and put back afterwards (engine/blender/bake/isolate.py ``quiet_geometry``); an object the
rig reads (a constraint's mesh target, deformed by its own modifiers) keeps them, so the bake is
still Blender's pose."""
from __future__ import annotations

import bpy
import numpy as np

import conftest as C  # noqa: F401  (registers the extension fixtures)
from tools import rigify_rig


def _anchor_rig():
    """The constraint rig with one more bone following a vertex group of a mesh that a time-driven
    Wave modifier moves (the rig reads that mesh's evaluated geometry)."""
    arm, ob, act = rigify_rig.build_constraint_rig()
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=4, y_subdivisions=4, size=1.0, location=(2.0, 2.0, 0.0))
    anchor = bpy.context.view_layer.objects.active
    anchor.name = "Anchor"
    vg = anchor.vertex_groups.new(name="pin")
    vg.add([0, 1, 2], 1.0, "REPLACE")
    wave = anchor.modifiers.new("Wave", "WAVE")
    wave.height, wave.width, wave.speed = 0.8, 0.5, 0.35
    c = arm.pose.bones["tail"].constraints.new("COPY_LOCATION")
    c.target, c.subtarget = anchor, "pin"
    bpy.context.view_layer.objects.active = arm
    bpy.context.scene.frame_set(1)
    return arm, ob, act, anchor


def test_bake_quiets_the_bodies_only_and_restores_them(empty_scene, bakes, monkeypatch):
    from stylized_renderer.engine.blender.bake import record as bake_record

    arm, body, act, anchor = _anchor_rig()
    seen = []
    run = bake_record.Evaluator.run

    def spy(self, *a, **k):
        seen.append((tuple(m.show_viewport for m in body.modifiers), tuple(m.show_viewport for m in anchor.modifiers)))
        return run(self, *a, **k)

    monkeypatch.setattr(bake_record.Evaluator, "run", spy)
    b = bakes.cache.ensure(arm, act.name)
    assert b is not None and seen
    assert all(bm == (False,) and am == (True,) for bm, am in seen), seen
    assert all(m.show_viewport for m in body.modifiers) and all(m.show_viewport for m in anchor.modifiers)
    # the bake is Blender's pose at its samples, the bone following the waving mesh included
    sc = bpy.context.scene
    pose = b.pose
    names = b.bone_names
    flat = np.empty(len(names) * 16, np.float32)
    for k, f in enumerate(b.frames.tolist()):
        fi = int(np.floor(f))
        sc.frame_set(fi, subframe=f - fi)
        arm.evaluated_get(bpy.context.evaluated_depsgraph_get()).pose.bones.foreach_get("matrix", flat)
        truth = flat.reshape(-1, 4, 4).transpose(0, 2, 1)
        np.testing.assert_allclose(pose[k][:, :3, 3], truth[:, :3, 3], atol=1e-4, err_msg=f"frame {f}")
    assert np.ptp(pose[:, names.index("tail"), 2, 3]) > 0.05      # the wave moved it
