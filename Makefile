# Two entry points: `make demo` (whole pipeline, tiny preset) and `make test` (the full suite,
# as CI runs it). `make check` is the fast tier for development: the same bootstrap as `make
# test` (the runtime, then the test tools), every test not marked `slow` (no Ray cluster,
# DeepSpeed engine or whole pipeline).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: demo test check lint format clean-runs

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch first, pinned, so pip takes the local CPU wheel instead of a multi-GB CUDA build;
# DeepSpeed's sdist imports torch in setup.py, so it builds without isolation.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q setuptools wheel ninja
	$(BIN)/pip install -q --no-build-isolation "deepspeed>=0.16"
	$(BIN)/pip install -q -e .
	touch $(STAMP)

# The test and lint tools (pytest, ruff, lm-eval, moto, psycopg, ...): `make demo` runs without
# them, which saves it about a minute of installing on a fresh clone.
$(DEV_STAMP): $(STAMP)
	$(BIN)/pip install -q -e ".[dev]"
	touch $(DEV_STAMP)

demo: $(STAMP)
	$(BIN)/lmforge run preset=tiny

test: $(DEV_STAMP)
	$(BIN)/python -m pytest -q -rs --durations=15 tests

check: $(DEV_STAMP)
	$(BIN)/python -m pytest -q -rs -m "not slow" --durations=15 tests

lint: $(DEV_STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

format: $(DEV_STAMP)
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .
