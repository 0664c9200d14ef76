"""The part of Blender's command line a farm job uses, for the bpy module (the wheel in .venv-X.Y):

    .venv/bin/python tools/farm/bpy_blender.py --background SCENE.blend [--python-exit-code N] \
        --python SCRIPT.py -- SCRIPT ARGS...

The bpy module has no ``blender`` executable; this runs the same steps Blender's own command line
does for these options (open SCENE, run SCRIPT with ``sys.argv`` holding everything, exit with N
when the script fails), after loading and registering the Stylized Renderer extension from this
checkout (what an installed extension is in a real Blender). Tests run the farm job template
(tools/farm/stylized_render.openjd.yaml) through it; workers run a real ``blender``.
"""
from __future__ import annotations

import pathlib
import runpy
import sys
import traceback

ROOT = pathlib.Path(__file__).resolve().parents[2]


def parse(argv):
    scene = script = None
    exit_code = 0
    rest = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            rest = argv[i:]
            break
        if a in ("--background", "-b"):
            pass
        elif a == "--python-exit-code":
            i += 1
            exit_code = int(argv[i])
        elif a in ("--python", "-P"):
            i += 1
            script = argv[i]
        elif a.startswith("-"):
            raise SystemExit(f"bpy_blender: option {a!r} is not supported")
        else:
            scene = a
        i += 1
    return scene, script, exit_code, rest


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    scene, script, exit_code, rest = parse(argv)
    sys.path.insert(0, str(ROOT))
    import bpy

    from tools import _bootstrap

    _bootstrap.load(register=True)
    if scene:
        bpy.ops.wm.open_mainfile(filepath=str(pathlib.Path(scene).resolve()))
    if script:
        sys.argv = ["blender", *argv]
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as e:
            if e.code not in (None, 0):
                print(e.code if isinstance(e.code, str) else f"exit {e.code}", file=sys.stderr)
                return exit_code or 1
        except Exception:
            traceback.print_exc()
            return exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
