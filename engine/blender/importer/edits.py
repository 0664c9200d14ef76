"""EditSignals: which original datablocks Blender reported edited since the cache last verified them.

Reading a mesh's vertex-group weights is a per-vertex Python walk (Blender has no bulk accessor),
so the content check reads them, and the shape keys where the caller allows, only for meshes
that Blender reported edited since their asset was last verified.  Every API that changes
weights or shape-key data through Blender's data API tags the object, its mesh or its shape keys
(``VertexGroup.add/remove``, ``VertexGroupElement.weight``, weight paint, edit mode,
``Mesh.update()``, ``bmesh.to_mesh``, undo); such a tag reaches us two ways:

* **evaluated:** a ``depsgraph_update_post`` handler (registered by ``start``, removed by
  ``stop`` or when this object is garbage-collected) notes the Object / Mesh / Key geometry
  updates of every depsgraph evaluation: the UI's, a script's ``view_layer.update()`` and the
  evaluation ``bpy.ops.render.render`` makes before it renders;
* **pending:** tags not evaluated yet (a script's edit right before a render, or between two
  frames of an animation render: the view layer's depsgraph is not evaluated during one) are read
  from the view layers' depsgraphs (``Depsgraph.updates`` before their evaluation), on the main
  thread only (background renders run there; a UI render's thread does not touch them).

No module-level state: the handler holds a weak reference to its ``EditSignals``.  When the
handler is missing (a file load cleared the handlers, or ``start`` was never called) every mesh
counts as edited, so the check never trusts a signal it did not receive."""
from __future__ import annotations

import threading
import weakref
from typing import Iterable, Set


def _remove_handler(fn) -> None:
    import bpy

    handlers = bpy.app.handlers.depsgraph_update_post
    while fn in handlers:
        handlers.remove(fn)


class EditSignals:
    """Names of Objects, Meshes and shape-key datablocks (Key) reported edited and not yet
    verified (see the module doc)."""

    def __init__(self):
        self.objects: Set[str] = set()
        self.meshes: Set[str] = set()
        self.keys: Set[str] = set()
        self.received = 0            # updates noted (tests and the Stats read it)
        self.pending_read = False    # whether the last collect_pending could read the view layers
        self.lost = False            # the handler was missing for a while: nothing is trusted
        self._handler = None
        self._finalizer = None

    # ------------------------------------------------------------------ handler
    def start(self) -> None:
        """Register the ``depsgraph_update_post`` handler (idempotent)."""
        import bpy

        if self.listening:
            return
        if self._handler is not None:
            # the handler went missing (a file load clears handlers): what happened meanwhile
            # is unknown, so every mesh counts as edited until all were read again (``trusted``)
            self.lost = True
            self.stop()
        ref = weakref.ref(self)

        def stylized_edit_signals(scene, depsgraph=None):
            me = ref()
            if me is None:
                _remove_handler(stylized_edit_signals)
                return
            if depsgraph is not None:
                me.note(depsgraph.updates)

        self._handler = stylized_edit_signals
        bpy.app.handlers.depsgraph_update_post.append(stylized_edit_signals)
        self._finalizer = weakref.finalize(self, _remove_handler, stylized_edit_signals)

    def stop(self) -> None:
        """Remove the handler (the session is freed)."""
        if self._finalizer is not None:
            self._finalizer()
        self._finalizer = None
        self._handler = None

    @property
    def listening(self) -> bool:
        """Whether the handler is registered (a file load removes non-persistent handlers)."""
        if self._handler is None:
            return False
        import bpy

        return self._handler in bpy.app.handlers.depsgraph_update_post

    # ------------------------------------------------------------------ signals
    def note(self, updates: Iterable) -> None:
        """Note the geometry updates of Objects, Meshes and Keys among depsgraph ``updates``."""
        import bpy

        for u in updates:
            try:
                idb = getattr(u.id, "original", u.id)
                name = idb.name
                geometry = u.is_updated_geometry
            except ReferenceError:
                continue
            # an Object's transform or shading update leaves its weights alone; any update of a
            # Mesh or Key counts (``foreach_set`` tags them without the geometry flag)
            if isinstance(idb, bpy.types.Object):
                if not geometry:
                    continue
                self.objects.add(name)
            elif isinstance(idb, bpy.types.Mesh):
                self.meshes.add(name)
            elif isinstance(idb, bpy.types.Key):
                self.keys.add(name)
            else:
                continue
            self.received += 1

    def collect_pending(self) -> bool:
        """Note the tags the view layers' depsgraphs hold but have not evaluated yet.  Only on
        the main thread (False elsewhere: nothing read)."""
        self.pending_read = threading.current_thread() is threading.main_thread()
        if not self.pending_read:
            return False
        import bpy

        for scene in bpy.data.scenes:
            for vl in scene.view_layers:
                dg = getattr(vl, "depsgraph", None)
                if dg is not None:
                    self.note(dg.updates)
        return True

    def edited(self, obj, mesh) -> bool:
        """Whether ``obj``, its ``mesh`` or the mesh's shape keys were reported edited since
        ``verified`` (always True while the handler is not registered)."""
        if self.lost or not self.listening:
            return True
        key = getattr(mesh, "shape_keys", None)
        return (obj.name in self.objects or mesh.name in self.meshes
                or (key is not None and key.name in self.keys))

    def verified(self, obj, mesh) -> None:
        """``obj`` and ``mesh`` were read anew: forget their signals."""
        self.objects.discard(obj.name)
        self.meshes.discard(mesh.name)
        key = getattr(mesh, "shape_keys", None)
        if key is not None:
            self.keys.discard(key.name)

    def trusted(self) -> None:
        """Every held mesh was just verified (a whole import, or an F12 check that found nothing
        changed): signals count again after a loss, and the names noted so far are answered
        (also those of objects no asset is made from, so the sets do not grow)."""
        self.lost = False
        self.clear()

    def clear(self) -> None:
        self.objects.clear()
        self.meshes.clear()
        self.keys.clear()
