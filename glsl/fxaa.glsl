/* FXAA (the compact "console" variant after Timothy Lottes) on linear colour: luma is taken
 * from sqrt(rgb) so edges are found perceptually; alpha is filtered with the colour.
 * The centre and its four diagonal neighbours are whole texels (texelFetch, clamped to the edge
 * as the sampler clamps): cheaper than filtered reads on llvmpipe, and exactly those texels
 * (the interpolated uv used before drifted from the pixel centres by ~1e-3 texel, mixing a
 * trace of the neighbours in).  The four taps along the edge stay filtered reads. */
float fxaa_luma(vec4 c) { return dot(sqrt(max(c.rgb, vec3(0.0))), vec3(0.299, 0.587, 0.114)); }

void main()
{
  ivec2 size = textureSize(src, 0);
  ivec2 hi = size - 1;
  vec2 rcp = 1.0 / vec2(size);
  ivec2 p = ivec2(gl_FragCoord.xy);
  vec2 uv = gl_FragCoord.xy * rcp;
  vec4 cM = texelFetch(src, p, 0);
  float lNW = fxaa_luma(texelFetch(src, clamp(p + ivec2(-1, -1), ivec2(0), hi), 0));
  float lNE = fxaa_luma(texelFetch(src, clamp(p + ivec2(1, -1), ivec2(0), hi), 0));
  float lSW = fxaa_luma(texelFetch(src, clamp(p + ivec2(-1, 1), ivec2(0), hi), 0));
  float lSE = fxaa_luma(texelFetch(src, clamp(p + ivec2(1, 1), ivec2(0), hi), 0));
  float lM = fxaa_luma(cM);
  float lMin = min(lM, min(min(lNW, lNE), min(lSW, lSE)));
  float lMax = max(lM, max(max(lNW, lNE), max(lSW, lSE)));
  if (lMax - lMin < max(0.0312, lMax * 0.125)) {
    frag_color = cM;
    return;
  }
  vec2 dir = vec2(-((lNW + lNE) - (lSW + lSE)), ((lNW + lSW) - (lNE + lSE)));
  float reduce = max((lNW + lNE + lSW + lSE) * (0.25 * 0.125), 1.0 / 128.0);
  float rcpMin = 1.0 / (min(abs(dir.x), abs(dir.y)) + reduce);
  dir = clamp(dir * rcpMin, vec2(-8.0), vec2(8.0)) * rcp;
  vec4 a = 0.5 * (texture(src, uv + dir * (1.0 / 3.0 - 0.5)) + texture(src, uv + dir * (2.0 / 3.0 - 0.5)));
  vec4 b = a * 0.5 + 0.25 * (texture(src, uv + dir * -0.5) + texture(src, uv + dir * 0.5));
  float lB = fxaa_luma(b);
  frag_color = (lB < lMin || lB > lMax) ? a : b;
}
