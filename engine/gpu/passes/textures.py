"""GPU textures for material images, cached per image (the 1x1 fallbacks of unbound slots are
the pipeline's: engine/gpu/passes/gpu_cache.py).

``gpu.texture.from_image`` uploads an image the way the viewport does: 8-bit sRGB images become
sRGB textures (sampling returns linear values), float images are linear, and images marked
Non-Color are sampled raw.  So colour textures come back linear and data textures (normal,
shading shift, outline width, UV mask) must be Non-Color, as in any Blender material.
A ``TextureRef.image`` may also be a ``gpu.types.GPUTexture`` (direct pipeline tests).
"""
from __future__ import annotations


class TextureCache:
    """Image -> GPUTexture, re-uploaded when the image's pixels may have changed."""

    def __init__(self):
        self._cache = {}

    def get(self, image):
        if image is None:
            return None
        if hasattr(image, "format") and hasattr(image, "read") and not hasattr(image, "pixels"):
            return image   # already a GPUTexture
        import gpu

        try:
            key = image.as_pointer()
        except (AttributeError, ReferenceError):
            return None
        sig = (image.name, tuple(image.size), bool(getattr(image, "is_dirty", False)),
               getattr(image.colorspace_settings, "name", ""), image.source)
        entry = self._cache.get(key)
        if entry is not None and entry[0] == sig and not sig[2]:
            return entry[1]
        try:
            tex = gpu.texture.from_image(image)
        except Exception:
            return None
        self._cache[key] = (sig, tex)
        return tex

    def clear(self):
        self._cache.clear()

