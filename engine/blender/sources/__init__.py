"""Pose and mesh sources read from Blender: the timeline (evaluated pose), actions and NLA for the
Scene preview, and the fallback (Blender's evaluated mesh / hair strands through our passes)."""
