"""The daily forced full sweep: one forced run request per declared repo, partitions
registered, off by default; and a request it makes really runs the sweep.
"""

import datetime as dt
from pathlib import Path

import dagster as dg
import pytest

from neo_assets.definitions import defs
from neo_assets.defs.partitions import TENANT_REPOS
from neo_assets.defs.resources import default_resources
from neo_assets.sweep.defs import forced_sweep_schedule
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.tenantfiles import repo_entry, write_tenants


@pytest.fixture
def env(neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    repos = {}
    for name in ("widgets", "gadgets", "tools"):
        repo = GitRepo(tmp_path / name)
        repo.write(f"{name}.py", f"def {name}():\n    return 1\n")
        repo.commit("one", when=1_700_000_000)
        repos[name] = repo
    tenants = write_tenants(
        tmp_path / "tenants.yaml",
        {
            "acme": [
                repo_entry("widgets", repos["widgets"].path),
                repo_entry("gadgets", repos["gadgets"].path),
            ],
            "globex": [repo_entry("tools", repos["tools"].path)],
        },
    )
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants))
    (tmp_path / "dagster").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    yield {"instance": instance, "tenants": tenants, "tmp": tmp_path}
    instance.dispose()


def _evaluate(instance: dg.DagsterInstance, when: dt.datetime) -> list[dg.RunRequest]:
    with dg.build_schedule_context(
        instance=instance,
        scheduled_execution_time=when,
        resources=default_resources(),
        repository_def=defs.get_repository_def(),
    ) as ctx:
        data = forced_sweep_schedule.evaluate_tick(ctx)
    assert data.skip_message is None
    return list(data.run_requests or [])


def test_one_forced_request_per_declared_repo_and_partitions_registered(env) -> None:
    instance = env["instance"]
    instance.add_dynamic_partitions(TENANT_REPOS, ["acme/widgets"])  # one known already
    when = dt.datetime(2025, 3, 4, 2, 0, tzinfo=dt.UTC)
    requests = _evaluate(instance, when)
    assert [r.partition_key for r in requests] == ["acme/widgets", "acme/gadgets", "globex/tools"]
    assert sorted(instance.get_dynamic_partitions(TENANT_REPOS)) == [
        "acme/gadgets",
        "acme/widgets",
        "globex/tools",
    ]
    for r in requests:
        assert r.tags["neo/due-reason"] == "forced"
        assert r.tags["neo/tenant"] == r.partition_key.split("/")[0]
        assert r.run_key == f"forced:{r.partition_key}:2025-03-04T02:00Z"
    # the next day's tick asks again (new run keys); the same tick asks nothing new
    later = _evaluate(instance, when + dt.timedelta(days=1))
    assert {r.run_key for r in later}.isdisjoint({r.run_key for r in requests})
    assert [r.run_key for r in _evaluate(instance, when)] == [r.run_key for r in requests]


def test_schedule_is_off_by_default_and_described() -> None:
    assert forced_sweep_schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    assert forced_sweep_schedule.job_name == "sweep"
    assert forced_sweep_schedule.cron_schedule == "0 2 * * *"
    assert "forced" in forced_sweep_schedule.description


def _tick_data(instance: dg.DagsterInstance):
    with dg.build_schedule_context(
        instance=instance,
        resources=default_resources(),
        repository_def=defs.get_repository_def(),
    ) as ctx:
        return forced_sweep_schedule.evaluate_tick(ctx)


def test_a_tenant_without_repos_skips(env) -> None:
    write_tenants(env["tenants"], {"acme": []})
    data = _tick_data(env["instance"])
    assert not data.run_requests and "no repo is declared" in data.skip_message


def test_an_invalid_tenants_file_fails_the_tick_naming_it(env) -> None:
    write_tenants(env["tenants"], {})
    with pytest.raises(dg.DagsterUserCodeExecutionError) as info:
        _tick_data(env["instance"])
    assert str(env["tenants"]) in str(info.value.__cause__)


def test_a_forced_request_runs_the_sweep_even_when_nothing_is_due(env) -> None:
    from neo_assets.cli.launch import run_sweeps
    from neo_assets.config.settings import load_settings
    from neo_assets.tenants.validation import load_tenants

    instance = env["instance"]
    run_sweeps(load_settings(), load_tenants(env["tenants"]), instance, tenant="globex")
    request = next(
        r
        for r in _evaluate(instance, dt.datetime(2025, 3, 4, 2, tzinfo=dt.UTC))
        if r.partition_key == "globex/tools"
    )
    result = defs.resolve_job_def("sweep").execute_in_process(
        instance=instance, partition_key=request.partition_key, tags=request.tags
    )
    assert result.success
    census = result.output_for_node("sweep_repo", "fence_census")
    assert census["outcome"] == "complete" and census["counts"]["embedded"] == 0
    assert census["counts"]["alreadyPresent"] > 0
