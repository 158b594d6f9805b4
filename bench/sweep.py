"""Sweep a generated 2,000-file repository on the embedded default.

Prints rows/s, the ratio of the sweep's write stage to a raw Chroma ``add`` of the same
rows measured in the same run, and a forced re-sweep of the unchanged repo as a ratio of
the first. Last stdout line: one JSON object.

    python -m bench.sweep [--files 2000]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


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
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@x",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@x",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "gen"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, env=env)


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
    rows = runtime.get_store(settings).count()

    # Raw Chroma add of the same rows (ids, vectors, documents, metadata) in a fresh collection.
    store = runtime.get_store(settings)
    got = store.collection.get(include=["embeddings", "documents", "metadatas"])
    raw = open_store(persist_dir=work / "raw-chroma", url=None, collection_name="raw-add-bench")
    t0 = time.perf_counter()
    raw.add(got["ids"], np.asarray(got["embeddings"]), got["documents"], got["metadatas"])
    raw_add_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    second = run_sweeps(settings, tenants, instance, force=True)[0]
    resweep_s = time.perf_counter() - t0
    write_s = first["timings"]["write_s"]
    result = {
        "bench": "sweep",
        "files": args.files,
        "rows": rows,
        "first_outcome": first["outcome"],
        "first_sweep_s": round(first_s, 3),
        "rows_per_s": round(rows / first_s, 1),
        "raw_chroma_add_s": round(raw_add_s, 3),
        "write_stage_s": round(write_s, 3),
        "write_stage_to_raw_add_ratio": round(write_s / raw_add_s, 3),
        "sweep_to_raw_add_ratio": round(first_s / raw_add_s, 3),
        "forced_resweep_s": round(resweep_s, 3),
        "forced_resweep_ratio": round(resweep_s / first_s, 3),
        "resweep_outcome": second["outcome"],
        "first_timings": first["timings"],
    }
    print(json.dumps(result), file=sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
