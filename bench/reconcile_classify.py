"""Benchmark: the pure orphan classifier over 200k synthetic rows.

Run from the repo root: ``python -m bench.reconcile_classify``. Builds 200,000 rows over 4
tenants x 5 repos in two scenarios and times ``classify_orphans`` per tenant (the shell calls
it once per tenant), best and median of a few repeats:

- ``migration``: every repo was swept under 1.0.0 with vendor/ included and is now declared
  1.1.0 with vendor/** excluded; 60 % of the yielded paths carry their complete 1.1.0 set,
  one in ten of the others a partial one. Nearly every row lands in a kind (the heavy case:
  output lists and their sorting are big).
- ``steady``: every repo is at its declared generation; about 1 % of rows are manifest
  orphans, 1 % belong to a dropped repo, 2 % are config-stale and 2 % of paths carry a
  changed file whose replacement is landing. Most rows are kept (the common case).

Both carry a trickle of foreign (0.1 %) and unstamped (0.1 %) rows, as a leaky read would.
The baseline, measured in the same run over the same rows, is the floor of any per-row rule
in Python: a loop that only reads each row's tenantId and compares it. Each run is timed on
two clocks: wall (perf_counter) and this process's CPU time (process_time), because the
machine may be shared and wall time then counts time spent descheduled. The share of the
classifier's CPU time spent sorting its output id lists is measured separately (sorting
shuffled copies of the same ids). Prints rows/s, the ratio to the 1M rows/s target and the
ratio to the baseline; the last stdout line is one JSON object with every figure. Row ids
are random 64-hex strings (seeded).
"""

import gc
import json
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from neo_assets.reconcile.rules.declaration import RepoDeclaration, TenantDeclaration
from neo_assets.reconcile.rules.no_hole import plan_keeps_complete_sets
from neo_assets.reconcile.rules.orphans import classify_orphans

TOTAL_ROWS = 200_000
TENANTS = 4
REPOS = 5
CHUNKS_PER_PATH = 4
TARGET_ROWS_PER_S = 1_000_000
REPEATS = 7
PARSER = "neo-code"
OLD, NEW = "1.0.0", "1.1.0"
ENVELOPE_AT = 1_700_000_000.0
CONFIG_VERSION = 4

Row = dict[str, Any]
Input = tuple[TenantDeclaration, list[Row], frozenset[str], frozenset[str]]


def _ids(rng: random.Random, n: int) -> list[str]:
    return [f"{rng.getrandbits(256):064x}" for _ in range(n)]


def _row(rid: str, tenant: str, slug: str, path: str, version: str, cfg: int, at: float) -> Row:
    return {
        "id": rid,
        "metadata": {
            "tenantId": tenant,
            "repoSlug": slug,
            "sourcePath": path,
            "kind": "function",
            "name": "f",
            "parserId": PARSER,
            "parserVersion": version,
            "tenantConfigVersion": cfg,
            "ingestedAt": at,
            "revision": "r",
            "embeddingGeneration": "g",
        },
    }


def build(scenario: str, seed: int = 7) -> list[Input]:
    """One (declaration, rows, present, fenced) per tenant, TOTAL_ROWS rows in all."""
    rng = random.Random(seed)
    per_repo = TOTAL_ROWS // (TENANTS * REPOS)
    inputs: list[Input] = []
    for t in range(TENANTS):
        tenant_id = f"tenant-{t}"
        repos: dict[str, RepoDeclaration] = {}
        rows: list[Row] = []
        fenced: set[str] = set()
        for r in range(REPOS):
            slug = f"repo-{r}"
            repo_rows: list[Row] = []
            paths: list[str] = []
            yielded: list[str] = []
            declared: dict[str, frozenset[str]] = {}
            i = 0
            while len(repo_rows) < per_repo:
                path = f"vendor/lib{i}.py" if i % 10 == 0 else f"src/m{i}.py"
                i += 1
                paths.append(path)
                vendored = path.startswith("vendor/")
                new_ids = _ids(rng, CHUNKS_PER_PATH)
                if not vendored:
                    yielded.append(path)
                    declared[path] = frozenset(new_ids)
                if scenario == "migration":
                    for rid in _ids(rng, CHUNKS_PER_PATH):
                        repo_rows.append(_row(rid, tenant_id, slug, path, OLD, 3, ENVELOPE_AT - 9))
                    if vendored:
                        continue
                    roll = rng.random()
                    written = new_ids if roll < 0.6 else new_ids[:2] if roll < 0.64 else []
                    for rid in written:
                        repo_rows.append(_row(rid, tenant_id, slug, path, NEW, 3, ENVELOPE_AT + 9))
                elif not vendored:
                    cfg = CONFIG_VERSION if rng.random() > 0.02 else 1
                    for rid in new_ids:
                        repo_rows.append(_row(rid, tenant_id, slug, path, NEW, cfg, ENVELOPE_AT))
                    if rng.random() < 0.02:  # changed file, replacement landing
                        repo_rows.pop()
                        for rid in _ids(rng, 2):
                            repo_rows.append(_row(rid, tenant_id, slug, path, NEW, 3, 1.0))
            repo_rows = repo_rows[:per_repo]
            if scenario == "steady":
                # Fresh ids: a row reusing a declared id would (rightly) be kept as inconsistent.
                for k in range(0, per_repo, 100):  # 1 %: deleted files, manifest orphans
                    gone = f"src/gone{k}.py"
                    repo_rows[k] = _row(_ids(rng, 1)[0], tenant_id, slug, gone, NEW, 3, 1.0)
                for k in range(50, per_repo, 100):  # 1 %: rows of a repo since dropped
                    repo_rows[k] = _row(_ids(rng, 1)[0], tenant_id, "dropped", "a.py", OLD, 3, 1.0)
            rows.extend(repo_rows)
            envelope = frozenset(paths)
            repos[slug] = RepoDeclaration(
                repo_slug=slug,
                parser_id=PARSER,
                parser_version=NEW,
                envelope_paths=envelope,
                yielded_paths=frozenset(yielded),
                envelope_recorded_at=ENVELOPE_AT,
                declared_ids_by_path=declared,
                has_complete_envelope=True,
            )
        for k in range(0, len(rows), 1000):  # a leaky read: foreign and unstamped rows
            rows[k]["metadata"]["tenantId"] = "someone-else"
            del rows[k + 500]["metadata"]["sourcePath"]
        present = frozenset(row["id"] for row in rows)
        inputs.append(
            (
                TenantDeclaration(tenant_id=tenant_id, config_version=CONFIG_VERSION, repos=repos),
                rows,
                present,
                frozenset(fenced),
            )
        )
    return inputs


def baseline(inputs: list[Input]) -> int:
    """The floor: touch every row's tenantId once."""
    mine = 0
    for tenant, rows, _present, _fenced in inputs:
        tenant_id = tenant.tenant_id
        for row in rows:
            if row["metadata"].get("tenantId") == tenant_id:
                mine += 1
    return mine


def classify_all(inputs: list[Input]) -> int:
    actionable = 0
    for tenant, rows, present, fenced in inputs:
        actionable += len(classify_orphans(tenant, rows, present, fenced).delete_ids)
    return actionable


def timed(fn: Callable[[list[Input]], int], inputs: list[Input]) -> dict[str, float]:
    walls, cpus = [], []
    for _ in range(REPEATS):
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        fn(inputs)
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
    return {
        "wall_best": min(walls),
        "wall_median": statistics.median(walls),
        "cpu_best": min(cpus),
        "cpu_median": statistics.median(cpus),
    }


def sorting_cpu(plans: list[Any]) -> float:
    """CPU seconds to sort shuffled copies of every plan's per-kind id lists."""
    rng = random.Random(1)
    lists = []
    for plan in plans:
        for ids in plan.ids_by_kind.values():
            copy = list(ids)
            rng.shuffle(copy)
            lists.append(copy)
    best = math.inf
    for _ in range(REPEATS):
        work = [list(ids) for ids in lists]
        gc.collect()
        started = time.process_time()
        for ids in work:
            ids.sort()
        best = min(best, time.process_time() - started)
    return best


def run_scenario(scenario: str) -> dict[str, Any]:
    inputs = build(scenario)
    n = sum(len(rows) for _t, rows, _p, _f in inputs)
    base = timed(baseline, inputs)
    clf = timed(classify_all, inputs)
    plans = [classify_orphans(t, rows, p, f) for t, rows, p, f in inputs]
    kinds: dict[str, int] = {}
    for plan in plans:
        for kind, count in plan.counts.items():
            kinds[kind] = kinds.get(kind, 0) + count
    sort_cpu = sorting_cpu(plans)
    check_started = time.process_time()
    holes = sum(
        len(plan_keeps_complete_sets(plan, t, rows, p, f))
        for plan, (t, rows, p, f) in zip(plans, inputs, strict=True)
    )
    check_cpu = time.process_time() - check_started
    return {
        "scenario": scenario,
        "rows": n,
        "classified_rows": sum(kinds.values()),
        "wall_best_s": round(clf["wall_best"], 4),
        "wall_median_s": round(clf["wall_median"], 4),
        "cpu_best_s": round(clf["cpu_best"], 4),
        "cpu_median_s": round(clf["cpu_median"], 4),
        "rows_per_s_wall_best": round(n / clf["wall_best"]),
        "rows_per_s_cpu_best": round(n / clf["cpu_best"]),
        "rows_per_s_cpu_median": round(n / clf["cpu_median"]),
        "ratio_to_target_wall_best": round(n / clf["wall_best"] / TARGET_ROWS_PER_S, 3),
        "ratio_to_target_cpu_best": round(n / clf["cpu_best"] / TARGET_ROWS_PER_S, 3),
        "ratio_to_target_cpu_median": round(n / clf["cpu_median"] / TARGET_ROWS_PER_S, 3),
        "baseline_cpu_best_s": round(base["cpu_best"], 4),
        "cost_vs_baseline_cpu": round(clf["cpu_best"] / base["cpu_best"], 2),
        "output_sort_cpu_s": round(sort_cpu, 4),
        "output_sort_share": round(sort_cpu / clf["cpu_best"], 3),
        "actionable": sum(len(p.delete_ids) for p in plans),
        "kinds": kinds,
        "foreign": sum(p.foreign for p in plans),
        "skipped_unstamped": sum(p.skipped_unstamped for p in plans),
        "no_hole_check_cpu_s": round(check_cpu, 4),
        "no_hole_offenders": holes,
    }


def main() -> None:
    started = time.perf_counter()
    results = [run_scenario("migration"), run_scenario("steady")]
    for r in results:
        print(
            f"{r['scenario']:>9}: {r['rows']} rows, {r['classified_rows']} into a kind; "
            f"CPU best {r['cpu_best_s']:.3f}s = {r['rows_per_s_cpu_best']:,} rows/s = "
            f"{r['ratio_to_target_cpu_best']:.2f}x the 1M target (median "
            f"{r['ratio_to_target_cpu_median']:.2f}x; wall best "
            f"{r['ratio_to_target_wall_best']:.2f}x); {r['cost_vs_baseline_cpu']:.1f}x the "
            f"tenantId-only loop; output sorting {r['output_sort_share']:.0%} of it; "
            f"no-hole offenders {r['no_hole_offenders']}",
            file=sys.stderr,
        )
    summary = {
        "bench": "reconcile_classify",
        "target_rows_per_s": TARGET_ROWS_PER_S,
        "python": sys.version.split()[0],
        "repeats": REPEATS,
        "scenarios": results,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "cpu_count": os.cpu_count(),
        "min_ratio_to_target_cpu_best": min(r["ratio_to_target_cpu_best"] for r in results),
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
