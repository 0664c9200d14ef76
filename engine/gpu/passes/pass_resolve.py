"""The render passes averaged over the anti-aliasing samples, resolved in one draw.

Every averaged pass (Normal, Mist, the toon passes, Diffuse Color, Emission:
engine/gpu/passes/render_passes.py ``averaged_sources``) is one output of a single full-screen
draw into several targets at once (one framebuffer, one RGBA32F attachment per output).  Each
coverage sample picks the pixel it takes its value from once (the colour's rule,
engine/gpu/passes/samples.py) and every output fetches its value there, so the ids are read
once for all the passes, and the centre sample is summed in the same draw (no separate add).
An output is a GLSL expression of ``q`` (the pixel the sample takes): a texel of a pipeline
target, or a value derived from one (Mist from the depth buffer), so nothing is read back or
uploaded between the centre sample and the resolve.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .common import FullscreenPass, fullscreen_shader


@dataclasses.dataclass(frozen=True)
class Sources:
    """What one frame's resolve draws: ``samplers`` ((GLSL name, texture), ...) and ``outputs``
    ((slot name, GLSL vec4 expression of ``ivec2 q``), ...; at most 8).  ``pre_body`` (a
    full-screen fragment shader's source writing ``frag_color`` at ``gl_FragCoord``), when
    given, is drawn once per frame before the resolve from ``pre_samplers`` and the vec4 push
    constants ``pre_floats`` ((name, value), ...), into a target the outputs read as ``pre``
    (a value derived per pixel once, not at every sample: Mist from the depth buffer)."""
    samplers: tuple
    outputs: tuple
    pre_body: str = ""
    pre_samplers: tuple = ()
    pre_floats: tuple = ()
    layout: tuple = ()          # ((pass name, slot, first channel, channels), ...): see ``pack``

    def key(self) -> tuple:
        return (tuple(n for n, _ in self.samplers), self.outputs, bool(self.pre_body))


#: colour attachments one framebuffer may have through Blender's Python API (gpu.types)
MAX_SLOTS = 6


def pack(items, slots: int = MAX_SLOTS) -> tuple:
    """Pack ``items`` ((pass name, channels, GLSL expression of that many floats at ``q``), ...)
    into vec4 outputs, largest first, each into the first output with room: returns (outputs
    ((slot name, vec4 expression), ...), layout ((pass name, slot, first channel, channels),
    ...)).  Raises ValueError when they need more than ``slots`` outputs."""
    bins = []                                   # [[used channels, [expressions]], ...]
    layout = []
    for name, ch, expr in sorted(items, key=lambda it: -it[1]):
        k = next((i for i, b in enumerate(bins) if b[0] + ch <= 4), len(bins))
        if k == len(bins):
            bins.append([0, []])
        b = bins[k]
        layout.append((name, f"s{k}", b[0], ch))
        b[0] += ch
        b[1].append(expr)
    if len(bins) > slots:
        raise ValueError(f"{len(bins)} averaged pass outputs, at most {slots}")
    outputs = tuple((f"s{k}", "vec4(" + ", ".join(ex + ["0.0"] * (4 - used)) + ")")
                    for k, (used, ex) in enumerate(bins))
    return outputs, tuple(layout)


#: GLSL (str.format: ``off``, ``k``): the 3x3 neighbour ``j`` whose centre sees the surface that
#: coverage sample ``k`` (offset ``off``) sees at ``p``: the centre, else the nearest neighbour
#: towards the sample (across x, across y, diagonal), else the centre; ``n``: the centre's 3x3 ids.
#: The colour resolve (samples.py) and the averaged passes pick the same pixel.
NEIGHBOUR_PICK = """\
    vec2 o = -{off};
    int sx = (o.x >= 0.0) ? 1 : -1;
    int sy = (o.y >= 0.0) ? 1 : -1;
    bool x_first = abs(o.x) >= abs(o.y);
    int ja = x_first ? 4 + sx : 4 + 3 * sy;
    int jb = x_first ? 4 + 3 * sy : 4 + sx;
    int jc = 4 + sx + 3 * sy;
    float want = texelFetch(ids_{k}, p, 0).r;
    int j = (abs(n[4] - want) < 0.25) ? 4 :
            (abs(n[ja] - want) < 0.25) ? ja :
            (abs(n[jb] - want) < 0.25) ? jb :
            (abs(n[jc] - want) < 0.25) ? jc : 4;
"""

_SAMPLE = """
  {{
""" + NEIGHBOUR_PICK + """\
    ivec2 q = clamp(p + ivec2(j % 3 - 1, j / 3 - 1), ivec2(0), hi);
{adds}
  }}
"""


def _source(sources: Sources, count: int, centre: bool) -> str:
    outs = sources.outputs
    adds = "\n".join(f"    s{i} += {expr};" for i, (_, expr) in enumerate(outs))
    body = "void main()\n{\n  ivec2 p = ivec2(gl_FragCoord.xy);\n"
    size_of = sources.samplers[0][0] if sources.samplers else "pre"
    body += f"  ivec2 hi = textureSize({size_of}, 0) - 1;\n"
    body += "".join(f"  vec4 s{i} = vec4(0.0);\n" for i in range(len(outs)))
    if centre:
        body += "  {\n    ivec2 q = p;\n" + adds + "\n  }\n"
    if count:
        body += ("  float n[9];\n  for (int j = 0; j < 9; j++) {\n"
                 "    n[j] = texelFetch(ids_0, clamp(p + ivec2(j % 3 - 1, j / 3 - 1), ivec2(0), hi), 0).r;\n  }\n")
    for k in range(1, count + 1):
        off = f"o{2 * ((k - 1) // 2)}{2 * ((k - 1) // 2) + 1}." + ("xy" if (k - 1) % 2 == 0 else "zw")
        body += _SAMPLE.format(k=k, off=off, adds=adds)
    body += "".join(f"  out_{i} = s{i} * params.x;\n" for i in range(len(outs)))
    return body + "}\n"


def _shader(cache, sources: Sources, count: int, centre: bool):
    key = "pass_resolve " + repr((sources.key(), count, centre))

    def make():
        import gpu

        info = gpu.types.GPUShaderCreateInfo()
        info.vertex_in(0, "VEC2", "p")
        iface = gpu.types.GPUStageInterfaceInfo(f"stylized_pass_resolve_{count}_iface")
        iface.smooth("VEC2", "v_uv")
        info.vertex_out(iface)
        names = [n for n, _ in sources.samplers] + (["pre"] if sources.pre_body else [])
        if count:
            names += [f"ids_{k}" for k in range(count + 1)]
        for slot, name in enumerate(names):
            info.sampler(slot, "FLOAT_2D", name)
        info.push_constant("VEC4", "params")
        for name in ("o01", "o23", "o45", "o67")[:(count + 1) // 2]:
            info.push_constant("VEC4", name)
        for i in range(len(sources.outputs)):
            info.fragment_out(i, "VEC4", f"out_{i}")
        info.vertex_source("void main() { v_uv = p * 0.5 + 0.5; gl_Position = vec4(p, 0.0, 1.0); }")
        info.fragment_source(_source(sources, count, centre))
        return gpu.shader.create_from_info(info)

    return cache.shader(key, make)


class PassResolve:
    """The averaged passes' targets (one RGBA32F texture per output slot, kept while the frame
    size and the slots stay) and their framebuffer."""

    def __init__(self):
        self._key = None
        self.textures = {}          # slot name -> texture
        self._fb = None
        self._pre = None            # the FullscreenPass of Sources.pre_body

    def _bind(self, slots, width: int, height: int, first: bool):
        import gpu

        key = (tuple(slots), width, height)
        if self._key != key:
            self.textures = {s: gpu.types.GPUTexture((width, height), format="RGBA32F") for s in slots}
            self._fb = gpu.types.GPUFrameBuffer(color_slots=tuple(self.textures[s] for s in slots))
            self._key = key
        if first:
            fb = self._fb
            assert fb is not None       # made above for this key (free() resets the key with it)
            with fb.bind():
                fb.clear(color=(0.0, 0.0, 0.0, 0.0))

    def resolve(self, cache, sources: Sources, ids, weight: float, width: int, height: int, offsets=(),
                first: bool = True) -> dict:
        """Add the passes of ``sources`` at the coverage samples in ``ids`` (the colour's id
        textures: 0 the centre's, 1..len(offsets) the samples'; ``offsets`` their (dx, dy)),
        each x ``weight``, and with ``first`` the centre sample too (clearing the sums first).
        Returns {slot name: texture}."""
        import gpu

        slots = [s for s, _ in sources.outputs]
        samplers = sources.samplers
        if sources.pre_body:
            if first or self._pre is None:
                if self._pre is None:
                    self._pre = FullscreenPass(cache)
                sh = cache.shader("pass_resolve_pre " + repr((sources.pre_body, sources.pre_samplers)),
                                  lambda: fullscreen_shader(
                                      "stylized_pass_resolve_pre", sources.pre_body,
                                      samplers=tuple(("FLOAT_2D", n) for n, _ in sources.pre_samplers),
                                      push_constants=tuple(("VEC4", n) for n, _ in sources.pre_floats)))
                self._pre.draw(width, height, sh, samplers=sources.pre_samplers,
                               floats=tuple((n, tuple(float(x) for x in v)) for n, v in sources.pre_floats))
            samplers = samplers + (("pre", self._pre._out),)
        self._bind(slots, width, height, first)
        count = len(offsets)
        sh = _shader(cache, sources, count, first)
        sh.bind()
        for name, tex in samplers:
            sh.uniform_sampler(name, tex)
        for k in range(count + 1 if count else 0):
            sh.uniform_sampler(f"ids_{k}", ids[k])
        o = np.zeros(16)
        o[:2 * count] = np.asarray(offsets, np.float64).reshape(-1)
        sh.uniform_float("params", (float(weight), 0.0, 0.0, 0.0))
        for i, name in enumerate(("o01", "o23", "o45", "o67")[:(count + 1) // 2]):
            sh.uniform_float(name, tuple(float(v) for v in o[4 * i:4 * i + 4]))
        fb = self._fb
        assert fb is not None           # made by _bind above
        with fb.bind():
            gpu.state.viewport_set(0, 0, width, height)
            gpu.state.depth_test_set("NONE")
            gpu.state.face_culling_set("NONE")
            gpu.state.blend_set("ADDITIVE_PREMULT")      # (cleared by the first batch)
            cache.fullscreen_batch(sh).draw(sh)
            gpu.state.blend_set("NONE")
        return dict(self.textures)

    def free(self):
        self._key = None
        self.textures = {}
        self._fb = None
        if self._pre is not None:
            self._pre.free()
        self._pre = None
