"""StylizedSession: the per-engine state shared by final renders and the viewport.

sync(depsgraph)      brings GPU resources up to date with the depsgraph
render_texture(...)  builds the frame (extraction + lights + camera) and runs the FramePipeline
render_pixels(...)   the same, read back as a linear float (H, W, 4) array
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .assets import Bounds
from .passes.frame import CameraData, FrameData, FrameSettings, LightData

DRAWABLE_TYPES = {"MESH", "CURVE", "SURFACE", "FONT", "META"}


def camera_from_matrices(view: np.ndarray, projection: np.ndarray, is_ortho: bool = False) -> CameraData:
    return CameraData(view=np.asarray(view, np.float64), projection=np.asarray(projection, np.float64), is_ortho=is_ortho)


def camera_from_object(depsgraph, cam_eval, width: int, height: int) -> CameraData:
    rd = depsgraph.scene.render
    proj = cam_eval.calc_matrix_camera(depsgraph, x=width, y=height,
                                       scale_x=rd.pixel_aspect_x, scale_y=rd.pixel_aspect_y)
    view = np.linalg.inv(np.array(cam_eval.matrix_world))
    is_ortho = getattr(cam_eval.data, "type", "PERSP") == "ORTHO"
    return camera_from_matrices(view, np.array(proj), is_ortho)


@dataclass
class FallbackItem:
    """A draw of Blender's evaluated mesh (same fields the passes read from a RenderItem)."""

    object_name: str
    stream: object
    world: np.ndarray
    world_bounds: Bounds
    local_bounds: Bounds
    material_name: str
    material_index: int
    node_index: int = -1
    primitive_index: int = 0
    palette: object = None
    influences: int = 0
    cast_shadow: bool = True
    object_id: int = 0
    fallback_reason: str = ""


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
    out = []
    for inst in depsgraph.object_instances:
        ob = inst.object
        if ob.type != "LIGHT":
            continue
        light = ob.data
        m = np.array(inst.matrix_world)
        direction = -m[:3, 2]
        direction = direction / max(np.linalg.norm(direction), 1e-12)
        color = np.array(light.color[:3], np.float64) * float(light.energy)
        out.append(LightData(
            kind=light.type, color=color, direction=direction, position=m[:3, 3].copy(),
            radius=float(getattr(light, "shadow_soft_size", 0.0)),
            spot_size=float(getattr(light, "spot_size", np.pi)),
            spot_blend=float(getattr(light, "spot_blend", 0.0)),
            cast_shadow=bool(getattr(light, "use_shadow", True)), name=ob.name,
        ))
    return out


def _mesh_signature(mesh) -> tuple:
    return (mesh.as_pointer(), len(mesh.vertices), len(mesh.loops), len(mesh.polygons))


class StylizedSession:
    def __init__(self):
        self.pipeline = None
        self.backend = None
        self._fallback = {}        # object name -> list of (material_name, material_index, stream, bounds)
        self.stats = {}
        self.materials = {}

    # ------------------------------------------------------------------------------------------
    def _ensure_gpu(self):
        if self.pipeline is None:
            from .passes.pipeline import FramePipeline
            from .runtime.gpu_backend import GpuBackend

            self.pipeline = FramePipeline()
            self.backend = GpuBackend()

    def sync(self, depsgraph, updates=None) -> None:
        """Record what changed; GPU work happens lazily in render_texture (needs a GPU context)."""
        self._dirty = True

    # ------------------------------------------------------------------------------------------
    def _fallback_items(self, depsgraph) -> list:
        from .importer.mesh import read_mesh, split_by_material

        items = []
        seen = set()
        for inst in depsgraph.object_instances:
            ob = inst.object
            if ob.type not in DRAWABLE_TYPES or not inst.show_self:
                continue
            key = ob.name if not inst.is_instance else f"{ob.name}#{inst.random_id}"
            try:
                mesh = ob.to_mesh()
            except RuntimeError:
                continue
            if mesh is None:
                continue
            try:
                cs = read_mesh(mesh)
                prims = split_by_material(cs, len(mesh.vertices))
                mats = [s.material.name if s.material is not None else "" for s in ob.material_slots]
            finally:
                ob.to_mesh_clear()
            world = np.array(inst.matrix_world)
            for k, p in enumerate(prims):
                if p.indices.shape[0] == 0:
                    continue
                stream = self.backend.create_stream(p)
                lb = Bounds.from_points(p.positions)
                mname = mats[p.material_index] if 0 <= p.material_index < len(mats) else ""
                items.append(FallbackItem(object_name=ob.name, stream=stream, world=world,
                                          world_bounds=lb.transformed(world), local_bounds=lb,
                                          material_name=mname, material_index=p.material_index,
                                          primitive_index=k, object_id=len(seen) + 1,
                                          cast_shadow=True, fallback_reason="evaluated mesh"))
            seen.add(key)
        return items

    def _materials(self, depsgraph) -> dict:
        from .materials import resolve_material

        out = {}
        for mat in depsgraph.ids:
            if isinstance(mat, type(None)):
                continue
            if getattr(mat, "bl_rna", None) is not None and mat.bl_rna.identifier == "Material":
                out[mat.name] = resolve_material(mat.original if hasattr(mat, "original") else mat)
        return out

    def build_frame(self, depsgraph, camera: CameraData, width: int, height: int,
                    film_transparent: bool = False) -> FrameData:
        self._ensure_gpu()
        scene = depsgraph.scene
        t0 = time.perf_counter()
        items = self._fallback_items(depsgraph)
        t1 = time.perf_counter()
        settings = FrameSettings(width=width, height=height, film_transparent=film_transparent,
                                 world_color=world_color(scene),
                                 time_seconds=scene.frame_current * scene.render.fps_base / max(scene.render.fps, 1))
        frame = FrameData(items=items, camera=camera, lights=scene_lights(depsgraph), settings=settings,
                          materials=self._materials(depsgraph))
        self.stats.update(extract_ms=(t1 - t0) * 1000.0, items=len(items),
                          fallback_objects=sorted({i.object_name for i in items if getattr(i, "fallback_reason", "")}))
        return frame

    def render_texture(self, depsgraph, camera: CameraData, width: int, height: int, film_transparent=False):
        frame = self.build_frame(depsgraph, camera, width, height, film_transparent)
        t0 = time.perf_counter()
        tex = self.pipeline.execute(frame)
        self.stats["pipeline_ms"] = (time.perf_counter() - t0) * 1000.0
        return tex

    def render_pixels(self, depsgraph, camera: CameraData, width: int, height: int,
                      film_transparent: bool = False, final: bool = True) -> np.ndarray:
        from .gpu_util import texture_to_numpy

        tex = self.render_texture(depsgraph, camera, width, height, film_transparent)
        return texture_to_numpy(tex, width, height)

    def free(self) -> None:
        if self.pipeline is not None:
            self.pipeline.free()
        if self.backend is not None:
            self.backend.release_all()
        self.pipeline = None
        self.backend = None
        self._fallback.clear()
