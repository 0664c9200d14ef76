"""Spring bone collisions (the VRM Add-on's push-out, handler.py H:46-165, H:627-646), bpy-free:
the exact sequential push-out of a level's joints against their colliders, and a one-shot test
that tells when it can be skipped (no joint of the level is inside any of its sphere colliders)."""
from __future__ import annotations

import numpy as np

from .spring_rig import EPS

DOWN = np.array([0.0, 0.0, -1.0])


def quick_plan(slots):
    """(rows, collider ids, squared threshold) of every (row, slot) of a level whose colliders
    are all outside spheres, or None (capsules, inside shapes, planes: the exact path runs).  A
    joint penetrates a sphere when ``|p - c| < hit + r`` or ``|p - c| < EPS`` (H:46-62); the
    threshold is widened by 1e-9 so the test never misses one (it only decides whether to run the
    exact push-out)."""
    if not slots or any(sp.capsule or sp.inside or sp.any_plane for sp in slots):
        return None
    rows = np.concatenate([sp.rows for sp in slots]).astype(np.intp)
    ids = np.concatenate([sp.ids for sp in slots]).astype(np.intp)
    thr = np.maximum(np.concatenate([sp.hr for sp in slots]), EPS) * (1.0 + 1e-9)
    return rows, ids, thr * thr


def may_penetrate(plan, nxt, centres) -> bool:
    """Whether a joint at ``nxt`` (before the push-out) is inside one of its sphere colliders
    (``centres``: the plan's colliders' world centres)."""
    d = nxt.take(plan[0], axis=0)
    d -= centres
    return bool(np.count_nonzero(np.einsum("ni,ni->n", d, d) < plan[2]))


def collide(rig, k, f, nxt, head, L):
    """Push-out and re-projection against the chains' colliders in the add-on's order (H:627-646):
    slot by slot (a later collider sees the position the earlier one pushed), every chain that has
    the slot at once.  ``L``: (n,1) bone lengths."""
    for sp in rig.lv_slots[k]:
        rows, cols = sp.rows, sp.ids
        p = nxt[rows]
        c = f.ca[cols]
        if sp.simple:                   # outside spheres: the same arithmetic in fewer calls
            v = p - c
            ln = np.sqrt(np.einsum("ni,ni->n", v, v))
            pen = ln < sp.thr           # d = |v| - hit - r < 0, or |v| < EPS
            if not np.count_nonzero(pen):
                continue
            if not np.count_nonzero(ln < EPS):
                h = head[rows]
                moved = p - (v / ln[:, None]) * (ln - sp.hr)[:, None]
                moved -= h
                lm = np.sqrt(np.einsum("ni,ni->n", moved, moved))
                moved *= (L[rows, 0] / np.where(lm > 0, lm, 1.0))[:, None]
                moved += h
                nxt[rows] = np.where(pen[:, None], moved, p)
                continue
        if sp.capsule:
            ab = f.ab[cols]
            c = c + ab * np.clip(np.einsum("ij,ij->i", ab, p - c) * f.inv_l2[cols], 0.0, 1.0)[:, None]
        v = p - c
        if sp.inside:
            v = v * sp.sign[:, None]
        ln = np.sqrt(np.einsum("ni,ni->n", v, v))
        d = (ln if not sp.inside else ln * sp.sign) - sp.hr
        tiny = ln < EPS
        if sp.any_plane:
            cn = f.cn[cols]
            d = np.where(sp.plane, np.einsum("ij,ij->i", p - f.ca[cols], cn) - sp.hit, d)
            tiny &= ~sp.plane
        pen = (d < 0.0) | tiny
        if not pen.any():
            continue
        n = v / np.where(tiny, 1.0, ln)[:, None]
        if tiny.any():
            n = np.where(tiny[:, None], DOWN, n)
            d = np.where(tiny, -0.01, d)
        if sp.any_plane:
            n = np.where(sp.plane[:, None], cn, n)
        h = head[rows]
        moved = p - n * d[:, None] - h
        lm = np.sqrt(np.einsum("ni,ni->n", moved, moved))[:, None]
        nxt[rows] = np.where(pen[:, None], h + moved * (L[rows] / np.where(lm > 0, lm, 1.0)), p)
    return nxt
