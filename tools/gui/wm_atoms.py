"""Intern the ICCCM atoms a window manager would have made (WM_PROTOCOLS, WM_DELETE_WINDOW,
WM_TAKE_FOCUS) before Blender connects to the bare Xvfb server (tools/gui/session.sh).

Blender's X11 backend (GHOST) looks these atoms up only if they already exist; under Xvfb with no
window manager they do not, so Blender's windows would not take WM_DELETE_WINDOW, the message a
window manager's close button sends (harness.close_xwindow). Xvfb runs with -noreset, so the atoms
outlive this client. Runs with the root's own python3 (ctypes, libX11)."""
import ctypes

x11 = ctypes.CDLL("libX11.so.6")
x11.XOpenDisplay.restype = ctypes.c_void_p
x11.XInternAtom.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
x11.XCloseDisplay.argtypes = [ctypes.c_void_p]
dpy = x11.XOpenDisplay(None)
if not dpy:
    raise SystemExit("wm_atoms: cannot open the X display")
for name in (b"WM_PROTOCOLS", b"WM_DELETE_WINDOW", b"WM_TAKE_FOCUS"):
    x11.XInternAtom(dpy, name, False)
x11.XCloseDisplay(dpy)
