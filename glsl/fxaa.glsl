/* FXAA (the compact "console" variant after Timothy Lottes) on linear colour: luma is taken
 * from sqrt(rgb) so edges are found perceptually; alpha is filtered with the colour. */
float fxaa_luma(vec4 c) { return dot(sqrt(max(c.rgb, vec3(0.0))), vec3(0.299, 0.587, 0.114)); }

void main()
{
  vec2 rcp = 1.0 / vec2(textureSize(src, 0));
  vec2 uv = v_uv;
  vec4 cM = texture(src, uv);
  float lNW = fxaa_luma(texture(src, uv + vec2(-1.0, -1.0) * rcp));
  float lNE = fxaa_luma(texture(src, uv + vec2(1.0, -1.0) * rcp));
  float lSW = fxaa_luma(texture(src, uv + vec2(-1.0, 1.0) * rcp));
  float lSE = fxaa_luma(texture(src, uv + vec2(1.0, 1.0) * rcp));
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
