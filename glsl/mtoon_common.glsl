/* MToon 1.0 shading shared by the forward, outline and shadow passes (see
 * ../shared/design/mtoon-facts.md §2/§3).  Declared by engine/gpu/passes/mtoon_shaders.py:
 *   uniform block  fr  (FrameBlock)     camera, lights, shadow, world
 *   uniform block  mt  (MToonMaterial)  one material
 *   samplers       shadow_map, tex_base, tex_shade, tex_normal, tex_shift, tex_emissive,
 *                  tex_rim, tex_matcap, tex_outline_w, tex_uvmask, tex_metal
 * Blender world space is Z-up: the spec's world up (+Y glTF) is +Z here.
 */

#define TEX_BASE 0
#define TEX_SHADE 1
#define TEX_NORMAL 2
#define TEX_SHIFT 3
#define TEX_EMISSIVE 4
#define TEX_RIM 5
#define TEX_MATCAP 6
#define TEX_OUTLINE_W 7
#define TEX_UVMASK 8
#define TEX_METAL 9

bool has_tex(int slot)
{
#ifdef SPEC_TEX_MASK
  /* a specialised variant (engine/gpu/passes/mtoon_shaders.py material_spec): the material's
   * texture set is a constant, so the samples of absent slots are compiled out (llvmpipe runs
   * both sides of a branch) */
  return (SPEC_TEX_MASK & (1 << slot)) != 0;
#else
  return (mt.tex_mask & (1 << slot)) != 0;
#endif
}

/* KHR_texture_transform of one slot, applied after the UV animation (Blender UV space). */
vec2 tex_uv(int slot, vec2 uv)
{
  vec4 x = mt.uv_xform[slot];
  return uv * x.zw + x.xy;
}

/* Specialised variants (engine/gpu/passes/mtoon_shaders.py ``Spec``) define, from the material and
 * the frame: SPEC_TEX_MASK (the texture slots present), SPEC_ALPHA_MODE, SPEC_FLAGS,
 * SPEC_NO_UV_ANIM, SPEC_NO_SHADOW (nothing to sample), SPEC_SUN_ONLY (every light is a sun),
 * SPEC_LIGHTS (the light count), SPEC_PCF (PCF radius), SPEC_CASCADES (cascade count),
 * SPEC_NO_RIM (black rim colour, no matcap), SPEC_NO_METAL (metallic 0);
 * glsl/skinning.glsl: SKIN_LBS8.  Without them every choice is made at run time as before. */

/* UV animation (§2.7) in Blender's V-up convention: CCW rotation about the centre first,
 * then scroll (x, -y), both scaled by the mask's B channel. */
vec2 animate_uv(vec2 uv)
{
#ifdef SPEC_NO_UV_ANIM
  return uv;
#else
  float t = fr.world_sky.w;
  if (mt.uv_anim.x == 0.0 && mt.uv_anim.y == 0.0 && mt.uv_anim.z == 0.0) {
    return uv;
  }
  float m = has_tex(TEX_UVMASK) ? texture(tex_uvmask, tex_uv(TEX_UVMASK, uv)).b : 1.0;
  float th = mt.uv_anim.z * t * m;
  float c = cos(th), s = sin(th);
  vec2 p = uv - 0.5;
  vec2 r = vec2(c * p.x - s * p.y, s * p.x + c * p.y) + 0.5;
  return r + vec2(mt.uv_anim.x, -mt.uv_anim.y) * t * m;
#endif
}

float linearstep_guarded(float a, float b, float t)
{
  float w = b - a;
  return (w > 1e-6) ? clamp((t - a) / w, 0.0, 1.0) : ((t >= a) ? 1.0 : 0.0);
}

/* Raw GI: hemisphere irradiance between the ground (-Z) and sky (+Z) colours. With a uniform
 * world colour both are equal and the equalisation has no visible effect. */
vec3 raw_gi(vec3 n)
{
  return mix(fr.world_ground.rgb, fr.world_sky.rgb, clamp(n.z * 0.5 + 0.5, 0.0, 1.0));
}

