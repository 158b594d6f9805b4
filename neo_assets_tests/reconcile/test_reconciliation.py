"""Issue 5 end to end: reconciliation through Dagster over two tenants in one real Chroma.

Every arm sweeps real git repos through ``run_sweeps`` (the ``sweep`` job per repo) and
reconciles through the ``reconcile`` job (``run_reconciliation``, what the CLI runs): the
asset classifies, re-stamps and reclaims, and its three checks run in the same run. What
is asserted is read back from Chroma and the ledger, never taken from the reconciler's
own report alone. The full plan (every id of every kind) is read with
``reconcile_tenant(write=False)``, which writes nothing.

The migration arm uses the fault-injecting OpenAI-compatible server as the provider, so
the new generation can be refused outright (nothing embedded) or embedded in part (a
chunk whose request hangs past the call ceiling stays deferred).
"""

import datetime
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import numpy as np
import pytest

from neo_assets.cli.launch import run_reconciliation, run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.core.codes import (
    KIND_CONFIG_STALE,
    KIND_MANIFEST_ORPHAN,
    KIND_STALE_CONTENT,
    KIND_SUPERSEDED_GENERATION,
    KIND_SUPERSEDED_PENDING,
    KIND_UNDECLARED_REPO,
    KIND_UNYIELDED_PATH,
    RECONCILE_CLASSIFY_ONLY,
    RECONCILE_DISABLED,
)
from neo_assets.core.ids.stamps import tenant_filter
from neo_assets.defs.resources import default_resources
from neo_assets.reconcile.defs import (
    nightly_reconciliation_schedule,
    reconciliation_sensor,
)
from neo_assets.reconcile.rules.plan import ORPHAN_KINDS
from neo_assets.reconcile.tenant import plan_containment, reconcile_tenant
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.fakes.fault_server import marker
from neo_assets_tests.fakes.fixtures import fault_server_fixture
from neo_assets_tests.fakes.supervisor import FaultServerSupervisor
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.kb_handles import KbHandles
from neo_assets_tests.sweep_harness import DIMENSIONS, sweep_env_vars, text_file
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

ROOT = Path(__file__).resolve().parents[2]
OLD, NEW = "1.0.0", "1.1.0"
PARSER = "neo-code"
VENDOR = ["vendor/**"]
SHARED = '"""Shared helper."""\n\n\ndef shared(x):\n    return x * 2\n'

server_module = fault_server_fixture(scope="module", dimensions=DIMENSIONS)


# ---------------------------------------------------------------------------- the world
class World:
    """Real repos, a real tenants file, a Dagster instance; the store and ledger under
    NEO_HOME. ``declare`` rewrites tenants.yaml; ``sweep``/``reconcile`` run Dagster."""

    def __init__(self, root: Path, repos: dict[str, dict[str, str]]) -> None:
        self.root = root
        self.repos: dict[str, GitRepo] = {}
        for name, files in repos.items():
            repo = GitRepo(root / name)
            for rel, text in files.items():
                repo.write(rel, text)
            repo.commit("initial", when=1_700_000_000)
            self.repos[name] = repo
        self.tenants_path = root / "tenants.yaml"
        (root / "dagster").mkdir()
        self.instance = dg.DagsterInstance.local_temp(str(root / "dagster"))
        self.kb = KbHandles()

    def close(self) -> None:
        self.kb.close()
        self.instance.dispose()

    def declare(self, tenants: dict[str, list[dict[str, Any]]]) -> None:
        write_tenants(self.tenants_path, tenants)

    def entry(self, slug: str, **kw: Any) -> dict[str, Any]:
        entry = repo_entry(
            slug, self.repos[slug].path, **{k: v for k, v in kw.items() if k != "cadence"}
        )
        if kw.get("cadence") is not None:
            entry["cadence_minutes"] = kw["cadence"]
        return entry

    def sweep(self, **kw: Any) -> dict[tuple[str, str], str]:
        results = run_sweeps(load_settings(), load_tenants(self.tenants_path), self.instance, **kw)
        return {(r["tenantId"], r["repoSlug"]): r["outcome"] for r in results}

    def reconcile(self, tenant: str, *, apply: bool = True) -> dict[str, Any]:
        (report,) = run_reconciliation(
            load_settings(),
            load_tenants(self.tenants_path),
            self.instance,
            tenant=tenant,
            apply=apply,
        )
        return report

    def plan(self, tenant: str) -> Any:
        """The full plan, every id of every kind, from a classify-only pass (no write)."""
        return reconcile_tenant(
            load_settings(),
            load_tenants(self.tenants_path),
            tenant,
            self.store,
            self.ledger,
            write=False,
        ).plan

    @property
    def store(self) -> ChromaStore:
        return self.kb.store

    @property
    def ledger(self) -> Any:
        return self.kb.ledger

    def rows(self, tenant: str, repo: str | None = None) -> dict[str, dict[str, Any]]:
        """id -> metadata of the tenant's (repo's) rows, read with the tenant filter."""
        return {r["id"]: r["metadata"] for r in self.store.iter_rows(tenant_filter(tenant, repo))}

    def all_rows(self) -> dict[str, dict[str, Any]]:
        return {r["id"]: r["metadata"] for r in self.store.iter_rows(None)}

    def per_tenant(self) -> Counter[str]:
        return Counter(md.get("tenantId") for md in self.all_rows().values())

    def declared(self, tenant: str, repo: str) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for chunk in self.ledger.declared_chunks(tenant, repo):
            out.setdefault(chunk.source_path, set()).add(chunk.chunk_id)
        return out

    def insert_row(self, rid: str, metadata: dict[str, Any]) -> None:
        """A row written straight into Chroma (explicit embedding), as corruption would."""
        dims = len(self.store.collection.get(limit=1, include=["embeddings"])["embeddings"][0])
        vector = np.zeros((1, dims), dtype=np.float32)
        vector[0, 0] = 1.0
        self.store.add([rid], vector, ["planted row"], [metadata])


def off_declaration(rows: dict[str, dict[str, Any]], pair: tuple[str, str]) -> set[str]:
    """The probe: ids of rows whose {parserId, parserVersion} is not the declared pair."""
    return {
        rid for rid, md in rows.items() if (md.get("parserId"), md.get("parserVersion")) != pair
    }


def check(report: dict[str, Any], name: str) -> dict[str, Any]:
    return report["checks"][name]


def kind_counts(report: dict[str, Any]) -> dict[str, int]:
    return {kind: report["orphans"][kind]["count"] for kind in ORPHAN_KINDS}


@pytest.fixture
def make_world(neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    made: list[World] = []

    def make(repos: dict[str, dict[str, str]]) -> World:
        world = World(tmp_path, repos)
        monkeypatch.setenv("NEO_TENANTS_FILE", str(world.tenants_path))
        made.append(world)
        return world

    yield make
    for world in made:
        world.close()


@pytest.fixture
def server(server_module: FaultServerSupervisor) -> Iterator[FaultServerSupervisor]:
    server_module.reset()
    server_module.wait_idle(timeout_s=20)
    yield server_module
    server_module.reset()


# ---------------------------------------------------------------------------- migration
def test_exclusion_and_parser_bump_reclaim_with_no_hole_and_no_further_bump(
    make_world: Any, server: FaultServerSupervisor, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in sweep_env_vars(server).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("NEO_EMBEDDING_RECOVERY_MAX_WAIT_S", "0.3")
    # A port refused before the provider answered is waited for apart (a server starting).
    monkeypatch.setenv("NEO_EMBEDDING_UNREACHABLE_WAIT_S", "0.3")
    monkeypatch.setenv("NEO_RECONCILIATION_ENABLED", "true")
    # Reclamation path by path while the bump is partial; with the quality gate on (the
    # default) the old parser's rows serve until the new one is evaluated
    # (quality/test_parser_gate_e2e.py).
    monkeypatch.setenv("NEO_QUALITY_GATE", "false")
    # The bump's unchanged inputs must be sent (not copied) for the partial transition
    # this test walks; copying them is test_embed_reuse's subject.
    monkeypatch.setenv("NEO_EMBEDDING_REUSE_VECTORS", "false")
    world = make_world(
        {
            "widgets": {
                "widgets/core.py": "class Widget:\n    def render(self):\n        return 'w'\n",
                "shared.py": SHARED,
                "README.md": "# Widgets\n\n## Use\n\nCall render.\n",
                "slow.txt": text_file(f"a chunk whose request hangs {marker('hang')}"),
                "vendor/lib.py": "def vendored():\n    pass\n",
                "vendor/util.py": "def util():\n    return 3\n",
            },
            "gadgets": {"gadget.py": "def gadget():\n    return 'g'\n"},
            "tools": {"shared.py": SHARED, "tool.py": "def tool():\n    return 1\n"},
        }
    )

    def declare(version: str, exclude: list[str]) -> None:
        world.declare(
            {
                "acme": [
                    world.entry("widgets", version=version, exclude=exclude),
                    world.entry("gadgets"),
                ],
                "globex": [world.entry("tools")],
            }
        )

    # --- 1. Everything swept under 1.0.0, vendor/ included.
    server.configure(hang_s=0)
    declare(OLD, [])
    assert set(world.sweep().values()) == {"complete"}
    old_rows = world.rows("acme", "widgets")
    vendor_ids = {rid for rid, md in old_rows.items() if md["sourcePath"].startswith("vendor/")}
    assert vendor_ids and all(md["parserVersion"] == OLD for md in old_rows.values())
    gadgets, globex = world.rows("acme", "gadgets"), world.rows("globex")
    assert gadgets and globex
    globex_count = world.per_tenant()["globex"]

    # --- 2. Declared 1.1.0 with vendor/** excluded; the provider refuses everything.
    declare(NEW, VENDOR)
    server.refuse()
    assert world.sweep() == {
        ("acme", "widgets"): "deferred",
        ("acme", "gadgets"): "skipped",
        ("globex", "tools"): "skipped",
    }
    rows = world.rows("acme", "widgets")
    assert set(rows) == set(old_rows)  # nothing of 1.1.0 was embedded
    # Red proof: rows carrying a non-declared parser identity are in the repo.
    assert off_declaration(rows, (PARSER, NEW)) == set(old_rows)
    plan = world.plan("acme")
    # Vendor rows are actionable on the first pass, before 1.1.0 is embedded; every other
    # 1.0.0 row waits for its replacement. The tenantConfigVersion gap is 1: not stale.
    assert set(plan.ids_by_kind[KIND_UNYIELDED_PATH]) == vendor_ids
    assert set(plan.ids_by_kind[KIND_SUPERSEDED_PENDING]) == set(old_rows) - vendor_ids
    assert set(plan.delete_ids) == vendor_ids and plan.restamp_ids == ()
    # Control: a repo whose declaration did not change classifies nothing.
    classified = {rid for ids in plan.ids_by_kind.values() for rid in ids}
    assert not classified & set(gadgets)
    assert world.plan("globex").ids_by_kind == {kind: () for kind in ORPHAN_KINDS}

    report = world.reconcile("acme")
    assert report["success"] and report["reclaimBlocked"] is None
    assert report["reclaimed"] == report["reclaimedByKind"][KIND_UNYIELDED_PATH] == len(vendor_ids)
    assert check(report, "no_hole")["passed"] and check(report, "tenant_containment")["passed"]
    residue = check(report, "generation_residue")
    assert not residue["passed"] and residue["severity"] == "WARN"
    assert residue["metadata"]["residue_rows"] == len(old_rows) - len(vendor_ids)
    rows = world.rows("acme", "widgets")
    assert set(rows) == set(old_rows) - vendor_ids  # every superseded row survived

    # --- 3. Partial progress: the provider answers, but one chunk's request hangs past
    # the call ceiling, so part of 1.1.0 stays deferred.
    server.resume()
    server.configure(hang_s=4)
    assert world.sweep(tenant="acme", repo="widgets", force=True) == {
        ("acme", "widgets"): "deferred"
    }
    server.configure(hang_s=0)
    rows = world.rows("acme", "widgets")
    declared = world.declared("acme", "widgets")
    complete = {p for p, ids in declared.items() if ids <= set(rows)}
    incomplete = set(declared) - complete
    assert "slow.txt" in incomplete and complete  # partial: some paths, not all
    old_by_path: dict[str, set[str]] = {}
    for rid, md in rows.items():
        if md["parserVersion"] == OLD:
            old_by_path.setdefault(md["sourcePath"], set()).add(rid)
    # Both generations carry the same tenantConfigVersion: the classifier still fires.
    version = world.ledger.current_config_version("acme")
    world.store.update_metadata(
        list(rows), [{**md, "tenantConfigVersion": version} for md in rows.values()]
    )
    rows = world.rows("acme", "widgets")
    assert {md["parserVersion"] for md in rows.values()} == {OLD, NEW}
    assert {md["tenantConfigVersion"] for md in rows.values()} == {version}
    plan = world.plan("acme")
    superseded_complete = {rid for p in complete for rid in old_by_path.get(p, ())}
    superseded_waiting = {rid for p in incomplete for rid in old_by_path.get(p, ())}
    assert superseded_complete and superseded_waiting
    assert set(plan.ids_by_kind[KIND_SUPERSEDED_GENERATION]) == superseded_complete
    assert set(plan.ids_by_kind[KIND_SUPERSEDED_PENDING]) == superseded_waiting

    report = world.reconcile("acme")
    assert report["success"] and report["reclaimed"] == len(superseded_complete)
    assert check(report, "no_hole")["passed"]
    assert check(report, "no_hole")["metadata"]["held_paths"] == len(incomplete)
    rows = world.rows("acme", "widgets")
    # Observed in Chroma: every superseded row of a path without a complete replacement
    # survived; those of complete paths are gone.
    assert superseded_waiting <= set(rows)
    assert not superseded_complete & set(rows)
    assert off_declaration(rows, (PARSER, NEW)) == superseded_waiting  # still red

    # --- 4. The provider delivers the rest; reconciliation clears the residue, with the
    # declaration untouched since step 2 (no further parser bump).
    assert world.sweep(tenant="acme", repo="widgets", force=True) == {
        ("acme", "widgets"): "complete"
    }
    report = world.reconcile("acme")
    assert report["success"] and report["reclaimed"] == len(superseded_waiting)
    assert all(c["passed"] for c in report["checks"].values())
    rows = world.rows("acme", "widgets")
    assert off_declaration(rows, (PARSER, NEW)) == set()  # the probe passes
    assert {p for p, ids in world.declared("acme", "widgets").items() if ids <= set(rows)} == set(
        declared
    )
    assert load_tenants(world.tenants_path).tenant("acme").repo("widgets").parser.version == NEW
    # Tenant B and the control repo were never touched: same rows, same stamps.
    assert world.rows("globex") == globex and world.per_tenant()["globex"] == globex_count
    assert world.rows("acme", "gadgets") == gadgets


# ---------------------------------------------------------------------------- kinds
def test_each_kind_reported_config_stale_restamped_unstamped_skipped_disabled_deletes_nothing(
    make_world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = make_world(
        {
            "widgets": {
                "keep.py": "def keep():\n    return 1\n",
                "gone.py": "def gone():\n    return 2\n",
                "vendor/lib.py": "def vendored():\n    pass\n",
            },
            "retired": {"old.py": "def old():\n    return 0\n"},
            "tools": {"tool.py": "def tool():\n    return 1\n"},
        }
    )
    world.declare(
        {
            "acme": [world.entry("widgets"), world.entry("retired")],
            "globex": [world.entry("tools", cadence=30)],
        }
    )
    assert set(world.sweep().values()) == {"complete"}
    first = world.rows("acme")
    by_path = {md["sourcePath"]: rid for rid, md in first.items()}

    # acme: gone.py deleted, keep.py edited, vendor/** excluded, the retired repo dropped.
    # globex: only its cadence changes, twice (each sweep records a config version).
    widgets = world.repos["widgets"]
    widgets.remove("gone.py")
    widgets.write("keep.py", "def keep():\n    return 10\n")
    widgets.commit("edit", when=1_700_000_100)
    world.declare(
        {
            "acme": [world.entry("widgets", exclude=VENDOR)],
            "globex": [world.entry("tools", cadence=20)],
        }
    )
    assert world.sweep() == {("acme", "widgets"): "complete", ("globex", "tools"): "complete"}
    world.declare(
        {
            "acme": [world.entry("widgets", exclude=VENDOR)],
            "globex": [world.entry("tools", cadence=10)],
        }
    )
    assert world.sweep(tenant="globex") == {("globex", "tools"): "complete"}
    assert world.ledger.current_config_version("globex") == 3
    globex_first = world.rows("globex")
    assert {md["tenantConfigVersion"] for md in globex_first.values()} == {1}
    # An acme row lacking the stamps a rule needs (no sourcePath, no parser identity).
    world.insert_row(
        "f" * 64, {"tenantId": "acme", "repoSlug": "widgets", "kind": "text", "name": "x"}
    )
    expected = {
        KIND_MANIFEST_ORPHAN: {by_path["gone.py"]},
        KIND_UNYIELDED_PATH: {by_path["vendor/lib.py"]},
        KIND_STALE_CONTENT: {by_path["keep.py"]},
        KIND_UNDECLARED_REPO: {by_path["old.py"]},
    }
    plan = world.plan("acme")
    assert {k: set(v) for k, v in plan.ids_by_kind.items() if v} == expected
    assert plan.skipped_unstamped == 1

    # --- Disabled (the default): the run may write, yet nothing is deleted, and the plan
    # is reported per kind. The dropped repo is retired (the ledger knew it): its rows are
    # no breach, reported as retired-repo at WARN, naming their paths.
    before = world.all_rows()
    report = world.reconcile("acme")
    assert world.all_rows() == before
    assert report["enabled"] is False and report["reclaimBlocked"] == RECONCILE_DISABLED
    assert report["reclaimed"] == 0 and report["skippedUnstamped"] == 1
    assert report["skippedByStamp"] == {"sourcePath": 1}
    for kind in ORPHAN_KINDS:  # each kind under its own key, with its own ids
        assert set(report["orphans"][kind]["ids"]) == expected.get(kind, set()), kind
    containment = check(report, "tenant_containment")
    assert not containment["passed"] and containment["severity"] == "WARN"
    assert report["success"]
    assert containment["metadata"]["violating_rows"] == 0
    assert containment["metadata"]["retired"]["retired-repo"] == 1
    assert containment["metadata"]["retired_paths"] == {"retired-repo": ["retired:old.py"]}
    assert check(report, "no_hole")["passed"]

    # --- The CLI: --apply refuses while disabled; --json prints one document.
    env = {**os.environ, "NEO_TENANTS_FILE": str(world.tenants_path)}
    refused = subprocess.run(
        [sys.executable, "-m", "neo_assets.cli", "reconcile", "--apply", "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert "NEO_RECONCILIATION_ENABLED" in json.loads(refused.stdout)["error"]
    shown = subprocess.run(
        [sys.executable, "-m", "neo_assets.cli", "reconcile", "--tenant", "acme", "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr[-2000:]  # retired rows only WARN
    (doc,) = json.loads(shown.stdout)["tenants"]
    assert {"tenantId", "enabled", "orphans", "reclaimed", "skippedUnstamped"} <= set(doc)
    assert doc["tenantId"] == "acme" and doc["enabled"] is False
    assert doc["reclaimBlocked"] == RECONCILE_CLASSIFY_ONLY
    assert set(doc["orphans"]) == set(ORPHAN_KINDS)
    assert {k: set(v["ids"]) for k, v in doc["orphans"].items() if v["count"]} == expected
    assert all(set(v) >= {"count", "ids"} for v in doc["orphans"].values())
    assert world.all_rows() == before

    # --- Enabled: acme's orphans are reclaimed; tenant B's rows are untouched.
    monkeypatch.setenv("NEO_RECONCILIATION_ENABLED", "true")
    counts = world.per_tenant()
    report = world.reconcile("acme")
    assert report["success"] and report["reclaimed"] == 4
    assert {k: n for k, n in report["reclaimedByKind"].items() if n} == {
        kind: 1 for kind in expected
    }
    assert all(c["passed"] for c in report["checks"].values()), report["checks"]
    after = world.per_tenant()
    assert after["acme"] == counts["acme"] - 4 and after["globex"] == counts["globex"]
    assert world.rows("globex") == globex_first
    gone = set().union(*expected.values())
    assert not gone & set(world.all_rows())
    assert "f" * 64 in world.all_rows()  # the unstamped row was skipped, not classified

    # --- globex's declared rows trail its config by 2 versions: re-stamped, not deleted.
    plan = world.plan("globex")
    assert set(plan.ids_by_kind[KIND_CONFIG_STALE]) == set(globex_first) and not plan.delete_ids
    report = world.reconcile("globex")
    assert report["success"] and report["restamped"] == len(globex_first)
    assert report["reclaimed"] == 0
    restamped = world.rows("globex")
    assert set(restamped) == set(globex_first)
    for rid, md in restamped.items():
        assert md == {**globex_first[rid], "tenantConfigVersion": 3}
    assert world.plan("globex").restamp_ids == ()

    # --- The plan's rows are counted per tenantId from a re-read, not from the plan: a
    # plan holding a globex row (as a race would make it) counts it as foreign.
    acme_id, globex_id = next(iter(world.rows("acme"))), next(iter(restamped))
    assert plan_containment(world.store, "acme", [acme_id, globex_id]) == (
        {"acme": 1, "globex": 1},
        1,
    )

    # --- Check fixtures: a deleted replacement and two rows containment forbids.
    keep_now = next(
        rid for rid, md in world.rows("acme").items() if md.get("sourcePath") == "keep.py"
    )
    world.store.delete_ids([keep_now])
    template = {**restamped[globex_id]}
    world.insert_row("a" * 64, {**template, "tenantId": "intruder"})  # no such tenant
    world.insert_row("b" * 64, {**template, "tenantId": "acme"})  # acme does not own tools
    report = world.reconcile("acme", apply=False)
    assert not report["success"]
    hole = check(report, "no_hole")
    assert not hole["passed"] and hole["metadata"]["offending_paths"]["ids"] == ["widgets:keep.py"]
    containment = check(report, "tenant_containment")
    assert not containment["passed"]
    assert containment["metadata"]["offending_ids"]["ids"] == ["a" * 64, "b" * 64]
    assert containment["metadata"]["violations"] == {
        "unstamped-tenant": 0,
        "undeclared-tenant": 1,
        "unowned-repo": 1,
    }
    assert containment["metadata"]["rows_by_tenant"]["intruder"] == 1
    # The query probe stays clean: a tenant-scoped query returns only acme's rows.
    assert set(containment["metadata"]["query_rows_by_tenant"]) == {"acme"}

    # --- The sensor asks for one reconciliation after a tenant's sweeps; the schedule
    # asks for every declared tenant. Neither passes any config.
    sweeps = world.instance.get_runs(
        filters=dg.RunsFilter(job_name="sweep", statuses=[dg.DagsterRunStatus.SUCCESS])
    )
    latest_globex = next(r for r in sweeps if r.tags.get("dagster/partition") == "globex/tools")

    def evaluate(run: Any) -> Any:
        (event,) = world.instance.all_logs(run.run_id, of_type=dg.DagsterEventType.RUN_SUCCESS)
        with dg.build_run_status_sensor_context(
            sensor_name=reconciliation_sensor.name,
            dagster_event=event.dagster_event,
            dagster_instance=world.instance,
            dagster_run=run,
            resources=default_resources(),
        ) as context:
            result = reconciliation_sensor(context)
        assert isinstance(result, dg.SensorResult)
        # The CLI's sweeps registered every declared partition: nothing to sync.
        assert result.dynamic_partitions_requests == []
        (request,) = result.run_requests
        return request

    request = evaluate(latest_globex)
    assert isinstance(request, dg.RunRequest)
    assert request.partition_key == "globex" and latest_globex.run_id in request.run_key
    assert not request.run_config
    # Two sweeps of one batch ask with one key: the tenant's latest finished sweep.
    acme_sweeps = [r for r in sweeps if r.tags.get("dagster/partition", "").startswith("acme/")]
    keys = {evaluate(run).run_key for run in acme_sweeps}
    assert keys == {f"reconcile:acme:after:{acme_sweeps[0].run_id}"}
    tick = datetime.datetime(2026, 1, 2, 3, 0, tzinfo=datetime.UTC)
    with dg.build_schedule_context(
        instance=world.instance, resources=default_resources(), scheduled_execution_time=tick
    ) as schedule_context:
        nightly = nightly_reconciliation_schedule(schedule_context)
    assert sorted(r.partition_key for r in nightly) == ["acme", "globex"]
    assert all(not r.run_config and "2026-01-02T03:00Z" in r.run_key for r in nightly)
    assert {"acme", "globex"} <= set(world.instance.get_dynamic_partitions("tenants"))
