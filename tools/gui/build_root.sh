#!/usr/bin/env bash
# Build (once) the Debian root that `make test-gui` and `make bench-gui` run a real GUI Blender in:
# Debian unstable's `blender` package with Xvfb, xdotool, ImageMagick and Mesa's llvmpipe
# (OpenGL) and lavapipe (Vulkan). Nothing is installed into the host's own system: debootstrap is
# unpacked from its .deb into the cache and run from there, and everything lands under ROOT.
#
# Idempotent and cached: a finished root carries a stamp naming the package list it was built
# with; a run that finds that stamp does nothing. A failed build leaves no root (it is built in
# ROOT.partial and renamed at the end).
#
# Usage: tools/gui/build_root.sh            (needs root: debootstrap and chroot)
# Env:   STYLIZED_GUI_ROOT  where the root lives (default /var/cache/stylized-gui/root)
#        DEBIAN_MIRROR      (default http://deb.debian.org/debian)
# Exit:  0 the root is ready; 3 Debian's package could not be installed (prints one line);
#        other non-zero: the build failed otherwise.
set -euo pipefail

ROOT=${STYLIZED_GUI_ROOT:-/var/cache/stylized-gui/root}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
CACHE=$(dirname "$ROOT")
# x11-xserver-utils: xmodmap (tools/gui/harness.py maps keycode 96 to plain F12: xdotool otherwise
# presses Alt with it under Xvfb, and Blender runs Alt+F12, "render the sequencer scene")
# python3-cattr (cattrs), python3-zstandard, python3-requests: what Blender's own extension manager imports (Debian's blender
# does not depend on them; without cattrs `blender --command extension` fails to register)
PACKAGES="blender xvfb xauth xdotool imagemagick x11-utils mesa-vulkan-drivers libgl1-mesa-dri libegl-mesa0 fonts-dejavu-core procps x11-xserver-utils python3-numpy python3-cattr python3-zstandard python3-requests"
STAMP_TEXT="sid: $PACKAGES"
STAMP="$ROOT/.stylized-gui-ready"

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$STAMP_TEXT" ]; then
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "build_root: needs root (debootstrap, chroot); run as root" >&2
    exit 1
fi

mkdir -p "$CACHE"
PARTIAL="$ROOT.partial"
LOG="$CACHE/build_root.log"
: >"$LOG"
echo "build_root: building $ROOT (log: $LOG); takes several minutes the first time"

# debootstrap itself, unpacked from Debian's .deb into the cache (not installed on the host)
DB="$CACHE/debootstrap"
if [ ! -x "$DB/usr/sbin/debootstrap" ]; then
    tmp=$(mktemp -d)
    (cd "$tmp" && apt-get download debootstrap >>"$LOG" 2>&1) || {
        echo "build_root: could not download debootstrap (see $LOG)" >&2; rm -rf "$tmp"; exit 1; }
    rm -rf "$DB"; mkdir -p "$DB"
    dpkg-deb -x "$tmp"/debootstrap_*.deb "$DB"
    rm -rf "$tmp"
fi

APT=(apt-get -o Acquire::Check-Valid-Until=false -o APT::Install-Recommends=false -o Dpkg::Use-Pty=0 -y -q)
in_root() { unshare --mount --propagation private -- sh -c \
    'mount -t proc proc "$0/proc" && mount --rbind /dev "$0/dev" && mount --rbind /sys "$0/sys" && exec chroot "$0" "$@"' \
    "$PARTIAL" env DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }

# a finished root built with another package list: add what is missing in place
if [ -f "$STAMP" ]; then
    mv "$ROOT" "$PARTIAL"
    # shellcheck disable=SC2086
    if in_root "${APT[@]}" update >>"$LOG" 2>&1 && in_root "${APT[@]}" install $PACKAGES >>"$LOG" 2>&1; then
        in_root apt-get clean >>"$LOG" 2>&1 || true
        mv "$PARTIAL" "$ROOT"
        printf '%s' "$STAMP_TEXT" >"$STAMP"
        echo "build_root: updated: $ROOT"
        exit 0
    fi
    echo "build_root: updating the root failed (see $LOG); building it anew" >&2
fi

rm -rf "$PARTIAL"
if ! DEBOOTSTRAP_DIR="$DB/usr/share/debootstrap" "$DB/usr/sbin/debootstrap" \
        --variant=minbase --components=main sid "$PARTIAL" "$MIRROR" >>"$LOG" 2>&1; then
    echo "build_root: debootstrap of Debian unstable failed (see $LOG)" >&2
    rm -rf "$PARTIAL"; exit 1
fi

cp /etc/resolv.conf "$PARTIAL/etc/resolv.conf" 2>/dev/null || true
# no daemons started inside the root while packages install
printf '#!/bin/sh\nexit 101\n' >"$PARTIAL/usr/sbin/policy-rc.d"; chmod +x "$PARTIAL/usr/sbin/policy-rc.d"
if ! in_root "${APT[@]}" update >>"$LOG" 2>&1; then
    echo "build_root: apt-get update inside the root failed (see $LOG)" >&2
    rm -rf "$PARTIAL"; exit 1
fi
# shellcheck disable=SC2086
if ! in_root "${APT[@]}" install $PACKAGES >>"$LOG" 2>&1; then
    echo "build_root: Debian's blender package could not be installed from unstable (see $LOG)"
    rm -rf "$PARTIAL"; exit 3
fi
in_root apt-get clean >>"$LOG" 2>&1 || true
in_root blender --version 2>/dev/null | head -n1 >>"$LOG" || true

rm -rf "$ROOT"
mv "$PARTIAL" "$ROOT"
printf '%s' "$STAMP_TEXT" >"$STAMP"
echo "build_root: ready: $ROOT ($(grep -m1 '^Blender' "$LOG" || echo 'blender installed'))"
