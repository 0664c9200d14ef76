# SPDX-License-Identifier: GPL-3.0-or-later
"""Mesh building blocks of the demo character (demo/character_meshes.py): a vertex/face/weight
collector, tubes along bone chains with smooth two-bone weights, ellipsoids, flat discs, and the
armature modifier that skins a built object."""

import math

import bpy
from mathutils import Vector


def smoothstep(x):
    x = min(1.0, max(0.0, x))
    return x * x * (3.0 - 2.0 * x)


def link_object(scene, obj):
    scene.collection.objects.link(obj)
    return obj


class MeshBuilder:
    """Collects vertices, faces, per-face material indices and per-vertex bone weights."""

    def __init__(self):
        self.verts = []
        self.faces = []
        self.face_mat = []
        self.weights = []  # per vertex: dict bone -> weight

    def add_vert(self, co, weights=None):
        self.verts.append(Vector(co))
        self.weights.append(dict(weights or {}))
        return len(self.verts) - 1

    def add_face(self, idx, mat):
        self.faces.append(tuple(idx))
        self.face_mat.append(mat)

    def build(self, name, materials, smooth=True):
        me = bpy.data.meshes.new(name)
        me.from_pydata([tuple(v) for v in self.verts], [], self.faces)
        for m in materials:
            me.materials.append(m)
        me.polygons.foreach_set("material_index", self.face_mat)
        me.polygons.foreach_set("use_smooth", [smooth] * len(self.faces))
        me.validate(clean_customdata=False)
        me.update()
        return me

    def apply_vertex_groups(self, obj):
        groups = {}
        for vi, wd in enumerate(self.weights):
            total = sum(wd.values())
            if total <= 0.0:
                continue
            for bone, w in wd.items():
                if w <= 1e-4:
                    continue
                vg = groups.get(bone)
                if vg is None:
                    vg = groups[bone] = obj.vertex_groups.new(name=bone)
                vg.add([vi], w / total, "REPLACE")


def chain_weights(point, chain, blend=0.05):
    """Weights of ``point`` over a bone chain [(name, head, tail)], blending at the joints.

    The point is projected on the nearest bone; close to a joint it is shared smoothly with the
    neighbouring bone, so each vertex has one or two influences.
    """
    best = None
    for i, (_name, h, t) in enumerate(chain):
        seg = t - h
        L2 = seg.length_squared
        u = 0.0 if L2 == 0 else max(0.0, min(1.0, (point - h).dot(seg) / L2))
        d = (h + seg * u - point).length
        if best is None or d < best[0] - 1e-9:
            best = (d, i, u)
    _d, i, u = best
    lengths = [(t - h).length for _n, h, t in chain]
    pos = sum(lengths[:i]) + u * lengths[i]
    cum = 0.0
    weights = {chain[i][0]: 1.0}
    for k in range(1, len(chain)):
        cum += lengths[k - 1]
        sd = pos - cum
        if abs(sd) < blend:
            w_next = smoothstep((sd + blend) / (2.0 * blend))
            weights = {chain[k - 1][0]: 1.0 - w_next, chain[k][0]: w_next}
            break
    return weights


def add_tube(mb, ctrl, ref, segs, mat_of_s, chain, spacing=0.02, blend=0.05, cap_start=True,
          cap_end=True, cap_rings=3):
    """Add a closed tube along control points ``ctrl`` = [(pos, rx, ry), ...].

    ``ref`` is the direction the first radius (rx) points at (projected perpendicular to the
    tube). ``mat_of_s`` maps the arc-length position to a material index.
    """
    pts = [(Vector(p), rx, ry) for p, rx, ry in ctrl]
    # Sample every segment uniformly, always keeping the control points themselves.
    samples = []  # (pos, rx, ry, s)
    s_acc = 0.0
    for i in range(len(pts) - 1):
        (p0, ax, ay), (p1, bx, by) = pts[i], pts[i + 1]
        L = (p1 - p0).length
        n = max(1, int(math.ceil(L / spacing)))
        for k in range(n):
            f = k / n
            samples.append((p0.lerp(p1, f), ax + (bx - ax) * f, ay + (by - ay) * f, s_acc + L * f))
        s_acc += L
    p_last, rx_last, ry_last = pts[-1]
    samples.append((p_last, rx_last, ry_last, s_acc))

    def tangent(i):
        a = samples[max(0, i - 1)][0]
        b = samples[min(len(samples) - 1, i + 1)][0]
        return (b - a).normalized()

    ref = Vector(ref).normalized()
    rings = []  # (center, u, v, rx, ry, s, t)
    for i, (c, rx, ry, s) in enumerate(samples):
        t = tangent(i)
        u = (ref - t * ref.dot(t)).normalized()
        v = t.cross(u)
        rings.append((c, u, v, rx, ry, s, t))

    # Rounded caps: extra shrinking rings beyond both ends.
    def cap_rings_for(ring, direction):
        c, u, v, rx, ry, s, t = ring
        depth = min(rx, ry)
        out = []
        for k in range(1, cap_rings + 1):
            phi = (math.pi / 2.0) * k / (cap_rings + 1)
            f = math.cos(phi)
            out.append((c + t * (direction * depth * math.sin(phi)), u, v, rx * f, ry * f, s, t))
        pole = c + t * (direction * depth)
        return out, pole

    all_rings = list(rings)
    start_pole = end_pole = None
    if cap_start:
        extra, start_pole = cap_rings_for(rings[0], -1.0)
        all_rings = list(reversed(extra)) + all_rings
    if cap_end:
        extra, end_pole = cap_rings_for(rings[-1], 1.0)
        all_rings = all_rings + extra

    ring_idx = []
    for c, u, v, rx, ry, s, _t in all_rings:
        w = chain_weights(c, chain, blend)
        idx = []
        for j in range(segs):
            a = 2.0 * math.pi * j / segs
            co = c + u * (rx * math.cos(a)) + v * (ry * math.sin(a))
            idx.append(mb.add_vert(co, w))
        ring_idx.append((idx, s))
    for r in range(len(ring_idx) - 1):
        (ia, sa), (ib, sb) = ring_idx[r], ring_idx[r + 1]
        mat = mat_of_s(0.5 * (sa + sb))
        for j in range(segs):
            j2 = (j + 1) % segs
            mb.add_face((ia[j], ia[j2], ib[j2], ib[j]), mat)
    if start_pole is not None:
        idx, s = ring_idx[0]
        p = mb.add_vert(start_pole, chain_weights(start_pole, chain, blend))
        for j in range(segs):
            mb.add_face((p, idx[(j + 1) % segs], idx[j]), mat_of_s(s))
    if end_pole is not None:
        idx, s = ring_idx[-1]
        p = mb.add_vert(end_pole, chain_weights(end_pole, chain, blend))
        for j in range(segs):
            mb.add_face((p, idx[j], idx[(j + 1) % segs]), mat_of_s(s))


def skin_to(obj, arm):
    obj.parent = arm
    obj.matrix_parent_inverse = arm.matrix_world.inverted()
    mod = obj.modifiers.new("Armature", "ARMATURE")
    mod.object = arm
    mod.use_vertex_groups = True
    mod.use_deform_preserve_volume = False
    # The armature modifier must be the first one.
    while obj.modifiers[0] != mod:
        obj.modifiers.move(obj.modifiers.find(mod.name), 0)


def add_ellipsoid(mb, center, radii, segs, rings, mat, keep=None):
    """UV ellipsoid; ``keep(face_center)`` filters faces (for the hair shell)."""
    c = Vector(center)
    top = mb.add_vert(c + Vector((0, 0, radii[2])), {"head": 1.0})
    grid = []
    for r in range(1, rings):
        th = math.pi * r / rings
        row = []
        for s in range(segs):
            ph = 2.0 * math.pi * s / segs - math.pi / 2.0  # seam at the back
            co = c + Vector((radii[0] * math.sin(th) * math.cos(ph),
                             radii[1] * math.sin(th) * math.sin(ph),
                             radii[2] * math.cos(th)))
            row.append(mb.add_vert(co, {"head": 1.0}))
        grid.append(row)
    bottom = mb.add_vert(c - Vector((0, 0, radii[2])), {"head": 1.0})

    def add(idx):
        if keep is not None:
            cen = sum((mb.verts[i] for i in idx), Vector()) / len(idx)
            if not keep(cen):
                return
        mb.add_face(tuple(reversed(idx)), mat)  # outward-facing winding

    for s in range(segs):
        s2 = (s + 1) % segs
        add((top, grid[0][s2], grid[0][s]))
        for r in range(len(grid) - 1):
            add((grid[r][s], grid[r][s2], grid[r + 1][s2], grid[r + 1][s]))
        add((bottom, grid[-1][s], grid[-1][s2]))


def add_disc(fb, cx, cz, hw, hh, offset, mat, tag, rings=3, segs=16, extra=None):
    """Elliptic disc on the face, as a polar grid (centre + rings)."""
    centre = fb.add_feature_vert(cx, cz, offset, tag, (cx, cz, hw, hh, 0.0, 0.0, extra))
    prev = None
    for r in range(1, rings + 1):
        rr = r / rings
        row = []
        for s in range(segs):
            a = 2.0 * math.pi * s / segs
            x = cx + hw * rr * math.cos(a)
            z = cz + hh * rr * math.sin(a)
            row.append(fb.add_feature_vert(x, z, offset, tag, (cx, cz, hw, hh, rr, a, extra)))
        if prev is None:
            for s in range(segs):
                fb.add_face((centre, row[s], row[(s + 1) % segs]), mat)
        else:
            for s in range(segs):
                s2 = (s + 1) % segs
                fb.add_face((prev[s], row[s], row[s2], prev[s2]), mat)
        prev = row
