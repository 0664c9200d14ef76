"""AmbientOcclusionPass: the Ambient Occlusion render pass on the GPU, one full-screen draw over
the centre sample's depth and aux (world normal) targets.  The same screen-space AO as
engine/core/compositing/ssao.py (its plain numpy formula, which tests compare this with): 12
fixed hemisphere points of radius = the AO distance around each surface point, projected into
the frame; occluded where the frame's surface there lies in front by more than a bias (and the
depth change over a pixel), with a squared range check.  0 on the background."""
from __future__ import annotations

import numpy as np

from ...core.compositing.ssao import hemisphere
from .common import FullscreenPass, fullscreen_shader, gl_matrix

COUNT = 12

_BODY = """
/* view-space point of pixel q at depth d, through the projection's terms (as
 * render_passes._view_points: perspective or, params.y = 1, orthographic) */
vec3 view_pos(ivec2 q, float d, vec2 size)
{
  vec2 ndc = (vec2(q) + 0.5) / size * 2.0 - 1.0;
  float nz = d * 2.0 - 1.0;
  if (params.y > 0.5) {
    return vec3((ndc.x - proj[3][0]) / proj[0][0], (ndc.y - proj[3][1]) / proj[1][1], (nz - proj[3][2]) / proj[2][2]);
  }
  float z = -proj[3][2] / (nz + proj[2][2]);
  return vec3(-z * (ndc.x + proj[2][0]) / proj[0][0], -z * (ndc.y + proj[2][1]) / proj[1][1], z);
}

float view_z(ivec2 q, vec2 size)
{
  float d = texelFetch(depth, q, 0).r;
  return (d >= 1.0) ? -1e30 : view_pos(q, d, size).z;
}

void main()
{
  ivec2 p = ivec2(gl_FragCoord.xy);
  ivec2 hi = textureSize(depth, 0) - 1;
  vec2 size = vec2(hi + 1);
  float d = texelFetch(depth, p, 0).r;
  if (d >= 1.0) {
    frag_color = vec4(0.0);
    return;
  }
  vec3 P = view_pos(p, d, size);
  vec3 n = texelFetch(aux, p, 0).xyz;      /* world normal -> view (the view matrix's rows) */
  vec3 N = normalize(vec3(dot(view_r0.xyz, n), dot(view_r1.xyz, n), dot(view_r2.xyz, n)));
  vec3 a = (abs(N.x) < 0.9) ? vec3(1.0, 0.0, 0.0) : vec3(0.0, 1.0, 0.0);
  vec3 T = normalize(cross(a, N));
  vec3 B = cross(N, T);
  /* the depth change over a pixel (central differences, one-sided at the frame's edges) */
  float zl = view_z(clamp(p - ivec2(1, 0), ivec2(0), hi), size), zr = view_z(clamp(p + ivec2(1, 0), ivec2(0), hi), size);
  float zd = view_z(clamp(p - ivec2(0, 1), ivec2(0), hi), size), zu = view_z(clamp(p + ivec2(0, 1), ivec2(0), hi), size);
  float gx = (p.x == 0 || p.x == hi.x) ? ((p.x == 0) ? zr - P.z : P.z - zl) : 0.5 * (zr - zl);
  float gy = (p.y == 0 || p.y == hi.y) ? ((p.y == 0) ? zu - P.z : P.z - zd) : 0.5 * (zu - zd);
  float dist = params.x;
  float bias = 0.02 * dist + 1.5 * (abs(gx) + abs(gy));
  float occ = 0.0;
  for (int i = 0; i < COUNT; i++) {
    vec3 h = hemi[i].xyz;
    vec3 s = P + dist * (T * h.x + B * h.y + N * h.z);
    vec4 c = proj * vec4(s, 1.0);
    float w = (abs(c.w) < 1e-9) ? 1e-9 : c.w;
    ivec2 q = clamp(ivec2((c.xy / w * 0.5 + 0.5) * size), ivec2(0), hi);
    float zs = view_z(q, size);
    float r = dist / max(abs(P.z - zs), 1e-6);
    occ += (zs > s.z + bias) ? min(1.0, r * r) : 0.0;
  }
  float ao = 1.0 - occ / float(COUNT);
  frag_color = vec4(ao, ao, ao, 1.0);
}
"""


def _shader(cache):
    def make():
        pts = hemisphere(COUNT)
        consts = ",\n".join(f"  vec4({x:.9g}, {y:.9g}, {z:.9g}, 0.0)" for x, y, z in pts)
        head = f"#define COUNT {COUNT}\nconst vec4 hemi[{COUNT}] = vec4[{COUNT}](\n{consts});\n"
        return fullscreen_shader("stylized_ambient_occlusion", head + _BODY,
                                 samplers=(("FLOAT_2D", "depth"), ("FLOAT_2D", "aux")),
                                 push_constants=(("MAT4", "proj"), ("VEC4", "view_r0"), ("VEC4", "view_r1"),
                                                 ("VEC4", "view_r2"), ("VEC4", "params")))   # (128 bytes)
    return cache.shader("ambient_occlusion", make)


class AmbientOcclusionPass(FullscreenPass):
    def execute(self, frame, aux, depth, distance: float):
        """The AO texture (RGBA32F: AO, AO, AO, 1; 0 on the background) of the frame just drawn."""
        s = frame.settings
        p = np.asarray(frame.camera.projection, np.float64)
        view = np.asarray(frame.camera.view, np.float64)
        return self.draw(s.width, s.height, _shader(self.cache),
                         samplers=(("depth", depth), ("aux", aux)),
                         floats=(("proj", gl_matrix(p)),) + tuple(
                             (f"view_r{i}", tuple(float(v) for v in view[i])) for i in range(3)) + (
                             ("params", (max(float(distance), 1e-6), 1.0 if frame.camera.is_ortho else 0.0, 0.0, 0.0)),))
