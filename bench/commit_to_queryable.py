"""Commit -> queryable with the sensors on: how long after a one-file commit an agent's
search answers the new function, on the default store (the local Chroma server), with
nothing started by hand but what a user starts: the Dagster daemon with ``sweep_sensor``
running, ``neo-assets serve``, and the agent polling it.

Each commit adds one uniquely named function to one file of a copy of the repository, at
a random moment of the sensor's interval; the agent searches for it every 0.2 s. Per
commit, the Dagster run that swept it splits the latency into: waiting for the sensor and
the launch (commit -> run start), the run (start -> end) and the service (run end ->
answered).

    python -m bench.commit_to_queryable [--repo /tmp/bench-repos/flask] [--commits 10]
        [--provider hashing|sentence_transformers]

The last stdout line is one JSON object with p50 / p95 of each part.
"""

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DEFAULT_REPO = Path("/tmp/bench-repos/flask")
TARGET_FILE = "src/flask/helpers.py"
TIMEOUT_S = 180.0


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return round(ordered[index], 2)


def _free_port() -> int:
    import socket  # noqa: PLC0415

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@example.invalid",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    }
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def _cli(env: dict[str, str], *args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "neo-assets"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("wb") as fh:
        return subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _wait_http(url: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout_s} s")


def _run_times(dagster_home: Path, after: float) -> tuple[float | None, float | None]:
    """Start and end of the first sweep run of the partition created after ``after``."""
    import dagster as dg  # noqa: PLC0415

    os.environ["DAGSTER_HOME"] = str(dagster_home)
    with dg.DagsterInstance.get() as instance:
        records = instance.get_run_records(
            dg.RunsFilter(job_name="sweep", created_after=_utc(after)), limit=5
        )
        done = [r for r in records if r.end_time is not None]
        if not done:
            return None, None
        first = min(done, key=lambda r: r.create_timestamp)
        return first.start_time, first.end_time


def _utc(epoch: float) -> Any:
    from datetime import UTC, datetime  # noqa: PLC0415

    return datetime.fromtimestamp(epoch, UTC)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=DEFAULT_REPO)
    parser.add_argument("--commits", type=int, default=10)
    parser.add_argument("--provider", default="hashing")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="commit-to-queryable-"))
    repo = work / "repo"
    subprocess.run(["git", "clone", "-q", str(args.repo), str(repo)], check=True)
    home = work / "home"
    tenants = work / "tenants.yaml"
    tenants.write_text(
        "tenants:\n  - id: bench\n    repos:\n      - slug: repo\n"
        f"        path: {repo}\n        parser: {{id: neo-code, version: 2.0.0}}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEO_", "DAGSTER_"))}
    env |= {
        "NEO_HOME": str(home),
        "DAGSTER_HOME": str(home / "dagster"),
        "NEO_TENANTS_FILE": str(tenants),
        "NEO_EMBEDDING_PROVIDER": args.provider,
        "HF_HUB_OFFLINE": "1",
    }
    interval = int(env.get("NEO_SWEEP_SENSOR_INTERVAL_S", "5"))
    started = time.perf_counter()
    first = _cli(env, "sweep", "--json")
    if first.returncode != 0:
        raise SystemExit(first.stderr[-3000:])
    first_sweep_s = time.perf_counter() - started
    token = json.loads(_cli(env, "token", "issue", "--tenant", "bench", "--json").stdout)["token"]
    port = _free_port()
    procs = [
        _start(
            [str(BIN / "dagster-daemon"), "run", "-m", "neo_assets.definitions"],
            env,
            work / "daemon.log",
        ),
        _start(
            [str(BIN / "neo-assets"), "serve", "--port", str(port)],
            env,
            work / "serve.log",
        ),
    ]
    rows: list[dict[str, Any]] = []
    try:
        subprocess.run(
            [
                str(BIN / "dagster"),
                "sensor",
                "start",
                "sweep_sensor",
                "-m",
                "neo_assets.definitions",
            ],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
        )
        url = f"http://127.0.0.1:{port}"
        _wait_http(f"{url}/healthz")
        client = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )
        time.sleep(interval * 2)  # the sensor's first ticks (the initial sweep is not due)
        for i in range(args.commits):
            name = f"bench_probe_{i}_{rng.randrange(10**9)}"
            with (repo / TARGET_FILE).open("a") as fh:
                fh.write(f"\n\ndef {name}(value):\n    return value\n")
            _git(repo, "commit", "-qam", f"add {name}")
            committed = time.time()
            answered = None
            while time.time() - committed < TIMEOUT_S:
                got = client.post("/v1/search", json={"query": name, "k": 3})
                if got.status_code == 200 and any(r["name"] == name for r in got.json()["results"]):
                    answered = time.time()
                    break
                time.sleep(0.2)
            run_start, run_end = _run_times(home / "dagster", committed)
            row = {
                "commit": i,
                "queryable_s": None if answered is None else answered - committed,
                "to_run_start_s": None if run_start is None else run_start - committed,
                "run_s": None if run_end is None or run_start is None else run_end - run_start,
                "after_run_s": None if answered is None or run_end is None else answered - run_end,
            }
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
            time.sleep(rng.uniform(0, interval))  # the next commit at another phase
    finally:
        for proc in procs:
            _stop(proc)
        subprocess.run(
            [str(BIN / "python"), "-c", _STOP_SERVER, str(home)], check=False, timeout=60
        )
    summary: dict[str, Any] = {
        "bench": "commit_to_queryable",
        "repo": str(args.repo),
        "revision": _git(args.repo, "rev-parse", "HEAD"),
        "provider": args.provider,
        "sensorIntervalS": interval,
        "commits": len(rows),
        "answered": sum(r["queryable_s"] is not None for r in rows),
        "firstSweepS": round(first_sweep_s, 1),
    }
    for key in ("queryable_s", "to_run_start_s", "run_s", "after_run_s"):
        values = [r[key] for r in rows if r[key] is not None]
        summary[f"{key}_p50"] = percentile(values, 0.5)
        summary[f"{key}_p95"] = percentile(values, 0.95)
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(summary))


_STOP_SERVER = (
    "import sys; from pathlib import Path;"
    "from neo_assets.store.local_server import ServerPaths, stop_local_server;"
    "h = Path(sys.argv[1]); stop_local_server(ServerPaths.under(h, h / 'chroma'))"
)


if __name__ == "__main__":
    main()
