"""Blender F-Curves -> ``FCurveSetAsset`` (the source keys of a plain clip) and the binding of
each curve to a node's TRS component or a morph weight (``CurveBindingAsset``).

What the preview evaluates itself (``engine.core.animation.fcurves``): keyframes of every
interpolation and easing, constant / linear extrapolation, and a Cycles modifier first in the
stack (no restricted frame range, no influence).  A curve with anything else (another modifier
such as Noise, Stepped, Limits, Generator, Envelope; Cycles with a restricted range or
influence; keys out of order) is sampled through ``FCurve.evaluate`` at the clip's frames and
played linearly between them; the clip's ``notes`` say so, naming the curve and the reason.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from ...core.assets.curves import CurveBindingAsset, FCurveSetAsset, rotation_mode_code
from .fcurve_eval import read_keys
from .rotation import rotation_prop

_MODES = {"NONE": 0, "REPEAT": 1, "REPEAT_OFFSET": 2, "MIRROR": 3}


def _unsupported(fc, co) -> Optional[str]:
    """Why the preview cannot evaluate ``fc`` itself (None: it can)."""
    mods = [m for m in fc.modifiers if not m.mute]
    for i, m in enumerate(mods):
        if m.type != "CYCLES":
            return f"its {m.type.title()} modifier '{m.name}' is not evaluated by the preview"
        if i > 0 or fc.modifiers[0] != m:
            return f"its Cycles modifier '{m.name}' is not first in the stack"
        if m.use_restricted_range or (m.use_influence and m.influence != 1.0):
            return f"its Cycles modifier '{m.name}' has a restricted frame range or an influence"
    if co.shape[0] > 1 and np.any(np.diff(co[:, 0]) <= 0.0):
        return "its keys are not in frame order"
    return None


def read_curve_set(action_name: str, fcs: list, frames: np.ndarray, sampled: list) -> Tuple[FCurveSetAsset, List[str]]:
    """The curves ``fcs`` as an FCurveSetAsset; ``sampled`` (each curve's values at ``frames``,
    from ``actions.sample_curves``) replaces the keys of a curve the preview cannot evaluate
    itself (linear between the frames); the notes name those curves."""
    counts, co, hl, hr, ipo, eas, back, amp, per = [], [], [], [], [], [], [], [], []
    extra, has_cyc, cyc = [], [], []
    notes = []
    for fc, vals in zip(fcs, sampled):
        c, l, r, i = read_keys(fc)
        n = c.shape[0]
        why = _unsupported(fc, c) if n else "it has no keys"
        if why is None:
            kp = fc.keyframe_points
            e = np.empty(n, np.int32)
            kp.foreach_get("easing", e)
            f3 = np.empty((3, n), np.float32)
            kp.foreach_get("back", f3[0])
            kp.foreach_get("amplitude", f3[1])
            kp.foreach_get("period", f3[2])
            mods = [m for m in fc.modifiers if not m.mute]
            counts.append(n)
            co.append(c)
            hl.append(l)
            hr.append(r)
            ipo.append(i.astype(np.int64))
            eas.append(e.astype(np.int64))
            back.append(f3[0].astype(np.float64))
            amp.append(f3[1].astype(np.float64))
            per.append(f3[2].astype(np.float64))
            extra.append(1 if fc.extrapolation == "LINEAR" else 0)
            if mods:
                m = mods[0]
                has_cyc.append(True)
                cyc.append((_MODES[m.mode_before], int(m.cycles_before), _MODES[m.mode_after], int(m.cycles_after)))
            else:
                has_cyc.append(False)
                cyc.append((0, 0, 0, 0))
            continue
        notes.append(f"action '{action_name}': curve {fc.data_path}[{fc.array_index}]: {why}; "
                     "sampled at every frame, linear between frames")
        n = frames.shape[0]
        pts = np.stack([frames, np.asarray(vals, np.float64)], axis=1)
        counts.append(n)
        co.append(pts)
        hl.append(pts.copy())
        hr.append(pts.copy())
        ipo.append(np.ones(n, np.int64))
        eas.append(np.zeros(n, np.int64))
        back.append(np.zeros(n))
        amp.append(np.zeros(n))
        per.append(np.zeros(n))
        extra.append(0)
        has_cyc.append(False)
        cyc.append((0, 0, 0, 0))

    def cat(parts, shape):
        return np.concatenate(parts) if parts else np.zeros(shape)

    cs = FCurveSetAsset(counts=np.array(counts, np.int64), co=cat(co, (0, 2)), handle_left=cat(hl, (0, 2)),
                        handle_right=cat(hr, (0, 2)), interpolation=cat(ipo, (0,)).astype(np.int64),
                        easing=cat(eas, (0,)).astype(np.int64), back=cat(back, (0,)), amplitude=cat(amp, (0,)),
                        period=cat(per, (0,)), extrapolation=np.array(extra, np.int64),
                        has_cycles=np.array(has_cyc, bool), cycles=np.array(cyc, np.int64).reshape(-1, 4))
    return cs, notes


def build_binding(curves: FCurveSetAsset, work, curve_index, morph_curves=()) -> CurveBindingAsset:
    """``work``: [(NodeTarget, {(prop, component): F-Curve})] (actions._bake_work);
    ``curve_index``: the curve set's row of each of those F-Curves (by id); ``morph_curves``:
    the rows of the clip's morph channels, in order."""
    t_rows, r_rows, s_rows = [], [], []
    for target, cs in work:
        idx = {k: curve_index[id(fc)] for k, fc in cs.items()}

        def comps(prop, width, idx=idx):
            out = np.full(width, -1, np.int64)
            for (p, i), row in idx.items():
                if p == prop and i < width:
                    out[i] = row
            return out

        tc = comps("location", 3)
        if not target.ignore_location and (tc >= 0).any():
            add = np.zeros(3) if target.delta_location is None else np.asarray(target.delta_location, np.float64)
            t_rows.append((target.index, np.asarray(target.location, np.float64) + add, tc, add))
        prop, width = rotation_prop(target.rotation_mode)
        rc = comps(prop, width)
        if (rc >= 0).any():
            base = np.zeros(4)
            raw = np.asarray(target.rotation[prop], np.float64)
            base[:raw.shape[0]] = raw
            cur = np.full(4, -1, np.int64)
            cur[:width] = rc
            delta = (np.array([1.0, 0.0, 0.0, 0.0]) if target.delta_rotation is None
                     else np.asarray(target.delta_rotation, np.float64))
            r_rows.append((target.index, rotation_mode_code(target.rotation_mode), base, cur, delta))
        sc = comps("scale", 3)
        if (sc >= 0).any():
            mul = np.ones(3) if target.delta_scale is None else np.asarray(target.delta_scale, np.float64)
            s_rows.append((target.index, np.asarray(target.scale, np.float64) * mul, sc, mul))

    def col(rows, j, shape, dtype: type[np.generic] = np.float64):
        return np.array([r[j] for r in rows], dtype).reshape(shape)

    return CurveBindingAsset(
        curves=curves,
        t_nodes=col(t_rows, 0, (-1,), np.int64), t_base=col(t_rows, 1, (-1, 3)), t_curve=col(t_rows, 2, (-1, 3), np.int64),
        t_add=col(t_rows, 3, (-1, 3)),
        r_nodes=col(r_rows, 0, (-1,), np.int64), r_mode=col(r_rows, 1, (-1,), np.int64), r_base=col(r_rows, 2, (-1, 4)),
        r_curve=col(r_rows, 3, (-1, 4), np.int64), r_delta=col(r_rows, 4, (-1, 4)),
        s_nodes=col(s_rows, 0, (-1,), np.int64), s_base=col(s_rows, 1, (-1, 3)), s_curve=col(s_rows, 2, (-1, 3), np.int64),
        s_mul=col(s_rows, 3, (-1, 3)),
        m_curve=np.array(list(morph_curves), np.int64))
