/* Shared GPU linear blend skinning include (forward, shadow, outline and readback shaders).
 *
 * Interface (declared by engine/gpu/passes/shader_lib.add_skinning_interface):
 *   vertex inputs  joints (uvec4), weights (vec4), joints_hi (uvec4), weights_hi (vec4),
 *                  morph_span (uvec2: first delta entry, entry count)
 *   samplers       skin_palette   RGBA32F, 4 texels (matrix columns) per joint row
 *                  morph_deltas   RGBA32F, 4 texels per entry: (dpos, target), (dnor, 0), (dtan, 0),
 *                                 (d smooth normal, 0)
 *                  morph_weights  R32F, one texel per target (muted targets hold 0)
 *                  skin_entries   RGBA32F, (joint, weight, 0, 0) per influence of vertices that
 *                                 have more than 8 (skin_influences > 8: joints.xy = span)
 *                  instance_data  RGBA32F, instanced draws only: 5 texels per instance (row =
 *                                 gl_InstanceID): the model matrix's 4 columns, then (object id,
 *                                 first palette row, first morph weight, 0)
 *   push constants int skin_influences   0 = static, 4 or 8 influences, > 8 = per-vertex spans
 *                  int morph_mode        0 = the stream holds the final base (static or rebuilt
 *                                        on the CPU), 1 = compose the deltas here
 *                  int instance_mode     0 = one object per draw (the pass's own model matrix and
 *                                        object id; palette and weights from row 0), 1 = one draw
 *                                        for many instances of one batch: per instance, the model,
 *                                        object id and the offsets into the shared palette and
 *                                        weight textures come from instance_data
 *
 * Order (seed): morph first, then skin.  With morph_mode 1 the vertex shader composes
 * base + sum(weight * delta) over the vertex's sparse entries (the seed's extension for
 * high-frequency morph animation; morph_sums is the one walk of the entries that every morph
 * function shares); normals and tangents are renormalised and fall back to the base direction
 * when the sum degenerates (morph_direction), exactly as the CPU rebuild does.
 * The palette holds mesh-local skin matrices: inverse(meshWorld) * jointWorld * inverseBind.
 * A vertex whose weights are all zero stays where it is, as in Blender.
 *
 * SKIN_LBS8 (a specialised variant, engine/gpu/passes/mtoon_shaders.py): every item the variant
 * draws has at most 8 influences and a linear-blending palette, so the span loop and the
 * Preserve Volume path are compiled out (llvmpipe runs every branch of a vertex under masks);
 * with SKIN_MAX4 also the second set of 4; SKIN_STATIC: items without a palette (no skinning).
 *
 * Preserve Volume (dual quaternion skinning, engine/core/runtime/dquat.py): a palette whose texel
 * (0, first row).w is 2.0 holds, instead of skin matrices, the mesh -> armature matrix (row 0,
 * marker aside), its inverse (row 1) and per joint j a scale matrix (row 2 + 2j) and the dual
 * quaternion (row 3 + 2j: real, dual).  skin_matrix_at blends them per vertex exactly as
 * Blender's add_weighted_dq_dq_pivot / normalize_dq / mul_v3m3_dq, in armature space, and
 * returns the equivalent affine matrix at the vertex (its 3x3 part is Blender's deform matrix
 * of the vertex, used for normals and tangents).
 */

#ifdef SKIN_STATIC
/* items without a palette (skin_influences is 0): nothing to skin; one select keeps the uniform
 * that every draw sets declared */
#define SKIN_STATIC_KEEP(p) if (skin_influences < 0) { p = vec3(0.0); }
#endif

ivec2 morph_texel(int i)
{
  return ivec2(i % MORPH_TEX_WIDTH, i / MORPH_TEX_WIDTH);
}

/* Instanced draws: this instance's (object id, first palette row, first morph weight, 0). */
vec4 instance_info()
{
  return (instance_mode != 0) ? texelFetch(instance_data, ivec2(4, gl_InstanceID), 0) : vec4(0.0);
}

/* The model matrix of this vertex's object: ``single`` (the pass's push constant) for a
 * one-object draw, the instance's row of instance_data for an instanced one. */
mat4 instance_model(mat4 single)
{
  if (instance_mode == 0) {
    return single;
  }
  return mat4(texelFetch(instance_data, ivec2(0, gl_InstanceID), 0),
              texelFetch(instance_data, ivec2(1, gl_InstanceID), 0),
              texelFetch(instance_data, ivec2(2, gl_InstanceID), 0),
              texelFetch(instance_data, ivec2(3, gl_InstanceID), 0));
}

/* This instance's first weight in the morph weights texture. */
int morph_weight_base()
{
  return int(instance_info().z + 0.5);
}

/* The one walk of this vertex's sparse morph entries that every morph below shares: adds
 * weight * delta of each entry to the sums.  ``dp`` accumulates the position deltas from what
 * the caller passes in (vec3(0.0) for the sum alone, or the base position to add in place: the
 * two orders the callers have always used); ``dn``/``dt`` are the normal and tangent sums (read
 * only with ``with_normals``), ``ds`` the outline's smooth normal sum (only with
 * ``with_smooth``); sums not read stay 0.  Entries whose weight is 0 (muted or at rest) are
 * skipped: their delta would add only zeros. */
void morph_sums(bool with_normals, bool with_smooth, inout vec3 dp, out vec3 dn, out vec3 dt,
                out vec3 ds)
{
  dn = vec3(0.0);
  dt = vec3(0.0);
  ds = vec3(0.0);
  int wbase = morph_weight_base();
  int first = int(morph_span.x);
  int count = int(morph_span.y);
  for (int k = 0; k < count; k++) {
    int e = 4 * (first + k);
    vec4 a = texelFetch(morph_deltas, morph_texel(e), 0);
    float w = texelFetch(morph_weights, morph_texel(int(a.w) + wbase), 0).r;
    if (w != 0.0) {
      dp += w * a.xyz;
      if (with_normals) {
        dn += w * texelFetch(morph_deltas, morph_texel(e + 1), 0).xyz;
        dt += w * texelFetch(morph_deltas, morph_texel(e + 2), 0).xyz;
      }
      if (with_smooth) {
        ds += w * texelFetch(morph_deltas, morph_texel(e + 3), 0).xyz;
      }
    }
  }
}

/* ``base`` moved by the summed delta ``d`` and renormalised; the base direction where the sum
 * degenerates (as the CPU rebuild does). */
vec3 morph_direction(vec3 base, vec3 d)
{
  vec3 v = base + d;
  return (dot(v, v) >= 1e-16) ? normalize(v) : base;
}

/* Morph a position, normal and tangent (xyz) in mesh-local space. */
void morph_vertex(inout vec3 position, inout vec3 normal, inout vec3 tangent)
{
  if (morph_mode == 0) {
    return;
  }
  vec3 dp = vec3(0.0), dn, dt, ds;
  morph_sums(true, false, dp, dn, dt, ds);
  position += dp;
  normal = morph_direction(normal, dn);
  tangent = morph_direction(tangent, dt);
}

/* Position only (shadow and readback). */
vec3 morph_position(vec3 position)
{
  if (morph_mode == 0) {
    return position;
  }
  vec3 dn, dt, ds;
  morph_sums(false, false, position, dn, dt, ds);
  return position;
}

/* Position and the outline's smooth normal (the hull expands along the morphed surface). */
void morph_outline(inout vec3 position, inout vec3 smooth_normal)
{
  if (morph_mode == 0) {
    return;
  }
  vec3 dn, dt, ds;
  morph_sums(false, true, position, dn, dt, ds);
  smooth_normal = morph_direction(smooth_normal, ds);
}

mat4 skin_fetch(uint joint, int base)
{
  int row = int(joint) + base;
  return mat4(texelFetch(skin_palette, ivec2(0, row), 0),
              texelFetch(skin_palette, ivec2(1, row), 0),
              texelFetch(skin_palette, ivec2(2, row), 0),
              texelFetch(skin_palette, ivec2(3, row), 0));
}

mat4 skin_matrix()
{
  if (skin_influences == 0) {
    return mat4(1.0);
  }
  int base = int(instance_info().y + 0.5);   /* this instance's first palette row */
#ifndef SKIN_LBS8
  if (skin_influences > 8) {
    /* every influence of the vertex, from its span of (joint, weight) entries: joints.x = first
     * entry, joints.y = count (meshes with more than 8 influences on some vertex) */
    float sum = 0.0;
    mat4 acc = mat4(0.0);
    int first = int(joints.x);
    int count = int(joints.y);
    for (int k = 0; k < count; k++) {
      vec4 e = texelFetch(skin_entries, morph_texel(first + k), 0);
      sum += e.y;
      acc += e.y * skin_fetch(uint(e.x + 0.5), base);
    }
    return (sum <= 0.0) ? mat4(1.0) : acc;
  }
#endif
  float total = weights.x + weights.y + weights.z + weights.w;
  mat4 m = mat4(0.0);
  if (weights.x != 0.0) m += weights.x * skin_fetch(joints.x, base);
  if (weights.y != 0.0) m += weights.y * skin_fetch(joints.y, base);
  if (weights.z != 0.0) m += weights.z * skin_fetch(joints.z, base);
  if (weights.w != 0.0) m += weights.w * skin_fetch(joints.w, base);
#ifndef SKIN_MAX4
  if (skin_influences > 4) {
    total += weights_hi.x + weights_hi.y + weights_hi.z + weights_hi.w;
    if (weights_hi.x != 0.0) m += weights_hi.x * skin_fetch(joints_hi.x, base);
    if (weights_hi.y != 0.0) m += weights_hi.y * skin_fetch(joints_hi.y, base);
    if (weights_hi.z != 0.0) m += weights_hi.z * skin_fetch(joints_hi.z, base);
    if (weights_hi.w != 0.0) m += weights_hi.w * skin_fetch(joints_hi.w, base);
  }
#endif
  if (total <= 0.0) {
    return mat4(1.0);
  }
  return m;
}

/* Preserve Volume: add joint ``joint`` with weight ``w`` at armature-space point ``co``
 * (add_weighted_dq_dq_pivot without the full deform matrix: the scale acts through the
 * translation it induces at the vertex; a rotation pointing away from the running sum adds
 * negated).  ``ss`` sums w * scale matrix (normals only). */
void dq_add(int base, uint joint, float w, vec3 co, inout vec4 sq, inout vec4 st, inout mat3 ss,
            inout float total)
{
  if (w == 0.0) {
    return;
  }
  int row = base + 2 + 2 * int(joint);
  mat4 s = mat4(texelFetch(skin_palette, ivec2(0, row), 0),
                texelFetch(skin_palette, ivec2(1, row), 0),
                texelFetch(skin_palette, ivec2(2, row), 0),
                texelFetch(skin_palette, ivec2(3, row), 0));
  vec4 q = texelFetch(skin_palette, ivec2(0, row + 1), 0); /* (w, x, y, z) */
  vec4 t = texelFetch(skin_palette, ivec2(1, row + 1), 0);
  vec3 d = (s * vec4(co, 1.0)).xyz - co;
  t.x -= 0.5 * (q.y * d.x + q.z * d.y + q.w * d.z);
  t.y += 0.5 * (q.x * d.x + q.z * d.z - q.w * d.y);
  t.z += 0.5 * (q.x * d.y + q.w * d.x - q.y * d.z);
  t.w += 0.5 * (q.x * d.z + q.y * d.y - q.z * d.x);
  float ws = (dot(q, sq) < 0.0) ? -w : w;
  sq += ws * q;
  st += ws * t;
  ss += w * mat3(s);
  total += w;
}

/* Preserve Volume: the affine matrix that takes this mesh-local vertex where Blender's dual
 * quaternion deform does (palette at row ``base``). */
mat4 skin_dq_matrix(int base, vec3 position)
{
  vec4 p0 = texelFetch(skin_palette, ivec2(0, base), 0);
  mat4 pre = mat4(vec4(p0.xyz, 0.0),
                  texelFetch(skin_palette, ivec2(1, base), 0),
                  texelFetch(skin_palette, ivec2(2, base), 0),
                  texelFetch(skin_palette, ivec2(3, base), 0));
  mat4 post = mat4(texelFetch(skin_palette, ivec2(0, base + 1), 0),
                   texelFetch(skin_palette, ivec2(1, base + 1), 0),
                   texelFetch(skin_palette, ivec2(2, base + 1), 0),
                   texelFetch(skin_palette, ivec2(3, base + 1), 0));
  vec3 co = (pre * vec4(position, 1.0)).xyz;
  vec4 sq = vec4(0.0), st = vec4(0.0);
  mat3 ss = mat3(0.0);
  float total = 0.0;
  if (skin_influences > 8) {
    int first = int(joints.x);
    int count = int(joints.y);
    for (int k = 0; k < count; k++) {
      vec4 e = texelFetch(skin_entries, morph_texel(first + k), 0);
      dq_add(base, uint(e.x + 0.5), e.y, co, sq, st, ss, total);
    }
  }
  else {
    dq_add(base, joints.x, weights.x, co, sq, st, ss, total);
    dq_add(base, joints.y, weights.y, co, sq, st, ss, total);
    dq_add(base, joints.z, weights.z, co, sq, st, ss, total);
    dq_add(base, joints.w, weights.w, co, sq, st, ss, total);
    if (skin_influences > 4) {
      dq_add(base, joints_hi.x, weights_hi.x, co, sq, st, ss, total);
      dq_add(base, joints_hi.y, weights_hi.y, co, sq, st, ss, total);
      dq_add(base, joints_hi.z, weights_hi.z, co, sq, st, ss, total);
      dq_add(base, joints_hi.w, weights_hi.w, co, sq, st, ss, total);
    }
  }
  if (total <= 0.0) {
    return mat4(1.0);
  }
  /* normalize_dq, then mul_v3m3_dq */
  sq /= total;
  st /= total;
  ss /= total;
  float w = sq.x, x = sq.y, y = sq.z, z = sq.w;
  mat3 m;
  m[0][0] = w * w + x * x - y * y - z * z;
  m[1][0] = 2.0 * (x * y - w * z);
  m[2][0] = 2.0 * (x * z + w * y);
  m[0][1] = 2.0 * (x * y + w * z);
  m[1][1] = w * w + y * y - x * x - z * z;
  m[2][1] = 2.0 * (y * z - w * x);
  m[0][2] = 2.0 * (x * z - w * y);
  m[1][2] = 2.0 * (y * z + w * x);
  m[2][2] = w * w + z * z - x * x - y * y;
  float len2 = dot(sq, sq);
  len2 = (len2 > 0.0) ? 1.0 / len2 : 0.0;
  vec3 t = 2.0 * vec3(-st.x * x + w * st.y - st.z * z + y * st.w,
                      -st.x * y + st.y * z - x * st.w + w * st.z,
                      -st.x * z + x * st.z + w * st.w - st.y * y);
  vec3 moved = (post * vec4((m * co + t) * len2, 1.0)).xyz;
  mat3 a = mat3(post) * (len2 * m) * ss * mat3(pre);
  return mat4(vec4(a[0], 0.0), vec4(a[1], 0.0), vec4(a[2], 0.0), vec4(moved - a * position, 1.0));
}

/* The skin matrix of this vertex at its (morphed) mesh-local ``position``: linear blending, or
 * the Preserve Volume equivalent matrix when the palette carries the marker. */
mat4 skin_matrix_at(vec3 position)
{
#ifndef SKIN_LBS8
  int base = int(instance_info().y + 0.5);
  if (texelFetch(skin_palette, ivec2(0, base), 0).w > 1.5) {
    return skin_dq_matrix(base, position);
  }
#endif
  return skin_matrix();
}

/* Cofactor matrix: transforms normals correctly under non-uniform scale (up to length). */
mat3 skin_normal_matrix(mat3 m)
{
  mat3 c = mat3(cross(m[1], m[2]), cross(m[2], m[0]), cross(m[0], m[1]));
  return (dot(m[0], c[0]) < 0.0) ? -c : c; /* keep the orientation when the matrix mirrors */
}

/* The skinned unit normal; 0 where the skin matrix has rank <= 1 (a bone scaled to 0: Blender
 * collapses the vertex onto a point or a line, and no outline may grow it back). */
vec3 skin_normal(mat3 m3, vec3 normal)
{
  mat3 c = skin_normal_matrix(m3);
  vec3 n = c * normal;
  if (dot(n, n) > 0.0) {
    return normalize(n);
  }
  return (c[0] == vec3(0.0) && c[1] == vec3(0.0) && c[2] == vec3(0.0)) ? vec3(0.0) : normal;
}

/* Skin a position, normal and tangent (xyz) in mesh-local space. */
void skin_vertex(inout vec3 position, inout vec3 normal, inout vec3 tangent)
{
#ifdef SKIN_STATIC
  SKIN_STATIC_KEEP(position);
  return;
#endif
  if (skin_influences == 0) {
    return;
  }
  mat4 m = skin_matrix_at(position);
  position = (m * vec4(position, 1.0)).xyz;
  mat3 m3 = mat3(m);
  vec3 t = m3 * tangent;
  normal = skin_normal(m3, normal);
  tangent = (dot(t, t) > 0.0) ? normalize(t) : tangent;
}

/* skin_vertex, and the sign of the skin matrix's determinant (-1 where a joint mirrors): the
 * tangent frame's handedness flips with it, as Blender's tangents of the deformed mesh do. */
float skin_vertex_handed(inout vec3 position, inout vec3 normal, inout vec3 tangent)
{
#ifdef SKIN_STATIC
  SKIN_STATIC_KEEP(position);
  return 1.0;
#endif
  if (skin_influences == 0) {
    return 1.0;
  }
  mat4 m = skin_matrix_at(position);
  position = (m * vec4(position, 1.0)).xyz;
  mat3 m3 = mat3(m);
  vec3 t = m3 * tangent;
  normal = skin_normal(m3, normal);
  tangent = (dot(t, t) > 0.0) ? normalize(t) : tangent;
  return (determinant(m3) < 0.0) ? -1.0 : 1.0;
}

/* Position only (shadow and readback). */
vec3 skin_position(vec3 position)
{
#ifdef SKIN_STATIC
  SKIN_STATIC_KEEP(position);
  return position;
#endif
  if (skin_influences == 0) {
    return position;
  }
  return (skin_matrix_at(position) * vec4(position, 1.0)).xyz;
}

/* ---- Skin once per frame (engine/gpu/passes/skin_once.py) ----
 * The skin pass draws each deformed item's vertices once per frame as 2x2-pixel points into the
 * RGBA32F texture ``skinned`` (block of vertex g = skinned_base() + gl_VertexID at
 * (g % SKIN_ONCE_BLOCKS, g / SKIN_ONCE_BLOCKS)): texel (0,0) the morphed and skinned mesh-local
 * position and the handedness sign, (1,0) the normal, (0,1) the tangent, (1,1) the outline's
 * smooth normal, exactly as skin_vertex_handed / skin_vertex compute them after morph_vertex /
 * morph_outline.  SKIN_FETCH variants of the forward, outline, shadow and id shaders read them by
 * gl_VertexID instead of morphing and skinning, so the frame's coverage samples only rasterise.
 * ``skin_base`` (push constant, SKIN_FETCH and the skin pass only): the item's first vertex in
 * the texture for one-object draws; instanced draws read it per instance from instance_data
 * (texel 5, x). */
#if defined(SKIN_FETCH) || defined(SKIN_ONCE_PASS)
int skinned_base()
{
  return (instance_mode != 0) ? int(texelFetch(instance_data, ivec2(5, gl_InstanceID), 0).x + 0.5)
                              : skin_base;
}
#endif

#ifdef SKIN_ONCE_PASS
/* morph_vertex and morph_outline's smooth normal in one walk (the skin pass writes all four) */
void morph_all(inout vec3 position, inout vec3 normal, inout vec3 tangent, inout vec3 smooth_normal)
{
  if (morph_mode == 0) {
    return;
  }
  vec3 dp = vec3(0.0), dn, dt, ds;
  morph_sums(true, true, dp, dn, dt, ds);
  position += dp;
  normal = morph_direction(normal, dn);
  tangent = morph_direction(tangent, dt);
  smooth_normal = morph_direction(smooth_normal, ds);
}
#endif

#ifdef SKIN_FETCH
ivec2 skinned_texel(int dx, int dy)
{
  int g = skinned_base() + gl_VertexID;
  return ivec2(2 * (g % SKIN_ONCE_BLOCKS) + dx, 2 * (g / SKIN_ONCE_BLOCKS) + dy);
}

/* the deformation uniforms every draw sets stay declared (a select the compiler keeps) */
vec3 skin_fetch_keep(vec3 p)
{
  return (skin_influences < 0 || morph_mode < 0) ? vec3(0.0) : p;
}

/* forward: position, normal, tangent and the handedness sign (morph_vertex + skin_vertex_handed) */
float fetch_surface(out vec3 position, out vec3 normal, out vec3 tangent)
{
  vec4 p = texelFetch(skinned, skinned_texel(0, 0), 0);
  position = skin_fetch_keep(p.xyz);
  normal = texelFetch(skinned, skinned_texel(1, 0), 0).xyz;
  tangent = texelFetch(skinned, skinned_texel(0, 1), 0).xyz;
  return p.w;
}

/* outline: position and smooth normal (morph_outline + skin_vertex) */
void fetch_outline(out vec3 position, out vec3 smooth_normal)
{
  position = skin_fetch_keep(texelFetch(skinned, skinned_texel(0, 0), 0).xyz);
  smooth_normal = texelFetch(skinned, skinned_texel(1, 1), 0).xyz;
}

/* shadow: position (morph_position + skin_position) */
vec3 fetch_position()
{
  return skin_fetch_keep(texelFetch(skinned, skinned_texel(0, 0), 0).xyz);
}
#endif
