"""The Vector pass's formula (issue 36 item 4), bpy-free: a surface point's motion in pixels.

EEVEE's layout, read from its files (a box moving +x, a ball moving up, tests/test_vector_pass.py):
four channels, in pixels of the render, bottom-up y as the render result's rows:

  X, Y = (where the point was at the previous instant) - (where it is now)
  Z, W = (where it is now) - (where it will be at the next instant)

so a point moving steadily right by d pixels a frame reads (-d, 0, -d, 0); 0 on the background.
``clip_positions`` puts world points through a camera's view-projection (OpenGL clip space, done in
float64 before the GPU interpolates them over each triangle, perspective-correct);
``pixel_motion`` is the plain formula for one point (the shader's, engine/gpu/passes/motion_vectors.py).
"""
from __future__ import annotations

import numpy as np


def clip_positions(world: np.ndarray, view_projection: np.ndarray) -> np.ndarray:
    """(V, 4) float32 clip coordinates of the (V, 3) world points under ``view_projection``."""
    w = np.asarray(world, np.float64).reshape(-1, 3)
    m = np.asarray(view_projection, np.float64)
    return np.ascontiguousarray(np.concatenate([w, np.ones((w.shape[0], 1))], 1) @ m.T, np.float32)


def to_pixels(clip: np.ndarray, width: int, height: int) -> np.ndarray:
    """(..., 2) pixel coordinates (0..width, 0..height, bottom-up) of clip coordinates."""
    c = np.asarray(clip, np.float64)
    ndc = c[..., :2] / c[..., 3:4]
    return (ndc * 0.5 + 0.5) * np.array([width, height], np.float64)


def pixel_motion(world_prev, world_now, world_next, vp_prev, vp_now, vp_next, width: int, height: int):
    """(..., 4) EEVEE's Vector of world points seen by the three cameras (see the module docstring)."""
    p = to_pixels(clip_positions(world_prev, vp_prev), width, height)
    c = to_pixels(clip_positions(world_now, vp_now), width, height)
    n = to_pixels(clip_positions(world_next, vp_next), width, height)
    return np.concatenate([p - c, c - n], -1)
