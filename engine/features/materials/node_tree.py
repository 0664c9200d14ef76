"""A material's shader node tree -> MToonParams (resolution step 3), with a report of what could
not be mapped.

Reads what Blender's importers and users really make (see docs/materials.md):

* the surface shader behind the active Material Output: Principled BSDF (lit), Emission (unlit),
  Diffuse BSDF; through Mix Shader nodes with a Transparent BSDF (alpha) and the Light Path
  "Is Camera Ray" trick of the glTF importer's ``KHR_materials_unlit`` layout;
* colour paths (Base Color, Emission Color, the unlit Emission Color): constants, Image Texture,
  Color Attribute (vertex colours), RGB nodes, Mix (Multiply / Mix, RGBA) and the legacy MixRGB,
  reroutes and muted nodes; a texture's Mapping node (KHR_texture_transform) and UV Map node;
* alpha paths: constants, the image's Alpha output, the Color Attribute's alpha, Math Multiply
  (alpha factor) and the glTF importer's alpha clip ``1 - (alpha < cutoff)``;
* metallic and roughness, constants or from a texture (metal.py; the shader shades metal as
  EEVEE does), emission strength, Normal Map strength, occlusion in the "glTF Material Output"/"glTF Settings" group
  (reported: MToon has no occlusion input).

Everything the reader meets and cannot represent is named in ``MToonParams.unmapped`` (one
message per finding: material, node and what was done instead) and an approximation is used.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ...core.assets.material import MToonParams, TextureRef
from .metal import read_metal

SHADE_VALUE = 0.6        # derived shade = base colour x 0.6 ...
SHADE_SATURATION = 1.2   # ... pushed slightly away from grey, as hand-painted toon shades are

OCCLUSION_GROUPS = ("glTF Material Output", "glTF Settings")
MAX_DEPTH = 32


def shade_from_base(rgb) -> tuple:
    r, g, b = (float(c) for c in rgb[:3])
    lum = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return tuple(max(0.0, min(1.0, (lum + (c - lum) * SHADE_SATURATION) * SHADE_VALUE)) for c in (r, g, b))


# ------------------------------------------------------------------------------------------------
# terms of a path
# ------------------------------------------------------------------------------------------------

@dataclass
class ColorTerm:
    """factor x image colour (when ``image``) x vertex colour (when ``vertex``)."""

    factor: tuple = (1.0, 1.0, 1.0)
    image: Any = None               # the Image Texture node (bpy, untyped)
    vertex: bool = False
    vertex_layer: str = ""          # the Color Attribute node's layer ("" = the mesh's default)

    def times(self, other: "ColorTerm", reader: "Reader", node) -> "ColorTerm":
        img = self.image
        if other.image is not None:
            if img is not None and other.image.image != img.image:
                reader.note(node, f"multiplies two textures ('{_img_name(img)}' and '{_img_name(other.image)}'); "
                                  f"only '{_img_name(img)}' is used")
            else:
                img = other.image
        return ColorTerm(tuple(a * b for a, b in zip(self.factor, other.factor)), img,
                         self.vertex or other.vertex, self.vertex_layer or other.vertex_layer)


@dataclass
class AlphaTerm:
    """factor x image alpha (when ``image``) x vertex alpha (when ``vertex``); ``cutoff`` set by an
    alpha clip."""

    factor: float = 1.0
    image: Any = None               # the Image Texture node (bpy, untyped)
    vertex: bool = False
    cutoff: Optional[float] = None

    @property
    def varying(self) -> bool:
        return self.image is not None or self.vertex

    def times(self, other: "AlphaTerm") -> "AlphaTerm":
        return AlphaTerm(self.factor * other.factor, self.image or other.image, self.vertex or other.vertex,
                         self.cutoff if self.cutoff is not None else other.cutoff)


@dataclass
class Surface:
    kind: str                       # "principled" | "unlit" | "diffuse"
    node: Any                       # the shader node (bpy, untyped); None for a lone Transparent BSDF
    alpha: AlphaTerm = field(default_factory=AlphaTerm)
    emission: list = field(default_factory=list)   # Emission nodes added to the surface (Add Shader)


def _img_name(node) -> str:
    img = getattr(node, "image", None)
    return img.name if img is not None else "(no image)"


def _rgb(v) -> tuple:
    try:
        t = tuple(float(x) for x in v)
    except TypeError:
        return (float(v),) * 3
    return (t + (1.0, 1.0, 1.0))[:3]


def _by_id(node, *identifiers):
    for ident in identifiers:
        for s in node.inputs:
            if s.identifier == ident:
                return s
    return None


# ------------------------------------------------------------------------------------------------
# the reader
# ------------------------------------------------------------------------------------------------

class Reader:
    def __init__(self, material):
        self.material = material
        self.unmapped: list = []

    # -- report ------------------------------------------------------------------------------------
    def note(self, node, message: str) -> None:
        where = f"node '{node.name}' ({node.bl_label})" if node is not None else "material"
        msg = f"material '{self.material.name}': {where}: {message}"
        if msg not in self.unmapped:
            self.unmapped.append(msg)

    # -- links ---------------------------------------------------------------------------------------
    def link(self, socket, depth=0):
        """(node, output socket) feeding ``socket``, through reroutes and muted nodes; None if unlinked."""
        if socket is None or not socket.is_linked or depth > MAX_DEPTH:
            return None
        lk = socket.links[0]
        if getattr(lk, "is_muted", False) or not getattr(lk, "is_valid", True):
            return None
        node, out = lk.from_node, lk.from_socket
        if node.type == "REROUTE":
            return self.link(node.inputs[0], depth + 1)
        if node.mute:
            for il in node.internal_links:
                if il.to_socket == out:
                    return self.link(il.from_socket, depth + 1)
            return None
        return node, out

    def _const(self, socket, default=1.0) -> float:
        if socket is None:
            return default
        src = self.link(socket)
        if src is not None:
            node, out = src
            if node.type == "VALUE":
                return float(out.default_value)
            self.note(node, f"drives '{socket.node.name}.{socket.name}', which is read as a constant: "
                            f"using {float(socket.default_value):g}")
        return float(socket.default_value)

    # -- colour ----------------------------------------------------------------------------------------
    def color(self, socket, depth=0) -> ColorTerm:
        src = self.link(socket)
        if src is None:
            return ColorTerm(_rgb(socket.default_value) if hasattr(socket, "default_value") else (1.0, 1.0, 1.0))
        node, out = src
        t = node.type
        if depth > MAX_DEPTH:
            self.note(node, "colour path too deep: using white")
            return ColorTerm()
        if t == "TEX_IMAGE":
            if out.name == "Alpha":
                self.note(node, "the image's Alpha used as a colour: using white")
                return ColorTerm()
            if node.image is None:
                self.note(node, "Image Texture without an image: using white")
                return ColorTerm()
            return ColorTerm(image=node)
        if t == "VERTEX_COLOR":
            if out.name == "Alpha":
                self.note(node, "the colour attribute's alpha used as a colour: using white")
                return ColorTerm()
            return ColorTerm(vertex=True, vertex_layer=node.layer_name)
        if t == "ATTRIBUTE" and node.attribute_type == "GEOMETRY" and out.name == "Color":
            return ColorTerm(vertex=True, vertex_layer=node.attribute_name)
        if t == "RGB":
            return ColorTerm(_rgb(out.default_value))
        if t == "MIX" and node.data_type == "RGBA":
            return self._mix(node, _by_id(node, "Factor_Float"), _by_id(node, "A_Color"), _by_id(node, "B_Color"),
                             node.blend_type, depth)
        if t == "MIX_RGB":
            return self._mix(node, node.inputs.get("Fac"), node.inputs.get("Color1"), node.inputs.get("Color2"),
                             node.blend_type, depth)
        # anything else: report it and follow its first linked colour input (hue/saturation, curves,
        # gamma... keep the texture behind them), else the viewport display colour
        for s in node.inputs:
            if s.type == "RGBA" and s.is_linked:
                self.note(node, f"{node.bl_label} is not mapped: using what feeds its '{s.name}' input")
                return self.color(s, depth + 1)
        self.note(node, f"{node.bl_label} is not mapped: using the material's viewport display colour")
        return ColorTerm(_rgb(self.material.diffuse_color))

    def _mix(self, node, fac_s, a_s, b_s, blend, depth) -> ColorTerm:
        f = self._const(fac_s, 1.0)
        a = self.color(a_s, depth + 1)
        b = self.color(b_s, depth + 1)
        if blend == "MULTIPLY":
            # mix(A, A*B, f) = A * (1 - f + f*B)
            if abs(f - 1.0) < 1e-6:
                return a.times(b, self, node)
            if b.image is None and not b.vertex:
                return a.times(ColorTerm(tuple(1.0 - f + f * c for c in b.factor)), self, node)  # pyright: ignore[reportGeneralTypeIssues]  (a narrowing artefact: b is a ColorTerm)
            self.note(node, f"Multiply with factor {f:g} over a texture/vertex colour: used as factor 1")
            return a.times(b, self, node)
        if blend == "MIX":
            if f <= 1e-6:
                return a
            if f >= 1.0 - 1e-6:
                return b
            if a.image is None and b.image is None and not (a.vertex or b.vertex):
                return ColorTerm(tuple((1 - f) * x + f * y for x, y in zip(a.factor, b.factor)))
            self.note(node, f"Mix with factor {f:g} of two inputs: using input {'B' if f >= 0.5 else 'A'}")
            return b if f >= 0.5 else a
        self.note(node, f"blend mode {blend} is not mapped: using input A")
        return a

    # -- alpha -------------------------------------------------------------------------------------------
    def alpha(self, socket, depth=0) -> AlphaTerm:
        src = self.link(socket)
        if src is None:
            return AlphaTerm(float(socket.default_value) if hasattr(socket, "default_value") else 1.0)
        node, out = src
        t = node.type
        if depth > MAX_DEPTH:
            self.note(node, "alpha path too deep: using 1")
            return AlphaTerm()
        if t == "TEX_IMAGE" and node.image is not None:
            if out.name != "Alpha":
                self.note(node, "the image's colour used as alpha: using its alpha channel")
            return AlphaTerm(image=node)
        if t == "VERTEX_COLOR" or (t == "ATTRIBUTE" and node.attribute_type == "GEOMETRY"):
            if out.name != "Alpha":
                self.note(node, "a colour attribute's colour used as alpha: using its alpha")
            return AlphaTerm(vertex=True)
        if t == "VALUE":
            return AlphaTerm(float(out.default_value))
        if t == "MATH":
            op = node.operation
            i0, i1 = node.inputs[0], node.inputs[1]
            if op == "MULTIPLY":
                return self.alpha(i0, depth + 1).times(self.alpha(i1, depth + 1))
            if op == "SUBTRACT" and not i0.is_linked and abs(float(i0.default_value) - 1.0) < 1e-6:
                inner = self.link(i1)
                if inner is not None and inner[0].type == "MATH" and inner[0].operation == "LESS_THAN" \
                        and not inner[0].inputs[1].is_linked:
                    # the glTF importer's alpha clip: 1 - (alpha < cutoff)
                    a = self.alpha(inner[0].inputs[0], depth + 1)
                    a.cutoff = float(inner[0].inputs[1].default_value)
                    return a
            if op == "GREATER_THAN" and not i1.is_linked:
                a = self.alpha(i0, depth + 1)
                a.cutoff = float(i1.default_value)
                return a
            if op == "ROUND":
                a = self.alpha(i0, depth + 1)
                a.cutoff = 0.5
                return a
        self.note(node, f"{node.bl_label} on the alpha path is not mapped: alpha 1")
        return AlphaTerm()

    # -- shaders ------------------------------------------------------------------------------------------
    def output_node(self):
        tree = self.material.node_tree
        outs = [n for n in tree.nodes if n.type == "OUTPUT_MATERIAL" and n.target in ("ALL", "EEVEE")]
        for n in outs:
            if n.is_active_output:
                return n
        return outs[0] if outs else None

    def surface(self, socket, depth=0) -> Optional[Surface]:
        src = self.link(socket)
        if src is None:
            return None
        node, _out = src
        t = node.type
        if depth > MAX_DEPTH:
            self.note(node, "shader path too deep")
            return None
        if t == "BSDF_PRINCIPLED":
            return Surface("principled", node)
        if t == "EMISSION":
            return Surface("unlit", node)
        if t in ("BSDF_DIFFUSE", "BSDF_HAIR", "BSDF_HAIR_PRINCIPLED"):    # EEVEE: hair BSDFs shade as diffuse
            return Surface("diffuse", node)
        if t == "MIX_SHADER":
            return self._mix_shader(node, depth)
        if t == "ADD_SHADER":
            a, b = self.surface(node.inputs[0], depth + 1), self.surface(node.inputs[1], depth + 1)
            if a is not None and b is not None and b.kind == "unlit" and a.kind != "unlit":
                a.emission.append(b.node)
                return a
            if a is not None and b is not None and a.kind == "unlit" and b.kind != "unlit":
                b.emission.append(a.node)
                return b
            self.note(node, "Add Shader of two surfaces: using the first")
            return a or b
        if t == "BSDF_TRANSPARENT":
            self.note(node, "a Transparent BSDF alone: drawn fully transparent")
            s = Surface("unlit", None)
            s.alpha = AlphaTerm(0.0)
            return s
        self.note(node, f"shader {node.bl_label} is not mapped")
        return None

    def _mix_shader(self, node, depth) -> Optional[Surface]:
        fac, s1, s2 = node.inputs[0], node.inputs[1], node.inputs[2]
        fsrc = self.link(fac)
        if fsrc is not None and fsrc[0].type == "LIGHT_PATH":
            name = fsrc[1].name
            # the glTF importer's unlit trick: camera rays see shader 2, other rays shader 1
            if name == "Is Camera Ray":
                return self.surface(s2, depth + 1)
            # any other ray-type flag is 0 for camera rays: the camera sees shader 1 (Blender's
            # "Disable Shadow" mix, Is Shadow Ray -> Transparent, is read by shadow_flags.py)
            if name.startswith("Is ") and name.endswith(" Ray"):
                return self.surface(s1, depth + 1)
            self.note(fsrc[0], f"Light Path '{name}' mixes shaders: using the second shader")
            return self.surface(s2, depth + 1)
        n1 = self.link(s1)
        n2 = self.link(s2)
        t1 = n1[0].type if n1 is not None else None
        t2 = n2[0].type if n2 is not None else None
        if t1 == "BSDF_TRANSPARENT" and t2 != "BSDF_TRANSPARENT":
            inner = self.surface(s2, depth + 1)
            if inner is not None:
                inner.alpha = inner.alpha.times(self.alpha(fac))
            return inner
        if t2 == "BSDF_TRANSPARENT" and t1 != "BSDF_TRANSPARENT":
            inner = self.surface(s1, depth + 1)
            a = self.alpha(fac)
            if inner is not None:
                if a.varying:
                    self.note(node, "transparency where the factor is high (Transparent BSDF second) from a "
                                    "texture is not mapped: opaque")
                else:
                    inner.alpha = inner.alpha.times(AlphaTerm(1.0 - a.factor))
            return inner
        f = self._const(fac, 0.5)
        self.note(node, f"Mix Shader of two surfaces (factor {f:g}): using the "
                        f"{'second' if f >= 0.5 else 'first'}")
        return self.surface(s2 if f >= 0.5 else s1, depth + 1) or self.surface(s1 if f >= 0.5 else s2, depth + 1)

    # -- textures -----------------------------------------------------------------------------------------
    def tex_ref(self, img_node, scale=1.0) -> TextureRef:
        ref = TextureRef(image=img_node.image, scale=float(scale))
        src = self.link(img_node.inputs.get("Vector"))
        if src is None:
            return ref
        node, out = src
        if node.type == "MAPPING":
            loc = node.inputs["Location"]
            rot = node.inputs["Rotation"]
            sc = node.inputs["Scale"]
            for s in (loc, rot, sc):
                if s.is_linked:
                    self.note(node, f"Mapping '{s.name}' driven by a node: using its value")
            if node.vector_type == "POINT":          # uv' = R (S uv) + L (what the glTF importer makes)
                ref.uv_scale = (float(sc.default_value[0]), float(sc.default_value[1]))
                ref.uv_offset = (float(loc.default_value[0]), float(loc.default_value[1]))
            elif node.vector_type == "TEXTURE":      # uv' = S^-1 R^-1 (uv - L)
                sx = float(sc.default_value[0]) or 1.0
                sy = float(sc.default_value[1]) or 1.0
                ref.uv_scale = (1.0 / sx, 1.0 / sy)
                ref.uv_offset = (-float(loc.default_value[0]) / sx, -float(loc.default_value[1]) / sy)
            else:
                self.note(node, f"Mapping type {node.vector_type} is not mapped: texture untransformed")
            if abs(float(rot.default_value[2])) > 1e-6 or abs(float(rot.default_value[0])) > 1e-6 \
                    or abs(float(rot.default_value[1])) > 1e-6:
                self.note(node, "texture rotation is not supported: offset and scale only")
            nxt = self.link(node.inputs["Vector"])
            if nxt is None:
                return ref
            node, out = nxt
        if node.type == "UVMAP":
            self._check_uv_map(node, node.uv_map)
        elif node.type == "TEX_COORD" and out.name == "UV":
            pass
        else:
            self.note(node, f"texture coordinates from {node.bl_label} ('{out.name}') are not mapped: "
                            "the mesh's UV map is used")
        return ref

    def _check_uv_map(self, node, name: str) -> None:
        if not name:
            return
        for me in meshes_using(self.material):
            uvs = me.uv_layers
            drawn = uvs.active if uvs.active is not None else (uvs[0] if len(uvs) else None)
            if drawn is not None and drawn.name != name:
                self.note(node, f"uses UV map '{name}'; mesh '{me.name}' is drawn with its active UV map "
                                f"'{drawn.name}'")
                return

    def _check_vertex_colors(self, layer: str) -> None:
        for me in meshes_using(self.material):
            ca = me.color_attributes
            if not len(ca):
                self.note(None, f"uses a Color Attribute but mesh '{me.name}' has none: drawn as white")
                continue
            idx = ca.render_color_index
            drawn = ca[idx].name if 0 <= idx < len(ca) else (ca.active_color_name or ca[0].name)
            if layer and layer != drawn:
                self.note(None, f"uses colour attribute '{layer}'; mesh '{me.name}' is drawn with its render "
                                f"colour attribute '{drawn}'")

    # -- the whole material --------------------------------------------------------------------------------
    def read(self) -> Optional[MToonParams]:
        out = self.output_node()
        if out is None:
            return None
        surf = self.surface(out.inputs.get("Surface"))
        self._occlusion()
        if surf is None:
            return None
        if surf.kind == "principled":
            p = self._principled(surf)
        else:
            p = self._flat(surf) if surf.kind == "unlit" else self._diffuse(surf)
        p.double_sided = not getattr(self.material, "use_backface_culling", False)
        p.unmapped = tuple(self.unmapped)
        return p

    def _base(self, p: MToonParams, color: ColorTerm, alpha: AlphaTerm, lit_scale: float = 1.0) -> tuple:
        textures = {}
        if color.image is not None:
            textures["base_color"] = self.tex_ref(color.image)
        if alpha.image is not None:
            if color.image is None:
                self.note(alpha.image, "alpha from a texture without a colour texture is not mapped: alpha 1")
                alpha = AlphaTerm(alpha.factor, None, alpha.vertex, alpha.cutoff)
            elif alpha.image.image != color.image.image:
                self.note(alpha.image, f"alpha from '{_img_name(alpha.image)}' while the colour comes from "
                                       f"'{_img_name(color.image)}': the colour texture's alpha is used")
        if color.vertex:
            self._check_vertex_colors(color.vertex_layer)
        p.vertex_colors = color.vertex
        p.vertex_alpha = alpha.vertex
        base = tuple(c * lit_scale for c in color.factor)
        p.base_color = base + (float(alpha.factor),)
        self._alpha_mode(p, alpha)
        return base, textures

    def _alpha_mode(self, p: MToonParams, alpha: AlphaTerm) -> None:
        mat = self.material
        blended = getattr(mat, "surface_render_method", "DITHERED") == "BLENDED" \
            or getattr(mat, "blend_method", "") == "BLEND"
        if alpha.cutoff is not None:
            p.alpha_mode, p.alpha_cutoff = "MASK", float(alpha.cutoff)
        elif alpha.varying:
            # EEVEE's dithered (hashed) transparency of a texture alpha reads as a cut-out
            p.alpha_mode = "BLEND" if blended else "MASK"
            p.alpha_cutoff = float(getattr(mat, "alpha_threshold", 0.5) or 0.5)
        elif alpha.factor < 0.999:
            p.alpha_mode = "BLEND"

    def _principled(self, surf: Surface) -> MToonParams:
        bsdf = surf.node
        p = MToonParams(source="principled")
        color = self.color(bsdf.inputs["Base Color"])
        alpha = self.alpha(bsdf.inputs["Alpha"]).times(surf.alpha)
        base, textures = self._base(p, color, alpha)
        read_metal(self, bsdf, p, textures)
        if "base_color" in textures:
            textures["shade_multiply"] = self.tex_ref(color.image)
        p.shade_color = shade_from_base(base)

        em = self.color(bsdf.inputs["Emission Color"])
        strength = self._const(bsdf.inputs.get("Emission Strength"), 1.0)
        emissive = tuple(c * strength for c in em.factor)
        if em.image is not None:
            textures["emissive"] = self.tex_ref(em.image)
        if em.vertex:
            self.note(None, "vertex colours on the emission are not mapped")
        for enode in surf.emission:
            extra = self.color(enode.inputs["Color"])
            s = self._const(enode.inputs.get("Strength"), 1.0)
            if extra.image is not None:
                self.note(enode, "an added Emission shader's texture is not mapped: its colour factor only")
            emissive = tuple(a + b * s for a, b in zip(emissive, extra.factor))
        p.emissive = emissive if max(emissive) > 0.0 else (0.0, 0.0, 0.0)
        if "emissive" in textures and max(emissive) <= 0.0:
            del textures["emissive"]

        nsrc = self.link(bsdf.inputs.get("Normal"))
        if nsrc is not None:
            nnode = nsrc[0]
            if nnode.type == "NORMAL_MAP":
                isrc = self.link(nnode.inputs.get("Color"))
                strength = self._const(nnode.inputs.get("Strength"), 1.0)
                if isrc is not None and isrc[0].type == "TEX_IMAGE" and isrc[0].image is not None:
                    textures["normal"] = self.tex_ref(isrc[0], strength)
                    p.normal_scale = strength
                    if nnode.space != "TANGENT":
                        self.note(nnode, f"{nnode.space} space normal map read as tangent space")
                    self._check_uv_map(nnode, nnode.uv_map)
                elif isrc is not None:
                    self.note(isrc[0], "normal map colour not from an image: not mapped")
            else:
                self.note(nnode, f"{nnode.bl_label} on Normal is not mapped")
        transmission = bsdf.inputs.get("Transmission Weight")
        if transmission is not None and (transmission.is_linked or float(transmission.default_value) > 0.0):
            self.note(bsdf, "transmission is not mapped: drawn opaque")
        p.textures = textures
        return p

    def _flat(self, surf: Surface) -> MToonParams:
        """Emission / KHR_materials_unlit: the base colour shown as it is."""
        p = MToonParams(source="unlit", unlit=True)
        node = surf.node
        if node is None:         # a lone Transparent BSDF
            color, strength = ColorTerm((0.0, 0.0, 0.0)), 1.0
        else:
            color = self.color(node.inputs["Color"])
            strength = self._const(node.inputs.get("Strength"), 1.0)
        base, textures = self._base(p, color, surf.alpha, strength)
        p.shade_color = base
        p.textures = textures
        return p

    def _diffuse(self, surf: Surface) -> MToonParams:
        p = MToonParams(source="principled")
        color = self.color(surf.node.inputs["Color"])
        base, textures = self._base(p, color, surf.alpha)
        if "base_color" in textures:
            textures["shade_multiply"] = self.tex_ref(color.image)
        p.shade_color = shade_from_base(base)
        p.textures = textures
        return p

    def _occlusion(self) -> None:
        for node in self.material.node_tree.nodes:
            if node.type != "GROUP" or node.node_tree is None:
                continue
            if not any(node.node_tree.name.startswith(g) for g in OCCLUSION_GROUPS):
                continue
            occ = node.inputs.get("Occlusion")
            src = self.link(occ) if occ is not None else None
            if src is not None:
                tex, steps = src[0], 0
                while tex is not None and tex.type != "TEX_IMAGE" and steps < MAX_DEPTH:
                    nxt = next((s for s in tex.inputs if s.is_linked), None)
                    up = self.link(nxt) if nxt is not None else None
                    tex, steps = (up[0] if up is not None else None), steps + 1
                what = f"texture '{_img_name(tex)}'" if tex is not None and tex.type == "TEX_IMAGE" else "its input"
                self.note(node, f"occlusion ({what}) is not used for lighting")


def meshes_using(material) -> list:
    """Meshes with ``material`` in a slot (for per-mesh checks of UV maps and colour attributes)."""
    import bpy

    return [me for me in bpy.data.meshes if any(m == material for m in me.materials)]


def read_node_tree(material) -> tuple:
    """``(MToonParams or None, unmapped messages)`` for ``material``'s node tree; None when it has
    no readable surface shader (the messages say why)."""
    if getattr(material, "node_tree", None) is None:
        return None, ()
    r = Reader(material)
    p = r.read()
    if p is None and not r.unmapped:
        r.note(None, "no surface shader is connected to the Material Output")
    return p, tuple(r.unmapped)
