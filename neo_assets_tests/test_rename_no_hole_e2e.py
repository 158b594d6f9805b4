"""A rename during a deferred sweep never leaves the function absent (issue 26, item 3).

Real git repo, real Chroma, the fault-injecting embedding server, sweeps launched from the
sweep sensor's own requests (real Dagster runs), reconciliation with reclamation on
through the ``reconcile`` job (what the CLI runs), and the function looked up with
``query.run_query`` after every step. Also: a reclaim batch waits for its repo's
sweep lease and deletes nothing while a sweep holds it.
"""

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from neo_assets.cli.launch import QUIET_CONSOLE, run_reconciliation
from neo_assets.config.settings import load_settings
from neo_assets.core import codes
from neo_assets.core.codes import KIND_MANIFEST_ORPHAN, KIND_MANIFEST_ORPHAN_PENDING
from neo_assets.defs.partition_sync import apply_requests
from neo_assets.defs.resources import default_resources
from neo_assets.query.one_shot import run_query
from neo_assets.store.leases import release, try_acquire
from neo_assets.sweep.rules.leases import sweep_lease_key
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.fakes.fixtures import fault_server_fixture
from neo_assets_tests.fakes.supervisor import FaultServerSupervisor
from neo_assets_tests.sweep_harness import DIMENSIONS, SLUG, TENANT, SweepEnv

server_module = fault_server_fixture(scope="module", dimensions=DIMENSIONS)

FUNCTION = "def alpha_function(x):\n    return x * 41 + 1\n"
OTHER = "def beta_function(y):\n    return y - 7\n"


@pytest.fixture
def env(
    neo_home: Path, tmp_path: Path, server_module: FaultServerSupervisor, monkeypatch
) -> Iterator[SweepEnv]:
    server_module.reset()
    server_module.wait_idle(timeout_s=20)
    made = SweepEnv.create(tmp_path, server_module, {"a.py": FUNCTION, "b.py": OTHER})
    for name, value in made.env_vars().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("NEO_EMBEDDING_RECOVERY_MAX_WAIT_S", "0.3")
    # A port refused before the provider answered is waited for apart (a server starting).
    monkeypatch.setenv("NEO_EMBEDDING_UNREACHABLE_WAIT_S", "0.3")
    monkeypatch.setenv("NEO_RECONCILIATION_ENABLED", "true")
    yield made
    made.close()
    server_module.reset()


def _defs() -> Any:
    from neo_assets.definitions import defs

    return defs


def _sensor_sweep(env: SweepEnv) -> dict[str, Any]:
    """One sweep_sensor tick against the instance, and the run it requested, launched."""
    sensor = _defs().resolve_sensor_def("sweep_sensor")
    with dg.build_sensor_context(instance=env.instance, resources=default_resources()) as ctx:
        tick = sensor(ctx)
    apply_requests(env.instance, tick.dynamic_partitions_requests)
    (request,) = tick.run_requests
    result = (
        _defs()
        .resolve_job_def("sweep")
        .execute_in_process(
            instance=env.instance,
            run_config=QUIET_CONSOLE,
            partition_key=request.partition_key,
            tags=request.tags,
            raise_on_error=False,
        )
    )
    return result.output_for_node("sweep_repo", "fence_census")


def _reconcile(env: SweepEnv) -> dict[str, Any]:
    (report,) = run_reconciliation(
        load_settings(), load_tenants(env.tenants_path), env.instance, tenant=TENANT, apply=True
    )
    return report


def _holders_of_function(env: SweepEnv) -> set[str]:
    """The sourcePaths of the query results that hold the function's text."""
    found = asyncio.run(
        run_query(
            load_settings(),
            env.store,
            env.ledger,
            "alpha_function",
            tenant=TENANT,
            repo=SLUG,
            k=50,
        )
    )
    return {
        hit["metadata"]["sourcePath"]
        for hit in found["results"]
        if "alpha_function" in (hit.get("document") or "")
    }


def _no_error_check(report: dict[str, Any]) -> None:
    for name, check in report["checks"].items():
        assert check["passed"] or check["severity"] == "WARN", (name, check)


def test_a_rename_during_a_deferred_sweep_never_leaves_the_function_absent(
    env, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A renamed file's inputs are otherwise copied from a.py's rows and never sent: the
    # rename must need the provider for its sweep to defer (as it does when the old rows
    # carry no input digest, or the copy would cross tenants).
    monkeypatch.setenv("NEO_EMBEDDING_REUSE_VECTORS", "false")
    first = _sensor_sweep(env)
    assert first["outcome"] == codes.OUTCOME_COMPLETE
    assert _holders_of_function(env) == {"a.py"}
    old_ids = set(env.chunk_ids("a.py"))

    # Renamed; the provider is down, so the sweep of the rename defers.
    env.repo.git("mv", "a.py", "zebra.py")
    env.commit({})
    env.server.refuse()
    deferred = _sensor_sweep(env)
    assert deferred["outcome"] == codes.OUTCOME_DEFERRED
    env.server.resume()

    # Reclamation on: a.py left the manifest, but zebra.py is not embedded, so a.py's rows
    # wait (pending), and the function is still served, from a.py.
    report = _reconcile(env)
    assert report["success"], report
    _no_error_check(report)
    assert report["orphans"][KIND_MANIFEST_ORPHAN]["count"] == 0
    assert report["orphans"][KIND_MANIFEST_ORPHAN_PENDING]["count"] == len(old_ids)
    assert report["reclaimed"] == 0
    assert old_ids <= env.row_ids()
    assert _holders_of_function(env) == {"a.py"}

    # The retry (the operator's forced sweep: the backoff has not elapsed) completes:
    # zebra.py's rows exist; a.py's are now reclaimable, still stored, and no longer
    # served (read-side truth: the generation is complete, so never both paths).
    done = env.sweep(force=True)
    assert done["outcome"] == codes.OUTCOME_COMPLETE
    assert old_ids <= env.row_ids()
    assert _holders_of_function(env) == {"zebra.py"}

    # A sweep of the repo holds its lease: the reclaim waits, deletes nothing.
    key = sweep_lease_key(TENANT, SLUG)
    epoch = try_acquire(env.ledger, key, "a-sweep-run", 120.0, time.time())
    assert epoch is not None
    monkeypatch.setenv("NEO_RECONCILIATION_LEASE_WAIT_S", "0")
    try:
        held = _reconcile(env)
    finally:
        release(env.ledger, key, "a-sweep-run", epoch=epoch)
    assert held["success"] and held["reclaimed"] == 0
    assert held["leaseHeld"] == len(old_ids)
    assert old_ids <= env.row_ids()

    # The lease free: one reconciliation reclaims a.py, the no-hole check proves zebra.py
    # holds the function, and the query finds it there.
    final = _reconcile(env)
    assert final["success"]
    assert all(c["passed"] for c in final["checks"].values()), final["checks"]
    assert final["reclaimedByKind"][KIND_MANIFEST_ORPHAN] == len(old_ids), final["unconfirmed"]
    assert not old_ids & env.row_ids()
    assert _holders_of_function(env) == {"zebra.py"}
