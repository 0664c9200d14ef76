"""Compare our GPU-deformed vertices with Blender's evaluated meshes, in world space.

Usage:
  .venv/bin/python tools/check_deform.py FILE.blend [--frames SPEC] [--mode timeline|player|both|scene]
                                         [--morph auto|rebuild|shader]

SPEC: "1-48", "1,5,9", "1-100:5" (default: every frame of the scene range, at most 250).

Ours: the GPU-skinned and morphed positions read back from the GPU (each vertex drawn as a point
into an RGBA32F target with the shared skinning include), times the node's ScenePose world matrix.
Blender's: the evaluated mesh of the object times its evaluated matrix_world.

timeline: scene.frame_set(f), then our timeline-mode update (Blender's evaluated pose).
player:   for every clip compatible with an armature/object, the preview player as it really runs
          (StylizedSession.update_frame with a PreviewState: clip, seek, pause) against Blender
          evaluating that action alone: every other action is unassigned and every NLA track
          muted while the clip is checked (the file's own animation data is restored
          afterwards), and channels the clip does not key keep the pose they had at import on
          both sides.  Nothing of Blender's is copied into the player.  Clips of armatures
          with constraints, IK, drivers or weighted B-Bones are baked first through Blender's
          evaluation (engine/blender/bake/cache.py), as the preview's Play does ("baked:" lines);
          a preview that refuses a clip (no current bake) fails the check.  Baked clips are
          compared between frames too, at BETWEEN_SUBFRAMES past BETWEEN_FRAMES frames spread
          over every frame of the clip (whatever --player-step keeps), as mode "baked-between",
          and fail above BETWEEN_TOLERANCE (1e-3).  Plain clips
          (the player evaluates their F-Curves itself) are compared between frames too, at
          FRACTION_SUBFRAMES past FRACTION_FRAMES frames spread over the clip, as mode
          "fraction", and fail above the tolerance like integer frames; a plain clip with a
          curve the preview resamples (its notes say which and why) is reported as "between".
          One line per checked clip gives plain/baked (the bake's samples, MB, checked
          mid-points and measured error) and its worst error per mode.
          The player check fails when the file's actions animate its objects but no clip was
          checked (none offered, or every one skipped).
          Constraints or drivers on a plain object's clip, and shape-key drivers on a morph
          clip, are skipped with the reason.

Normals: our GPU-skinned and morphed normals are compared with the nearest of Blender's evaluated
corner normals of the same vertex (90th percentile over the vertices, worst frame:
"max_normal_error").  Linear blend skinning transforms normals while Blender
recomputes them from the deformed surface.  Per object the worst frame's median and 90th
percentile of 1 - cos(angle) are printed; the check fails when the median exceeds
NORMAL_TOLERANCE (inverted, unskinned or unmorphed normals).  On the glTF characters the 90th
percentile reaches 0.2-0.36 at some frames of flat-shaded low-poly meshes (see the README).

--morph: how shape keys reach the GPU (runtime/mesh_instance.py): "auto" (default: rebuilt on
the CPU while weights are still, composed in the vertex shader while they animate), "rebuild"
or "shader" (always that path).  The line "morph-paths:" counts the primitive checks per path.
Vertices are read back through the vertex variant each item is drawn with (its vertex class's
skinning defines, as the forward / outline / shadow shaders get them); "readback-variants:"
counts the reads per vertex class.

Prints one line per object and mode, then
  deform-check: objects=N frames=M max_rel_error=X fallbacks=K skipped=S baked=B between_max_rel_error=Y
               fraction_max_rel_error=Z clips_checked=C
and exits 0 only when every gpu object stays within 1e-4 in every mode ("fraction" included).
"""
from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from tools import _bootstrap  # noqa: E402
from tools import deform_checker as dc  # noqa: E402  (the checker: tolerances, Checker)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("blend")
    ap.add_argument("--frames", default=None)
    ap.add_argument("--mode", choices=("timeline", "player", "both", "scene"), default="both",
                    help="scene: the Scene preview's animation against the timeline (tools/check_scene.py)")
    ap.add_argument("--morph", choices=("auto", "rebuild", "shader"), default="auto")
    ap.add_argument("--player-step", type=int, default=1, help="check every n-th frame of each clip")
    args = ap.parse_args(argv)
    _bootstrap.load()
    import bpy

    bpy.ops.wm.open_mainfile(filepath=str(pathlib.Path(args.blend).resolve()))
    if args.mode == "scene":
        return run_scene(bpy.context.scene)
    return run_checks(args.frames, args.mode, args.morph, args.player_step)


def run_scene(scene, frames=None) -> int:
    """``--mode scene`` on the open file (tools/check_scene.py: the channels, then the drawn
    vertices), our spring bones off as in the other modes; ``frames`` [(frame, subframe)]."""
    from tools import check_scene

    _no_spring_bones()
    channels = check_scene.run(scene, frames)
    return check_scene.run_deform(scene, frames) | channels


def summary_fields(out: str, prefix: str = "deform-check:") -> dict:
    """{field: text} of the last line of ``out`` that starts with ``prefix``: the closing summary
    (``deform-check: objects=N ...``) or another ``name: k=v ...`` line (``morph-paths:``)."""
    last = [ln for ln in out.splitlines() if ln.startswith(prefix)][-1]
    return dict(kv.split("=") for kv in last.split()[1:])


def _no_spring_bones() -> None:
    """Spring bones (engine/features/springs) are ours: Blender's pose has none (every mode)."""
    import bpy

    for ob in bpy.data.objects:
        if getattr(ob, "stylized_spring_bones", False):
            ob.stylized_spring_bones = False


def run_checks(frames_spec=None, mode="both", morph="auto", player_step: int = 1) -> int:
    import bpy

    scene = bpy.context.scene
    scene.render.engine = "STYLIZED"
    _no_spring_bones()
    checker = dc.Checker(morph)
    frames = dc.parse_frames(frames_spec, scene)
    total_frames = 0
    if mode in ("timeline", "both"):
        total_frames += checker.run_timeline(frames)
    if mode in ("player", "both"):
        total_frames += checker.run_player(step=player_step)
    worst = 0.0
    fallbacks = 0
    failed = False
    objects = set()
    between = 0.0
    fraction = 0.0
    baked_between = 0.0
    for (name, m), r in sorted(checker.results.items()):
        objects.add(name)
        if m == "between":
            between = max(between, r["err"])
            print(f"  {m:8s} {name}: max_rel_error={r['err']:.3e} (between frames of baked or resampled "
                  f"clips: reported only)")
            continue
        if m == "baked-between":
            baked_between = max(baked_between, r["err"])
            if r["path"] == "gpu":
                failed |= not (r["err"] <= dc.BETWEEN_TOLERANCE)
            print(f"  {m:8s} {name}: max_rel_error={r['err']:.3e} (baked clips at {dc.BETWEEN_SUBFRAMES} past "
                  f"{dc.BETWEEN_FRAMES} frames: fails above {dc.BETWEEN_TOLERANCE:g})")
            continue
        if m == "fraction" and r["path"] == "gpu":
            fraction = max(fraction, r["err"])
        if r["path"] == "gpu":
            worst = max(worst, r["err"])
            failed |= not (r["err"] <= dc.TOLERANCE)
        else:
            fallbacks += 1
        if r["path"] == "gpu":
            failed |= not (r["nmed"] <= dc.NORMAL_TOLERANCE)
        print(f"  {m:8s} {name}: verts={r['verts']} max_rel_error={r['err']:.3e} "
              f"normal_error_median={r['nmed']:.3e} normal_error_p90={r['nerr']:.3e} path={r['path']}")
    failed |= bool(checker.bake_failures)
    if mode in ("player", "both") and not checker.clips_checked and (checker.unplayed or checker.skipped):
        print("  player: the file's actions animate its objects but no clip was checked")
        failed = True
    if checker.session.imports.import_error:
        print(f"  import error: {checker.session.imports.import_error}")
    for row in checker.clip_rows or ():
        b = row["baked"]
        kind = (f"baked samples={b.frame_count} bake_mb={b.nbytes / 2**20:.2f} bake_checked={b.checked} "
                f"bake_between_error={b.between_error:.2e}" + (f" bake_unmeasured={b.unmeasured}" if b.unmeasured else "")
                if b is not None else "plain")
        print(f"  clip '{row['clip']}' on '{row['target']}': {kind} player={row.get('player', 0.0):.3e} "
              + " ".join(f"{m}={row[m]:.3e}" for m in ("fraction", "between", "baked-between") if m in row))
    checker.session.free()
    print(f"morph-paths: rebuild={checker.morph_paths['rebuild']} shader={checker.morph_paths['shader']}")
    rb = checker.readback.variants if checker.readback is not None else {}
    print("readback-variants: " + " ".join(f"{k}={rb[k]}" for k in sorted(rb)))
    print(f"deform-check: objects={len(objects)} frames={total_frames} max_rel_error={worst:.3e} "
          f"fallbacks={len({n for (n, _m), r in checker.results.items() if r['path'] != 'gpu'})} "
          f"skipped={len(checker.skipped)} baked={len(checker.baked)} between_max_rel_error={between:.3e} "
          f"fraction_max_rel_error={fraction:.3e} baked_between_max_rel_error={baked_between:.3e} "
          f"clips_checked={len(checker.clips_checked)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
