"""Preserve Volume (dual quaternion skinning) palettes, exactly as Blender's Armature modifier.

No bpy/gpu.  Blender (blenkernel armature_deform.cc, blenlib math_rotation.cc) with
``use_deform_preserve_volume`` works in the armature object's space:

* per bone (and per B-Bone segment matrix) a dual quaternion from the deform matrix
  ``chan_mat`` (``pose_mat @ inverse(arm_mat)``; B-Bone segment a: ``b_bone_mats[a + 1]``) and the
  bone's rest ``arm_mat`` as base (``mat4_to_dquat``): when the matrix is not a pure rotation
  (not orthonormal, negative, or ``size(chan_mat @ arm_mat)`` off 1 by more than 1e-4) the
  rotation of ``chan_mat @ arm_mat`` (its columns orthogonalised against the Y axis) is split
  off and the rest becomes a scale matrix ``arm_mat @ S @ inverse(arm_mat)``;
* per vertex (``add_weighted_dq_dq_pivot`` without the full deform matrix): each bone's scale
  matrix is applied at the vertex by moving its translation part by ``0.5 * q * (0, S co - co)``,
  the dual quaternions are summed with the weights, a bone whose rotation quaternion points
  away from the running sum (negative dot product) adding with the negated weight;
* ``normalize_dq`` divides by the weight sum and ``mul_v3m3_dq`` applies the blended (not unit)
  dual quaternion: ``(M(q) @ co + t(q, d)) / |q|^2``.

This module computes the per-bone part (vectorised over joints); the per-vertex part runs in
glsl/skinning.glsl.  Palette layout of a Preserve Volume group (rows of 4 RGBA texels, texel c
of a row = column c of the row's matrix, as every palette):

* row 0: ``premat`` = inverse(armature world) @ mesh world (mesh-local -> armature space); its
  texel 0 ``.w`` is 2.0 (affine matrices hold 0 there): the shader's Preserve Volume marker;
* row 1: inverse(premat);
* row 2 + 2j: joint j's scale matrix (identity when the bone has no scale);
* row 3 + 2j: texel 0 the rotation quaternion (w, x, y, z), texel 1 the dual part, 0, 0.

Normals (Blender recomputes them from the deformed mesh): the shader uses the cofactor of
``M(q) / |q|^2 @ sum(w S) / sum(w)``, the deform matrix Blender's own full-deform (crazy space)
path computes for the same vertex.
"""
from __future__ import annotations

import numpy as np

from ..assets.types import Bounds
from ..finite import affine_inv, affine_solve, object_inv

MARKER = 2.0                  # texel (0, first row).w of a Preserve Volume palette
_FLT_EPS = float(np.finfo(np.float32).eps)


def palette_rows(joint_count: int) -> int:
    """Rows of a Preserve Volume palette for ``joint_count`` joints."""
    return 2 * int(joint_count) + 2


def _normalize_cols(m: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(m, axis=1, keepdims=True)          # (K,1,3): column lengths
    return np.divide(m, n, out=np.zeros_like(m), where=n > 0.0)


def mat3_to_quat(m: np.ndarray) -> np.ndarray:
    """(K,3,3) -> (K,4) (w, x, y, z): Blender's ``mat4_to_quat`` (columns normalised, negated
    when the determinant is negative, then ``mat3_normalized_to_quat_fast``: four branches, w
    made non-negative)."""
    m = _normalize_cols(np.asarray(m, np.float64))
    det = np.linalg.det(m)
    m = np.where((det < 0.0)[:, None, None], -m, m)
    m = np.where(np.isfinite(det)[:, None, None], m, np.eye(3))
    m00, m11, m22 = m[:, 0, 0], m[:, 1, 1], m[:, 2, 2]
    m01, m10, m02, m20, m12, m21 = m[:, 0, 1], m[:, 1, 0], m[:, 0, 2], m[:, 2, 0], m[:, 1, 2], m[:, 2, 1]
    q = np.empty((m.shape[0], 4))
    bx = (m22 < 0.0) & (m00 > m11)
    by = (m22 < 0.0) & ~bx
    bz = (m22 >= 0.0) & (m00 < -m11)
    bw = ~(bx | by | bz)
    with np.errstate(divide="ignore", invalid="ignore"):
        # w branch
        s = 2.0 * np.sqrt(np.maximum(1.0 + m00 + m11 + m22, 0.0))
        qw = np.stack([0.25 * s, (m21 - m12) / s, (m02 - m20) / s, (m10 - m01) / s], 1)
        # x branch
        s = 2.0 * np.sqrt(np.maximum(1.0 + m00 - m11 - m22, 0.0))
        s = np.where(m21 < m12, -s, s)
        qx = np.stack([(m21 - m12) / s, 0.25 * s, (m10 + m01) / s, (m02 + m20) / s], 1)
        # y branch
        s = 2.0 * np.sqrt(np.maximum(1.0 - m00 + m11 - m22, 0.0))
        s = np.where(m02 < m20, -s, s)
        qy = np.stack([(m02 - m20) / s, (m10 + m01) / s, 0.25 * s, (m21 + m12) / s], 1)
        # z branch
        s = 2.0 * np.sqrt(np.maximum(1.0 - m00 - m11 + m22, 0.0))
        s = np.where(m10 < m01, -s, s)
        qz = np.stack([(m10 - m01) / s, (m02 + m20) / s, (m21 + m12) / s, 0.25 * s], 1)
    q[bw], q[bx], q[by], q[bz] = qw[bw], qx[bx], qy[by], qz[bz]
    q = np.where(np.isfinite(q), q, 0.0)
    n2 = (q * q).sum(axis=1)
    fix = np.abs(n2 - 1.0) >= 0.0002 * 3
    if fix.any():
        n = np.sqrt(n2[fix])[:, None]
        q[fix] = np.where(n > 0.0, q[fix] / np.where(n > 0.0, n, 1.0), np.array([0.0, 1.0, 0.0, 0.0]))
    return q


def quat_to_mat3(q: np.ndarray) -> np.ndarray:
    """(K,4) unit (w, x, y, z) -> (K,3,3) rotation matrices."""
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], 1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], 1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], 1)], 1)


def _orthogonalize_y(m3: np.ndarray) -> np.ndarray:
    """Blender's ``orthogonalize_m4(m, 1)`` on the 3x3 part (the usual branch, X not parallel to
    Y): Y normalised, Z = normalize(X x Y), X = Y x Z, each column scaled back to its length."""
    size = np.linalg.norm(m3, axis=1)                      # (K,3) column lengths
    y = m3[:, :, 1] / np.where(size[:, 1:2] > 0, size[:, 1:2], 1.0)[:, :]
    z = np.cross(m3[:, :, 0], y)
    n = np.linalg.norm(z, axis=1, keepdims=True)
    z = z / np.where(n > 0, n, 1.0)
    x = np.cross(y, z)
    return np.stack([x, y, z], axis=2) * size[:, None, :]


def mat4_to_dquat(base: np.ndarray, mat: np.ndarray):
    """Blender's ``mat4_to_dquat`` over (K,4,4) rest ``base`` (arm_mat) and deform ``mat``
    (chan_mat): ((K,4) quat, (K,4) dual part, (K,4,4) scale matrix (identity without scale),
    (K,) bool has scale)."""
    k = mat.shape[0]
    base_rs = np.matmul(mat, base)
    scale = np.linalg.norm(base_rs[:, :3, :3], axis=1)
    m3 = mat[:, :3, :3]
    gram = np.matmul(np.transpose(m3, (0, 2, 1)), m3)
    off = np.abs(gram - np.eye(3))
    tol = 1.5 * _FLT_EPS
    orthonormal = (off <= tol).all(axis=(1, 2))
    has_scale = (~orthonormal) | (np.linalg.det(mat) < 0.0) | (((scale - 1.0) ** 2).sum(axis=1) > 1e-8)
    r = mat.copy()
    smat = np.tile(np.eye(4), (k, 1, 1))
    if has_scale.any():
        b = base[has_scale]
        brs = base_rs[has_scale]
        bq = mat3_to_quat(_orthogonalize_y(brs[:, :3, :3]))
        base_r = np.tile(np.eye(4), (bq.shape[0], 1, 1))
        base_r[:, :3, :3] = quat_to_mat3(bq)
        base_r[:, :3, 3] = brs[:, :3, 3]
        binv = np.linalg.inv(b)
        r[has_scale] = np.matmul(base_r, binv)
        s = np.matmul(np.linalg.inv(base_r), brs)
        smat[has_scale] = np.matmul(np.matmul(b, s), binv)
    q = mat3_to_quat(r[:, :3, :3])
    t = r[:, :3, 3]
    q0, q1, q2, q3 = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    t0, t1, t2 = t[:, 0], t[:, 1], t[:, 2]
    dual = np.stack([-0.5 * (t0 * q1 + t1 * q2 + t2 * q3),
                     0.5 * (t0 * q0 + t1 * q3 - t2 * q2),
                     0.5 * (-t0 * q3 + t1 * q0 + t2 * q1),
                     0.5 * (t0 * q2 - t1 * q1 + t2 * q0)], 1)
    return q, dual, smat, has_scale


def rest_arm_matrices(group) -> np.ndarray:
    """(J,4,4) rest bone matrices in armature space (Blender's ``arm_mat``) of a group's joints:
    ``armature_relation_bind @ inverse(inverse_bind)`` (cached on the group)."""
    arm = getattr(group, "_dq_arm_mats", None)
    if arm is None:
        rel_b = np.linalg.inv(group.rel_bind_inv)
        arm = np.matmul(rel_b, np.linalg.inv(group.inverse_binds))
        group._dq_arm_mats = arm
    return arm


def palette_texels(premat: np.ndarray, q: np.ndarray, dual: np.ndarray, smat: np.ndarray) -> np.ndarray:
    """The (2J+2, 4, 4) float32 texel rows of a Preserve Volume palette (layout: module doc)."""
    j = q.shape[0]
    out = np.zeros((palette_rows(j), 4, 4), np.float64)
    out[0] = premat.T
    out[1] = affine_inv(premat).T
    out[0, 0, 3] = MARKER
    out[2::2] = np.transpose(smat, (0, 2, 1))
    out[3::2, 0] = q
    out[3::2, 1] = dual
    return out.astype(np.float32)


def update_group(group, world_matrices: np.ndarray, joints: np.ndarray, ibm: np.ndarray) -> bool:
    """Compute and upload a Preserve Volume group's palette.  ``joints``: (J,4,4) joint world
    matrices (B-Bone segment slots already carry their segment relation), ``ibm``: the inverse
    binds corrected to today's armature relation (for the bounds).  Bounds: every joint box
    moved by its skin matrix (as linear blending), padded by 10% of their size: a blended dual
    quaternion keeps a vertex near the joints' transforms of it."""
    pal = group.palette
    pal.clear()
    if group.armature_node < 0 or group.rel_bind_inv is None:
        return False
    arm_world = world_matrices[group.armature_node]
    mesh_world = world_matrices[group.mesh_node_index]
    try:
        premat = affine_solve(arm_world, mesh_world)       # singular (scaled to 0): engine/core/finite.py
        chan = np.matmul(affine_solve(arm_world, joints), np.linalg.inv(rest_arm_matrices(group)))
        mesh_inv = object_inv(mesh_world, pal.zero_singular)
    except np.linalg.LinAlgError:
        return False
    if joints.shape[0] != group.inverse_binds.shape[0] or pal.joint_capacity != palette_rows(joints.shape[0]):
        return False
    q, dual, smat, _ = mat4_to_dquat(rest_arm_matrices(group), chan)
    if not (np.isfinite(q).all() and np.isfinite(dual).all() and np.isfinite(smat).all()):
        return False
    skin = np.matmul(mesh_inv, np.matmul(joints, ibm))
    if group.box_center.shape[0]:
        m = skin[group.box_joints]
        r = m[:, :3, :3]
        c = np.matmul(r, group.box_center[:, :, None])[:, :, 0] + m[:, :3, 3]
        h = np.matmul(np.abs(r), group.box_half[:, :, None])[:, :, 0]
        lo, hi = (c - h).min(axis=0), (c + h).max(axis=0)
        pad = 0.1 * (hi - lo).max()
        b = Bounds(lo - pad, hi + pad)
    else:
        b = Bounds.empty()
    if group.still_bounds is not None:
        b = b.union(group.still_bounds)
    lin = skin[:, :3, :3]
    gram = np.matmul(np.transpose(lin, (0, 2, 1)), lin)
    scale = float(np.sqrt(np.abs(gram).sum(axis=2).max())) if skin.shape[0] else 0.0
    if group.still_bounds is not None:
        scale = max(scale, 1.0)
    pal.current_local_bounds = b
    pal.max_linear_scale = scale
    pal.matrices = np.ascontiguousarray(palette_texels(premat, q, dual, smat).transpose(0, 2, 1))
    return pal.upload()
