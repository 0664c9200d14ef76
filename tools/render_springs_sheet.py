"""Render a sequence of PREVIEW frames (the viewport session's preview player, spring bones on)
of Godette shaking her head, and a contact sheet, without the VRM Add-on.

  .venv/bin/python tools/render_springs_sheet.py [--out out/springs] [--frames 24] [--off]

A head-shake action (head_Armature yaws +-40 degrees, 24-frame period) is added and played by the
preview at 24 fps; each frame is drawn by StylizedSession.render_texture with the preview state
(as view_draw does), from a camera above and behind the head so the hair balls are visible.
``--off`` turns Animate Spring Bones off (the rigid reference).
"""
from __future__ import annotations

import argparse
import math
import pathlib
import sys
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from tools import _bootstrap, render_demo  # noqa: E402

GODETTE = _bootstrap.ROOT.parent / "shared" / "testdata" / "vrm" / "Godette_vrm0.blend"


class _Clock:
    def __init__(self):
        import time

        self.now, self._time = 1000.0, time

    def perf_counter(self):
        return self.now

    def __getattr__(self, name):
        return getattr(self._time, name)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--out", default="out/springs")
    ap.add_argument("--frames", type=int, default=24)
    ap.add_argument("--off", action="store_true")
    ap.add_argument("--resolution", default="320x320")
    args = ap.parse_args(argv)
    _bootstrap.load()
    import bpy
    from mathutils import Euler, Quaternion

    from stylized_renderer.engine.blender import cameras
    from stylized_renderer.engine.blender import session as session_mod
    from stylized_renderer.engine.features.preview import control as preview
    from stylized_renderer.engine.gpu import util as gpu_util
    from stylized_renderer.engine.gpu.util import texture_to_numpy

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    w, h = (int(v) for v in args.resolution.split("x"))
    bpy.ops.wm.open_mainfile(filepath=str(GODETTE))
    scene = bpy.context.scene
    scene.render.engine = "STYLIZED"
    scene.render.fps = 24
    arm = next(o for o in bpy.data.objects if o.type == "ARMATURE")
    arm.stylized_spring_bones = not args.off
    hb = arm.pose.bones["head_Armature"]
    hb.rotation_mode = "QUATERNION"
    if arm.animation_data is None:
        arm.animation_data_create()
    ad: Any = arm.animation_data        # made above when missing
    ad.action = None
    for f in range(1, 50):
        hb.rotation_quaternion = Quaternion((0, 0, 1), math.radians(40.0) * math.sin(2 * math.pi * (f - 1) / 24.0))
        hb.keyframe_insert("rotation_quaternion", frame=f)
    shake: Any = ad.action              # the action keyframe_insert made
    shake.name = "HeadShake"
    hb.rotation_quaternion = (1, 0, 0, 0)
    cam_data = bpy.data.cameras.new("SheetCam")
    cam = bpy.data.objects.new("SheetCam", cam_data)
    scene.collection.objects.link(cam)
    from mathutils import Vector

    cam.location = (0.9, 1.0, 2.2)
    cam.rotation_euler = (Vector((0.0, 0.0, 1.35)) - cam.location).to_track_quat("-Z", "Y").to_euler()
    cam_data.lens = 50
    scene.camera = cam
    if not any(o.type == "LIGHT" for o in scene.objects):
        sun = bpy.data.objects.new("SheetSun", bpy.data.lights.new("SheetSun", "SUN"))
        sun.rotation_euler = Euler((math.radians(40), 0, math.radians(150)))
        scene.collection.objects.link(sun)
    bpy.context.view_layer.update()

    preview.hand_back_to_timeline = lambda scene: False     # headless: no frame change hands back
    clock = _Clock()
    session_mod.time = clock
    s = session_mod.StylizedSession(viewport=True)
    st = preview.get_state(scene, arm)
    st.clip_name = "HeadShake"
    st.active = True
    dg = bpy.context.evaluated_depsgraph_get()
    cam_eval = cam.evaluated_get(dg)
    camera = cameras.camera_from_object(dg, cam_eval, w, h)
    paths = []

    def frame(i):
        def task():
            s.ensure_gpu()
            s.ensure_runtime(dg)
            tex = s.render_texture(dg, camera, w, h, preview_state=st)
            return texture_to_numpy(tex, w, h)
        px = gpu_util.run_in_gpu_context(task)
        p = out / f"frame_{i:03d}.png"
        render_demo._save_png(bpy, px, p)
        paths.append(p)

    frame(0)
    st.push("play")
    frame(0)
    paths.clear()
    for i in range(args.frames):
        clock.now += 1.0 / 24.0
        frame(i + 1)
    sr = getattr(s.runtime, "springs", None)
    print(f"springs-sheet: frames={len(paths)} joints={sr.joint_count if sr else 0} "
          f"steps={sr.steps_total if sr else 0} error={st.last_error}")
    render_demo.contact_sheet(bpy, paths, out / "contact_sheet.png", columns=6, thumb_factor=1)
    gpu_util.run_in_gpu_context(s.free)
    return 0


if __name__ == "__main__":
    sys.exit(main())
