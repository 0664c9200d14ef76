"""AnimationPlayer: clip clock and vectorised track sampling (seed: AnimationPlayer). numpy only.

All keys of a clip are flattened at ``set_clip`` time into one array per track kind
(``sampling.TrackSet``), so one frame's sampling is a handful of numpy calls whatever the number
of channels.  Morph weight channels (``clip.morph_channels``) are sampled too and exposed as
``morph_keys`` / ``morph_values`` for the runtime to push into MorphState.
"""
from __future__ import annotations

import math
from typing import List, Optional, Tuple

import numpy as np

from .sampling import TrackSet


class AnimationPlayer:
    def __init__(self):
        self._clip = None
        self._validated_scene = None
        self._current_time = 0.0
        self._playback_speed = 1.0
        self._playing = False
        self._looping = True
        self._sample_pending = False
        self._reset_pose_on_next_sample = False
        # flattened clip data
        self._nodes = np.zeros(0, dtype=np.int64)     # unique animated nodes
        self._t_tracks = self._r_tracks = self._s_tracks = None
        self._t_slot = self._r_slot = self._s_slot = np.zeros(0, dtype=np.int64)
        self._m_tracks = None
        self._morph_keys: List[Tuple[int, str]] = []
        self._morph_values = np.zeros(0)
        self.sample_count = 0          # increments whenever the pose was (re)sampled
        self.last_error: Optional[str] = None

    # ---------------------------------------------------------------- clip
    def set_clip(self, clip) -> None:
        """Select a clip (or None): time 0, bind pose restored before the next sample."""
        self._clip = clip
        self._validated_scene = None
        self._current_time = 0.0
        self._reset_pose_on_next_sample = True
        self._sample_pending = True
        self._flatten(clip)

    def _flatten(self, clip) -> None:
        if clip is None:
            self._nodes = np.zeros(0, dtype=np.int64)
            self._t_tracks = self._r_tracks = self._s_tracks = self._m_tracks = None
            self._morph_keys = []
            self._morph_values = np.zeros(0)
            return
        chans = list(clip.channels)
        node_ids = np.array([c.node_index for c in chans], dtype=np.int64)
        # unique nodes; for duplicate channels of a node the later channel's tracks win (order kept)
        self._nodes, slot_of_channel = np.unique(node_ids, return_inverse=True) if len(chans) else (
            np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))

        def build(times_attr, values_attr, width):
            sel = [i for i, c in enumerate(chans) if len(getattr(c, times_attr)) > 0]
            tracks = TrackSet([getattr(chans[i], times_attr) for i in sel],
                              [getattr(chans[i], values_attr) for i in sel], width)
            return tracks, np.asarray(slot_of_channel, dtype=np.int64)[sel] if sel else np.zeros(0, dtype=np.int64)

        self._t_tracks, self._t_slot = build("translation_times", "translation_values", 3)
        self._r_tracks, self._r_slot = build("rotation_times", "rotation_values", 4)
        self._s_tracks, self._s_slot = build("scale_times", "scale_values", 3)
        mch = [m for m in clip.morph_channels if len(m.times) > 0]
        self._morph_keys = [(int(m.node_index), str(m.target_name)) for m in mch]
        self._m_tracks = TrackSet([m.times for m in mch], [np.asarray(m.values).reshape(-1, 1) for m in mch], 1)
        self._morph_values = np.zeros(len(mch))

    @property
    def clip(self):
        return self._clip

    @property
    def validated_scene(self):
        return self._validated_scene

    @property
    def duration(self) -> float:
        if self._clip is None:
            return 0.0
        d = float(self._clip.duration_seconds)
        return d if math.isfinite(d) and d > 0.0 else 0.0

    # ---------------------------------------------------------------- transport
    def play(self) -> None:
        if not self._looping and self._current_time >= self.duration and self.duration > 0.0:
            self._current_time = 0.0          # replay a finished one-shot clip from the start
            self._sample_pending = True
        self._playing = True

    def pause(self) -> None:
        self._playing = False

    def stop(self) -> None:
        self._playing = False
        self._current_time = 0.0
        self._reset_pose_on_next_sample = True
        self._sample_pending = True

    def seek(self, time_seconds: float) -> bool:
        t = float(time_seconds)
        if not math.isfinite(t):
            return False
        self._current_time = min(max(t, 0.0), self.duration)
        self._sample_pending = True
        return True

    def set_playback_speed(self, speed: float) -> bool:
        s = float(speed)
        if not math.isfinite(s) or s < 0.0:
            return False
        self._playback_speed = s
        return True

    def set_looping(self, looping: bool) -> None:
        self._looping = bool(looping)

    @property
    def current_time(self) -> float:
        return self._current_time

    @property
    def playback_speed(self) -> float:
        return self._playback_speed

    @property
    def is_playing(self) -> bool:
        return self._playing

    @property
    def is_looping(self) -> bool:
        return self._looping

    @property
    def sample_pending(self) -> bool:
        return self._sample_pending

    @property
    def reset_pose_on_next_sample(self) -> bool:
        return self._reset_pose_on_next_sample

    # ---------------------------------------------------------------- morph weights
    @property
    def morph_keys(self) -> List[Tuple[int, str]]:
        """(node_index, shape key name) of each sampled morph channel, parallel to morph_values."""
        return self._morph_keys

    @property
    def morph_values(self) -> np.ndarray:
        return self._morph_values

    @property
    def morph_weights(self) -> dict:
        return {k: float(v) for k, v in zip(self._morph_keys, self._morph_values)}

    # ---------------------------------------------------------------- frame
    def update(self, delta_time: float, scene, pose) -> bool:
        """Advance the clock and, when needed, sample the clip into ``pose``.

        Returns False when the clip is invalid for the scene, the pose belongs to another scene,
        ``delta_time`` is not finite, or the pose could not be resolved.
        """
        if not pose.is_for_scene(scene):
            self.last_error = "pose does not belong to the scene"
            return False
        clip = self._clip
        if clip is None:
            if self._reset_pose_on_next_sample:
                pose.reset_to_bind_pose()
                if not pose.update_world_matrices():
                    return False
                self._reset_pose_on_next_sample = False
                self._sample_pending = False
            return True
        if self._validated_scene is not scene:
            if not clip.is_valid(scene.node_count):
                self.last_error = f"clip '{clip.name}' is invalid for this scene"
                return False
            self._validated_scene = scene
        dt = float(delta_time)
        if not math.isfinite(dt):
            return False
        if self._playing:
            duration = self.duration
            t = self._current_time + dt * self._playback_speed
            if self._looping:
                t = math.fmod(t, duration) if duration > 0.0 else 0.0
            elif t >= duration:
                t = duration
                self._playing = False
            self._current_time = t
            self._sample_pending = True
        if not self._sample_pending:
            return True
        if self._reset_pose_on_next_sample:
            pose.reset_to_bind_pose()
            self._reset_pose_on_next_sample = False
        if not self._apply(pose, self._current_time):
            return False
        if not pose.update_world_matrices():
            return False
        self._sample_pending = False
        self.sample_count += 1
        return True

    def _apply(self, pose, time: float) -> bool:
        nodes = self._nodes
        if nodes.size:
            t, q, s = pose.local_trs(nodes)   # missing tracks keep the current pose values
            if self._t_tracks.count:
                t[self._t_slot] = self._t_tracks.sample_linear(time)
            if self._r_tracks.count:
                q[self._r_slot] = self._r_tracks.sample_rotation(time)
            if self._s_tracks.count:
                s[self._s_slot] = self._s_tracks.sample_linear(time)
            if not pose.set_local_trs(nodes, t, q, s):
                self.last_error = "pose rejected the sampled transforms"
                return False
        if self._m_tracks is not None and self._m_tracks.count:
            self._morph_values = self._m_tracks.sample_linear(time)[:, 0]
        return True
