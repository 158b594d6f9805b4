"""What the drills share: a NEO_HOME of their own, the CLI as a subprocess, and reading
the persisted state from the test process without sharing Chroma with a child.

The embedded Chroma is one process's at a time: a client keeps segments in memory, so
the test process closes its view (``release_store``) before a child process writes, and
opens a fresh one after (``open_state``). A drill holds at most one view at a time:
opening one closes the one before.
"""

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neo_assets.config.settings import Settings, load_settings
from neo_assets.services.handles import open_ledger, open_store
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.store.ledger import Ledger

ROOT = Path(__file__).resolve().parents[2]
QUIET = {"ANONYMIZED_TELEMETRY": "False", "DAGSTER_DISABLE_TELEMETRY": "1", "NO_COLOR": "1"}


def release_store() -> None:
    """Close the drill's view of its home: with the last client of a directory closed,
    Chroma stops its system, and the next open reads what is on disk."""
    while _views:
        _views.pop().close()


def child_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a CLI child: this process's, minus every NEO_* and DAGSTER_HOME,
    plus the drill's home and ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEO_")}
    env.pop("DAGSTER_HOME", None)
    env.update(QUIET)
    env["NEO_HOME"] = str(home)
    env["DAGSTER_HOME"] = str(home / "dagster")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.update(extra or {})
    return env


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    def doc(self) -> dict[str, Any]:
        """The one JSON document ``--json`` prints on stdout (and nothing else there)."""
        lines = [line for line in self.stdout.splitlines() if line.strip()]
        assert len(lines) == 1, f"stdout is not one JSON document: {self.stdout[-2000:]!r}"
        return json.loads(lines[0])


def cli_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "neo_assets.cli", *args]


def run_cli(env: Mapping[str, str], *args: str, timeout_s: float = 300.0) -> CliResult:
    """``python -m neo_assets.cli ARGS`` in a child process (Chroma released first)."""
    release_store()
    done = subprocess.run(
        cli_argv(*args),
        cwd=ROOT,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    return CliResult(done.returncode, done.stdout, done.stderr)


@dataclass
class State:
    settings: Settings
    store: ChromaStore
    ledger: Ledger

    def close(self) -> None:
        self.store.close()
        self.ledger.dispose()


# The view ``open_state`` opened last, until ``release_store`` closes it.
_views: list[State] = []


def open_state(home: Path, **overrides: Any) -> State:
    """Fresh handles on what a child persisted under ``home`` (no stale Chroma segment),
    open until the next ``release_store`` or ``open_state``."""
    release_store()
    settings = load_settings(home=home, **overrides)
    state = State(settings, open_store(settings), open_ledger(settings))
    _views.append(state)
    return state
