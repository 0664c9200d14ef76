"""What the GUI journeys (tools/gui/journeys.py) and the GUI benchmark (tools/gui/bench.py) stand on,
inside a real Blender window under Xvfb (tools/gui/session.sh).

Real input: every mouse and keyboard event goes through the X server with ``xdotool``, one event
per timer tick (a press and its release sent in one callback are lost: Blender reads them in one
event-loop pass). A journey is a generator: it yields the seconds to wait before it goes on; the
``Runner`` steps it from a ``bpy.app.timers`` callback, so Blender draws and handles events between
steps exactly as it does for a user.

Screenshots: ImageMagick's ``import -window root`` (Blender's own screenshot is black under Xvfb),
read back as numpy arrays (top-down rows, RGB uint8).

Finding a button: the sidebar has no API for where a button is drawn, so ``locate`` moves the
pointer down a column of a region and, over each spot, asks Blender what is under it the way a
user would: Ctrl+C over an operator button copies its Python call, Ctrl+Shift+Alt+C over a
property copies its full data path (both into the clipboard, which the journey reads).
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time
import traceback

import bpy
import numpy as np

TICK = 0.05          # seconds between two input events
SENTINEL = "<stylized-gui: nothing copied>"


class JourneyFailed(AssertionError):
    pass


class ErrorTee:
    """sys.stderr wrapper counting Python tracebacks Blender prints (draw callbacks, handlers, operators)."""

    def __init__(self, stream):
        self.stream = stream
        self.tracebacks: list[str] = []
        self._current: list[str] | None = None

    def write(self, text):
        if "Traceback (most recent call last)" in text:
            self._current = []
            self.tracebacks.append("")
        if self._current is not None:
            self.tracebacks[-1] += text
            if len(self.tracebacks[-1]) > 4000:
                self._current = None
        return self.stream.write(text)

    def flush(self):
        return self.stream.flush()

    def __getattr__(self, name):
        return getattr(self.stream, name)


# ------------------------------------------------------------------------------------------------
# window geometry
# ------------------------------------------------------------------------------------------------

def window():
    return bpy.context.window_manager.windows[0]


def view3d_areas(win=None):
    win = win or window()
    return [a for a in win.screen.areas if a.type == "VIEW_3D"]


def region(area, kind="WINDOW"):
    return next(r for r in area.regions if r.type == kind)


def screen_rect(reg, win=None):
    """(x0, y0, x1, y1) of a region in X screen pixels, top-left origin (x1, y1 exclusive).

    The main window's top-left corner is the X screen's (tools/gui/session.sh opens it at 0 0 and
    nothing moves it; ``viewports`` resizes it in place): Blender's ``window.y`` (from the bottom of
    the screen) stays at its value for the smaller size after the window is resized back (140 after
    760 px high and back to 900), which put every point computed from it 140 px too low."""
    win = win or window()
    if win == window():
        return reg.x, win.height - (reg.y + reg.height), reg.x + reg.width, win.height - reg.y
    x0 = win.x + reg.x
    y0 = (win.y + win.height) - (reg.y + reg.height)
    return x0, y0, x0 + reg.width, y0 + reg.height


def override(area, kind="WINDOW", win=None):
    win = win or window()
    return bpy.context.temp_override(window=win, screen=win.screen, area=area, region=region(area, kind))


# ------------------------------------------------------------------------------------------------
# the harness
# ------------------------------------------------------------------------------------------------

class Harness:
    found_item: tuple[int, int] | None = None     # journeys_files.file_menu_item: the menu item found
    def __init__(self, out_dir: str, backend: str, cleanup=None):
        self.out = pathlib.Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.backend = backend
        self.errors = ErrorTee(sys.stderr)
        sys.stderr = self.errors
        self.results: list[dict] = []
        self.current: dict | None = None
        self.cleanup = cleanup      # called after each journey, passed or not (stop what it left running)
        # no X key auto-repeat: on a loaded machine a timer tick between a key's press and release
        # can outlast the repeat delay, and a typed "stylized" arrived as "sstyliizedd"
        subprocess.run(["xset", "r", "off"], check=False)

    # ---- input, one event per tick ----------------------------------------------------------
    def _xdo(self, *args):
        subprocess.run(["xdotool", *map(str, args)], check=True)

    def move(self, x, y):
        self._xdo("mousemove", int(x), int(y))
        yield TICK

    def click(self, x, y, button=1, settle=0.2):
        yield from self.move(x, y)
        self._xdo("mousedown", button)
        yield TICK
        self._xdo("mouseup", button)
        yield settle

    def drag(self, x0, y0, x1, y1, steps=8, settle=0.3):
        yield from self.move(x0, y0)
        self._xdo("mousedown", 1)
        yield TICK
        for i in range(1, steps + 1):
            t = i / steps
            self._xdo("mousemove", int(x0 + (x1 - x0) * t), int(y0 + (y1 - y0) * t))
            yield TICK
        self._xdo("mouseup", 1)
        yield settle

    def _keycode(self, code, down):
        """A raw key event through XTest (what xdotool does, without its choice of keycode)."""
        import ctypes

        if not hasattr(self, "_xdpy"):
            self._x11 = ctypes.CDLL("libX11.so.6")
            self._xtst = ctypes.CDLL("libXtst.so.6")
            self._x11.XOpenDisplay.restype = ctypes.c_void_p
            self._xdpy = ctypes.c_void_p(self._x11.XOpenDisplay(None))
        self._xtst.XTestFakeKeyEvent(self._xdpy, code, bool(down), 0)
        self._x11.XFlush(self._xdpy)

    # Under Xvfb's keymap xdotool finds F12 on a level it reaches with Alt held, so Blender gets
    # Alt+F12 ("render the sequencer scene": Blender's "No sequencer scene to render"); F12 is sent
    # as its keycode (96, evdev) instead.
    KEYCODES = {"F12": 96}

    def key(self, combo, settle=0.2):
        """Press and release a key combination (xdotool names: ctrl+z, ctrl+shift+z, F12, Escape)."""
        *mods, last = combo.split("+")
        if last not in self.KEYCODES:
            self._xdo("keydown", combo)
            yield TICK
            self._xdo("keyup", combo)
            yield settle
            return
        for m in mods:
            self._xdo("keydown", m)
            yield TICK
        self._keycode(self.KEYCODES[last], True)
        yield TICK
        self._keycode(self.KEYCODES[last], False)
        yield TICK
        for m in reversed(mods):
            self._xdo("keyup", m)
            yield TICK
        yield settle

    KEYSYMS = {"/": "slash", "_": "underscore", ".": "period", "-": "minus", " ": "space"}

    def type_text(self, text):
        """Type ``text`` one key per tick (into a text field being edited)."""
        for ch in text:
            yield from self.key(self.KEYSYMS.get(ch, ch), settle=TICK)

    # ---- screenshots --------------------------------------------------------------------------
    def shot(self, name) -> np.ndarray:
        """The whole X screen now, saved as OUT/BACKEND-NAME.png; returns (H, W, 3) uint8."""
        path = self.out / f"{self.backend}-{name}.png"
        subprocess.run(["import", "-window", "root", str(path)], check=True)
        raw = subprocess.run(["convert", str(path), "-depth", "8", "rgb:-"], check=True, capture_output=True).stdout
        size = subprocess.run(["identify", "-format", "%w %h", str(path)], check=True, capture_output=True, text=True).stdout
        w, h = map(int, size.split())
        if self.current is not None:
            self.current["screenshots"].append(path.name)
        return np.frombuffer(raw, dtype=np.uint8).reshape(h, w, 3)

    def settled(self, name, rect, timeout=6.0, every=0.4):
        """Screenshots of ``rect`` until two in a row are equal (Blender has drawn what changed;
        a software-GL redraw of the window takes a good part of a second); the last one, cropped.
        Sets ``self.settle_s``."""
        t0 = time.perf_counter()
        prev = self.crop(self.shot(name), rect)
        while True:
            yield every
            cur = self.crop(self.shot(name), rect)
            if np.array_equal(prev, cur) or time.perf_counter() - t0 > timeout:
                self.settle_s = time.perf_counter() - t0
                self._settled = cur
                if self.current is not None:
                    shots = self.current["screenshots"]
                    while shots.count(f"{self.backend}-{name}.png") > 1:
                        shots.remove(f"{self.backend}-{name}.png")
                return
            prev = cur

    @staticmethod
    def crop(img, rect):
        x0, y0, x1, y1 = rect
        return img[max(y0, 0):y1, max(x0, 0):x1]

    # ---- finding buttons ----------------------------------------------------------------------
    def probe(self, x, y):
        """What is under (x, y): ('op', 'bpy.ops....') or ('prop', 'bpy.data....') or (None, '')."""
        wm = bpy.context.window_manager
        yield from self.move(x, y)
        yield TICK
        wm.clipboard = SENTINEL
        yield from self.key("ctrl+c", settle=TICK)
        text = wm.clipboard
        if text.startswith("bpy.ops."):
            self._probed = ("op", text)
            return
        wm.clipboard = SENTINEL
        yield from self.key("ctrl+shift+alt+c", settle=TICK)
        text = wm.clipboard
        self._probed = ("prop", text) if text.startswith("bpy.") else (None, "")

    def locate(self, reg, wanted, x_fracs=(0.15,), step=10, win=None, start=0.0):
        """Scan ``reg`` top to bottom at the given fractions of its width; for each name in
        ``wanted`` (a dict name -> predicate(kind, text)) the first screen point whose button matches
        (``start``: the fraction of the region's height the scan starts at).
        Sets ``self.found`` {name: (x, y, text)}; stops early once all are found."""
        x0, y0, x1, y1 = screen_rect(reg, win)
        found = {}
        for fx in x_fracs:
            x = x0 + int((x1 - x0) * fx)
            for y in range(y0 + 6 + int((y1 - y0) * start), y1 - 4, step):
                yield from self.probe(x, y)
                kind, text = self._probed
                for name, pred in wanted.items():
                    if name not in found and kind is not None and pred(kind, text):
                        found[name] = (x, y, text)
                if len(found) == len(wanted):
                    break
            if len(found) == len(wanted):
                break
        self.found = found
        self.log(f"located {sorted(found)} in {reg.type} ({len(found)}/{len(wanted)})")

    # ---- results ------------------------------------------------------------------------------
    def log(self, msg):
        print(f"[gui {self.backend}] {msg}", flush=True)
        if self.current is not None:
            self.current["log"].append(msg)

    def check(self, cond, msg):
        if not cond:
            raise JourneyFailed(msg)
        self.log(f"ok: {msg}")

    def measure(self, key, value):
        if self.current is not None:
            self.current["measures"][key] = value
        self.log(f"{key} = {value}")

    def run_journey(self, name, gen_fn):
        self.current = {"journey": name, "backend": self.backend, "passed": False, "log": [], "screenshots": [],
                        "measures": {}, "error": ""}
        self.results.append(self.current)
        n_tb = len(self.errors.tracebacks)
        t0 = time.perf_counter()
        try:
            yield from gen_fn(self)
            new = self.errors.tracebacks[n_tb:]
            self.check(not new, "no Python error printed" + (f": {new[0][-600:]}" if new else ""))
            self.current["passed"] = True
        except Exception as e:
            self.current["error"] = f"{type(e).__name__}: {e}"
            if not isinstance(e, JourneyFailed):
                self.current["error"] += "\n" + traceback.format_exc()[-2000:]
            self.log(f"FAILED: {self.current['error']}")
        self.current["seconds"] = round(time.perf_counter() - t0, 1)
        self.current = None
        if self.cleanup is not None:
            try:
                self.cleanup()
            except Exception:
                traceback.print_exc()
            yield 0.5

    def write_results(self, name="results"):
        path = self.out / f"{self.backend}-{name}.json"
        path.write_text(json.dumps(self.results, indent=1))
        return path


class Runner:
    """Steps a generator from a bpy.app.timers callback; quits Blender when it ends."""

    def __init__(self, gen, on_done=None, quit_when_done=True):
        self.gen = gen
        self.on_done = on_done
        self.quit = quit_when_done

    def start(self, first=1.0):
        bpy.app.timers.register(self._tick, first_interval=first, persistent=True)

    def _tick(self):
        try:
            delay = next(self.gen)
            return max(float(delay or 0.0), 0.0)
        except StopIteration:
            pass
        except Exception:
            traceback.print_exc()
        if self.on_done is not None:
            try:
                self.on_done()
            except Exception:
                traceback.print_exc()
        if self.quit:
            os.environ["STYLIZED_GUI_DONE"] = "1"
            bpy.app.timers.register(_quit, first_interval=0.2)
        return None


def _quit():
    bpy.ops.wm.quit_blender()
    return None
