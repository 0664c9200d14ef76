"""bpy-free compositing kernels (issue 36): Cryptomatte hashing and ranking."""
