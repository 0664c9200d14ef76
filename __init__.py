# SPDX-License-Identifier: GPL-3.0-or-later
"""Stylized Renderer: a Blender render engine for toon characters.

MToon toon shading, a directional shadow map and inverse-hull outlines, with our own animation
runtime (ScenePose, AnimationPlayer, MorphState) and GPU skinning / morphing in every pass.
"""

from . import registration


def register():
    registration.register()


def unregister():
    registration.unregister()
