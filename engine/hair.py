"""Hair curves (``CURVES`` objects, Blender's hair system) as camera-facing ribbons.

A ``CURVES`` object has no mesh (``Object.to_mesh`` refuses it), so the fallback cannot draw it
from an evaluated mesh.  EEVEE draws each strand of the evaluated curves as a camera-facing
ribbon: *Render > Curves > Shape* (``scene.render.hair_type``) "Strand" is one pixel wide whatever
the radius, "Strip" is as wide as the curve's diameter (the ``radius`` attribute per point, 0.01
where there is none, as ``CurvesGeometry::radius`` defaults).  Here the strands are read from the
evaluated curves (control points, one polyline per curve; Catmull-Rom and Bezier strands are not
subdivided), and a ribbon mesh is built on the CPU for the frame's camera, vectorised over all
points: two vertices per point, offset along ``normalize(tangent x to_camera)`` by half the width
(at least half a pixel at that depth, so a strand never vanishes between pixels), with the normal
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


@dataclass
class HairStrands:
    positions: np.ndarray     # (P, 3) float64, world space
    radius: np.ndarray        # (P,) float64, world space (times the object's mean scale)
    offsets: np.ndarray       # (C + 1,) int64: curve c holds points offsets[c]:offsets[c + 1]
    materials: np.ndarray     # (C,) int64: material slot of each curve
    digest: str

    @property
    def point_count(self) -> int:
        return int(self.positions.shape[0])


def _attribute(curves, name: str, domain: str, count: int, field: str = "value") -> Optional[np.ndarray]:
    attr = curves.attributes.get(name)
    if attr is None or attr.domain != domain or len(attr.data) != count:
        return None
    out = np.empty(count, np.float64 if attr.data_type == "FLOAT" else np.int64)
    if attr.data_type not in ("FLOAT", "INT"):
        return None
    attr.data.foreach_get(field, out)
    return out


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
    mat = np.zeros(n_curves, np.int64) if mat is None else mat.astype(np.int64)
    m = np.asarray(matrix_world, np.float64)
    p = pos.reshape(-1, 3).astype(np.float64) @ m[:3, :3].T + m[:3, 3]
    scale = float(np.abs(np.linalg.det(m[:3, :3]))) ** (1.0 / 3.0)
    h = hashlib.sha1()
    for a in (pos, offsets, radius, mat, m):
        h.update(np.ascontiguousarray(a).view(np.uint8))
    return HairStrands(positions=p, radius=np.abs(radius) * scale, offsets=offsets.astype(np.int64),
                       materials=mat, digest=h.hexdigest())


def _unit(v: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=1, keepdims=True)
    ok = (n[:, 0] > 1e-12) & np.isfinite(n[:, 0])
    out = np.where(ok[:, None], v / np.where(ok, n[:, 0], 1.0)[:, None], fallback)
    return out


def ribbon_geometry(strands: HairStrands, view: np.ndarray, projection: np.ndarray, is_ortho: bool,
                    height: int, strip: bool):
    """(positions (2P,3), normals (2P,3), segments (S,) first point of each segment, point curve
    (P,)) of the camera-facing ribbons: the module doc's construction, all points at once."""
    p = strands.positions
    n_pts = p.shape[0]
    offsets = strands.offsets
    first = np.zeros(n_pts, bool)
    last = np.zeros(n_pts, bool)
    counts = np.diff(offsets)
    valid = counts > 0
    first[offsets[:-1][valid]] = True
    last[offsets[1:][valid] - 1] = True
    idx = np.arange(n_pts)
    nxt = np.where(last, idx, np.minimum(idx + 1, n_pts - 1))
    prv = np.where(first, idx, idx - 1)
    x_axis = np.array([1.0, 0.0, 0.0])
    tangent = _unit(p[nxt] - p[prv], x_axis)
    view = np.asarray(view, np.float64)
    cam_to_world = np.linalg.inv(view)
    depth = -(p @ view[2, :3] + view[2, 3])          # distance along the camera's forward axis
    if is_ortho:
        to_cam = np.broadcast_to(cam_to_world[:3, 2], p.shape)
        pixel = np.full(n_pts, 2.0 / (abs(projection[1, 1]) * max(height, 1)))
    else:
        to_cam = _unit(cam_to_world[:3, 3] - p, cam_to_world[:3, 2])
        pixel = 2.0 * np.maximum(depth, 0.0) / (abs(projection[1, 1]) * max(height, 1))
    side = _unit(np.cross(tangent, to_cam), np.cross(tangent, x_axis[[1, 2, 0]]))
    half = np.maximum(strands.radius, 0.5 * pixel) if strip else 0.5 * pixel
    normal = _unit(to_cam - tangent * np.einsum("ij,ij->i", to_cam, tangent)[:, None], to_cam)
    offset = side * half[:, None]
    positions = np.stack([p - offset, p + offset], axis=1).reshape(-1, 3)
    normals = np.repeat(normal, 2, axis=0)
    segments = idx[~last]
    point_curve = np.repeat(np.arange(counts.shape[0]), counts)
    return positions, normals, segments, point_curve


def ribbon_primitives(strands: HairStrands, camera, height: int, strip: bool, material_names: List[str]):
    """One ``PrimitiveAsset`` per material slot the strands use (world space), for ``camera``
    (a ``passes.frame.CameraData``) and a target ``height`` in pixels."""
    from .assets.types import PrimitiveAsset

    positions, normals, segments, point_curve = ribbon_geometry(
        strands, camera.view, camera.projection, camera.is_ortho, height, strip)
    ok = np.isfinite(positions).all(axis=1).reshape(-1, 2).all(axis=1)
    segments = segments[ok[segments] & ok[segments + 1]]
    a, b = 2 * segments, 2 * segments + 1
    c, d = a + 2, a + 3                   # the next point's two vertices
    tri = np.stack([np.stack([a, b, d], 1), np.stack([a, d, c], 1)], axis=1).reshape(-1, 3)
    seg_mat = strands.materials[point_curve[segments]]
    tri_mat = np.repeat(seg_mat, 2)
    out = []
    source = np.repeat(np.arange(strands.point_count, dtype=np.int64), 2)
    for slot in np.unique(tri_mat):
        slot = int(slot)
        name = material_names[slot] if 0 <= slot < len(material_names) else ""
        t = tri[tri_mat == slot]
        out.append(PrimitiveAsset(material_index=slot, material_name=name, positions=positions.astype(np.float32),
                                  normals=normals.astype(np.float32), indices=t.astype(np.uint32),
                                  source_vertices=source, smooth_normals=normals.astype(np.float32)))
    return out


def camera_key(camera, height: int, strip: bool) -> bytes:
    """What the ribbons depend on besides the strands (the streams are rebuilt when it changes)."""
    h = hashlib.sha1()
    for a in (camera.view, camera.projection):
        h.update(np.ascontiguousarray(a, np.float64).view(np.uint8))
    h.update(f"{bool(camera.is_ortho)}:{int(height)}:{bool(strip)}".encode())
    return h.digest()
