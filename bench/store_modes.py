"""What the local Chroma server costs against embedded Chroma, measured in one run.

Two parts, each done once per mode (``NEO_CHROMA_LOCAL=embedded`` / ``server``) in fresh
NEO_HOMEs:

- store calls: the sweep's writes (``add`` in batches), its presence check by id, a
  truth-view read of one tenant's rows with documents, and tenant-filtered queries;
- whole commands as a user runs them: ``neo-assets sweep`` of a repository (first sweep,
  then a one-file commit) and ``neo-assets query``, each its own process (the server is
  started by the first command and found by the later ones).

    python -m bench.store_modes [--repo /tmp/bench-repos/flask] [--rows 20000]

The last stdout line is one JSON object; ``ratio`` entries are server / embedded.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DEFAULT_REPO = Path("/tmp/bench-repos/flask")
DIM = 384
BATCH = 1000
QUERIES = 200


def _env(home: Path, mode: str, tenants: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEO_", "DAGSTER_"))}
    env |= {"NEO_HOME": str(home), "NEO_CHROMA_LOCAL": mode, "NEO_EMBEDDING_PROVIDER": "hashing"}
    if tenants is not None:
        env["NEO_TENANTS_FILE"] = str(tenants)
    return env


def store_calls(home: Path, mode: str, rows: int) -> dict[str, float]:
    """Seconds of each store call kind through the project's ChromaStore."""
    saved = dict(os.environ)
    os.environ.update(_env(home, mode))
    try:
        from neo_assets.config.settings import load_settings  # noqa: PLC0415
        from neo_assets.query.truth import tenant_rows_with_documents  # noqa: PLC0415
        from neo_assets.services.handles import open_store  # noqa: PLC0415

        rng = np.random.default_rng(0)
        ids = [f"{i:064x}" for i in range(rows)]
        out: dict[str, float] = {}
        started = time.perf_counter()
        store = open_store(load_settings())
        out["open_s"] = time.perf_counter() - started
        started = time.perf_counter()
        for start in range(0, rows, BATCH):
            batch = ids[start : start + BATCH]
            store.add(
                batch,
                rng.standard_normal((len(batch), DIM)).astype(np.float32),
                ["def f(x):\n    return x\n" * 8] * len(batch),
                [
                    {"tenantId": f"t{(start + j) % 10}", "repoSlug": "r", "sourcePath": "a.py"}
                    for j in range(len(batch))
                ],
            )
        out["add_s"] = time.perf_counter() - started
        started = time.perf_counter()
        assert len(store.present_ids(ids)) == rows
        out["present_ids_s"] = time.perf_counter() - started
        started = time.perf_counter()
        tenant_rows_with_documents(store, "t3")
        out["tenant_rows_s"] = time.perf_counter() - started
        query = rng.standard_normal(DIM).astype(np.float32)
        times = []
        for _ in range(QUERIES):
            started = time.perf_counter()
            store.query(query, where={"tenantId": "t3"}, k=10)
            times.append(time.perf_counter() - started)
        out["query_p50_ms"] = float(np.percentile(times, 50) * 1000)
        out["query_p95_ms"] = float(np.percentile(times, 95) * 1000)
        store.close()
        return out
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _timed(env: dict[str, str], *args: str) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [str(BIN / "neo-assets"), *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"neo-assets {' '.join(args)}: {done.stderr[-2000:]}")
    return time.perf_counter() - started


def commands(work: Path, mode: str, repo_src: Path) -> dict[str, float]:
    """Seconds of whole commands, each its own process, on a copy of the repository."""
    repo = work / f"repo-{mode}"
    subprocess.run(["git", "clone", "-q", str(repo_src), str(repo)], check=True)
    tenants = work / f"tenants-{mode}.yaml"
    tenants.write_text(
        "tenants:\n  - id: bench\n    repos:\n      - slug: repo\n"
        f"        path: {repo}\n        parser: {{id: neo-code, version: 2.0.0}}\n"
    )
    env = _env(work / f"home-cmd-{mode}", mode, tenants)
    out = {"first_sweep_s": _timed(env, "sweep", "--json")}
    target = next(p for p in sorted(repo.rglob("*.py")) if ".git" not in p.parts)
    with target.open("a") as fh:
        fh.write("\n\ndef bench_store_modes_probe(value):\n    return value\n")
    git_env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x.invalid"}
    git_env |= {"GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@x.invalid"}
    subprocess.run(["git", "commit", "-qam", "probe"], cwd=repo, env=git_env, check=True)
    out["one_file_sweep_s"] = _timed(env, "sweep", "--json")
    out["query_command_s"] = min(
        _timed(env, "query", "bench_store_modes_probe", "--tenant", "bench", "--json")
        for _ in range(3)
    )
    if mode == "server":
        from neo_assets.store.local_server import ServerPaths, stop_local_server  # noqa: PLC0415

        home = Path(env["NEO_HOME"])
        stop_local_server(ServerPaths.under(home, home / "chroma"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=DEFAULT_REPO)
    parser.add_argument("--rows", type=int, default=20_000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="store-modes-"))
    result: dict[str, Any] = {"bench": "store_modes", "rows": args.rows}
    try:
        for mode in ("embedded", "server"):
            result[mode] = {
                k: round(v, 4) for k, v in store_calls(work / mode, mode, args.rows).items()
            }
            if args.repo.exists():
                result[mode] |= {k: round(v, 3) for k, v in commands(work, mode, args.repo).items()}
            print(json.dumps({mode: result[mode]}), file=sys.stderr)
        from neo_assets.store.local_server import ServerPaths, stop_local_server  # noqa: PLC0415

        home = work / "server"
        stop_local_server(ServerPaths.under(home, home / "chroma"))
        result["ratio"] = {
            k: round(result["server"][k] / result["embedded"][k], 3)
            for k in result["embedded"]
            if result["embedded"][k]
        }
        if args.repo.exists():
            result["revision"] = subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=args.repo, capture_output=True, text=True
            ).stdout.strip()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
