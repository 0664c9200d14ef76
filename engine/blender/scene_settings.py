"""What a frame reads from the scene besides the objects: the world colour, the lamps (in
Blender's units) and the render settings (``FrameSettings``)."""
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


def soft_radius(light) -> float:
    """The radius (m) that softens a local lamp's shadow: *Radius* (``shadow_soft_size``) of a point
    or spot lamp, half the larger side of an area lamp."""
    if light.type == "AREA":
        size = float(getattr(light, "size", 0.0))
        if getattr(light, "shape", "SQUARE") in ("RECTANGLE", "ELLIPSE"):
            size = max(size, float(getattr(light, "size_y", 0.0)))
        return max(0.5 * size, 0.0)
    return max(float(getattr(light, "shadow_soft_size", 0.0)), 0.0)


def influence_radius(light, threshold: float) -> float:
    """EEVEE's reach of a local lamp (m): its *Custom Distance* when set, else where the inverse
    square law brings its power to the scene's *Light Threshold*: sqrt(max(colour) x |energy| / 100
    x max(diffuse, specular factor) / threshold) (eevee_light.cc ``attenuation_radius_get``)."""
    if getattr(light, "use_custom_distance", False):
        return max(float(light.cutoff_distance), 0.0)
    power = (max(light.color[:3]) * abs(float(light.energy)) / 100.0
             * max(float(getattr(light, "diffuse_factor", 1.0)), float(getattr(light, "specular_factor", 1.0))))
    t = max(float(threshold), 1e-16)
    r = float(np.sqrt(max(power, 0.0) / t))
    return r if np.isfinite(r) else 3.0e38


def scene_lights(depsgraph) -> list:
    """The depsgraph's lamps as LightData in Blender's units: ``color`` is the lamp's colour x power
    as Blender computes it for rendering (BKE_light_power x BKE_light_color, times EEVEE's diffuse
    factor): ``energy * 2^exposure``, tinted by the blackbody ``temperature_color`` when
    ``use_temperature``; an area lamp with *Normalize* off has a strength per m^2 (x its area).
    W/m^2 for a sun, W for the others; the passes convert them to MToon's light colour
    (engine/gpu/passes/lights.mtoon_light_colors, README "Light units").  Lamps hidden from diffuse
    rays (Object > Visibility > Diffuse) light nothing, as in EEVEE.

    Lamp values as EEVEE treats them (docs/lighting.md): a lamp of negative or zero power (energy,
    colour or diffuse factor), or with a non-finite value or transform, or whose transform
    collapses its axis (a zero scale), lights nothing; a huge power stays finite (the shaders
    clamp what they add).  Each lamp carries its reach (``influence_radius``) and its Light
    Linking / Shadow Linking rules (engine/blender/light_linking.py)."""
    from .light_linking import lamp_rules

    def power_color(light, matrix_world):
        color = np.array(light.color[:3], np.float64)
        if getattr(light, "use_temperature", False):
            color = color * np.array(light.temperature_color[:3], np.float64)
        power = float(light.energy) * 2.0 ** float(getattr(light, "exposure", 0.0))
        if light.type == "AREA" and not getattr(light, "normalize", True):
            power *= float(light.area(matrix_world=matrix_world))
        return color * power * float(getattr(light, "diffuse_factor", 1.0))

    eevee = getattr(depsgraph.scene, "eevee", None)
    threshold = float(getattr(eevee, "light_threshold", 0.01))
    out = []
    for inst in depsgraph.object_instances:
        if own_geometry(inst):
            continue            # a curve's / text's / metaball's mesh (reading its object leaks)
        ob = inst.object
        if ob.type != "LIGHT" or not getattr(ob, "visible_diffuse", True):
            continue
        light = ob.data
        m = np.array(inst.matrix_world)
        with np.errstate(all="ignore"):
            color = np.minimum(power_color(light, inst.matrix_world), 1.0e30)
        if not np.all(np.isfinite(color)) or not np.all(np.isfinite(m)) or not color.max() > 0.0:
            continue            # EEVEE: a negative lamp is absent; NaN never reaches a pixel
        direction = -m[:3, 2]
        length = float(np.linalg.norm(direction))
        if not length > 1e-12:
            continue            # a zero scale: no axis to shine along
        direction = direction / length
        receivers, blockers = lamp_rules(ob)
        out.append(LightData(
            kind=light.type, color=color, direction=direction, position=m[:3, 3].copy(),
            radius=soft_radius(light),
            spot_size=float(getattr(light, "spot_size", np.pi)),
            spot_blend=float(getattr(light, "spot_blend", 0.0)),
            cast_shadow=bool(getattr(light, "use_shadow", True)), name=ob.name,
            clip_start=float(getattr(light, "shadow_buffer_clip_start", 0.05)),
            influence=float("inf") if light.type == "SUN" else influence_radius(light, threshold),
            sun_angle=float(getattr(light, "angle", 0.0)) if light.type == "SUN" else 0.0,
            receivers=receivers, blockers=blockers,
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
        shadow_pcf=1 if g("shadow_pcf", True) else 0, soft_shadows=bool(g("soft_shadows", True)), max_lights=max(1, int(g("max_lights", 128))),
        outlines=bool(g("outlines", True)), screen_space_outline=bool(g("screen_space_outline", False)),
        screen_space_outline_width=float(g("screen_space_outline_width", 1.0)),
        screen_space_outline_color=np.array(ssc[:3], np.float64), fxaa=bool(g("fxaa", True)),
        profile_gpu=bool(g("profile_gpu", False)), samples=max(1, int(g("render_samples", 1))),
    )

