"""What a final render's targets need, and whether a software GPU can hold them (issue 37).

A final frame holds, per pixel: the pipeline's colour, aux (normal, object id) and depth, the
render passes' two targets when passes are drawn, the anti-aliasing accumulator, the coverage
samples' id targets and their depth (engine/gpu/passes/samples.py), the FXAA / screen-space
outline outputs, and on the CPU the read-back and Blender's result.  ``frame_bytes`` adds them up
(an estimate: it leaves out the scene's own buffers and the shadow maps).

On a software renderer (Mesa llvmpipe / softpipe / swrast: the "GPU" memory is the process's
memory) a render that needs more than the memory the system has available would be killed or
fail half-way; ``check`` names the size, the need and the limit so the render stops before
drawing, with a message instead.  Hardware GPUs do not tell Python their free memory: nothing is
checked there (the texture size limit is, in render_engine.py).
"""
from __future__ import annotations

SOFTWARE_RENDERERS = ("llvmpipe", "softpipe", "swrast", "software rasterizer")


def frame_bytes(width: int, height: int, samples: int = 1, passes: bool = False,
                screen_outline: bool = False, averaged: int = 0) -> int:
    """Bytes the targets of one ``width`` x ``height`` final frame need (GPU and read-back)."""
    from .samples import BATCH

    gpu_px = 16 + 16 + 4 + 16                     # colour, aux, depth, the post-process output
    if passes:
        gpu_px += 32                              # pass0, pass1
    if screen_outline:
        gpu_px += 16
    if int(samples) > 1:
        gpu_px += 16 + (BATCH + 1) * 4 + 4 + 16 * int(averaged)   # accumulator, ids, their depth
    cpu_px = 16 + 16                              # the read-back and Blender's Combined pass
    return int(width) * int(height) * (gpu_px + cpu_px)


def software_renderer(renderer: str) -> bool:
    r = (renderer or "").lower()
    return any(name in r for name in SOFTWARE_RENDERERS)


def available_bytes(meminfo: str = "/proc/meminfo") -> int | None:
    """The system's available memory (MemAvailable), None where it cannot be read."""
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check(width: int, height: int, need: int, renderer: str, available: int | None) -> str | None:
    """The message stopping a render that cannot fit (None: go on)."""
    if not software_renderer(renderer) or available is None or need <= available:
        return None
    gb = 1024.0 ** 3
    return (f"Stylized: a {width}x{height} render needs about {need / gb:.1f} GB for its render targets, "
            f"more than the {available / gb:.1f} GB this machine has available to its software GPU "
            f"({renderer}: the targets live in system memory); lower the resolution (or its "
            f"percentage) or the Render Samples")
