# SPDX-License-Identifier: GPL-3.0-or-later
"""Demo content for the Stylized Renderer (development tooling, not part of the packaged add-on).

``build_demo_scene()`` builds a small stylised toon character (armature, skinned body, face with
shape keys, actions, a hand prop) plus ground, sun and camera in the current scene, using only
``bpy.data`` and mode switching, so it runs headless with Blender as a Python module.
"""

from .character import action_fcurves, build_demo_scene
from .character_meshes import DEMO_SHAPE_KEYS

__all__ = ["build_demo_scene", "action_fcurves", "DEMO_SHAPE_KEYS"]
