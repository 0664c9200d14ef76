"""Set-scale benchmark (issue 37): the demo character in a set, each engine in fresh processes.

The set: the demo character (demo/character.py, its 20 m ground removed) on a 1,000,000-vertex
terrain (a 1000 x 1000 grid, 200 m a side, flat within 6 m of the character, hills beyond), 300
linked duplicates of one rock (an icosphere, 642 vertices), 40 props with their own meshes (boxes
and cylinders, in rows behind the character), 8 point lamps casting shadows around it, the
demo's camera pulled back, 960x540, 8 anti-aliasing
samples on both sides (Stylized *Render Samples*, Workbench *Anti-Aliasing*).  ``--scale S``
scales the terrain's vertex count and the rock count by S (a quick run: ``--scale 0.1``).

Each engine runs in its own fresh process (``--run FILE ENGINE``), which opens the saved .blend
and prints: the first F12, the second F12 (nothing changed), the F12 after moving one terrain
vertex, then 8 more rounds of move-a-vertex-and-F12; the peak resident memory (ru_maxrss, which
on llvmpipe holds the "GPU" memory too), and the growth of resident memory from the end of the
first edit round to the end of the eighth, and the same of the heap in use (glibc's ``mallinfo2``:
``heap_growth_mb``, which leaves out the freed pages glibc keeps).  The processes alternate (Workbench, Stylized,
repeated ``--runs N`` times) and the medians are compared.  The load average is printed with
the figures (the machine is shared).

``--profile [first|second|edit]`` adds a Stylized process that profiles that F12 (default the second) (cProfile, top functions by
cumulative and by own time) and prints the pipeline's stats of that frame.

Run: .venv/bin/python tools/bench_set.py [--scale S] [--runs N] [--profile [WHICH]] [--keep FILE | --file FILE]
Last line: bench-set: first_ratio=.. second_ratio=.. edit_ratio=.. memory_ratio=.. growth_mb=..
This is a benchmark, not a test: it asserts nothing.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

EDIT_ROUNDS = 8


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def _heap_mb() -> float:
    """Heap in use (glibc ``mallinfo2``: allocated, not what glibc keeps of freed pages), MB;
    NaN where glibc is not the allocator."""
    import ctypes

    class _Info(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                    "fsmblks", "uordblks", "fordblks", "keepcost")]
    try:
        fn = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return float("nan")
    fn.restype = _Info
    m = fn()
    return (m.uordblks + m.hblkhd) / 2 ** 20


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def grid_mesh(name, nx, ny, size, height):
    """A grid mesh of nx x ny vertices, ``size`` metres a side, z = height(x, y), built in bulk."""
    import bpy
    import numpy as np

    xs = np.linspace(-size / 2, size / 2, nx)
    ys = np.linspace(-size / 2, size / 2, ny)
    X, Y = np.meshgrid(xs, ys)
    co = np.stack([X, Y, height(X, Y)], -1).reshape(-1, 3).astype(np.float32)
    i = np.arange(nx * ny).reshape(ny, nx)
    quads = np.stack([i[:-1, :-1], i[:-1, 1:], i[1:, 1:], i[1:, :-1]], -1).reshape(-1, 4)
    me = bpy.data.meshes.new(name)
    me.vertices.add(len(co))
    me.vertices.foreach_set("co", co.ravel())
    me.loops.add(quads.size)
    me.loops.foreach_set("vertex_index", quads.ravel().astype(np.int32))
    me.polygons.add(len(quads))
    me.polygons.foreach_set("loop_start", (np.arange(len(quads)) * 4).astype(np.int32))
    me.update()
    me.validate()
    return me


def build_set(scale: float = 1.0, width: int = 960, height: int = 540, samples: int = 8):
    """The set of the module docstring in a new scene; returns (scene, terrain object)."""
    import bmesh
    import bpy
    import numpy as np

    from tools import _bootstrap

    _bootstrap.load()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    from demo.character import build_demo_scene

    demo = build_demo_scene(scene)
    ground = demo.get("ground")
    if ground is not None:
        bpy.data.objects.remove(ground)
    rng = np.random.default_rng(37)
    side = max(2, round(math.sqrt(1_000_000 * scale)))

    def hills(x, y):
        r = np.sqrt(x * x + y * y)
        ramp = np.clip((r - 6.0) / 20.0, 0.0, 1.0)
        return ramp * (2.0 * np.sin(x * 0.11) * np.cos(y * 0.07) + 1.2 * np.sin(0.23 * x + 0.19 * y))

    mat_ground = bpy.data.materials.new("SetGround")
    mat_ground.diffuse_color = (0.35, 0.45, 0.25, 1.0)
    mat_rock = bpy.data.materials.new("SetRock")
    mat_rock.diffuse_color = (0.5, 0.48, 0.45, 1.0)
    mat_prop = bpy.data.materials.new("SetProp")
    mat_prop.diffuse_color = (0.6, 0.35, 0.2, 1.0)
    me = grid_mesh("SetTerrain", side, side, 200.0, hills)
    me.materials.append(mat_ground)
    terrain = bpy.data.objects.new("SetTerrain", me)
    scene.collection.objects.link(terrain)

    bm = bmesh.new()
    bmesh.ops.create_icosphere(bm, subdivisions=3, radius=1.0)
    rock_me = bpy.data.meshes.new("SetRock")
    bm.to_mesh(rock_me)
    bm.free()
    rock_me.materials.append(mat_rock)
    rocks = max(1, round(300 * scale)) if scale < 1.0 else 300
    for k in range(rocks):
        ob = bpy.data.objects.new(f"Rock{k:03d}", rock_me)        # linked duplicates: one mesh
        a, r = rng.uniform(0, 2 * np.pi), rng.uniform(7.0, 80.0)
        ob.location = (r * np.cos(a), r * np.sin(a), float(hills(r * np.cos(a), r * np.sin(a))))
        s = rng.uniform(0.3, 1.5)
        ob.scale = (s, s * rng.uniform(0.6, 1.2), s * rng.uniform(0.4, 0.9))
        ob.rotation_euler = tuple(rng.uniform(0, np.pi, 3))
        scene.collection.objects.link(ob)
    for k in range(40):
        bm = bmesh.new()
        if k % 2:
            bmesh.ops.create_cube(bm, size=1.0)
        else:
            bmesh.ops.create_cone(bm, cap_ends=True, segments=16 + k, radius1=0.4, radius2=0.4, depth=1.0)
        pme = bpy.data.meshes.new(f"SetProp{k:02d}")
        bm.to_mesh(pme)
        bm.free()
        pme.materials.append(mat_prop)
        ob = bpy.data.objects.new(f"Prop{k:02d}", pme)
        ob.location = (-9.0 + 18.0 * (k % 10) / 9.0 + 0.4 * (k // 10), 3.0 + 2.0 * (k // 10), 0.5)
        ob.scale = (0.5 + 0.02 * k, 0.5, 0.8 + 0.03 * k)
        scene.collection.objects.link(ob)
    for k in range(8):
        ld = bpy.data.lights.new(f"SetLamp{k}", "POINT")
        ld.energy = 25.0
        ld.use_shadow = True
        ld.color = (1.0, 0.9 - 0.05 * k, 0.8 + 0.02 * k)
        ob = bpy.data.objects.new(f"SetLamp{k}", ld)
        a = 2 * np.pi * k / 8
        ob.location = (6.0 * np.cos(a), 6.0 * np.sin(a), 4.0)
        scene.collection.objects.link(ob)
    cam = scene.camera                     # pulled back: the character, the props behind it, the hills
    cam.data.clip_end = 300.0
    cam.data.lens = 35.0
    cam.location = (3.0, -9.0, 3.0)
    from mathutils import Vector

    cam.rotation_mode = "QUATERNION"
    cam.rotation_quaternion = (Vector((0.0, 3.0, 1.0)) - cam.location).to_track_quat("-Z", "Y")
    rd = scene.render
    rd.resolution_x, rd.resolution_y, rd.resolution_percentage = width, height, 100
    scene.stylized.render_samples = samples
    scene.stylized.shadows = True
    scene.display.render_aa = str(samples) if str(samples) in ("1", "5", "8", "11", "16", "32") else "8"
    bpy.context.view_layer.update()
    return scene, terrain


def run_engine(path: str, engine: str, rounds: int = EDIT_ROUNDS, profile: str = "") -> dict:
    """In this (fresh) process: open ``path`` and time the F12s of the module docstring."""
    import bpy

    from tools import _bootstrap

    _bootstrap.load()
    bpy.ops.wm.open_mainfile(filepath=path)
    scene = bpy.context.scene
    scene.render.engine = engine
    terrain = bpy.data.objects["SetTerrain"]
    verts = terrain.data.vertices
    out = {"engine": engine, "rss_open_mb": _rss_mb()}

    def f12():
        t = time.perf_counter()
        bpy.ops.render.render()
        return time.perf_counter() - t

    def edit(k):
        v = verts[(len(verts) // 2 + 1000 * k + 17) % len(verts)]
        v.co.z += 0.01
        terrain.data.update()

    def profiled(name):
        if profile != name:
            return f12()
        import cProfile
        import io
        import pstats

        from tools import render_capture

        pr = cProfile.Profile()
        pr.enable()
        dt = f12()
        pr.disable()
        for key in ("cumulative", "tottime"):
            s = io.StringIO()
            pstats.Stats(pr, stream=s).sort_stats(key).print_stats(35)
            print(f"---- {name} F12 profile ({dt:.2f} s), by {key} ----\n" + s.getvalue(), flush=True)
        print("pipeline stats:", json.dumps(render_capture.LAST_RENDER.get("pipeline", {}), default=str)[:2000])
        print("stats:", json.dumps({k: v for k, v in render_capture.LAST_RENDER.get("stats", {}).items()
                                    if isinstance(v, (int, float))}, default=str)[:2000])
        return dt

    out["first_s"] = profiled("first")
    out["second_s"] = profiled("second")
    edit(0)
    out["edit_s"] = profiled("edit")
    rss0, heap0 = _rss_mb(), _heap_mb()
    for k in range(1, rounds):
        edit(k)
        f12()
    out["growth_mb"] = _rss_mb() - rss0
    out["heap_growth_mb"] = _heap_mb() - heap0
    out["peak_mb"] = _peak_mb()
    out["load"] = os.getloadavg()[0]
    return out


def _fresh(args) -> dict:
    res = subprocess.run([sys.executable, __file__] + args, check=False, capture_output=True, text=True, timeout=3600)
    for line in res.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{args}: no result\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="terrain vertices and rocks x S (default 1)")
    ap.add_argument("--runs", type=int, default=1, help="fresh-process runs per engine (default 1; 0: none)")
    ap.add_argument("--file", default=None, help="use this saved set instead of building one")
    ap.add_argument("--width", type=int, default=960)
    ap.add_argument("--height", type=int, default=540)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=EDIT_ROUNDS)
    ap.add_argument("--profile", nargs="?", const="second", default="", choices=("first", "second", "edit"),
                    help="also profile one of Stylized's F12s (default the second)")
    ap.add_argument("--only", choices=("STYLIZED", "BLENDER_WORKBENCH"), default=None)
    ap.add_argument("--keep", default=None, help="save the set to this .blend (and keep it)")
    ap.add_argument("--run", nargs=2, metavar=("FILE", "ENGINE"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.run:
        res = run_engine(a.run[0], a.run[1], a.rounds, a.profile or "")
        print("RESULT " + json.dumps(res), flush=True)
        return
    import bpy

    if a.file:
        path = a.file
    else:
        t = time.perf_counter()
        scene, terrain = build_set(a.scale, a.width, a.height, a.samples)
        path = a.keep or os.path.join(tempfile.mkdtemp(prefix="bench_set_"), "set.blend")
        bpy.ops.wm.save_as_mainfile(filepath=path, copy=True)
        print(f"set built in {time.perf_counter() - t:.1f} s: terrain {len(terrain.data.vertices):,} vertices, "
              f"{len(scene.objects)} objects, {a.width}x{a.height}, {a.samples} samples; {path}", flush=True)
    print(f"load before: {os.getloadavg()} on {os.cpu_count()} CPUs")
    engines = [a.only] if a.only else ["BLENDER_WORKBENCH", "STYLIZED"]
    runs = {e: [] for e in engines}
    extra = ["--rounds", str(a.rounds)]
    for _ in range(a.runs):
        for e in engines:
            r = _fresh(["--run", path, e] + extra)
            runs[e].append(r)
            print(f"  {e:18s} first {r['first_s']:.2f} s  second {r['second_s']:.2f} s  after edit "
                  f"{r['edit_s']:.2f} s  peak {r['peak_mb']:.0f} MB  growth {r['growth_mb']:.1f} MB  "
                  f"(heap {r['heap_growth_mb']:+.1f} MB)  (load {r['load']:.1f})", flush=True)
    if a.profile:
        res = subprocess.run([sys.executable, __file__, "--run", path, "STYLIZED", "--profile", a.profile, "--rounds", "1"],
                             check=False, capture_output=True, text=True, timeout=3600)
        print("\n".join(l for l in res.stdout.splitlines() if not l.startswith("RESULT ")))
    if len(engines) < 2 or a.runs < 1:
        return
    med = {e: {k: statistics.median(r[k] for r in runs[e]) for k in ("first_s", "second_s", "edit_s", "peak_mb",
                                                                        "growth_mb", "heap_growth_mb")}
           for e in engines}
    s, w = med["STYLIZED"], med["BLENDER_WORKBENCH"]
    print(f"bench-set: set={a.file or a.scale} first_ratio={s['first_s'] / w['first_s']:.2f} "
          f"second_ratio={s['second_s'] / w['second_s']:.2f} edit_ratio={s['edit_s'] / w['edit_s']:.2f} "
          f"memory_ratio={s['peak_mb'] / w['peak_mb']:.2f} growth_mb={s['growth_mb']:.1f} "
          f"wb_growth_mb={w['growth_mb']:.1f} heap_growth_mb={s['heap_growth_mb']:.1f} "
          f"wb_heap_growth_mb={w['heap_growth_mb']:.1f} load={os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
