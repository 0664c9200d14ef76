"""What a frame reads from the scene besides the objects: the world colour, the lamps (in
Blender's units) and the render settings (``FrameSettings``).  Split out of ``session.py``."""
from __future__ import annotations

import numpy as np

from ..core.world.frame import FrameSettings, LightData
from .sources.fallback import own_geometry


def world_color(scene) -> np.ndarray:
    world = scene.world
    if world is None:
        return np.zeros(3)
    if world.use_nodes and world.node_tree is not None:
        for node in world.node_tree.nodes:
            if node.type == "BACKGROUND":
                c = node.inputs["Color"].default_value
                s = node.inputs["Strength"].default_value
                return np.array(c[:3], np.float64) * float(s)
    return np.array(world.color[:3], np.float64)


def scene_lights(depsgraph) -> list:
    """The depsgraph's lamps as LightData in Blender's units: ``color`` is the lamp's colour x power
    as Blender computes it for rendering (BKE_light_power x BKE_light_color, times EEVEE's diffuse
    factor): ``energy * 2^exposure``, tinted by the blackbody ``temperature_color`` when
    ``use_temperature``; an area lamp with *Normalize* off has a strength per m^2 (x its area).
    W/m^2 for a sun, W for the others; the passes convert them to MToon's light colour
    (engine/gpu/passes/pipeline.mtoon_light_colors, README "Light units").  Lamps hidden from diffuse
    rays (Object > Visibility > Diffuse) light nothing, as in EEVEE."""

    def power_color(light, matrix_world):
        color = np.array(light.color[:3], np.float64)
        if getattr(light, "use_temperature", False):
            color = color * np.array(light.temperature_color[:3], np.float64)
        power = float(light.energy) * 2.0 ** float(getattr(light, "exposure", 0.0))
        if light.type == "AREA" and not getattr(light, "normalize", True):
            power *= float(light.area(matrix_world=matrix_world))
        return color * power * float(getattr(light, "diffuse_factor", 1.0))

    out = []
    for inst in depsgraph.object_instances:
        if own_geometry(inst):
            continue            # a curve's / text's / metaball's mesh (reading its object leaks)
        ob = inst.object
        if ob.type != "LIGHT" or not getattr(ob, "visible_diffuse", True):
            continue
        light = ob.data
        m = np.array(inst.matrix_world)
        direction = -m[:3, 2]
        direction = direction / max(np.linalg.norm(direction), 1e-12)
        color = power_color(light, inst.matrix_world)
        if not np.all(np.isfinite(color)) or not np.all(np.isfinite(m)):
            continue
        out.append(LightData(
            kind=light.type, color=color, direction=direction, position=m[:3, 3].copy(),
            radius=float(getattr(light, "shadow_soft_size", 0.0)),
            spot_size=float(getattr(light, "spot_size", np.pi)),
            spot_blend=float(getattr(light, "spot_blend", 0.0)),
            cast_shadow=bool(getattr(light, "use_shadow", True)), name=ob.name,
            clip_start=float(getattr(light, "shadow_buffer_clip_start", 0.05)),
        ))
    return out


def settings_from_scene(scene, width: int, height: int, film_transparent: bool) -> FrameSettings:
    st = getattr(scene, "stylized", None)
    fps = scene.render.fps / max(scene.render.fps_base, 1e-9)

    def g(name, default):
        return getattr(st, name, default) if st is not None else default

    ssc = g("screen_space_outline_color", (0.0, 0.0, 0.0, 1.0))
    return FrameSettings(
        width=width, height=height, film_transparent=film_transparent, world_color=world_color(scene),
        time_seconds=(scene.frame_current - scene.frame_start + scene.frame_subframe) / max(fps, 1e-9),
        shadows=bool(g("shadows", True)), shadow_resolution=int(g("shadow_resolution", "2048")),
        shadow_cascades=int(g("shadow_cascades", 3)), shadow_distance=float(g("shadow_distance", 100.0)),
        shadow_split_lambda=float(g("shadow_split_lambda", 0.8)),
        shadow_cascade_fade=float(g("shadow_cascade_fade", 0.1)),
        shadow_bias=float(g("shadow_bias", 0.5)), shadow_normal_offset=float(g("shadow_normal_offset", 2.0)),
        shadow_min_offset=float(g("shadow_min_offset", 0.02)),
        shadow_pcf=1 if g("shadow_pcf", True) else 0, max_lights=int(min(16, g("max_lights", 8))),
        outlines=bool(g("outlines", True)), screen_space_outline=bool(g("screen_space_outline", False)),
        screen_space_outline_width=float(g("screen_space_outline_width", 1.0)),
        screen_space_outline_color=np.array(ssc[:3], np.float64), fxaa=bool(g("fxaa", True)),
        profile_gpu=bool(g("profile_gpu", False)), samples=max(1, int(g("render_samples", 1))),
    )

