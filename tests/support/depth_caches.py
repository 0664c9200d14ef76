"""The kept final session's shadow passes without their static depth caches, for one block of
F12s: the frames drawn as before the cache (every caster into every tile it reaches), the
reference the cache's frames are compared with (engine/gpu/passes/shadow_cache.py)."""
from __future__ import annotations

import contextlib


@contextlib.contextmanager
def without_depth_caches(chunk_culling: bool = True):
    """Inside the block, the kept session's sun and local shadow passes have no depth cache and
    its pipeline's ``chunk_culling`` is ``chunk_culling`` (False: every chunk of a big static
    mesh in every draw, engine/gpu/chunks.py); both are put back after it.  Yields the pipeline."""
    from stylized_renderer.engine.blender import render_engine

    session = render_engine.kept_final_session()
    assert session is not None and session.pipeline is not None, "F12 keeps its session and pipeline"
    pipe = session.pipeline
    passes = (pipe.shadow, pipe.local_shadow)
    caches = [p.depth_cache for p in passes]
    culling = pipe.chunk_culling
    pipe.chunk_culling = chunk_culling
    for p in passes:
        p.depth_cache = None
    try:
        yield pipe
    finally:
        pipe.chunk_culling = culling
        for p, c in zip(passes, caches):
            p.depth_cache = c
