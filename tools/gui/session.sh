#!/bin/sh
# Inside the GUI root (tools/gui/in_root.sh): a fresh user profile, the packaged extension
# installed through Blender's own extension command, then Blender in a 1600x900 Xvfb screen on
# one GPU backend, on the demo scene (tools/gui/make_scene.py), running a driver script (tools/gui/journeys.py or tools/gui/bench.py).
# Usage: tools/gui/session.sh BACKEND ZIP SCRIPT [SCRIPT ARGS...]
set -eu
backend=$1; zip=$2; script=$3; shift 3
export HOME="/tmp/home-$backend"
rm -rf "$HOME"; mkdir -p "$HOME"
blender --command extension install-file -r user_default -e "$zip" >"$HOME/install.log" 2>&1 || {
    echo "session: installing $zip through 'blender --command extension install-file' failed:"; cat "$HOME/install.log"; exit 1; }
blender -b --python tools/gui/make_scene.py -- "$HOME/demo.blend" >"$HOME/scene.log" 2>&1 || {
    echo "session: building the demo scene failed:"; tail -n 30 "$HOME/scene.log"; exit 1; }
rc=0
xvfb-run -a -s "-screen 0 1600x900x24 -nolisten tcp" \
    blender "$HOME/demo.blend" --gpu-backend "$backend" --window-geometry 0 0 1600 900 --no-window-focus \
    --python "$script" -- --backend "$backend" "$@" || rc=$?
# a crash report Blender wrote (/tmp/NAME.crash.txt) is in this session's tmpfs, gone with it: keep
# a copy next to the results
for f in /tmp/*.crash.txt; do
    [ -f "$f" ] && [ -d /repo/out/gui ] && cp "$f" "/repo/out/gui/$backend-$(basename "$f")"
done
exit $rc
