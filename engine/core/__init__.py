"""The bpy-free core: assets, animation (pose, player, mixer, NLA, spring bones), runtime (palettes,
meshes) and world (extraction, the frame order).  Imports neither bpy nor gpu (tests/test_architecture.py)."""
