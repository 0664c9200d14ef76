"""Issue 26 item 5: anti-aliasing samples of final frames.  F12 with *Samples* accumulates
jittered sub-pixel samples of the whole pipeline; measured against the true coverage (the same
engine at 4x the resolution, averaged down) on the silhouettes, next to EEVEE's figure."""
from __future__ import annotations

import numpy as np

import conftest as C
from support import compositing_scene as S
from support.exr_read import layer_pass


def _silhouette_error(alpha, ref):
    edge = (ref > 0.02) & (ref < 0.98)
    return float(np.abs(alpha - ref)[edge].mean()), int(np.count_nonzero(edge))


def _alpha(scene, path, **kw):
    return S.combined(S.render_exr(scene, path, **kw))[..., 3]


def test_samples_approach_the_true_coverage(empty_scene, tmp_path):
    scene = empty_scene
    S.stage(scene)
    scene.objects["Ground"].hide_render = True
    scene.render.film_transparent = True
    st = scene.stylized
    st.fxaa = False
    st.render_samples = 1
    scene.render.resolution_percentage = 400
    big = _alpha(scene, tmp_path / "big.exr")
    ref = big.reshape(S.H, 4, S.W, 4).mean(axis=(1, 3))
    scene.render.resolution_percentage = 100
    plain = _alpha(scene, tmp_path / "plain.exr")
    base, n_edge = _silhouette_error(plain, ref)
    assert n_edge > 100 and base > 0.1
    st.fxaa = True
    fxaa = _silhouette_error(_alpha(scene, tmp_path / "fxaa.exr"), ref)[0] / base
    st.render_samples = 8
    sampled = _alpha(scene, tmp_path / "aa.exr")
    ours = _silhouette_error(sampled, ref)[0] / base
    eevee = _silhouette_error(_alpha(scene, tmp_path / "eevee.exr", engine="EEVEE", samples=8), ref)[0] / base
    print(f"silhouette alpha error against the true coverage (1 = no AA): fxaa {fxaa:.2f}, "
          f"8 samples {ours:.2f}, EEVEE 8 samples {eevee:.2f}")
    C.save_png(np.stack([np.concatenate([ref, plain, sampled], 1)] * 3 + [np.ones((S.H, 3 * S.W))], -1),
               C.ARTIFACTS / "antialiasing.png")
    assert ours < 0.5 and ours < fxaa
    assert ours <= eevee + 0.1


def test_samples_keep_passes_exact_and_frames_repeatable(empty_scene, tmp_path):
    scene = empty_scene
    S.stage(scene)
    scene.view_layers[0].use_pass_z = True
    st = scene.stylized
    st.render_samples = 1
    one = S.render_exr(scene, tmp_path / "one.exr")
    st.render_samples = 6
    a = S.render_exr(scene, tmp_path / "a.exr")
    b = S.render_exr(scene, tmp_path / "b.exr")
    # the passes come from the centre sample: the same as without samples
    np.testing.assert_array_equal(layer_pass(a, "ViewLayer.Depth", "Z"), layer_pass(one, "ViewLayer.Depth", "Z"))
    # every F12 of the frame gives the same picture (a farm renders it the same)
    np.testing.assert_array_equal(S.combined(a), S.combined(b))
    assert np.abs(S.combined(a) - S.combined(one)).max() > 0.05       # and it is anti-aliased


def test_shading_once_matches_shading_every_sample(empty_scene, tmp_path, monkeypatch):
    """The default path shades the frame once and resolves the samples' coverage; drawing the whole
    pipeline for every sample (samples.SHADE_EVERY_SAMPLE) is the reference."""
    from stylized_renderer.engine.gpu.passes import samples

    scene = empty_scene
    S.stage(scene)
    scene.stylized.render_samples = 8
    once = S.combined(S.render_exr(scene, tmp_path / "once.exr"))
    monkeypatch.setattr(samples, "SHADE_EVERY_SAMPLE", True)
    every = S.combined(S.render_exr(scene, tmp_path / "every.exr"))
    C.save_png(np.concatenate([once, every], 1), C.ARTIFACTS / "antialiasing_once_every.png")
    diff = np.abs(once - every).max(-1)
    assert diff.mean() < 0.01 and np.percentile(diff, 99) < 0.15, (diff.mean(), np.percentile(diff, 99))
