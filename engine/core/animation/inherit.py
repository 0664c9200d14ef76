"""Blender's bone parent transform (inheritance flags), batched in numpy.

Implements the rules of ``BKE_bone_parent_transform_calc_from_matrices`` and
``BKE_bone_parent_transform_apply`` (source/blender/blenkernel/intern/armature.cc) for many bones at
once.  All matrices are in ARMATURE space (Blender's ``pose_mat`` / ``arm_mat``); 4x4 with column
vectors, so a matrix's axes are its columns (Blender's ``mat[i]`` rows in C).

Per bone, from its parent's pose matrix ``P`` (armature space), the parent's rest ``arm_mat`` and
the bone's own rest offset ``offs`` (``inv(parent arm_mat) @ arm_mat``; for a root bone its
``arm_mat``):

* FULL with rotation inherited: rotscale = loc = P @ offs (the plain chain).
* otherwise ``tmat`` is P (rotation inherited) or the parent's arm_mat (``use_inherit_rotation``
  off, Blender's BONE_HINGE), then per ``inherit_scale``: NONE/AVERAGE orthogonalize P around Y and
  normalise (``orthogonalize_m4_stable(.., 1, true)``); ALIGNED orthogonalizes keeping volume and
  moves the column lengths into ``post_scale``; NONE_LEGACY normalises the columns; hinge FULL /
  FIX_SHEAR rescale the rest axes by P's column lengths (FIX_SHEAR: volume-corrected,
  ``mat4_to_size_fix_shear``); hinge ALIGNED puts those into ``post_scale``; AVERAGE multiplies by
  cbrt(|det P|); rotscale = tmat @ offs, and FIX_SHEAR orthogonalizes it keeping volume.
* loc matrix: ``use_local_location`` off: P's 3x3 with the translation P @ offs.head; else P @ offs
  (any non-FULL case) or rotscale.
* root bones: rotscale = offs, loc = offs (or only offs' translation with ``use_local_location``
  off).
* apply: pose = rotscale @ chan, pose.translation = loc @ chan.translation, then the columns of
  pose's 3x3 are scaled by ``post_scale``.  The inverse (``BKE_armature_mat_pose_to_bone``) undoes
  the three steps in reverse.
"""
from __future__ import annotations

import numpy as np

#: Bone.inherit_scale values, in the order of the codes ScenePose stores.
INHERIT_SCALE_MODES = ("FULL", "FIX_SHEAR", "ALIGNED", "AVERAGE", "NONE", "NONE_LEGACY")
FULL, FIX_SHEAR, ALIGNED, AVERAGE, NONE, NONE_LEGACY = range(6)
_MODE_CODES = np.arange(len(INHERIT_SCALE_MODES))

_FLT_EPSILON = 1.1920928955078125e-07


def _safe_normalize(v: np.ndarray):
    """(K,3) -> (unit vectors, lengths); zero vectors stay zero (Blender's normalize_v3_v3)."""
    n = np.sqrt(np.einsum("ki,ki->k", v, v))
    ok = n > 1e-35
    if ok.all():                     # the usual case: no masking
        return v / n[:, None], n
    out = np.where(ok[:, None], v / np.where(ok, n, 1.0)[:, None], 0.0)
    return out, np.where(ok, n, 0.0)


def _dot(a, b):
    return np.einsum("ki,ki->k", a, b)


def _cross(a, b):
    """(K,3) x (K,3) row by row, written out by component (np.cross's generic axis handling costs
    more than the products on these small batches)."""
    out = np.empty_like(a)
    out[:, 0] = a[:, 1] * b[:, 2] - a[:, 2] * b[:, 1]
    out[:, 1] = a[:, 2] * b[:, 0] - a[:, 0] * b[:, 2]
    out[:, 2] = a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]
    return out


def orthogonalize_stable_y(m: np.ndarray, normalize) -> np.ndarray:
    """Blender's ``orthogonalize_m4_stable(m, 1, normalize)`` on (K,4,4): the Y axis is kept, X and
    Z are projected off it and then turned symmetrically to a right angle (volume kept unless
    ``normalize``).  ``normalize``: one bool for every matrix, or a (K,) bool array per matrix (so
    rows of different inherit_scale modes take one call).  Returns a new array; the translation
    column is untouched."""
    out = np.array(m, dtype=np.float64, copy=True)
    k = out.shape[0]
    norm = np.asarray(normalize, dtype=bool)
    if norm.ndim == 0:
        all_norm = bool(norm)
        any_norm = all_norm
        norm = np.full(k, all_norm)
    else:
        if norm.shape != (k,):
            raise ValueError(f"orthogonalize_stable_y: normalize has shape {norm.shape}, expected ({k},)")
        all_norm = bool(norm.all())
        any_norm = bool(norm.any())
    v1 = out[:, :3, 1].copy()
    v2 = out[:, :3, 0].copy()
    v3 = out[:, :3, 2].copy()
    l1 = _dot(v1, v1)
    pos = l1 > 0.0
    if pos.all():                    # the usual case: no zero-length Y axis, no masking
        v2 = v2 - v1 * (_dot(v2, v1) / l1)[:, None]
        v3 = v3 - v1 * (_dot(v3, v1) / l1)[:, None]
        if all_norm:
            v1 = v1 / np.sqrt(l1)[:, None]
        elif any_norm:
            v1 = np.where(norm[:, None], v1 / np.sqrt(l1)[:, None], v1)
    else:
        safe_l1 = np.where(pos, l1, 1.0)
        v2 = np.where(pos[:, None], v2 - v1 * (_dot(v2, v1) / safe_l1)[:, None], v2)
        v3 = np.where(pos[:, None], v3 - v1 * (_dot(v3, v1) / safe_l1)[:, None], v3)
        if any_norm:
            v1 = np.where((pos & norm)[:, None], v1 / np.sqrt(safe_l1)[:, None], v1)
    n2, len2 = _safe_normalize(v2)
    n3, len3 = _safe_normalize(v3)
    c = _dot(n2, n3)
    ac = np.abs(c)
    fix = (ac > 1e-4) & (ac < 1.0 - _FLT_EPSILON)
    if fix.any():
        f = np.flatnonzero(fix)
        cf = c[f]
        angle = np.arccos(np.clip(cf, -1.0, 1.0))
        target = angle + (np.pi / 2 - angle) / 2
        a2 = n2[f] - n3[f] * cf[:, None]
        a2 = a2 * (np.sin(target) / np.sqrt(_dot(a2, a2)))[:, None] + n3[f] * np.cos(target)[:, None]
        tmp = _cross(a2, n3[f])
        a3, _ = _safe_normalize(_cross(tmp, a2))
        n2[f] = a2
        n3[f] = a3
        if not all_norm:
            keep = ~norm[f]
            fk = f[keep]
            sf = np.sqrt(np.sin(angle[keep]))
            v2[fk] = a2[keep] * (len2[fk] * sf)[:, None]
            v3[fk] = a3[keep] * (len3[fk] * sf)[:, None]
    if all_norm:
        v2, v3 = n2, n3
    elif any_norm:
        v2 = np.where(norm[:, None], n2, v2)
        v3 = np.where(norm[:, None], n3, v3)
    out[:, :3, 1] = v1
    out[:, :3, 0] = v2
    out[:, :3, 2] = v3
    return out


def column_sizes(m: np.ndarray) -> np.ndarray:
    """(K,3) lengths of the X, Y, Z axes (Blender's mat4_to_size)."""
    return np.linalg.norm(m[:, :3, :3], axis=1)


def sizes_fix_shear(m: np.ndarray) -> np.ndarray:
    """Blender's mat4_to_size_fix_shear: axis lengths scaled so their product is |det|."""
    size = column_sizes(m)
    vol = np.prod(size, axis=1)
    det = np.linalg.det(m[:, :3, :3])
    nz = vol != 0.0
    fac = np.where(nz, np.cbrt(np.abs(det / np.where(nz, vol, 1.0))), 1.0)
    return size * fac[:, None]


def _normalize_columns(m: np.ndarray):
    """(K,4,4) -> (copy with unit X/Y/Z axes, their former lengths) (Blender's normalize_m4_ex)."""
    out = np.array(m, dtype=np.float64, copy=True)
    size = column_sizes(out)
    ok = size != 0.0
    out[:, :3, :3] /= np.where(ok, size, 1.0)[:, None, :]
    return out, size


def parent_transforms(offs, parent_arm, parent_pose, has_parent, use_rotation, mode, local_location):
    """Batched BoneParentTransform: (rotscale (K,4,4), loc (K,4,4), post_scale (K,3)).

    ``offs`` (K,4,4): each bone's rest offset to its parent's rest (root bones: their arm_mat);
    ``parent_arm`` / ``parent_pose`` (K,4,4): the parent's rest and current pose matrices (any value
    where ``has_parent`` is False); ``use_rotation``, ``local_location`` (K,) bool; ``mode`` (K,)
    codes of INHERIT_SCALE_MODES.  Armature space throughout."""
    offs = np.asarray(offs, dtype=np.float64)
    P = np.asarray(parent_pose, dtype=np.float64)
    k = offs.shape[0]
    has_parent = np.asarray(has_parent, bool)
    use_rotation = np.asarray(use_rotation, bool)
    local_location = np.asarray(local_location, bool)
    mode = np.asarray(mode, np.int64)
    rs = offs.copy()
    loc = offs.copy()
    post = np.ones((k, 3))
    eq = mode[:, None] == _MODE_CODES              # (K,6): one mask per inherit_scale mode
    full = has_parent & use_rotation & eq[:, FULL]
    part = has_parent & ~full
    if full.any():
        rs[full] = P[full] @ offs[full]
    if part.any():
        tmat = np.where(use_rotation[:, None, None], P, np.asarray(parent_arm, dtype=np.float64))
        rot = part & use_rotation
        hinge = part & ~use_rotation
        # which modes occur among the rotation-inheriting and the hinge bones (two reductions)
        rot_eq = eq & rot[:, None]
        hinge_eq = eq & hinge[:, None]
        in_rot = rot_eq.any(axis=0).tolist()
        in_hinge = hinge_eq.any(axis=0).tolist()
        # NONE / AVERAGE (normalised) and ALIGNED (volume kept, lengths -> post_scale): one call
        if in_rot[NONE] or in_rot[AVERAGE] or in_rot[ALIGNED]:
            m = rot_eq[:, NONE] | rot_eq[:, AVERAGE] | rot_eq[:, ALIGNED]
            aligned = eq[m, ALIGNED]
            o = orthogonalize_stable_y(tmat[m], ~aligned)
            if in_rot[ALIGNED]:
                a = np.flatnonzero(m)[aligned]
                o[aligned], post[a] = _normalize_columns(o[aligned])
            tmat[m] = o
        if in_rot[NONE_LEGACY]:
            m = rot_eq[:, NONE_LEGACY]
            tmat[m] = _normalize_columns(tmat[m])[0]
        if in_hinge[FULL]:
            m = hinge_eq[:, FULL]
            tmat[m, :3, :3] *= column_sizes(P[m])[:, None, :]
        if in_hinge[FIX_SHEAR]:
            m = hinge_eq[:, FIX_SHEAR]
            tmat[m, :3, :3] *= sizes_fix_shear(P[m])[:, None, :]
        if in_hinge[ALIGNED]:
            m = hinge_eq[:, ALIGNED]
            post[m] = sizes_fix_shear(P[m])
        if in_rot[AVERAGE] or in_hinge[AVERAGE]:
            m = part & eq[:, AVERAGE]
            tmat[m, :3, :3] *= np.cbrt(np.abs(np.linalg.det(P[m, :3, :3])))[:, None, None]
        rs[part] = tmat[part] @ offs[part]
        if in_rot[FIX_SHEAR] or in_hinge[FIX_SHEAR]:
            m = part & eq[:, FIX_SHEAR]
            rs[m] = orthogonalize_stable_y(rs[m], False)
    # loc matrix
    nll = has_parent & ~local_location
    if nll.any():
        lm = np.tile(np.eye(4), (int(nll.sum()), 1, 1))
        lm[:, :3, :3] = P[nll, :3, :3]
        lm[:, :3, 3] = (P[nll] @ offs[nll, :, 3:4])[:, :3, 0]
        loc[nll] = lm
    m = has_parent & local_location & ~full
    if m.any():
        loc[m] = P[m] @ offs[m]
    m = has_parent & local_location & full
    loc[m] = rs[m]
    root_nll = ~has_parent & ~local_location
    if root_nll.any():
        lm = np.tile(np.eye(4), (int(root_nll.sum()), 1, 1))
        lm[:, :3, 3] = offs[root_nll, :3, 3]
        loc[root_nll] = lm
    return rs, loc, post


def apply_parent_transforms(rs, loc, post, chan):
    """BKE_bone_parent_transform_apply for (K,4,4) channel matrices -> pose matrices."""
    out = rs @ chan
    out[:, :3, 3] = (loc[:, :3, :3] @ chan[:, :3, 3:4])[:, :, 0] + loc[:, :3, 3]
    out[:, :3, :3] *= post[:, None, :]
    return out


def invert_parent_transforms(rs, loc, post, pose):
    """BKE_armature_mat_pose_to_bone for (K,4,4) pose matrices -> channel matrices: the exact
    inverse of apply_parent_transforms (pseudo-inverse where a parent matrix is singular)."""
    pose = np.asarray(pose, dtype=np.float64)
    safe = np.where(post != 0.0, post, 1.0)
    p = pose.copy()
    p[:, :3, :3] /= safe[:, None, :]
    try:
        rs_inv = np.linalg.inv(rs)
        loc_inv = np.linalg.inv(loc)
    except np.linalg.LinAlgError:
        rs_inv = np.linalg.pinv(rs)
        loc_inv = np.linalg.pinv(loc)
    out = rs_inv @ p
    out[:, :3, 3] = (loc_inv[:, :3, :3] @ pose[:, :3, 3:4])[:, :, 0] + loc_inv[:, :3, 3]
    out[:, 3, :] = (0.0, 0.0, 0.0, 1.0)
    return out
