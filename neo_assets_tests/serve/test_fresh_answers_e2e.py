"""`neo-assets serve` on the default store sees what later sweeps in other processes write.

The service, a CLI sweep and a Dagster run (``dagster asset materialize``) are separate
processes on one knowledge base with no NEO_CHROMA_URL: the user's default, where all of
them reach the local Chroma server under NEO_HOME. A client polls the service throughout:
every answer is 2xx, an untouched function is in every answer, and each new function is
answered within ``FRESH_BOUND_S`` of the end of the sweep that wrote it, with no restart.
"""

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.serve.service_harness import ROOT, Served, ServedKb

# The bound README "For agents" states: the service re-reads what it serves at most every
# NEO_SERVE_TRUTH_RECHECK_S (1 s) and recomputes a tenant's view in the background.
FRESH_BOUND_S = 5.0
UNTOUCHED = "dispatch_request"
# The sweep step materializes these together (the self-evaluation included).
SWEEP_ASSETS = "repo_envelope,chunk_generation,kb_embeddings,fence_census,retrieval_quality"


@dataclass
class Poller:
    """Searches as one agent would, every ``interval_s``, and keeps what it saw."""

    served: Served
    token: str
    interval_s: float = 0.2
    statuses: list[int] = field(default_factory=list)
    misses: list[tuple[float, Any]] = field(default_factory=list)
    first_seen: dict[str, float] = field(default_factory=dict)
    watch: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        with httpx.Client(base_url=self.served.url, headers=headers, timeout=10) as client:
            while not self.stop.is_set():
                self._once(client)
                time.sleep(self.interval_s)

    def _once(self, client: httpx.Client) -> None:
        got = client.post("/v1/search", json={"query": "dispatch_request route a request", "k": 5})
        self.statuses.append(got.status_code)
        if got.status_code != 200:
            self.misses.append((time.time(), got.text[:300]))
            return
        names = {r["name"] for r in got.json()["results"]}
        if UNTOUCHED not in names:
            self.misses.append((time.time(), sorted(names)))
        for name in list(self.watch):
            if name in self.first_seen:
                continue
            found = client.post("/v1/search", json={"query": name, "k": 3, "repo": "widgets"})
            self.statuses.append(found.status_code)
            if found.status_code == 200 and name in {r["name"] for r in found.json()["results"]}:
                self.first_seen[name] = time.time()

    def wait_for(self, name: str, timeout_s: float) -> float | None:
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if name in self.first_seen:
                return self.first_seen[name]
            time.sleep(0.05)
        return None


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedKb]:
    built = ServedKb.build(tmp_path_factory.mktemp("fresh-kb"))
    yield built
    built.stop_store()


def _add_function(repo: GitRepo, name: str, when: int) -> None:
    repo.write(f"widgets/{name}.py", f"def {name}(queue):\n    return queue.pop()\n")
    repo.commit(f"add {name}", when=when)


def test_sweeps_in_other_processes_are_served_without_a_restart(kb: ServedKb) -> None:
    token = kb.issue("acme")["token"]
    repo = GitRepo(kb.root / "acme-widgets")
    with kb.serve() as served:
        poller = Poller(served, token)
        thread = threading.Thread(target=poller.run, daemon=True)
        thread.start()
        try:
            time.sleep(1.0)  # a few answers from before any change
            # 1. A CLI sweep (its own process, a Dagster run inside it).
            _add_function(repo, "ticket_dispenser_from_cli", 1_700_000_100)
            poller.watch.append("ticket_dispenser_from_cli")
            done = kb.cli("sweep", "--tenant", "acme", "--repo", "widgets", "--json")
            cli_ended = time.time()
            assert done.returncode == 0, done.stderr[-3000:]
            seen = poller.wait_for("ticket_dispenser_from_cli", 30)
            assert seen is not None, "the CLI sweep's new function was never answered"
            assert seen - cli_ended <= FRESH_BOUND_S, seen - cli_ended

            # 2. A Dagster run launched by Dagster's own CLI, in another process.
            _add_function(repo, "lantern_from_dagster_run", 1_700_000_200)
            poller.watch.append("lantern_from_dagster_run")
            run = subprocess.run(
                [
                    str(Path(sys.executable).parent / "dagster"),
                    "asset",
                    "materialize",
                    "-m",
                    "neo_assets.definitions",
                    "--select",
                    SWEEP_ASSETS,
                    "--partition",
                    "acme/widgets",
                ],
                cwd=ROOT,
                env=kb.env,
                capture_output=True,
                text=True,
                timeout=240,
            )
            run_ended = time.time()
            assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
            seen = poller.wait_for("lantern_from_dagster_run", 30)
            assert seen is not None, "the Dagster run's new function was never answered"
            assert seen - run_ended <= FRESH_BOUND_S, seen - run_ended
            time.sleep(1.0)
        finally:
            poller.stop.set()
            thread.join(timeout=30)
        assert served.proc.poll() is None  # the same service answered throughout
    assert poller.statuses and set(poller.statuses) == {200}, poller.misses[:5]
    assert poller.misses == []
