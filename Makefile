# Two entry points for a fresh machine with Python 3.11: `make run` and `make test`.
# Both create (or reuse) .venv and install what they need.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install lint bench dev soak

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/python -m neo_assets.config.examples
	$(BIN)/neo-assets sweep
	@echo ""
	@echo "Open the Dagster UI on this instance:"
	@echo "  DAGSTER_HOME=$$PWD/.neo/dagster $(BIN)/dagster dev -m neo_assets.definitions"
	@echo "then browse http://127.0.0.1:3000 (assets, runs, sensors)."

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

dev: $(STAMP)
	DAGSTER_HOME=$$PWD/.neo/dagster $(BIN)/dagster dev -m neo_assets.definitions

# The long profile of the invariant simulation (hundreds of examples; see docs/reliability.md).
soak: $(STAMP)
	HYPOTHESIS_PROFILE=soak $(BIN)/python -m pytest neo_assets_tests/drills/test_simulation.py -s -o timeout=0 -o faulthandler_timeout=0
