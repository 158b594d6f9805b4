"""The sweep sensor over two ticks: registers partitions, then requests only what moved."""

from pathlib import Path

import dagster as dg
import pytest

from neo_assets.cli.launch import run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.defs.partition_sync import apply_requests
from neo_assets.defs.partitions import TENANT_REPOS
from neo_assets.defs.resources import default_resources
from neo_assets.sweep.defs import sweep_sensor
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.tenantfiles import repo_entry, write_tenants


@pytest.fixture
def env(neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    repo = GitRepo(tmp_path / "r")
    repo.write("a.py", "def a():\n    return 1\n")
    repo.commit("one", when=1_700_000_000)
    tenants = write_tenants(tmp_path / "tenants.yaml", {"acme": [repo_entry("widgets", repo.path)]})
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants))
    (tmp_path / "dagster").mkdir(exist_ok=True)
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    yield {"repo": repo, "tenants": tenants, "instance": instance}
    instance.dispose()


def _tick(instance, cursor):
    with dg.build_sensor_context(
        instance=instance, cursor=cursor, resources=default_resources()
    ) as ctx:
        result = sweep_sensor(ctx)
    apply_requests(instance, result.dynamic_partitions_requests)  # as the daemon does
    return result


def test_second_tick_with_first_cursor_requests_nothing(env) -> None:
    first = _tick(env["instance"], None)
    assert [r.partition_key for r in first.run_requests] == ["acme/widgets"]
    assert env["instance"].get_dynamic_partitions(TENANT_REPOS) == ["acme/widgets"]
    second = _tick(env["instance"], first.cursor)
    assert second.run_requests == []
    assert second.dynamic_partitions_requests == []


def test_after_a_complete_sweep_nothing_is_due_until_a_commit(env) -> None:
    run_sweeps(load_settings(), load_tenants(env["tenants"]), env["instance"])
    quiet = _tick(env["instance"], None)
    assert quiet.run_requests == []
    env["repo"].write("b.py", "def b():\n    return 2\n")
    sha = env["repo"].commit("two", when=1_700_000_500)
    moved = _tick(env["instance"], quiet.cursor)
    assert len(moved.run_requests) == 1
    assert sha in moved.run_requests[0].run_key
    assert moved.run_requests[0].tags["neo/due-reason"]
