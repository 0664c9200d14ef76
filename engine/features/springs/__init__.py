"""VRM spring bones on the Blender side: ``reader`` (the setup, with or without the add-on),
``runtime`` (one simulation per session, after the mixer), ``timeline`` (the farm pre-roll).  The
bpy-free simulation is ``core/animation/spring_rig.py`` and ``spring_solver.py``."""
