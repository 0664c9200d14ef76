#!/usr/bin/env bash
# Usage: tools/setup_env.sh [BLENDER]      BLENDER: 4.5 | 5.0 | 5.2 (default: 5.2, the Makefile's BLENDER)
#
# Creates .venv-BLENDER/ with the exact packages pinned in requirements/blender-BLENDER.txt (the
# bpy wheel of that Blender, pytest) and requirements/dev.txt (openexr, ruff, pyright), on the CPython that wheel needs (named on the file's
# "# python: X.Y" line), and makes sure the system libraries that the bpy module needs for
# headless OpenGL (Mesa EGL, llvmpipe) are installed. For the default version it also points the
# .venv link at that environment (`.venv/bin/python tools/...` in the docs).
# One environment per version, never shared; the wheels (~400 MB each) come from pip's own cache
# after the first download. Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

DEFAULT=5.2   # keep in step with the Makefile's BLENDER
VERSION="${1:-$DEFAULT}"
REQ="requirements/blender-$VERSION.txt"
DEV_REQ="requirements/dev.txt"   # test and lint tools, the same in every environment
VENV=".venv-$VERSION"
[ -f "$REQ" ] || { echo "setup: no $REQ (versions: $(ls requirements | sed -n 's/^blender-\(.*\)\.txt$/\1/p' | tr '\n' ' '))" >&2; exit 2; }
PYVER="$(sed -n 's/^# python: *\([0-9.]*\).*/\1/p' "$REQ" | head -n1)"
[ -n "$PYVER" ] || { echo "setup: $REQ has no '# python: X.Y' line" >&2; exit 2; }

IS_ROOT=0
[ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1 && IS_ROOT=1
APT_UPDATED=0
apt_install() {   # apt_install PKG...  (root only)
  if [ "$APT_UPDATED" = 0 ]; then apt-get update -qq; APT_UPDATED=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# --- system libraries for headless OpenGL -----------------------------------------------------
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
  if [ "$IS_ROOT" = 1 ]; then
    echo "setup: installing Debian packages for headless OpenGL:$missing"
    apt_install $missing
  else
    echo "setup: missing system libraries for headless OpenGL:$missing" >&2
    echo "setup: run as root:  apt-get update && apt-get install -y$missing" >&2
    exit 1
  fi
fi

# --- the CPython this bpy wheel is built for ---------------------------------------------------
usable_python() {   # a python X.Y that runs and can make a venv with pip
  "$1" -c "import sys, venv, ensurepip; sys.exit(sys.version_info[:2] != tuple(map(int, '$PYVER'.split('.'))))" >/dev/null 2>&1
}

find_python() {
  local c cands=("python$PYVER")
  if command -v pyenv >/dev/null 2>&1; then   # pyenv installs that are not on the active shim
    for c in "$(pyenv root)"/versions/"$PYVER"*/bin/python"$PYVER"; do cands+=("$c"); done
  fi
  cands+=("/usr/bin/python$PYVER" "/usr/local/bin/python$PYVER")
  for c in "${cands[@]}"; do
    if usable_python "$c"; then command -v "$c"; return 0; fi
  done
  return 1
}

PY="$(find_python || true)"
if [ -z "$PY" ] && [ "$IS_ROOT" = 1 ]; then
  # Debian ships one CPython per release (12: 3.11, 13: 3.13); venv support is a separate package
  if [ "$APT_UPDATED" = 0 ]; then apt-get update -qq; APT_UPDATED=1; fi
  if apt-cache show "python$PYVER-venv" >/dev/null 2>&1; then
    echo "setup: installing Debian's python$PYVER and python$PYVER-venv"
    apt_install "python$PYVER" "python$PYVER-venv"
    PY="$(find_python || true)"
  fi
fi
[ -n "$PY" ] || { echo "setup: CPython $PYVER is required for Blender $VERSION's bpy wheel ($REQ); none found (looked at python$PYVER on PATH, pyenv, /usr/bin, /usr/local/bin)" >&2; exit 1; }

# --- the virtual environment -------------------------------------------------------------------
stamp="$VENV/.requirements-stamp"
if [ -x "$VENV/bin/python" ] && ! usable_python "$VENV/bin/python"; then
  echo "setup: $VENV is not CPython $PYVER; recreating it"
  rm -rf "$VENV"
fi
if [ ! -x "$VENV/bin/python" ] || ! cat "$REQ" "$DEV_REQ" | cmp -s - "$stamp"; then
  echo "setup: creating $VENV with $("$PY" --version) and the packages pinned in $REQ and $DEV_REQ"
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$REQ" -r "$DEV_REQ"
  cat "$REQ" "$DEV_REQ" > "$stamp"
fi
"$VENV/bin/python" -c "import bpy, pytest, OpenEXR" >/dev/null 2>&1 || { echo "setup: bpy, pytest or OpenEXR failed to import in $VENV" >&2; "$VENV/bin/python" -c "import bpy"; exit 1; }

# --- .venv: the default version's environment, under the name the docs use ----------------------
if [ "$VERSION" = "$DEFAULT" ]; then
  if [ -L .venv ] || [ ! -e .venv ]; then
    ln -sfn "$VENV" .venv
  else
    echo "setup: note: .venv is a directory from an older layout, not used by make (make uses $VENV); 'rm -rf .venv && make setup' turns it into a link to $VENV"
  fi
fi
echo "setup: environment ready ($VENV, bpy $("$VENV/bin/python" -c 'import bpy; print(bpy.app.version_string)' 2>/dev/null | tail -n1))"
