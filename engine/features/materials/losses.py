"""What a frame loses that Blender loses too, named for the render log and the Stats panel.

Blender draws an image whose file cannot be read in magenta (``gpu.texture.from_image`` hands
back its 1x1 magenta texture; EEVEE and Cycles show the same), and draws nothing of an object
whose every material is fully transparent (an FBX import with alpha 0).  Our passes do the same,
which is right, but a farm operator only sees the frame: ``frame_losses`` names each missing image
once per frame with the materials that use it, and each object with nothing left to draw.

The images a material uses are gathered when it is resolved (``material_images``: its Image
Texture and Environment Texture nodes, inside node groups too, and the textures of our MToon
properties) and kept on ``MToonParams.images``; whether they can be read is asked every frame
(``Image.size`` makes Blender try to load a file it has not loaded yet), so a file restored or
relinked between renders is no longer named.
"""
from __future__ import annotations

import os

IMAGE_NODE_TYPES = ("TEX_IMAGE", "TEX_ENVIRONMENT")
FILE_SOURCES = ("FILE", "SEQUENCE", "MOVIE", "TILED")


def material_images(material, params=None) -> tuple:
    """The images ``material`` uses: its image nodes (node groups included, each tree once) and
    the images of ``params.textures`` (our MToon properties, the VRM Add-on's group), in order."""
    out = []
    seen_trees = set()
    stack = [getattr(material, "node_tree", None)]
    while stack:
        tree = stack.pop()
        if tree is None or tree.as_pointer() in seen_trees:
            continue
        seen_trees.add(tree.as_pointer())
        for node in tree.nodes:
            if node.type in IMAGE_NODE_TYPES and getattr(node, "image", None) is not None:
                out.append(node.image)
            elif node.type == "GROUP" and getattr(node, "node_tree", None) is not None:
                stack.append(node.node_tree)
    for ref in (getattr(params, "textures", None) or {}).values():
        img = getattr(ref, "image", None)
        if img is not None and hasattr(img, "source"):     # a bpy Image (tests may pass a GPUTexture)
            out.append(img)
    unique = {}
    for img in out:
        unique.setdefault(img.as_pointer(), img)
    return tuple(unique.values())


def image_problem(image) -> str:
    """Why Blender cannot read ``image``'s pixels ('' when it can, or it is not file-backed)."""
    try:
        source = image.source
        if source not in FILE_SOURCES:
            return ""
        if getattr(image, "packed_file", None) is not None or len(getattr(image, "packed_files", ()) or ()):
            return ""
        if image.has_data or tuple(image.size) != (0, 0):    # .size loads the file when it can
            return ""
        path = image.filepath
        full = _abspath(path, image.library)
    except ReferenceError:
        return ""
    if not path:
        return "no file path"
    if source in ("FILE", "MOVIE") and not os.path.exists(full):
        return f"file not found: '{path}'"
    return f"file could not be read: '{path}'"


def _abspath(path: str, library) -> str:
    import bpy

    try:
        return bpy.path.abspath(path, library=library)
    except (TypeError, ValueError):
        return bpy.path.abspath(path)


def _alpha(params) -> float:
    return float(params.base_color[3]) if len(params.base_color) > 3 else 1.0


def fully_transparent(params) -> bool:
    """Nothing of a surface with these parameters is drawn: a BLEND material of alpha 0, or a
    MASK material whose alpha factor is below its cutoff (the texture's and the vertex colour's
    alpha only lower it; the shader discards alpha < cutoff, as Blender's Alpha Clip does)."""
    alpha = _alpha(params)
    if params.alpha_mode == "BLEND":
        return alpha <= 0.0
    if params.alpha_mode == "MASK":
        return alpha < float(params.alpha_cutoff)
    return False


def _quoted(names) -> str:
    return ", ".join(f"'{n}'" for n in names)


def frame_losses(items, materials: dict) -> list:
    """One line per missing image (with the materials using it) and per object whose every drawn
    material is fully transparent, for the frame's ``items`` and their resolved ``materials``."""
    lines = []
    users = {}              # image pointer -> (image, [material names])
    for name in sorted(n for n in materials if n):
        params = materials[name]
        for img in getattr(params, "images", ()) or ():
            try:
                key = img.as_pointer()
            except ReferenceError:
                continue
            users.setdefault(key, (img, []))[1].append(name)
    for img, names in sorted(users.values(), key=lambda e: e[0].name):
        why = image_problem(img)
        if why:
            what = "material" if len(names) == 1 else "materials"
            lines.append(f"image '{img.name}' of {what} {_quoted(names)} is missing ({why}): drawn magenta, as Blender does")
    per_object = {}
    for it in items:
        params = materials.get(it.material_name)
        if params is None or getattr(params, "is_vrm_outline_material", False):
            continue
        per_object.setdefault(it.object_name, {})[it.material_name] = params
    for obj in sorted(per_object):
        mats = per_object[obj]
        if not all(fully_transparent(p) for p in mats.values()):
            continue
        zero = [n for n in sorted(mats) if _alpha(mats[n]) <= 0.0]
        clipped = [n for n in sorted(mats) if _alpha(mats[n]) > 0.0]
        parts = ([f"alpha 0: {_quoted(zero)}"] if zero else []) + \
            ([f"alpha below the clip threshold: {_quoted(clipped)}"] if clipped else [])
        lines.append(f"object '{obj}' is invisible: every material is fully transparent ({'; '.join(parts)}), "
                     "as in Blender")
    return lines
