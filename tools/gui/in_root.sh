#!/usr/bin/env bash
# Run a command inside the GUI test root (tools/gui/build_root.sh) with this checkout mounted at
# /repo, in a private mount namespace (every mount goes away with the command; nothing is left
# mounted on the host). HOME is a fresh folder under /tmp inside the root, so Blender starts with
# its own empty user preferences and extensions each run.
# Usage: tools/gui/in_root.sh COMMAND [ARGS...]
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
ROOT=${STYLIZED_GUI_ROOT:-/var/cache/stylized-gui/root}
[ -f "$ROOT/.stylized-gui-ready" ] || { echo "in_root: no GUI root at $ROOT (run tools/gui/build_root.sh)" >&2; exit 2; }
mkdir -p "$ROOT/repo"
exec unshare --mount --propagation private -- sh -c '
  set -e
  R=$1; REPO=$2; shift 2
  mount -t proc proc "$R/proc"
  mount --rbind /dev "$R/dev"
  mount --rbind /sys "$R/sys"
  mount -t tmpfs tmpfs "$R/tmp"
  mount --bind "$REPO" "$R/repo"
  if [ -d "$REPO/../shared" ]; then mkdir -p "$R/shared" && mount --bind "$REPO/../shared" "$R/shared"; fi
  exec chroot "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp/home LANG=C.UTF-8 LC_ALL=C.UTF-8 \
      STYLIZED_GUI_OUT="${STYLIZED_GUI_OUT:-}" STYLIZED_GUI_JOURNEYS="${STYLIZED_GUI_JOURNEYS:-}" \
      sh -c "mkdir -p /tmp/home && cd /repo && exec \"\$@\"" sh "$@"
' sh "$ROOT" "$REPO" "$@"
