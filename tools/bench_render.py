"""Render benchmark: F12 of the demo character scene at 1280x720 with shadows and outlines, timed
against Workbench and EEVEE (BLENDER_EEVEE, EEVEE Next in 5.0) on the same scene in the same
process.  Each engine renders once to warm up (shader compilation), then Stylized and Workbench
take turns for --runs timed renders each and the medians are reported.  Uses demo/character.py's build_demo_scene() when it exists, otherwise
a generated skinned-ish scene.  Last line:
  bench-render: stylized_s=X workbench_s=Y eevee_s=Z ratio_workbench=R1 ratio_eevee=R2

Crowd mode (``--crowd [N ...]``, default N = 1 6 36, 640x480): the demo character and N - 1
linked duplicates (copies of the rig, body, face and wand objects sharing their armature, mesh and
shape-key data and the action) on a grid, the camera framing them all.  For each N it times F12
(median of --runs after a warm-up) and an animation render (Ctrl+F12 over --anim-frames frames:
the median per-frame time of the frames after the first) with Stylized and with Workbench in the
same process, and prints one line per N:
  bench-crowd-render: n=N f12_ratio=A anim_ratio=B ms_per_character=C
(C: the Stylized F12 cost per added character, (t_N - t_1) / (N - 1) against the N = 1 scene of
the same run; for N = 1, or a run without N = 1, the F12 time over N.)
Skinning cost (``--skin-cost``, issue 14 "Rendering cost"): the demo (or --crowd N's first N) is
rendered with Profile GPU on (each pass waits for the GPU) and every item drawn alone, alternating
the real skinning with the
same frame drawn unskinned (the identity palette bound, so every pass skips the skin matrices;
the picture is the rest pose, only the timing matters; its shader variants are compiled without
skinning, engine/gpu/passes/mtoon_shaders.py), and prints per pass
  bench-skin-cost: pass=P skinned_ms=A unskinned_ms=B skin_share=(A-B)/A
Passes (``--passes``, issue 36): the demo at 1280x720 with 8 samples, Combined only against every
pass Stylized writes enabled (Z, Mist, Normal, Position, the index passes, Diffuse Color,
Emission, Ambient Occlusion, Cryptomatte Object/Material/Asset, one constant AOV), taking turns;
prints
  bench-passes: combined_s=A all_s=B ratio_passes=B/A blur_s=C ratio_motion_blur=C/A
(C: Combined only with Render > Motion Blur on, shutter 0.5: every sample drawn at its own
instant; the passes include the Vector pass).
This is a benchmark, not a test: it asserts nothing.
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from tools import (
    _bootstrap,  # noqa: E402
    render_capture,  # noqa: E402  (F12 results: the hook _bootstrap installs)
)


def build_scene():
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    try:
        from demo.character import build_demo_scene
    except ImportError:
        build_demo_scene = None
    if build_demo_scene is not None:
        build_demo_scene(scene)
        return scene, "demo character"
    return _generated_scene(scene), "generated"


def _generated_scene(scene):
    """A subdivided capsule-ish body on an armature, a ground plane, a sun and a camera."""
    import math

    import bpy

    bpy.ops.mesh.primitive_uv_sphere_add(segments=96, ring_count=64, radius=0.5, location=(0, 0, 1.0))
    body = bpy.context.active_object
    body.scale = (0.6, 0.5, 1.6)
    bpy.ops.mesh.primitive_plane_add(size=10)
    bpy.ops.object.armature_add(location=(0, 0, 0.2))
    rig = bpy.context.active_object
    body.parent = rig
    mod = body.modifiers.new("Armature", "ARMATURE")
    mod.object = rig
    g = body.vertex_groups.new(name="Bone")
    g.add(list(range(len(body.data.vertices))), 1.0, "REPLACE")
    mat = bpy.data.materials.new("Body")
    body.data.materials.append(mat)
    if hasattr(mat, "stylized_mtoon"):
        mat.stylized_mtoon.enabled = True
        mat.stylized_mtoon.outline_width_mode = "worldCoordinates"
        mat.stylized_mtoon.outline_width = 0.01
    bpy.ops.object.light_add(type="SUN", rotation=(0.6, 0.2, 0.3))
    bpy.ops.object.camera_add(location=(0, -4, 1.4), rotation=(math.radians(88), 0, 0))
    scene.camera = bpy.context.active_object
    return scene


CROWD_SPACING = 1.1          # metres between the characters of the crowd grid


def character_objects(scene):
    """The demo character's objects: its rig and every object parented to it (body, face, wand)."""
    rig = scene.objects.get("DemoRig")
    if rig is None:
        raise RuntimeError("crowd mode needs demo/character.py's scene (no object 'DemoRig')")
    return rig, [ob for ob in scene.objects if ob.parent is rig]


def duplicate_linked(rig, offset, suffix: str = "", parts=None, collection=None):
    """A linked duplicate of ``rig`` and every object below it (objects copied, their data, the
    armature, meshes, shape keys and actions shared), parents, bone parents (parent type, bone
    and parent inverse) and armature modifiers pointing at the copies; the copy's rig moved by
    ``offset``.  ``suffix`` is appended to the copies' names (empty: Blender's own ``.001``
    names).  ``parts``: copy only these objects with the rig (default: every object below it);
    a part whose parent is not copied (e.g. a body deformed by the rig but not parented to it) is
    copied unparented and moved by ``offset``.  ``collection``: where the copies are linked
    (default: the rig's first collection).  Returns (rig, objects)."""
    from mathutils import Vector

    coll = collection if collection is not None else rig.users_collection[0]
    wanted = None if parts is None else set(parts)
    copies = {}

    def copy(ob, parent):
        c = ob.copy()                              # shares ob.data (and the action)
        if suffix:
            c.name = f"{ob.name}{suffix}"
        if parent is not None:
            c.parent = parent                      # (assigning the parent resets its type)
            c.parent_type = ob.parent_type
            c.parent_bone = ob.parent_bone
            c.matrix_parent_inverse = ob.matrix_parent_inverse.copy()
        coll.objects.link(c)
        copies[ob] = c
        for child in ob.children:
            if wanted is None or child in wanted:
                copy(child, c)
        return c

    new_rig = copy(rig, None)
    new_rig.location = rig.location + Vector(offset)
    for ob in parts or ():
        if ob not in copies and (ob.parent is None or ob.parent not in wanted):
            c = copy(ob, None)                     # (its wanted children follow, parented to it)
            c.parent = None
            c.location = ob.location + Vector(offset)
    for c in copies.values():
        for m in c.modifiers:
            if m.type == "ARMATURE" and m.object in copies:
                m.object = copies[m.object]
    return new_rig, [c for ob, c in copies.items() if ob is not rig]


def add_linked_duplicates(scene, count: int, spacing: float = CROWD_SPACING):
    """Add ``count`` linked duplicates of the demo character (objects copied, data shared: the
    armature, meshes, shape keys and the action), on a square grid behind the original, and
    point the camera at the whole crowd.  Returns the list of (rig, objects) of every character,
    the original first."""
    import math

    from mathutils import Vector

    rig, children = character_objects(scene)
    chars = [(rig, children)]
    side = max(1, math.ceil(math.sqrt(count + 1)))
    for k in range(1, count + 1):
        gx, gy = k % side, k // side
        chars.append(duplicate_linked(rig, ((gx - (side - 1) / 2.0) * spacing, gy * spacing, 0.0),
                                      f".crowd{k:03d}"))
    # the original stays at the front-centre column; frame the grid from behind the camera's side
    rig.location = rig.location + Vector((-(side - 1) / 2.0 * spacing, 0.0, 0.0))
    cam = scene.camera
    depth = (side - 1) * spacing
    target = Vector((0.0, depth / 2.0, 0.9))
    dist = 4.3 + 1.6 * depth
    loc = target + Vector((0.25, -1.0, 0.28)).normalized() * dist
    cam.location = loc
    cam.rotation_mode = "QUATERNION"
    cam.rotation_quaternion = (target - loc).to_track_quat("-Z", "Y")
    cam.data.clip_end = max(cam.data.clip_end, 4.0 * dist)
    bpy_update(scene)
    return chars


def bpy_update(scene):
    import bpy

    bpy.context.view_layer.update()


def time_engine(scene, engine, runs):
    return time_engines(scene, (engine,), runs)[engine]


def time_engines(scene, engines, runs):
    """{engine: (median s, first s)}: each engine renders once to warm up, then the engines take
    turns (run 1 of each, run 2 of each, ...), so a load spike on this shared machine hits them
    alike instead of one engine's whole series."""
    import bpy

    warm, times = {}, {e: [] for e in engines}
    for e in engines:
        scene.render.engine = e
        t = time.perf_counter()
        bpy.ops.render.render(scene=scene.name)      # warm-up: shader compilation, caches
        warm[e] = time.perf_counter() - t
    for _ in range(runs):
        for e in engines:
            scene.render.engine = e
            t = time.perf_counter()
            bpy.ops.render.render(scene=scene.name)
            times[e].append(time.perf_counter() - t)
    return {e: (statistics.median(times[e]), warm[e]) for e in engines}


def time_animation(scene, engine, frames: int, out_dir: str):
    """Ctrl+F12 over ``frames`` frames: (first frame s, median s of the frames after the first).
    Each frame's time runs from its render_pre to the next frame's (the last: to the end), so it
    holds the frame change, the render and the file write, alike for every engine."""
    import bpy

    scene.render.engine = engine
    scene.frame_end = scene.frame_start + frames - 1
    scene.render.filepath = out_dir.rstrip("/") + f"/{engine.lower()}_"
    stamps = []

    def pre(*_a):
        stamps.append(time.perf_counter())

    bpy.app.handlers.render_pre.append(pre)
    try:
        t0 = time.perf_counter()
        bpy.ops.render.render(animation=True, scene=scene.name)
        t1 = time.perf_counter()
    finally:
        bpy.app.handlers.render_pre.remove(pre)
    edges = [t0] + stamps[1:] + [t1]
    per = [b - a for a, b in zip(edges, edges[1:])]
    return per[0], statistics.median(per[1:]) if len(per) > 1 else float("nan")


def run_crowd(args):
    import tempfile

    sizes = args.crowd or [1, 6, 36]
    width = args.width or 640
    height = args.height or 480

    print(f"crowd: N in {sizes}, {width}x{height}, F12 median of {args.runs} after a warm-up, "
          f"Ctrl+F12 over {args.anim_frames} frames")
    base = None
    out_dir = tempfile.mkdtemp(prefix="bench_crowd_")
    for n in sizes:
        scene, kind = build_scene()
        if kind != "demo character":
            raise SystemExit("crowd mode needs demo/character.py")
        add_linked_duplicates(scene, int(n) - 1)
        scene.render.resolution_x, scene.render.resolution_y = width, height
        scene.render.resolution_percentage = 100
        st = getattr(scene, "stylized", None)
        if st is not None:
            st.shadows = True
            st.outlines = True
        t = time_engines(scene, ("STYLIZED", "BLENDER_WORKBENCH"), args.runs)
        (sty, sty_warm), (wb, wb_warm) = t["STYLIZED"], t["BLENDER_WORKBENCH"]
        stats = render_capture.LAST_RENDER.get("stats", {})
        pipe = render_capture.LAST_RENDER.get("pipeline", {})
        scene.frame_set(scene.frame_start)
        sty_a0, sty_a = time_animation(scene, "STYLIZED", args.anim_frames, out_dir)
        wb_a0, wb_a = time_animation(scene, "BLENDER_WORKBENCH", args.anim_frames, out_dir)
        if n == 1:
            base = sty
        # the slope against the N = 1 scene of this run; without one, the F12 time over N
        per_char = (sty - base) * 1e3 / (n - 1) if (base is not None and n > 1) else sty * 1e3 / n
        print(f"  n={n}: STYLIZED F12 {sty:.3f} s (first {sty_warm:.3f} s, items={stats.get('items')}, "
              f"draws={pipe.get('draw_calls')}, batches={pipe.get('batches_drawn')}) anim first "
              f"{sty_a0:.3f} s then {sty_a:.3f} s/frame | WORKBENCH F12 {wb:.3f} s (first {wb_warm:.3f} s) "
              f"anim first {wb_a0:.3f} s then {wb_a:.3f} s/frame")
        print(f"bench-crowd-render: n={n} f12_ratio={sty / wb:.3f} anim_ratio={sty_a / wb_a:.3f} "
              f"ms_per_character={per_char:.2f}", flush=True)


def pass_scene(args):
    """(N, scene, kind) for the per-pass benchmarks: the demo and N - 1 linked duplicates (N from
    --crowd, default 1) at --width x --height, shadows and outlines on."""
    n = (args.crowd or [1])[0]
    scene, kind = build_scene()
    if n > 1:
        add_linked_duplicates(scene, n - 1)
    scene.render.resolution_x, scene.render.resolution_y = args.width, args.height
    scene.render.resolution_percentage = 100
    scene.stylized.shadows = scene.stylized.outlines = True
    return n, scene, kind


def run_skin_cost(args):
    """Per-pass time with and without the vertex shaders' skinning (see the module docstring)."""
    import bpy

    from stylized_renderer.engine.gpu import backend as gpu_backend
    from stylized_renderer.engine.gpu.passes import instancing

    n, scene, kind = pass_scene(args)
    st = scene.stylized
    st.profile_gpu = True
    scene.render.engine = "STYLIZED"
    real = gpu_backend.bind_skinning
    real_class = instancing.FrameInstances.vertex_class

    def unskinned(shader, palette, influences, identity):
        real(shader, None, 0, identity)

    def static_class(self, group):
        # the unskinned frame draws with the shader variants compiled without skinning: llvmpipe
        # runs both sides of a branch, so a skinned shader with skin_influences 0 still pays
        # for the skin matrices (what this benchmark measured before the variants)
        return "static" if real_class(self, group) != "general" else "general"

    bpy.ops.render.render(scene=scene.name)
    times = {True: [], False: []}
    try:
        for _ in range(args.runs):
            for skinned in (True, False):
                gpu_backend.bind_skinning = real if skinned else unskinned
                instancing.FrameInstances.vertex_class = real_class if skinned else static_class
                instancing.ENABLED = False          # every item drawn alone, through bind_skinning
                bpy.ops.render.render(scene=scene.name)
                times[skinned].append(dict(render_capture.LAST_RENDER["stats"]["gpu_ms"]))
    finally:
        gpu_backend.bind_skinning = real
        instancing.FrameInstances.vertex_class = real_class
        instancing.ENABLED = True
    print(f"skinning cost: {kind}, {n} character(s), {args.width}x{args.height}, {args.runs} alternations")
    for name in ("shadow", "forward", "outline_mask"):
        a = statistics.median(t.get(name, 0.0) for t in times[True])
        b = statistics.median(t.get(name, 0.0) for t in times[False])
        print(f"bench-skin-cost: pass={name} skinned_ms={a:.1f} unskinned_ms={b:.1f} "
              f"skin_share={(a - b) / a if a > 0 else float('nan'):.3f}")


def main():
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--width", type=int, default=None, help="default 1280 (crowd mode: 640)")
    ap.add_argument("--height", type=int, default=None, help="default 720 (crowd mode: 480)")
    ap.add_argument("--crowd", type=int, nargs="*", default=None, metavar="N",
                    help="crowd mode: N characters (the demo and N - 1 linked duplicates); "
                         "without a value N = 1 6 36")
    ap.add_argument("--skin-cost", action="store_true",
                    help="per-pass time with and without skinning (with --crowd N: N characters)")
    ap.add_argument("--anim-frames", type=int, default=4,
                    help="crowd mode: frames of the Ctrl+F12 animation render (the first is not counted)")
    ap.add_argument("--eevee-runs", type=int, default=1,
                    help="timed EEVEE renders (EEVEE takes minutes per frame on software GL)")
    ap.add_argument("--skip-eevee", action="store_true", help="report eevee_s=nan (slow software GL)")
    ap.add_argument("--passes", action="store_true",
                    help="every written pass enabled against Combined only (8 samples)")
    args = ap.parse_args()
    _bootstrap.load()
    if args.passes:
        run_passes(args)
        return
    if args.crowd is not None and not args.skin_cost:
        run_crowd(args)
        return
    args.width = args.width or 1280
    args.height = args.height or 720
    if args.skin_cost:
        run_skin_cost(args)
        return
    scene, kind = build_scene()
    scene.render.resolution_x = args.width
    scene.render.resolution_y = args.height
    scene.render.resolution_percentage = 100
    st = getattr(scene, "stylized", None)
    if st is not None:
        st.shadows = True
        st.outlines = True

    print(f"scene: {kind}, {args.width}x{args.height}, {args.runs} timed renders per engine (median)")
    t = time_engines(scene, ("STYLIZED", "BLENDER_WORKBENCH"), args.runs)
    (sty, sty_warm), (wb, wb_warm) = t["STYLIZED"], t["BLENDER_WORKBENCH"]
    stats = render_capture.LAST_RENDER.get("stats", {})
    print(f"  STYLIZED          {sty:8.3f} s (first {sty_warm:.3f} s)  items={stats.get('items')} "
          f"fallbacks={stats.get('fallbacks', stats.get('fallback_objects'))}")
    print(f"  BLENDER_WORKBENCH {wb:8.3f} s (first {wb_warm:.3f} s)")
    if args.skip_eevee:
        ee = float("nan")
    else:
        ee, ee_warm = time_engine(scene, _bootstrap.eevee_engine_id(), max(1, args.eevee_runs))
        print(f"  BLENDER_EEVEE     {ee:8.3f} s (first {ee_warm:.3f} s, {scene.eevee.taa_render_samples} samples)")
    print(f"bench-render: stylized_s={sty:.3f} workbench_s={wb:.3f} eevee_s={ee:.3f} "
          f"ratio_workbench={sty / wb:.3f} ratio_eevee={sty / ee:.3f}")


#: the view-layer switches of the passes Stylized writes (engine/features/passes/inventory.py)
WRITTEN_SWITCHES = ("use_pass_z", "use_pass_mist", "use_pass_normal", "use_pass_position",
                    "use_pass_object_index", "use_pass_material_index", "use_pass_diffuse_color",
                    "use_pass_emit", "use_pass_ambient_occlusion", "use_pass_cryptomatte_object",
                    "use_pass_cryptomatte_material", "use_pass_cryptomatte_asset", "use_pass_vector")


def run_passes(args):
    import bpy

    scene, kind = build_scene()
    scene.render.resolution_x = args.width or 1280
    scene.render.resolution_y = args.height or 720
    scene.render.resolution_percentage = 100
    scene.render.engine = "STYLIZED"
    scene.stylized.render_samples = 8
    layer = scene.view_layers[0]
    mat = next(m for m in bpy.data.materials if m.use_nodes)
    aov = mat.node_tree.nodes.new("ShaderNodeOutputAOV")
    aov.aov_name = "bench_aov"

    def f12(on: bool, blur: bool = False) -> float:
        scene.render.use_motion_blur = blur
        scene.render.motion_blur_shutter = 0.5
        for name in WRITTEN_SWITCHES:
            setattr(layer, name, on)
        if on and not len(layer.aovs):
            layer.aovs.add().name = "bench_aov"
        elif not on and len(layer.aovs):
            layer.aovs.remove(layer.aovs[0])
        t = time.perf_counter()
        bpy.ops.render.render(scene=scene.name)
        return time.perf_counter() - t

    f12(False)                                             # warm-up (shader variants, targets)
    f12(True)
    f12(False, blur=True)
    plain, every, blurred = [], [], []
    for _ in range(args.runs):
        plain.append(f12(False))
        every.append(f12(True))
        blurred.append(f12(False, blur=True))
    a, b, c = statistics.median(plain), statistics.median(every), statistics.median(blurred)
    print(f"scene: {kind}, {scene.render.resolution_x}x{scene.render.resolution_y}, 8 samples, "
          f"{args.runs} runs each (median)")
    print(f"bench-passes: combined_s={a:.3f} all_s={b:.3f} ratio_passes={b / a:.3f} blur_s={c:.3f} "
          f"ratio_motion_blur={c / a:.3f}")


if __name__ == "__main__":
    main()
