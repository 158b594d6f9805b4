"""Benchmark: the code tools (find_symbol, find_references, grep, read_file, list_files)
at neomjs/neo size, and what their index adds to a sweep.

A fresh git repo holding a copy of neomjs/neo's ``src/`` (the clone under
/tmp/bench-repos/neo is sparse-checked-out to it) is swept with the hashing embedder
through ``neo-assets sweep --json`` (Dagster, the default local Chroma server), twice: the
first sweep (every file parsed and indexed) and one after a one-file commit (the index
reuses every other file's entry). From each sweep's own timings: the seconds spent on the
code index (``codeIndexSeconds``, part of the chunk stage) against the sweep's stages
(``stagesSeconds``); the target is at most 10 %. And how many file rows of the index each
sweep wrote (``codeIndexFileRowsWritten``: every file first, the changed one after).

Then ``neo-assets serve`` in a subprocess answers ``--requests`` calls of each tool over
HTTP (httpx, one client, sequential), with arguments drawn from the repo itself: names of
its units, identifiers, paths and line windows, and a fixed set of grep patterns. The
first call of each tool is timed apart (it decodes the index; later calls reuse it).

    python -m bench.code_tools [--repo /tmp/bench-repos/neo] [--requests 100] [--sweeps-only]

The last stdout line is one JSON object with every figure.
"""

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: the repo root, not bench/, on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_REPO = Path("/tmp/bench-repos/neo")
GREP_PATTERNS = [
    "afterSetValue",
    r"static config\s*=",
    r"^\s*import .* from",
    r"me\.\w+\(\)",
    r"(?i)todo|fixme",
    r"className\s*:\s*'Neo\.[a-z]+\.",
    r"\bthrow new Error\(",
    r"(a+)+$",
]


def _git(repo: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env |= {
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@example.invalid",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    }
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "neo_assets.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )


def _sweep(env: dict[str, str]) -> dict[str, Any]:
    started = time.perf_counter()
    done = _cli(env, "sweep", "--force", "--json")
    if done.returncode != 0:
        raise RuntimeError(f"sweep failed: {done.stderr[-2000:]}")
    [repo] = json.loads(done.stdout)["repos"]
    t = repo["timings"]
    return {
        "outcome": repo["outcome"],
        "wallSeconds": round(time.perf_counter() - started, 3),
        "stagesSeconds": round(t["stagesSeconds"], 3),
        "chunksSeconds": round(t["chunksSeconds"], 3),
        "codeIndexSeconds": round(t["codeIndexSeconds"], 3),
        "codeIndexShareOfStages": round(t["codeIndexSeconds"] / t["stagesSeconds"], 4),
    }


def _index_rows(env: dict[str, str]) -> tuple[int, int]:
    """(file rows, newest row id) of the code index (SQLite gives a written row a new id)."""
    os.environ.update(env)
    import sqlalchemy as sa

    from neo_assets.config.settings import load_settings
    from neo_assets.services.handles import open_ledger

    with open_ledger(load_settings()) as ledger, ledger.engine.connect() as conn:
        count, newest = conn.execute(
            sa.text("SELECT count(*), coalesce(max(rowid), 0) FROM code_index_files")
        ).one()
    return int(count), int(newest)


def _swept(env: dict[str, str]) -> dict[str, Any]:
    """A sweep's figures and how many file rows of the code index it wrote."""
    _count, before = _index_rows(env)
    summary = _sweep(env)
    count, after = _index_rows(env)
    # Rows whose id is past the newest before the sweep: the files it (re-)indexed.
    summary["codeIndexFileRowsWritten"] = after - before if after > before else 0
    summary["codeIndexFileRows"] = count
    return summary


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _calls(index: dict[str, Any], n: int, rng: random.Random) -> dict[str, list[dict]]:
    """Each tool's ``n`` argument sets, drawn from the repo's own index."""
    files = index["files"]
    paths = sorted(files)
    symbols = [s for rec in files.values() for s in rec[4]]
    idents = sorted({i for rec in files.values() for i in rec[5] if len(i) > 3})
    folders = sorted({p.rsplit("/", 1)[0] for p in paths if "/" in p})

    def window(path: str) -> dict:
        total = files[path][3]
        start = rng.randint(1, max(1, total))
        return {"repo": "neo", "path": path, "start_line": start, "end_line": start + 59}

    return {
        "find_symbol": [
            {"name": rng.choice(symbols)[1].split(".")[-1] if i % 3 else rng.choice(symbols)[1]}
            for i in range(n)
        ],
        "find_references": [{"name": rng.choice(idents)} for _ in range(n)],
        "grep": [
            {"pattern": GREP_PATTERNS[i % len(GREP_PATTERNS)], "max_results": 100} for i in range(n)
        ],
        "read_file": [window(rng.choice(paths)) for _ in range(n)],
        "list_files": [
            {"repo": "neo", "path_glob": rng.choice(folders) + "/*"} if i % 2 else {"repo": "neo"}
            for i in range(n)
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", type=Path, default=DEFAULT_REPO)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--sweeps-only", action="store_true", help="skip the tools' timings")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="neo-bench-tools-"))
    repo = work / "neo"
    shutil.copytree(args.repo / "src", repo / "src")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "neo src")
    source_commit = _git(args.repo, "rev-parse", "HEAD")
    tenants = work / "tenants.yaml"
    tenants.write_text(
        "tenants:\n  - id: bench\n    repos:\n      - slug: neo\n"
        f"        path: {repo}\n        parser: {{id: neo-code, version: 2.0.0}}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEO_")}
    env |= {
        "NEO_HOME": str(work / "home"),
        "DAGSTER_HOME": str(work / "home" / "dagster"),
        "NEO_TENANTS_FILE": str(tenants),
        "NEO_EMBEDDING_PROVIDER": "hashing",
    }
    (work / "home" / "dagster").mkdir(parents=True)
    files = sum(1 for p in (repo / "src").rglob("*") if p.is_file())
    size = sum(p.stat().st_size for p in (repo / "src").rglob("*") if p.is_file())

    first = _swept(env)
    # One changed file: the index re-reads only it.
    target = sorted((repo / "src").rglob("*.mjs"))[0]
    target.write_text(target.read_text() + "\nexport function benchAdded() { return 1; }\n")
    _git(repo, "commit", "-qam", "one file")
    incremental = _swept(env)
    if args.sweeps_only:
        shutil.rmtree(work, ignore_errors=True)
        print(json.dumps({"firstSweep": first, "oneFileSweep": incremental}))
        return

    os.environ.update(env)
    from neo_assets.code_tools.index_store import read_payload
    from neo_assets.config.settings import load_settings
    from neo_assets.services.handles import open_ledger

    with open_ledger(load_settings()) as ledger:
        index = read_payload(ledger, "bench", "neo")
    assert index is not None
    symbols = sum(len(rec[4]) for rec in index["files"].values())
    calls = _calls(index, args.requests, random.Random(7))

    issued = _cli(env, "token", "issue", "--tenant", "bench", "--json")
    token = json.loads(issued.stdout)["token"]
    port = _free_port()
    log = (work / "serve.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "neo_assets.cli", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    tools: dict[str, Any] = {}
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("serve did not start")
            time.sleep(0.2)
        with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
            for tool, bodies in calls.items():
                times, cut = [], 0
                for body in bodies:
                    t0 = time.perf_counter()
                    r = client.post(f"{url}/v1/{tool}", json=body)
                    times.append((time.perf_counter() - t0) * 1000)
                    if r.status_code != 200:
                        raise RuntimeError(f"{tool} {body}: {r.status_code} {r.text[:300]}")
                    cut += bool(r.json().get("truncated"))
                rest = times[1:]
                tools[tool] = {
                    "firstMs": round(times[0], 1),
                    "p50Ms": round(_pct(rest, 0.5), 1),
                    "p95Ms": round(_pct(rest, 0.95), 1),
                    "maxMs": round(max(rest), 1),
                    "requests": len(times),
                    "truncatedAnswers": cut,
                }
                print(tool, tools[tool], file=sys.stderr)
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
        from neo_assets.store.local_server import ServerPaths, stop_local_server

        home = work / "home"
        stop_local_server(ServerPaths.under(home, home / "chroma"))  # the sweeps' store
    shutil.rmtree(work, ignore_errors=True)
    print(
        json.dumps(
            {
                "repo": "neomjs/neo src",
                "sourceCommit": source_commit,
                "files": files,
                "bytes": size,
                "indexedFiles": len(index["files"]),
                "symbols": symbols,
                "firstSweep": first,
                "oneFileSweep": incremental,
                "tools": tools,
            }
        )
    )


if __name__ == "__main__":
    main()
