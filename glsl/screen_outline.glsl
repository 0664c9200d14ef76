/* Screen-space outline: edges where the object id, the normal or the linear depth changes
 * between a pixel and its neighbours at ``width`` pixels.  aux = (world normal xyz, object id),
 * depth = the forward pass's depth buffer.  params: x width (px), y near, z far, w ortho. */
float lin_depth(float d)
{
  float n = params.y, f = params.z;
  if (params.w > 0.5) return n + d * (f - n);
  float z = d * 2.0 - 1.0;
  return 2.0 * n * f / (f + n - z * (f - n));
}

void main()
{
  ivec2 size = textureSize(src, 0);
  ivec2 p = ivec2(gl_FragCoord.xy);
  vec4 c = texelFetch(src, p, 0);
  vec4 a0 = texelFetch(aux, p, 0);
  float z0 = lin_depth(texelFetch(depth, p, 0).r);
  int w = max(1, int(params.x + 0.5));
  float edge = 0.0;
  ivec2 offs[8] = ivec2[8](ivec2(1, 0), ivec2(-1, 0), ivec2(0, 1), ivec2(0, -1),
                           ivec2(1, 1), ivec2(-1, 1), ivec2(1, -1), ivec2(-1, -1));
  for (int i = 0; i < 8; i++) {
    ivec2 q = clamp(p + offs[i] * w, ivec2(0), size - 1);
    vec4 a1 = texelFetch(aux, q, 0);
    if (abs(a1.w - a0.w) > 0.5) {
      /* id edge: draw it on the nearer side only, so the line is width pixels wide */
      if (a0.w > 0.5 && (a1.w < 0.5 || z0 <= lin_depth(texelFetch(depth, q, 0).r))) edge = 1.0;
      continue;
    }
    if (a0.w < 0.5) continue;
    float z1 = lin_depth(texelFetch(depth, q, 0).r);
    if (z1 - z0 > 0.05 * z0 * float(w)) edge = 1.0;            /* depth step (nearer side) */
    if (dot(a0.xyz, a1.xyz) < 0.6 && z0 <= z1) edge = 1.0;     /* crease */
  }
  frag_color = vec4(mix(c.rgb, color.rgb, edge), max(c.a, edge));
}
