"""VRM spring bones on the Blender side: ``reader`` (the setup, with or without the add-on),
``runtime`` (the simulation, after the mixer), ``driver`` (the session's: one simulation per
runtime), ``timeline`` (the farm pre-roll), ``properties`` (Animate Spring Bones).  The
bpy-free simulation is ``core/animation/spring_rig.py`` and ``spring_solver.py``."""


def register():
    from . import properties

    properties.register()


def unregister():
    from . import properties

    properties.unregister()
