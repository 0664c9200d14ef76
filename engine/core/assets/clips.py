"""Animation assets: node TRS channels, morph weight channels and the clips that hold them
(immutable, numpy-backed, bpy-free)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

import numpy as np

from .readonly import readonly_array

if TYPE_CHECKING:
    from .curves import CurveBindingAsset


def _track_ok(times: np.ndarray, values: np.ndarray, width: int) -> bool:
    if times.ndim != 1 or values.ndim != 2 or values.shape != (times.shape[0], width):
        return False
    if not (np.all(np.isfinite(times)) and np.all(np.isfinite(values))):
        return False
    return bool(np.all(np.diff(times) >= 0.0))


@dataclass(frozen=True)
class NodeAnimationChannelAsset:
    """TRS keys of one node. Tracks are independent; an empty track leaves that part of the pose."""

    node_index: int
    translation_times: np.ndarray = field(default_factory=lambda: np.zeros(0))
    translation_values: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    rotation_times: np.ndarray = field(default_factory=lambda: np.zeros(0))
    rotation_values: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))   # wxyz, unit
    scale_times: np.ndarray = field(default_factory=lambda: np.zeros(0))
    scale_values: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))

    def __post_init__(self):
        s = object.__setattr__
        s(self, "translation_times", readonly_array(self.translation_times, np.float64))
        s(self, "translation_values", readonly_array(self.translation_values, np.float64, (3,), "translation"))
        s(self, "rotation_times", readonly_array(self.rotation_times, np.float64))
        s(self, "rotation_values", readonly_array(self.rotation_values, np.float64, (4,), "rotation"))
        s(self, "scale_times", readonly_array(self.scale_times, np.float64))
        s(self, "scale_values", readonly_array(self.scale_values, np.float64, (3,), "scale"))

    def is_valid(self, node_count: int) -> bool:
        return (
            0 <= self.node_index < node_count
            and _track_ok(self.translation_times, self.translation_values, 3)
            and _track_ok(self.rotation_times, self.rotation_values, 4)
            and _track_ok(self.scale_times, self.scale_values, 3)
        )


@dataclass(frozen=True)
class MorphWeightChannelAsset:
    """Keys of one shape key value (a Key action's ``key_blocks["name"].value`` curve)."""

    node_index: int           # the mesh object's node
    target_name: str          # the shape key name (MorphTargetAsset.key_name)
    times: np.ndarray
    values: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "times", readonly_array(self.times, np.float64))
        object.__setattr__(self, "values", readonly_array(self.values, np.float64))

    def is_valid(self, node_count: int) -> bool:
        return (
            0 <= self.node_index < node_count
            and _track_ok(self.times, self.values.reshape(-1, 1), 1)
        )


def _pack_tracks(channels) -> None:
    """Each kind of key values (translation, rotation, scale) of the channels in one read-only
    array, in channel order, each channel holding a view of its rows (the same values): the
    player's flattened tracks then view that array instead of copying it."""
    for attr in ("translation_values", "rotation_values", "scale_values"):
        arrays = [getattr(c, attr) for c in channels]
        if sum(1 for a in arrays if a.shape[0]) < 2:
            continue
        packed = np.concatenate(arrays)
        packed.flags.writeable = False
        at = 0
        for c, a in zip(channels, arrays):
            object.__setattr__(c, attr, packed[at:at + a.shape[0]])
            at += a.shape[0]


@dataclass(frozen=True)
class AnimationClipAsset:
    """An Action bound to the nodes of one target (armature, object or shape-key owner).

    Times are seconds from the clip start; ``frame_start`` and ``fps`` map them back to Blender
    frames: frame = frame_start + time * fps.
    """

    name: str
    duration_seconds: float
    channels: tuple = ()
    morph_channels: tuple = ()
    frame_start: float = 0.0
    fps: float = 24.0
    target_object: str = ""          # the object the clip animates (armature/object/mesh)
    action_name: str = ""
    # a plain clip's source F-Curves (assets.curves.CurveBindingAsset): the player evaluates them
    # at any time as Blender does; ``channels`` then list the same nodes sampled at the frames
    curves: Optional[CurveBindingAsset] = None
    notes: tuple = ()                # what the preview plays differently or leaves out, and why

    def __post_init__(self):
        object.__setattr__(self, "channels", tuple(self.channels))
        object.__setattr__(self, "morph_channels", tuple(self.morph_channels))
        object.__setattr__(self, "notes", tuple(str(n) for n in self.notes))
        _pack_tracks(self.channels)

    @property
    def channel_count(self) -> int:
        return len(self.channels) + len(self.morph_channels)

    def is_valid(self, node_count: int) -> bool:
        if not (np.isfinite(self.duration_seconds) and self.duration_seconds >= 0.0):
            return False
        if not (np.isfinite(self.fps) and self.fps > 0.0):
            return False
        if self.curves is not None and not (self.curves.is_valid(node_count)
                                            and self.curves.m_curve.shape[0] == len(self.morph_channels)):
            return False
        return all(c.is_valid(node_count) for c in self.channels) and all(
            c.is_valid(node_count) for c in self.morph_channels
        )
