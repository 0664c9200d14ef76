/* MToon fragment-stage functions (after mtoon_common.glsl and mtoon_shadows.glsl): lights (sun
 * and local lamps, light linking), surface shading (toon ramp, metal, GI, emission, rim) and
 * alpha.  The shadow lookups they use are in mtoon_shadows.glsl. */

/* Light linking (engine/gpu/passes/lamp_links.py): v_link holds the bits of the linked lamps whose
 * receivers leave this object out; a lamp's bit is -1 when it lights every object. */
bool link_excluded(int bit)
{
  return bit >= 0 && ((int(v_link + 0.5) >> bit) & 1) != 0;
}

/* Light i at wpos: L (unit, towards the light) and C, MToon's light colour there.  fr.light_color
 * holds Blender's power already converted to MToon's light colour (engine/gpu/passes/lights.py
 * mtoon_light_colors: sun E/pi; point and spot P/(4 pi^2) at 1 m; area P/pi^2 at 1 m on its axis),
 * so here only the geometry remains: 0 = sun, 1 = point (1/r^2), 2 = spot (1/r^2 x Blender's cone
 * mask: smoothstep over the blend width), 3 = area (1/r^2 x cos of the angle to its axis: a
 * one-sided Lambert emitter seen from afar). */
void light_sample(int i, vec3 wpos, out vec3 L, out vec3 C)
{
  if (link_excluded((int(fr.light_pos[i].w + 0.5) >> 2) - 1)) {
    L = vec3(0.0, 0.0, 1.0);
    C = vec3(0.0);
    return;
  }
  vec4 lp = fr.light_pos[i];
  vec4 ld = fr.light_dir[i];
  vec4 lc = fr.light_color[i];
#ifdef SPEC_SUN_ONLY
  L = -ld.xyz;
  C = lc.rgb;
#else
  int kind = int(lp.w + 0.5) & 3;   /* (w = kind + 4 x (light-link bit + 1)) */
  if (kind == 0) {
    L = -ld.xyz;
    C = lc.rgb;
    return;
  }
  vec3 dv = lp.xyz - wpos;
  float r2 = max(dot(dv, dv), 1e-8);
  L = dv * inversesqrt(r2);
  C = lc.rgb / r2;
  if (kind == 3) {
    C *= max(dot(-L, ld.xyz), 0.0);
  }
  else if (kind == 2) {
    float cos_half = ld.w;
    float t = dot(-L, ld.xyz);
    if (t <= cos_half) {
      C = vec3(0.0);
    }
    else {
      float smooth_w = lc.w;
      float x = t - cos_half;
      if (smooth_w > 0.0 && x < smooth_w) {
        C *= smoothstep(0.0, smooth_w, x);
      }
    }
  }
#endif
}

vec3 view_vector(vec3 wpos)
{
  return (fr.camera_pos.w > 0.5) ? -fr.camera_fwd.xyz : normalize(fr.camera_pos.xyz - wpos);
}

/* What the render passes read (engine/gpu/passes/render_passes.py, SPEC_PASSES variants): the
 * received shadow of the sun (1 = lit), the lit/shade ramp before the shadow (weighted by each
 * light's colour) and the rim term added to the colour. */
float pass_shadow = 1.0;
float pass_shade = 0.0;
vec3 pass_rim = vec3(0.0);

/* Metallic and roughness of a Principled material (engine/features/materials/metal.py): the constants
 * times the channel of tex_metal each reads (0-3 RGBA, 4 luminance, -1 none). */
vec2 metal_params(vec2 uvA)
{
  vec2 mr = mt.metal.xy;
  if (has_tex(TEX_METAL)) {
    vec4 t = texture(tex_metal, tex_uv(TEX_METAL, uvA));
    vec4 c = vec4(t.rgb, t.a);
    float lum = dot(t.rgb, vec3(0.2126, 0.7152, 0.0722));
    int cm = int(mt.metal.z + 0.5), cr = int(mt.metal.w + 0.5);
    if (mt.metal.z > -0.5) {
      mr.x *= (cm >= 4) ? lum : c[cm];
    }
    if (mt.metal.w > -0.5) {
      mr.y *= (cr >= 4) ? lum : c[cr];
    }
  }
  return clamp(mr, 0.0, 1.0);
}

/* Schlick's Fresnel of a metal of reflectance f0 at cosine c. */
vec3 metal_fresnel(vec3 f0, float c)
{
  float k = pow(1.0 - clamp(c, 0.0, 1.0), 5.0);
  return f0 + (1.0 - f0) * k;
}

/* The split-sum scale and bias of GGX reflection at N.V = nv (Karis' analytic fit of the table
 * EEVEE's reflections use): reflectance f0 reflects f0 * x + y of a uniform surrounding. */
vec2 ggx_split_sum(float nv, float roughness)
{
  vec4 r = roughness * vec4(-1.0, -0.0275, -0.572, 0.022) + vec4(1.0, 0.0425, 1.04, -0.04);
  float a004 = min(r.x * r.x, exp2(-9.28 * nv)) * r.x + r.y;
  return vec2(-1.04, 1.04) * a004 + r.zw;
}

/* GGX specular of one lamp per unit irradiance (D x height-correlated Smith visibility x N.L),
 * the lobe EEVEE's Principled BSDF gives a metal, with its Fresnel. */
vec3 ggx_lobe(vec3 N, vec3 V, vec3 L, float roughness, vec3 f0)
{
  float a = max(roughness * roughness, 2e-3);
  float a2 = a * a;
  vec3 H = normalize(L + V);
  float nl = max(dot(N, L), 0.0), nv = max(dot(N, V), 1e-4), nh = max(dot(N, H), 0.0);
  float d = nh * nh * (a2 - 1.0) + 1.0;
  float D = a2 / (3.14159265 * d * d);
  float vis = 0.5 / (nl * sqrt(nv * nv * (1.0 - a2) + a2) + nv * sqrt(nl * nl * (1.0 - a2) + a2) + 1e-6);
  return metal_fresnel(f0, dot(L, H)) * (D * vis * nl);
}

/* What one lamp adds (direction L, MToon light colour C, received shadow s): the lit/shade ramp
 * (shadow after the ramp: shadowed areas take the shade colour), the rim's light and the passes'
 * weights. */
struct ShadeAcc {
  vec3 direct;
  vec3 rim_light;
  float shade_sum;
  float weight;
  float shadow_sum;
};

void add_light(inout ShadeAcc acc, vec3 L, vec3 C, float s, vec3 N, float shift, float toony, vec3 shade, vec3 lit)
{
  float d = clamp(dot(N, L), -1.0, 1.0);
  float ramp = linearstep_guarded(-1.0 + toony, 1.0 - toony, d + shift);
  float lw = dot(C, vec3(0.2126, 0.7152, 0.0722));
  acc.shade_sum += ramp * lw;
  acc.weight += lw;
  acc.shadow_sum += s * lw;
  ramp *= s;
  acc.direct += C * mix(shade, lit, ramp);
  acc.rim_light += C * s;
}

/* A point, spot or area lamp of lamp_data (engine/gpu/passes/clusters.lamp_rows) at wpos: as
 * light_sample, times EEVEE's influence attenuation, which brings the lamp to 0 at its reach
 * (lx.x = 1 / reach^2): (1 - (r^2 / reach^2)^2)^2. */
void local_lamp_sample(vec4 lp, vec4 ld, vec4 lc, vec4 lx, vec3 wpos, out vec3 L, out vec3 C)
{
  int kind = int(lp.w + 0.5);
  vec3 dv = lp.xyz - wpos;
  float r2 = max(dot(dv, dv), 1e-8);
  L = dv * inversesqrt(r2);
  float f = clamp(1.0 - (r2 * lx.x) * (r2 * lx.x), 0.0, 1.0);
  C = lc.rgb * (f * f / r2);
  if (kind == 3) {
    C *= max(dot(-L, ld.xyz), 0.0);
  }
  else if (kind == 2) {
    float t = dot(-L, ld.xyz);
    float x = t - ld.w;
    C *= (x <= 0.0) ? 0.0 : ((lc.w > 0.0 && x < lc.w) ? smoothstep(0.0, lc.w, x) : 1.0);
  }
}

/* Full surface result (direct + GI + emission + rim) for shading normal N.  A metallic surface
 * (fraction m) has no diffuse reflection: the toon part is weighted by 1 - m, and the metal part is
 * what EEVEE shows of it, the GGX lobe of each lamp and the reflected world, tinted by the base
 * colour (the metal's F0). */
vec3 mtoon_shade(vec3 wpos, vec3 N, vec3 ngeo, vec2 uvA, vec3 lit, float vis_sun)
{
  vec3 shade = mt.shade_color.rgb;
  if (has_tex(TEX_SHADE)) {
    shade *= texture(tex_shade, tex_uv(TEX_SHADE, uvA)).rgb;
  }
#ifndef SPEC_NO_METAL
  vec2 mr = metal_params(uvA);
  vec3 f0 = lit;
  vec3 Vm = view_vector(wpos);
  vec2 dfg = ggx_split_sum(max(dot(N, Vm), 1e-4), mr.y);
  /* multiple scattering (Blender's Multiscatter GGX): the energy single scattering loses */
  vec3 ms = 1.0 + f0 * (1.0 / max(dfg.x + dfg.y, 0.05) - 1.0);
  vec3 metal_spec = vec3(0.0);
  lit *= 1.0 - mr.x;
  shade *= 1.0 - mr.x;
#endif
  float shift = mt.shade_color.w;
  if (has_tex(TEX_SHIFT)) {
    shift += texture(tex_shift, tex_uv(TEX_SHIFT, uvA)).r * mt.params1.z;
  }
  float toony = mt.emissive.w;
#ifdef SPEC_LIGHTS
  const int count = SPEC_LIGHTS;   /* the frame's sun count: the light loop unrolls */
#else
  int count = int(fr.world_color.w + 0.5);
#endif
  int shadow_light = int(fr.shadow_texel.y);
  ShadeAcc acc = ShadeAcc(vec3(0.0), vec3(0.0), 0.0, 0.0, 0.0);
  for (int i = 0; i < count; i++) {
    vec3 L, C;
    light_sample(i, wpos, L, C);
    float s = (i == shadow_light) ? vis_sun : 1.0;
    add_light(acc, L, C, s, N, shift, toony, shade, lit);
#ifndef SPEC_NO_METAL
    /* MToon's light colour is irradiance / pi */
    metal_spec += C * (3.14159265 * s) * ggx_lobe(N, Vm, L, mr.y, f0);
#endif
  }
#ifndef SPEC_NO_CLUSTERS
  /* point, spot and area lamps: those of this fragment's cluster (engine/gpu/passes/clusters.py;
   * a frame without any compiles without this, the general shader tests cluster_params.x) */
  float vdepth = dot(wpos - fr.camera_pos.xyz, fr.camera_fwd.xyz);
  float sl = (fr.cluster_depth.z > 0.5) ? (vdepth - fr.cluster_depth.x) * fr.cluster_depth.y
                                        : log(max(vdepth, fr.cluster_depth.x) / fr.cluster_depth.x) * fr.cluster_depth.y;
  int slices = int(fr.cluster_params.y + 0.5);
  int rows = int(fr.cluster_params.z + 0.5);
  ivec2 tile = ivec2(gl_FragCoord.xy) / int(fr.cluster_params.x + 0.5);
  tile = clamp(tile, ivec2(0), ivec2(fr.cluster_params.w - 1.0, fr.cluster_depth.w - 1.0));
  ivec2 base = ivec2(tile.x * slices + clamp(int(floor(sl)), 0, slices - 1), tile.y * rows);
  int n = (fr.cluster_params.x > 0.5) ? int(texelFetch(lamp_lists, base, 0).x + 0.5) : 0;
  vec4 q = vec4(0.0);
  for (int k = 0; k < n; k++) {
    if ((k & 3) == 0) {
      q = texelFetch(lamp_lists, base + ivec2(0, 1 + k / 4), 0);
    }
    int li = int(q[k & 3] + 0.5);
    vec4 lp = texelFetch(lamp_data, ivec2(0, li), 0);
    vec4 lx = texelFetch(lamp_data, ivec2(3, li), 0);
    vec3 dv = lp.xyz - wpos;
    /* the cluster holds the lamp's sphere conservatively: beyond its reach it adds nothing */
    if (dot(dv, dv) * lx.x >= 1.0 || link_excluded(int(floor(lx.z + 0.5)))) {
      continue;
    }
#ifndef SPEC_NO_LOCAL_SHADOW
    if (lx.y > -0.5) {
      continue;         /* a shadowed lamp: the loop below */
    }
#endif
    vec4 ld = texelFetch(lamp_data, ivec2(1, li), 0);
    vec4 lc = texelFetch(lamp_data, ivec2(2, li), 0);
    vec3 L, C;
    local_lamp_sample(lp, ld, lc, lx, wpos, L, C);
    add_light(acc, L, C, 1.0, N, shift, toony, shade, lit);
#ifndef SPEC_NO_METAL
    metal_spec += C * 3.14159265 * ggx_lobe(N, Vm, L, mr.y, f0);
#endif
  }
#ifndef SPEC_NO_LOCAL_SHADOW
  /* the (at most 4) shadowed lamps, each with its shadow lookup, where they reach: kept out of the
   * cluster loop, whose other lamps would otherwise pay for the lookup's code (llvmpipe) */
#ifdef SPEC_LOCAL_SHADOWS
  const int ns = SPEC_LOCAL_SHADOWS;
#else
  int ns = int(fr.local_params.x + 0.5);
#endif
  for (int j = 0; j < ns; j++) {
    int li = int(fr.local_shadow[j].x + 0.5);
    vec4 lp = texelFetch(lamp_data, ivec2(0, li), 0);
    vec4 lx = texelFetch(lamp_data, ivec2(3, li), 0);
    vec3 dv = lp.xyz - wpos;
    if (dot(dv, dv) * lx.x < 1.0 && !link_excluded(int(floor(lx.z + 0.5)))) {
      vec4 ld = texelFetch(lamp_data, ivec2(1, li), 0);
      vec4 lc = texelFetch(lamp_data, ivec2(2, li), 0);
      vec3 L, C;
      local_lamp_sample(lp, ld, lc, lx, wpos, L, C);
      float s = local_visibility(j, lp.xyz, ld.xyz, lx.w, wpos, ngeo);
      add_light(acc, L, C, s, N, shift, toony, shade, lit);
#ifndef SPEC_NO_METAL
      metal_spec += C * (3.14159265 * s) * ggx_lobe(N, Vm, L, mr.y, f0);
#endif
    }
  }
#endif
#endif
  vec3 direct = acc.direct;
  vec3 rim_light = acc.rim_light;
#ifdef SPEC_PASSES
  float shade_sum = acc.shade_sum, shade_w = acc.weight;
  /* the Shadow pass: every lamp's received shadow, weighted by what the lamp brings here */
  pass_shadow = (acc.weight > 0.0) ? acc.shadow_sum / acc.weight : vis_sun;
#endif
  vec3 rgi = raw_gi(N);
  vec3 uniform_gi = 0.5 * (raw_gi(vec3(0.0, 0.0, 1.0)) + raw_gi(vec3(0.0, 0.0, -1.0)));
  vec3 gi = mix(rgi, uniform_gi, mt.matcap_factor.w);
  vec3 color = direct + gi * lit;
#ifndef SPEC_NO_METAL
  color += mr.x * ms * (metal_spec + (f0 * dfg.x + dfg.y) * raw_gi(reflect(-Vm, N)));
#endif

  vec3 emissive = mt.emissive.rgb;
  if (has_tex(TEX_EMISSIVE)) {
    emissive *= texture(tex_emissive, tex_uv(TEX_EMISSIVE, uvA)).rgb;
  }
  color += emissive;

#ifndef SPEC_NO_RIM   /* (a variant whose rim colour is black and has no matcap adds exactly 0) */
  vec3 V = view_vector(wpos);
  float lift = mt.params0.x;
  float power = max(mt.rim_color.w, 1e-5);
  vec3 param = pow(clamp(1.0 - dot(N, V) + lift, 0.0, 1.0), power) * mt.rim_color.rgb;
  vec3 matcap = vec3(0.0);
  if (has_tex(TEX_MATCAP)) {
    vec3 X = cross(vec3(0.0, 0.0, 1.0), V);
    float xl = length(X);
    X = (xl > 1e-4) ? X / xl : fr.camera_right.xyz;
    vec3 Y = cross(V, X);
    vec2 muv = vec2(dot(X, N), dot(Y, N)) * 0.495 + 0.5;
    matcap = mt.matcap_factor.rgb * texture(tex_matcap, muv).rgb;
  }
  vec3 rim = matcap + param;
  if (has_tex(TEX_RIM)) {
    rim *= texture(tex_rim, tex_uv(TEX_RIM, uvA)).rgb;
  }
  color += rim * mix(vec3(1.0), rim_light + rgi, mt.params0.y);
#ifdef SPEC_PASSES
  pass_rim = rim * mix(vec3(1.0), rim_light + rgi, mt.params0.y);
#endif
#endif
#ifdef SPEC_PASSES
  pass_shade = (shade_w > 0.0) ? shade_sum / shade_w : 0.0;
#endif
  /* huge lamps: never an infinite or NaN pixel (a NaN fails every comparison: 0) */
  return (all(greaterThanEqual(color, vec3(0.0))) && all(lessThan(color, vec3(1e30)))) ? color
         : vec3(color.r >= 0.0 ? min(color.r, 1e30) : 0.0, color.g >= 0.0 ? min(color.g, 1e30) : 0.0,
                color.b >= 0.0 ? min(color.b, 1e30) : 0.0);
}

/* Base colour and alpha (with the alpha mode applied; discards MASK fragments). */
vec4 mtoon_base(vec2 uvA)
{
  vec4 base = mt.base_color;
  if (has_tex(TEX_BASE)) {
    base *= texture(tex_base, tex_uv(TEX_BASE, uvA));
  }
#ifdef SPEC_ALPHA_MODE
  const int mode = SPEC_ALPHA_MODE; /* a variant without discard for OPAQUE: early depth */
#else
  int mode = int(mt.params1.w + 0.5); /* 0 opaque, 1 mask, 2 blend */
#endif
  if (mode == 1) {
    if (base.a < mt.params0.w) {
      discard;
    }
    base.a = 1.0;
  }
  else if (mode == 2) {
    if (base.a < 0.0009765625) {
      discard;
    }
  }
  else {
    base.a = 1.0;
  }
  return base;
}
