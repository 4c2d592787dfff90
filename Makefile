# Two commands on a fresh machine: `make run` and `make test`. Both bootstrap .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Real third-party MCP clients (MCP Inspector CLI, opencode), pinned by package-lock.json.
NODE := tests/mcp/node
NODE_STAMP := $(NODE)/node_modules/.installed

.PHONY: run test lint fast bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

$(NODE_STAMP): $(NODE)/package.json $(NODE)/package-lock.json
	cd $(NODE) && npm ci --no-audit --no-fund --loglevel=error
	touch $(NODE_STAMP)

# `make run PORT=8123` serves on another port.
run: $(STAMP)
	$(BIN)/aat serve $(if $(PORT),--port $(PORT))

lint: $(STAMP)
	$(BIN)/ruff check webplatform dashboard tests bench hatch_build.py
	$(BIN)/ruff format --check webplatform dashboard tests bench hatch_build.py
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python tests/test_code_size.py webplatform dashboard

# Tests run on pytest-xdist workers, two per core: much of a test's time is spent waiting (on an
# approval window, a client, a process starting), and a second worker per core uses it. A test
# file stays on one worker. Tiers: tests/conftest.py. `make fast WORKERS=2` to choose.
WORKERS ?= $(shell echo $$((2 * $$(nproc))))
# Bytecode is cached even where the environment says not to (PYTHONDONTWRITEBYTECODE): without
# it every worker re-compiles the tests' rewritten assertions and every `aat` process the tests
# start re-compiles aat, several CPU-seconds per worker and a few hundred ms per process.
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n $(WORKERS) --dist loadfile

# The inner loop (about 170 s on two cores): unit tests on SQLite. No browser, no
# PostgreSQL, no `aat` processes, no npm clients, no wheel build.
fast: $(STAMP)
	$(PYTEST) -m "unit and not postgresql" -x

# Everything: lint, the example registry, every tier on SQLite and PostgreSQL.
test: lint $(NODE_STAMP)
	$(BIN)/aat check
	$(PYTEST)

# With bytecode cached, as an installed aat has it: every `aat` process the benchmarks start
# would otherwise compile aat's modules again (about 0.15 s of each start). Issue 35's table
# comes first in bench/RESULTS.md. B14 runs `make fast` too (AAT_BENCH_MAKE_FAST=0 leaves it
# out); `make test` runs only with AAT_BENCH_MAKE_TEST=1 (its last recording is shown else).
bench: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m bench

clean:
	rm -rf $(VENV) build dist *.egg-info
