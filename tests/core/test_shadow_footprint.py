"""shadow_cache.footprint: the atlas texels a moving caster's box can cover in a tile, against the
plain formula (every point of the box projected and rasterised by pixel centres); and
pack_rows: the backup's rectangles never overlap and fit the size it names."""
import numpy as np

from stylized_renderer.engine.gpu.passes.shadow_cache import FOOTPRINT_MARGIN, footprint, pack_rows


def _ortho(half: float, near: float, far: float) -> np.ndarray:
    m = np.eye(4)
    m[0, 0] = m[1, 1] = 1.0 / half
    m[2, 2] = -2.0 / (far - near)
    m[2, 3] = -(far + near) / (far - near)
    return m


def _perspective(tan_half: float, near: float, far: float) -> np.ndarray:
    m = np.zeros((4, 4))
    m[0, 0] = m[1, 1] = 1.0 / tan_half
    m[2, 2] = (far + near) / (near - far)
    m[2, 3] = 2.0 * far * near / (near - far)
    m[3, 2] = -1.0
    return m


def _covered(matrix, box, x, y, size, n=4000, seed=1):
    """Texels whose centre a point of ``box`` (uniform samples and its corners) lands on."""
    rng = np.random.default_rng(seed)
    lo, hi = box
    pts = lo + rng.random((n, 3)) * (hi - lo)
    corners = np.array([[a, b, c] for a in (lo[0], hi[0]) for b in (lo[1], hi[1]) for c in (lo[2], hi[2])])
    pts = np.vstack([pts, corners])
    clip = np.hstack([pts, np.ones((len(pts), 1))]) @ matrix.T
    ndc = clip[:, :2] / clip[:, 3:4]
    wx = x + (ndc[:, 0] + 1.0) * 0.5 * size
    wy = y + (ndc[:, 1] + 1.0) * 0.5 * size
    inside = (wx >= x) & (wx < x + size) & (wy >= y) & (wy < y + size)
    return np.floor(wx[inside]).astype(int), np.floor(wy[inside]).astype(int)


def test_the_footprint_holds_every_texel_the_box_reaches_and_little_more():
    rng = np.random.default_rng(7)
    for matrix in (_ortho(5.0, 0.1, 30.0), _perspective(1.0, 0.1, 30.0)):
        for _ in range(40):
            c = rng.uniform(-3, 3, 3)
            c[2] = rng.uniform(-12, -4) if matrix[3, 2] else c[2]
            half = rng.uniform(0.05, 1.0, 3)
            box = np.array([c - half, c + half])
            x, y, size = 512, 256, 256
            rect = footprint(matrix, box[None], x, y, size)
            px, py = _covered(matrix, box, x, y, size)
            if rect is None:
                assert px.size == 0
                continue
            x0, y0, x1, y1 = rect
            assert x <= x0 < x1 <= x + size and y <= y0 < y1 <= y + size
            assert np.all((px >= x0) & (px < x1) & (py >= y0) & (py < y1))
            if px.size:      # tight: within the margin (and a texel of rounding) of what is reached
                assert x0 >= px.min() - FOOTPRINT_MARGIN - 1 and x1 <= px.max() + FOOTPRINT_MARGIN + 2
                assert y0 >= py.min() - FOOTPRINT_MARGIN - 1 and y1 <= py.max() + FOOTPRINT_MARGIN + 2


def test_a_box_behind_the_eye_or_not_finite_takes_the_whole_tile():
    p = _perspective(1.0, 0.1, 30.0)
    behind = np.array([[[-1.0, -1.0, -2.0], [1.0, 1.0, 3.0]]])       # reaches z > 0: behind the eye
    assert footprint(p, behind, 0, 0, 128) == (0, 0, 128, 128)
    bad = np.array([[[np.nan, 0.0, 0.0], [1.0, 1.0, 1.0]]])
    assert footprint(_ortho(5.0, 0.1, 30.0), bad, 128, 0, 128) == (128, 0, 256, 128)
    assert footprint(p, np.zeros((0, 2, 3)), 0, 0, 128) is None


def test_a_box_outside_the_tile_has_no_footprint():
    far_away = np.array([[[50.0, 50.0, -1.0], [51.0, 51.0, 1.0]]])
    assert footprint(_ortho(5.0, 0.1, 30.0), far_away, 0, 0, 128) is None


def test_packed_rectangles_do_not_overlap_and_fit():
    rng = np.random.default_rng(3)
    rects = []
    for _ in range(30):
        x0, y0 = rng.integers(0, 900, 2)
        w, h = rng.integers(1, 200, 2)
        rects.append((int(x0), int(y0), int(x0 + w), int(y0 + h)))
    origins, (width, height) = pack_rows(rects, 512)
    used = np.zeros((height, width), int)
    for (x0, y0, x1, y1), (bx, by) in zip(rects, origins):
        assert bx + (x1 - x0) <= width and by + (y1 - y0) <= height
        used[by:by + y1 - y0, bx:bx + x1 - x0] += 1
    assert used.max() == 1
    assert width <= 512
