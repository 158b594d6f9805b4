"""The dynamic partitions follow the tenants file on every surface that requests runs: the
sweep sensor returns add and delete requests, the schedules and the CLI apply them; a
removed partition's runs stay in the instance."""

import datetime as dt
from pathlib import Path

import dagster as dg
import pytest

from neo_assets.cli.launch import run_reconciliation, run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.definitions import defs
from neo_assets.defs.partition_sync import apply_requests, partition_requests, sync_partitions
from neo_assets.defs.partitions import TENANT_REPOS, TENANTS
from neo_assets.defs.resources import default_resources
from neo_assets.reconcile.defs import nightly_reconciliation_schedule
from neo_assets.sweep.defs import forced_sweep_schedule, sweep_sensor
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

EVERYTHING = {"acme": ["widgets", "gadgets"], "globex": ["tools"]}
RETIRED = {"acme": ["widgets"]}  # gadgets and the whole of globex are gone


@pytest.fixture
def env(neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    repos = {}
    for slug in ("widgets", "gadgets", "tools"):
        repo = GitRepo(tmp_path / slug)
        repo.write(f"{slug}.py", f"def {slug}():\n    return 1\n")
        repo.commit("one", when=1_700_000_000)
        repos[slug] = repo
    tenants_path = tmp_path / "tenants.yaml"
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants_path))

    def declare(declaration: dict[str, list[str]]) -> None:
        write_tenants(
            tenants_path,
            {t: [repo_entry(s, repos[s].path) for s in slugs] for t, slugs in declaration.items()},
        )

    declare(EVERYTHING)
    (tmp_path / "dagster").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    yield {"instance": instance, "declare": declare, "tenants": tenants_path}
    instance.dispose()


def partitions(instance: dg.DagsterInstance) -> dict[str, list[str]]:
    return {name: instance.get_dynamic_partitions(name) for name in (TENANT_REPOS, TENANTS)}


def sensor_tick(instance: dg.DagsterInstance) -> dg.SensorResult:
    with dg.build_sensor_context(instance=instance, resources=default_resources()) as context:
        result = sweep_sensor(context)
    apply_requests(instance, result.dynamic_partitions_requests)  # as the daemon does
    return result


def test_the_sweep_sensor_adds_the_declared_and_deletes_the_retired(env) -> None:
    instance = env["instance"]
    first = sensor_tick(instance)
    assert first.dynamic_partitions_requests == [
        dg.AddDynamicPartitionsRequest(
            TENANT_REPOS, ["acme/widgets", "acme/gadgets", "globex/tools"]
        ),
        dg.AddDynamicPartitionsRequest(TENANTS, ["acme", "globex"]),
    ]
    env["declare"](RETIRED)
    second = sensor_tick(instance)
    assert second.dynamic_partitions_requests == [
        dg.DeleteDynamicPartitionsRequest(TENANT_REPOS, ["acme/gadgets", "globex/tools"]),
        dg.DeleteDynamicPartitionsRequest(TENANTS, ["globex"]),
    ]
    assert partitions(instance) == {TENANT_REPOS: ["acme/widgets"], TENANTS: ["acme"]}
    # Only the declared repo is requested, and the next tick has nothing left to sync.
    assert {r.partition_key for r in second.run_requests} <= {"acme/widgets"}
    assert sensor_tick(instance).dynamic_partitions_requests == []


def test_a_declared_repo_added_later_is_added_alone(env) -> None:
    instance = env["instance"]
    env["declare"](RETIRED)
    sync_partitions(instance, load_tenants(env["tenants"]))
    env["declare"](EVERYTHING)
    assert partition_requests(instance, load_tenants(env["tenants"])) == [
        dg.AddDynamicPartitionsRequest(TENANT_REPOS, ["acme/gadgets", "globex/tools"]),
        dg.AddDynamicPartitionsRequest(TENANTS, ["globex"]),
    ]


def test_the_schedules_sync_before_they_request(env) -> None:
    instance = env["instance"]
    sync_partitions(instance, load_tenants(env["tenants"]))
    env["declare"](RETIRED)
    when = dt.datetime(2025, 3, 4, 2, 0, tzinfo=dt.UTC)
    with dg.build_schedule_context(
        instance=instance,
        scheduled_execution_time=when,
        resources=default_resources(),
        repository_def=defs.get_repository_def(),
    ) as context:
        forced = forced_sweep_schedule.evaluate_tick(context)
    assert [r.partition_key for r in forced.run_requests] == ["acme/widgets"]
    assert partitions(instance) == {TENANT_REPOS: ["acme/widgets"], TENANTS: ["acme"]}

    env["declare"](EVERYTHING)
    with dg.build_schedule_context(
        instance=instance, scheduled_execution_time=when, resources=default_resources()
    ) as context:
        nightly = nightly_reconciliation_schedule(context)
    assert sorted(r.partition_key for r in nightly) == ["acme", "globex"]
    assert sorted(instance.get_dynamic_partitions(TENANTS)) == ["acme", "globex"]
    assert len(instance.get_dynamic_partitions(TENANT_REPOS)) == 3


def test_a_retired_repos_runs_and_materializations_outlive_its_partition(env) -> None:
    instance = env["instance"]
    settings = load_settings()
    swept = run_sweeps(settings, load_tenants(env["tenants"]), instance, tenant="globex")
    assert [r["outcome"] for r in swept] == ["complete"]
    (reconciled,) = run_reconciliation(
        settings, load_tenants(env["tenants"]), instance, tenant="globex"
    )
    assert reconciled["success"]
    runs = {r.run_id: r for r in instance.get_runs()}
    sweep_run = runs[swept[0]["runId"]]
    assert sweep_run.tags["dagster/partition"] == "globex/tools"

    env["declare"](RETIRED)
    run_sweeps(settings, load_tenants(env["tenants"]), instance, tenant="acme")  # the CLI syncs
    assert "globex/tools" not in instance.get_dynamic_partitions(TENANT_REPOS)
    # The retired tenant keeps its reconciliation partition: the ledger remembers it, so
    # its rows can still be reclaimed by a run of its own.
    assert "globex" in instance.get_dynamic_partitions(TENANTS)

    kept = {r.run_id: r for r in instance.get_runs()}
    assert kept[sweep_run.run_id].tags["dagster/partition"] == "globex/tools"
    assert kept[sweep_run.run_id].status == dg.DagsterRunStatus.SUCCESS
    assert kept[reconciled["runId"]].tags["dagster/partition"] == "globex"
    materialized = instance.fetch_materializations(
        dg.AssetRecordsFilter(
            asset_key=dg.AssetKey("repo_envelope"), asset_partitions=["globex/tools"]
        ),
        limit=10,
    ).records
    assert [m.run_id for m in materialized] == [sweep_run.run_id]
