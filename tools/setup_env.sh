#!/usr/bin/env bash
# Creates .venv (CPython 3.11) with the pinned dev/test packages, and makes sure the system
# libraries that the bpy module needs for headless OpenGL (Mesa EGL, llvmpipe) are installed.
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

DEB_PACKAGES="libegl1 libegl-mesa0 libgl1-mesa-dri libgl1 libvulkan1 libx11-6 libxext6 libxrender1 libxfixes3 libxi6 libxxf86vm1 libxkbcommon0 libsm6 libice6"

missing_debs() {
  local p out=""
  command -v dpkg-query >/dev/null 2>&1 || { echo ""; return; }
  for p in $DEB_PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || out="$out $p"
  done
  echo "$out"
}

missing="$(missing_debs)"
if [ -n "$missing" ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Debian packages for headless OpenGL:$missing"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
  else
    echo "setup: missing system libraries for headless OpenGL:$missing" >&2
    echo "setup: run as root:  apt-get update && apt-get install -y$missing" >&2
    exit 1
  fi
fi

PY=python3.11
command -v "$PY" >/dev/null 2>&1 || { echo "setup: python3.11 is required (bpy==5.0.1 needs CPython 3.11)" >&2; exit 1; }

stamp=.venv/.requirements-stamp
if [ ! -x .venv/bin/python ] || ! cmp -s requirements-dev.txt "$stamp"; then
  echo "setup: creating .venv with $($PY --version)"
  [ -x .venv/bin/python ] || "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-dev.txt
  cp requirements-dev.txt "$stamp"
fi
.venv/bin/python -c "import bpy, pytest" >/dev/null 2>&1 || { echo "setup: bpy failed to import in .venv" >&2; .venv/bin/python -c "import bpy"; exit 1; }
echo "setup: environment ready (.venv, bpy $(.venv/bin/python -c 'import bpy; print(bpy.app.version_string)' 2>/dev/null | tail -n1))"
