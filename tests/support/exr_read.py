"""EXR files read for the tests through the OpenEXR bindings (PyPI ``openexr``, pinned in
requirements/dev.txt).  bpy has no OpenImageIO module and ``Image.pixels`` of a multilayer EXR
shows one pass only, so the compositing tests read the file Blender wrote with this.
``read_exr`` returns {channel name: (H, W) float32 array}; row 0 is the image's *top* (EXR order),
unlike ``Image.pixels`` (``layer_pass`` flips to Blender's bottom-up order)."""
from __future__ import annotations

import numpy as np
import OpenEXR


def read_exr(path) -> dict:
    """Every channel of the (single-part) file, HALF / FLOAT / UINT, as float32."""
    channels = OpenEXR.File(str(path), separate_channels=True).channels()
    return {name: np.asarray(c.pixels, np.float32) for name, c in channels.items()}


def layer_pass(channels: dict, prefix: str, suffixes="RGBA") -> np.ndarray:
    """(H, W, len(suffixes)) of the channels ``prefix + '.' + s`` flipped to Blender's bottom-up
    pixel order (as ``Image.pixels`` and the engine's arrays)."""
    return np.stack([channels[f"{prefix}.{s}"] for s in suffixes], -1)[::-1]


def read_exr_header(path) -> dict:
    """The header's string attributes (e.g. Cryptomatte's ``cryptomatte/<key>/manifest``) as
    {name: str}; other attribute types are left out."""
    header = OpenEXR.File(str(path), header_only=True).header()
    return {name: value for name, value in header.items() if isinstance(value, str)}
