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
# pip byte-compiles what it installs one file at a time, about half of the bootstrap's time;
# `COMPILE` does it afterwards on every core instead (the same .pyc files). A file that does not
# compile is left to Python at import, as pip leaves it (torch ships one in 3.12 syntax).
PIP := $(BIN)/pip install -q --no-compile
COMPILE := $(BIN)/python -m compileall -q -j 0 $(VENV)/lib >/dev/null || true
# The project's own modules too, before each run: where PYTHONDONTWRITEBYTECODE is set Python
# never caches them, and every process (CLI, each Ray worker and actor) compiled them again:
# 1-1.5 s a process for the training worker's and the CLI's imports. Only changed files compile.
COMPILE_SRC := $(BIN)/python -m compileall -q -j 0 lmforge pipeline model tokenizer >/dev/null || true

$(STAMP): pyproject.toml | $(BIN)/python
	$(PIP) torch==2.13.0
	$(PIP) setuptools wheel ninja
	$(PIP) --no-build-isolation "deepspeed>=0.16"
	$(PIP) -e .
	$(COMPILE)
	touch $(STAMP)

# The test and lint tools (pytest, ruff, lm-eval, moto, psycopg, ...): `make demo` runs without
# them, which saves it about a minute of installing on a fresh clone.
$(DEV_STAMP): $(STAMP)
	$(PIP) -e ".[dev]"
	$(COMPILE)
	touch $(DEV_STAMP)

demo: $(STAMP)
	@$(COMPILE_SRC)
	$(BIN)/lmforge run preset=tiny

# Two workers, each a file (or the node-wide files) at a time (tests/conftest.py): a Ray or
# DeepSpeed test leaves a core idle for about a quarter of its time (processes starting, ranks
# waiting on each other), which the other worker's test takes.
TEST_WORKERS ?= 2

test: $(DEV_STAMP)
	@$(COMPILE_SRC)
	$(BIN)/python -m pytest -q -rs -n $(TEST_WORKERS) --no-loadscope-reorder \
		--durations=15 tests

check: $(DEV_STAMP)
	@$(COMPILE_SRC)
	$(BIN)/python -m pytest -q -rs -n $(TEST_WORKERS) --no-loadscope-reorder -m "not slow" \
		--durations=15 tests

# ruff, then the architecture's checks (each prints one line per breach; tests/unit/infra tests
# them): the import contracts, the layout's limits, the dependencies as declared; then the
# docs site's strict build.
lint: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python tests/import_contracts.py
	$(BIN)/python tests/layout_limits.py
	$(BIN)/python tests/declared_dependencies.py
	$(MKDOCS)

# The documentation site (mkdocs, material theme) into site/. Strict: a link to a missing page
# or anchor fails the build, here and in `make lint`. (No --quiet: it hides those failures.)
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

.PHONY: docs
docs: $(DEV_STAMP)
	$(MKDOCS)

format: $(DEV_STAMP)
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .
