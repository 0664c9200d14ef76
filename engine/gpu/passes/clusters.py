"""Clustered lamp culling: which point, spot and area lamps reach each part of the screen.

The frame is cut into clusters: screen tiles of ``TILE`` pixels times ``SLICES`` slices of view
depth (logarithmic between the camera's clip planes; linear for an orthographic camera).  Each
local lamp is a sphere of its reach (EEVEE's influence radius: where its power falls to the
scene's *Light Threshold*, or its *Custom Distance*; engine/blender/scene_settings.py), and goes
into the list of every cluster its sphere may touch (the screen rectangle of the sphere's box,
the depth slices of its depth range): a fragment shades only the lamps of its own cluster, so the
cost grows with the lamps that reach a pixel, not with the lamps of the scene.

Each cluster holds at most ``budget`` lamps (the scene's *Lamps per Pixel*; the strongest kept,
by their light colour at 1 m); a lamp left out of a cluster that it reaches is named once per
frame (Stats panel, render log: ``budget_message``).

Textures (read with texelFetch by glsl/mtoon_shading.glsl ``mtoon_shade``, its cluster loop):

* ``lamp_data`` RGBA32F, 4 x N: per lamp (row = lamp index) position + kind, direction + cos of
  the half cone, MToon light colour at 1 m + spot smooth width, (1 / reach^2, shadow slot or -1,
  light-link bit or -1, soft radius).
* ``lamp_lists`` RGBA32F, (tiles_x * SLICES) x (tiles_y * rows): for the cluster (tx, ty, s) the
  column tx * SLICES + s, rows ty * rows ...: first the count, then the lamp indices, 4 a texel.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

TILE = 32                 # pixels per screen tile side
SLICES = 16               # depth slices
MAX_REACH = 1.0e6         # a lamp's reach is capped (an unbounded one covers every cluster anyway)


def budget_message(names, budget: int) -> str:
    """What a frame says when clusters held more lamps than the budget."""
    shown = ", ".join(f"'{n}'" for n in names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    return (f"lamps {shown} left out where more than {budget} lamps reach the same pixels "
            f"(Render Properties > Stylized > Lamps per Pixel)")


@dataclass
class LampClusters:
    lamps: list                        # the local lamps, in texture order (strongest first)
    tiles: tuple = (1, 1)              # (tiles_x, tiles_y)
    rows: int = 1                      # texel rows per cluster: the count, then ceil(max / 4)
    lists: Optional[np.ndarray] = None           # (tiles_y * rows, tiles_x * SLICES, 4) float32
    depth: tuple = (0.1, 1.0, 0.0)     # (near, slices per unit of log(depth / near) or of depth, ortho)
    left_out: list = field(default_factory=list)   # names of lamps left out of some cluster
    most: int = 0                      # the most lamps in a cluster
    mean: float = 0.0                  # lamps per cluster, mean over clusters with any


def clip_range(projection: np.ndarray, ortho: bool) -> tuple:
    """(near, far) view depths of an OpenGL projection matrix."""
    p = np.asarray(projection, np.float64)
    a, b = p[2, 2], p[2, 3]
    if ortho:
        near, far = (b + 1.0) / a, (b - 1.0) / a
    else:
        near, far = b / (a - 1.0), b / (a + 1.0)
    near, far = float(min(near, far)), float(max(near, far))
    if not (np.isfinite(near) and np.isfinite(far)) or not far > 0.0:
        return 0.1, 1000.0
    return max(near, 1e-4), max(far, near * 1.001 + 1e-4)


def _slice_of(d, near, scale, ortho):
    if ortho:
        s = (d - near) * scale
    else:
        s = np.log(np.maximum(d, near) / near) * scale
    return np.clip(np.floor(s), 0, SLICES - 1).astype(np.int64)


def cluster_boxes(projection, ortho: bool, tiles, size, near: float, scale: float) -> tuple:
    """(lo, hi): (ty, tx, SLICES, 3) view-space boxes (x, y, depth) of every cluster."""
    p = np.asarray(projection, np.float64)
    tx, ty = tiles
    w, h = size
    ex = np.minimum(np.arange(tx + 1) * TILE, w) / w * 2.0 - 1.0            # tile edges in NDC
    ey = np.minimum(np.arange(ty + 1) * TILE, h) / h * 2.0 - 1.0
    k = np.arange(SLICES + 1)
    edges = near + k / scale if ortho else near * np.exp(k / scale)         # slice edges (depth)
    d0, d1 = edges[:-1], edges[1:]
    if ortho:
        xs = (ex - p[0, 3]) / p[0, 0]
        ys = (ey - p[1, 3]) / p[1, 1]
        x_lo = np.broadcast_to(np.minimum(xs[:-1], xs[1:])[None, :, None], (ty, tx, SLICES))
        x_hi = np.broadcast_to(np.maximum(xs[:-1], xs[1:])[None, :, None], (ty, tx, SLICES))
        y_lo = np.broadcast_to(np.minimum(ys[:-1], ys[1:])[:, None, None], (ty, tx, SLICES))
        y_hi = np.broadcast_to(np.maximum(ys[:-1], ys[1:])[:, None, None], (ty, tx, SLICES))
    else:
        # x = (ndc + p02) d / p00 at view depth d (z = -d); extremes at the slice's two depths
        ax = (ex + p[0, 2]) / p[0, 0]
        ay = (ey + p[1, 2]) / p[1, 1]
        cx = np.stack([ax[:-1, None] * d0, ax[:-1, None] * d1, ax[1:, None] * d0, ax[1:, None] * d1])
        cy = np.stack([ay[:-1, None] * d0, ay[:-1, None] * d1, ay[1:, None] * d0, ay[1:, None] * d1])
        x_lo, x_hi = cx.min(0)[None], cx.max(0)[None]                        # (1, tx, S)
        y_lo, y_hi = cy.min(0)[:, None], cy.max(0)[:, None]                  # (ty, 1, S)
        x_lo, x_hi = np.broadcast_to(x_lo, (ty, tx, SLICES)), np.broadcast_to(x_hi, (ty, tx, SLICES))
        y_lo, y_hi = np.broadcast_to(y_lo, (ty, tx, SLICES)), np.broadcast_to(y_hi, (ty, tx, SLICES))
    z_lo = np.broadcast_to(d0[None, None, :], (ty, tx, SLICES))
    z_hi = np.broadcast_to(d1[None, None, :], (ty, tx, SLICES))
    return np.stack([x_lo, y_lo, z_lo], -1), np.stack([x_hi, y_hi, z_hi], -1)


def build_clusters(lamps, strengths, camera, width: int, height: int, budget: int) -> LampClusters:
    """The clusters of ``lamps`` (local LightData; ``strengths`` their light colour at 1 m) seen by
    ``camera`` on a ``width`` x ``height`` frame, at most ``budget`` lamps a cluster."""
    order = np.argsort(-np.asarray(strengths, np.float64), kind="stable") if len(lamps) else np.zeros(0, int)
    lamps = [lamps[i] for i in order]
    n = len(lamps)
    tx, ty = max(1, -(-int(width) // TILE)), max(1, -(-int(height) // TILE))
    ortho = bool(camera.is_ortho)
    near, far = clip_range(camera.projection, ortho)
    scale = SLICES / (far - near) if ortho else SLICES / max(np.log(far / near), 1e-6)
    out = LampClusters(lamps=lamps, tiles=(tx, ty), depth=(near, float(scale), 1.0 if ortho else 0.0))
    if n == 0:
        out.lists = np.zeros((ty, tx * SLICES, 4), np.float32)
        return out
    pos = np.array([np.asarray(l.position, np.float64) for l in lamps])
    reach = np.minimum(np.array([float(l.influence) for l in lamps]), MAX_REACH)
    view = np.asarray(camera.view, np.float64)
    vc = pos @ view[:3, :3].T + view[:3, 3]
    depth = -vc[:, 2]
    # depth slices the sphere's depth range covers (a lamp wholly behind the camera reaches nothing)
    s0 = _slice_of(depth - reach, near, scale, ortho)
    s1 = _slice_of(depth + reach, near, scale, ortho)
    alive = (depth + reach > near) & (depth - reach < far)
    # the screen rectangle of the sphere's box (all of the screen when the box reaches behind the eye)
    corners = pos[:, None, :] + reach[:, None, None] * np.array(
        [[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], np.float64)[None]
    vp = np.asarray(camera.projection, np.float64) @ view
    clip = corners @ vp[:3, :3].T + vp[:3, 3]
    w = corners @ vp[3, :3] + vp[3, 3]
    behind = (w <= 1e-6).any(1)
    with np.errstate(all="ignore"):
        ndc = clip[..., :2] / np.where(w > 1e-6, w, 1.0)[..., None]
    lo = np.where(behind[:, None], -1.0, ndc.min(1))
    hi = np.where(behind[:, None], 1.0, ndc.max(1))
    alive &= (hi[:, 0] >= -1.0) & (lo[:, 0] <= 1.0) & (hi[:, 1] >= -1.0) & (lo[:, 1] <= 1.0)
    px0 = (np.clip(lo, -1.0, 1.0) * 0.5 + 0.5) * (width, height) - 1.0     # one pixel of margin (jitter)
    px1 = (np.clip(hi, -1.0, 1.0) * 0.5 + 0.5) * (width, height) + 1.0
    t0 = np.clip(np.floor(px0 / TILE), 0, (tx - 1, ty - 1)).astype(np.int64)
    t1 = np.clip(np.floor(px1 / TILE), 0, (tx - 1, ty - 1)).astype(np.int64)
    ix, iy, isl = np.arange(tx), np.arange(ty), np.arange(SLICES)
    mx = (ix[None] >= t0[:, :1]) & (ix[None] <= t1[:, :1])             # (n, tx)
    my = (iy[None] >= t0[:, 1:]) & (iy[None] <= t1[:, 1:])             # (n, ty)
    ms = (isl[None] >= s0[:, None]) & (isl[None] <= s1[:, None])       # (n, SLICES)
    mx &= alive[:, None]
    # membership (ty, tx, SLICES, n), lamps strongest first along the last axis: the rectangle and
    # slices above, then the sphere against each cluster's view-space box
    member = my.T[:, None, None, :] & mx.T[None, :, None, :] & ms.T[None, None, :, :]
    lo_b, hi_b = cluster_boxes(camera.projection, ortho, (tx, ty), (width, height), near, scale)
    c = np.stack([vc[:, 0], vc[:, 1], depth], 1).astype(np.float32)          # (n, 3) x, y, depth
    d2 = np.zeros(member.shape, np.float32)
    for a in range(3):                    # per axis (not per lamp): (ty, tx, SLICES, n) float32
        lo_a, hi_a = lo_b[..., a, None].astype(np.float32), hi_b[..., a, None].astype(np.float32)
        g = np.maximum(np.maximum(lo_a - c[:, a], c[:, a] - hi_a), 0.0)
        d2 += g * g
    member &= d2 <= (reach * reach).astype(np.float32)
    rank = np.cumsum(member, axis=-1, dtype=np.int32)
    keep = member & (rank <= max(1, int(budget)))
    dropped = (member & ~keep).any(axis=(0, 1, 2))
    out.left_out = [lamps[i].name for i in np.flatnonzero(dropped)]
    counts = keep.sum(-1)
    most = int(counts.max())
    rows = 1 + -(-most // 4)
    lists = np.zeros((ty, rows, tx, SLICES, 4), np.float32)
    lists[:, 0, :, :, 0] = counts
    yy, xx, ss, li = np.nonzero(keep)
    k = rank[yy, xx, ss, li] - 1
    lists[yy, 1 + k // 4, xx, ss, k % 4] = li
    out.rows, out.most = rows, most
    out.mean = float(counts[counts > 0].mean()) if (counts > 0).any() else 0.0
    out.lists = lists.reshape(ty * rows, tx * SLICES, 4)
    return out


def lamp_rows(clusters: LampClusters, colors: np.ndarray, kinds, shadow_slot, link_bit) -> np.ndarray:
    """(N, 4, 4) float32 rows of ``lamp_data`` for ``clusters.lamps`` (``colors``: their MToon light
    colour at 1 m; ``kinds``: 1 point, 2 spot, 3 area; ``shadow_slot`` / ``link_bit``: per lamp, -1 none)."""
    n = len(clusters.lamps)
    d = np.zeros((max(n, 1), 4, 4), np.float32)
    for i, l in enumerate(clusters.lamps):
        kind = int(kinds[i])
        dv = np.asarray(l.direction, np.float64)
        cos_half = float(np.cos(0.5 * min(float(l.spot_size), np.pi))) if kind == 2 else -1.0
        reach = min(float(l.influence), MAX_REACH)
        d[i, 0] = (*np.asarray(l.position, np.float64)[:3], kind)
        d[i, 1] = (*(dv / max(np.linalg.norm(dv), 1e-12)), cos_half)
        d[i, 2] = (*colors[i], (1.0 - cos_half) * float(l.spot_blend) if kind == 2 else 0.0)
        d[i, 3] = (1.0 / reach ** 2 if reach > 1e-8 else 1e16, shadow_slot[i], link_bit[i], float(l.radius))
    return d
