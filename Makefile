# Two entry points for a fresh machine with Python 3.11: `make run` and `make test`.
# Both create (or reuse) .venv and install what they need.
#
# VENV=/path/to/venv uses another virtualenv. SKIP_INSTALL=1 uses $(VENV) as it is,
# neither creating it nor installing into it (an environment made elsewhere: CI, or a
# test running this Makefile with its own environment).

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# The homes the CLI uses (Settings.home_dir, dagster_instance in neo_assets/cli/launch.py):
# NEO_HOME, default .neo; DAGSTER_HOME, else $NEO_HOME/dagster; relative ones against the
# current directory. Made absolute by hand: $(abspath) would split a path with spaces.
absolute = $(if $(filter /%,$(firstword $(1))),$(1),$(CURDIR)/$(patsubst ./%,%,$(1)))
NEO_HOME_DIR = $(call absolute,$(patsubst ~/%,$(HOME)/%,$(patsubst ~,$(HOME),$(or $(NEO_HOME),.neo))))
DAGSTER_HOME_DIR = $(if $(DAGSTER_HOME),$(call absolute,$(DAGSTER_HOME)),$(NEO_HOME_DIR)/dagster)
# Both homes, so the UI's runs use the ledger and store this instance's runs used; the
# UI's port (UI_PORT) and, unless NEO_UI_BASE_URL says otherwise, alerts link runs there.
UI_PORT ?= 3000
UI_BASE_URL = $(or $(NEO_UI_BASE_URL),http://127.0.0.1:$(UI_PORT))
UI := NEO_HOME='$(NEO_HOME_DIR)' DAGSTER_HOME='$(DAGSTER_HOME_DIR)' NEO_UI_BASE_URL='$(UI_BASE_URL)' $(BIN)/dagster dev -m neo_assets.definitions -p $(UI_PORT)

ifeq ($(SKIP_INSTALL),1)
READY := venv-present
else
READY := $(STAMP)
endif

.PHONY: run test test-fast install lint bench dev soak venv-present

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

venv-present:
	@test -x '$(BIN)/python' || { echo "SKIP_INSTALL=1 uses an existing virtualenv, but there is no $(BIN)/python: pass VENV=/path/to/venv, or drop SKIP_INSTALL=1 to create and install $(VENV)" >&2; exit 2; }

run: $(READY)
	$(BIN)/python -m neo_assets.config.examples
	$(BIN)/neo-assets sweep
	@echo ""
	@echo "Open the Dagster UI on this instance (or: make dev, with the same NEO_HOME/DAGSTER_HOME):"
	@echo "  $(UI)"
	@echo "then browse $(UI_BASE_URL) (assets, runs, sensors)."

# Two passes: most tests on two workers (a file's tests stay together, so a module's
# fixtures start once), then the few marked `solo` alone: they time the machine
# (calibrated ceilings, kill -9 points) and must not share the CPU with another test.
# Both passes always run; either failing fails the target.
# Their temporary files (every test's NEO_HOME: Dagster's SQLite storage, Chroma, git)
# go to a fresh directory under TEST_TMPDIR when it has TEST_TMP_MIN_KB free and runs
# programs (tests start scripts they write), removed after: on a memory file system
# (/dev/shm) no SQLite commit waits for the disk.
# TEST_TMPDIR= (empty) keeps the system's temporary directory.
TEST_TMPDIR ?= /dev/shm
TEST_TMP_MIN_KB ?= 4194304
test: $(READY)
	@$(BIN)/python -c 'import xdist' 2>/dev/null || { echo "make test runs on pytest-xdist, missing from $(VENV): install the dev extra (pip install -e '.[dev]'), or drop SKIP_INSTALL=1" >&2; exit 2; }
	status=0; tmp=; \
	free=$$(df -Pk '$(TEST_TMPDIR)' 2>/dev/null | awk 'NR == 2 {print $$4}'); \
	if [ -n '$(TEST_TMPDIR)' ] && [ -w '$(TEST_TMPDIR)' ] && [ "$${free:-0}" -ge $(TEST_TMP_MIN_KB) ]; then \
		tmp=$$(mktemp -d '$(TEST_TMPDIR)/neo-assets-test.XXXXXX') && chmod 1777 "$$tmp"; \
		trap 'rm -rf "$$tmp"' EXIT; trap 'exit 130' INT TERM; \
		printf '#!/bin/sh\n' > "$$tmp/x" && chmod +x "$$tmp/x"; \
		if "$$tmp/x" 2>/dev/null; then rm -f "$$tmp/x"; export TMPDIR="$$tmp"; fi; \
	fi; \
	$(BIN)/python -m pytest -n 2 --dist loadfile -m "not solo" || status=$$?; \
	$(BIN)/python -m pytest -m solo || status=$$((status ? status : $$?)); \
	exit $$status

# The inner loop (well under a minute): every pure rule (core/ and each capability's
# rules), the parsers and their golden chunks, the settings, the tenants file and the
# layout's own checks; `make test` runs everything.
FAST_TESTS := neo_assets_tests/core $(wildcard neo_assets_tests/*/rules) neo_assets_tests/test_layout.py neo_assets_tests/test_settings.py \
	neo_assets_tests/test_tenants.py neo_assets_tests/sources $(wildcard neo_assets_tests/*/test_rules.py)
test-fast: $(READY)
	$(BIN)/python -m pytest -q $(FAST_TESTS)

lint: $(READY)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

dev: $(READY)
	$(UI)

# The long profile of the invariant simulation (hundreds of examples; see docs/reliability.md).
soak: $(READY)
	HYPOTHESIS_PROFILE=soak $(BIN)/python -m pytest neo_assets_tests/drills/test_simulation.py -s -o timeout=0 -o faulthandler_timeout=0
