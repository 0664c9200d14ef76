"""GPU objects the passes share within one pipeline: compiled shaders (by key), the full-screen
triangle batch of each screen-space shader, and the 1x1 fallback textures of unbound slots.

Owned by a ``FramePipeline`` (``pipeline.gpu``), made lazily in the GPU context that draws with
them and released with the pipeline (``free``); nothing is kept at module level.
"""
from __future__ import annotations

_DUMMY_VALUES = {"white": (1, 1, 1, 1), "black": (0, 0, 0, 0), "normal": (0.5, 0.5, 1, 1)}


class GpuCache:
    """Shaders, full-screen batches and fallback textures of one pipeline."""

    def __init__(self):
        self._shaders = {}      # key -> GPUShader
        self._batches = {}      # id(shader) -> (shader, GPUBatch of the full-screen triangle)
        self._dummies = {}      # kind -> 1x1 GPUTexture

    def shader(self, key: str, factory):
        """The shader ``key``, compiled by ``factory()`` the first time."""
        sh = self._shaders.get(key)
        if sh is None:
            sh = factory()
            self._shaders[key] = sh
        return sh

    def fullscreen_batch(self, shader):
        """One big triangle covering the target, for ``shader`` (attribute ``p``)."""
        hit = self._batches.get(id(shader))
        if hit is None or hit[0] is not shader:
            from gpu_extras.batch import batch_for_shader

            hit = (shader, batch_for_shader(shader, "TRIS", {"p": ((-1, -1), (3, -1), (-1, 3))}))
            self._batches[id(shader)] = hit
        return hit[1]

    def dummy_texture(self, kind: str = "white"):
        """1x1 RGBA32F texture: 'white' (1,1,1,1), 'black', 'normal' (0.5,0.5,1,1)."""
        tex = self._dummies.get(kind)
        if tex is None:
            import gpu

            tex = gpu.types.GPUTexture((1, 1), format="RGBA32F",
                                       data=gpu.types.Buffer("FLOAT", 4, _DUMMY_VALUES[kind]))
            self._dummies[kind] = tex
        return tex

    @property
    def shader_count(self) -> int:
        return len(self._shaders)

    def free(self) -> None:
        self._shaders.clear()
        self._batches.clear()
        self._dummies.clear()
