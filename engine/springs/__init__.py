"""VRM spring bones: ``core`` (bpy-free simulation), ``reader`` (the add-on's data, bpy-side),
``runtime`` (one simulation per preview/session)."""
