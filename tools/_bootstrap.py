"""Import the extension from the repository root (whatever the folder is called) and register it."""
from __future__ import annotations

import importlib.util
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = "stylized_renderer"


def eevee_engine_id() -> str:
    """EEVEE's render engine id: BLENDER_EEVEE_NEXT in Blender 4.2-4.5, BLENDER_EEVEE from 5.0."""
    import bpy

    return "BLENDER_EEVEE" if bpy.app.version >= (5, 0, 0) else "BLENDER_EEVEE_NEXT"


def load(register: bool = True):
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    mod = sys.modules.get(PACKAGE)
    if mod is None or getattr(mod, "register", None) is None:
        spec = importlib.util.spec_from_file_location(PACKAGE, ROOT / "__init__.py", submodule_search_locations=[str(ROOT)])
        if spec is None or spec.loader is None:
            raise ImportError(f"no loader for the package {PACKAGE} at {ROOT / '__init__.py'}")
        mod = mod or importlib.util.module_from_spec(spec)
        sys.modules[PACKAGE] = mod
        spec.loader.exec_module(mod)
    from stylized_renderer.engine.blender.render_engine import StylizedRenderEngine as _engine
    from tools import render_capture
    render_capture.install(_engine)     # tests and tools read final renders through LAST_RENDER
    if register:
        from stylized_renderer.engine.blender.render_engine import StylizedRenderEngine

        if not StylizedRenderEngine.is_registered:
            mod.register()
            import bpy

            if bpy.app.version < (5, 0, 0):
                # bpy 4.x hangs at interpreter exit while a RenderEngine, handler or timer is
                # still registered (docs/versions.md): unregister first
                import atexit

                atexit.register(mod.unregister)
    return mod
