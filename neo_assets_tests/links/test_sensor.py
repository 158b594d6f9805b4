"""The links sensor: links are refreshed by their own run after a sweep that moved the
declared generation, and a quiet repo costs no links runs."""

from pathlib import Path

import dagster as dg
import pytest

from neo_assets.cli.launch import QUIET_CONSOLE, run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.defs.partitions import TENANT_REPOS
from neo_assets.defs.resources import default_resources
from neo_assets.links.defs import links_sensor
from neo_assets.links.store import link_set
from neo_assets.services.handles import open_ledger
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

KEY = "acme/widgets"


@pytest.fixture
def env(neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    repo = GitRepo(tmp_path / "r")
    repo.write("a.py", "def a():\n    return 1\n\n\ndef b():\n    return 1\n")
    repo.commit("one", when=1_700_000_000)
    tenants = write_tenants(tmp_path / "tenants.yaml", {"acme": [repo_entry("widgets", repo.path)]})
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants))
    (tmp_path / "dagster").mkdir(exist_ok=True)
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    instance.add_dynamic_partitions(TENANT_REPOS, [KEY])
    yield {"repo": repo, "tenants": tenants, "instance": instance}
    instance.dispose()


def _run(instance, job: str) -> dg.ExecuteInProcessResult:
    from neo_assets.definitions import defs

    result = defs.resolve_job_def(job).execute_in_process(
        instance=instance, run_config=QUIET_CONSOLE, partition_key=KEY
    )
    assert result.success
    return result


def _tick(instance) -> list[dg.RunRequest]:
    with dg.build_sensor_context(instance=instance, resources=default_resources()) as ctx:
        return list(links_sensor(ctx).run_requests)


def _stored():
    with open_ledger(load_settings()) as ledger:
        return link_set(ledger, "acme", "widgets")


def test_a_sweep_leaves_links_to_their_own_run_requested_once(env) -> None:
    instance = env["instance"]
    assert _tick(instance) == []  # never swept: nothing to link

    sweep = _run(instance, "sweep")
    materialized = {e.asset_key.to_user_string() for e in sweep.get_asset_materialization_events()}
    assert materialized == {
        "repo_envelope",
        "chunk_generation",
        "kb_embeddings",
        "fence_census",
        "retrieval_quality",  # the first revision's self-evaluation
    }
    assert _stored() is None  # the sweep did not link
    (request,) = _tick(instance)
    assert request.partition_key == KEY and request.tags["neo/links-reason"] == "never linked"
    assert [r.run_key for r in _tick(instance)] == [request.run_key]  # same facts, same key

    _run(instance, "links")
    assert _stored() is not None
    assert _tick(instance) == []  # current: a quiet repo costs no runs

    _run(instance, "sweep")  # forced-style re-sweep of an unchanged repo: still current
    assert _tick(instance) == []

    env["repo"].write("c.py", "def c():\n    return 3\n")
    env["repo"].commit("two", when=1_700_000_600)
    _run(instance, "sweep")
    (moved,) = _tick(instance)
    assert moved.tags["neo/links-reason"] == "declared generation moved"
    assert moved.run_key != request.run_key


def test_the_cli_runner_refreshes_links_after_its_sweeps(env) -> None:
    (result,) = run_sweeps(load_settings(), load_tenants(env["tenants"]), env["instance"])
    assert result["outcome"] == "complete"
    stored = _stored()
    assert stored is not None and stored["chunks"] == 2
    assert _tick(env["instance"]) == []
    runs = {r.job_name for r in env["instance"].get_runs()}
    assert {"sweep", "links", "status"} <= runs
