"""The MToon geometry shaders (forward, outline, shadow), all built with ``build_shader`` so the
shared vertex layout and ``glsl/skinning.glsl`` are used, and compiled once per process.

Uniform design: everything per frame (camera, up to 16 lights, shadow matrix and parameters,
world/GI colours, time) lives in one std140 block ``fr`` (FrameBlock); every material is one
std140 block ``mt`` (MToonMaterial, 336 bytes; its ``pad0`` int is the flags word: vertex colour,
vertex alpha, unlit) made once per frame; per draw only the push
constants ``model`` (mat4), ``object_id`` and the skinning include's ``skin_influences``,
``morph_mode`` and ``instance_mode`` change (84 bytes with the shadow pass's ``shadow_cascade``,
under Blender's 128-byte push-constant budget).  Normal matrices are computed in the vertex shader
from the model matrix (cofactor, shared with skinning.glsl).  Instanced draws
(engine/gpu/passes/instancing.py) take the model matrix and object id per instance from the include's
``instance_data`` (``instance_model``, ``instance_info``); the object id reaches the fragment
stage as the flat ``v_object_id``.

Variants: each shader is compiled per ``spec`` (a tuple of defines; see "Specialised variants"
below): the material's texture set, alpha and outline mode, flags, UV animation, rim and shadow
receipt, the frame's light count and kinds, PCF radius and cascade count, and the draw group's
vertex class become constants.  Mesa's llvmpipe runs both sides of every branch under lane masks
and one more masked pass through a loop with a run-time bound, so these constants remove the
work of every path a draw cannot take (demo at 1280x720: shadow 19 -> 7 ms, forward 53 -> 20 ms).
Uniforms the variant does not read stay declared where every draw sets them (SKIN_STATIC keeps
``skin_influences``); a material block no OPAQUE caster reads is bound when present.
"""
from __future__ import annotations

from .common import MAT_FLAG_UNLIT, MAT_FLAG_VERTEX_ALPHA, MAT_FLAG_VERTEX_COLOR, SAMPLER_NAMES, blocks_source
from .local_shadows import LOCAL_FACE0
from .shader_lib import build_shader, load_glsl

SAMPLERS = (("FLOAT_2D", "shadow_map"), ("FLOAT_2D", "local_shadow_map"), ("FLOAT_2D", "lamp_data"),
            ("FLOAT_2D", "lamp_lists")) + tuple(("FLOAT_2D", n) for n in SAMPLER_NAMES)
UNIFORM_BUFS = (("FrameBlock", "fr"), ("MToonMaterial", "mt"))
# light_link: the object's light-link word (engine/gpu/passes/lamp_links.py; instanced draws read
# it from instance_data)
PUSH = (("MAT4", "model"), ("INT", "object_id"), ("INT", "light_link"))

_FORWARD_VS = """
void main()
{
#ifdef SKIN_FETCH
  vec3 p, n, t;
  float handed = fetch_surface(p, n, t);   /* skinned once this frame (skin_once.py) */
#else
  vec3 p = pos; vec3 n = nor; vec3 t = tan.xyz;
  morph_vertex(p, n, t);
  float handed = skin_vertex_handed(p, n, t);
#endif
  mat4 M = instance_model(model);
  v_object_id = (instance_mode != 0) ? instance_info().x : float(object_id);
  v_link = (instance_mode != 0) ? instance_info().w : float(light_link);
  vec4 wp = M * vec4(p, 1.0);
  v_world = wp.xyz;
  v_normal = skin_normal_matrix(mat3(M)) * n;
  /* the bitangent sign: the UV handedness, flipped by a mirroring object or joint matrix */
  handed *= (determinant(mat3(M)) < 0.0) ? -1.0 : 1.0;
  v_tangent = vec4(mat3(M) * t, ((tan.w < 0.0) ? -1.0 : 1.0) * handed);
  v_uv = uv;
  v_color = col;
  gl_Position = fr.view_projection * wp;
}
"""

# The material block's flags word and a per-fragment view of the material.  The fragment stages
# copy the uniform block ``mt`` into ``mt_frag`` with this fragment's vertex colour applied (base
# and shade colour x RGB, base alpha x A, as a Color Attribute node on Base Color does), and
# ``#define mt mt_frag`` makes the shared MToon functions (``_mtoon_fragment_lib``) read
# that view; so vertex colours reach the lit colour, the shade colour and the alpha test alike.
# (Blender's GL backend itself names the block's instance through a macro ``mt``: it is expanded
# in ``load_fragment_material`` before the ``#undef``.)
_MATERIAL_VIEW = f"""
#ifdef SPEC_FLAGS
#define MAT_FLAGS SPEC_FLAGS
#else
#define MAT_FLAGS mt.pad0
#endif
#define MAT_VERTEX_COLOR {MAT_FLAG_VERTEX_COLOR}
#define MAT_VERTEX_ALPHA {MAT_FLAG_VERTEX_ALPHA}
#define MAT_UNLIT {MAT_FLAG_UNLIT}
MToonMaterial mt_frag;
void load_fragment_material()
{{
  mt_frag = mt;
  if ((MAT_FLAGS & MAT_VERTEX_COLOR) != 0) {{
    mt_frag.base_color.rgb *= v_color.rgb;
    mt_frag.shade_color.rgb *= v_color.rgb;
  }}
  if ((MAT_FLAGS & MAT_VERTEX_ALPHA) != 0) {{
    mt_frag.base_color.a *= v_color.a;
  }}
}}
#undef mt
#define mt mt_frag
"""

_FORWARD_FS = """
void main()
{
  load_fragment_material();
  vec2 uvA = animate_uv(v_uv);
  AOV_OUT(uvA);
  vec4 base = mtoon_base(uvA);
#ifdef SPEC_ID_ONLY
  /* a coverage sample (engine/gpu/passes/samples.py): only which surface covers the sample */
  frag_color = vec4(v_object_id * 2.0, 0.0, 0.0, 1.0);
  frag_aux = vec4(0.0);
  return;
#endif
  float face = gl_FrontFacing ? 1.0 : -1.0;   /* back faces (double-sided) flip the frame */
  vec3 ngeo = normalize(v_normal) * face;
#ifdef SPEC_HOLDOUT
  /* a holdout (object, collection or Holdout shader): alpha 0 and RGB 0, depth still written */
  frag_color = vec4(0.0);
  frag_aux = vec4(ngeo, v_object_id);
  PASS_OUT(0.0, 0.0, vec3(0.0), 0.0);
  return;
#endif
  if ((MAT_FLAGS & MAT_UNLIT) != 0) {
    /* unlit (KHR_materials_unlit, an Emission shader): the base colour as it is */
    frag_color = base;
    frag_aux = vec4(ngeo, v_object_id);
#ifdef SPEC_PASSES
    pass_emit = base.rgb;              /* (EEVEE: an Emission shader's colour is Emission) */
#endif
    PASS_OUT(1.0, 1.0, vec3(0.0), 0.0);
    pass_shadow = 1.0;
    pass_shade = 1.0;
    PASS_BLEND(base.a, ngeo);
    return;
  }
  vec3 N = ngeo;
  if (has_tex(TEX_NORMAL)) {
    vec3 T = v_tangent.xyz * face;
    T = T - ngeo * dot(ngeo, T);
    float tl = length(T);
    if (tl > 1e-6) {
      T /= tl;
      /* back faces flip the whole tangent frame (as Blender's normal map does) */
      vec3 B = cross(ngeo, T) * v_tangent.w * face;
      vec3 tn = texture(tex_normal, tex_uv(TEX_NORMAL, uvA)).rgb * 2.0 - 1.0;
      tn.xy *= mt.params0.z;
      N = normalize(T * tn.x + B * tn.y + ngeo * tn.z);
    }
  }
#ifdef SPEC_NO_SHADOW
  float vis = 1.0;
#else
  float vis = (mt.uv_anim.w > 0.5) ? shadow_visibility(v_world, ngeo) : 1.0;
#endif
  vec3 c = mtoon_shade(v_world, N, ngeo, uvA, base.rgb, vis);
  frag_color = vec4(c, base.a);
  frag_aux = vec4(N, v_object_id);
#ifdef SPEC_PASSES
  pass_diffuse = base.rgb;
  pass_emit = mt.emissive.rgb;
  if (has_tex(TEX_EMISSIVE)) {
    pass_emit *= texture(tex_emissive, tex_uv(TEX_EMISSIVE, uvA)).rgb;
  }
#endif
  PASS_OUT(pass_shadow, pass_shade, pass_rim, 0.0);
  PASS_BLEND(base.a, N);
}
"""

_OUTLINE_VS = """
void main()
{
  /* morph and skin first, then expand along the skinned smoothed normal */
#ifdef SKIN_FETCH
  vec3 p, n;
  fetch_outline(p, n);                       /* skinned once this frame (skin_once.py) */
#else
  vec3 p = pos; vec3 n = snor; vec3 t = tan.xyz;
  morph_outline(p, n);
  skin_vertex(p, n, t);
#endif
  mat4 M = instance_model(model);
  v_object_id = (instance_mode != 0) ? instance_info().x : float(object_id);
  v_link = (instance_mode != 0) ? instance_info().w : float(light_link);
  vec4 wp = M * vec4(p, 1.0);
  vec3 wn = skin_normal_matrix(mat3(M)) * n;
  float nl = length(wn);
  wn = (nl > 0.0) ? wn / nl : vec3(0.0);
  float w = mt.params1.x;
  if (has_tex(TEX_OUTLINE_W)) {
    w *= textureLod(tex_outline_w, tex_uv(TEX_OUTLINE_W, uv), 0.0).g;
  }
#ifdef SPEC_OUTLINE_MODE
  const int mode = SPEC_OUTLINE_MODE;
#else
  int mode = int(mt.params1.y + 0.5);
#endif
  vec4 cp;
  if (mode == 1) {
    /* worldCoordinates: metres along the world-space normal (independent of object scale) */
    wp.xyz += wn * w;
    cp = fr.view_projection * wp;
  }
  else {
    /* screenCoordinates: w is a fraction of the screen height, measured in pixels along the
     * projected normal so it is aspect-correct and does not change with distance */
    cp = fr.view_projection * wp;
    vec4 cn = fr.view_projection * vec4(wn, 0.0);
    vec2 dir = (cn.xy * cp.w - cp.xy * cn.w) * fr.viewport.xy;
    float l = length(dir);
    if (l > 1e-12) {
      dir /= l;
      vec2 off_ndc = dir * (w * fr.viewport.y) * 2.0 * fr.viewport.zw;
      cp.xy += off_ndc * cp.w;
    }
  }
  cp.z += 2e-5 * cp.w;  /* depth bias: the hull never wins against the surface it wraps */
  v_world = wp.xyz;
  v_normal = wn;
  v_tangent = vec4(0.0);
  v_uv = uv;
  v_color = col;
  gl_Position = cp;
}
"""

_OUTLINE_FS = """
void main()
{
  load_fragment_material();
  vec2 uvA = animate_uv(v_uv);
  AOV_OUT(uvA);
  vec4 base = mtoon_base(uvA);
#ifdef SPEC_ID_ONLY
  frag_color = vec4(v_object_id * 2.0 + 1.0, 0.0, 0.0, 1.0);   /* the object's outline */
  frag_aux = vec4(0.0);
  return;
#endif
  vec3 N = normalize(v_normal);           /* outward normal: the hull's back faces are drawn */
#ifdef SPEC_NO_SHADOW
  float vis = 1.0;
#else
  float vis = (mt.uv_anim.w > 0.5) ? shadow_visibility(v_world, N) : 1.0;
#endif
  vec3 c = mtoon_shade(v_world, N, N, uvA, base.rgb, vis);
  frag_color = vec4(mt.outline_color.rgb * mix(vec3(1.0), c, mt.outline_color.w), base.a);
  frag_aux = vec4(N, v_object_id);
  PASS_OUT(0.0, 0.0, vec3(0.0), 1.0);   /* outline coverage */
}
"""

_SHADOW_VS = f"""
#define LOCAL_FACE0 {LOCAL_FACE0}
""" + """
void main()
{
#ifdef SKIN_FETCH
  vec3 p = fetch_position();                 /* skinned once this frame (skin_once.py) */
#else
  vec3 p = skin_position(morph_position(pos));
#endif
  v_uv = uv;
  vec4 wp = instance_model(model) * vec4(p, 1.0);
  /* shadow_cascade 0-3: a cascade of the sun; from LOCAL_FACE0 on: a face of a local lamp's atlas
   * (engine/gpu/passes/local_shadows.py), a perspective map (variants fix which one it is) */
#if defined(SPEC_LOCAL_SHADOW)
  gl_Position = fr.local_matrix[shadow_cascade - LOCAL_FACE0] * wp;
#else
#if !defined(SPEC_CASCADE_SHADOW)
  if (shadow_cascade >= LOCAL_FACE0) {
    gl_Position = fr.local_matrix[shadow_cascade - LOCAL_FACE0] * wp;
    return;
  }
#endif
  vec4 cp = fr.cascade_matrix[shadow_cascade] * wp;
  /* pancaking: casters beyond the cascade's near plane (towards the sun) are clamped onto it, so
   * they still cast; this only moves depths away from the sun, never adds false shadow */
  cp.z = max(cp.z, -cp.w);
  gl_Position = cp;
#endif
}
"""

_SHADOW_FS = """
void main()
{
#ifdef SPEC_ALPHA_MODE
  const int mode = SPEC_ALPHA_MODE;  /* OPAQUE: no discard, no texture read (early depth) */
#else
  int mode = int(mt.params1.w + 0.5);
#endif
  if (mode != 0) {
    vec2 uvA = animate_uv(v_uv);
    float a = mt.base_color.a;
    if (has_tex(TEX_BASE)) {
      a *= texture(tex_base, tex_uv(TEX_BASE, uvA)).a;
    }
    /* MASK casts where it is drawn; BLEND casts where it is at least half opaque */
    if (a < ((mode == 1) ? mt.params0.w : 0.5)) {
      discard;
    }
  }
  frag_color = vec4(0.0);
}
"""

# Render passes (engine/gpu/passes/render_passes.py): a SPEC_PASSES variant writes four more targets,
# pass0 = (received shadow, lit/shade ramp, Material > Pass Index, outline coverage),
# pass1 = (rim colour, 0), pass2 = (Diffuse Color: the base colour, 0) and pass3 = (Emission, 0);
# without SPEC_PASSES nothing more is written.
_PASS_OUT = """
#ifdef SPEC_PASSES
vec3 pass_diffuse = vec3(0.0);
vec3 pass_emit = vec3(0.0);
#define PASS_OUT(shadow, shade, rim, outline) \\
  frag_pass0 = vec4(shadow, shade, float(mt.pad1), outline); frag_pass1 = vec4(rim, 0.0); \\
  frag_pass2 = vec4(pass_diffuse, 0.0); frag_pass3 = vec4(pass_emit, 0.0)
#else
#define PASS_OUT(shadow, shade, rim, outline)
#endif
"""

# A BLEND surface composited into the passes (pipeline.py ``_blend_into_passes``): draw 1
# (SPEC_PASS_BLEND 1, multiplied into every target) keeps 1 - alpha of what lies behind, draw 2
# (SPEC_PASS_BLEND 2, added) adds alpha x its values; colour untouched (x 1, + 0).  The Normal
# and index passes take the surface where alpha >= SPEC_ALPHA_THRESHOLD (the view layer's Alpha
# Threshold), else keep what lies behind: Cycles overwrites its index passes at each surface the
# first sample's camera path meets and stops at one at least that opaque, passing a thinner one
# with probability 1 - alpha, so this is its likeliest result at the default threshold 0.5.
_PASS_BLEND = """
#ifdef SPEC_PASS_BLEND
void pass_blend(float a, vec3 N)
{
  bool front = a >= SPEC_ALPHA_THRESHOLD;
#if SPEC_PASS_BLEND == 1
  frag_color = vec4(1.0);
  /* (reads v_object_id, never negative, so every variant keeps the object_id push constant) */
  frag_aux = (front || v_object_id < -0.5) ? vec4(0.0) : vec4(1.0);
  frag_pass0 = vec4(1.0 - a, 1.0 - a, front ? 0.0 : 1.0, 1.0 - a);
  frag_pass1 = vec4(vec3(1.0 - a), 1.0);
  frag_pass2 = vec4(vec3(1.0 - a), 1.0);
  frag_pass3 = vec4(vec3(1.0 - a), 1.0);
#else
  frag_color = vec4(0.0);
  frag_aux = front ? vec4(N, v_object_id) : vec4(0.0);
  frag_pass0 = vec4(pass_shadow * a, pass_shade * a, front ? float(mt.pad1) : 0.0, 0.0);
  frag_pass1 = vec4(pass_rim * a, 0.0);
  frag_pass2 = vec4(pass_diffuse * a, 0.0);
  frag_pass3 = vec4(pass_emit * a, 0.0);
#endif
}
#define PASS_BLEND(a, N) pass_blend(a, N)
#else
#define PASS_BLEND(a, N)
#endif
"""
# An AOV's drawn input (engine/gpu/passes/aov_draw.py): the material block bound is the AOV's
# (factor in base_color, the image in the base colour slot, the colour attribute flags), and
# SPEC_AOV says what is written: 1 the colour (RGB, alpha = the factor's: 1 where drawn, 0 on
# the materials without such an input), 2 its luminance (GPU materials' implicit colour -> float:
# Rec.709 coefficients, engine/features/passes/aov.py LUMINANCE), 3 the alpha (factor x image
# alpha x colour attribute alpha).  Nothing is shaded; the surface is never cut out.
_AOV_OUT = """
#ifdef SPEC_AOV
void aov_out(vec2 uvA)
{
  vec4 a = mt.base_color;
  if (has_tex(TEX_BASE)) {
    vec4 t = texture(tex_base, tex_uv(TEX_BASE, uvA));
#if SPEC_AOV == 3
    a.a *= t.a;
#else
    a.rgb *= t.rgb;
#endif
  }
#if SPEC_AOV == 2
  a = vec4(dot(a.rgb, vec3(0.2126, 0.7152, 0.0722)));
#elif SPEC_AOV == 3
  a = vec4(a.a);
#endif
  frag_color = a;
  /* (reads v_object_id, never negative, so the variant keeps the object_id push constant) */
  frag_aux = (v_object_id < -0.5) ? vec4(1.0) : vec4(0.0);
}
#define AOV_OUT(uvA) aov_out(uvA); return
#else
#define AOV_OUT(uvA)
#endif
"""
_SURFACE_OUT = (("VEC4", "frag_color"), ("VEC4", "frag_aux"))
_PASS_TARGETS = (("VEC4", "frag_pass0"), ("VEC4", "frag_pass1"), ("VEC4", "frag_pass2"), ("VEC4", "frag_pass3"))


def _surface_outputs(defines) -> tuple:
    return _SURFACE_OUT + (_PASS_TARGETS if "SPEC_PASSES" in defines else ())


_SURFACE_IFACE = (("smooth", "VEC3", "v_world"), ("smooth", "VEC3", "v_normal"),
                  ("smooth", "VEC4", "v_tangent"), ("smooth", "VEC2", "v_uv"), ("smooth", "VEC4", "v_color"),
                  ("flat", "FLOAT", "v_object_id"), ("flat", "FLOAT", "v_link"))


def _build(name, vs, fs, interfaces, outputs, push=PUSH, defines=()):
    common = load_glsl("mtoon_common.glsl")
    return build_shader(name, common + vs, fs, interfaces=interfaces, push_constants=push,
                        samplers=SAMPLERS, fragment_outputs=outputs, typedefs=blocks_source(),
                        uniform_bufs=UNIFORM_BUFS, defines=defines)


# ------------------------------------------------------------------------------------------------
# Specialised variants
# ------------------------------------------------------------------------------------------------
# llvmpipe (Mesa's software rasteriser, what a headless render farm and CI run) executes both
# sides of every branch under lane masks: a sample of an absent texture, the spot-light cone, the
# shadow lookup of a material that receives none, the MASK discard, the span loop of vertices
# with more than 8 influences and the Preserve Volume blend cost every fragment and vertex even
# when the uniform that selects them is off.  A variant is the same GLSL with those choices made
# constant (the SPEC_* / SKIN_* defines of glsl/mtoon_common.glsl and glsl/skinning.glsl), so
# the compiler drops what cannot run; the arithmetic that does run is unchanged.  ``spec`` None
# is the general shader (every choice at run time), used whenever a variant cannot be made.

#: False: every draw uses the general shaders (the reference the variant tests compare with)
SPECIALIZE = True


def material_spec(mat, tex_present: int) -> dict:
    """The material's constant choices: texture slots present, alpha mode, flags word, whether
    its UVs animate, whether it receives a shadow (engine/gpu/passes/common.pack_material) and
    whether it has a rim (a rim colour or a matcap)."""
    from .common import ALPHA_MODES, OUTLINE_MODES, TEX_SLOTS, material_flags, receive_shadow_word

    matcap = bool(int(tex_present) & (1 << TEX_SLOTS.index("matcap")))
    return {"tex": int(tex_present), "alpha": int(ALPHA_MODES.get(mat.alpha_mode, 0)),
            "outline": int(OUTLINE_MODES.get(mat.outline_width_mode, 0)),
            "flags": int(material_flags(mat)),
            "uv_anim": bool(mat.uv_scroll_x != 0.0 or mat.uv_scroll_y != 0.0 or mat.uv_rotation != 0.0),
            "receive": receive_shadow_word(mat) > 0.5,
            "rim": matcap or any(float(c) != 0.0 for c in list(mat.rim_color)[:3]),
            "metal": float(getattr(mat, "metallic", 0.0)) > 0.0 and not getattr(mat, "unlit", False)}


#: the defines of each vertex class (FrameInstances.vertex_class): "general" (more than 8
#: influences or a Preserve Volume palette: everything at run time), "lbs8" / "lbs4" (linear
#: blending of at most 8 / 4 influences), "static" (no palette) and "fetch" (skinned once this
#: frame by engine/gpu/passes/skin_once.py: the passes read the result)
VERTEX_DEFINES = {"general": (), "lbs8": ("SKIN_LBS8",), "lbs4": ("SKIN_LBS8", "SKIN_MAX4"),
                  "static": ("SKIN_LBS8", "SKIN_STATIC"), "fetch": ("SKIN_LBS8", "SKIN_FETCH")}


def frame_spec(lights, shadows_on: bool, pcf: int = 1, cascades: int = 0, local_shadows: int = 0,
               clusters: bool = False, soft: bool = False) -> tuple:
    """The frame's part of the forward / outline variants: (shadows on, every light a sun, light
    count, PCF radius, cascade count, shadowed local lamps, local lamps through clusters) of the
    FrameBlock the pipeline packs (``lights``: the block's lamps, the suns)."""
    return (bool(shadows_on), all(l.kind == "SUN" for l in lights), len(lights), int(pcf),
            int(cascades) if shadows_on else 0, int(local_shadows), bool(clusters), bool(soft))


def surface_spec(mspec, frame, vclass: str, outline: bool = False) -> tuple:
    """Defines of a forward / outline variant: ``mspec`` (material_spec), ``frame``
    (frame_spec) and the draw group's vertex class (VERTEX_DEFINES); an outline variant also
    fixes the outline width mode (world or screen coordinates)."""
    shadows_on, sun_only, lights, pcf, cascades, local, clusters, soft = frame
    d: list[str | tuple[str, str]] = [("SPEC_TEX_MASK", str(mspec["tex"])), ("SPEC_ALPHA_MODE", str(mspec["alpha"])),
         ("SPEC_FLAGS", str(mspec["flags"]))]
    if not mspec["uv_anim"]:
        d.append("SPEC_NO_UV_ANIM")
    if not mspec["rim"]:
        d.append("SPEC_NO_RIM")
    if not mspec.get("metal", False):
        d.append("SPEC_NO_METAL")
    if not (shadows_on and mspec["receive"]):
        d.append("SPEC_NO_SHADOW")
    else:
        d.append(("SPEC_CASCADES", str(cascades)))
    if not (local and mspec["receive"]):
        d.append("SPEC_NO_LOCAL_SHADOW")
    else:
        d.append(("SPEC_LOCAL_SHADOWS", str(local)))
    if not clusters:
        d.append("SPEC_NO_CLUSTERS")
    if not soft:
        d.append("SPEC_HARD_SHADOWS")     # Soft Shadows off: no blocker search, no toon step on the shadow
    if mspec["receive"] and (shadows_on or local):
        d.append(("SPEC_PCF", str(pcf)))
    if sun_only:
        d.append("SPEC_SUN_ONLY")
    d.append(("SPEC_LIGHTS", str(lights)))
    if outline:
        d.append(("SPEC_OUTLINE_MODE", str(mspec["outline"])))
    return tuple(d) + VERTEX_DEFINES[vclass]


def shadow_spec(mspec, vclass: str, local: bool = False) -> tuple:
    """Defines of a shadow variant: OPAQUE casters read no texture and never discard; ``local``:
    a face of a local lamp (a perspective map, SPEC_LOCAL_SHADOW)."""
    if mspec["alpha"] == 0:
        d: list[str | tuple[str, str]] = [("SPEC_ALPHA_MODE", "0"), ("SPEC_TEX_MASK", "0"), "SPEC_NO_UV_ANIM"]
    else:
        d = [("SPEC_ALPHA_MODE", str(mspec["alpha"])), ("SPEC_TEX_MASK", str(mspec["tex"]))]
        if not mspec["uv_anim"]:
            d.append("SPEC_NO_UV_ANIM")
    d.append("SPEC_LOCAL_SHADOW" if local else "SPEC_CASCADE_SHADOW")
    return tuple(d) + VERTEX_DEFINES[vclass]


def _variant(cache, key: str, spec, make):
    """The shader ``key`` for ``spec`` (None: the general one) from ``cache`` (the pipeline's
    GpuCache); a variant that does not compile falls back to the general shader."""
    if spec is None or not SPECIALIZE:
        return cache.shader(key, lambda: make(()))
    name = key + "|" + ";".join(d if isinstance(d, str) else f"{d[0]}={d[1]}" for d in spec)

    def build():
        try:
            return make(spec)
        except Exception as ex:  # never lose the frame to a variant: the general shader draws it
            print(f"Stylized: shader variant {name} failed ({ex}); using the general shader")
            return cache.shader(key, lambda: make(()))

    return cache.shader(name, build)


def _mtoon_fragment_lib() -> str:
    """The shared MToon fragment functions, in include order: the common declarations
    (glsl/mtoon_common.glsl), the sun's and local lamps' shadow lookups (glsl/mtoon_shadows.glsl)
    and the lights and surface shading that call them (glsl/mtoon_shading.glsl)."""
    return load_glsl("mtoon_common.glsl") + load_glsl("mtoon_shadows.glsl") + load_glsl("mtoon_shading.glsl")


def forward_shader(cache, spec=None):
    return _variant(cache, "mtoon_forward", spec, lambda d: _build(
        "stylized_mtoon_forward", _FORWARD_VS,
        _MATERIAL_VIEW + _PASS_OUT + _mtoon_fragment_lib() + _PASS_BLEND
        + _AOV_OUT + _FORWARD_FS,
        _SURFACE_IFACE, _surface_outputs(d), defines=d))


def outline_shader(cache, spec=None):
    return _variant(cache, "mtoon_outline", spec, lambda d: _build(
        "stylized_mtoon_outline", _OUTLINE_VS,
        _MATERIAL_VIEW + _PASS_OUT + _mtoon_fragment_lib() + _AOV_OUT + _OUTLINE_FS,
        _SURFACE_IFACE, _surface_outputs(d), defines=d))


def shadow_shader(cache, spec=None):
    return _variant(cache, "mtoon_shadow", spec, lambda d: _build(
        "stylized_mtoon_shadow", _SHADOW_VS, load_glsl("mtoon_common.glsl") + _SHADOW_FS,
        (("smooth", "VEC2", "v_uv"),), (("VEC4", "frag_color"),), push=PUSH + (("INT", "shadow_cascade"),),
        defines=d))
