"""Shared fixtures: an isolated NEO_HOME per test."""

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from neo_assets_tests.kb_handles import KbHandles

# Never let a test reach Chroma's or Dagster's telemetry.
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("DAGSTER_DISABLE_TELEMETRY", "1")
# One process per test opens its store: embedded Chroma, unless a test asks for the local
# server (the default a user gets), which then stops soon after its clients end.
TEST_STORE_ENV = {"NEO_CHROMA_LOCAL": "embedded", "NEO_CHROMA_SERVER_IDLE_S": "5"}
for _name, _value in TEST_STORE_ENV.items():
    os.environ.setdefault(_name, _value)


# `make test`'s workers take whole files in collection order; the longest files start
# first, so that neither worker is left running one of them alone at the end.
LONGEST_FIRST = (
    "drills/test_kill9.py",
    "cli/test_misdeclared.py",
    "test_sweep_outcomes.py",
    "reconcile/test_reconciliation.py",
    "test_make_run_e2e.py",
    "drills/test_simulation.py",
    "embedding/test_real_servers.py",
    "serve/test_fresh_answers_e2e.py",
    "store/test_postgres_ledger.py",
    "test_sweep_e2e.py",
    "test_failure_backoff.py",
    "test_parser_migration_e2e.py",
    "test_generation_switch_e2e.py",
    "test_concurrency.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    rank = {here / name: place for place, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path, len(rank)))


@pytest.fixture(scope="session", autouse=True)
def stop_local_stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Local Chroma servers that tests' processes started under this session's temporary
    directories are stopped when the session ends, not left to their idle time."""
    yield
    base = str(tmp_path_factory.getbasetemp())
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"neo_assets.store.local_server" in argv and b"--state-dir" in argv:
            state_dir = argv[argv.index(b"--state-dir") + 1].decode(errors="replace")
            if state_dir.startswith(base):
                with contextlib.suppress(OSError):
                    os.kill(int(cmdline.parent.name), signal.SIGTERM)


@pytest.fixture
def neo_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "neo-home"
    home.mkdir()
    monkeypatch.setenv("NEO_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
    for name in list(os.environ):
        if name.startswith("NEO_") and name != "NEO_HOME":
            monkeypatch.delenv(name)
    for name, value in TEST_STORE_ENV.items():
        monkeypatch.setenv(name, value)
    return home


@pytest.fixture
def kb(neo_home: Path) -> Iterator[KbHandles]:
    """The test's store and ledger under ``neo_home`` (opened on first use, then closed)."""
    handles = KbHandles()
    yield handles
    handles.close()
