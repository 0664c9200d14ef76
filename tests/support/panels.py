"""Panels drawn headless (background Blender has no UI layouts): ``draw_panel(cls, Ctx(scene,
obj))`` draws a panel into a ``Recorder`` that keeps every layout call (test_viewport_ui and the
panels of the preview, the passes, the stats); ``draw_logged(panel, context)`` draws into a
``FakeLayout`` that checks each property exists and logs (kind, name) pairs (test_materials);
``add_shape_keys`` gives an object the shape keys the expression panels list."""
from __future__ import annotations


class OpProps:
    def __init__(self, idname):
        self.idname = idname


class Recorder:
    """A fake UILayout: every call is recorded (kind, args, kwargs) in a shared list."""

    def __init__(self, log=None, path=()):
        self.log = [] if log is None else log
        self.path = path
        self.active = True
        self.enabled = True
        self.use_property_split = False
        self.use_property_decorate = False

    def _rec(self, kind, *args, **kw):
        self.log.append((kind, args, kw))

    def _sub(self, kind, *args, **kw):
        self._rec(kind, *args, **kw)
        return Recorder(self.log, self.path + (kind,))

    def row(self, *a, **kw):
        return self._sub("row", *a, **kw)

    def column(self, *a, **kw):
        return self._sub("column", *a, **kw)

    def box(self, *a, **kw):
        return self._sub("box", *a, **kw)

    def split(self, *a, **kw):
        return self._sub("split", *a, **kw)

    def panel(self, idname, default_closed=False):
        self._rec("panel", idname, default_closed=default_closed)
        return Recorder(self.log, self.path + ("header",)), Recorder(self.log, self.path + ("body",))

    def label(self, text="", **kw):
        self._rec("label", text=text, **kw)

    def prop(self, data, prop, **kw):
        self._rec("prop", data, prop, **kw)

    def operator(self, idname, **kw):
        self._rec("operator", idname, **kw)
        return OpProps(idname)

    def separator(self, *a, **kw):
        self._rec("separator")

    def labels(self):
        return [kw["text"] for k, a, kw in self.log if k == "label"]

    def props(self):
        return [(a[0], a[1], kw) for k, a, kw in self.log if k == "prop"]

    def operators(self):
        return [a[0] for k, a, kw in self.log if k == "operator"]


class Ctx:
    def __init__(self, scene, obj, engine="STYLIZED"):
        self.scene = scene
        self.active_object = obj
        self.object = obj
        self.engine = engine
        self.view_layer = scene.view_layers[0] if scene is not None else None


def draw_panel(cls, ctx):
    class Self:
        layout = Recorder()
    s = Self()
    cls.draw(s, ctx)
    return s.layout


def add_shape_keys(ob, spec):
    ob.shape_key_add(name="Basis", from_mix=False)
    out = {}
    for name, lo, hi in spec:
        kb = ob.shape_key_add(name=name, from_mix=False)
        kb.slider_min, kb.slider_max = lo, hi
        kb.value = 0.0
        out[name] = kb
    return out


class FakeLayout:
    """Records what a panel draws (background Blender has no UI layouts)."""

    def __init__(self, log):
        self.log = log
        self.active = True
        self.use_property_split = False
        self.use_property_decorate = True

    def _child(self, *args, **kw):
        return FakeLayout(self.log)

    row = column = box = split = _child

    def prop(self, data, attr, **kw):
        assert attr in data.bl_rna.properties, attr
        self.log.append(("prop", attr))

    def label(self, text="", **kw):
        self.log.append(("label", text))

    def operator(self, idname, **kw):
        self.log.append(("operator", idname))

        class _Op:
            pass
        return _Op()

    def template_ID(self, data, attr, **kw):
        assert attr in data.bl_rna.properties, attr
        self.log.append(("template_ID", attr))


def draw_logged(panel_cls, context, header=False):
    from types import SimpleNamespace

    log = []
    self = SimpleNamespace(layout=FakeLayout(log))
    if header:
        panel_cls.draw_header(self, context)
    else:
        for name in ("draw_props",):
            if hasattr(panel_cls, name):
                self.draw_props = lambda layout, props, _c=panel_cls: _c.draw_props(self, layout, props)
        panel_cls.draw(self, context)
    return log
