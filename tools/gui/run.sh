#!/usr/bin/env bash
# make test-gui: the GUI journeys (tools/gui/journeys.py) in Debian's blender under Xvfb, on the
# OpenGL (llvmpipe) and Vulkan (lavapipe) backends, with the extension installed from the
# `make package` zip. Screenshots and results: out/gui/. Exit status: non-zero when a journey
# failed; 0 with one line when Debian's blender package cannot be installed here at all.
# Usage: tools/gui/run.sh [opengl] [vulkan]      (default: both)   Env: GUI_JOURNEYS=name,name
#        GUI_SCRIPT=tools/gui/bench.py tools/gui/run.sh     (make bench-gui: redraw rates instead)
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
backends=("$@"); [ ${#backends[@]} -gt 0 ] || backends=(opengl vulkan)
bash tools/gui/build_root.sh
rc=$?
if [ "$rc" != 0 ]; then
    echo "test-gui: not run: Debian's blender package could not be installed in the GUI root (tools/gui/build_root.sh exit $rc)"
    exit 0
fi
out=out/gui; [ -n "${GUI_SCRIPT:-}" ] && out=out/gui-bench
rm -rf "$out"; mkdir -p "$out"
zip=$("$PY" tools/package.py --out "$out/dist" | sed -n 's/^package: wrote //p')
[ -n "$zip" ] || { echo "test-gui: make package wrote no zip"; exit 1; }
zip_in_root="/repo/${zip#"$PWD"/}"
script=${GUI_SCRIPT:-tools/gui/journeys.py}
SESSION1=rendered_view,stylized_tab,expressions,render,render_anim,viewports
SESSION2=extension_cycle,vrm
status=0
for b in "${backends[@]}"; do
    t0=$SECONDS
    if [ "$script" = tools/gui/bench.py ]; then
        timeout -k 10 900 tools/gui/in_root.sh tools/gui/session.sh "$b" "$zip_in_root" "$script" --out /repo/$out \
            >"$out/$b-bench.log" 2>&1
        grep '^bench-gui:' "$out/$b-bench.log" || { echo "bench-gui: $b: no result; log: $out/$b-bench.log"; status=1; }
        continue
    fi
    # two Blender sessions per backend unless GUI_JOURNEYS names some: the journeys that load files
    # and add-ons start in a fresh process (lavapipe crashed in a memcpy late in one long session;
    # docs/gui-tests.md); the second appends to the first one's results
    if [ -n "${GUI_JOURNEYS:-}" ]; then groups=("$GUI_JOURNEYS"); else groups=("$SESSION1" "$SESSION2"); fi
    brc=0; append=""; : >"$out/$b.log"
    for g in "${groups[@]}"; do
        timeout -k 10 900 tools/gui/in_root.sh tools/gui/session.sh "$b" "$zip_in_root" "$script" \
            --out /repo/$out --only "$g" $append >>"$out/$b.log" 2>&1
        rc=$?; [ "$rc" = 0 ] || brc=$rc
        append="--append"
    done
    res="$out/$b-results.json"
    if [ ! -f "$res" ]; then
        echo "test-gui: $b: no results (exit $brc); log: $out/$b.log"; tail -n 20 "$out/$b.log"; status=1
    fi
    "$PY" - "$res" "$b" "$((SECONDS - t0))" "$out/$b-requested.json" "$brc" <<'PYEOF' || status=1
import json, os, sys
res = json.load(open(sys.argv[1])) if os.path.isfile(sys.argv[1]) else []; backend, secs, req_path, brc = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
# journeys.py writes the requested list before the first journey: a journey with no result did
# not run (Blender exited or crashed before it finished)
requested = json.load(open(req_path)) if os.path.isfile(req_path) else None
bad = [r for r in res if not r["passed"]]
for r in res:
    print(f"test-gui: {backend}: {r['journey']}: {'passed' if r['passed'] else 'FAILED: ' + r['error'].splitlines()[0]} "
          f"({r['seconds']} s, {len(r['screenshots'])} screenshots)")
ran = {r["journey"] for r in res}
missing = [n for n in (requested or []) if n not in ran]
for n in missing:
    print(f"test-gui: {backend}: {n}: DID NOT RUN (no result; Blender exit status {brc})")
total = len(requested) if requested is not None else len(res)
print(f"test-gui: {backend}: {len(res) - len(bad)} of {total} journeys passed in {secs} s"
      + (f"; did not run: {', '.join(missing)}" if missing else "")
      + ("; no list of requested journeys (journeys.py did not start?)" if requested is None else ""))
sys.exit(1 if bad or not res or missing or requested is None else 0)
PYEOF
done
exit $status
