"""Sweep a generated repository on the embedded default, through Dagster.

Prints, measured in this one run:
- first sweep: rows/s, and the sweep's write stage against a raw Chroma ``add`` of the
  same rows (same ids, vectors, documents, metadata) into a fresh collection;
- work in proportion to change: the time inside the sweep's steps after a one-file
  commit, and for a forced sweep of the unchanged repo, each as a share of the first
  sweep's step time; Dagster's fixed per-run cost (run wall time minus step time)
  beside them;
- peak RSS of this process.
Last stdout line: one JSON object.

    python -m bench.sweep [--files 2000]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

GIT_ENV = {
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@x",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@x",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, env={**os.environ, **GIT_ENV})


def generate_repo(root: Path, files: int) -> None:
    root.mkdir(parents=True)
    rng = np.random.default_rng(7)
    for i in range(files):
        pkg = root / f"pkg{i % 40:02d}"
        pkg.mkdir(exist_ok=True)
        funcs = "\n\n".join(
            f"def handler_{i}_{j}(value, scale={int(rng.integers(1, 9))}):\n"
            f'    """Handle case {j} of module {i}."""\n'
            f"    total = value * scale + {int(rng.integers(0, 1000))}\n"
            f"    return total if total > {j} else -total\n"
            for j in range(3)
        )
        (pkg / f"mod_{i:05d}.py").write_text(f'"""Module {i}."""\n\nimport math\n\n{funcs}\n')
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "gen")


def step_seconds(instance, run_id: str) -> float:
    return sum(
        (s.end_time or 0) - (s.start_time or 0)
        for s in instance.get_run_step_stats(run_id)
        if s.start_time and s.end_time
    )


def step_breakdown(instance, run_id: str) -> dict[str, float]:
    return {
        s.step_key: round((s.end_time or 0) - (s.start_time or 0), 3)
        for s in instance.get_run_step_stats(run_id)
        if s.start_time and s.end_time
    }


def run_seconds(instance, run_id: str) -> float:
    stats = instance.get_run_stats(run_id)
    return (stats.end_time or 0) - (stats.start_time or 0)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=2000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="neo-bench-sweep-"))
    os.environ["NEO_HOME"] = str(work / "home")
    os.environ["DAGSTER_HOME"] = str(work / "dagster")
    repo = work / "repo"
    generate_repo(repo, args.files)
    (work / "tenants.yaml").write_text(
        "tenants:\n  - id: bench\n    repos:\n      - slug: gen\n"
        f"        path: {repo}\n        parser: {{id: neo-code, version: 1.0.0}}\n"
    )
    os.environ["NEO_TENANTS_FILE"] = str(work / "tenants.yaml")

    import dagster as dg

    from neo_assets import runtime
    from neo_assets.settings import load_settings
    from neo_assets.store.chroma_store import open_store
    from neo_assets.sweep.runner import run_sweeps
    from neo_assets.tenants import load_tenants

    settings = load_settings()
    tenants = load_tenants(work / "tenants.yaml")
    (work / "dagster").mkdir(exist_ok=True)
    instance = dg.DagsterInstance.local_temp(str(work / "dagster"))

    t0 = time.perf_counter()
    first = run_sweeps(settings, tenants, instance)[0]
    first_s = time.perf_counter() - t0
    store = runtime.get_store(settings)
    rows = store.count()

    # Raw Chroma add of the same rows in a fresh collection, in max-size batches.
    got = store.collection.get(include=["embeddings", "documents", "metadatas"])
    raw = open_store(persist_dir=work / "raw-chroma", url=None, collection_name="raw-add-bench")
    t0 = time.perf_counter()
    raw.add(got["ids"], np.asarray(got["embeddings"]), got["documents"], got["metadatas"])
    raw_add_s = time.perf_counter() - t0
    del got

    # One-file commit, then a forced sweep of the unchanged repo.
    target = next(repo.glob("pkg00/mod_*.py"))
    target.write_text(target.read_text() + "\n\ndef added_later(x):\n    return x\n")
    git(repo, "commit", "-q", "-am", "one file")
    t0 = time.perf_counter()
    one = run_sweeps(settings, tenants, instance)[0]
    one_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    forced = run_sweeps(settings, tenants, instance, force=True)[0]
    forced_s = time.perf_counter() - t0

    first_steps = step_seconds(instance, first["runId"])
    one_steps = step_seconds(instance, one["runId"])
    forced_steps = step_seconds(instance, forced["runId"])
    fixed = [
        run_seconds(instance, r["runId"]) - step_seconds(instance, r["runId"])
        for r in (first, one, forced)
    ]
    write_s = first["timings"]["write_s"]
    result = {
        "bench": "sweep",
        "files": args.files,
        "rows": rows,
        "outcomes": [first["outcome"], one["outcome"], forced["outcome"]],
        "first_sweep_s": round(first_s, 3),
        "first_steps_s": round(first_steps, 3),
        "rows_per_s": round(rows / first_steps, 1),
        "raw_chroma_add_s": round(raw_add_s, 3),
        "write_stage_s": round(write_s, 3),
        "write_stage_to_raw_add_ratio": round(write_s / raw_add_s, 3),
        "first_steps_to_raw_add_ratio": round(first_steps / raw_add_s, 3),
        "one_file_commit_steps_s": round(one_steps, 3),
        "one_file_commit_ratio": round(one_steps / first_steps, 4),
        "one_file_commit_embedded": one["counts"].get("embedded"),
        "forced_unchanged_steps_s": round(forced_steps, 3),
        "forced_unchanged_ratio": round(forced_steps / first_steps, 4),
        "dagster_fixed_per_run_s": [round(f, 3) for f in fixed],
        "wall_s": {
            "first": round(first_s, 3),
            "one_file": round(one_s, 3),
            "forced": round(forced_s, 3),
        },
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "first_timings": first["timings"],
        "steps": {
            "first": step_breakdown(instance, first["runId"]),
            "one_file": step_breakdown(instance, one["runId"]),
            "forced": step_breakdown(instance, forced["runId"]),
        },
        "load_average_1min": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(result), file=sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
