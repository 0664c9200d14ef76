"""The bpy-free core tests (make test-core)."""
