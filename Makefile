# Stylized Renderer: developer commands. Each target sets up what it needs on a fresh machine.
PY := .venv/bin/python
PYTEST_ARGS ?=

.PHONY: setup test demo bench package clean

setup:
	@bash tools/setup_env.sh

test: setup
	$(PY) -m pytest tests $(PYTEST_ARGS)

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
