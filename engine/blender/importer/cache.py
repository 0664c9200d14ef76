"""AssetCache: every asset the importer may reuse, and why it is reused (one place, no globals).

A session owns one cache.  An entry is reused only when the data it came from is the same:

* **meshes**, keyed by object name: the *structure* signature (datablock, counts, modifiers,
  shape-key layout, deform bones, vertex-group names, material slots; cheap, no vertex data) and
  the *content* fingerprint: a SHA-1 over every public mesh attribute (positions, UVs, colours,
  material indices, sharp faces, custom normals...), the corner topology, the corner normals,
  every shape key's coordinates and, where they deform the mesh, the vertex-group weights, as
  three parts (``mesh_content_fingerprint``).  ``verify=True`` (final renders, farm jobs,
  scripts) recomputes the bulk parts on every import and the vertex-group weights (a per-vertex
  walk, no bulk read exists) when Blender reported the object, mesh or shape keys edited since
  they were verified (``EditSignals``, edits.py; every weight API tags them), so no edit of
  positions, weights, shape-key data, UVs, material slots or modifiers can render stale.  ``verify=False`` (the viewport) trusts Blender's depsgraph updates instead: the session
  drops the entries that an update names (``invalidate_id``) and reuses the others unread.
* **clips**, keyed by (action, target object, kind): the action's keys (a checksum of every
  key point, handle and interpolation of the slot's F-curves), the scene fps and the targets.

``KnownState`` remembers, per import, what the viewport's depsgraph updates are compared with
(object structure, shape-key layout, armature rest, action keys, the scene's object names) so
``StylizedSession.sync`` can tell a pose edit or a slider drag from an edit that needs a
re-import.
"""
from __future__ import annotations

import hashlib
import time
from typing import Dict, NamedTuple, Optional

import numpy as np

# attribute data_type -> (foreach property, components, dtype)
_ATTRIBUTE_LAYOUT = {
    "FLOAT": ("value", 1, np.float32), "INT": ("value", 1, np.int32), "INT8": ("value", 1, np.int8),
    "BOOLEAN": ("value", 1, bool), "FLOAT_VECTOR": ("vector", 3, np.float32),
    "FLOAT2": ("vector", 2, np.float32), "FLOAT_COLOR": ("color", 4, np.float32),
    "BYTE_COLOR": ("color", 4, np.float32), "INT32_2D": ("value", 2, np.int32),
    "INT16_2D": ("value", 2, np.int32), "QUATERNION": ("value", 4, np.float32),
    "FLOAT4X4": ("value", 16, np.float32),
}
# internal attributes that change what is drawn (the corner topology); other "."-names are
# selection/hiding.  Edges draw nothing: what they change in the normals is hashed anyway (the
# public ``sharp_edge``, or the corner normals themselves), so ``.edge_verts`` is not read:
# every attribute read through the Python API is copied out of the data Blender's evaluated mesh
# shares with it (``CustomData_ensure_data_is_mutable``), and the copy stays (16 MB for a
# 2,000,000-edge terrain).
_INTERNAL_DRAWN = {".corner_vert"}
# the vertex positions' tag in ``base_fingerprint`` (hashed apart from the rest)
_POSITION_TAG = "position:POINT:FLOAT_VECTOR"


def _domain_size(mesh, domain: str) -> int:
    return {"POINT": len(mesh.vertices), "EDGE": len(mesh.edges), "FACE": len(mesh.polygons),
            "CORNER": len(mesh.loops)}.get(domain, -1)


def _hasher():
    h = hashlib.sha1()

    def add(tag: str, a: np.ndarray) -> None:
        h.update(tag.encode())
        h.update(np.int64(a.size).tobytes())
        h.update(np.ascontiguousarray(a).view(np.uint8))  # pyright: ignore[reportArgumentType]  (numpy's stubs give ndarray __buffer__ only for Python >= 3.12)

    return h, add


def base_fingerprint(mesh) -> tuple:
    """(SHA-1 of every public mesh attribute but the positions, the corner topology and the
    normals' domain, and the corner normals unless they are the vertices' (point domain: derived
    from the rest); SHA-1 of the ``position`` attribute): the bulk arrays (``foreach_get``),
    cheap enough for every check.  Two parts, so that an edit that only moved vertices is told
    from others (``AssetCache.moved_entry``).

    Every array is read into one scratch buffer, the size of the largest: a final render checks
    every mesh on every F12, and a big mesh's attributes read one after another into fresh arrays
    left the process tens of MB bigger for the rest of the render (glibc keeps freed pages)."""
    h, add = _hasher()
    hp, add_position = _hasher()
    reads = []
    for attr in mesh.attributes:
        name = attr.name
        if name.startswith(".") and name not in _INTERNAL_DRAWN:
            continue
        layout = _ATTRIBUTE_LAYOUT.get(attr.data_type)
        n = _domain_size(mesh, attr.domain)
        if layout is None or n < 0:
            reads.append((f"{name}:{attr.data_type}:{attr.domain}:unread", None, 0, None, None))
            continue
        prop, width, dtype = layout
        reads.append((f"{name}:{attr.domain}:{attr.data_type}", attr.data, n * width, dtype, prop))
    npoly = len(mesh.polygons)
    nl = len(mesh.loops)
    domain = getattr(mesh, "normals_domain", "CORNER")
    sizes = [count * np.dtype(dtype).itemsize for _tag, _data, count, dtype, _prop in reads if dtype is not None]
    scratch = np.empty(max(sizes + [4 * npoly, 12 * nl if domain != "POINT" else 0]), np.uint8)
    for tag, data, count, dtype, prop in reads:
        if dtype is None:
            h.update(tag.encode())
            continue
        a = scratch[:count * np.dtype(dtype).itemsize].view(dtype)
        if count:
            data.foreach_get(prop, a)
        (add_position if tag == _POSITION_TAG else add)(tag, a)
    starts = scratch[:4 * npoly].view(np.int32)
    if npoly:
        mesh.polygons.foreach_get("loop_start", starts)
    add("loop_start", starts)
    h.update(f"normals:{domain}".encode())
    # point-domain normals are a function of what is hashed above (positions, corner topology,
    # face starts, a point custom normal attribute): no corner normal can differ unseen
    if nl and domain != "POINT":
        cn = scratch[:12 * nl].view(np.float32)
        mesh.corner_normals.foreach_get("vector", cn)
        add("corner_normals", cn)
    return h.hexdigest(), hp.hexdigest()


def keys_fingerprint(mesh, reads=None) -> Optional[str]:
    """SHA-1 of every shape key's coordinates (None: the mesh has no shape keys)."""
    from .reads import MeshReads

    key = mesh.shape_keys
    if key is None:
        return None
    reads = reads if reads is not None else MeshReads(mesh)
    h, add = _hasher()
    for kb in key.key_blocks:
        add("key:" + kb.name, reads.key_coords(kb))
    return h.hexdigest()


def weights_fingerprint(mesh, reads=None) -> str:
    """SHA-1 of the vertex-group weights (the per-vertex walk: the expensive part)."""
    from .reads import MeshReads

    reads = reads if reads is not None else MeshReads(mesh)
    h, add = _hasher()
    vi, gi, wi = reads.vertex_groups()
    add("vg_v", vi)
    add("vg_g", gi)
    add("vg_w", wi)
    return h.hexdigest()


def mesh_content_fingerprint(obj, mesh, weights_matter: bool, reads=None) -> tuple:
    """(base, shape keys, weights) fingerprints of everything of ``mesh`` the importer turns into
    an asset (see the module doc); weights None where they do not deform the mesh."""
    wm = bool(weights_matter and len(obj.vertex_groups))
    return (base_fingerprint(mesh), keys_fingerprint(mesh, reads), weights_fingerprint(mesh, reads) if wm else None)


class MeshEntry(NamedTuple):
    structure: tuple        # importer.meshes.mesh_structure_signature
    content: Optional[tuple]  # mesh_content_fingerprint (None: not computed)
    asset: object           # MeshAsset
    mesh_name: str
    palette_bones: tuple    # bone names in palette order ((): not skinned)
    shared: tuple = ()      # the structure without the object's own names (linked duplicates)


class AssetCache:
    """Assets reused across imports of one session (see the module doc)."""

    def __init__(self, edits=None):
        self.meshes: Dict[str, MeshEntry] = {}
        self.clips: Dict[tuple, tuple] = {}     # key -> (signature, node keys, clip)
        self.known = KnownState()
        self.stats: Dict[str, float] = {}       # timings and counts of the last import
        self.edits = edits                      # EditSignals (edits.py) or None: every mesh counts as edited
        self._content_memo: Dict[tuple, tuple] = {}  # (mesh name, weights, keys) -> (fingerprint, fresh), per import
        self._reads: Dict[str, object] = {}     # mesh name -> MeshReads, per import
        self._held_index: Optional[dict] = None  # mesh name -> entries (``_held_content``), per import
        self._carried: Optional[tuple] = None   # (memo, reads) of a check its render's import goes on with
        self._moved: Dict[str, MeshEntry] = {}  # object name -> entry a check found moved (``moved_entry``), per render
        self.mesh_hits = 0
        self.mesh_misses = 0

    def clear(self) -> None:
        self.meshes.clear()
        self.clips.clear()
        self.known = KnownState()
        self._reads = {}
        self._content_memo = {}
        self._held_index = None
        self._carried = None
        self._moved = {}

    def reads_of(self, mesh):
        """The ``MeshReads`` of ``mesh`` for this import (shared by the fingerprint and the build)."""
        from .reads import reads_for

        return reads_for(self._reads, mesh)

    # ---------------------------------------------------------------- meshes
    def find_mesh(self, obj, structure: tuple, weights_matter: bool, verify: bool):
        """(entry or None, content fingerprint or None): the cached asset of ``obj`` when its
        structure and (with ``verify``) its content are unchanged."""
        entry = self.meshes.get(obj.name)
        content = None
        if verify:
            content = self.content_of(obj, weights_matter)
            # the entry (kept or rebuilt) holds this content: its edit signals are answered
            self._verified(obj)
        if entry is None or entry.structure != structure or (verify and entry.content != content):
            self.mesh_misses += 1
            return None, content
        self.mesh_hits += 1
        return entry, content

    def content_of(self, obj, weights_matter: bool, keys: bool = True) -> tuple:
        """The content fingerprint of ``obj``'s mesh (``mesh_content_fingerprint``), computed once
        per mesh datablock and import (linked duplicates share the data, so they share it).

        The base part (attributes, topology, corner normals) is read every time; the shape keys
        with ``keys`` (final renders' F12: an edit Blender was not told about still shows) or when
        the mesh was reported edited; the vertex-group weights only when the mesh, its object or
        its shape keys were reported edited since they were last verified (``EditSignals``), or
        when no verified asset of this mesh holds them.  Otherwise the held asset's parts stand."""
        mesh = obj.data
        wm = bool(weights_matter and len(obj.vertex_groups))
        memo_key = (mesh.name, wm, bool(keys))
        hit = self._content_memo.get(memo_key)
        if hit is not None:
            return hit
        t0 = time.perf_counter()
        reads = self.reads_of(mesh)
        prev = self._held_content(obj, mesh.name, wm)
        edited = self.edits is None or self.edits.edited(obj, mesh)
        if prev is None or edited:
            key_part = keys_fingerprint(mesh, reads)
            weight_part = weights_fingerprint(mesh, reads) if wm else None
            self.stats["weights_read"] = self.stats.get("weights_read", 0) + int(wm)
        else:
            key_part = keys_fingerprint(mesh, reads) if keys else prev[1]
            weight_part = prev[2]
        hit = (base_fingerprint(mesh), key_part, weight_part)
        self.stats["fingerprint_s"] = self.stats.get("fingerprint_s", 0.0) + time.perf_counter() - t0
        self._content_memo[memo_key] = hit
        return hit

    def _held_content(self, obj, mesh_name: str, wm: bool) -> Optional[tuple]:
        """The content of a held asset of this mesh datablock (the object's own first, else a
        linked duplicate's) whose weights part is there exactly when ``wm``; None if none."""
        def usable(e):
            return (e is not None and e.mesh_name == mesh_name and isinstance(e.content, tuple)
                    and len(e.content) == 3 and (e.content[2] is not None) == wm)

        own = self.meshes.get(obj.name)
        if own is not None and usable(own):
            return own.content
        if self._held_index is None:        # mesh name -> held entries, once per import / check
            self._held_index = {}
            for e in self.meshes.values():
                self._held_index.setdefault(e.mesh_name, []).append(e)
        return next((e.content for e in self._held_index.get(mesh_name, ()) if usable(e)), None)

    def _verified(self, obj) -> None:
        if self.edits is not None:
            self.edits.verified(obj, obj.data)

    def begin_import(self, stats: dict) -> None:
        """A new import: its timings go to ``stats``; fingerprints and reads are made anew, but
        those of a check this render's import goes on with (``carry_check``)."""
        self.stats = stats
        carried, self._carried = self._carried, None
        self._content_memo, self._reads = carried if carried is not None else ({}, {})
        self._held_index = None
        if self.edits is not None:
            self.edits.collect_pending()

    def holds_mesh(self, mesh_name: str) -> bool:
        """Whether an asset was made from the mesh datablock called ``mesh_name``."""
        return any(e.mesh_name == mesh_name for e in self.meshes.values())

    def edited_meshes(self) -> set:
        """Names of the held mesh datablocks whose object, mesh or shape keys were reported
        edited since they were verified (every held mesh when no signals are received)."""
        import bpy

        out = set()
        for obj_name, e in self.meshes.items():
            obj = bpy.data.objects.get(obj_name)
            if obj is None or obj.type != "MESH" or obj.data is None:
                out.add(e.mesh_name)
            elif self.edits is None or self.edits.edited(obj, obj.data):
                out.add(e.mesh_name)
        return out

    def mesh_content_changed(self, mesh_name: str, keys: bool = True) -> Optional[str]:
        """Why the assets made from the mesh datablock ``mesh_name`` no longer match its data
        (an object gone or renamed, its content fingerprint changed), or None when they all
        still do.  Fingerprints are computed once per datablock between ``begin_import`` /
        ``begin_check`` calls (linked duplicates share one); ``keys``: see ``content_of``."""
        import bpy

        from .meshes import mesh_fallbacks, weights_matter
        from .moved import movable

        users = []
        why = None
        for obj_name, e in self.meshes.items():
            if e.mesh_name != mesh_name:
                continue
            obj = bpy.data.objects.get(obj_name)
            if obj is None or obj.type != "MESH" or obj.data is None or obj.data.name != mesh_name:
                return f"object '{obj_name}' no longer uses mesh '{mesh_name}'"
            _reasons, am, arm = mesh_fallbacks(obj)
            content = self.content_of(obj, weights_matter(obj, am, arm), keys)
            if content != e.content:
                if moved_only(content, e.content) and movable(e.asset):
                    self._moved[obj_name] = e       # (its import may take the old asset on)
                why = f"mesh '{mesh_name}' edited"
            users.append(obj)
        if why is not None:
            return why
        for obj in users:
            self._verified(obj)
        return None

    def moved_entry(self, obj, structure: tuple, content: Optional[tuple]) -> Optional[MeshEntry]:
        """The entry a check of this render set aside for ``obj`` when its mesh differs from
        it only in where the vertices are (``moved_only``: every other attribute, the topology,
        shape keys and weights the same) and its structure is the same, or None.  The importer
        then makes the new asset from it (importer/moved.py) instead of reading the mesh anew."""
        e = self._moved.get(obj.name)
        if (e is None or content is None or e.structure != structure or e.mesh_name != obj.data.name
                or not moved_only(content, e.content)):
            return None
        return e

    def moved_primitives(self) -> list:
        """The primitives of the entries set aside for this render's import (``moved_entry``):
        their static GPU buffers are kept for it (session_sync.release_stale)."""
        return [p for e in self._moved.values() for p in getattr(e.asset, "primitives", ())]

    def end_import(self) -> None:
        """The import is over: the entries set aside for it are let go."""
        self._moved = {}

    def begin_check(self) -> None:
        """A new round of ``mesh_content_changed`` checks: fingerprints are read anew (their
        time goes to a new ``stats``)."""
        self.stats = {}
        self._content_memo = {}
        self._reads = {}
        self._held_index = None
        self._carried = None
        self._moved = {}
        if self.edits is not None:
            self.edits.collect_pending()

    def carry_check(self) -> None:
        """The import that follows in this same render goes on with the fingerprints and reads
        made since ``forget_fingerprints`` (an edited set's F12 hashed every mesh twice)."""
        self._carried = (self._content_memo, self._reads)

    def forget_fingerprints(self) -> None:
        """At the start of every render: no fingerprint or read made before is carried on."""
        self._content_memo = {}
        self._reads = {}
        self._carried = None
        self._moved = {}

    def find_shared(self, mesh_name: str, shared: tuple, content: Optional[tuple]):
        """An entry another object made from the same mesh datablock with the same shared
        structure and content (a linked duplicate), or None."""
        for e in self.meshes.values():
            if e.mesh_name == mesh_name and e.shared == shared and e.content is not None and e.content == content:
                return e
        return None

    def store_mesh(self, obj, structure: tuple, content: Optional[tuple], asset, palette_bones,
                   shared: tuple = ()) -> None:
        if content is None:
            content = self.content_of(obj, bool(palette_bones) or _key_groups(obj))
        self.meshes[obj.name] = MeshEntry(structure, content, asset, obj.data.name, tuple(palette_bones), shared)

    # ---------------------------------------------------------------- clips
    def find_clip(self, key: tuple, signature: tuple, node_keys_ok=None):
        hit = self.clips.get(key)
        if hit is None or hit[0] != signature or (node_keys_ok is not None and not node_keys_ok(hit[1])):
            return None
        return hit[2]

    def store_clip(self, key: tuple, signature: tuple, node_keys, clip) -> None:
        self.clips[key] = (signature, tuple(node_keys), clip)

    # ---------------------------------------------------------------- invalidation
    def invalidate_mesh(self, name: str) -> None:
        """Drop cached assets of the mesh datablock or mesh object called ``name``."""
        for k in [k for k, e in self.meshes.items() if k == name or e.mesh_name == name]:
            del self.meshes[k]

    def invalidate_object(self, name: str) -> None:
        self.meshes.pop(name, None)
        for k in [k for k in self.clips if k[1] == name]:
            del self.clips[k]

    def invalidate_action(self, name: str) -> None:
        for k in [k for k in self.clips if k[0] == name]:
            del self.clips[k]

    def invalidate_id(self, id_data) -> None:
        """Drop whatever was derived from ``id_data`` (a depsgraph update's ``update.id``,
        original or evaluated): Mesh, Object, Key (shape keys), Armature or Action."""
        import bpy

        idd = getattr(id_data, "original", id_data)
        if isinstance(idd, bpy.types.Mesh):
            self.invalidate_mesh(idd.name)
        elif isinstance(idd, bpy.types.Object):
            self.invalidate_object(idd.name)
            if idd.type == "MESH" and idd.data is not None:
                self.invalidate_mesh(idd.data.name)
        elif isinstance(idd, bpy.types.Key):
            user = getattr(idd, "user", None)
            if user is not None:
                self.invalidate_mesh(user.name)
        elif isinstance(idd, bpy.types.Action):
            self.invalidate_action(idd.name)
        elif isinstance(idd, bpy.types.Armature):
            for k in [k for k, e in self.meshes.items() if e.palette_bones]:
                del self.meshes[k]


def moved_only(content: Optional[tuple], held: Optional[tuple]) -> bool:
    """Whether the content fingerprint ``content`` differs from ``held`` in the vertex positions
    alone (``base_fingerprint``'s second part)."""
    return (isinstance(content, tuple) and isinstance(held, tuple) and len(content) == len(held) == 3
            and isinstance(content[0], tuple) and isinstance(held[0], tuple)
            and content[0][0] == held[0][0] and content[0] != held[0] and content[1:] == held[1:])


def _key_groups(obj) -> bool:
    key = getattr(obj.data, "shape_keys", None)
    return key is not None and any(kb.vertex_group for kb in key.key_blocks)


class KnownState:
    """What the last import saw, for telling structural edits from animation in depsgraph updates."""

    def __init__(self):
        self.objects: Dict[str, tuple] = {}    # object name -> object_signature
        self.keys: Dict[str, Optional[tuple]] = {}   # shape-key datablock name -> key_signature
        self.armatures: Dict[str, tuple] = {}  # armature datablock name -> armature_signature
        self.actions: Dict[str, tuple] = {}    # action name -> action_content_signature
        self.scene_objects: Optional[frozenset] = None

    def remember(self, asset, scene=None) -> None:
        import bpy

        from .actions import action_content_signature
        from .meshes import armature_signature, key_signature, object_signature

        self.__init__()
        for name in {nd.object_name for nd in asset.nodes}:
            ob = bpy.data.objects.get(name)
            if ob is None:
                continue
            self.objects[name] = object_signature(ob)
            if ob.type == "ARMATURE" and ob.data is not None:
                self.armatures[ob.data.name] = armature_signature(ob.data)
            key = getattr(getattr(ob, "data", None), "shape_keys", None)
            if key is not None:
                self.keys[key.name] = key_signature(key)
        self.scene_objects = scene_object_names(scene) if scene is not None else None
        for clip in asset.animations:
            action = bpy.data.actions.get(clip.action_name or clip.name)
            if action is not None and action.name not in self.actions:
                self.actions[action.name] = action_content_signature(action)

    def object_structure_changed(self, obj, memo: Optional[dict] = None) -> bool:
        """``memo``: one dict for all the objects of one check (``meshes.object_signature``)."""
        from .meshes import object_signature

        if obj.name not in self.objects:
            return False        # not imported (camera, light, a fallback-only type); new objects
                                # arrive with a collection update
        return self.objects[obj.name] != object_signature(obj, memo)

    def key_layout_changed(self, key) -> bool:
        from .meshes import key_signature

        return self.keys.get(key.name) != key_signature(key)

    def armature_changed(self, armature) -> bool:
        from .meshes import armature_signature

        return self.armatures.get(armature.name) != armature_signature(armature)

    def action_changed(self, action) -> bool:
        from .actions import action_content_signature

        return self.actions.get(action.name) != action_content_signature(action)

    def objects_changed(self, scene) -> bool:
        return self.scene_objects != scene_object_names(scene)


def scene_object_names(scene) -> frozenset:
    scene = getattr(scene, "original", scene)
    return frozenset(ob.name for ob in scene.objects) if scene is not None else frozenset()
