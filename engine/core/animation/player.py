"""AnimationPlayer: clip clock and vectorised track sampling (seed: AnimationPlayer). numpy only.

All keys of a clip are flattened at ``set_clip`` time into one array per track kind
(``sampling.TrackSet``), so one frame's sampling is a handful of numpy calls whatever the number
of channels.  Morph weight channels (``clip.morph_channels``) are sampled too and exposed,
unblended, as ``morph_sides`` ((keys, values, weight) per source) over ``morph_keys``: the
runtime's one morph mixer (engine/core/world/clip_morphs.py) blends them for every consumer.

Crossfade (the seed's animation blending): with ``set_crossfade(seconds) > 0``, ``set_clip`` while
playing blends from the current pose to the new clip over that many seconds of clip time.  The
outgoing side is the old clip, which keeps playing (or, when a fade is interrupted, the pose of
that moment, frozen).  Per channel of the union of both clips' nodes: translation and scale lerp,
rotation shortest-path slerp, weights ``1 - a`` and ``a`` (a = elapsed / duration) that sum to
one; a channel one side does not animate takes the rig's own (bind) pose on that side.  Morph
channels are not blended here: a fade only changes the sides' weights (``morph_keys`` = the new
clip's keys, then the old clip's other keys).  The fade advances with the clock only: paused, nothing is resampled, and once
settled the player is a plain single-clip player again.

Root motion: ``set_in_place(True)`` keeps the clip root's horizontal travel (X/Y of its parent
space, Blender's Z up) at the clip's start position; height and rotation play as keyed.  Off by
default, so the preview equals the clip (and Blender's timeline).
"""
from __future__ import annotations

import math
from typing import List, Optional, Tuple

import numpy as np

from .crossfade import FadeState, Frozen
from .curve_clip import CurveTracks
from .mixer import TRSMixer
from .root_motion import RootMotion
from .sampling import TrackSet


def as_slice(idx: np.ndarray):
    """``idx`` as a slice when it is a run of consecutive indices (views instead of gathers)."""
    if idx.size and int(idx[-1]) - int(idx[0]) == idx.size - 1 and (np.diff(idx) == 1).all():
        return slice(int(idx[0]), int(idx[-1]) + 1)
    return idx


class AnimationPlayer(RootMotion):
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
        self._shared_keys = False
        self._t_slot = self._r_slot = self._s_slot = np.zeros(0, dtype=np.int64)
        self._nodes_ip = self._t_nodes = self._r_nodes = self._s_nodes = np.zeros(0, dtype=np.intp)
        self._crowd = None             # set_targets: (every node, (nodes, rows) per track kind)
        self._crowd_count = 0
        self._root_track = -1
        self._m_tracks = None
        self._curves = None            # CurveTracks of a plain clip (its F-Curves), else None
        self._morph_keys: List[Tuple[int, str]] = []
        self._own_morph_count = 0      # morph keys of the current clip (the rest fade out)
        self._morph_sides = ()         # ((keys, values, weight), ...): each source of the frame's morphs
        self._own_key_tuple = None
        self.sample_count = 0          # increments whenever the pose was (re)sampled
        self.last_error: Optional[str] = None
        self._matrix_source = None     # (clip, write(time, player)): a baked clip's local matrices
        self._weight = 1.0             # the clip's weight in the mixer (below 1: towards the bind pose)
        self._mixer = TRSMixer(0)      # the clip's nodes (rows: _nodes); every sampled frame goes through it
        self._bind_rows = None         # (scene, (T, Q, S) bind values of _nodes) for a weight below 1
        # crossfade
        self._fade_duration = 0.0
        self._fade = None              # FadeState while blending, else None
        # root motion
        self._in_place = False
        self._root_slot = -1           # slot of the clip's root node in _nodes (translation track)
        self._root_start = None        # (3,) root translation at time 0 (TRS basis)

    # ---------------------------------------------------------------- clip
    def set_clip(self, clip) -> None:
        """Select a clip (or None): time 0.  Without a crossfade the bind pose is restored before
        the next sample; with one (a fade duration is set, the player is playing, a clip plays
        and another one is chosen) the pose blends from the current one to the new clip."""
        fade = (self._fade_duration > 0.0 and self._playing and clip is not None and self._clip is not None
                and clip is not self._clip)
        source = self._fade_source() if fade else None
        self._clip = clip
        self._validated_scene = None
        self._current_time = 0.0
        self._sample_pending = True
        self._crowd = None
        self._crowd_count = 0
        self._flatten(clip)
        if source is not None:
            self._fade = FadeState(source, self._fade_duration)
            self._union_morph_keys(source)
            self._reset_pose_on_next_sample = False
        else:
            self._fade = None
            self._reset_pose_on_next_sample = True

    # ---------------------------------------------------------------- crowds
    def set_matrix_source(self, clip, write) -> None:
        """A second source of ``clip``'s pose (a bake's exact local matrices): ``write(time,
        player)`` runs whenever the player samples ``clip``, at the sampled time, before its own
        tracks are written (None: no source)."""
        self._matrix_source = None if write is None or clip is None else (clip, write)

    def set_targets(self, node_maps, map_nodes=None) -> bool:
        """Play the clip on several instances of one skeleton at once (a crowd).

        ``node_maps`` (M, C): for each of M targets, the node each of the clip's animated nodes
        (``node_ids()``, in that order) drives; None: back to the clip's own nodes.  Every frame
        the tracks are sampled once and scattered to all M*C nodes in one write.  Must follow
        ``set_clip`` (which drops the targets).  A crossfade in progress goes on for every target
        when ``map_nodes(nodes)`` gives the (M, len(nodes)) target nodes of any nodes of the
        clip's armature (the fade's two sides cover more nodes than the clip's), else it is
        cancelled (the crowd switches clips at once).  False (and ``last_error``) for a malformed
        map or a node driven twice."""
        if node_maps is None:
            self._crowd = None
            self._crowd_count = 0
            self._sample_pending = True
            return True
        m = np.asarray(node_maps)
        c = self._nodes.shape[0]
        if m.ndim != 2 or m.shape[0] == 0 or m.shape[1] != c or not np.issubdtype(m.dtype, np.integer):
            self.last_error = f"crowd node map must be (targets, {c}) integers, not {m.shape} {m.dtype}"
            return False
        m = m.astype(np.intp)
        if (m < 0).any():
            self.last_error = "crowd node map holds a negative node index"
            return False
        if np.unique(m).size != m.size:
            self.last_error = "crowd node map drives a node twice"
            return False
        count = m.shape[0]

        def rows(slot):
            return m[:, slot].ravel(), np.tile(np.arange(slot.shape[0], dtype=np.intp), count)

        self._crowd = (m.ravel(), rows(self._t_slot), rows(self._r_slot), rows(self._s_slot))
        self._crowd_count = count
        if self._fade is not None:
            grid = map_nodes(self._fade.nodes_union(self._nodes)) if map_nodes is not None else None
            if grid is not None:
                self._fade.targets = np.asarray(grid, np.int64)     # the blend goes to every target
            else:
                self._fade = None
                self._reset_pose_on_next_sample = True
        self._validated_scene = None
        self._sample_pending = True
        return True

    @property
    def target_count(self) -> int:
        """Instances the clip plays on: 1, or the number of crowd targets."""
        return self._crowd_count if self._crowd is not None else 1

    def _fade_source(self):
        """The outgoing side: the current clip playing on (a fresh flattening of it), or the
        pose of this moment frozen when a fade is interrupted."""
        if self._fade is not None:
            last = self._fade.last        # (nodes, T, Q, S) of the last blended sample
            return Frozen(last[0] if last is not None else np.zeros(0, np.int64),
                           last[1:] if last is not None else None, self._morph_sides)
        other = AnimationPlayer()
        other._flatten(self._clip)
        other._clip = self._clip
        other._current_time = self._current_time
        other._looping = self._looping
        other._in_place = self._in_place
        return other

    def _union_morph_keys(self, source) -> None:
        own = list(self._morph_keys)
        extra = [k for k in source.morph_key_list() if k not in set(own)]
        self._morph_keys = own + extra

    def _flatten(self, clip) -> None:
        self._curves = None
        self._bind_rows = None
        if clip is None:
            self._mixer = TRSMixer(0)
            self._nodes = np.zeros(0, dtype=np.int64)
            self._t_tracks = self._r_tracks = self._s_tracks = self._m_tracks = None
            self._shared_keys = False
            self._morph_keys = []
            self._morph_sides = ()
            self._own_morph_count = 0
            self._root_slot = -1
            self._root_start = None
            return
        if getattr(clip, "curves", None) is not None:
            self._flatten_curves(clip)
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
        tt, rt, st = self._t_tracks, self._r_tracks, self._s_tracks
        # translation, rotation and scale keyed at the same times per channel (a bake's clip,
        # many glTF clips): one key search serves all three
        self._shared_keys = bool(tt.count and rt.count == tt.count and st.count == tt.count
                                 and np.array_equal(self._t_slot, self._r_slot)
                                 and np.array_equal(self._t_slot, self._s_slot)
                                 and np.array_equal(tt.counts, rt.counts) and np.array_equal(tt.counts, st.counts)
                                 and np.array_equal(tt.times, rt.times) and np.array_equal(tt.times, st.times))
        self._mixer = TRSMixer(self._nodes.shape[0])
        ip = self._nodes.astype(np.intp)
        self._nodes_ip = as_slice(ip)      # a slice when the nodes are consecutive (no gathers)
        self._t_nodes = as_slice(ip[self._t_slot])
        self._r_nodes = as_slice(ip[self._r_slot])
        self._s_nodes = as_slice(ip[self._s_slot])
        mch = [m for m in clip.morph_channels if len(m.times) > 0]
        self._morph_keys = [(int(m.node_index), str(m.target_name)) for m in mch]
        self._m_tracks = TrackSet([m.times for m in mch], [np.asarray(m.values).reshape(-1, 1) for m in mch], 1)
        self._morph_sides = ()
        self._own_morph_count = len(mch)
        self._root_slot = -1
        self._root_start = None

    def _flatten_curves(self, clip) -> None:
        """A plain clip: its F-Curves evaluated at every time (``CurveTracks``), rows per node
        kind as the tracks' (``_t_slot``... index ``_nodes``)."""
        b = clip.curves
        self._curves = CurveTracks(b, clip.frame_start, clip.fps)
        self._nodes = np.unique(np.concatenate([b.t_nodes, b.r_nodes, b.s_nodes])).astype(np.int64)
        self._t_tracks = self._r_tracks = self._s_tracks = self._m_tracks = None
        self._shared_keys = False
        self._t_slot = np.searchsorted(self._nodes, b.t_nodes).astype(np.int64)
        self._r_slot = np.searchsorted(self._nodes, b.r_nodes).astype(np.int64)
        self._s_slot = np.searchsorted(self._nodes, b.s_nodes).astype(np.int64)
        self._mixer = TRSMixer(self._nodes.shape[0])
        ip = self._nodes.astype(np.intp)
        self._nodes_ip = as_slice(ip)
        self._t_nodes = as_slice(ip[self._t_slot])
        self._r_nodes = as_slice(ip[self._r_slot])
        self._s_nodes = as_slice(ip[self._s_slot])
        mch = list(clip.morph_channels)
        self._morph_keys = [(int(m.node_index), str(m.target_name)) for m in mch]
        self._morph_sides = ()
        self._own_morph_count = len(mch)
        self._root_slot = -1
        self._root_start = None

    def _rows(self, time: float):
        """(T, Q, S) rows per translation / rotation / scale track (None for a kind without
        one) and the morph values at ``time``."""
        cur = self._curves
        if cur is not None:
            vals = cur.values(time)
            tv, qv, sv = cur.sample(time, vals)
            return tv, qv, sv, cur.morphs(time, vals)
        tt, rt, st = self._t_tracks, self._r_tracks, self._s_tracks
        if self._shared_keys:
            assert tt is not None and rt is not None and st is not None   # _shared_keys: all three built (_flatten)
            left, right, alpha = tt.locate(time)
            a = alpha[:, None]
            tl, sl = tt.values[left], st.values[left]
            tv = tl + (tt.values[right] - tl) * a
            qv = rt.slerp_at(left, right, alpha)
            sv = sl + (st.values[right] - sl) * a
        else:
            tv = tt.sample_linear(time) if tt is not None and tt.count else None
            qv = rt.sample_rotation(time) if rt is not None and rt.count else None
            sv = st.sample_linear(time) if st is not None and st.count else None
        return tv, qv, sv, None

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
        self._fade = None
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

    def set_crossfade(self, seconds: float) -> bool:
        """Fade duration for the next clip change while playing (0: switch at once)."""
        d = float(seconds)
        if not math.isfinite(d) or d < 0.0:
            return False
        self._fade_duration = d
        return True

    @property
    def crossfade(self) -> float:
        return self._fade_duration

    def set_weight(self, weight: float) -> bool:
        """The clip's weight in the mixer, 0..1 (three.js ``AnimationAction.weight``): below 1 the
        pose (every crowd target's too) lies that far from the bind pose towards the clip, and
        its morph side carries it (the runtime's morph mixer fills the rest).  1 by default."""
        w = float(weight)
        if not math.isfinite(w) or not 0.0 <= w <= 1.0:
            return False
        if w != self._weight:
            self._weight = w
            self._sample_pending = True
        return True

    @property
    def weight(self) -> float:
        return self._weight

    @property
    def is_fading(self) -> bool:
        return self._fade is not None

    @property
    def fade_weights(self) -> Tuple[float, float]:
        """(outgoing, incoming) weights of the current frame; (0, 1) when not fading."""
        if self._fade is None:
            return (0.0, 1.0)
        a = self._fade.alpha
        return (1.0 - a, a)

    def set_in_place(self, in_place: bool) -> None:
        """Keep the root's horizontal travel out of the pose (root motion 'In place')."""
        v = bool(in_place)
        if v != self._in_place:
            self._in_place = v
            self._sample_pending = True

    @property
    def in_place(self) -> bool:
        return self._in_place

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
        """(node_index, shape key name) of every morph channel the sides may drive: the clip's,
        then during a fade the outgoing side's others."""
        return self._morph_keys

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
            if self._crowd is not None and int(self._crowd[0].max()) >= scene.node_count:
                self.last_error = f"clip '{clip.name}': a crowd target node is not in this scene"
                return False
            self._validated_scene = scene
        dt = float(delta_time)
        if not math.isfinite(dt):
            return False
        if self._playing:
            step = dt * self._playback_speed
            duration = self.duration
            t = self._current_time + step
            if self._looping:
                t = math.fmod(t, duration) if duration > 0.0 else 0.0
            elif t >= duration:
                t = duration
                self._playing = False
            self._current_time = t
            if self._fade is not None:
                self._fade.advance(step)
            self._sample_pending = True
        if not self._sample_pending:
            return True
        if self._reset_pose_on_next_sample:
            pose.reset_to_bind_pose()
            self._reset_pose_on_next_sample = False
        src = self._matrix_source
        if src is not None and src[0] is clip:
            src[1](self._current_time, self)
        if self._fade is not None:
            ok = self._apply_fade(scene, pose)
            if ok and self._fade.done:
                self._fade = None      # settled: a single-clip player again
        else:
            ok = self._apply(pose, self._current_time)
        if not ok:
            return False
        if not pose.update_world_matrices():
            return False
        self._sample_pending = False
        self.sample_count += 1
        return True

    def _apply(self, pose, time: float) -> bool:
        nodes = self._nodes
        if nodes.size and hasattr(pose, "write_sampled"):
            # the sampled tracks straight into the pose (a validated clip: finite keys, unit
            # quaternions from the sampler); a crowd: sampled once, scattered to every target
            tv, qv, sv, mv = self._rows(time)
            if tv is not None and self._in_place:
                self._in_place_rows(tv, pose.scene)
            # the clip is one source of the mixer at its weight (alone at 1: its rows as sampled);
            # a crowd writes the mixer's result to every target
            mix = self._mixer
            mix.reset()
            ts, rs, ss = self._t_slot, self._r_slot, self._s_slot
            mix.accumulate_tracks(ts, tv, rs, qv, ss, sv, self._weight)
            tv, qv, sv = mix.tracks(ts, rs, ss, lambda: self._bind_of_nodes(pose.scene))
            crowd = self._crowd
            if crowd is None:
                pose.write_sampled(self._nodes_ip, self._t_nodes, tv, self._r_nodes, qv, self._s_nodes, sv)
            else:
                every, (tn, ti), (rn, ri), (sn, si) = crowd
                pose.write_sampled(every, tn, None if tv is None else tv[ti], rn, None if qv is None else qv[ri],
                                   sn, None if sv is None else sv[si], targets=self._crowd_count)
        elif nodes.size:
            t, q, s = pose.local_trs(nodes)   # missing tracks keep the current pose values
            mv = self._sample_trs(time, t, q, s, pose.scene)
            if not pose.set_local_trs(nodes, t, q, s):
                self.last_error = "pose rejected the sampled transforms"
                return False
        else:
            mv = None
        # the clip is the one morph source, at its weight (the runtime's mixer blends it)
        if self._own_morph_count:
            self._morph_sides = self.side_morphs(self._sample_morphs(time) if mv is None else mv, self._weight)
        elif self._morph_sides:
            self._morph_sides = ()
        return True

    def _bind_of_nodes(self, scene):
        """(T, Q, S) bind values of the clip's nodes (a weight below 1 mixes towards them)."""
        hit = self._bind_rows
        if hit is None or hit[0] is not scene:
            n = self._nodes
            hit = self._bind_rows = (scene, (np.asarray(scene.bind_translations, np.float64)[n],
                                             np.asarray(scene.bind_rotations, np.float64)[n],
                                             np.asarray(scene.bind_scales, np.float64)[n]))
        return hit[1]

    def _sample_trs(self, time: float, t, q, s, scene):
        """The clip's tracks at ``time`` into (T, Q, S) rows aligned with ``_nodes``; returns the
        morph values when they came with them (a curve clip), else None."""
        tv, qv, sv, mv = self._rows(time)
        if tv is not None:
            t[self._t_slot] = tv
        if qv is not None:
            q[self._r_slot] = qv
        if sv is not None:
            s[self._s_slot] = sv
        if self._in_place and scene is not None:
            self._keep_root_in_place(t, scene)
        return mv

    def _sample_morphs(self, time: float) -> np.ndarray:
        if self._curves is not None:
            return self._curves.morphs(time)
        if self._m_tracks is not None and self._m_tracks.count:
            return self._m_tracks.sample_linear(time)[:, 0]
        return np.zeros(self._own_morph_count)

    def morph_key_list(self) -> list:
        return list(self._morph_keys[:self._own_morph_count])

    def morph_key_tuple(self) -> tuple:
        """``morph_key_list`` as a tuple, the same object while the clip is (a mixer's cache key)."""
        hit, keys, n = self._own_key_tuple, self._morph_keys, self._own_morph_count
        if hit is None or hit[0] is not keys or hit[1] != n:
            hit = self._own_key_tuple = (keys, n, tuple(keys[:n]))
        return hit[2]

    @property
    def morph_sides(self) -> tuple:
        """((keys, values, weight), ...) of the last sample, unblended: the clip at its weight, or in
        a fade the outgoing side(s) at 1 - alpha and the new clip at alpha.  The runtime's one morph
        mixer blends them (engine/core/world/clip_morphs.py)."""
        return self._morph_sides

    def side_morphs(self, values, weight: float = 1.0) -> tuple:
        """This clip's morph side of ``values`` (its own keys' values) at ``weight``; () without
        morph channels."""
        if not self._own_morph_count:
            return ()
        return ((self.morph_key_tuple(), np.asarray(values, np.float64), float(weight)),)

    def node_ids(self) -> np.ndarray:
        return self._nodes

    def sample_side(self, scene, nodes: np.ndarray):
        """(T, Q, S) of ``nodes`` (the bind pose where this clip has no track) and the morph values
        of ``morph_key_list()`` at the current time: one side of a crossfade."""
        t = np.asarray(scene.bind_translations, np.float64)[nodes]
        q = np.asarray(scene.bind_rotations, np.float64)[nodes]
        s = np.asarray(scene.bind_scales, np.float64)[nodes]
        if self._nodes.size:
            rows = np.searchsorted(nodes, self._nodes)
            tt, qq, ss = t[rows], q[rows], s[rows]
            mv = self._sample_trs(self._current_time, tt, qq, ss, scene)
            t[rows], q[rows], s[rows] = tt, qq, ss
            if mv is not None:
                return t, q, s, mv
        return t, q, s, self._sample_morphs(self._current_time)

    # ---------------------------------------------------------------- crossfade
    def _apply_fade(self, scene, pose) -> bool:
        """The crossfade through the mixer (crossfade.FadeState.apply)."""
        fade = self._fade
        assert fade is not None   # called only while fading (sample_into)
        return fade.apply(self, scene, pose)
