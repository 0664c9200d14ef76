"""Shape keys whose values drivers set (issue 38: the glTF test files drive a cube's key from a
bone), baked for the preview's *Scene* playback as the armatures only Blender evaluates are
(``bake.scene``): Scene playback evaluates actions and NLA itself, never Blender's drivers.

At Play the scene, as it is, is set to each frame of the played range and the driven values read
back (Blender writes a driver's result into the key, clamped to the key's slider range); between
two samples the preview interpolates linearly, and where a measured half-way value is off that
line by more than ``TOLERANCE`` the half-way value becomes a sample, down to 1 / 2**MAX_DEPTH of
a frame, within ``BUDGET`` evaluations a frame (the bake says when it spent them).  Only drivers
of ``key_blocks[...].value`` are baked; anything else driven on a mesh's data still needs the
timeline (``preview.scene.needs_blender``)."""
from __future__ import annotations

import math
from typing import Dict, List

import numpy as np

from ..importer import actions as _actions

TOLERANCE = 2.5e-4     # of a key value (a shape key moving its vertices less than the mesh's size: < 1e-3 of it)
MAX_DEPTH = 6          # down to 1/64 of a frame
BUDGET = 6.0           # half-way evaluations per sampled frame


def driven_keys(scene) -> Dict[str, List[str]]:
    """{shape-key datablock name: names of its key blocks an unmuted driver sets} of the scene's
    meshes."""
    out = {}
    for ob in scene.objects:
        key = getattr(getattr(ob, "data", None), "shape_keys", None)
        ad = getattr(key, "animation_data", None)
        if ad is None or key is None or key.name in out:     # (no key: no animation data)
            continue
        blocks = []
        for d in ad.drivers:
            m = _actions.RE_KEY.match(d.data_path) if not d.mute else None
            name = _actions._unescape(m.group(1)) if m else None
            if name is not None and name in key.key_blocks and name not in blocks:
                blocks.append(name)
        if blocks:
            out[key.name] = blocks
    return out


class KeyBake:
    """One shape-key datablock's driven values: (T,) sorted scene ``times``, (T,K) ``values`` of
    ``blocks``; ``at(frame)`` interpolates linearly (held outside)."""

    def __init__(self, key: str, blocks: List[str], times: np.ndarray, values: np.ndarray):
        self.key = key
        self.blocks = list(blocks)
        self.times = np.asarray(times, np.float64)
        self.values = np.asarray(values, np.float64)
        self.added = 0
        self.checked = 0
        self.unmeasured = 0
        self.budget = 0
        self.residual = 0.0

    def at(self, frame: float) -> np.ndarray:
        t = self.times
        j = int(np.clip(np.searchsorted(t, frame, side="right"), 1, max(t.size - 1, 1)))
        if t.size < 2:
            return self.values[0].copy()
        a = float(np.clip((frame - t[j - 1]) / (t[j] - t[j - 1]), 0.0, 1.0))
        return self.values[j - 1] * (1.0 - a) + self.values[j] * a

    def line(self) -> str:
        out = (f"shape keys '{self.key}' ({', '.join(self.blocks[:4])}{' ...' if len(self.blocks) > 4 else ''}) "
               f"driven, baked through Blender: {self.times.size} samples ({self.added} sub-frame), largest "
               f"error between samples {self.residual:.1e} of a key value ({self.checked} mid-points checked)")
        if self.unmeasured:
            out += (f"; sample budget reached: {self.budget} mid-point evaluations ({BUDGET:g} per frame, "
                    f"bake.scene_keys.BUDGET); {self.unmeasured} interval(s) left at their estimated error")
        return out


def _read(scene, keys, frames) -> Dict[float, np.ndarray]:
    """{frame: (sum K,) values of every driven block} at ``frames`` (scene set there)."""
    import bpy

    out = {}
    for f in frames:
        fi = math.floor(f)
        scene.frame_set(int(fi), subframe=float(f - fi))
        out[float(f)] = np.array([bpy.data.shape_keys[k].key_blocks[b].value for k, blocks in keys for b in blocks],
                                 np.float64)
    return out


def bake_keys(scene, need: Dict[str, List[str]], frames: np.ndarray, quiet=None) -> Dict[str, KeyBake]:
    """Blender's driven values of ``need`` at ``frames`` and the adaptive half-way samples; the
    scene's frame and subframe are restored, also on error."""
    import contextlib

    quiet = quiet or contextlib.nullcontext
    keys = sorted(need.items())
    saved = (scene.frame_current, float(scene.frame_subframe))
    try:
        with quiet():
            got = _read(scene, keys, frames.tolist())
            times = sorted(got)
            budget = int(math.ceil(BUDGET * len(times)))
            checked = unmeasured = 0
            residual = 0.0
            # (start, end, the error expected there: a half of a measured interval a quarter of
            # its error, as a lerp's error goes with the square of the width; unknown at first)
            todo = [(a, b, np.inf) for a, b in zip(times[:-1], times[1:])]
            while todo:
                room = budget - checked
                if room <= 0:
                    unmeasured += len(todo)
                    residual = max(residual, max(e for _a, _b, e in todo))
                    break
                batch, todo = todo[:room], todo[room:]
                mids = [0.5 * (a + b) for a, b, _e in batch]
                got.update(_read(scene, keys, mids))
                checked += len(batch)
                for (a, b, _e), m in zip(batch, mids):
                    e = float(np.abs(got[m] - 0.5 * (got[a] + got[b])).max()) if got[m].size else 0.0
                    if e > TOLERANCE and b - a > 2.0 / 2 ** MAX_DEPTH:
                        todo += [(a, m, 0.25 * e), (m, b, 0.25 * e)]
                    elif e > TOLERANCE:
                        residual = max(residual, e)      # at the finest sub-frame: kept as measured
            times = np.array(sorted(got))
            values = np.stack([got[float(t)] for t in times])
    finally:
        with quiet():
            scene.frame_set(int(saved[0]), subframe=saved[1])
    out = {}
    col = 0
    for k, blocks in keys:
        kb = KeyBake(k, blocks, times, values[:, col:col + len(blocks)])
        col += len(blocks)
        kb.added = int(times.size - frames.size)
        kb.checked, kb.unmeasured, kb.budget, kb.residual = checked, unmeasured, budget, residual
        out[k] = kb
    return out


def key_users(key_name: str) -> list:
    """The objects whose mesh uses the shape-key datablock ``key_name``."""
    import bpy

    return [ob for ob in bpy.data.objects
            if getattr(getattr(getattr(ob, "data", None), "shape_keys", None), "name", None) == key_name]


def keys_signature(scene, need: Dict[str, List[str]]) -> tuple:
    """What the key bakes depend on besides the animation (``bake.scene.signature``): the drivers."""
    import bpy

    from .signature import driver_signature

    return tuple((k, tuple(b), driver_signature(bpy.data.shape_keys[k].animation_data, False))
                 for k, b in sorted(need.items()))


