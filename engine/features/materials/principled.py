"""The toon look of ordinary Blender materials: the derived shade colour and the viewport-colour
fallback (resolution step 4).  The node tree itself is read by ``node_tree.py``."""
from __future__ import annotations

from ...core.assets.material import MToonParams
from .node_tree import SHADE_SATURATION, SHADE_VALUE, shade_from_base  # noqa: F401  (public API)


def read_diffuse(material, unmapped=()) -> MToonParams:
    """No usable node tree: the material's viewport display colour."""
    c = tuple(float(x) for x in material.diffuse_color)
    p = MToonParams(base_color=c[:3] + (1.0,), shade_color=shade_from_base(c), source="default")
    p.double_sided = not getattr(material, "use_backface_culling", False)
    p.unmapped = tuple(unmapped)
    return p
