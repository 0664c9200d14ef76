"""The VRM Add-on (../shared/vendor/vrm_addon) for the tests that need it: the ``vrm_addon``
fixture (registered by conftest.py) enables it for one test and disables it after."""
from __future__ import annotations

import sys

import bpy
import pytest

import conftest as C

ADDON_DIR = C.ROOT.parent / "shared" / "vendor" / "vrm_addon"


@pytest.fixture
def vrm_addon(ext):
    """The VRM Add-on enabled for one test (disabled after, so other tests never see it)."""
    if not (ADDON_DIR / "io_scene_vrm").is_dir():
        pytest.skip("../shared/vendor/vrm_addon is absent (only in the project workspace)")
    import addon_utils

    if str(ADDON_DIR) not in sys.path:
        sys.path.insert(0, str(ADDON_DIR))
    try:
        addon_utils.enable("io_scene_gltf2", default_set=True)
        mod = addon_utils.enable("io_scene_vrm", default_set=True)
    except Exception as ex:     # pragma: no cover - depends on the Blender version
        pytest.skip(f"the VRM Add-on cannot be enabled on Blender {bpy.app.version_string}: {ex}")
    if mod is None or not hasattr(bpy.types.Armature, "vrm_addon_extension"):
        pytest.skip(f"the VRM Add-on did not register on Blender {bpy.app.version_string}")
    yield mod
    disable_vrm_addon()


def disable_vrm_addon():
    import addon_utils

    try:
        addon_utils.disable("io_scene_vrm", default_set=True)
    except Exception:
        pass
    assert not hasattr(bpy.types.Armature, "vrm_addon_extension")
