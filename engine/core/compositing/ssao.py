"""Screen-space ambient occlusion of a frame's centre sample (the Ambient Occlusion pass).

For every pixel with a surface: ``count`` points of a fixed normal-oriented hemisphere of radius
``distance`` (the scene's AO distance) around the surface point, projected into the frame; a
point is occluded when the surface the frame holds at its pixel lies in front of it by more than
a small bias (and the depth change over a pixel), weighted by the range check: full within
``distance`` of the pixel's own depth, (``distance`` / the depth difference) squared beyond.
AO = 1 - the occluded fraction; 0 on the background (as EEVEE writes it).  numpy over whole
images, one step per hemisphere point (never per pixel).  Unlike EEVEE's horizon scan it sees
only what the frame shows: occluders outside the frame or hidden behind others do not count.
"""
from __future__ import annotations

import numpy as np


def hemisphere(count: int) -> np.ndarray:
    """(count, 3) fixed points in the unit hemisphere around +Z (Hammersley directions, cosine
    weighted, at radii growing towards the rim so near occluders count more)."""
    i = np.arange(count, dtype=np.float64)
    u = (i + 0.5) / count
    v = np.array([int(format(k, "b")[::-1], 2) / (1 << len(format(k, "b"))) if k else 0.0
                  for k in range(count)]) + 0.5 / count
    phi = 2.0 * np.pi * v
    r = np.sqrt(u)
    d = np.stack([r * np.cos(phi), r * np.sin(phi), np.sqrt(np.maximum(0.0, 1.0 - u))], -1)
    scale = 0.15 + 0.85 * ((i + 1.0) / count) ** 2
    return d * scale[:, None]


def ambient_occlusion(view_z, view_x, view_y, normal_view, empty, projection, distance: float,
                      count: int = 12) -> np.ndarray:
    """(H, W) float32 AO.  ``view_z/x/y``: (H, W) view-space position (z negative in front);
    ``normal_view``: (H, W, 3) view-space normals; ``empty``: (H, W) bool background;
    ``projection``: (4, 4) view -> clip."""
    h, w = view_z.shape
    p = np.asarray(projection, np.float64)
    dist = max(float(distance), 1e-6)
    P = np.stack([view_x, view_y, view_z], -1).astype(np.float32)
    N = np.asarray(normal_view, np.float32)
    N = N / np.maximum(np.linalg.norm(N, axis=-1, keepdims=True), 1e-6)
    # a tangent frame per pixel (any, the hemisphere is rotation-symmetric enough for a pass)
    a = np.where(np.abs(N[..., :1]) < 0.9, np.array([1.0, 0.0, 0.0], np.float32), np.array([0.0, 1.0, 0.0], np.float32))
    T = np.cross(a, N)
    T /= np.maximum(np.linalg.norm(T, axis=-1, keepdims=True), 1e-6)
    B = np.cross(N, T)
    zbuf = np.where(empty, -1e30, view_z).astype(np.float32)
    occluded = np.zeros((h, w), np.float32)
    # a point is behind the frame's surface only beyond what the depth changes over the pixel
    # its projection snaps to (slanted surfaces: their own neighbours would occlude them)
    gy, gx = np.gradient(np.asarray(view_z, np.float32))
    bias = 0.02 * dist + 1.5 * (np.abs(gx) + np.abs(gy))
    for d in hemisphere(count).astype(np.float32):
        s = P + dist * (T * d[0] + B * d[1] + N * d[2])
        cw = p[3, 0] * s[..., 0] + p[3, 1] * s[..., 1] + p[3, 2] * s[..., 2] + p[3, 3]
        cx = p[0, 0] * s[..., 0] + p[0, 1] * s[..., 1] + p[0, 2] * s[..., 2] + p[0, 3]
        cy = p[1, 0] * s[..., 0] + p[1, 1] * s[..., 1] + p[1, 2] * s[..., 2] + p[1, 3]
        cw = np.where(np.abs(cw) < 1e-9, 1e-9, cw)
        px = np.clip(((cx / cw) * 0.5 + 0.5) * w, 0, w - 1).astype(np.int32)
        py = np.clip(((cy / cw) * 0.5 + 0.5) * h, 0, h - 1).astype(np.int32)
        zs = zbuf[py, px]
        in_front = zs > s[..., 2] + bias
        # the range check, smooth: a surface far in front of the pixel occludes less
        near = np.minimum(1.0, (dist / np.maximum(np.abs(view_z - zs), 1e-6)) ** 2)
        occluded += np.where(in_front, near, 0.0).astype(np.float32)
    ao = 1.0 - occluded / np.float32(count)
    return np.where(empty, 0.0, ao).astype(np.float32)
