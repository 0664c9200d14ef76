"""The synthetic rigs of tests/support/rigs.py are valid assets, and the runtime core imports
neither bpy nor gpu."""
from __future__ import annotations

import ast
import pathlib

from support import rigs as R

ROOT = pathlib.Path(__file__).resolve().parents[2]


def runtime_sources():
    """Source files of the runtime core (must not import bpy or gpu)."""
    return sorted((ROOT / "engine" / "core").rglob("*.py"))


def imported_modules(path):
    tree = ast.parse(pathlib.Path(path).read_text())
    mods = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            mods.update(a.name.split(".")[0] for a in n.names)
        elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
            mods.add(n.module.split(".")[0])
    return mods


def test_rigs_are_valid():
    assert R.skinned_arm_scene().is_valid()
    assert R.skinned_arm_scene(morph=True).is_valid()


def test_runtime_core_imports_neither_bpy_nor_gpu():
    files = runtime_sources()
    assert len(files) >= 8
    for f in files:
        mods = imported_modules(f)
        assert "bpy" not in mods and "gpu" not in mods and "mathutils" not in mods, f
