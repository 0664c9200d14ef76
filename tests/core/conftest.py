"""The bpy-free core tests (``make test-core``: seconds, no Blender needed).

Run alone (``pytest tests/core --confcutdir=tests/core``: tests/conftest.py, which starts Blender,
is not loaded), this makes the repository root importable as the package ``stylized_renderer``
without running its ``__init__`` (which registers the add-on through bpy) and makes any import of
Blender's modules fail, so a core test that reaches bpy fails instead of loading it.  In the whole
suite the real package is already loaded and this changes nothing."""
from __future__ import annotations

import importlib.util
import pathlib
import sys

TESTS = pathlib.Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
PACKAGE = "stylized_renderer"

if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))          # the shared helpers: `from support import rigs`
if PACKAGE not in sys.modules:
    for name in ("bpy", "gpu", "mathutils", "bmesh"):
        # `import bpy` raises ImportError from here on
        sys.modules.setdefault(name, None)  # pyright: ignore[reportArgumentType]  # typeshed: ModuleType values only
    spec = importlib.util.spec_from_file_location(PACKAGE, ROOT / "__init__.py",
                                                  submodule_search_locations=[str(ROOT)])
    assert spec is not None, ROOT / "__init__.py"
    sys.modules[PACKAGE] = importlib.util.module_from_spec(spec)   # __init__ not executed
