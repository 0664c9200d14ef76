"""MorphState rules (seed: MorphState; Blender slider ranges)."""
from __future__ import annotations

import numpy as np

from stylized_renderer.engine.core.animation import MorphState
from stylized_renderer.engine.core.assets import MorphTargetAsset


def targets(ranges=((0.0, 1.0), (0.0, 1.0), (-2.0, 3.0))):
    return [MorphTargetAsset(f"k{i}", position_deltas=np.zeros((1, 3)), normal_deltas=None, tangent_deltas=None,
                             weight_min=lo, weight_max=hi) for i, (lo, hi) in enumerate(ranges)]


def test_initialized_to_zero_with_a_version():
    s = MorphState(targets())
    assert s.target_count == 3 and np.all(s.weights == 0) and s.active_count == 0
    assert s.version != 0


def test_clamps_to_each_targets_own_range():
    s = MorphState(targets())
    s.set_weight(0, 1.7)
    s.set_weight(2, 2.5)
    s.set_weight(1, -0.5)
    assert s.weight(0) == 1.0
    assert s.weight(2) == 2.5          # slider_max 3 allows > 1
    assert s.weight(1) == 0.0
    s.set_weight(2, -9.0)
    assert s.weight(2) == -2.0          # slider_min -2


def test_exact_compare_does_not_bump_on_same_value():
    s = MorphState(targets())
    s.set_weight(0, 0.3)
    v = s.version
    assert s.set_weight(0, 0.3)
    assert s.version == v
    s.set_weight(0, 5.0)                # clamps to 1.0
    v = s.version
    s.set_weight(0, 7.0)                # clamps to the same 1.0 -> no change
    assert s.version == v
    s.set_weight(0, 0.3000001)
    assert s.version == v + 1


def test_active_count_tracks_zero_transitions_only():
    s = MorphState(targets())
    s.set_weight(0, 0.5)
    s.set_weight(2, -1.0)
    assert s.active_count == 2
    s.set_weight(0, 0.7)                # nonzero -> nonzero
    assert s.active_count == 2
    s.set_weight(0, 0.0)
    assert s.active_count == 1
    s.set_weight(1, 0.0)                # zero -> zero
    assert s.active_count == 1
    # the count is maintained, not recomputed by scanning the weights (O(1) query)
    s._weights[1] = 0.9
    assert s.active_count == 1


def test_reset_only_bumps_when_active():
    s = MorphState(targets())
    v = s.version
    assert not s.reset()
    assert s.version == v
    s.set_weight(1, 0.4)
    v = s.version
    assert s.reset()
    assert s.version == v + 1 and s.active_count == 0 and np.all(s.weights == 0)


def test_version_skips_zero_on_wrap():
    s = MorphState(targets())
    s._version = 0xFFFFFFFFFFFFFFFF
    s.set_weight(0, 0.5)
    assert s.version == 1


def test_invalid_index_or_value_rejected():
    s = MorphState(targets())
    v = s.version
    assert not s.set_weight(5, 0.5)
    assert not s.set_weight(0, float("nan"))
    assert s.version == v


def test_vectorised_set_weights():
    s = MorphState(targets())
    v = s.version
    assert s.set_weights([0, 2], [0.5, 9.0])
    assert s.weights.tolist() == [0.5, 0.0, 3.0]
    assert s.active_count == 2 and s.version == v + 1
    assert s.set_weights([0, 2], [0.5, 3.0])      # no change
    assert s.version == v + 1
    assert s.set_weights([2, 0, 2], [0.0, 0.0, 1.0])   # last duplicate wins
    assert s.weights.tolist() == [0.0, 0.0, 1.0]
    assert s.active_count == 1
    assert not s.set_weights([0, 7], [0.1, 0.1])
    assert not s.set_weights([0], [np.inf])
