"""Giving the memory an import replaced back to the system (issue 37: memory flat over edits).

An edited mesh is imported again; the asset cache and the backend keep only the new version, but
the old mesh asset sits in reference cycles that Python's cyclic collector reaches only after
enough new container objects (not bytes): a 250,000-vertex grid edited and rendered kept every
old asset (+16 MB a round, tests/test_memory_over_edits.py).  And glibc's allocator keeps freed
heap pages for reuse, so with a software GPU (llvmpipe, whose buffers are process memory) the
resident size swung by tens of MB from render to render.  After a final render that imported
(``render_complete``: Blender has freed the render's depsgraph) ``release_freed`` collects the
cycles and asks glibc to return the free pages (``malloc_trim``); elsewhere (macOS, Windows,
musl) it only collects.  After any other final render ``trim`` returns the render's freed scratch.
"""
from __future__ import annotations

import sys


def release_freed() -> bool:
    """Collect reference cycles, then return the heap's free pages to the system where the C
    library can (``trim``).  True when the C library was asked."""
    import gc

    gc.collect()
    return trim()


def trim() -> bool:
    """Return the heap's free pages to the system where the C library can (glibc's
    ``malloc_trim(0)``, a few ms on a 1 GB heap); True when it was asked.  A render's scratch
    (the checks' reads, llvmpipe's binned draws of a big mesh, the read-backs) is freed at its
    end, but glibc keeps the pages: without this a set's process stayed 150 MB above its size
    between renders and the next render's peak stood on top of them."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        fn = getattr(ctypes.CDLL("libc.so.6"), "malloc_trim", None)
        if fn is None:
            return False
        fn.argtypes = [ctypes.c_size_t]
        fn(0)
        return True
    except (OSError, AttributeError):
        return False
