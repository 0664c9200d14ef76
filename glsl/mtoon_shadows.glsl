/* MToon shadow lookups (fragment stage; after mtoon_common.glsl, before mtoon_shading.glsl):
 * the shared filters (shadow_pcf, the soft shadows' shadow_blockers / shadow_pcf_wide and
 * toon_penumbra), the lookup point's bias and normal offset (shadow_lookup_point), the strongest
 * sun's cascades (shadow_cascade_visibility; shadow_visibility, called by the forward and outline
 * fragment stages of engine/gpu/passes/mtoon_shaders.py) and the point, spot and area lamps'
 * shadow maps (local_shadow_visibility; local_visibility, called by mtoon_shading.glsl
 * mtoon_shade).  The maps are drawn by engine/gpu/passes/shadow.py and local_shadows.py. */

/* PCF of the depth c.z at c.xy (0..1 over one tile of ``tile`` texels whose corner is ``origin``)
 * in the atlas ``map``: a bilinear-weighted (2r+2)^2 texel filter kept inside the tile (the sun's
 * cascades and the local lamps' faces alike; 1 = lit). */
float shadow_pcf(sampler2D map, vec3 c, ivec2 origin, int tile)
{
  vec2 inv_atlas = 1.0 / vec2(textureSize(map, 0));
#ifdef SPEC_PCF
  const int r = SPEC_PCF;   /* constant: the tap loops unroll (a run-time bound costs llvmpipe one
                             * more masked pass through each loop body) */
#else
  int r = int(fr.shadow_texel.w);
#endif
  vec2 tc = c.xy * float(tile) - 0.5;
  ivec2 base = ivec2(floor(tc));
  vec2 f = tc - vec2(base);
  float sum = 0.0;
  float wsum = 0.0;
  /* 2x2 texels per textureGather (x: (i, j+1), y: (i+1, j+1), z: (i+1, j), w: (i, j)), the
   * footprint kept inside the tile */
  for (int gy = 0; gy <= r; gy++) {
    int ky = -r + 2 * gy;
    float wy0 = (ky == -r) ? (1.0 - f.y) : 1.0;
    float wy1 = (ky + 1 == r + 1) ? f.y : 1.0;
    for (int gx = 0; gx <= r; gx++) {
      int kx = -r + 2 * gx;
      float wx0 = (kx == -r) ? (1.0 - f.x) : 1.0;
      float wx1 = (kx + 1 == r + 1) ? f.x : 1.0;
      ivec2 t0 = clamp(base + ivec2(kx, ky), ivec2(0), ivec2(tile - 2)) + origin;
      vec4 d = textureGather(map, (vec2(t0) + 1.0) * inv_atlas, 0);
      vec4 w = vec4(wx0 * wy1, wx1 * wy1, wx1 * wy0, wx0 * wy0);
      sum += dot(w, step(vec4(c.z), d));
      wsum += w.x + w.y + w.z + w.w;
    }
  }
  return sum / max(wsum, 1e-6);
}

/* Soft shadows (docs/lighting.md): percentage-closer soft shadows.  ``shadow_blockers``: the mean
 * stored depth of the texels nearer than c.z within ``radius`` texels (20 texels by 5 gathers; -1:
 * none); ``shadow_pcf_wide``: the lit fraction over a disc of ``radius`` texels (64 texels by 16
 * gathers), both kept inside the tile. */
float shadow_blockers(sampler2D map, vec3 c, ivec2 origin, int tile, float radius)
{
  vec2 inv_atlas = 1.0 / vec2(textureSize(map, 0));
  vec2 tc = c.xy * float(tile);
  float a = 6.2831853 * fract(52.9829189 * fract(dot(gl_FragCoord.xy, vec2(0.00583715, 0.06711056))));
  mat2 rot = mat2(cos(a), sin(a), -sin(a), cos(a));
  float sum = 0.0, n = 0.0;
  /* the receiver's own 2 x 2 texels first (a thin blocker right above it is never missed), then
   * 4 taps turned per pixel */
  for (int k = 0; k < 5; k++) {
    int j = k - 1;
    vec2 p = (k == 0) ? tc : tc + rot * ((vec2(j & 1, (j >> 1) & 1) - 0.5) * radius);
    vec2 t = clamp(floor(p - 0.5), vec2(0.0), vec2(float(tile - 2))) + vec2(origin);
    vec4 d = textureGather(map, (t + 1.0) * inv_atlas, 0);
    vec4 b = step(d, vec4(c.z));        /* 1 where a texel is nearer than the receiver */
    sum += dot(b, d);
    n += b.x + b.y + b.z + b.w;
  }
  return (n > 0.0) ? sum / n : -1.0;
}

/* A soft penumbra through the material's MToon toon step, as its lit/shade ramp: shading toony t
 * keeps the middle (1 - t) of the penumbra's gradient (0 and 1 unchanged). */
float toon_penumbra(float v)
{
  float toony = mt.emissive.w;
  return linearstep_guarded(-1.0 + toony, 1.0 - toony, 2.0 * v - 1.0);
}

float shadow_pcf_wide(sampler2D map, vec3 c, ivec2 origin, int tile, float radius)
{
  vec2 inv_atlas = 1.0 / vec2(textureSize(map, 0));
  vec2 tc = c.xy * float(tile);
  /* 4 x 4 gathers over the disc, the pattern turned per pixel (interleaved gradient noise) so a
   * wide penumbra shows grain, not bands */
  float a = 6.2831853 * fract(52.9829189 * fract(dot(gl_FragCoord.xy, vec2(0.06711056, 0.00583715))));
  mat2 rot = mat2(cos(a), sin(a), -sin(a), cos(a));
  float sum = 0.0;
  for (int gy = 0; gy < 4; gy++) {
    for (int gx = 0; gx < 4; gx++) {
      vec2 p = tc + rot * ((vec2(gx, gy) - 1.5) * (radius * 0.5));
      vec2 t = clamp(floor(p - 0.5), vec2(0.0), vec2(float(tile - 2))) + vec2(origin);
      vec4 d = textureGather(map, (t + 1.0) * inv_atlas, 0);
      sum += dot(vec4(0.25), step(vec4(c.z), d));
    }
  }
  return sum / 16.0;
}

/* The normal offset and depth bias of a shadow lookup at ``wpos`` for a map whose texel measures
 * ``texel`` metres there (towards the light ``Ls``; ``ndl`` = dot(ngeo, Ls)).  A plane at angle t
 * to the light changes its stored depth by tan(t) per texel; a lookup raised h above it along the
 * normal stays in front of every PCF tap within D texels when h >= D sin(t) (its margin is
 * h / cos(t) - D tan(t)), at any angle: so the normal offset is scaled by sin(t), and the constant
 * bias only covers curvature. */
vec3 shadow_lookup_point(vec3 wpos, vec3 ngeo, vec3 Ls, float ndl, float texel)
{
  float sin_t = (ndl > 0.0) ? sqrt(clamp(1.0 - ndl * ndl, 0.0, 1.0)) : 1.0;
  /* shadow_params.z: a floor in metres, so layers closer to the surface than that (eyes, brows and
   * blush decals on a face) never drop a shadow on it in a sharp close-up cascade */
  float offset = max(fr.shadow_params.y * texel * sin_t, fr.shadow_params.z);
  return wpos + ngeo * offset + Ls * (fr.shadow_params.x * texel);
}

/* Visibility from cascade i of the sun's shadow (1 = lit).  Bias and normal offset are in texels
 * of this cascade (shadow_lookup_point); PCF kept inside the cascade's atlas tile (shadow_pcf). */
float shadow_cascade_visibility(int i, vec3 wpos, vec3 ngeo, vec3 Ls, float ndl)
{
  vec3 p = shadow_lookup_point(wpos, ngeo, Ls, ndl, fr.cascade_texel[i]);
  vec4 sc = fr.cascade_matrix[i] * vec4(p, 1.0);
  vec3 c = sc.xyz / sc.w * 0.5 + 0.5;
  if (c.x < 0.0 || c.x > 1.0 || c.y < 0.0 || c.y > 1.0 || c.z > 1.0) {
    return 1.0;
  }
  int tile = int(fr.shadow_texel.z);
  int cols = int(fr.cascade_params.y + 0.5);
  ivec2 origin = ivec2(i % cols, i / cols) * tile;
#ifndef SPEC_HARD_SHADOWS
  /* the sun's Angle: a penumbra of 2 tan(angle / 2) per metre between blocker and receiver
   * (cascade_params.w; 0: hard); depths span 2 / |m22| metres in this cascade's window */
  float per_m = fr.cascade_params.w;
  if (per_m > 0.0) {
    float texel = fr.cascade_texel[i];
    float span = 2.0 / abs(fr.cascade_matrix[i][2][2]);
    float search = clamp(per_m * c.z * span / texel, 1.0, 48.0);
    float zb = shadow_blockers(shadow_map, c, origin, tile, search);
    if (zb < 0.0) {
      return 1.0;
    }
    float pen = 0.5 * per_m * (c.z - zb) * span / texel;     /* penumbra radius, texels */
    if (pen > 1.5) {
      return toon_penumbra(shadow_pcf_wide(shadow_map, c, origin, tile, min(pen, 48.0)));
    }
  }
#endif
  return shadow_pcf(shadow_map, c, origin, tile);
}

/* Shadow visibility of the strongest sun: the cascade whose view-depth slice holds the fragment,
 * blended with the next one over the last part of its slice (the last cascade fades out). */
float shadow_visibility(vec3 wpos, vec3 ngeo)
{
#ifdef SPEC_NO_SHADOW
  return 1.0;
#else
  if (fr.shadow_params.w < 0.5) {
    return 1.0;
  }
  vec3 Ls = -fr.light_dir[int(fr.shadow_texel.y)].xyz;
  float ndl = dot(ngeo, Ls);
  float depth = dot(wpos - fr.camera_pos.xyz, fr.camera_fwd.xyz);
#ifdef SPEC_CASCADES
  const int n = SPEC_CASCADES;
#else
  int n = int(fr.cascade_params.x + 0.5);
#endif
  int i = 0;
  while (i < n - 1 && depth > fr.cascade_split[i]) {
    i++;
  }
  float end = fr.cascade_split[i];
  if (depth > end) {
    return 1.0;
  }
  float w = fr.cascade_blend[i];
  float t = (w > 0.0) ? clamp((depth - (end - w)) / w, 0.0, 1.0) : 0.0;
  /* cascade i, and i + 1 in its blend band (beyond the last cascade: 1).  A do-while: llvmpipe
   * shades 4-8 fragments at once and runs an if's body whenever one of them needs it, but leaves
   * a loop as soon as none does, so the second lookup costs only where a fragment blends */
  int last = (t > 0.0 && i + 1 < n) ? i + 1 : i;
  float v = 1.0;
  float next = 1.0;
  int k = i;
  do {
    float vk = shadow_cascade_visibility(k, wpos, ngeo, Ls, ndl);
    if (k == i) {
      v = vk;
    }
    else {
      next = vk;
    }
    k++;
  } while (k <= last);
  if (t > 0.0) {
    v = mix(v, next, t);
  }
  /* the material's receive-shadow rate (engine/gpu/passes/common.receive_shadow_word) */
  float rate = clamp(2.0 * (mt.uv_anim.w - 0.5), 0.0, 1.0);
  return mix(1.0, v, rate);
#endif
}

/* Visibility from the shadow map of shadowed local lamp j (engine/gpu/passes/local_shadows.py; 1 =
 * lit): a spot's perspective face, or the cube face of the major axis from the lamp to the
 * fragment; bias, normal offset and PCF as the sun's, in texels of the face at this depth. */
float local_shadow_visibility(int j, vec3 lpos, vec3 ldir, float radius, vec3 wpos, vec3 ngeo)
{
  vec4 ls = fr.local_shadow[j];
  vec3 d = wpos - lpos;
  int slot = int(ls.y + 0.5);
  float depth;
  if (ls.z > 1.5) {
    vec3 a = abs(d);
    if (a.x >= a.y && a.x >= a.z) {
      slot += (d.x >= 0.0) ? 0 : 1;
      depth = a.x;
    }
    else if (a.y >= a.z) {
      slot += (d.y >= 0.0) ? 2 : 3;
      depth = a.y;
    }
    else {
      slot += (d.z >= 0.0) ? 4 : 5;
      depth = a.z;
    }
  }
  else {
    depth = dot(d, ldir);
  }
  float dl = length(d);
  if (depth <= 0.0 || dl <= 0.0) {
    return 1.0;
  }
  vec3 Ls = -d / dl;
  vec3 p = shadow_lookup_point(wpos, ngeo, Ls, dot(ngeo, Ls), ls.w * depth);
  vec4 sc = fr.local_matrix[slot] * vec4(p, 1.0);
  if (sc.w <= 0.0) {
    return 1.0;
  }
  vec3 c = sc.xyz / sc.w * 0.5 + 0.5;
  if (c.x < 0.0 || c.x > 1.0 || c.y < 0.0 || c.y > 1.0 || c.z > 1.0) {
    return 1.0;
  }
  int tile = int(fr.local_params.z + 0.5);
  int cols = int(fr.local_params.y + 0.5);
  ivec2 origin = ivec2(slot % cols, slot / cols) * tile;
#ifndef SPEC_HARD_SHADOWS
  /* the lamp's Radius: a penumbra of 2 R (d_receiver - d_blocker) / d_blocker; the face's depths
   * linearised through its projection (d = B / (ndc + A)) */
  if (radius > 0.0 && fr.local_params.w > 0.5) {
    mat4 M = fr.local_matrix[slot];
    vec3 r3 = vec3(M[0][3], M[1][3], M[2][3]);
    float A = -dot(vec3(M[0][2], M[1][2], M[2][2]), r3) / max(dot(r3, r3), 1e-12);
    float B = M[3][2] + A * M[3][3];
    float texel = ls.w * depth;                                /* metres per texel here */
    float search = clamp(radius / texel, 1.0, 48.0);
    float zb = shadow_blockers(local_shadow_map, c, origin, tile, search);
    if (zb < 0.0) {
      return 1.0;
    }
    float db = B / ((2.0 * zb - 1.0) + A);
    float pen = radius * max(depth - db, 0.0) / max(db, 1e-4) / texel;   /* penumbra radius, texels */
    if (pen > 1.5) {
      return toon_penumbra(shadow_pcf_wide(local_shadow_map, c, origin, tile, min(pen, 48.0)));
    }
  }
#endif
  return shadow_pcf(local_shadow_map, c, origin, tile);
}

/* The local shadow of shadow slot j (-1: none) at wpos (1 = lit), with the material's receive rate. */
float local_visibility(int j, vec3 lpos, vec3 ldir, float radius, vec3 wpos, vec3 ngeo)
{
#ifdef SPEC_NO_LOCAL_SHADOW
  return 1.0;
#else
  if (j < 0 || mt.uv_anim.w < 0.5) {
    return 1.0;
  }
  float rate = clamp(2.0 * (mt.uv_anim.w - 0.5), 0.0, 1.0);
  return mix(1.0, local_shadow_visibility(j, lpos, ldir, radius, wpos, ngeo), rate);
#endif
}
