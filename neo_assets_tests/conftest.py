"""Shared fixtures: an isolated NEO_HOME per test, with caches reset around it."""

import os
from pathlib import Path

import pytest

from neo_assets import runtime

# Never let a test reach Chroma's or Dagster's telemetry.
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("DAGSTER_DISABLE_TELEMETRY", "1")


@pytest.fixture
def neo_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "neo-home"
    home.mkdir()
    monkeypatch.setenv("NEO_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
    for name in list(os.environ):
        if name.startswith("NEO_") and name != "NEO_HOME":
            monkeypatch.delenv(name)
    runtime.reset_caches()
    yield home
    runtime.reset_caches()
