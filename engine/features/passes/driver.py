"""Compositing passes on one session (docs/architecture.md): ``PassesDriver`` is how the host
(the session and the render engine) reaches this feature.

The session makes one driver (``session.passes``).  For a final render's view:
``ids_for(view_layer, passes)`` gives the coverage samples' id reader (Cryptomatte's and the
AOVs'; None when neither is enabled, so the samples draw as before), ``finish`` turns what it
read into the ranked Cryptomatte layers, the AOV images and the Cryptomatte metadata, and
``unwritten_line`` words the enabled passes Stylized does not write (engine/features/passes/inventory.py).
The driver keeps nothing between renders.
"""
from __future__ import annotations

from . import aov, cryptomatte, inventory, motion_blur, vector


class PassesDriver:
    """The compositing passes of one session's final renders (see the module docstring)."""

    def ids_for(self, view_layer, passes):
        """A ``cryptomatte.CryptoIds`` for ``passes`` (``render_passes.requested``) or None."""
        kinds = cryptomatte.kinds(passes)
        wants_aovs = any(p.startswith(aov.PREFIX) for p in passes)
        return cryptomatte.CryptoIds(kinds) if kinds or wants_aovs else None

    def draw_aovs(self, pipeline, frame, view_layer, passes) -> tuple:
        """Draw the AOVs' inputs evaluated per pixel (image textures, colour attributes) of the
        frame the pipeline just drew (engine/gpu/passes/aov_draw.py); returns the averaged
        passes' extra sources (``render_passes.averaged_sources``), () when every AOV input is
        a constant or no AOV is requested (nothing drawn)."""
        aovs = aov.requested(view_layer) if any(p.startswith(aov.PREFIX) for p in passes) else []
        if not aovs:
            return ()
        import bpy

        from ...gpu.passes import aov_draw

        inputs = aov.drawn_inputs(aovs, {it.material_name for it in frame.items}, bpy.data.materials.get)
        return aov_draw.draw(pipeline, frame, inputs, dict(aovs), aov.DRAWN_PREFIX) if inputs else ()

    def finish(self, ids, view_layer, out: dict, stamp=None, dropped=()) -> list:
        """Add the Cryptomatte layers and AOV images of ``ids`` to ``out`` (the AOVs' drawn
        parts, under ``aov.DRAWN_PREFIX``, taken out of it and added) and Cryptomatte's metadata
        to ``stamp`` (a dict, when given); returns the log lines of AOV inputs not evaluated
        (and of ``dropped``: drawn AOV passes the resolve had no room for)."""
        import bpy

        out.update(ids.passes(int(getattr(view_layer, "pass_cryptomatte_depth", 6))))
        lines = []
        drawn = {k: out.pop(k) for k in [k for k in out if k.startswith(aov.DRAWN_PREFIX)]}
        aovs = aov.requested(view_layer)
        if aovs:
            images, lines = aov.fill(ids, aovs, bpy.data.materials.get, drawn)
            out.update(images)
        lines += [f"AOV '{name[len(aov.DRAWN_PREFIX):]}': its image-texture inputs are not drawn (no room in the "
                  f"averaged passes' resolve for more passes): 0 there" for name in dropped]
        if stamp is not None:
            stamp.update(ids.metadata(view_layer.name))
        return lines

    def motion(self, engine, session, depsgraph, camera_at):
        """The Vector pass's capture of the instants around the frame (``vector.MotionCapture``),
        taken before the frame is drawn; ``camera_at()`` gives the view's camera at an instant."""
        return vector.MotionCapture().capture(engine, session, depsgraph, camera_at)

    def blur(self, engine, depsgraph, camera_at):
        """The render's ``motion_blur.MotionBlur`` when Render > Motion Blur is on and the frame
        has more than one sample (None otherwise: the frame is drawn sharp)."""
        scene = depsgraph.scene
        samples = int(getattr(getattr(scene, "stylized", None), "render_samples", 1))
        if not scene.render.use_motion_blur or samples < 2:
            return None
        return motion_blur.MotionBlur(engine, depsgraph, camera_at, samples, scene.render)

    def unwritten_line(self, view_layer, passes, render=None) -> str:
        """One log line naming the enabled passes not written, and Motion Blur when ``render``
        has it on ("" when there are none)."""
        return inventory.log_line(view_layer.name, inventory.unwritten(view_layer, passes, render))
