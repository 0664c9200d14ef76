"""Run in a separate process by test_package.py: install the built zip into a temporary user
extension repository with Blender's own extension operators, enable it, render with it."""
import importlib
import sys
import tempfile

import bpy


def engine_ids():
    """Engines the scene accepts (the enum is dynamic: try to set it)."""
    scene = bpy.context.scene
    prev = scene.render.engine
    try:
        scene.render.engine = "STYLIZED"
    except TypeError:
        return set()
    scene.render.engine = prev
    return {"STYLIZED"}


zip_path = sys.argv[sys.argv.index("--") + 1]
repo_dir = tempfile.mkdtemp(prefix="stylized_ext_repo_")
prefs = bpy.context.preferences
repo = prefs.extensions.repos.new(name="stylized_test", module="stylized_test", custom_directory=repo_dir, source="USER")
ok = True
try:
    res = bpy.ops.extensions.package_install_files(filepath=zip_path, repo=repo.module, enable_on_install=True)
    print("install:", res)
    import addon_utils

    mod_name = "bl_ext.stylized_test.stylized_renderer"
    enabled = mod_name in {a.module for a in prefs.addons}
    print("enabled:", enabled)
    ok &= enabled and "STYLIZED" in engine_ids()
    print("engine registered:", "STYLIZED" in engine_ids())
    # render one frame with the installed copy
    scene = bpy.context.scene
    scene.render.engine = "STYLIZED"
    scene.render.resolution_x, scene.render.resolution_y = 64, 48
    re_mod = importlib.import_module(mod_name + ".engine.blender.render_engine")
    produced = {}
    original = re_mod.StylizedRenderEngine.render

    def keep_result(self, depsgraph):    # this check's hook: what the installed engine produced
        original(self, depsgraph)
        produced.update(self.last_result)

    re_mod.StylizedRenderEngine.render = keep_result
    bpy.ops.render.render()
    re_mod.StylizedRenderEngine.render = original
    px = produced.get("pixels")
    rendered = px is not None and px.shape == (48, 64, 4) and float(px[..., :3].max()) > 0.05
    print("rendered:", rendered)
    ok &= rendered
    addon_utils.disable(mod_name, default_set=True)
    print("engine after disable:", "STYLIZED" in engine_ids())
    ok &= "STYLIZED" not in engine_ids()
finally:
    prefs.extensions.repos.remove(repo)
print("RESULT", "OK" if ok else "FAIL")
