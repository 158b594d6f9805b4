"""Benchmark: the bounded link passes against the all-pairs references they replace.

Run from the repo root: ``python -m bench.links``. For n = 2,000, 4,000 and 8,000 it
measures each live pass and each reference: wall time in an untraced run (best of a few
for the fast live passes) and peak bytes under tracemalloc in a separate run. Each
measurement runs in its own forked child, which also reports the peak resident-set growth
of its untraced run (Linux VmHWM, reset first): cheap, and available where tracemalloc's
per-allocation overhead makes a traced run of a reference too slow to afford.

The data is the worst case for both passes: one chunk kind with every timestamp inside
one hour (every pair is inside the 24 h window), and clustered 384-d embeddings, ~50 per
cluster, so many pairs pass the 0.7 threshold.

BLAS is pinned to one thread unless OPENBLAS_NUM_THREADS (or OMP_/MKL_) is already set:
the live pass is one matrix product per block and would gain from more cores while the
reference's per-unit products would not, so one thread is the conservative comparison
and is not at the mercy of other load on a 2-core machine. Timed and traced runs have the
garbage collector disabled, as timeit does.

A run whose predicted time exceeds its budget (from the measured growth, or n^2 from the
previous size) is skipped and reported as null with the reason; ``--full`` lifts the
budgets. Each timing is reported as wall seconds and as CPU seconds of the child (steadier
when other work shares the machine). Prints growth per
doubling and the speed-up over the reference at n = 4,000; the last stdout line is one
JSON object with every figure.

``incremental``: a one-file change at n = 8,000 (the file's four chunks replaced by four new
ones, its two other chunks re-timed), linked by the incremental rules
(``neo_assets.links.incremental_run.run_incremental``: temporal_changes, semantic_update,
list patches and the diff of what to write) against the full in-memory passes over the same rows
(``compute_lists``: the lists the full path keeps); both without I/O. Reports the ratio
incremental / full and how far the results agree: temporal lists are equal exactly;
semantic lists can differ only where BLAS rounds a dot product differently in another
blocked product (ulp-level weights, and neighbours tied to the ulp trading places).
"""

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import gc  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import multiprocessing  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from neo_assets.links.incremental_run import run_incremental  # noqa: E402
from neo_assets.links.link_repo import compute_lists  # noqa: E402
from neo_assets.links.params import LinkParams  # noqa: E402
from neo_assets.links.rows import RepoRows  # noqa: E402
from neo_assets.links.rules.lists import LinkLists  # noqa: E402
from neo_assets.links.rules.passes import semantic_links, temporal_links  # noqa: E402
from neo_assets.links.rules.records import LINK_SEMANTIC  # noqa: E402
from neo_assets.links.snapshot import Snapshot  # noqa: E402

SIZES = (2000, 4000, 8000)
INCREMENTAL_N = 8000
INCREMENTAL_REPEATS = 5
SPEEDUP_AT = 4000
DIMS = 384
LIVE_REPEATS = 7
UNTRACED_BUDGET_S = 60.0
TRACED_BUDGET_S = 70.0
TRACE_CALIBRATION_N = 500

# --- the all-pairs references: verbatim copies of neo_assets_tests/links/rules/test_passes.py ----
# Do not optimise or refactor them; they are what the live passes are measured against.


def reference_temporal_links(items, window_seconds=86400, per_chunk=20):
    units = []
    seen = set()
    for chunk_id, kind, changed_at in items:
        if chunk_id in seen:
            continue
        seen.add(chunk_id)
        units.append((chunk_id, kind, changed_at))
    links = {}
    for chunk_id, _kind, _changed_at in units:
        links[chunk_id] = []
    candidates = {}
    for chunk_id, _kind, _changed_at in units:
        candidates[chunk_id] = []
    for chunk_id, kind, changed_at in units:
        if not math.isfinite(changed_at):
            continue
        for other_id, other_kind, other_changed_at in units:
            if other_id == chunk_id:
                continue
            if other_kind != kind:
                continue
            if not math.isfinite(other_changed_at):
                continue
            gap = abs(float(changed_at) - float(other_changed_at))
            if gap <= window_seconds:
                weight = max(0.3, 1 - gap / window_seconds)
                candidates[chunk_id].append((other_id, weight, gap))
    for chunk_id in candidates:
        ranked = sorted(candidates[chunk_id], key=lambda c: (-c[1], c[2], c[0]))
        links[chunk_id] = [(other_id, weight) for other_id, weight, gap in ranked[:per_chunk]]
    return links


def reference_semantic_links(ids, vectors, threshold=0.7, top_k=20):
    vectors = np.asarray(vectors, dtype=np.float32)
    first_row = {}
    for row, chunk_id in enumerate(ids):
        if chunk_id not in first_row:
            first_row[chunk_id] = row
    links = {}
    for chunk_id in first_row:
        links[chunk_id] = []
    unit_ids = list(first_row)
    unit_rows = [first_row[chunk_id] for chunk_id in unit_ids]
    valid = []
    for index, row in enumerate(unit_rows):
        vector = vectors[row]
        if np.all(np.isfinite(vector)) and np.any(vector != 0):
            valid.append(index)
    normalized = np.zeros((len(unit_ids), vectors.shape[1]), dtype=np.float32)
    for index in valid:
        vector = vectors[unit_rows[index]]
        normalized[index] = vector / np.linalg.norm(vector)
    for i in valid:
        other_indices = [j for j in valid if unit_ids[j] != unit_ids[i]]
        if not other_indices:
            continue
        sims = normalized[other_indices] @ normalized[i]
        found = []
        for j, sim in zip(other_indices, sims, strict=True):
            if sim > threshold:
                found.append((unit_ids[j], float(sim)))
        found.sort(key=lambda c: (-c[1], c[0]))
        links[unit_ids[i]] = found[:top_k]
    return links


def copy_per_unit_semantic_links(ids, vectors, threshold=0.7, top_k=20):
    """A stricter semantic baseline: the same per-unit ``normalized[other_indices]`` copy,
    but selection in numpy, so only the copy-per-unit shape is left to beat."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1)
    valid = np.flatnonzero(np.isfinite(vectors).all(axis=1) & (norms > 0))
    normalized = np.zeros_like(vectors)
    normalized[valid] = vectors[valid] / norms[valid, None]
    links = {chunk_id: [] for chunk_id in ids}
    for position, i in enumerate(valid):
        other_indices = np.concatenate((valid[:position], valid[position + 1 :]))
        sims = normalized[other_indices] @ normalized[i]
        above = np.flatnonzero(sims > threshold)
        best = above[np.lexsort((other_indices[above], -sims[above]))][:top_k]
        links[ids[i]] = [(ids[other_indices[k]], float(sims[k])) for k in best]
    return links


# --- data ----------------------------------------------------------------------------------


def temporal_items(n: int) -> list[tuple[str, str, float]]:
    rng = np.random.default_rng(n)
    times = 1_700_000_000.0 + rng.uniform(0, 3600, size=n)
    return [(f"{i:064x}", "function", float(at)) for i, at in enumerate(times)]


def semantic_batch(n: int) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(n + 1)
    centers = rng.standard_normal((max(1, n // 50), DIMS))
    # Noise at half the centre's scale: members of one cluster sit near cosine 0.8.
    vectors = centers[rng.integers(len(centers), size=n)] + 0.5 * rng.standard_normal((n, DIMS))
    return [f"{i:064x}" for i in range(n)], vectors.astype(np.float32)


def make_run(series: str, n: int) -> Callable[[], Any]:
    if series.startswith("temporal"):
        items = temporal_items(n)
        fn = temporal_links if series == "temporal" else reference_temporal_links
        return lambda: fn(items)
    ids, vectors = semantic_batch(n)
    fn = {
        "semantic": semantic_links,
        "semantic_reference": reference_semantic_links,
        "semantic_copy_baseline": copy_per_unit_semantic_links,
    }[series]
    return lambda: fn(ids, vectors)


# --- measurement (in a forked child, one per figure) --------------------------------------


def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as status:
            found = re.search(rf"^{field}:\s+(\d+) kB", status.read(), re.MULTILINE)
    except OSError:
        return None
    return int(found.group(1)) if found else None


def _child(series: str, n: int, traced: bool, repeats: int, conn: Any) -> None:
    run = make_run(series, n)
    gc.collect()
    gc.disable()
    if traced:
        tracemalloc.start()
        started = time.perf_counter()
        run()
        seconds = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        conn.send({"seconds": seconds, "peak_mb": peak / 1e6})
        return
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")  # reset VmHWM to the current resident size
    except OSError:
        pass
    baseline = _status_kb("VmRSS")
    best = best_cpu = math.inf
    for _ in range(repeats):
        started, started_cpu = time.perf_counter(), time.process_time()
        run()
        best = min(best, time.perf_counter() - started)
        best_cpu = min(best_cpu, time.process_time() - started_cpu)
        gc.collect()
    high = _status_kb("VmHWM")
    rss = None if baseline is None or high is None else (high - baseline) / 1024
    conn.send({"seconds": best, "cpu_seconds": best_cpu, "peak_rss_mb": rss})


def measure(series: str, n: int, traced: bool, repeats: int = 1) -> dict:
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(series, n, traced, repeats, send))
    child.start()
    send.close()
    result = receive.recv()
    child.join()
    return result


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return round(a / b, 2)


def predict(measured: dict[int, float], n: int) -> float | None:
    """The time at n from the last two measured sizes' growth, else n^2 from the last."""
    known = sorted(size for size, seconds in measured.items() if seconds is not None)
    if not known:
        return None
    last = known[-1]
    if len(known) >= 2:
        before = known[-2]
        exponent = math.log(measured[last] / measured[before]) / math.log(last / before)
        exponent = max(exponent, 2.0)  # all-pairs work: never assume better than n^2
    else:
        exponent = 2.0
    return measured[last] * (n / last) ** exponent


def run_series(
    series: str, sizes: tuple[int, ...], reference: bool, budgets: tuple[float, float]
) -> dict:
    untraced_budget, traced_budget = budgets
    seconds: dict[int, float | None] = {}
    cpu: dict[int, float | None] = {}
    rss: dict[int, float | None] = {}
    peaks: dict[int, float | None] = {}
    traced_seconds: dict[int, float] = {}
    skipped: dict[str, str] = {}
    if reference:
        calibration = measure(series, TRACE_CALIBRATION_N, traced=True)
        traced_seconds[TRACE_CALIBRATION_N] = calibration["seconds"]
    for n in sizes:
        expected = predict(seconds, n) if reference else None
        if expected is not None and expected > untraced_budget:
            reason = f"predicted {expected:.0f} s untraced, over the {untraced_budget:.0f} s budget"
            seconds[n] = cpu[n] = rss[n] = peaks[n] = None
            skipped[str(n)] = reason
            log(f"{series:24s} n={n:5d}  skipped: {reason}")
            continue
        timing = measure(series, n, traced=False, repeats=1 if reference else LIVE_REPEATS)
        seconds[n] = round(timing["seconds"], 4)
        cpu[n] = round(timing["cpu_seconds"], 4)
        rss[n] = None if timing["peak_rss_mb"] is None else round(timing["peak_rss_mb"], 1)
        expected_traced = predict(traced_seconds, n) if reference else None
        if expected_traced is not None and expected_traced > traced_budget:
            reason = (
                f"tracemalloc run predicted {expected_traced:.0f} s, over the"
                f" {traced_budget:.0f} s budget (peak_rss_mb still measured; --full runs it)"
            )
            peaks[n] = None
            skipped[f"{n}_traced"] = reason
        else:
            trace = measure(series, n, traced=True)
            peaks[n] = round(trace["peak_mb"], 2)
            traced_seconds[n] = trace["seconds"]
        log(
            f"{series:24s} n={n:5d}  {seconds[n]:9.4f} s (cpu {cpu[n]:9.4f} s)  tracemalloc peak "
            f"{peaks[n] if peaks[n] is not None else 'skipped':>9} MB  rss peak {rss[n]} MB"
        )
    doublings = list(zip(sizes, sizes[1:], strict=False))
    return {
        "seconds": {str(n): s for n, s in seconds.items()},
        "cpu_seconds": {str(n): s for n, s in cpu.items()},
        "peak_mb": {str(n): p for n, p in peaks.items()},
        "peak_rss_mb": {str(n): r for n, r in rss.items()},
        "time_growth_per_doubling": {
            f"{a}->{b}": ratio(seconds.get(b), seconds.get(a)) for a, b in doublings
        },
        "cpu_growth_per_doubling": {
            f"{a}->{b}": ratio(cpu.get(b), cpu.get(a)) for a, b in doublings
        },
        "skipped": skipped,
    }


def check_agreement(n: int) -> dict[str, bool]:
    """On the bench's own data, live and reference keep the same weights (semantic to a
    float tolerance: block and per-unit products may differ in the last bit)."""
    items = temporal_items(n)
    live, ref = temporal_links(items), reference_temporal_links(items)
    temporal_ok = live.keys() == ref.keys() and all(
        sorted(w for _, w in live[c]) == sorted(w for _, w in ref[c]) for c in ref
    )
    ids, vectors = semantic_batch(n)
    live_s, ref_s = semantic_links(ids, vectors), reference_semantic_links(ids, vectors)
    # Two neighbours may trade places where their similarities differ in the last bit.
    semantic_ok = live_s.keys() == ref_s.keys() and all(
        len(live_s[c]) == len(ref_s[c])
        and np.allclose([w for _, w in live_s[c]], [w for _, w in ref_s[c]], rtol=0, atol=1e-5)
        for c in ref_s
    )
    linked = sum(1 for kept in live_s.values() if kept)
    log(f"agreement at n={n}: temporal {temporal_ok}, semantic {semantic_ok}"
        f" ({linked}/{n} chunks linked semantically)")  # fmt: skip
    return {"temporal": temporal_ok, "semantic": semantic_ok}


def _one_file_change(n: int) -> tuple[Snapshot, RepoRows, list[float], LinkParams]:
    """Rows before (with their stored lists, as a snapshot holds them) and after a commit
    that rewrites one file: chunks 10..13 replaced by four new ones, 14 and 15 re-timed."""
    ids, vectors = semantic_batch(n + 4)
    times = [at for _, _, at in temporal_items(n + 4)]
    params = LinkParams(window_seconds=86_400.0, per_chunk=20, threshold=0.7, top_k=20)
    old = list(range(n))
    new = sorted([i for i in old if not 10 <= i <= 13] + list(range(n, n + 4)), key=ids.__getitem__)
    committed = 1_700_000_000.0 + 7200.0
    new_times = [committed if i >= n or 14 <= i <= 15 else times[i] for i in new]

    def rows_of(order: list[int]) -> RepoRows:
        return RepoRows(
            ids=[ids[i] for i in order],
            kinds=["function"] * len(order),
            paths=[f"f{i}.py" for i in order],
            generations=["g"] * len(order),
            vectors=vectors[order],
        )

    before = rows_of(sorted(old, key=ids.__getitem__))
    old_times = [times[ids.index(c)] for c in before.ids]
    snapshot = Snapshot(
        ids=before.ids,
        generations=before.generations,
        vectors=before.vectors,
        link_set={},
        kinds=before.kinds,
        times=np.asarray(old_times, dtype=np.float64),
        lists=compute_lists(before, old_times, params),
    )
    return snapshot, rows_of(new), new_times, params


def incremental_case(n: int = INCREMENTAL_N) -> dict[str, Any]:
    snapshot, rows, times, params = _one_file_change(n)

    def full() -> dict[str, LinkLists]:
        return compute_lists(rows, times, params)

    def incremental() -> dict[str, LinkLists]:
        return run_incremental(snapshot, rows, times, params).lists

    seconds = {}
    for name, run in (("full", full), ("incremental", incremental)):
        best = math.inf
        gc.collect()
        gc.disable()
        for _ in range(INCREMENTAL_REPEATS):
            started = time.perf_counter()
            run()
            best = min(best, time.perf_counter() - started)
        gc.enable()
        seconds[name] = round(best, 4)
    inc, ref = incremental(), full()
    outcome = run_incremental(snapshot, rows, times, params)
    agreement: dict[str, Any] = {}
    for kind in ref:
        a, b = inc[kind].to_links(rows.ids), ref[kind].to_links(rows.ids)
        differ = [c for c in b if a[c] != b[c]]
        same_ids = [c for c in differ if [x for x, _ in a[c]] == [x for x, _ in b[c]]]
        worst = max(
            (abs(x - y) for c in same_ids for (_, x), (_, y) in zip(a[c], b[c], strict=True)),
            default=0.0,
        )
        agreement[kind] = {
            "lists": len(b),
            "lists_differ": len(differ),
            "weights_only": len(same_ids),
            "max_weight_diff": worst,
        }
    # The full pass's own noise floor: its lists before and after the change, for chunks
    # whose lists name no added or removed chunk, differ exactly as much (BLAS sums a dot
    # product in another order when the rows shift in the blocked product).
    before = snapshot.lists[LINK_SEMANTIC].to_links(snapshot.ids)
    after = ref[LINK_SEMANTIC].to_links(rows.ids)
    moved = set(snapshot.ids) ^ set(rows.ids)
    untouched = [
        c
        for c in rows.ids
        if c in before and not ({m for m, _ in before[c]} | {m for m, _ in after[c]}) & moved
    ]
    agreement[LINK_SEMANTIC]["full_before_vs_full_after_untouched_differ"] = sum(
        1 for c in untouched if before[c] != after[c]
    )
    agreement[LINK_SEMANTIC]["untouched_lists"] = len(untouched)
    result = {
        "n": n,
        "seconds": seconds,
        "incremental_to_full_ratio": ratio(seconds["incremental"], seconds["full"]),
        "recomputed_chunks": outcome.recomputed,
        "rows_to_write": sum(len(by_chunk) for by_chunk in outcome.changed.values()),
        "agreement": agreement,
    }
    log(
        f"incremental n={n}: one-file change {seconds['incremental']:.4f} s vs full"
        f" {seconds['full']:.4f} s (ratio {result['incremental_to_full_ratio']}),"
        f" {result['rows_to_write']} rows to write; agreement {agreement}"
    )
    return result


def main() -> None:
    started = time.perf_counter()
    full = "--full" in sys.argv[1:]  # run every reference figure, however long it takes
    budgets = (math.inf, math.inf) if full else (UNTRACED_BUDGET_S, TRACED_BUDGET_S)
    agreement = check_agreement(1000)
    incremental = incremental_case()
    series = {
        "temporal": run_series("temporal", SIZES, False, budgets),
        "temporal_reference": run_series("temporal_reference", SIZES, True, budgets),
        "semantic": run_series("semantic", SIZES, False, budgets),
        "semantic_reference": run_series("semantic_reference", SIZES, True, budgets),
        "semantic_copy_baseline": run_series("semantic_copy_baseline", SIZES[:2], True, budgets),
    }
    at = str(SPEEDUP_AT)

    def versus(baseline: str, live: str, figure: str) -> float | None:
        return ratio(series[baseline][figure].get(at), series[live][figure].get(at))

    speedup = {
        "temporal": versus("temporal_reference", "temporal", "seconds"),
        "semantic": versus("semantic_reference", "semantic", "seconds"),
        "semantic_vs_copy_baseline": versus("semantic_copy_baseline", "semantic", "seconds"),
        "temporal_cpu": versus("temporal_reference", "temporal", "cpu_seconds"),
        "semantic_cpu": versus("semantic_reference", "semantic", "cpu_seconds"),
    }
    memory = {
        "temporal_tracemalloc": versus("temporal_reference", "temporal", "peak_mb"),
        "temporal_rss": versus("temporal_reference", "temporal", "peak_rss_mb"),
        "semantic_tracemalloc": versus("semantic_reference", "semantic", "peak_mb"),
        "semantic_rss": versus("semantic_reference", "semantic", "peak_rss_mb"),
    }
    for kind in ("temporal", "semantic"):
        print(
            f"{kind}: time growth per doubling {series[kind]['time_growth_per_doubling']},"
            f" cpu {series[kind]['cpu_growth_per_doubling']}"
            f" (reference {series[kind + '_reference']['time_growth_per_doubling']})"
        )
    print(
        f"speed-up over the reference at n={at}: temporal {speedup['temporal']}x"
        f" (target >= 100x), semantic {speedup['semantic']}x (target >= 30x),"
        f" semantic over the copy-only baseline {speedup['semantic_vs_copy_baseline']}x;"
        f" in cpu time temporal {speedup['temporal_cpu']}x, semantic {speedup['semantic_cpu']}x"
    )
    print(f"peak memory, reference / live at n={at}: {memory}")
    print(
        f"one-file change at n={INCREMENTAL_N}: incremental / full"
        f" {incremental['incremental_to_full_ratio']} ({incremental['seconds']})"
    )
    result = {
        "bench": "links",
        "sizes": list(SIZES),
        "dims": DIMS,
        "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
        "full": full,
        "load_average_1min": os.getloadavg()[0],
        "agreement_at_1000": agreement,
        "incremental": incremental,
        **series,
        f"speedup_at_{SPEEDUP_AT}": speedup,
        f"peak_memory_ratio_at_{SPEEDUP_AT}": memory,
        "targets": {"temporal_growth": 2.0, "temporal_speedup": 100, "semantic_speedup": 30},
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
