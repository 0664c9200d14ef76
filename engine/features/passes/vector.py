"""The Vector pass (issue 36 item 4): motion to the previous and to the next frame, in pixels, in
EEVEE's layout (engine/core/compositing/motion.py), from the runtime's exact state at each instant.

``MotionCapture.capture(...)`` (before the frame is drawn): Blender's depsgraph is evaluated at
frame - 1 and frame + 1 (``RenderEngine.frame_set``, as Cycles does for its motion: poses, drivers,
constraints, shape keys, object and camera transforms at that instant), the session takes that
pose as it does for any frame (its update: palettes, morphs, object matrices), and every GPU
item's vertices are read back as the passes deform them (engine/gpu/passes/motion_vectors.py),
with the camera at that instant.  The depsgraph is put back at the frame (also on error).
The frame's own instant is read the same way last (the depsgraph and the runtime end there).
``finish(pipeline, frame)`` (on the frame's first sample): every item of ``frame`` drawn once
with its three positions.

Items are matched across instants by (scene node, primitive).  An item without positions at an
instant (hidden there, or its vertex count changed) and the objects drawn from Blender's evaluated
mesh (the fallback) get no motion from their vertices at that instant: they are drawn with their
current positions (0 motion, still hiding what lies behind).  The capture keeps nothing after the
render.
"""
from __future__ import annotations

import math

#: the instants the Vector pass compares the frame with, in frames
OFFSETS = (-1.0, 1.0)


class MotionCapture:
    """The GPU items' world positions and the camera at the instants around one frame (see the
    module docstring)."""

    def __init__(self):
        self.cameras = {}        # offset -> CameraData at that instant
        self.positions = {}      # offset -> {(node, primitive): (V, 3) world positions}

    def capture(self, engine, session, depsgraph, camera_at) -> "MotionCapture":
        """Evaluate ``depsgraph`` at every ``OFFSETS`` instant through ``engine.frame_set`` and keep
        the session's items' positions and ``camera_at()`` there; the depsgraph ends at the frame."""
        from ...gpu.passes.motion_vectors import VertexCapture

        scene = depsgraph.scene
        frame, sub = int(scene.frame_current), float(scene.frame_subframe)
        session.ensure_gpu()
        session.ensure_runtime(depsgraph)
        reader = VertexCapture(session.pipeline.gpu)
        try:
            for off in OFFSETS + (0.0,):        # the frame itself last: the depsgraph ends there
                t = frame + sub + off
                whole = math.floor(t)
                engine.frame_set(int(whole), t - whole)
                self.cameras[off] = camera_at()
                session.update_and_report(depsgraph, None)
                items = session.gpu_items(depsgraph) if session.runtime is not None else []
                self.positions[off] = {(it.node_index, it.primitive_index): reader.positions(it) for it in items}
        finally:
            engine.frame_set(frame, sub)
        return self

    def finish(self, pipeline, frame):
        """The frame's Vector pass, (H, W, 4) float32 (engine/gpu/passes/motion_vectors.py)."""
        from ...gpu.passes.motion_vectors import VertexCapture, draw_vectors

        reader = VertexCapture(pipeline.gpu)
        prev, nxt = self.positions.get(OFFSETS[0], {}), self.positions.get(OFFSETS[1], {})
        at_frame = self.positions.get(0.0, {})
        draws = []
        hidden = frame.camera_hidden
        for it in frame.items:
            if it.object_name in hidden:
                continue
            ibo = getattr(it.stream, "ibo", None)
            if ibo is None or getattr(it.stream, "vertex_count", 0) <= 0:
                continue
            key = (it.node_index, it.primitive_index)
            now = at_frame.get(key)     # (the frame's own instant: a motion-blurred frame is drawn at others)
            if now is None:
                now = reader.positions(it)
            p, n = prev.get(key), nxt.get(key)
            draws.append((ibo, p if p is not None and p.shape == now.shape else now, now,
                          n if n is not None and n.shape == now.shape else now))
        s = frame.settings
        cam = self.cameras.get(0.0, frame.camera)
        return draw_vectors(pipeline.gpu, draws, self.cameras.get(OFFSETS[0], cam).view_projection,
                            cam.view_projection, self.cameras.get(OFFSETS[1], cam).view_projection,
                            int(s.width), int(s.height))
