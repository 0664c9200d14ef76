"""The VRM feature's hooks into the host (docs/architecture.md, docs/vrm.md).

The host calls VRM only through these two hooks, which the session makes from this module:

* ``VrmDriver.preview_problem`` is the importer's ``expression_check``: why a VRM expression preview
  F-Curve animates nothing on the avatar (an unknown preset, an index past the end). The importer
  leaves such curves out of the clip and names them.
* ``VrmDriver`` is the timeline reader's ``expressions`` step, one per reader (its index arrays
  belong to the runtime's shape keys). It evaluates the avatars' expressions each frame and writes
  the keys they bind (``bind_matrix @ outputs``, from the previews at this frame, or the preview
  player's channel values). It keeps the frame's colour / UV binds (``material_binds``, applied
  by ``engine.features.vrm.binds``) and its problems.

The rules are those of ``engine/blender/sources/timeline.py``'s docstring. A key bound by any
expression takes the expressions' result instead of its own value, which the VRM Add-on writes
from the same previews, so counting both would double the expression. Keys no expression binds
keep their own values.
"""
from __future__ import annotations

import time
from typing import Dict, Optional, Tuple

import numpy as np

from . import expressions as vrm_expressions
from .read import preview_path_problem

VRM_REFRESH_SECONDS = 0.5   # the viewport re-reads the avatars' expression binds this often


class VrmDriver:
    """One timeline reader's VRM expression step (``TimelineReader(..., expressions=VrmDriver())``)."""

    def __init__(self):
        self.source = None           # VrmMorphSource when an armature carries VRM expressions
        self.material_binds = {}     # this frame's VRM colour / UV binds (materials.vrm_binds.apply)
        self.error = None            # why the VRM expressions could not be evaluated (last frame)
        self.checked = time.monotonic()   # when the add-on data was last compared (refresh)
        self._scene = None           # the reader's SceneAsset (the armatures' nodes)
        self._armatures = []         # the reader's armature object names
        self._mesh_keys = {}
        self._channel_cache = None   # (player keys, source, channel positions, expression columns)

    # -- the importer's hook ---------------------------------------------------------------------
    @staticmethod
    def preview_problem(armature_data, data_path: str) -> Optional[str]:
        """Why the preview F-Curve ``data_path`` animates nothing on ``armature_data``, or None
        (``read.preview_path_problem``)."""
        return preview_path_problem(armature_data, data_path)

    # -- the timeline reader's hook -------------------------------------------------------------
    def bind(self, scene, armature_names, mesh_keys: Dict[int, Tuple[str, list]]) -> None:
        """Read the avatars' VRM expressions once, giving the index arrays for the per-frame product.
        ``mesh_keys``: {mesh node: (object name, its key names)} of the reader's morph bindings."""
        self._scene = scene
        self._armatures = list(armature_names)
        self._mesh_keys = dict(mesh_keys)
        self.source = vrm_expressions.build_source(self._armatures, self._mesh_keys)

    def refresh(self) -> bool:
        """Rebuild the VRM index arrays when the avatars' expressions, rules or binds changed (an
        edit in the VRM Add-on's panel). Returns True when rebuilt. Costs one read of the add-on data."""
        sets = vrm_expressions.expression_sets(self._armatures)
        sig = vrm_expressions.sets_signature(sets)
        if sig == (getattr(self.source, "signature", None) if self.source is not None else ()):
            return False
        self.source = vrm_expressions.build_source([], self._mesh_keys, sets=sets)
        return True

    @property
    def problems(self) -> list:
        """Messages about the avatars' VRM data: binds to missing meshes/keys/materials, non-finite
        previews of the last frame, an evaluation failure (each names the expression and armature)."""
        if self.source is None:
            return []
        out = list(self.source.problems) + list(self.source.frame_problems)
        if self.error:
            out.append(self.error)
        return out

    def apply(self, out: Dict[int, np.ndarray], muted: Dict[int, np.ndarray], depsgraph,
              expression_values=None) -> bool:
        """The reader's step after the shape-key values are read: bound keys <- the expressions
        (a muted key stays 0) in ``out``, and this frame's material binds. Returns whether the
        weights may have changed (there are expressions: they may move every frame).
        ``expression_values``: see ``TimelineReader.read_morph_weights``."""
        if depsgraph is None or getattr(depsgraph, "mode", "RENDER") != "RENDER":
            now = time.monotonic()
            if now - self.checked >= VRM_REFRESH_SECONDS:
                self.checked = now
                self.refresh()   # viewport: binds edited in the add-on's panel show within 0.5 s
        else:
            # final renders: every frame (about 0.1 ms on a 17-expression avatar), so a render
            # session kept between F12s never draws expressions, rules or binds edited since
            self.refresh()
        if self.source is None:
            self.material_binds = {}
            return False
        for node in self.source.bound:
            if node in out:
                out[node] = out[node].copy()     # written below; the reader's cached array stays as read
        self._apply(out, muted, depsgraph, expression_values)
        return True

    def player_expression_values(self, expression_values) -> Optional[Tuple[np.ndarray, object]]:
        """(expression columns, raw values) of the channels ``(keys, values)`` that carry VRM
        expression previews (``values``: an array, or ``fill(original)`` of the previews those
        columns hold: see ``TimelineReader.read_morph_weights``); None when there are none. The
        channel -> column look-up is made once per key list and source, then reused: per frame this
        is one fancy index."""
        if expression_values is None or self.source is None:
            return None
        keys, values = expression_values
        cache = self._channel_cache
        if cache is None or cache[1] is not self.source or not (cache[0] is keys or cache[0] == keys):
            scene = self._scene
            if scene is None:
                raise RuntimeError("VrmDriver: no scene asset to find the armatures' nodes in (bind() was not called)")
            nodes = {s.armature_name: scene.node_index(s.armature_name, None) for s in self.source.sets}
            chans, cols = self.source.channel_columns(list(keys), nodes)
            cache = self._channel_cache = (keys, self.source, chans, cols)
        chans, cols = cache[2], cache[3]
        if not chans.size:
            return None
        if callable(values):
            return cols, lambda original: values(chans, original)
        return cols, np.asarray(values, np.float64)[chans]

    def _apply(self, out: Dict[int, np.ndarray], muted: Dict[int, np.ndarray], depsgraph,
               expression_values=None) -> None:
        """Bound keys <- bind_matrix @ expression outputs (a muted key stays 0); material binds
        for this frame."""
        import bpy

        src = self.source
        assert src is not None          # apply() returns before _apply without a source
        frame = None
        if depsgraph is None:
            sc = bpy.context.scene
            frame = float(sc.frame_current) + float(sc.frame_subframe) if sc is not None else None
        try:
            given = self.player_expression_values(expression_values)
            outputs = src.outputs(depsgraph, frame, given)
            self.error = None
        except Exception as ex:   # malformed add-on data: keep the shape-key values, say why
            self.error = f"VRM expressions could not be evaluated: {type(ex).__name__}: {ex}"
            self.material_binds = {}
            return
        weights = src.key_weights(outputs)
        for node, (slots, rows) in src.bound.items():
            w = out.get(node)
            if w is None:
                continue
            w[slots] = np.where(muted[node][slots], 0.0, weights[rows])
        self.material_binds = src.material.frame_state(outputs) if not src.material.empty else {}
