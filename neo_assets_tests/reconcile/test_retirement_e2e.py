"""Retirement end to end: a repo and a tenant leave tenants.yaml, over real git repos, a
real Chroma, real Dagster runs launched from the sensors' and the nightly schedule's own
requests (evaluated against a real instance, as the daemon would).

What must hold: no ERROR check anywhere (retired rows are WARN on their own tenant only),
the retired tenant's reconciliation runs (the CLI's `reconcile --tenant globex` too),
re-declaring before reclamation is live again with nothing re-embedded, and with
reclamation on one reconciliation removes every retired row and no declared one."""

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from neo_assets.alerts.sinks import ALERTS_FILE
from neo_assets.cli.launch import QUIET_CONSOLE, _checks
from neo_assets.config.settings import load_settings
from neo_assets.core.ids.stamps import tenant_filter
from neo_assets.defs.partition_sync import apply_requests
from neo_assets.defs.partitions import TENANT_REPOS, TENANTS
from neo_assets.defs.resources import default_resources
from neo_assets.reconcile.rules.retirement import RETIRED_REPO, RETIRED_TENANT
from neo_assets.status.report import build_status
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.kb_handles import KbHandles
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

ROOT = Path(__file__).resolve().parents[2]


def _defs() -> Any:
    from neo_assets.definitions import defs

    return defs


@pytest.fixture
def world(neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    repos = {}
    for name, body in {"widgets": "w", "gadgets": "g", "tools": "t"}.items():
        repo = GitRepo(tmp_path / name)
        repo.write(
            f"{body}.py", f"def {body}_one():\n    return 1\n\n\ndef {body}_two():\n    return 2\n"
        )
        repo.write("README.md", f"# {name}\n\nAbout {name}.\n")
        repo.commit("initial", when=1_700_000_000)
        repos[name] = repo
    tenants = tmp_path / "tenants.yaml"
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants))
    (tmp_path / "dagster").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    kb = KbHandles()
    yield {"repos": repos, "tenants": tenants, "instance": instance, "kb": kb}
    kb.close()
    instance.dispose()


def _declare(world: dict[str, Any], acme: list[str], globex: bool) -> None:
    doc = {"acme": [repo_entry(slug, world["repos"][slug].path) for slug in acme]}
    if globex:
        doc["globex"] = [repo_entry("tools", world["repos"]["tools"].path)]
    write_tenants(world["tenants"], doc)


def _sweep_tick(instance: dg.DagsterInstance) -> list[dg.RunRequest]:
    sensor = _defs().resolve_sensor_def("sweep_sensor")
    with dg.build_sensor_context(instance=instance, resources=default_resources()) as ctx:
        result = sensor(ctx)
    apply_requests(instance, result.dynamic_partitions_requests)  # as the daemon does
    return list(result.run_requests)


def _launch(instance: dg.DagsterInstance, job: str, request: dg.RunRequest) -> Any:
    return (
        _defs()
        .resolve_job_def(job)
        .execute_in_process(
            instance=instance,
            run_config=QUIET_CONSOLE,
            partition_key=request.partition_key,
            tags=request.tags,
            raise_on_error=False,
        )
    )


def _nightly(instance: dg.DagsterInstance) -> list[dg.RunRequest]:
    schedule = _defs().resolve_schedule_def("nightly_reconciliation_schedule")
    when = dt.datetime(2026, 3, 4, 3, 0, tzinfo=dt.UTC)
    with dg.build_schedule_context(
        instance=instance,
        scheduled_execution_time=when,
        resources=default_resources(),
        repository_def=_defs().get_repository_def(),
    ) as ctx:
        return list(schedule.evaluate_tick(ctx).run_requests or [])


def _reconcile_all(instance: dg.DagsterInstance) -> dict[str, dict[str, Any]]:
    """Launch the nightly schedule's requests; each tenant's checks by name."""
    out = {}
    for request in _nightly(instance):
        result = _launch(instance, "reconcile", request)
        out[request.partition_key] = {
            "success": result.success,
            "report": result.output_for_node("kb_reconciliation"),
            "checks": _checks(result),
        }
    return out


def _ids(kb: KbHandles, tenant: str, repo: str | None = None) -> set[str]:
    return kb.store.ids_where(tenant_filter(tenant, repo))


def _no_error_check(runs: dict[str, dict[str, Any]]) -> None:
    for tenant, run in runs.items():
        assert run["success"], tenant
        for name, check in run["checks"].items():
            assert check["passed"] or check["severity"] == "WARN", (tenant, name, check)


def _alerts(instance: dg.DagsterInstance, neo_home: Path) -> list[dict[str, Any]]:
    """One tick of the alert sensor, as the daemon would; what it wrote to alerts.jsonl."""
    sensor = _defs().resolve_sensor_def("asset_check_alert_sensor")
    with dg.build_sensor_context(instance=instance, resources=default_resources()) as ctx:
        sensor(ctx)
    path = neo_home / ALERTS_FILE
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_retiring_a_repo_and_a_tenant_warns_then_reclaims_only_them(
    world, monkeypatch, neo_home: Path
) -> None:
    instance, kb = world["instance"], world["kb"]
    _declare(world, ["widgets", "gadgets"], globex=True)
    requests = _sweep_tick(instance)
    assert sorted(r.partition_key for r in requests) == [
        "acme/gadgets",
        "acme/widgets",
        "globex/tools",
    ]
    assert all(_launch(instance, "sweep", r).success for r in requests)
    widgets = _ids(kb, "acme", "widgets")
    gadgets = _ids(kb, "acme", "gadgets")
    tools = _ids(kb, "globex")
    assert widgets and gadgets and tools

    # --- Retire acme/gadgets and the tenant globex.
    _declare(world, ["widgets"], globex=False)
    assert _sweep_tick(instance) == []  # nothing due, nothing relaunched
    assert instance.get_dynamic_partitions(TENANT_REPOS) == ["acme/widgets"]
    # globex keeps its reconciliation partition: its rows wait for it.
    assert sorted(instance.get_dynamic_partitions(TENANTS)) == ["acme", "globex"]

    runs = _reconcile_all(instance)  # reclamation off (the default)
    assert sorted(runs) == ["acme", "globex"]  # the retired tenant is visited too
    _no_error_check(runs)
    acme = runs["acme"]["checks"]["tenant_containment"]
    assert acme["severity"] == "WARN" and not acme["passed"]
    assert acme["metadata"]["violating_rows"] == 0
    assert acme["metadata"]["retired"] == {RETIRED_REPO: len(gadgets), RETIRED_TENANT: 0}
    assert acme["metadata"]["retired_by_scope"] == {"acme/gadgets": len(gadgets)}
    assert acme["metadata"]["other_tenants_retired_rows"] == len(tools)  # not acme's
    globex = runs["globex"]["checks"]["tenant_containment"]
    assert globex["severity"] == "WARN"
    assert globex["metadata"]["retired"] == {RETIRED_REPO: 0, RETIRED_TENANT: len(tools)}
    assert runs["globex"]["report"]["retired"] == {
        "tenant": True,
        "repos": {"tools": {"rows": len(tools), "waiting": len(tools)}},
    }
    assert runs["acme"]["report"]["retired"]["repos"] == {
        "gadgets": {"rows": len(gadgets), "waiting": len(gadgets)}
    }
    assert _ids(kb, "acme", "gadgets") == gadgets and _ids(kb, "globex") == tools
    # The snapshot lists the retired repos apart, with the rows that wait.
    snap = build_status(load_settings(), load_tenants(world["tenants"]), kb.ledger, kb.store)
    states = {(r["tenantId"], r["repoSlug"]): (r["state"], r["rows"]) for r in snap["repos"]}
    assert states == {
        ("acme", "widgets"): ("complete", len(widgets)),
        ("acme", "gadgets"): ("retired", len(gadgets)),
        ("globex", "tools"): ("retired", len(tools)),
    }

    # The alerts say what was retired and how many rows wait, by path, with the repo and
    # a run link in the UI the operator uses; none of them is an ERROR.
    monkeypatch.setenv("NEO_UI_BASE_URL", "https://ops.example/dagster")
    alerts = _alerts(instance, neo_home)
    assert alerts and all(a["severity"] == "WARN" for a in alerts), alerts
    by_tenant = {a["tenantId"]: a for a in alerts if a["check"] == "tenant_containment"}
    acme_alert = by_tenant["acme"]
    assert f"acme/gadgets {len(gadgets)} rows wait for reclamation" in acme_alert["summary"]
    assert acme_alert["repoSlug"] == "gadgets"
    assert acme_alert["offending"] and all(
        o.startswith("gadgets:") for o in acme_alert["offending"]
    )
    assert acme_alert["runUrl"].startswith("https://ops.example/dagster/runs/")
    assert f"globex {len(tools)} rows wait" in by_tenant["globex"]["summary"]

    # The CLI reconciles the retired tenant by name (it used to exit 2) and exits 0.
    shown = subprocess.run(
        [sys.executable, "-m", "neo_assets.cli", "reconcile", "--tenant", "globex", "--json"],
        cwd=ROOT,
        env={**os.environ, "DAGSTER_HOME": str(instance.root_directory)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    (doc,) = json.loads(shown.stdout)["tenants"]
    assert doc["tenantId"] == "globex" and doc["retired"]["tenant"] is True
    assert doc["checks"]["tenant_containment"]["severity"] == "WARN"

    # --- Re-declared before reclamation: live again, nothing embedded again.
    _declare(world, ["widgets", "gadgets"], globex=True)
    again = _sweep_tick(instance)
    for request in again:
        result = _launch(instance, "sweep", request)
        census = result.output_for_node("sweep_repo", "fence_census")
        assert census["outcome"] == "complete"
        assert census["counts"].get("embedded", 0) == 0, census["counts"]
    runs = _reconcile_all(instance)
    for run in runs.values():
        assert run["checks"]["tenant_containment"]["passed"], run["checks"]
    assert _ids(kb, "acme", "gadgets") == gadgets and _ids(kb, "globex") == tools

    # --- Retired again, reclamation on: one reconciliation and they are gone.
    _declare(world, ["widgets"], globex=False)
    _sweep_tick(instance)
    monkeypatch.setenv("NEO_RECONCILIATION_ENABLED", "true")
    runs = _reconcile_all(instance)
    _no_error_check(runs)
    assert _ids(kb, "acme", "gadgets") == set()
    assert _ids(kb, "globex") == set()
    assert _ids(kb, "acme", "widgets") == widgets  # the declared repo untouched
    assert runs["globex"]["report"]["reclaimed"] == len(tools)
    assert runs["acme"]["report"]["reclaimed"] == len(gadgets)
    for run in runs.values():  # nothing waits any more: containment passes outright
        assert run["checks"]["tenant_containment"]["passed"]
