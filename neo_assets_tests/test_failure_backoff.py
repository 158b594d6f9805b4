"""A failing repo backs off everywhere: the sensor and the CLI, over real git repos, real
Dagster runs and a real instance. Time is driven through the ledger (the failed attempt
is moved into the past), never by sleeping."""

import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from neo_assets.cli.launch import QUIET_CONSOLE, run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.config.tenants import load_tenants
from neo_assets.core import codes
from neo_assets.core.sweep.scheduling import (
    DUE_BACKOFF_ELAPSED,
    DUE_DECLARATION_MOVED,
    DUE_REVISION_MOVED,
)
from neo_assets.defs.partition_sync import apply_requests
from neo_assets.defs.resources import default_resources
from neo_assets.services.handles import open_ledger
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

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
