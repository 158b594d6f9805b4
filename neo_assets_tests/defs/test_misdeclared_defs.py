"""Failures stay in their tenant, in Dagster and in the query service (issue 33): with a
misdeclared entry the sweep sensor still requests the good tenants' sweeps, the
``declaration`` check fails on the misdeclared tenant only (naming its line), and a
long-running service goes on answering while the file cannot even be parsed."""

import asyncio
from pathlib import Path

import dagster as dg
import pytest
import yaml

from neo_assets.cli.launch import run_reconciliation, run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.defs.partition_sync import apply_requests
from neo_assets.defs.partitions import TENANT_REPOS
from neo_assets.defs.resources import default_resources
from neo_assets.query.rules.request import parse_search
from neo_assets.query.search import QueryService
from neo_assets.query.serving import Resident
from neo_assets.services.handles import open_ledger, open_store
from neo_assets.sweep.defs import sweep_sensor
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.tenantfiles import repo_entry, write_tenants


@pytest.fixture
def env(neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    widgets = GitRepo(tmp_path / "widgets")
    widgets.write("w.py", "def render_widget(w):\n    return w.draw()\n")
    widgets.commit("one", when=1_700_000_000)
    tools = GitRepo(tmp_path / "tools")
    tools.write("t.py", "def hammer_nail(nail):\n    return nail.hit()\n")
    tools.commit("one", when=1_700_000_000)
    tenants = write_tenants(
        tmp_path / "tenants.yaml",
        {
            "acme": [repo_entry("widgets", widgets.path)],
            "globex": [repo_entry("tools", tools.path)],
        },
    )
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants))
    (tmp_path / "dagster").mkdir(exist_ok=True)
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    # The good file's declarations are read (and remembered) as every run reads them.
    declared = default_resources()["tenants"].load()
    run_sweeps(load_settings(), declared, instance)
    yield {"widgets": widgets, "tools": tools, "tenants": tenants, "instance": instance}
    instance.dispose()


def _misdeclare(tenants: Path, tmp_path: Path) -> int:
    """globex's parser version unknown (its last good one stands in), and a new tenant
    whose only repo does not exist (never good: withheld). Returns globex's bad line."""
    doc = yaml.safe_load(tenants.read_text())
    doc["tenants"][1]["repos"][0]["parser"]["version"] = "9.9.9"
    doc["tenants"].append({"id": "initech", "repos": [repo_entry("lib", tmp_path / "nowhere")]})
    text = yaml.safe_dump(doc, sort_keys=False)
    tenants.write_text(text)
    return next(i for i, line in enumerate(text.splitlines(), 1) if "9.9.9" in line)


def _tick(instance, cursor=None):
    with dg.build_sensor_context(
        instance=instance, cursor=cursor, resources=default_resources()
    ) as ctx:
        result = sweep_sensor(ctx)
    apply_requests(instance, result.dynamic_partitions_requests)
    return result


def test_the_sweep_sensor_and_the_checks_keep_the_failure_in_its_tenant(
    env, tmp_path: Path
) -> None:
    instance = env["instance"]
    line = _misdeclare(env["tenants"], tmp_path)
    env["widgets"].write("w2.py", "def more():\n    return 2\n")
    env["widgets"].commit("two", when=1_700_000_500)
    env["tools"].write("t2.py", "def more_tools():\n    return 3\n")
    env["tools"].commit("two", when=1_700_000_500)

    # The tick succeeds and requests both moved repos (globex on its last good
    # declaration); the withheld repo gets no run and no partition.
    result = _tick(instance)
    assert sorted(r.partition_key for r in result.run_requests) == ["acme/widgets", "globex/tools"]
    assert sorted(instance.get_dynamic_partitions(TENANT_REPOS)) == ["acme/widgets", "globex/tools"]

    tenants = default_resources()["tenants"].load()
    assert tenants.tenant("globex").repo("tools").parser.version == "1.0.0"  # last good
    assert ("initech", "lib") in tenants.withheld

    reports = {r["tenantId"]: r for r in run_reconciliation(load_settings(), tenants, instance)}
    assert reports["acme"]["checks"]["declaration"]["passed"]
    globex = reports["globex"]["checks"]["declaration"]
    assert not globex["passed"] and globex["severity"] == "WARN"
    assert globex["metadata"]["offending"] == [f"globex/tools line {line}"]
    initech = reports["initech"]["checks"]["declaration"]
    assert not initech["passed"] and initech["severity"] == "ERROR"
    # The good tenants' other checks are unaffected.
    for tenant in ("acme", "globex"):
        assert reports[tenant]["checks"]["no_hole"]["passed"], reports[tenant]["checks"]

    # kb_status (refreshed after the reconciliation) counts and names the misdeclared.
    event = instance.get_latest_materialization_event(dg.AssetKey("kb_status"))
    metadata = event.asset_materialization.metadata
    assert metadata["misdeclared"].value == 2
    declaration = metadata["declaration"].value
    assert {(m["tenantId"], m["repoSlug"]) for m in declaration["misdeclared"]} == {
        ("globex", "tools"),
        ("initech", "lib"),
    }


def test_a_running_service_answers_through_an_unparsable_file(env) -> None:
    settings = load_settings()
    with open_ledger(settings) as ledger, open_store(settings) as store:
        resident = Resident(settings, store, ledger)
        service = QueryService(resident)

        async def ask(tenant: str, text: str) -> list[dict]:
            return (await service.search(tenant, parse_search({"query": text, "k": 3})))["results"]

        try:
            assert asyncio.run(ask("globex", "hammer nail"))
            env["tenants"].write_text("tenants: [\n")  # not YAML: every last good stands
            assert [t.id for t in resident.tenants().tenants] == ["acme", "globex"]
            assert resident.tenants().source == "last-good"
            hits = asyncio.run(ask("globex", "hammer nail"))
            assert hits and {h["metadata"]["tenantId"] for h in hits} == {"globex"}
            assert asyncio.run(ask("acme", "render widget"))
            env["tenants"].unlink()  # gone altogether: still answered
            assert asyncio.run(ask("acme", "render widget"))
        finally:
            asyncio.run(resident.aclose())
