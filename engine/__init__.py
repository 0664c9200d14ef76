"""Engine layers.

* ``assets``    immutable numpy assets (no bpy)
* ``animation`` ScenePose, AnimationPlayer, MorphState (numpy, no bpy)
* ``importer``  Blender -> assets (the only layer that reads Blender data for assets)
* ``runtime``   skinning palettes, mesh instances, GPU vertex streams (gpu)
* ``world``     RenderExtractor -> RenderItems (numpy)
* ``passes``    the frame pipeline: shadow, forward, outline, screen-space outline, post (gpu)
* ``materials`` MToon parameters resolved from Blender materials
* ``render_engine`` the bpy.types.RenderEngine adapter
"""
