"""A plain clip's F-Curves -> the pose's local TRS rows at any time (numpy, no bpy).

``CurveTracks`` evaluates the clip's curves (``fcurves.CurveEvaluator``) at the frame of a clip
time and writes each value where Blender's pose evaluation puts it: the keyed components of a
node's location / rotation / scale over its basis values (components without a curve keep the
rig's own values), object delta transforms applied (``matrix_basis = T(loc + dloc) R(drot @ rot)
S(scale * dscale)``), rotations converted from their mode to a unit quaternion.  Quaternion
channels are interpolated per component, then normalised, as Blender does when it builds the
bone's matrix (``BKE_pchan_to_mat4``: ``normalize_qt_qt``; a zero quaternion gives (0, 1, 0, 0)).
"""
from __future__ import annotations

import numpy as np

from ..assets.curves import EULER_ORDERS, ROT_AXIS_ANGLE, ROT_QUATERNION, CurveBindingAsset
from .fcurves import CurveEvaluator

_AXIS = {"X": 0, "Y": 1, "Z": 2}


def _qmul(a, b):
    aw, ax, ay, az = a[:, 0], a[:, 1], a[:, 2], a[:, 3]
    bw, bx, by, bz = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
    return np.stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], axis=1)


def euler_quat(e: np.ndarray, order: str) -> np.ndarray:
    """(N, 3) Euler angles in a Blender order ('XYZ' applies X first) -> (N, 4) unit wxyz."""
    q = None
    for axis in order:
        i = _AXIS[axis]
        h = e[:, i] * 0.5
        qa = np.zeros((e.shape[0], 4))
        qa[:, 0] = np.cos(h)
        qa[:, 1 + i] = np.sin(h)
        q = qa if q is None else _qmul(qa, q)
    return q  # pyright: ignore[reportReturnType]  (an Euler order names three axes: q is set)


def axis_angle_quat(aa: np.ndarray) -> np.ndarray:
    """(N, 4) (angle, x, y, z) -> (N, 4) wxyz (a zero axis: the identity), as axis_angle_to_quat."""
    ln = np.sqrt(np.einsum("ij,ij->i", aa[:, 1:], aa[:, 1:]))
    ok = ln > 0.0
    h = aa[:, 0] * 0.5
    q = np.zeros((aa.shape[0], 4))
    q[:, 0] = np.where(ok, np.cos(h), 1.0)
    q[:, 1:] = aa[:, 1:] * (np.where(ok, np.sin(h) / np.where(ok, ln, 1.0), 0.0))[:, None]
    return q


def normalize_rows(q: np.ndarray) -> np.ndarray:
    """Blender's normalize_qt on (N, 4) rows, in place (a zero row becomes (0, 1, 0, 0))."""
    n = np.sqrt(np.einsum("ij,ij->i", q, q))
    zero = n == 0.0
    if zero.any():
        n[zero] = 1.0
        q /= n[:, None]
        q[zero] = (0.0, 1.0, 0.0, 0.0)
        return q
    q /= n[:, None]
    return q


def _scatter(curve_idx: np.ndarray):
    """(flat positions, curve indices) of the keyed components of a (N, W) curve-index table."""
    flat = np.flatnonzero(curve_idx.ravel() >= 0)
    return flat, curve_idx.ravel()[flat]


class CurveTracks:
    """The TRS rows (``t_nodes``, ``r_nodes``, ``s_nodes`` order) and morph values of a plain
    clip at any clip time (seconds; frame = ``frame_start + time * fps``)."""

    def __init__(self, binding: CurveBindingAsset, frame_start: float, fps: float):
        self.binding = b = binding
        self.frame_start = float(frame_start)
        self.fps = float(fps)
        self.evaluator = CurveEvaluator(b.curves)
        self._t = _scatter(b.t_curve)
        self._s = _scatter(b.s_curve)
        self._r = _scatter(b.r_curve)
        self._t_add = b.t_add.ravel()[self._t[0]]
        self._s_mul = b.s_mul.ravel()[self._s[0]]
        modes = b.r_mode
        self._all_quat = bool(modes.size and (modes == ROT_QUATERNION).all())
        self._mode_rows = [(int(m), np.flatnonzero(modes == m)) for m in np.unique(modes)]
        ident = np.zeros(4)
        ident[0] = 1.0
        self._delta_rows = np.flatnonzero(np.abs(b.r_delta - ident).max(axis=1) > 0.0) if modes.size else np.zeros(0, np.int64)
        self._m = b.m_curve
        # every rotation component keyed, by consecutive curves: the values are the raw rows
        rc = b.r_curve.ravel()
        self._r_run = None
        if self._all_quat and rc.size and rc[0] >= 0 and np.array_equal(rc, np.arange(rc[0], rc[0] + rc.size)):
            self._r_run = (int(rc[0]), int(rc[0]) + rc.size)

    def frame(self, time: float) -> float:
        return self.frame_start + float(time) * self.fps

    def values(self, time: float) -> np.ndarray:
        return self.evaluator.evaluate(self.frame(time))

    def sample(self, time: float, values=None):
        """(T (t_nodes, 3), Q (r_nodes, 4) unit, S (s_nodes, 3)); None for an empty kind."""
        v = self.values(time) if values is None else values
        b = self.binding
        tv = qv = sv = None
        if b.t_nodes.size:
            tv = b.t_base.copy()
            tv.ravel()[self._t[0]] = v[self._t[1]] + self._t_add
        if b.s_nodes.size:
            sv = b.s_base.copy()
            sv.ravel()[self._s[0]] = v[self._s[1]] * self._s_mul
        if self._r_run is not None:
            q = v[self._r_run[0]:self._r_run[1]].reshape(-1, 4)
            n = np.sqrt(np.einsum("ij,ij->i", q, q))
            qv = q / n[:, None] if n.all() else normalize_rows(q.copy())
            if self._delta_rows.size:
                d = self._delta_rows
                qv[d] = _qmul(b.r_delta[d], qv[d])
        elif b.r_nodes.size:
            raw = b.r_base.copy()
            raw.ravel()[self._r[0]] = v[self._r[1]]
            if self._all_quat:
                qv = normalize_rows(raw)
            else:
                qv = np.empty_like(raw)
                for mode, rows in self._mode_rows:
                    if mode == ROT_QUATERNION:
                        qv[rows] = normalize_rows(raw[rows])
                    elif mode == ROT_AXIS_ANGLE:
                        qv[rows] = axis_angle_quat(raw[rows])
                    else:
                        qv[rows] = euler_quat(raw[rows, :3], EULER_ORDERS[mode - 2])
            d = self._delta_rows
            if d.size:
                qv[d] = _qmul(b.r_delta[d], qv[d])
        return tv, qv, sv

    def morphs(self, time: float, values=None) -> np.ndarray:
        if self._m.size == 0:
            return np.zeros(0)
        v = self.values(time) if values is None else values
        return v[self._m]
