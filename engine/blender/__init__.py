"""The Blender side: the importer (Blender -> assets), the bakes of what only Blender evaluates,
the pose sources (timeline, NLA, fallback meshes), the session and the RenderEngine adapter."""
