"""A failing repo backs off everywhere: the sensor and the CLI, over real git repos, real
Dagster runs and a real instance. Time is driven through the ledger (the failed attempt
is moved into the past), never by sleeping."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from neo_assets.cli.launch import QUIET_CONSOLE, run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.core import codes
from neo_assets.defs.partition_sync import apply_requests
from neo_assets.defs.resources import default_resources
from neo_assets.services.handles import open_ledger
from neo_assets.sweep.rules.scheduling import (
    DUE_BACKOFF_ELAPSED,
    DUE_DECLARATION_MOVED,
    DUE_REVISION_MOVED,
)
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

ROOT = Path(__file__).resolve().parents[1]
KEY = "acme/widgets"


def _defs() -> Any:
    from neo_assets.definitions import defs

    return defs


@pytest.fixture
def env(neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    repo = GitRepo(tmp_path / "r")
    repo.write("a.py", "def a():\n    return 1\n")
    repo.commit("one", when=1_700_000_000)
    tenants = tmp_path / "tenants.yaml"
    write_tenants(tenants, {"acme": [repo_entry("widgets", repo.path, ref="main")]})
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants))
    (tmp_path / "dagster").mkdir(exist_ok=True)
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    yield {"repo": repo, "tenants": tenants, "instance": instance}
    instance.dispose()


def _declare(env: dict[str, Any], ref: str) -> None:
    write_tenants(env["tenants"], {"acme": [repo_entry("widgets", env["repo"].path, ref=ref)]})


def _tick(instance: dg.DagsterInstance, cursor: str | None) -> dg.SensorResult:
    # Taken from the Definitions, wherever the sensor's module is.
    sensor = _defs().resolve_sensor_def("sweep_sensor")
    with dg.build_sensor_context(
        instance=instance, cursor=cursor, resources=default_resources()
    ) as ctx:
        result = sensor(ctx)
    apply_requests(instance, result.dynamic_partitions_requests)  # as the daemon does
    return result


def _launch(instance: dg.DagsterInstance, request: dg.RunRequest) -> bool:
    """Run what the sensor requested, as the daemon would: its partition, its tags."""
    result = (
        _defs()
        .resolve_job_def("sweep")
        .execute_in_process(
            instance=instance,
            run_config=QUIET_CONSOLE,
            partition_key=request.partition_key,
            tags=request.tags,
            raise_on_error=False,
        )
    )
    return bool(result.success)


def _state() -> dict[str, Any]:
    with open_ledger(load_settings()) as ledger:
        row = ledger.repo_state("acme", "widgets")
    assert row is not None
    return row


def _rewind_attempt(seconds: float) -> None:
    """Move the last attempt ``seconds`` into the past (its time and its inputs' time)."""
    row = _state()
    with open_ledger(load_settings()) as ledger:
        ledger.upsert_repo_state(
            "acme",
            "widgets",
            last_attempt_at=row["last_attempt_at"] - seconds,
            attempt_inputs_at=row["attempt_inputs_at"] - seconds,
        )


def _wait_left() -> float:
    """Seconds until the failed repo's backoff has elapsed (from the recorded due time)."""
    row = _state()
    return float(row["next_due_at"]) - time.time()


def test_a_bad_ref_fails_once_then_backs_off_and_a_fix_is_swept_at_once(env) -> None:
    instance = env["instance"]
    done = run_sweeps(load_settings(), load_tenants(env["tenants"]), instance)
    assert [r["outcome"] for r in done] == [codes.OUTCOME_COMPLETE]
    quiet = _tick(instance, None)
    assert quiet.run_requests == []

    _declare(env, "mian")  # the typo
    moved = _tick(instance, quiet.cursor)
    assert [r.tags["neo/due-reason"] for r in moved.run_requests] == [DUE_DECLARATION_MOVED]
    assert not _launch(instance, moved.run_requests[0])
    failed = _state()
    assert failed["last_outcome"] == codes.OUTCOME_FAILED
    assert failed["consecutive_failures"] == 1

    # The next ticks request nothing, with the sensor's cursor or without it (the rule,
    # not the run key, keeps the repo back).
    cursor = moved.cursor
    for _ in range(3):
        tick = _tick(instance, cursor)
        assert tick.run_requests == []
        cursor = tick.cursor
    assert _tick(instance, None).run_requests == []

    # Not quite elapsed: still nothing. Elapsed: requested again, as a backoff retry.
    _rewind_attempt(_wait_left() - 30.0)
    assert _tick(instance, cursor).run_requests == []
    _rewind_attempt(31.0)
    retry = _tick(instance, cursor)
    assert [r.tags["neo/due-reason"] for r in retry.run_requests] == [DUE_BACKOFF_ELAPSED]
    assert not _launch(instance, retry.run_requests[0])
    assert _state()["consecutive_failures"] == 2
    cursor = retry.cursor
    assert _tick(instance, cursor).run_requests == []

    # The fix: the very next tick requests it, and it completes.
    _declare(env, "main")
    fixed = _tick(instance, cursor)
    assert [r.partition_key for r in fixed.run_requests] == [KEY]
    assert fixed.run_requests[0].tags["neo/due-reason"] in {
        DUE_REVISION_MOVED,
        DUE_DECLARATION_MOVED,
    }
    assert _launch(instance, fixed.run_requests[0])
    assert _state()["last_outcome"] == codes.OUTCOME_COMPLETE
    assert _tick(instance, fixed.cursor).run_requests == []


# ------------------------------------------------------------------------------ the CLI
CLI = [sys.executable, "-m", "neo_assets.cli"]


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        CLI + args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_cli_reports_a_failed_repo_that_is_not_due_and_sweeps_it_once_fixed(
    tmp_path: Path,
) -> None:
    repo = GitRepo(tmp_path / "r")
    repo.write("a.py", "def a():\n    return 1\n")
    repo.commit("one", when=1_700_000_000)
    tenants = tmp_path / "tenants.yaml"
    write_tenants(tenants, {"acme": [repo_entry("widgets", repo.path, ref="mian")]})
    cli_env = {k: v for k, v in os.environ.items() if not k.startswith(("NEO_", "DAGSTER_"))}
    cli_env.update({"NEO_HOME": str(tmp_path / "home"), "NEO_TENANTS_FILE": str(tenants)})
    cli_env["PYTHONPATH"] = str(ROOT)

    first = _cli(["sweep", "--json"], cli_env)
    assert first.returncode == 1, first.stderr
    (entry,) = json.loads(first.stdout)["repos"]
    assert entry["outcome"] == codes.OUTCOME_FAILED and entry.get("runId")

    # Not due: no run, but the failure is reported (not "skipped"), and the exit says so.
    again = _cli(["sweep", "--json"], cli_env)
    assert again.returncode == 1, again.stderr
    (entry,) = json.loads(again.stdout)["repos"]
    assert entry["outcome"] == codes.OUTCOME_FAILED
    assert "runId" not in entry
    assert entry["deferredCauseCode"] == codes.SOURCE_REPO_MISSING
    assert "mian" in entry["error"]
    assert entry["nextDueAt"] > time.time()
    assert isinstance(entry["retryAfter"], str) and entry["retryAfter"].endswith("Z")

    human = _cli(["sweep"], cli_env)
    assert human.returncode == 1
    assert "acme/widgets: failed (retry after " in human.stderr
    said = " ".join(human.stderr.split())  # the console wraps long lines
    assert f"; {codes.SOURCE_REPO_MISSING}: repository " in said  # the code said once
    assert "ref 'mian' does not name a commit" in said
    assert "skipped" not in human.stderr

    status = _cli(["status"], cli_env)
    assert status.returncode == 0, status.stderr
    assert f"cause {codes.SOURCE_REPO_MISSING}" in status.stderr

    # The fix makes it due at once: the next sweep runs it.
    write_tenants(tenants, {"acme": [repo_entry("widgets", repo.path, ref="main")]})
    fixed = _cli(["sweep", "--json"], cli_env)
    assert fixed.returncode == 0, fixed.stderr
    (entry,) = json.loads(fixed.stdout)["repos"]
    assert entry["outcome"] == codes.OUTCOME_COMPLETE and entry.get("runId")

    status = _cli(["status"], cli_env)
    assert status.returncode == 0, status.stderr
    assert "acme/widgets: complete" in status.stderr
    assert "cause" not in status.stderr  # nothing to say, so "cause None" is not said
