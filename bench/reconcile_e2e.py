"""Benchmark: reconciliation end to end against a real Chroma and a real ledger.

Run from the repo root: ``python -m bench.reconcile_e2e [--rows 20000]``. In a temporary
NEO_HOME it writes two tenants' rows (half each, 32-dim vectors) into the persistent
Chroma collection, records each repo's envelope and declared generation in the SQLite
ledger as a sweep would, then times, in this one run:

- ``classify``: ``reconcile_tenant(write=False)`` for the migrating tenant (read every
  row through the tenantId filter, build the declaration from the ledger, classify, check
  the plan for holes, re-read the plan's rows by id), against a **baseline** of only
  reading the same rows (``ChromaStore.tenant_rows``);
- ``reclaim``: the same with deletion enabled (re-stamp, then re-verified id batches of
  ``reconciliation_delete_batch``), its delete stage against a raw ``delete_ids`` of as
  many rows of a scratch collection;
- ``checks``: each check's evaluation (no_hole, tenant_containment over the whole
  collection, generation_residue);
- ``dagster``: one ``reconcile`` run (asset + three checks) through ``execute_in_process``
  on a temporary instance, for the steady tenant, against the same classification and
  checks called directly.

The migrating tenant: every repo was swept under 1.0.0 with vendor/ included and is now
declared 1.1.0 with vendor/** excluded; 60 % of yielded paths carry their complete 1.1.0
set, the rest none yet. The steady tenant: every row declared, a tenth config-stale.
The last stdout line is one JSON object with every figure.
"""

import argparse
import gc
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

PARSER = "neo-code"
OLD, NEW = "1.0.0", "1.1.0"
CHUNKS_PER_PATH = 4
REPOS = 4
DIMS = 32
SWEPT_AT = 1_700_000_000.0


def _ids(rng: random.Random, n: int) -> list[str]:
    return [f"{rng.getrandbits(256):064x}" for _ in range(n)]


def _stamps(tenant: str, slug: str, path: str, version: str, cfg: int, at: float) -> dict:
    from neo_assets.core.ids.stamps import row_stamps

    return row_stamps(
        tenant_id=tenant,
        repo_slug=slug,
        source_path=path,
        kind="function",
        name="f",
        parser_id=PARSER,
        parser_version=version,
        tenant_config_version=cfg,
        ingested_at=at,
        revision="r1",
        embedding_generation="g",
    )


def build(root: Path, rows: int) -> dict[str, Any]:
    """Repos (plain dirs), tenants.yaml, ledger records and Chroma rows. Returns counts."""
    import yaml

    from neo_assets.config.settings import load_settings
    from neo_assets.services import handles
    from neo_assets.tenants.validation import load_tenants

    rng = random.Random(11)
    doc: dict[str, Any] = {"tenants": []}
    for tenant, version, exclude in (("migrating", NEW, ["vendor/**"]), ("steady", NEW, [])):
        repos = []
        for r in range(REPOS):
            path = root / "repos" / tenant / f"repo-{r}"
            path.mkdir(parents=True)
            repos.append(
                {
                    "slug": f"repo-{r}",
                    "path": str(path),
                    "parser": {"id": PARSER, "version": version, "exclude": exclude},
                }
            )
        doc["tenants"].append({"id": tenant, "repos": repos})
    tenants_path = root / "tenants.yaml"
    tenants_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    os.environ["NEO_TENANTS_FILE"] = str(tenants_path)
    settings = load_settings()
    tenants = load_tenants(tenants_path)
    with handles.open_store(settings) as store, handles.open_ledger(settings) as ledger:
        return write_rows(tenants, store, ledger, rng, rows)


def write_rows(tenants: Any, store: Any, ledger: Any, rng: random.Random, rows: int) -> dict:
    from neo_assets.sources.rules.chunks import DeclaredChunk

    per_repo = rows // (2 * REPOS)
    written = 0
    kinds = {"old": 0, "new": 0, "vendor": 0, "stale": 0}
    for tenant in tenants.tenants:
        migrating = tenant.id == "migrating"
        version = ledger.config_version(tenant.id, tenant.declaration_digest(), SWEPT_AT)
        if not migrating:  # steady: at config version 3, a tenth of its rows still at 1
            for bump in ("x", "y"):
                version = ledger.config_version(tenant.id, bump * 64, SWEPT_AT)
        for repo in tenant.repos:
            ids: list[str] = []
            metas: list[dict] = []
            entries: list[dict] = []
            chunks: list[Any] = []
            i = 0
            while len(ids) < per_repo:
                path = f"vendor/lib{i}.py" if migrating and i % 10 == 0 else f"src/m{i}.py"
                i += 1
                vendored = path.startswith("vendor/")
                entries.append({"path": path, "yielded": not vendored})
                new_ids = _ids(rng, CHUNKS_PER_PATH)
                if not vendored:
                    chunks += [DeclaredChunk(cid, path, "function", "f") for cid in new_ids]
                if migrating:
                    for cid in _ids(rng, CHUNKS_PER_PATH):
                        ids.append(cid)
                        metas.append(_stamps(tenant.id, repo.slug, path, OLD, 1, SWEPT_AT - 9))
                        kinds["vendor" if vendored else "old"] += 1
                    if not vendored and rng.random() < 0.6:
                        for cid in new_ids:
                            ids.append(cid)
                            metas.append(_stamps(tenant.id, repo.slug, path, NEW, 1, SWEPT_AT - 5))
                            kinds["new"] += 1
                else:
                    for cid in new_ids:
                        cfg = 1 if rng.random() < 0.1 else version
                        kinds["stale"] += cfg == 1
                        ids.append(cid)
                        metas.append(_stamps(tenant.id, repo.slug, path, NEW, cfg, SWEPT_AT - 5))
            vectors = np.random.default_rng(len(ids)).standard_normal((len(ids), DIMS))
            store.add(ids, vectors.astype(np.float32), ["chunk"] * len(ids), metas)
            written += len(ids)
            ledger.record_envelope(
                tenant.id, repo.slug, revision="r1", kind="dir", entries=entries, now=SWEPT_AT
            )
            ledger.record_generation(
                tenant.id,
                repo.slug,
                revision="r1",
                parser_id=PARSER,
                parser_version=repo.parser.version,
                declaration_digest=repo.declaration_digest(),
                chunks=chunks,
                now=SWEPT_AT,
            )
    return {"rows": written, **kinds}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=20_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="neo-bench-reconcile-") as tmp:
        root = Path(tmp)
        os.environ["NEO_HOME"] = str(root / "home")
        os.environ["DAGSTER_HOME"] = str(root / "home" / "dagster")
        os.environ["NEO_RECONCILIATION_ENABLED"] = "false"
        for name in ("ANONYMIZED_TELEMETRY", "DAGSTER_DISABLE_TELEMETRY"):
            os.environ.setdefault(name, "False" if name.startswith("ANON") else "1")
        result = run(root, args.rows)
    print(json.dumps(result))


def run(root: Path, rows: int) -> dict[str, Any]:
    from neo_assets.config.settings import load_settings
    from neo_assets.services import handles
    from neo_assets.tenants.validation import load_tenants

    started = time.perf_counter()
    build_s, counts = timed(lambda: build(root, rows))
    settings = load_settings()
    tenants = load_tenants(os.environ["NEO_TENANTS_FILE"])
    # Held through the Dagster run at the end too: its run then opens a client of a Chroma
    # this process already has open, as when one cache held them all.
    with handles.open_store(settings) as store, handles.open_ledger(settings) as ledger:
        out = measure(root, settings, tenants, store, ledger, counts, build_s)
    return {**out, "wall_s": round(time.perf_counter() - started, 1)}


def measure(
    root: Path,
    settings: Any,
    tenants: Any,
    store: Any,
    ledger: Any,
    counts: dict[str, Any],
    build_s: float,
) -> dict[str, Any]:
    from neo_assets.config.settings import load_settings
    from neo_assets.reconcile import checks
    from neo_assets.reconcile.tenant import reconcile_tenant
    from neo_assets.store.chroma_store import open_store

    migrating_rows = sum(1 for _ in store.tenant_rows("migrating"))

    read_s, _ = timed(lambda: list(store.tenant_rows("migrating")))
    classify_s, outcome = timed(
        lambda: reconcile_tenant(settings, tenants, "migrating", store, ledger, write=False)
    )
    plan = outcome.plan

    os.environ["NEO_RECONCILIATION_ENABLED"] = "true"
    settings = load_settings()
    reclaim_s, done = timed(
        lambda: reconcile_tenant(settings, tenants, "migrating", store, ledger, write=True)
    )
    report = done.report
    assert report["reclaimed"] == len(plan.delete_ids), report["reclaimBlocked"]

    # Baseline for the delete stage: a raw delete_ids of as many rows, in one call.
    scratch = open_store(
        persist_dir=settings.store.chroma_dir, url=None, collection_name="bench-scratch"
    )
    n_del = max(1, report["reclaimed"])
    scratch_ids = [f"{i:064x}" for i in range(n_del)]
    scratch.add(
        scratch_ids,
        np.ones((n_del, DIMS), dtype=np.float32),
        ["x"] * n_del,
        [{"tenantId": "x"}] * n_del,
    )
    raw_delete_s, _ = timed(lambda: scratch.delete_ids(scratch_ids))

    check_s: dict[str, float] = {}
    verdicts: dict[str, bool] = {}
    for name, fn in (
        (
            "no_hole",
            lambda: checks.no_hole(
                settings, tenants, "migrating", store, ledger, done.reclaimed_paths
            ),
        ),
        (
            "tenant_containment",
            lambda: checks.tenant_containment(tenants, "migrating", store, {}, ledger),
        ),
        (
            "generation_residue",
            lambda: checks.generation_residue(settings, tenants, "migrating", store, ledger),
        ),
    ):
        check_s[name], verdict = timed(fn)
        verdicts[name] = verdict.passed

    steady_s, steady = timed(
        lambda: reconcile_tenant(settings, tenants, "steady", store, ledger, write=False)
    )
    steady_checks_s, _ = timed(
        lambda: (
            checks.no_hole(settings, tenants, "steady", store, ledger, {}),
            checks.tenant_containment(tenants, "steady", store, {}, ledger),
            checks.generation_residue(settings, tenants, "steady", store, ledger),
        )
    )
    dagster_s, dagster_ok = timed(lambda: _dagster_run(root, settings, tenants))
    return {
        "bench": "reconcile_e2e",
        "rows": counts["rows"],
        "build": counts,
        "build_s": round(build_s, 2),
        "migrating_rows": migrating_rows,
        "kinds": {k: v for k, v in plan.counts.items() if v},
        "actionable": len(plan.delete_ids),
        "pending": len(plan.pending_ids),
        "classify_s": round(classify_s, 3),
        "read_baseline_s": round(read_s, 3),
        "classify_rows_per_s": round(migrating_rows / classify_s),
        "classify_vs_read_baseline": round(classify_s / read_s, 2),
        "reclaim_s": round(reclaim_s, 3),
        "reclaimed": report["reclaimed"],
        "delete_batches": report["deleteBatches"],
        "unconfirmed": report["unconfirmed"],
        "reclaimed_rows_per_s": round(report["reclaimed"] / reclaim_s),
        "raw_delete_s": round(raw_delete_s, 3),
        "reclaim_vs_raw_delete": round(reclaim_s / raw_delete_s, 2),
        # The delete stage alone (re-verified batches), net of the classification pass.
        "reclaim_stage_vs_raw_delete": round(max(reclaim_s - classify_s, 0.0) / raw_delete_s, 2),
        "checks_s": {k: round(v, 3) for k, v in check_s.items()},
        "checks_passed": verdicts,
        "checks_vs_read_baseline": {k: round(v / read_s, 2) for k, v in check_s.items()},
        "steady_classify_s": round(steady_s, 3),
        "steady_restamp_planned": len(steady.plan.restamp_ids),
        "dagster_run_s": round(dagster_s, 2),
        "dagster_run_ok": dagster_ok,
        "steady_checks_s": round(steady_checks_s, 3),
        # The same work (classify + three checks) in a Dagster run vs called directly.
        "dagster_vs_direct": round(dagster_s / (steady_s + steady_checks_s), 2),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
    }


def _dagster_run(root: Path, settings: Any, tenants: Any) -> bool:
    import dagster as dg

    from neo_assets.cli.launch import run_reconciliation

    (root / "dagster").mkdir(exist_ok=True)
    (root / "dagster" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with dg.DagsterInstance.local_temp(str(root / "dagster")) as instance:
        (report,) = run_reconciliation(settings, tenants, instance, tenant="steady", apply=False)
    return bool(report["success"])


if __name__ == "__main__":
    main()
