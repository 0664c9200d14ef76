"""Inside the GUI root, in background mode with the installed extension enabled: build the demo
scene (demo/character.py) for the Stylized engine and save it.
Usage: blender -b --python tools/gui/make_scene.py -- OUT.blend"""
import sys

import bpy

sys.path.insert(0, "/repo")
from demo.character import build_demo_scene  # noqa: E402

out = sys.argv[sys.argv.index("--") + 1]
bpy.ops.wm.read_homefile(use_empty=True)
scene = bpy.context.scene
scene.render.engine = "STYLIZED"          # fails (TypeError) when the installed extension is not enabled
demo = build_demo_scene(scene)
scene.render.resolution_x, scene.render.resolution_y = 320, 240
scene.render.image_settings.file_format = "PNG"
scene.render.image_settings.color_mode = "RGBA"
scene.camera = demo["camera"]
for ob in bpy.context.view_layer.objects:
    ob.select_set(False)
demo["armature"].select_set(True)
bpy.context.view_layer.objects.active = demo["armature"]
bpy.ops.wm.save_as_mainfile(filepath=out)
print(f"make_scene: saved {out}")
