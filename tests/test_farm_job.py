# SPDX-License-Identifier: GPL-3.0-or-later
"""The farm job (tools/farm/stylized_render.openjd.yaml): Open Job Description's own runner
(`openjd run`, openjd-cli from the dev requirements) renders a short frame range of the demo in
chunks, one Blender process per chunk (the bpy module through tools/farm/bpy_blender.py); every
frame equals, pixel for pixel, the frame this single process renders through F12."""
from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys

import bpy
import numpy as np
import pytest

from demo.character import build_demo_scene

ROOT = pathlib.Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "tools" / "farm" / "stylized_render.openjd.yaml"
FRAMES = (1, 2, 3, 4, 5)


def _openjd() -> list:
    """The openjd command of this environment (openjd-cli, pinned in requirements/)."""
    if importlib.util.find_spec("openjd") is None or importlib.util.find_spec("openjd.cli") is None:
        pytest.fail(f"openjd-cli is not installed for {sys.executable} (a dev requirement: run make setup)")
    return [sys.executable, "-m", "openjd"]


def _pixels(path: pathlib.Path) -> np.ndarray:
    img = bpy.data.images.load(str(path), check_existing=False)
    try:
        w, h = img.size
        px = np.empty(w * h * 4, dtype=np.float32)
        img.pixels.foreach_get(px)
        return px.reshape(h, w, 4)
    finally:
        bpy.data.images.remove(img)


@pytest.fixture
def demo_file(ext, tmp_path):
    bpy.ops.wm.read_factory_settings(use_empty=True)
    build_demo_scene()
    scene = bpy.context.scene
    scene.render.engine = "STYLIZED"
    scene.render.resolution_x, scene.render.resolution_y = 128, 96
    scene.render.image_settings.file_format = "PNG"
    scene.render.image_settings.color_mode = "RGBA"
    path = tmp_path / "shot.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


def test_template_validates():
    proc = subprocess.run([*_openjd(), "check", str(TEMPLATE), "--extensions", "TASK_CHUNKING"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_chunked_farm_frames_equal_one_process(demo_file, tmp_path):
    blender = tmp_path / "blender"     # the Blender command for the job: the bpy module's stand-in
    blender.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{ROOT / "tools" / "farm" / "bpy_blender.py"}" "$@"\n')
    blender.chmod(0o755)
    farm_dir = tmp_path / "farm"
    proc = subprocess.run(
        [*_openjd(), "run", str(TEMPLATE), "--extensions", "TASK_CHUNKING",
         "-p", f"SceneFile={demo_file}", "-p", f"OutputDir={farm_dir}",
         "-p", f"Frames={FRAMES[0]}-{FRAMES[-1]}", "-p", "ChunkSize=2", "-p", f"BlenderExecutable={blender}"],
        capture_output=True, text=True, timeout=300)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    # three chunks (1-2, 3-4, 5), each its own process
    chunks = sorted(line.split("frames (")[1].split(")")[0] for line in log.splitlines()
                    if "render_chunk:" in line and "frames (" in line)
    assert chunks == ["1-2", "3-4", "5-5"], log[-4000:]

    # the same frames from this one process, F12 with the same scene file
    bpy.ops.wm.open_mainfile(filepath=str(demo_file))
    scene = bpy.context.scene
    one_dir = tmp_path / "one"
    previous = None
    for f in FRAMES:
        scene.frame_set(f)
        scene.render.filepath = str(one_dir / f"frame_{f:04d}")
        bpy.ops.render.render(write_still=True)
        farm = _pixels(farm_dir / f"frame_{f:04d}.png")
        one = _pixels(one_dir / f"frame_{f:04d}.png")
        assert farm.shape == (96, 128, 4)
        assert np.array_equal(farm, one), f"frame {f}: chunked farm frame differs from one process's " \
            f"({int((farm != one).any(axis=2).sum())} pixels)"
        # a real picture of the animation: the character covers part of it, and frames differ
        assert np.abs(one[..., :3] - one[0, 0, :3]).max(axis=2).__gt__(0.05).mean() > 0.02
        if previous is not None:
            assert not np.array_equal(previous, one), f"frame {f} equals the frame before it"
        previous = one


def test_worker_without_the_extension_fails_naming_it(demo_file, tmp_path):
    """The job's chunk script on a Blender without the extension: the task fails with a message
    that says what the worker lacks (not a render with another engine)."""
    import yaml

    step = yaml.safe_load(TEMPLATE.read_text())["steps"][0]
    script = tmp_path / "render_chunk.py"
    script.write_text(step["script"]["embeddedFiles"][0]["data"])
    code = ("import bpy, runpy, sys; bpy.ops.wm.open_mainfile(filepath=sys.argv[1]); "
            "a = sys.argv; sys.argv = ['blender', '--', '--frames', '1-1', '--output-dir', a[3]]; runpy.run_path(a[2])")
    proc = subprocess.run([sys.executable, "-c", code, str(demo_file), str(script), str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "Stylized render engine is not available" in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "out" / "frame_0001.png").exists()
