"""Blender's easing factors (``BLI_easing``) for F-Curve segments with an easing interpolation, and
the Elastic one, which is not linear in the segment's change (``fcurves.CurveEvaluator`` calls
them per frame, vectorised over the segments or curves in one; no bpy)."""
from __future__ import annotations

import numpy as np

from ..assets.curves import (EASE_IN, EASE_IN_OUT, EASE_OUT, IPO_BACK, IPO_BOUNCE, IPO_CIRC, IPO_CUBIC,
    IPO_EXPO, IPO_QUAD, IPO_QUART, IPO_QUINT, IPO_SINE)

_POW_MIN = 0.0009765625
_POW_SCALE = 1.0 / (1.0 - 0.0009765625)


def _bounce_out(u):
    u = np.asarray(u, np.float64)
    r = np.empty_like(u)
    a = u < 1 / 2.75
    b = ~a & (u < 2 / 2.75)
    c = ~a & ~b & (u < 2.5 / 2.75)
    d = ~(a | b | c)
    r[a] = 7.5625 * u[a] * u[a]
    v = u[b] - 1.5 / 2.75
    r[b] = 7.5625 * v * v + 0.75
    v = u[c] - 2.25 / 2.75
    r[c] = 7.5625 * v * v + 0.9375
    v = u[d] - 2.625 / 2.75
    r[d] = 7.5625 * v * v + 0.984375
    return r


def ease(ipo: int, easing: int, time, dur, back=None) -> np.ndarray:
    """BLI_easing's factor g (value = begin + change * g) of the non-elastic easings, for
    ``time`` from the segment start over ``dur`` frames; ``easing`` resolved (In, Out, InOut)."""
    time = np.asarray(time, np.float64)
    u = time / dur
    if ipo == IPO_BACK:
        s = np.asarray(back, np.float64)
        if easing == EASE_IN:
            return u * u * ((s + 1) * u - s)
        if easing == EASE_OUT:
            v = u - 1
            return v * v * ((s + 1) * v + s) + 1
        s = s * 1.525
        w = 2 * u
        v = w - 2
        return np.where(w < 1, 0.5 * (w * w * ((s + 1) * w - s)), 0.5 * (v * v * ((s + 1) * v + s) + 2))
    if ipo == IPO_BOUNCE:
        if easing == EASE_IN:
            return 1 - _bounce_out((dur - time) / dur)
        if easing == EASE_OUT:
            return _bounce_out(u)
        w = 2 * u
        return np.where(time < dur / 2, (1 - _bounce_out(np.maximum(1 - w, 0.0))) * 0.5,
                        _bounce_out(np.maximum(w - 1, 0.0)) * 0.5 + 0.5)
    if ipo == IPO_CIRC:
        if easing == EASE_IN:
            return -(np.sqrt(np.maximum(1 - u * u, 0.0)) - 1)
        if easing == EASE_OUT:
            v = u - 1
            return np.sqrt(np.maximum(1 - v * v, 0.0))
        w = 2 * u
        v = w - 2
        return np.where(w < 1, -0.5 * (np.sqrt(np.maximum(1 - w * w, 0.0)) - 1),
                        0.5 * (np.sqrt(np.maximum(1 - v * v, 0.0)) + 1))
    if ipo in (IPO_QUAD, IPO_CUBIC, IPO_QUART, IPO_QUINT):
        p = {IPO_QUAD: 2, IPO_CUBIC: 3, IPO_QUART: 4, IPO_QUINT: 5}[ipo]
        if ipo == IPO_QUAD:
            if easing == EASE_IN:
                return u * u
            if easing == EASE_OUT:
                return -u * (u - 2)
            w = 2 * u
            v = w - 1
            return np.where(w < 1, 0.5 * w * w, -0.5 * (v * (v - 2) - 1))
        if easing == EASE_IN:
            return u ** p
        if easing == EASE_OUT:
            v = u - 1
            return (v ** p + 1) if p % 2 else -(v ** p - 1)
        w = 2 * u
        v = w - 2
        second = 0.5 * (v ** p + 2) if p % 2 else -0.5 * (v ** p - 2)
        return np.where(w < 1, 0.5 * w ** p, second)
    if ipo == IPO_EXPO:
        def expo_in(t, d):
            return np.where(t == 0.0, 0.0, (np.power(2.0, 10 * (t / d - 1)) - _POW_MIN) * _POW_SCALE)

        def expo_out(t, d):
            return np.where(t == 0.0, 0.0, 1 - (np.power(2.0, -10 * t / d) - _POW_MIN) * _POW_SCALE)
        if easing == EASE_IN:
            return expo_in(time, dur)
        if easing == EASE_OUT:
            return expo_out(time, dur)
        h = dur / 2
        return np.where(time <= h, 0.5 * expo_in(time, h), 0.5 + 0.5 * expo_out(time - h, h))
    if ipo == IPO_SINE:
        if easing == EASE_IN:
            return 1 - np.cos(u * (np.pi / 2))
        if easing == EASE_OUT:
            return np.sin(u * (np.pi / 2))
        return -0.5 * (np.cos(np.pi * u) - 1)
    return u


def _elastic_blend(time, change, dur, amp, s, f):
    """elastic_blend (USE_ELASTIC_BLEND): ``f`` scaled where the amplitude is below the change."""
    t = np.abs(s)
    nz = change != 0
    with np.errstate(divide="ignore", invalid="ignore"):
        f2 = np.where(amp != 0, f * amp / np.where(nz, np.abs(change), 1.0), 0.0)
        td = np.abs(time * dur)
        l = np.where(t > 0, td / np.where(t > 0, t, 1.0), 0.0)
        f2 = np.where(td < t, f2 * l + (1 - l), f2)
    return np.where(nz, f2, f)


def elastic(easing, time, begin, change, dur, amp, period) -> np.ndarray:
    """BLI_easing_elastic_ease_{in,out,in_out} per curve (arrays; ``easing`` resolved)."""
    out = np.empty(np.shape(time))
    for e in (EASE_IN, EASE_OUT, EASE_IN_OUT):
        m = easing == e
        if m.any():
            out[m] = _elastic_one(e, time[m], begin[m], change[m], dur[m], amp[m], period[m])
    return out


def _elastic_one(e, time, begin, change, dur, amp, period):
    two_pi = 2 * np.pi
    if e == EASE_IN_OUT:
        u = time / (dur / 2)
        done = u == 2.0
        u = u - 1.0
        period = np.where(period == 0, dur * (0.3 * 1.5), period)
    else:
        u = time / dur
        done = u == 1.0
        u = u - 1.0 if e == EASE_IN else -u
        period = np.where(period == 0, dur * 0.3, period)
    small = (amp == 0) | (amp < np.abs(change))
    f = np.ones_like(u)
    s = np.where(small, period / 4, 0.0)
    f = np.where(small, _elastic_blend(u, change, dur, amp, s, f), f)
    with np.errstate(invalid="ignore"):
        s = np.where(small, s, period / two_pi * np.arcsin(np.clip(change / np.where(amp != 0, amp, 1.0), -1, 1)))
    a = np.where(small, change, amp)
    wave = a * np.power(2.0, 10 * u) * np.sin((u * dur - s) * two_pi / period)
    if e == EASE_IN:
        v = -f * wave + begin
    elif e == EASE_OUT:
        v = f * wave + change + begin
    else:
        v = np.where(u < 0, -0.5 * f * wave + begin, 0.5 * f * wave + change + begin)
        # the second half is evaluated at -u
        neg = u >= 0
        if neg.any():
            un = -u
            wave2 = a * np.power(2.0, 10 * un) * np.sin((un * dur - s) * two_pi / period)
            v = np.where(neg, 0.5 * f * wave2 + change + begin, v)
    v = np.where(time == 0.0, begin, v)
    return np.where(done, begin + change, v)
