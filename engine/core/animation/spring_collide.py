"""Spring bone collisions (the VRM Add-on's push-out, handler.py H:46-165, H:627-646), bpy-free:
the exact sequential push-out of a level's joints against their colliders; for outside spheres
(the usual VRM collider) every distance of a level in one go first, the slots one by one only from
the first that a joint penetrates."""
from __future__ import annotations

import numpy as np

from .spring_rig import EPS, TINY
from .spring_rig import ein as _ein

DOWN = np.array([0.0, 0.0, -1.0])


def quick_plan(slots):
    """(rows, collider ids, thresholds, [(start, stop) of each slot]) of every (row, slot) of a
    level whose colliders are all outside spheres, or None (capsules, inside shapes, planes).  A
    joint penetrates a sphere when ``|p - c| < hit + r`` or ``|p - c| < EPS`` (H:46-62), i.e.
    ``|p - c| < max(hit + r, EPS)``."""
    if not slots or any(not sp.simple for sp in slots):
        return None
    rows = np.concatenate([sp.rows for sp in slots]).astype(np.intp)
    ids = np.concatenate([sp.ids for sp in slots]).astype(np.intp)
    thr = np.concatenate([sp.thr for sp in slots])
    ends = np.cumsum([len(sp.rows) for sp in slots])
    return rows, ids, thr, [(int(e - len(sp.rows)), int(e)) for e, sp in zip(ends, slots)]


def collide_spheres(plan, rig, k, f, nxt, head, L, centres) -> bool:
    """The push-out of a level whose colliders are outside spheres (``quick_plan``): every
    (joint, collider) distance in one go, the exact slot-by-slot push-out (``collide``) only when
    one penetrates, reusing those distances up to the first push.  ``centres``: the plan's
    colliders' world centres.  Whether a joint moved (``nxt`` is updated in place)."""
    v = nxt.take(plan[0], axis=0)
    v -= centres
    ln = np.sqrt(_ein("ni,ni->n", v, v))
    pen = ln < plan[2]
    if not np.count_nonzero(pen):
        return False
    pushed = False
    for sp, (a, b) in zip(rig.lv_slots[k], plan[3]):
        if pushed:                       # a later collider sees the pushed positions
            collide(rig, k, f, nxt, head, L, (sp,))
        elif np.count_nonzero(pen[a:b]):
            if np.count_nonzero(ln[a:b] < EPS):
                collide(rig, k, f, nxt, head, L, (sp,))
            else:
                _push(sp, nxt, nxt[sp.sel], v[a:b], ln[a:b], pen[a:b], head, L)
            pushed = True
    return True


def _push(sp, nxt, p, v, ln, pen, head, L):
    """Push-out of the rows of slot ``sp`` that penetrate (``pen``) an outside sphere, then the
    length constraint (H:636-646): the add-on's arithmetic (``v = p - c``, ``ln = |v|``)."""
    rows = sp.sel
    h = head[rows]
    moved = p - (v / ln[:, None]) * (ln - sp.hr)[:, None]
    moved -= h
    lm = np.sqrt(_ein("ni,ni->n", moved, moved))
    moved *= (L[rows] / np.maximum(lm, TINY))[:, None]     # lm = 0: moved is 0 already
    moved += h
    if isinstance(rows, slice):          # p is a view of nxt
        np.copyto(p, moved, where=pen[:, None])
    else:
        nxt[rows] = np.where(pen[:, None], moved, p)


def collide(rig, k, f, nxt, head, L, slots=None):
    """Push-out and re-projection against the chains' colliders in the add-on's order (H:627-646):
    slot by slot (a later collider sees the position the earlier one pushed), every chain that has
    the slot at once.  ``L``: (n,) bone lengths; ``slots``: those of level ``k`` by default."""
    for sp in rig.lv_slots[k] if slots is None else slots:
        rows, cols = sp.sel, sp.ids
        p = nxt[rows]
        c = f.ca[cols]
        if sp.simple:                   # outside spheres: the same arithmetic in fewer calls
            v = p - c
            ln = np.sqrt(_ein("ni,ni->n", v, v))
            pen = ln < sp.thr           # d = |v| - hit - r < 0, or |v| < EPS
            if not np.count_nonzero(pen):
                continue
            if not np.count_nonzero(ln < EPS):
                _push(sp, nxt, p, v, ln, pen, head, L)
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
        nxt[rows] = np.where(pen[:, None], h + moved * (L[rows, None] / np.where(lm > 0, lm, 1.0)), p)
    return nxt
