"""Sessions that play the preview, driven by hand: ``clocked_session`` (a generator for fixtures)
a viewport session whose preview clock the test advances (test_vrm_preview_channels, the springs,
crowd, mixer and hostile-transform tests), ``action_preview_session`` a session previewing one
action at a given time (test_bake, test_mixer)."""
from __future__ import annotations

import types

import bpy

import conftest as C
from stylized_renderer.engine.features.preview import control as preview


def clocked_session(monkeypatch, strict: bool = True):
    """A viewport session whose preview clock is driven by hand (a generator for fixtures):
    ``update(state, dt)`` runs ``update_frame`` as view_draw does, ``dt`` seconds after the last.
    ``strict``: a refused update or a ``last_error`` fails at once (tests of refusals pass False
    and read the state themselves)."""
    from stylized_renderer.engine.blender import session as session_mod
    from stylized_renderer.engine.gpu import util as gpu_util

    # (no stand-in for the hand-back: each update draws through run_in_gpu_context, whose render
    # of its own temporary scene changes no frame of this one, as a real viewport draw does not)
    clock = C.Clock()
    monkeypatch.setattr(session_mod, "time", clock)
    preview.clear_states()
    s = session_mod.StylizedSession(viewport=True, addon=C.addon())   # as view_update makes it

    def update(state, dt=0.0):
        clock.now += dt
        dg = bpy.context.evaluated_depsgraph_get()

        def task():
            s.ensure_gpu()
            s.ensure_runtime(dg)
            return s.update_frame(dg, state)
        assert gpu_util.run_in_gpu_context(task)
        if strict:
            assert state.last_error is None, state.last_error
        return s.runtime

    yield types.SimpleNamespace(session=s, update=update)
    gpu_util.run_in_gpu_context(s.free)
    addon = C.addon()
    assert addon is not None            # registered (conftest.addon registers the add-on)
    addon.forget_viewport_session()
    preview.stop_timer()
    preview.clear_states()


def action_preview_session(arm, act, seek):
    """(session, state, frame): a session previewing ``act`` on ``arm`` at ``seek`` seconds;
    ``frame()`` runs its update_frame in the GPU context and returns (ok, player clip, time)."""
    from stylized_renderer.engine.blender.session import StylizedSession
    from stylized_renderer.engine.features.preview.control import PreviewState
    from stylized_renderer.engine.gpu import util as gpu_util

    s = StylizedSession(addon=C.addon())       # plays the add-on's bakes (what the operators make)
    s.imports.want_clips = True
    st = PreviewState(armature=arm.name, active=True)
    st.push("clip", act.name)
    st.push("seek", seek)
    st.push("pause")

    def task():
        dg = bpy.context.evaluated_depsgraph_get()
        s.ensure_gpu()
        s.ensure_runtime(dg)
        ok = s.update_frame(dg, st)
        assert s.runtime is not None    # made by ensure_runtime
        return ok, s.runtime.player.clip, s.runtime.player.current_time

    return s, st, lambda: gpu_util.run_in_gpu_context(task)
