"""Fast paths of the import against the plain formulas, bit for bit: ``Bounds.from_points`` (blocks
of 16 rows instead of numpy's slow axis-0 reduction over 3 columns) and ``euler_to_quat`` of zero
angles (an object's delta rotation: the identity without the products)."""
from __future__ import annotations

import numpy as np
import pytest

from stylized_renderer.engine.core.assets import Bounds


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 1000, 4099])
def test_bounds_from_points_is_the_plain_min_and_max(n):
    rng = np.random.default_rng(n)
    p = (rng.standard_normal((n, 3)) * 100.0).astype(np.float32)
    b = Bounds.from_points(p)
    if n == 0:
        assert b.is_empty
        return
    assert b.minimum.tobytes() == p.min(axis=0).astype(np.float64).tobytes()
    assert b.maximum.tobytes() == p.max(axis=0).astype(np.float64).tobytes()


def _plain_euler(e, order):
    from stylized_renderer.engine.blender.importer import rotation as r

    q = None
    for axis in order:
        i = r._AXIS[axis]
        h = e[:, i] * 0.5
        qa = np.zeros((e.shape[0], 4))
        qa[:, 0] = np.cos(h)
        qa[:, 1 + i] = np.sin(h)
        q = qa if q is None else r.quat_mul(qa, q)
    assert q is not None
    return q


@pytest.mark.parametrize("order", ["XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX"])
def test_euler_to_quat_of_zero_angles_is_the_products_bit_for_bit(order):
    from stylized_renderer.engine.blender.importer.rotation import euler_to_quat

    for e in (np.zeros((4, 3)), np.array([[0.0, -0.0, 0.0]]), np.array([[0.0, 0.0, 1e-30]])):
        assert euler_to_quat(e, order).tobytes() == _plain_euler(e, order).tobytes()
