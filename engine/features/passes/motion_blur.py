"""Motion blur of final renders (issue 36 item 5: Render > Motion Blur, its Shutter and Position,
and the per-object Motion Blur toggle): the anti-aliasing samples are spread over the shutter
interval and each is drawn, shaded in full, at its own instant from exact state.

For each sample, Blender's depsgraph is evaluated at the sample's instant
(``RenderEngine.frame_set``, as Cycles does for its motion steps: poses, drivers, constraints,
shape keys, object and camera transforms), the session builds that instant's frame as it builds
any frame (the runtime's palettes and morphs, the lamps, the fallback meshes), and the pipeline
draws it whole with the sample's sub-pixel offset (engine/gpu/passes/samples.py ``frame_at``).
The samples' colours are averaged, so an 8-sample F12 is both anti-aliased and motion-blurred.
The viewport never blurs (only the final render makes a ``MotionBlur``).

``instants(n, shutter, position)``: the sample times in frames relative to the frame, one per
stratum of the shutter interval (Position: CENTER [-s/2, s/2], START [0, s], END [-s, 0]), the
first the one nearest the frame (the render passes are read from the first sample).
Objects whose *Object > Motion Blur* is off (``Object.cycles.use_motion_blur``, the switch the
Object properties show) keep their transform at the frame in every sample; a skinned mesh's
deformation follows its armature's pose at each instant even then (not held).
"""
from __future__ import annotations

import math

import numpy as np

#: Render > Motion Blur > Position -> the shutter interval's start, in shutters from the frame
START = {"CENTER": -0.5, "START": 0.0, "END": -1.0}


def instants(n: int, shutter: float, position: str) -> np.ndarray:
    """(n,) sample times in frames relative to the frame (see the module docstring)."""
    n = max(1, int(n))
    t = (START.get(position, -0.5) + (np.arange(n) + 0.5) / n) * float(shutter)
    first = int(np.argmin(np.abs(t)))
    return np.concatenate([t[first:first + 1], np.delete(t, first)])


def holds_still(ob) -> bool:
    """Whether ``ob``'s Motion Blur switch (Object > Motion Blur) is off."""
    c = getattr(ob, "cycles", None)
    return c is not None and not bool(getattr(c, "use_motion_blur", True))


class MotionBlur:
    """One final render's motion blur: ``enter()`` before the first sample (the camera at its
    instant), ``frame_at(i, build)`` the frame of sample ``i`` (``build(camera)`` builds it at
    the instant the depsgraph is at), ``leave()`` after the last (the depsgraph back at the
    frame, also on error)."""

    def __init__(self, engine, depsgraph, camera_at, samples: int, render):
        scene = depsgraph.scene
        self.engine = engine
        self.depsgraph = depsgraph
        self.camera_at = camera_at
        self.frame = (int(scene.frame_current), float(scene.frame_subframe))
        self.times = instants(samples, float(getattr(render, "motion_blur_shutter", 0.5)),
                              str(getattr(render, "motion_blur_position", "CENTER")))
        # objects with their Motion Blur off: their transform at the frame
        self.still = {ob.name: np.array(ob.matrix_world, np.float64) for ob in depsgraph.objects
                      if holds_still(ob.original)}

    def _goto(self, i: int) -> None:
        t = self.frame[0] + self.frame[1] + float(self.times[i])
        whole = math.floor(t)
        self.engine.frame_set(int(whole), t - whole)

    def enter(self):
        """The depsgraph at the first sample's instant; returns the camera there."""
        self._goto(0)
        return self.camera_at()

    def hold(self, frame):
        """``frame`` with the items of objects whose Motion Blur is off at their frame transform."""
        if self.still:
            for it in frame.items:
                m = self.still.get(it.object_name)
                if m is not None:
                    it.world = m
                    if not it.local_bounds.is_empty:
                        it.world_bounds = it.local_bounds.transformed(m)
        return frame

    def frame_at(self, i: int, build):
        """The frame of sample ``i`` (1..n-1): the depsgraph at its instant, ``build(camera)``."""
        self._goto(i)
        return self.hold(build(self.camera_at()))

    def leave(self) -> None:
        self.engine.frame_set(*self.frame)
