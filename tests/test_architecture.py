"""The engine's architecture, read from the source (no Blender needed): every piece of state has an
owner, and no layer imports a layer above it or forms an import circle (issues 24 and 39;
docs/architecture.md).

* **State**: a module under ``engine/`` (and ``operators/``, ``panels/``) holds no mutable state:
  no ``global`` statement, no module-level binding of a dict / list / set (or a comprehension) or
  of a call that makes an object (a cache, a registry, a flag holder), no class attribute written
  from outside the class body (a counter shared by every session).  Constant tables in UPPER_CASE
  (a dict of enum codes, a numpy constant) are allowed as long as nothing anywhere writes into
  them.  Blender's registration lists are allowed by name below, each with why.
* **Layers** (bottom to top): the bpy-free core (assets, animation, runtime without the GPU
  backend, world, and the pure helpers) imports neither ``bpy`` / ``gpu`` nor any engine module
  outside the core; the GPU side (passes, the GPU backend, gpu_util) imports no Blender-side
  engine module; the GPU backend and gpu_util do not import the passes above them; the **host**
  (``engine/blender``: session, sync, importer, sources, bakes, render engine, add-on state)
  imports no **feature** (``engine/features/<name>``), except that the two owners of state, the
  session (per session) and the add-on state (per add-on), make each feature's objects from the
  feature's ``driver`` module: the host calls a feature only through those objects
  (``session.preview``, ``session.springs``, ``session.materials``, ``addon.previews``), hooks
  the session owns, never a module-level registry.  Features may import the host and each
  other (no circle); no engine module imports the UI (operators, panels); and the import graph
  (every import, also those inside functions) has no circle.
* **The session keeps the frame's shared data only**: ``StylizedSession.__init__`` (with the
  methods it calls) binds at most ``SESSION_ATTRIBUTES`` attributes, and no module outside
  ``engine/blender`` (the extension, its tests and tools) reads or writes a private field or
  method of the session (``session._x``).
* **The tests share helpers through tests/support/ only**: no file under ``tests/`` or ``tools/``
  imports a test module (``test_*``: ``import test_x``, ``from tests.test_x import ...``,
  ``importlib.import_module("test_x")``) or a ``test_*`` name (pytest would collect it twice).

``KNOWN`` lists what the refactor has not reached yet, each with its owner.  The test fails on
any violation not listed and on any listed one that is gone (so the list only shrinks).
"""
from __future__ import annotations

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "operators", "panels")
BLENDER_MODULES = ("bpy", "gpu", "gpu_extras", "bmesh", "mathutils", "bl_math", "idprop", "bpy_extras")

# Blender's registration lists: allowed module-level state, each with its reason.
REGISTRATION = {
    ("operators", "_modules"): "the operator modules register() walks (filled at import, never after)",
    ("panels", "_modules"): "the panel modules register() walks (filled at import, never after)",
    ("engine.features.preview.control", "_handlers"): "the (bpy.app.handlers list, function) pairs appended while the add-on "
                                     "is enabled, so unregister() removes exactly those",
    ("engine.blender.render_engine", "StylizedRenderEngine.addon"):
        "the add-on's one owner of what outlives a frame (engine/blender/addon_state.py: the F12 session keeper, "
        "the preview states and bakes, the last viewport session), made by register() and deleted by "
        "unregister(): the registered engine class is the add-on's registration object, which Blender "
        "holds while the add-on is enabled",
    ("engine.features.preview.properties", "_CLIP_ITEMS"): "an EnumProperty items callback's strings: Blender needs Python "
                                              "to keep them referenced (bpy.props.EnumProperty docs)",
}

# Calls whose result is immutable (a module-level binding of one is a constant, not state).
IMMUTABLE_CALLS = {"frozenset", "tuple", "str", "int", "float", "bool", "bytes", "range", "namedtuple",
                   "NamedTuple", "TypeVar", "compile", "Struct", "MappingProxyType", "object", "getLogger",
                   "dtype", "Path", "join", "dirname", "abspath", "float32", "float64", "int32", "uint32",
                   # bpy.utils.register_classes_factory: two functions over the module's class tuple
                   "register_classes_factory"}
# Methods that change the object they are called on.
MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "add", "discard",
            "popitem", "sort", "reverse", "fill", "put", "itemset", "resize"}

# Not reached yet: violation -> who owns the file / why it remains.  Only shrinks.
KNOWN: dict = {}


# ------------------------------------------------------------------------------------------------
# reading the source
# ------------------------------------------------------------------------------------------------

def _modules() -> dict:
    out = {}
    for pkg in PACKAGES:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


def _is_constant_name(name: str) -> bool:
    core = name.lstrip("_")
    return bool(core) and core.upper() == core and any(c.isalpha() for c in core)


def _callee(call: ast.Call) -> str:
    f = call.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return ""


def _is_numpy_call(call: ast.Call) -> bool:
    f = call.func
    while isinstance(f, ast.Attribute):
        f = f.value
        if isinstance(f, ast.Name) and f.id in ("np", "numpy"):
            return True
        if isinstance(f, ast.Call):        # np.arange(4).reshape(...): the chain's root
            return _is_numpy_call(f)
    return False


def _top_statements(body):
    for s in body:
        if isinstance(s, (ast.If, ast.Try)):
            yield from _top_statements(s.body)
            yield from _top_statements(s.orelse)
            for h in getattr(s, "handlers", ()):
                yield from _top_statements(h.body)
            yield from _top_statements(getattr(s, "finalbody", ()))
        else:
            yield s


def _targets(stmt):
    if isinstance(stmt, ast.Assign):
        for t in stmt.targets:
            yield from (t.elts if isinstance(t, (ast.Tuple, ast.List)) else (t,))
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        yield stmt.target


def _root_name(node):
    """``X`` of ``X[...]`` / ``X.attr`` / ``X[...][...]``; (name, via-attribute-of) pairs."""
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return node.value.id, node.attr      # alias.NAME or NAME.attr
        node = node.value
    if isinstance(node, ast.Name):
        return node.id, None
    return None, None


def _writes(tree):
    """Every (base, attr) written into: ``base[...] =``, ``base.attr = ``, ``del base[...]``,
    ``base.mutator(...)``, ``base += ...`` (base / attr as written in the source)."""
    out = []
    for n in ast.walk(tree):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            for t in (n.targets if isinstance(n, (ast.Assign, ast.Delete)) else [n.target]):
                if isinstance(t, (ast.Subscript, ast.Attribute)):
                    out.append((_root_name(t), n.lineno))
                elif isinstance(t, ast.Name) and isinstance(n, ast.AugAssign):
                    out.append(((t.id, None), n.lineno))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in MUTATORS:
            out.append((_root_name(n.func.value) if not isinstance(n.func.value, ast.Name)
                        else (n.func.value.id, None), n.lineno))
    return out


def state_violations(modules: dict) -> set:
    trees = {m: ast.parse(p.read_text(), str(p)) for m, p in modules.items()}
    found = set()
    constants = {}            # (module, name) -> line of a constant table (mutation-checked)
    aliases = {}              # module -> {alias: imported module}
    for mod, tree in trees.items():
        for n in ast.walk(tree):
            if isinstance(n, ast.Global):
                for name in n.names:
                    found.add(f"{mod}: global {name}")
        for s in _top_statements(tree.body):
            if not isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)) or s.value is None:
                continue
            v = s.value
            container = isinstance(v, (ast.Dict, ast.List, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp))
            call = isinstance(v, ast.Call) and _callee(v) not in IMMUTABLE_CALLS
            if not (container or call):
                continue
            for t in _targets(s):
                if not isinstance(t, ast.Name) or t.id == "__all__" or (mod, t.id) in REGISTRATION:
                    continue
                made_by_function = isinstance(v, ast.Call) and call and _callee(v).lstrip("_")[:1].islower()     # np.zeros(...), _table(): a value
                if _is_constant_name(t.id) and (container or made_by_function):
                    constants[(mod, t.id)] = s.lineno
                else:
                    found.add(f"{mod}: module-level {t.id} = {ast.unparse(v)[:40]}")
        for n in ast.walk(tree):   # @lru_cache / @functools.cache: a process-wide memo
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for d in n.decorator_list:
                    dn = _callee(d) if isinstance(d, ast.Call) else (d.attr if isinstance(d, ast.Attribute)
                                                                      else getattr(d, "id", ""))
                    if dn in ("lru_cache", "cache"):
                        found.add(f"{mod}: {n.name} memoised by @{dn}")
        classes = {c.name for c in ast.walk(tree) if isinstance(c, ast.ClassDef)}
        for (name, attr), _line in _writes(tree):
            if ((name in classes or name == "cls") and attr != "__annotations__"   # (RNA property declarations)
                    and (mod, f"{name}.{attr}") not in REGISTRATION):
                found.add(f"{mod}: class attribute {name}.{attr} written")
        for c in ast.walk(tree):   # class-body containers / objects: shared by every instance
            if not isinstance(c, ast.ClassDef):
                continue
            for st in c.body:
                if not isinstance(st, ast.Assign):
                    continue
                v = st.value
                shared = (isinstance(v, (ast.Dict, ast.List, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp))
                          or (isinstance(v, ast.Call) and _callee(v) not in IMMUTABLE_CALLS))
                for t in st.targets:
                    # (bl_options, COMPAT_ENGINES: what Blender reads from a registered class)
                    if shared and isinstance(t, ast.Name) and not t.id.startswith("bl_") \
                            and t.id != "COMPAT_ENGINES" and (mod, f"{c.name}.{t.id}") not in REGISTRATION:
                        found.add(f"{mod}: class attribute {c.name}.{t.id} = {ast.unparse(v)[:40]} shared")
        for n in ast.walk(tree):   # type(self).attr = ...
            if isinstance(n, (ast.Assign, ast.AugAssign)):
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                    if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Call)
                            and _callee(t.value) == "type"):
                        found.add(f"{mod}: class attribute type(...).{t.attr} written")
        amap = {}
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom):
                base = _resolve_from(mod, modules[mod].name == "__init__.py", n)
                for a in n.names:
                    amap[a.asname or a.name] = base + "." + a.name if base else a.name
                    amap.setdefault("__from__" + (a.asname or a.name), base)
        aliases[mod] = amap
    for mod, tree in trees.items():
        for (name, attr), line in _writes(tree):
            if name is None or (mod, name) in REGISTRATION:
                continue
            if attr is None and (mod, name) in constants:
                found.add(f"{mod}: constant {name} written (line {line})")
            elif attr is not None and (aliases[mod].get(name), attr) in constants:
                found.add(f"{aliases[mod][name]}: constant {attr} written from {mod} (line {line})")
            elif attr is not None and (mod, name) in constants and isinstance(attr, str):
                pass    # NAME.attr read-modify of a constant's element: caught as NAME[...] above
    return found


# ------------------------------------------------------------------------------------------------
# imports
# ------------------------------------------------------------------------------------------------

def _resolve_from(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".")
    if not is_pkg:
        base = base[:-1]
    if node.level > 1:
        base = base[:len(base) - (node.level - 1)]
    return ".".join(base) + ("." + node.module if node.module else "")


def import_graph(modules: dict) -> dict:
    """module -> {imported module (ours, or a Blender module's top name)} over every import."""
    graph = {}
    for mod, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        deps = set()
        for n in ast.walk(tree):
            if isinstance(n, ast.Import):
                for a in n.names:
                    deps.add(a.name)
            elif isinstance(n, ast.ImportFrom):
                base = _resolve_from(mod, path.name == "__init__.py", n)
                subs = [base + "." + a.name for a in n.names if base + "." + a.name in modules]
                deps.update(subs)
                if len(subs) < len(n.names):
                    deps.add(base)
        out = set()
        for d in deps:
            top = d.split(".")[0]
            if top in BLENDER_MODULES:
                out.add(top)
                continue
            while d and d not in modules and "." in d:
                d = d.rsplit(".", 1)[0]
            if d in modules and d != mod:
                out.add(d)
        graph[mod] = out
    return graph


def _under(mod: str, *prefixes) -> bool:
    return any(mod == p or mod.startswith(p + ".") for p in prefixes)


def layer(mod: str) -> str:
    """The layer of a module, read from its folder (README: How it works)."""
    if _under(mod, "operators", "panels"):
        return "ui"
    if _under(mod, "engine.core") or mod == "engine":
        return "core"
    if _under(mod, "engine.gpu.passes"):
        return "gpu"
    if _under(mod, "engine.gpu"):
        return "gpu-base"
    if _under(mod, "engine.features"):
        return "feature"
    return "host"         # the Blender side's host: engine.blender


# the host's two owners of state, which make each feature's objects from its driver module
DRIVER_OWNERS = {"engine.blender.session", "engine.blender.addon_state"}


def _is_driver(mod: str) -> bool:
    parts = mod.split(".")
    return len(parts) == 4 and parts[:2] == ["engine", "features"] and parts[3] == "driver"


# what each layer may import (besides itself): ours by layer, Blender's modules by name
ALLOWED = {
    "core": ({"core"}, set()),
    "gpu-base": ({"core", "gpu-base"}, {"gpu", "gpu_extras", "bpy"}),
    "gpu": ({"core", "gpu-base", "gpu"}, {"gpu", "gpu_extras", "bpy"}),
    "host": ({"core", "gpu-base", "gpu", "host"}, set(BLENDER_MODULES)),
    "feature": ({"core", "gpu-base", "gpu", "host", "feature"}, set(BLENDER_MODULES)),
    "ui": ({"core", "gpu-base", "gpu", "host", "feature", "ui"}, set(BLENDER_MODULES)),
}


def layer_violations(graph: dict) -> set:
    found = set()
    for mod, deps in graph.items():
        mine = layer(mod)
        ours, blender = ALLOWED[mine]
        for d in deps:
            if d in BLENDER_MODULES:
                if d not in blender:
                    found.add(f"{mod} ({mine}) imports {d}")
            elif d != "engine" and layer(d) not in ours and not (mod in DRIVER_OWNERS and _is_driver(d)):
                found.add(f"{mod} ({mine}) imports {d} ({layer(d)})")
    return found


def import_circles(graph: dict) -> set:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on, out = {}, {}, [], set(), set()
    counter = [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.add("import circle: " + " <-> ".join(sorted(comp)))
    return out


def violations() -> set:
    modules = _modules()
    graph = import_graph(modules)
    return state_violations(modules) | layer_violations(graph) | import_circles(graph)


# ------------------------------------------------------------------------------------------------
# the session
# ------------------------------------------------------------------------------------------------

SESSION_FILE = ROOT / "engine" / "blender" / "session.py"
SESSION_CLASS = "StylizedSession"
SESSION_ATTRIBUTES = 25          # at most, bound by __init__ and the methods it calls
# every Python file of the repository but the host's own (engine/blender) and the virtual environments
SCANNED = ("engine", "operators", "panels", "tests", "tools", "demo")
_SESSION_NAME = re.compile(r"(^|[._])(session|sess)$")


def _self_targets(fn) -> set:
    """The attributes ``fn`` binds on ``self`` (``self.x = ...``, ``self.x: T = ...``, ``self.x += ...``)."""
    out = set()
    for n in ast.walk(fn):
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else (t,)):
                    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
                        out.add(e.attr)
    return out


def session_members(path=SESSION_FILE, cls: str = SESSION_CLASS):
    """(attributes bound by ``__init__`` and the methods it calls on ``self``, every private
    member name of the class: methods and attributes starting with one underscore)."""
    tree = ast.parse(pathlib.Path(path).read_text(), str(path))
    c = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    methods = {f.name: f for f in c.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    bound, seen, todo = set(), set(), ["__init__"]
    while todo:
        name = todo.pop()
        if name in seen or name not in methods:
            continue
        seen.add(name)
        bound |= _self_targets(methods[name])
        todo += [n.func.attr for n in ast.walk(methods[name]) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
                 and n.func.value.id == "self"]
    members = set(methods) | {a for f in methods.values() for a in _self_targets(f)}
    private = {m for m in members if m.startswith("_") and not m.startswith("__")}
    return bound, private


def _scanned_files() -> dict:
    out = {p.name: p for p in sorted(ROOT.glob("*.py"))}
    for top in SCANNED:
        for p in sorted((ROOT / top).rglob("*.py")):
            rel = p.relative_to(ROOT)
            if rel.parts[:2] != ("engine", "blender"):
                out[str(rel)] = p
    return out


def private_session_uses(files: dict, private: set) -> set:
    """``file:line: expression`` for every read or write of a private session member outside the
    host: ``X._name`` where ``_name`` is a private member of the session, or where ``X`` names a
    session (``session``, ``self.session``, ``view_session``, ``sess``); ``self._x`` / ``cls._x``
    are a class's own members."""
    found = set()
    for name, path in files.items():
        tree = ast.parse(pathlib.Path(path).read_text(), str(path))
        for n in ast.walk(tree):
            if not isinstance(n, ast.Attribute) or not n.attr.startswith("_") or n.attr.startswith("__"):
                continue
            base = ast.unparse(n.value)
            if base in ("self", "cls"):
                continue
            if n.attr in private or _SESSION_NAME.search(base):
                found.add(f"{name}:{n.lineno}: {base}.{n.attr}")
    return found


# ------------------------------------------------------------------------------------------------
# the tests' helpers
# ------------------------------------------------------------------------------------------------

def imports_of_test_modules(files: dict) -> set:
    """``file:line: module`` for every import of a ``test_*`` module or name in ``files`` (name -> path),
    relative ones and ``importlib.import_module`` / ``__import__`` of a literal name too."""
    found = set()
    for name, path in files.items():
        tree = ast.parse(pathlib.Path(path).read_text(), str(path))
        for n in ast.walk(tree):
            if isinstance(n, ast.Import):
                mods = [a.name for a in n.names]
            elif isinstance(n, ast.ImportFrom):
                base = "." * n.level + (n.module or "")
                mods = [f"{base}.{a.name}" if base.strip(".") else base + a.name for a in n.names]
            elif (isinstance(n, ast.Call) and _callee(n) in ("import_module", "__import__") and n.args
                  and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str)):
                mods = [n.args[0].value]
            else:
                continue
            found |= {f"{name}:{n.lineno}: {m}" for m in mods if any(s.startswith("test_") for s in m.split("."))}
    return found


# ------------------------------------------------------------------------------------------------
# the tests
# ------------------------------------------------------------------------------------------------

def test_no_module_state_no_upward_imports_no_circles():
    found = violations()
    new = sorted(found - set(KNOWN))
    gone = sorted(set(KNOWN) - found)
    assert not new, "new module-level state / upward imports / import circles:\n  " + "\n  ".join(new)
    assert not gone, "fixed (remove from KNOWN):\n  " + "\n  ".join(gone)


def test_the_session_keeps_the_frames_shared_data_only():
    """At most SESSION_ATTRIBUTES attributes (issue 39: there were 44, the preview's, the syncs'
    and the materials' among them); the features keep theirs behind their drivers."""
    bound, _private = session_members()
    assert len(bound) <= SESSION_ATTRIBUTES, f"{len(bound)} attributes: {sorted(bound)}"


def test_no_module_outside_the_host_touches_a_private_session_member():
    """The features, the UI, the tests and the tools use the session's public interface
    (``preview/hold.py`` wrote ``session._hold``, tests called ``s._ensure_runtime``)."""
    _bound, private = session_members()
    found = sorted(private_session_uses(_scanned_files(), private))
    assert not found, "private session members used outside engine/blender:\n  " + "\n  ".join(found)


def test_the_session_checks_catch_what_they_forbid(tmp_path):
    """Negative controls: a session binding too many attributes, and a feature writing a private
    session field, are found."""
    sess = tmp_path / "session.py"
    sess.write_text("class StylizedSession:\n    def __init__(self):\n        self.a = 1\n        self._reset()\n"
                    "    def _reset(self):\n        self._hold, self.b = None, None\n"
                    "    def other(self):\n        self.c = 2\n")
    bound, private = session_members(sess)
    assert bound == {"a", "_hold", "b"} and private == {"_reset", "_hold"}
    feat = tmp_path / "hold.py"
    feat.write_text("def start(session, driver):\n    session._hold = 1\n    driver.session._cache = 2\n"
                    "    x = driver._own\n    return x\n")
    found = private_session_uses({"hold.py": feat}, private)
    assert found == {"hold.py:2: session._hold", "hold.py:3: driver.session._cache"}, found


def test_the_layer_check_allows_the_owners_drivers_only(tmp_path):
    """The host may import a feature's driver from the session or the add-on state, nothing else."""
    a, b, c, d = (tmp_path / f"{n}.py" for n in "abcd")
    a.write_text("from ..features.preview.driver import PreviewDriver\n")
    b.write_text("def f():\n    from ...features.vrm import expressions\n")
    c.write_text("from ..features.preview import state\n")
    d.write_text("")
    mods = {"engine.blender.session": a, "engine.blender.sources.timeline": b, "engine.blender.addon_state": c,
            "engine.features.preview.driver": d, "engine.features.preview.state": d,
            "engine.features.vrm.expressions": d}
    lv = layer_violations(import_graph(mods))
    assert lv == {"engine.blender.sources.timeline (host) imports engine.features.vrm.expressions (feature)",
                  "engine.blender.addon_state (host) imports engine.features.preview.state (feature)"}, lv


@pytest.mark.parametrize("source, expected", [
    ("_cache = {}\n", "module-level _cache"),
    ("def f():\n    global _x\n    _x = 1\n", "global _x"),
    ("class A:\n    epoch = 0\n    def bump(self):\n        A.epoch += 1\n", "class attribute A.epoch"),
    ("TABLE = {'a': 1}\ndef f():\n    TABLE['b'] = 2\n", "constant TABLE written"),
    ("BAKES = BakeCache()\n", "module-level BAKES"),
    ("import itertools\nclass S:\n    _ids = itertools.count(1)\n", "class attribute S._ids"),
    ("import functools\n@functools.lru_cache(maxsize=None)\ndef f(x):\n    return x\n", "f memoised by @lru_cache"),
])
def test_the_checks_catch_each_kind(tmp_path, source, expected):
    """Each rule fires on a minimal module (negative controls for the scanner itself)."""
    p = tmp_path / "m.py"
    p.write_text(source)
    found = state_violations({"engine.m": p})
    assert any(expected in f for f in found), found


def test_the_import_checks_catch_circles_and_upward_imports(tmp_path):
    a, b, c = tmp_path / "a.py", tmp_path / "b.py", tmp_path / "c.py"
    a.write_text("from . import b\n")
    b.write_text("def f():\n    from . import a\n")
    c.write_text("import bpy\nfrom ...blender.session import StylizedSession\n")
    mods = {"engine.core.animation.a": a, "engine.core.animation.b": b, "engine.core.animation.c": c,
            "engine.blender.session": tmp_path / "a.py"}
    graph = import_graph(mods)
    assert import_circles(graph) == {"import circle: engine.core.animation.a <-> engine.core.animation.b"}
    lv = layer_violations(graph)
    assert "engine.core.animation.c (core) imports bpy" in lv
    assert "engine.core.animation.c (core) imports engine.blender.session (host)" in lv


def test_no_test_module_is_imported():
    """Issue 39: ~30 test files imported helpers from other test files (``from test_viewport_ui import
    Ctx``, ``import test_bake as TB``); shared helpers live in tests/support/."""
    files = {k: p for k, p in _scanned_files().items() if k.split("/")[0] in ("tests", "tools")}
    assert len(files) > 100, sorted(files)      # the scan sees the suite
    found = sorted(imports_of_test_modules(files))
    assert not found, "test modules imported (move the helper to tests/support/):\n  " + "\n  ".join(found)


def test_the_test_import_check_catches_each_form(tmp_path):
    """Negative control: every way of importing a test module is found, support and conftest are not."""
    bad = tmp_path / "bad.py"
    bad.write_text("import test_bake as TB\nfrom test_viewport_ui import Ctx\nimport tests.test_x\n"
                   "def f():\n    from tests import test_y\n    from .test_z import g\n"
                   "    import importlib\n    importlib.import_module('test_w')\n")
    ok = tmp_path / "ok.py"
    ok.write_text("import conftest as C\nfrom support import panels\nfrom support.viewport import draw\n")
    found = imports_of_test_modules({"bad.py": bad, "ok.py": ok})
    assert found == {"bad.py:1: test_bake", "bad.py:2: test_viewport_ui.Ctx", "bad.py:3: tests.test_x",
                     "bad.py:5: tests.test_y", "bad.py:6: .test_z.g", "bad.py:8: test_w"}, found
