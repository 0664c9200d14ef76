"""The meshes an armature deforms, as the adaptive bake measures them (issue 38 item 3):
``adaptive.MeshAnchors`` (per deformed mesh and deform bone, the corners of the box around the
vertices that bone moves, in the bone's rest space, and the mesh's size).  Read once per bake,
before the bake quiets the bodies' modifiers; the vertex positions are the meshes' own (no shape
key, no other modifier), in the armature's space as the Armature modifier deforms them."""
from __future__ import annotations

import numpy as np

from ..importer.mesh import vertex_positions
from ..importer.skin import joint_bounds, read_vertex_groups
from .adaptive import MeshAnchors

# a box's eight corners as (-1 / +1) signs of its half extents
_SIGNS = np.array([[x, y, z] for x in (-1.0, 1.0) for y in (-1.0, 1.0) for z in (-1.0, 1.0)])


def deformed_meshes(armature) -> list:
    """The mesh objects an enabled Armature modifier of ``armature`` deforms."""
    import bpy

    out = []
    for ob in bpy.data.objects:
        if ob.type != "MESH":
            continue
        if any(m.type == "ARMATURE" and m.object == armature and (m.show_viewport or m.show_render)
               and m.use_vertex_groups for m in ob.modifiers):
            out.append(ob)
    return out


def mesh_anchors(armature, names) -> MeshAnchors:
    """The anchors of every mesh ``armature`` deforms (``names``: the bones in pose.bones order)."""
    index = {n: i for i, n in enumerate(names)}
    deform = {b.name for b in armature.data.bones if b.use_deform}
    rest = {b.name: np.array(b.matrix_local, np.float64) for b in armature.data.bones if b.name in deform}
    to_arm = np.linalg.inv(np.array(armature.matrix_world, np.float64))
    bones, local, size, mesh, labels = [], [], [], [], []
    for ob in deformed_meshes(armature):
        me = ob.data
        n = len(me.vertices)
        if not n or not len(ob.vertex_groups):
            continue
        co = vertex_positions(me)
        m = to_arm @ np.array(ob.matrix_world, np.float64)
        p = co.astype(np.float64) @ m[:3, :3].T + m[:3, 3]
        extent = float(np.linalg.norm(p.max(axis=0) - p.min(axis=0)))
        if not extent > 0.0:
            continue
        gbone = np.array([index[g.name] if g.name in rest and g.name in index else -1 for g in ob.vertex_groups],
                         np.int64)
        vi, gi, wi = read_vertex_groups(me)
        j = gbone[gi] if gi.size else gi
        keep = (wi > 0.0) & (j >= 0)
        if not keep.any():
            continue
        lo, hi = joint_bounds(p[vi[keep]], j[keep][:, None], wi[keep][:, None], len(names))
        used = np.flatnonzero(np.isfinite(lo).all(axis=1))
        centre, half = 0.5 * (lo[used] + hi[used]), 0.5 * (hi[used] - lo[used])
        corners = centre[:, None, :] + half[:, None, :] * _SIGNS[None]          # (U,8,3) armature rest space
        inv = np.linalg.inv(np.stack([rest[names[b]] for b in used]))          # armature -> bone rest space
        c = np.einsum("uij,ukj->uki", inv[:, :3, :3], corners) + inv[:, None, :3, 3]
        bones.append(np.repeat(used, 8))
        local.append(c.reshape(-1, 3))
        size.append(np.full(used.size * 8, extent))
        mesh.append(np.full(used.size * 8, len(labels)))
        labels.append(ob.name)
    if not bones:
        return MeshAnchors.empty()
    return MeshAnchors(np.concatenate(bones), np.concatenate(local), np.concatenate(size), np.concatenate(mesh),
                       labels)


def segment_sizes(anchors: MeshAnchors, seg_bone: np.ndarray, size: float) -> np.ndarray:
    """(S,) the size a B-Bone segment's error is relative to: the smallest mesh its bone
    deforms (``size``, the rig's, when it deforms none)."""
    out = np.full(seg_bone.size, float(size))
    if anchors.bone.size and seg_bone.size:
        for b in np.unique(seg_bone):                    # the few weighted B-Bones
            s = anchors.size[anchors.bone == b]
            if s.size:
                out[seg_bone == b] = min(float(s.min()), float(size))
    return out
