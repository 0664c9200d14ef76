"""Hair curves (``CURVES`` objects, Blender's hair system) as camera-facing ribbons.

A ``CURVES`` object has no mesh (``Object.to_mesh`` refuses it), so the fallback cannot draw it
from an evaluated mesh.  EEVEE draws each strand of the evaluated curves as a camera-facing
ribbon: *Render > Curves > Shape* (``scene.render.hair_type``) "Strand" is one pixel wide whatever
the radius, "Strip" is as wide as the curve's diameter (the ``radius`` attribute per point, 0.01
where there is none, as ``CurvesGeometry::radius`` defaults).  Here the strands are read from the
evaluated curves and evaluated as Blender evaluates them for drawing: Catmull-Rom curves (hair's
default type) with Blender's basis (``bke::curves::catmull_rom``: the end points repeated,
``resolution`` samples per segment, 12 where the curves have no ``resolution`` attribute), the
radius with them; poly curves as they are; Bezier and NURBS curves through their control points
(not evaluated: ``reason`` says so in the Stats panel and the render log).  Beyond
``POINT_BUDGET`` evaluated points per object the resolution is lowered alike for every curve (and
the reason says so).  A ribbon mesh is then
built on the CPU for the frame's camera, vectorised over all points: two vertices per point,
offset along ``normalize(tangent x to_camera)`` by half the width (at least half a pixel at that
depth, so a strand never vanishes between pixels), with the normal
of a cylinder seen from the camera (``to_camera`` without its tangent part), and two triangles per
segment wound to face the camera.  The ribbons are drawn like any fallback mesh: forward (the
material's MToon values or the toon look derived from it), shadow casting from the sun's view of
the same ribbons; an inverse-hull outline of a flat ribbon that faces the camera is culled by the
outline pass, so strands get no outline (one would make a pixel-wide strand black).

``HairStrands`` holds what was read (world space) and a digest of it; ``ribbon_primitives``
builds the primitives for a camera.  No state is kept here: the ``FallbackDrawer`` caches the GPU
streams per instance and rebuilds them when the strands or the camera changed.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

DEFAULT_RADIUS = 0.01   # CurvesGeometry::radius() where the curves have no radius attribute
DEFAULT_RESOLUTION = 12     # CurvesGeometry::resolution() where the curves have no resolution attribute
CATMULL_ROM, POLY = 0, 1    # CurveType (the "curve_type" attribute; Catmull-Rom where there is none)
# evaluated points per object: beyond it the Catmull-Rom resolution is lowered for all curves alike
# (a 10,000-strand groom of 16 points at resolution 12 is 1.8M points: ~2 s of CPU per camera
# change to evaluate and build, where Blender evaluates on the GPU)
POINT_BUDGET = 200_000


@dataclass
class HairStrands:
    positions: np.ndarray     # (P, 3) float64, world space
    radius: np.ndarray        # (P,) float64, world space (times the object's mean scale)
    offsets: np.ndarray       # (C + 1,) int64: curve c holds points offsets[c]:offsets[c + 1]
    materials: np.ndarray     # (C,) int64: material slot of each curve
    digest: str
    types: Optional[np.ndarray] = None        # (C,) int64 CurveType; None: all poly (evaluated)
    resolution: Optional[np.ndarray] = None   # (C,) int64 Catmull-Rom samples per segment
    budget_note: str = ""                     # evaluate(): the resolution was lowered (POINT_BUDGET)

    @property
    def point_count(self) -> int:
        return int(self.positions.shape[0])


def _attribute(curves, name: str, domain: str, count: int, field: str = "value") -> Optional[np.ndarray]:
    attr = curves.attributes.get(name)
    if attr is None or attr.domain != domain or len(attr.data) != count:
        return None
    if attr.data_type not in ("FLOAT", "INT", "INT8"):
        return None
    out = np.empty(count, np.float32 if attr.data_type == "FLOAT" else np.int32)
    attr.data.foreach_get(field, out)
    return out.astype(np.float64 if attr.data_type == "FLOAT" else np.int64)


def read_strands(ob_eval, matrix_world) -> Optional[HairStrands]:
    """The evaluated curves of a ``CURVES`` object instance in world space (None: no strands)."""
    curves = getattr(ob_eval, "data", None)
    if curves is None or not hasattr(curves, "curve_offset_data"):
        return None
    n_pts, n_curves = len(curves.points), len(curves.curves)
    if n_pts < 2 or n_curves == 0:
        return None
    pos = np.empty(n_pts * 3, np.float32)
    curves.position_data.foreach_get("vector", pos)
    offsets = np.empty(n_curves + 1, np.int32)
    curves.curve_offset_data.foreach_get("value", offsets)
    radius = _attribute(curves, "radius", "POINT", n_pts)
    if radius is None:
        radius = np.full(n_pts, DEFAULT_RADIUS)
    mat = _attribute(curves, "material_index", "CURVE", n_curves)
    mat = np.zeros(n_curves, np.int64) if mat is None else mat
    types = _attribute(curves, "curve_type", "CURVE", n_curves)
    types = np.full(n_curves, CATMULL_ROM, np.int64) if types is None else types
    res = _attribute(curves, "resolution", "CURVE", n_curves)
    res = np.full(n_curves, DEFAULT_RESOLUTION, np.int64) if res is None else np.maximum(res, 1)
    m = np.asarray(matrix_world, np.float64)
    p = pos.reshape(-1, 3).astype(np.float64) @ m[:3, :3].T + m[:3, 3]
    scale = float(np.abs(np.linalg.det(m[:3, :3]))) ** (1.0 / 3.0)
    h = hashlib.sha1()
    for a in (pos, offsets, radius, mat, types, res, m):
        h.update(np.ascontiguousarray(a).view(np.uint8))  # pyright: ignore[reportArgumentType]  (numpy's stubs give ndarray __buffer__ only for Python >= 3.12)
    return HairStrands(positions=p, radius=np.abs(radius) * scale, offsets=offsets.astype(np.int64),
                       materials=mat, digest=h.hexdigest(), types=types, resolution=res)


def evaluate(strands: HairStrands) -> HairStrands:
    """The strands as Blender evaluates them for drawing (the module doc): every Catmull-Rom
    segment sampled ``resolution`` times with ``0.5 (a n0 + b n1 + c n2 + d n3)``, n = (-t s^2,
    2 + t^2 (3t - 5), 2 + s^2 (3s - 5), -s t^2), s = 1 - t, the first and last points repeated
    as the outer neighbours; other curve types keep their points.  All curves at once."""
    if strands.types is None:
        return strands
    assert strands.resolution is not None       # (read_strands sets it with the types; evaluate() sets neither)
    p, radius, offsets = strands.positions, strands.radius, strands.offsets
    counts = np.diff(offsets)
    n_curves = counts.shape[0]
    res = np.where((strands.types == CATMULL_ROM) & (counts >= 2), strands.resolution, 1)
    segs = np.maximum(counts - 1, 0)
    note = ""
    total = int((segs * res).sum()) + n_curves
    if total > POINT_BUDGET and res.max() > 1:
        # the same fraction of every curve's resolution (at least 1: the control points)
        keep = max(POINT_BUDGET - n_curves, 0) / max(total - n_curves, 1)
        lowered = np.maximum((res * keep).astype(np.int64), 1)
        note = (f"; Catmull-Rom resolution lowered to {int(lowered.max())} of {int(res.max())} "
                f"({total:,} evaluated points over the budget of {POINT_BUDGET:,})")
        res = lowered
    eval_counts = segs * res + (counts > 0)
    eval_offsets = np.concatenate([[0], np.cumsum(eval_counts)])
    point_curve = np.repeat(np.arange(n_curves), counts)
    idx = np.arange(p.shape[0])
    last_of = offsets[1:] - 1
    seg_pts = idx[idx != last_of[point_curve]]          # every point that starts a segment
    seg_curve = point_curve[seg_pts]
    rr = res[seg_curve]
    sample_seg = np.repeat(np.arange(seg_pts.shape[0]), rr)
    k = np.arange(sample_seg.shape[0]) - np.repeat(np.cumsum(rr) - rr, rr)
    i = seg_pts[sample_seg]
    c_of = seg_curve[sample_seg]
    t = (k / rr[sample_seg])[:, None]
    s = 1.0 - t
    w = 0.5 * np.concatenate([-t * s * s, 2.0 + t * t * (3.0 * t - 5.0), 2.0 + s * s * (3.0 * s - 5.0), -s * t * t], 1)
    a = np.maximum(i - 1, offsets[:-1][c_of])
    d = np.minimum(i + 2, last_of[c_of])
    dest = eval_offsets[c_of] + (i - offsets[:-1][c_of]) * rr[sample_seg] + k
    n_eval = int(eval_offsets[-1])
    out_p = np.empty((n_eval, 3))
    out_r = np.empty(n_eval)
    out_p[dest] = (p[a] * w[:, :1] + p[i] * w[:, 1:2] + p[i + 1] * w[:, 2:3] + p[d] * w[:, 3:])
    out_r[dest] = radius[a] * w[:, 0] + radius[i] * w[:, 1] + radius[i + 1] * w[:, 2] + radius[d] * w[:, 3]
    has = counts > 0
    out_p[eval_offsets[1:][has] - 1] = p[last_of[has]]
    out_r[eval_offsets[1:][has] - 1] = radius[last_of[has]]
    return HairStrands(positions=out_p, radius=np.abs(out_r), offsets=eval_offsets, materials=strands.materials,
                       digest=strands.digest, budget_note=note)


REASON = "hair curves: strands drawn as camera-facing ribbons"


def reason(strands: HairStrands) -> str:
    """What the Stats panel and the render log say about these strands (why they are drawn as
    they are)."""
    out = REASON
    if strands.types is not None and np.any((strands.types != CATMULL_ROM) & (strands.types != POLY)):
        out += "; Bezier and NURBS strands follow their control points"
    return out + strands.budget_note       # (the evaluated strands' note, when given those)


def _unit(v: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """Rows of ``v`` normalised; rows too short (or not finite) replaced by ``fallback``'s."""
    n2 = np.einsum("ij,ij->i", v, v)
    bad = ~(n2 > 1e-24) | ~np.isfinite(n2)
    if bad.any():
        v = np.where(bad[:, None], fallback, v)
        n2 = np.where(bad, np.einsum("ij,ij->i", v, v) if np.ndim(fallback) == 2 else 1.0, n2)
    return v * (1.0 / np.sqrt(np.maximum(n2, 1e-30)))[:, None]


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.empty(np.broadcast_shapes(a.shape, b.shape), a.dtype)
    out[:, 0] = a[:, 1] * b[:, 2] - a[:, 2] * b[:, 1]
    out[:, 1] = a[:, 2] * b[:, 0] - a[:, 0] * b[:, 2]
    out[:, 2] = a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]
    return out


def ribbon_geometry(strands: HairStrands, view: np.ndarray, projection: np.ndarray, is_ortho: bool,
                    height: int, strip: bool):
    """(positions (2P,3), normals (2P,3), segments (S,) first point of each segment, point curve
    (P,)) of the camera-facing ribbons: the module doc's construction, all points at once (float32)."""
    p = strands.positions.astype(np.float32)
    n_pts = p.shape[0]
    offsets = strands.offsets
    counts = np.diff(offsets)
    point_curve = np.repeat(np.arange(counts.shape[0]), counts)
    first = np.zeros(n_pts, bool)
    last = np.zeros(n_pts, bool)
    valid = counts > 0
    first[offsets[:-1][valid]] = True
    last[offsets[1:][valid] - 1] = True
    idx = np.arange(n_pts)
    nxt = np.where(last, idx, np.minimum(idx + 1, n_pts - 1))
    prv = np.where(first, idx, idx - 1)
    x_axis = np.array([1.0, 0.0, 0.0], np.float32)
    tangent = _unit(p[nxt] - p[prv], x_axis)
    view = np.asarray(view, np.float64)
    cam_to_world = np.linalg.inv(view).astype(np.float32)
    scale = 2.0 / (abs(float(projection[1, 1])) * max(int(height), 1))     # one pixel per unit depth
    if is_ortho:
        to_cam = np.broadcast_to(cam_to_world[:3, 2], p.shape)
        pixel = np.float32(scale)
    else:
        to_cam = _unit(cam_to_world[:3, 3] - p, cam_to_world[:3, 2])
        depth = -(p @ view[2, :3].astype(np.float32) + np.float32(view[2, 3]))   # along the view axis
        pixel = np.maximum(depth, 0.0) * np.float32(scale)
    side = _unit(_cross(tangent, to_cam), _cross(tangent, x_axis[[1, 2, 0]][None, :]))
    radius = strands.radius.astype(np.float32)
    half = np.maximum(radius, 0.5 * pixel) if strip else np.broadcast_to(0.5 * pixel, radius.shape)
    normal = _unit(to_cam - tangent * np.einsum("ij,ij->i", to_cam, tangent)[:, None], to_cam)
    offset = side * half[:, None]
    positions = np.empty((n_pts, 2, 3), np.float32)
    positions[:, 0] = p - offset
    positions[:, 1] = p + offset
    normals = np.repeat(normal, 2, axis=0)
    segments = idx[~last]
    return positions.reshape(-1, 3), normals, segments, point_curve


def ribbon_primitives(strands: HairStrands, camera, height: int, strip: bool, material_names: List[str]):
    """One ``PrimitiveAsset`` per material slot the strands use (world space, bounds of its finite
    vertices; segments touching a non-finite vertex are left out), for ``camera`` (a
    ``passes.frame.CameraData``) and a target ``height`` in pixels."""
    from ...core.assets import Bounds
    from ...core.assets.types import PrimitiveAsset

    positions, normals, segments, point_curve = ribbon_geometry(
        strands, camera.view, camera.projection, camera.is_ortho, height, strip)
    finite = np.isfinite(np.einsum("ij->i", positions))     # a non-finite component makes the sum so
    all_finite = bool(finite.all())
    ok = finite.reshape(-1, 2).all(axis=1)
    if not all_finite:
        segments = segments[ok[segments] & ok[segments + 1]]
    a = 2 * segments
    tri = np.stack([a, a + 1, a + 3, a, a + 3, a + 2], 1).reshape(-1, 3).astype(np.uint32)
    tri_mat = np.repeat(strands.materials[point_curve[segments]], 2)
    # one box for every slot (a superset of each slot's: culling and shadow fitting stay right)
    kept = positions if all_finite else positions[finite]
    bounds = Bounds(kept.min(axis=0), kept.max(axis=0)) if kept.shape[0] and tri.shape[0] else Bounds.empty()
    out = []
    source = np.repeat(np.arange(strands.point_count, dtype=np.int64), 2)
    slots = np.unique(tri_mat)
    for slot in slots:
        slot = int(slot)
        name = material_names[slot] if 0 <= slot < len(material_names) else ""
        t = tri if slots.shape[0] == 1 else tri[tri_mat == slot]
        out.append(PrimitiveAsset(material_index=slot, material_name=name, positions=positions,
                                  normals=normals, indices=t, source_vertices=source,
                                  smooth_normals=normals, bounds=bounds))
    return out


def camera_key(camera, height: int, strip: bool) -> bytes:
    """What the ribbons depend on besides the strands (the streams are rebuilt when it changes)."""
    h = hashlib.sha1()
    for a in (camera.view, camera.projection):
        h.update(np.ascontiguousarray(a, np.float64).view(np.uint8))  # pyright: ignore[reportArgumentType]  (numpy's stubs give ndarray __buffer__ only for Python >= 3.12)
    h.update(f"{bool(camera.is_ortho)}:{int(height)}:{bool(strip)}".encode())
    return h.digest()
