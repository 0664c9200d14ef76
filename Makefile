# Stylized Renderer: developer commands. Each target sets up what it needs on a fresh machine.
#
# BLENDER picks the Blender (its bpy wheel) that a target runs on, one of BLENDER_VERSIONS; each
# has its own environment .venv-X.Y/ from requirements/blender-X.Y.txt (tools/setup_env.sh).
# The default is 5.2, the newest LTS (README: "Supported Blender versions"); keep it in step with
# DEFAULT in tools/setup_env.sh.   Example: make test BLENDER=4.5
BLENDER_VERSIONS := 4.5 5.0 5.2
BLENDER ?= 5.2
VENV := .venv-$(BLENDER)
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
# per-version limit for the whole suite in test-all (a hung interpreter must not eat CI's time)
TEST_TIMEOUT ?= 900

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.ONESHELL:

.PHONY: setup setup-all lint test test-core test-all test-gui bench-gui demo bench package clean

setup:
	@bash tools/setup_env.sh $(BLENDER)

setup-all:
	@for v in $(BLENDER_VERSIONS); do bash tools/setup_env.sh "$$v"; done

# ruff (pyflakes, import order, bugbear) and pyright (basic), settings in pyproject.toml; pyright
# finds the extension as the package `stylized_renderer` through out/lint (a link to the root)
lint: setup
	$(PY) -m ruff check .
	mkdir -p out/lint && ln -sfn ../.. out/lint/stylized_renderer
	PYRIGHT_PYTHON_IGNORE_WARNINGS=1 $(PY) -m pyright --pythonpath $(PY)

test: setup lint
	$(PY) -m pytest tests $(PYTEST_ARGS)

# the bpy-free core tests alone (tests/core: numpy only, seconds); tests/conftest.py, which starts
# Blender, is not loaded, and tests/core/conftest.py makes any import of bpy fail
test-core: setup
	$(PY) -m pytest tests/core --confcutdir=tests/core $(PYTEST_ARGS)

# The whole suite on every version in BLENDER_VERSIONS, one after the other, each in its own
# environment. Ends with one line per version made from pytest's own closing line, e.g.
# "blender 5.2.3: 252 passed", and a total; exits non-zero when any version failed, ran no test,
# or did not finish. Logs: out/test-all/blender-X.Y.log
test-all:
	@out=out/test-all
	rm -rf "$$out"; mkdir -p "$$out"
	status=0; summary=(); timings=(); tp=0; tf=0; te=0; ts=0
	echo "===== test-all: lint ====="
	if $(MAKE) --no-print-directory lint BLENDER=$(BLENDER) 2>&1 | tee "$$out/lint.log"; then
	  summary+=("lint: clean")
	else
	  summary+=("lint: FAILED (out/test-all/lint.log)"); status=1
	fi
	for v in $(BLENDER_VERSIONS); do
	  echo "===== test-all: Blender $$v ====="
	  t0=$$SECONDS
	  if ! bash tools/setup_env.sh "$$v"; then
	    summary+=("blender $$v: setup failed"); status=1; continue
	  fi
	  t1=$$SECONDS
	  bpy_version=$$(".venv-$$v/bin/python" -c 'import importlib.metadata as m; print(m.version("bpy"))')
	  log="$$out/blender-$$v.log"
	  set +e
	  timeout -k 30 $(TEST_TIMEOUT) ".venv-$$v/bin/python" -m pytest tests -rfEs $(PYTEST_ARGS) 2>&1 | tee "$$log"
	  rc=$${PIPESTATUS[0]}
	  set -e
	  t2=$$SECONDS
	  timings+=("test-all: blender $$bpy_version: setup $$((t1 - t0)) s, tests $$((t2 - t1)) s, pytest exit $$rc")
	  # pytest's closing line, e.g. "==== 250 passed, 2 failed, 1 skipped, 3 warnings in 31.02s ====";
	  # keep its counts, drop the warnings and the time
	  counts=$$(grep -E '^(=+ )?([0-9]+ [a-z]+(, )?)+ in [0-9.]+s|^(=+ )?no tests ran' "$$log" | tail -n1 \
	            | sed -E 's/^=+ //; s/ =+$$//; s/ in [0-9.]+s.*$$//; s/(, )?[0-9]+ warnings?//; s/^, //' || true)
	  if [ "$$rc" = 124 ] || [ "$$rc" = 137 ]; then
	    counts="$${counts:+$$counts, }did not finish within $(TEST_TIMEOUT) s"
	  elif [ -z "$$counts" ]; then
	    counts="no result (pytest exit $$rc)"
	  elif [ "$$rc" != 0 ] && ! grep -qE '[0-9]+ (failed|errors?)' <<<"$$counts"; then
	    counts="$$counts (pytest exit $$rc)"
	  fi
	  summary+=("blender $$bpy_version: $$counts")
	  [ "$$rc" = 0 ] || status=1
	  n() { grep -oE "[0-9]+ $$1" <<<"$$counts" | grep -oE '^[0-9]+' || echo 0; }
	  tp=$$((tp + $$(n passed))); tf=$$((tf + $$(n failed))); te=$$((te + $$(n 'errors?'))); ts=$$((ts + $$(n skipped)))
	done
	echo "===== test-all: summary ====="
	printf '%s\n' "$${timings[@]}" "$${summary[@]}"
	total="test-all: $$tp passed, $$((tf + te)) failed"
	[ "$$ts" = 0 ] || total="$$total, $$ts skipped"
	echo "$$total"
	exit $$status

# GUI journeys in a real Blender window: Debian's blender in a cached Debian root (built once by
# tools/gui/build_root.sh under /var/cache/stylized-gui, nothing installed into the host's own
# system; needs root), under Xvfb on the OpenGL and Vulkan backends, with the extension installed
# from the `make package` zip. Screenshots and results: out/gui/. GUI_BACKENDS="opengl vulkan".
GUI_BACKENDS ?= opengl vulkan
test-gui: setup
	PY=$(PY) bash tools/gui/run.sh $(GUI_BACKENDS)

# Viewport redraw rates in one window (timeline playback: Stylized, EEVEE, Workbench; the preview's
# Play) on each backend, in the same GUI root: tools/gui/bench.py; results in out/gui-bench/.
bench-gui: setup
	PY=$(PY) GUI_SCRIPT=tools/gui/bench.py bash tools/gui/run.sh $(GUI_BACKENDS)

demo: setup
	$(PY) tools/render_demo.py --out out/demo

bench: setup
	$(PY) tools/bench_import.py
	$(PY) tools/bench_runtime.py
	$(PY) tools/bench_render.py
	$(PY) tools/bench_preview.py

package: setup
	$(PY) tools/package.py --out dist

clean:
	rm -rf out dist .pytest_cache
