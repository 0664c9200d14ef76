"""Build the installable extension zip with Blender's own extension builder.

Usage: .venv/bin/python tools/package.py [--out dist]
Runs `blender_ext.py build` (shipped with Blender / the bpy module), which honours the
manifest's [build] paths_exclude_pattern, and prints the path of the zip.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def blender_ext_script() -> pathlib.Path:
    import bpy  # noqa: F401  (locates Blender's bundled scripts)

    base = pathlib.Path(bpy.utils.resource_path("LOCAL")) / "scripts" / "addons_core" / "bl_pkg" / "cli" / "blender_ext.py"
    if not base.exists():
        raise SystemExit(f"package: Blender's extension builder not found at {base}")
    return base


def build(out_dir: pathlib.Path) -> pathlib.Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    script = blender_ext_script()
    proc = subprocess.run([sys.executable, str(script), "build", "--source-dir", str(ROOT), "--output-dir", str(out_dir)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"package: build failed:\n{proc.stdout}\n{proc.stderr}")
    zips = sorted(out_dir.glob("stylized_renderer-*.zip"), key=os.path.getmtime)
    if not zips:
        raise SystemExit(f"package: no zip written:\n{proc.stdout}")
    return zips[-1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=str(ROOT / "dist"), help="output folder for the zip")
    args = ap.parse_args(argv)
    path = build(pathlib.Path(args.out).resolve())
    print(f"package: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
