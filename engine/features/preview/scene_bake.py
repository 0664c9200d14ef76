"""Scene playback's baked armatures (``blender/bake/scene.py``): what decides whether a scene can be
played (its bakes are current), and the per-frame source that poses a baked armature's bones
from its bake at the shown scene time (``SceneBakeFeed``)."""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from ...blender.bake import scene as _bake_scene
from ...blender.bake.baked_pose import baked_clip


def state_bakes(state) -> _bake_scene.SceneBakes:
    """The preview state's Scene bakes (made on first use; the state owns and frees them)."""
    if state.scene_bakes is None:
        state.scene_bakes = _bake_scene.SceneBakes()
    return state.scene_bakes


def prepare(scene, state, window_manager=None, quiet=None) -> bool:
    """Bake what Scene playback cannot evaluate itself (Play, and a check playing as Play does),
    with the window manager's progress indicator; the bake's frame changes run in ``quiet()``
    (``preview.timeline_handback_suspended``: they are not the user scrubbing).  True when it
    baked now.  Raises BakeError."""
    return _bake_scene.ensure_with_progress(window_manager, scene, state_bakes(state), quiet=quiet)


def missing(scene, state) -> Optional[str]:
    """Why the scene cannot be played from its bakes now (None: no bake needed, or they are
    current): the session refuses then, never drawing a wrong pose."""
    bakes = state.scene_bakes
    if bakes is None:
        need = _bake_scene.candidates(scene)
        if need:
            name = sorted(need)[0]
            return f"armature '{name}' needs a bake through Blender ({'; '.join(need[name])}): press Play"
        keys = _bake_scene.driven_keys(scene)
        if keys:
            return f"shape keys '{sorted(keys)[0]}' are driven: they need a bake through Blender: press Play"
        return None
    why = bakes.stale(scene)
    return f"{why}: press Play to bake again" if why else None


class SceneBakeFeed:
    """One baked armature in Scene playback: its bones' baked matrices at the shown scene time
    (root bones in armature space, the others parent-relative, as ``BakedPose`` interpolates them
    between the bake's samples) and its weighted B-Bones' segment relations."""

    def __init__(self, bake, scene_asset):
        _clip, self.baked = baked_clip(bake, scene_asset)
        self.start = float(bake.frame_start)
        self.fps = float(bake.fps)
        self.name = bake.armature

    def write(self, frame: float, pose) -> bool:
        """The bones at scene time ``frame`` into ``pose`` (before the frame's update)."""
        b = self.baked
        t = (float(frame) - self.start) / self.fps
        ok = pose.set_local_matrices(b.root_nodes, b.root_locals(t))
        return pose.set_local_matrices(b.inner_nodes, b.sample(t).locals) and ok

    def write_segments(self, frame: float, palette_set) -> bool:
        """The weighted B-Bones' segment relations at scene time ``frame`` into the palettes (for
        their next update; the sample ``write`` made is reused)."""
        b = self.baked
        if not b.bbone_nodes:
            return True
        smp = b.sample((float(frame) - self.start) / self.fps)
        return palette_set.set_bbone_relations(b.relations(smp, palette_set.segment_keys))


def feeds(bakes, scene_asset) -> List[SceneBakeFeed]:
    """A feed per baked armature that is in ``scene_asset``."""
    if bakes is None:
        return []
    out = []
    for name, b in sorted(bakes.bakes.items()):
        if scene_asset.node_index(name) >= 0:
            out.append(SceneBakeFeed(b, scene_asset))
    return out


class KeyFeed:
    """One baked shape-key datablock (``bake.scene_keys.KeyBake``) in Scene playback: the driven
    blocks' values at the shown scene time over the weights of the nodes that use it."""

    base: np.ndarray        # the values nothing animates (set by ``key_feeds``)

    def __init__(self, bake, nodes, names):
        self.bake = bake
        self.nodes = tuple(nodes)
        pos = {n: i for i, n in enumerate(names)}
        keep = [j for j, b in enumerate(bake.blocks) if b in pos]
        self.cols = np.array(keep, np.int64)
        self.slots = np.array([pos[bake.blocks[j]] for j in keep], np.int64)
        self.count = len(names)

    def write(self, frame: float, weights: dict, base: np.ndarray) -> None:
        """The driven values at ``frame`` into ``weights`` (node -> (K,) array) of its nodes, over
        what is there (the key's NLA) or ``base`` (the values nothing animates)."""
        v = self.bake.at(frame)[self.cols]
        for node in self.nodes:
            w = np.array(weights.get(node, base), np.float64, copy=True)
            w[self.slots] = v
            weights[node] = w


def key_feeds(bakes, scene_asset, runtime) -> List[KeyFeed]:
    """A feed per baked shape-key datablock with users among the scene asset's GPU nodes."""
    import bpy

    out = []
    for name, kb in sorted(getattr(bakes, "keys", {}).items() if bakes is not None else ()):
        key = bpy.data.shape_keys.get(name)
        if key is None:
            continue
        groups: Dict[tuple, list] = {}
        for ob in _bake_scene.key_users(name):
            node = scene_asset.node_index(ob.name)
            names = runtime.morph_key_names(node) if node >= 0 else None
            if names:
                groups.setdefault(tuple(names), []).append(node)
        for names, nodes in groups.items():
            feed = KeyFeed(kb, nodes, names)
            feed.base = np.array([float(key.key_blocks[n].value) if n in key.key_blocks else 0.0 for n in names])
            if feed.cols.size:
                out.append(feed)
    return out
