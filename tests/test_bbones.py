"""B-Bones (bendy bones) on the GPU path (issue 11 item 4, timeline mode): GPU-skinned vertices
read back from the GPU (tools/check_deform.py) against Blender's evaluated mesh, on a generated
rig with curved B-Bones (4-8 segments, ease in/out, AUTO and custom-bone handles)."""
from __future__ import annotations

import bpy
import numpy as np

import conftest as C  # noqa: F401  (registers the extension fixtures)
from support.deform_rigs import build_bbone_rig, run_bbone_check
from tools import deform_checker, scenes


def test_bbone_import_has_segment_slots(empty_scene):
    """Each weighted B-Bone gets one palette slot per segment matrix it blends, with its index."""
    arm, ob = build_bbone_rig()
    from stylized_renderer.engine.blender import importer

    asset = importer.import_scene(bpy.context.evaluated_depsgraph_get())
    mesh = next(m for m in asset.meshes if m.name == ob.name)
    assert mesh.fallback_reason is None, mesh.fallback_reason
    skin = mesh.primitives[0].skin
    assert skin.joint_segments is not None
    names = [asset.nodes[int(n)].bone_name for n in skin.joint_node_indices]
    segs = np.asarray(skin.joint_segments)
    for name, s in (("root", 4), ("mid", 8), ("tip", 6)):
        mine = segs[[k for k, n in enumerate(names) if n == name]]
        assert mine.size >= 2 and mine.min() >= 0 and mine.max() <= s, (name, mine)
        assert np.all(np.diff(mine) > 0), (name, mine)   # in Blender's segment order


def test_bbones_timeline_match_blender(empty_scene, capsys, tmp_path):
    """Timeline mode (F12 path / session update_frame): every frame within 1e-4 of the object size
    of Blender's evaluated mesh, on the GPU (no fallback)."""
    build_bbone_rig()
    rc, out, fields = run_bbone_check(capsys)
    assert rc == 0, out
    assert "path=gpu" in out and int(fields["fallbacks"]) == 0, out
    assert int(fields["frames"]) == 10, out
    assert float(fields["max_rel_error"]) <= deform_checker.TOLERANCE, out
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "bbones.blend"))


def test_wrong_bbone_blend_fails(empty_scene, capsys, monkeypatch):
    """Negative control: all of a B-Bone weight on the lower segment of the pair (blend ignored)
    exceeds the tolerance."""
    build_bbone_rig()
    from stylized_renderer.engine.blender.importer import skin

    real = skin.split_bbone_weights

    def lower_only(obj, arm, base_co, vertex, joint, weight):
        v, j, w, keys = real(obj, arm, base_co, vertex, joint, weight)
        n = int((j >= len(arm.data.bones)).sum()) // 2   # the pairs: n lower, then n upper
        if n:
            w = w.copy()
            w[-2 * n:-n] += w[-n:]
            w[-n:] = 0.0
        return v, j, w, keys

    monkeypatch.setattr(skin, "split_bbone_weights", lower_only)
    rc, out, fields = run_bbone_check(capsys, frames="4-10:3")
    assert "path=gpu" in out, out
    assert rc == 1 and float(fields["max_rel_error"]) > deform_checker.TOLERANCE, out


def test_rest_segment_relation_without_segments(empty_scene, capsys, monkeypatch):
    """Negative control and the documented default: without the evaluated segment matrices (a
    pose source that provides none) the segment slots move rigidly with their bone, which on a
    bent chain exceeds the tolerance."""
    build_bbone_rig()
    from stylized_renderer.engine.core.runtime import palette

    monkeypatch.setattr(palette.SkinningPaletteSet, "set_bbone_segments", lambda self, p, r: True)
    rc, out, fields = run_bbone_check(capsys, frames="4-10:3")
    assert "path=gpu" in out, out
    assert rc == 1 and float(fields["max_rel_error"]) > deform_checker.TOLERANCE, out


def _timeline_runtime(frame=7):
    """The B-Bone rig at ``frame``, imported, with a CPU SceneRuntime and a TimelineReader:
    (arm, ob, depsgraph, asset, runtime, reader)."""
    arm, ob = build_bbone_rig()
    from stylized_renderer.engine.blender import importer
    from stylized_renderer.engine.blender.sources.timeline import TimelineReader
    from stylized_renderer.engine.core.runtime.backend import CpuBackend
    from stylized_renderer.engine.core.world.scene_runtime import SceneRuntime

    bpy.context.scene.frame_set(frame)
    dg = bpy.context.evaluated_depsgraph_get()
    asset = importer.import_scene(dg)
    rt = SceneRuntime(asset, CpuBackend())
    assert rt.initialize(), rt.last_error
    return arm, ob, dg, asset, rt, TimelineReader(asset, rt)


def test_segment_entry_point_and_rest_relation(empty_scene):
    """SkinningPaletteSet.set_bbone_segments (the entry point for pose sources): the segment slots
    get jointWorld @ pose[a] @ inv(rest[a]) for one update, then the rest relation again (the
    slot equals its bone's plain skinning matrix); malformed input is refused with a message
    naming the bone node; a rig without B-Bones has no segment table."""
    from stylized_renderer.engine.blender import importer
    from stylized_renderer.engine.blender.sources.timeline import TimelineReader
    from stylized_renderer.engine.core.runtime.backend import CpuBackend
    from stylized_renderer.engine.core.world.scene_runtime import SceneRuntime

    arm, ob, dg, asset, rt, reader = _timeline_runtime()
    ps = rt.palette_set
    mid = asset.node_index("BRig", "mid")
    assert mid in ps.bbone_nodes
    nodes, mats, w = reader.read(dg)
    assert reader.bbone_error is None and reader.bbone_segments is not None
    assert rt.update_timeline(nodes, mats, w, bbone_segments=reader.bbone_segments)
    g = ps.palette_groups[0]
    pal = g.palette.matrices.astype(np.float64)
    slots = g.seg_slots[g.joint_nodes[g.seg_slots] == mid]
    pose, rest = reader.read_bbone_segments(dg)
    joint_segments = g.skin.joint_segments
    assert joint_segments is not None
    segs = joint_segments[slots]
    rel = pose[mid][segs] @ np.linalg.inv(rest[mid][segs])
    assert np.abs(rel - np.eye(4)).max() > 1e-2          # the segments really bend
    # the next recompute without fresh segments (a new pose version, as the preview player
    # makes every frame): the rest relation (identical slots of one bone)
    ps.last_pose_version = -1
    assert rt.update_timeline(nodes, mats, w)
    plain = g.palette.matrices.astype(np.float64)[slots]
    assert np.abs(plain - plain[0]).max() < 1e-6
    assert np.abs(pal[slots] - plain).max() > 1e-3
    # bad input: a clear message, the rest relation kept
    assert not ps.set_bbone_segments({mid: np.eye(4)[None]}, {mid: np.eye(4)[None]})
    assert f"bone node {mid}" in (ps.last_error or "") and not ps.segment_fresh
    # a rig without B-Bones: no table, nothing read per frame
    for b in arm.data.bones:
        b.bbone_segments = 1
    scenes.finish()
    asset2 = importer.import_scene(bpy.context.evaluated_depsgraph_get())
    rt2 = SceneRuntime(asset2, CpuBackend())
    assert rt2.initialize(), rt2.last_error
    assert rt2.palette_set.segment_table.shape[0] == 0 and rt2.palette_set.bbone_nodes == []
    assert TimelineReader(asset2, rt2)._bbone_bind == []


def test_relations_entry_point_equals_segments(empty_scene):
    """SkinningPaletteSet.set_bbone_relations (the preview bake's entry point): a table of
    relations gives the same palette as set_bbone_segments with the segments they came from;
    a wrong shape or a non-finite value is refused and the next update uses the rest relation."""
    _arm, _ob, dg, asset, rt, reader = _timeline_runtime()
    ps = rt.palette_set
    nodes, mats, w = reader.read(dg)          # reads this frame's segments, the update sets them
    assert rt.update_timeline(nodes, mats, w, bbone_segments=reader.bbone_segments)
    want = ps.palette_groups[0].palette.matrices.astype(np.float64).copy()
    table = np.array(ps.segment_table, np.float64)
    assert np.abs(table - np.eye(4)).max() > 1e-2   # the frame's relations really bend
    # the rest relation first, so a palette equal to ``want`` can only come from the table
    ps.last_pose_version = -1
    assert rt.update_timeline(nodes, mats, w)
    assert np.abs(ps.palette_groups[0].palette.matrices - want).max() > 1e-3
    assert ps.set_bbone_relations(table)
    assert rt.update_timeline(nodes, mats, w)
    assert np.abs(ps.palette_groups[0].palette.matrices - want).max() < 1e-6
    assert not ps.set_bbone_relations(table[:-1])
    assert "B-Bone segment relations" in (ps.last_error or "") and not ps.segment_fresh
    bad = table.copy()
    bad[0, 0, 0] = np.nan
    assert not ps.set_bbone_relations(bad)
