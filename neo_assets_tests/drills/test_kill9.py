"""kill -9 drill: the sweeping process dies at random points; nothing is lost.

Ten seeded trials against one git repo (~45 Chroma batches through the fault-injecting
provider, one file that is content poison) on the embedded default (Chroma persistent
dir, SQLite ledger, the CLI's Dagster instance). Before each trial the repo moves (files
edited, added, deleted, renamed, or the parser bumped), so every kill lands between two
generations. Each trial runs `neo-assets sweep --force --json` in a child process and
SIGKILLs it:

- at a named point (``killpoint.py``: the walk, the envelope commit, mid-parse, the
  declared generation commit, during a Chroma write, after a batch write, after a fence
  commit, between the last batch write and the census commit), or
- from outside, at a random moment once the envelope is recorded, or once the provider
  has answered a random number of requests (embedding in progress).

Right after the kill, on disk: no hole, stamps, containment, fence evidence. Then the
next sweep (in this process, same instance) must complete despite the dead run's lease,
with the declared generation at HEAD, every declared id present or fenced, no id twice,
Chroma's count and its vector index agreeing with its rows, and the census equal to the
ledger's fences.
"""

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa

from neo_assets.cli.launch import dagster_instance, run_reconciliation, run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.core import codes
from neo_assets.core.ids.stamps import tenant_filter
from neo_assets.generations.serving import configured_generation
from neo_assets.store import leases
from neo_assets.store import ledger_schema as t
from neo_assets.sweep.rules.leases import sweep_lease_key
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.drills.harness import ROOT, child_env, open_state, release_store
from neo_assets_tests.drills.invariants import (
    HoleTracker,
    census_problems,
    containment_problems,
    fence_evidence_problems,
    fenced_ids,
    read_rows,
    repo_ids,
    stamp_problems,
)
from neo_assets_tests.fakes.fault_server import marker
from neo_assets_tests.fakes.fixtures import fault_server_fixture
from neo_assets_tests.fakes.supervisor import FaultServerSupervisor
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

SEED = 20_240_917
TENANT, SLUG = "acme", "widgets"
FILES = 40
FUNCTIONS = 8
POISON = "poison.py"
TRIALS = (
    "envelope",
    "reclaim",
    "parse",
    "generation-recorded",
    "mid-write",
    "after-write",
    "fence",
    "census",
    "external-after-envelope",
    "external-embedding",
)

fault_server = fault_server_fixture(scope="module", dimensions=32)


def module_text(i: int, version: int) -> str:
    body = "\n\n".join(
        f"def f{i}_{j}(x):\n    return x * {j} + {version}  # file {i} function {j}"
        for j in range(FUNCTIONS)
    )
    return f'"""Module {i}, revision {version}."""\n\n\n{body}\n'


def poison_text(version: int) -> str:
    return f'def poisoned():\n    return "{marker("bad_request")} {version}"\n'


@dataclass
class Drill:
    root: Path
    home: Path
    repo: GitRepo
    tenants: Path
    env: dict[str, str]
    server: FaultServerSupervisor
    rng: random.Random
    version: int = 0
    parser_patch: int = 0
    names: list[str] = field(default_factory=list)
    tracker: HoleTracker = field(default_factory=HoleTracker)
    ever_declared: set[str] = field(default_factory=set)
    log: list[dict[str, Any]] = field(default_factory=list)

    def write_tenants(self) -> None:
        write_tenants(
            self.tenants,
            {TENANT: [repo_entry(SLUG, self.repo.path, version=f"1.0.{self.parser_patch}")]},
        )

    def move(self, *, touch_poison: bool, bump: bool) -> str:
        """One commit that changes some paths (and maybe the parser): a new generation."""
        self.version += 1
        roll = self.rng.random()
        if bump or roll < 0.2:
            self.parser_patch += 1  # every id changes: ~46 batches to embed
            self.write_tenants()
        edited = self.rng.sample(self.names, 3)
        # A bump alone now costs no request (unchanged inputs copy their vectors), so the
        # kill-during-embedding trial (``bump``) also edits every file: ~46 batches sent.
        for name in self.names if bump else edited:
            self.repo.write(name, module_text(int(name[1:4]), self.version))
        if roll >= 0.2:
            old = self.rng.choice(self.names)
            new = f"m{int(old[1:4]):03d}_v{self.version}.py"
            self.repo.git("mv", old, new)
            self.names[self.names.index(old)] = new
        if touch_poison:
            self.repo.write(POISON, poison_text(self.version))
        return self.repo.commit(f"move {self.version}", when=1_700_000_000 + self.version)


@pytest.fixture(scope="module")
def drill(
    tmp_path_factory: pytest.TempPathFactory, fault_server: FaultServerSupervisor
) -> Iterator[Drill]:
    root = tmp_path_factory.mktemp("kill9")
    home = root / "home"
    repo = GitRepo(root / "repo")
    names = []
    for i in range(FILES):
        name = f"m{i:03d}.py"
        repo.write(name, module_text(i, 0))
        names.append(name)
    repo.write(POISON, poison_text(0))
    repo.commit("initial", when=1_700_000_000)
    env_vars = {
        "NEO_EMBEDDING_PROVIDER": "openai_compatible",
        "NEO_EMBEDDING_BASE_URL": fault_server.base_url,
        "NEO_EMBEDDING_MODEL": "fault-embed",
        "NEO_EMBEDDING_DIMENSIONS": "32",
        "NEO_EMBEDDING_BATCH_SIZE": "8",
        "NEO_EMBEDDING_RECOVERY_INITIAL_S": "0.05",
        "NEO_EMBEDDING_RECOVERY_MAX_S": "0.25",
        "NEO_EMBEDDING_RECOVERY_MAX_WAIT_S": "5",
        # A killed sweep's lease frees itself 3 s after its last renewal.
        "NEO_SWEEP_LEASE_TTL_S": "3",
        "NEO_SWEEP_LEASE_WAIT_S": "60",
        "NEO_BACKOFF_JITTER_S": "0",
        # Reclaim in small batches, so a kill lands between two of them.
        "NEO_RECONCILIATION_ENABLED": "true",
        "NEO_RECONCILIATION_DELETE_BATCH": "25",
        "NEO_TENANTS_FILE": str(root / "tenants.yaml"),
    }
    drill = Drill(
        root,
        home,
        repo,
        root / "tenants.yaml",
        child_env(home, env_vars),
        fault_server,
        random.Random(SEED),
        names=names,
    )
    drill.write_tenants()
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.startswith("NEO_"):
                mp.delenv(name)
        for key, value in {**env_vars, "NEO_HOME": str(home)}.items():
            mp.setenv(key, value)
        mp.setenv("DAGSTER_HOME", str(home / "dagster"))
        yield drill
        release_store()


def _launch(drill: Drill, point: str, nth: int, reached: Path) -> subprocess.Popen[bytes]:
    release_store()  # the child is the only process with Chroma open while it runs
    args = (
        ["reconcile", "--apply", "--json"] if point == "reclaim" else ["sweep", "--force", "--json"]
    )
    if point.startswith("external"):
        argv = ["-m", "neo_assets.cli", *args]
    else:
        argv = ["-m", "neo_assets_tests.drills.killpoint", point, str(nth), "--", *args]
    env = {**drill.env, "NEO_DRILL_REACHED": str(reached)}
    return subprocess.Popen(
        [sys.executable, *argv],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _envelope_time() -> float | None:
    """When the envelope was last recorded, read straight from the ledger (SQLite WAL:
    a reader never blocks the child's writes)."""
    engine = sa.create_engine(load_settings().store.resolved_ledger_url)
    try:
        with engine.connect() as conn:
            return conn.execute(sa.select(t.envelopes.c.recorded_at)).scalar()
    finally:
        engine.dispose()


def _kill_from_outside(
    drill: Drill, proc: subprocess.Popen[bytes], point: str, before: float | None
) -> str:
    """SIGKILL once the envelope is recorded (+ a random delay), or once the provider
    answered a random number of further requests."""
    deadline = time.monotonic() + 240
    if point == "external-embedding":
        start = int(drill.server.stats().get("requests_completed", 0))
        target = start + drill.rng.randint(3, 30)
        while time.monotonic() < deadline and proc.poll() is None:
            if int(drill.server.stats().get("requests_completed", 0)) >= target:
                break
            time.sleep(0.005)
        what = f"after the provider's request {target - start}"
    else:
        while time.monotonic() < deadline and proc.poll() is None:
            at = _envelope_time()
            if at is not None and at != before:
                break
            time.sleep(0.01)
        delay = drill.rng.uniform(0.0, 0.6)
        time.sleep(delay)
        what = f"{delay:.2f}s after the envelope commit"
    assert proc.poll() is None, "the sweep ended before the drill could kill it"
    os.kill(proc.pid, signal.SIGKILL)
    return what


def _vector_index_agrees(store: Any, ids: list[str]) -> list[str]:
    """Each sampled row's own embedding finds a row at distance ~0 within its repo."""
    problems = []
    got = store.collection.get(ids=ids, include=["embeddings"])
    for rid, emb in zip(got["ids"], got["embeddings"], strict=True):
        hits = store.query(np.asarray(emb), where=tenant_filter(TENANT, SLUG), k=1)
        if not hits or hits[0]["score"] < 1.0 - 1e-4:
            problems.append(f"row {rid[:12]} is not found by its own embedding: {hits[:1]}")
    return problems


def _check_on_disk(drill: Drill, generation: str) -> tuple[Any, dict[str, Any]]:
    state = open_state(drill.home)
    rows = read_rows(state.store)
    problems = drill.tracker.check(state.ledger, rows, [(TENANT, SLUG)], generation)
    problems += stamp_problems(rows.values())
    problems += containment_problems(rows.values(), {TENANT: {SLUG}})
    problems += fence_evidence_problems(state.ledger)
    assert not problems, problems
    assert state.store.count() == len(rows)  # Chroma's count agrees with its listing
    return state, rows


# Ten trials, each a child process (~110 s here): a slower CI machine must not time it out.
@pytest.mark.timeout(900)
def test_kill9_at_random_points_loses_nothing(drill: Drill) -> None:
    generation = configured_generation(load_settings())
    instance = dagster_instance(load_settings())
    key = sweep_lease_key(TENANT, SLUG)

    first = run_sweeps(load_settings(), load_tenants(drill.tenants), instance, force=True)
    assert [r["outcome"] for r in first] == [codes.OUTCOME_COMPLETE], first
    state, _ = _check_on_disk(drill, generation)
    assert fenced_ids(state.ledger, TENANT, SLUG, generation), "the poison file is fenced"
    drill.ever_declared |= {c.chunk_id for c in state.ledger.declared_chunks(TENANT, SLUG)}

    trials = list(TRIALS)
    drill.rng.shuffle(trials)
    for number, point in enumerate(trials, start=1):
        external = point.startswith("external")
        head = drill.move(touch_poison=point == "fence", bump=external)
        drill.server.configure(latency_s=0.03 if external else 0.0)
        # A move without a parser bump re-embeds >= 4 batches of 8 (3 edited files and a
        # renamed one, 9 chunks each), so these points are always reached.
        nth = {
            "parse": drill.rng.randint(1, FILES),
            "mid-write": drill.rng.randint(1, 3),
            "after-write": drill.rng.randint(1, 3),
        }.get(point, 1)
        if point == "reclaim":
            # Sweep the move first: the previous generations' rows become reclaimable.
            (pre,) = run_sweeps(load_settings(), load_tenants(drill.tenants), instance, force=True)
            assert pre["outcome"] == codes.OUTCOME_COMPLETE, pre
            nth = drill.rng.randint(1, 3)
        reached = drill.root / f"reached-{number}"
        before = _envelope_time()
        started = time.monotonic()
        proc = _launch(drill, point, nth, reached)
        if external:
            where = _kill_from_outside(drill, proc, point, before)
        else:
            where = f"{point} #{nth}"
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == -signal.SIGKILL, (point, proc.returncode, err[-3000:])
        if not external:
            assert reached.read_text() == point, f"{point}: killed elsewhere"
        killed_after = time.monotonic() - started

        # On disk, right after the kill: still no hole, every row stamped and contained.
        state, rows = _check_on_disk(drill, generation)
        drill.ever_declared |= {c.chunk_id for c in state.ledger.declared_chunks(TENANT, SLUG)}
        rows_at_kill = len(repo_ids(rows, TENANT, SLUG))
        left = leases.current(state.ledger, key)
        stale = left is not None and left.expires_at > time.time()

        # The next sweep completes: the dead run's lease does not block it.
        settings = load_settings()
        (result,) = run_sweeps(settings, load_tenants(drill.tenants), instance, force=True)
        assert result["outcome"] == codes.OUTCOME_COMPLETE, (point, result)
        if stale:
            assert result["lease"]["otherHolder"] == left.holder, result["lease"]

        state, rows = _check_on_disk(drill, generation)
        ledger, store = state.ledger, state.store
        declared = {c.chunk_id for c in ledger.declared_chunks(TENANT, SLUG)}
        drill.ever_declared |= declared
        gen = ledger.declared_generation(TENANT, SLUG)
        assert gen["revision"] == head and gen["parser_version"] == f"1.0.{drill.parser_patch}"
        repo_state = ledger.repo_state(TENANT, SLUG)
        assert repo_state["last_ingested_rev"] == head
        fenced = fenced_ids(ledger, TENANT, SLUG, generation)
        present = repo_ids(rows, TENANT, SLUG)
        assert declared <= present | fenced, f"{point}: {len(declared - present - fenced)} missing"
        assert not (present & fenced & declared)
        # Nothing but generations this repo declared: no id from nowhere.
        assert present <= drill.ever_declared
        assert not census_problems(ledger, TENANT, SLUG), census_problems(ledger, TENANT, SLUG)
        sample = drill.rng.sample(sorted(declared - fenced), 5)
        assert not _vector_index_agrees(store, sample), point
        free = leases.current(ledger, key)
        assert free is not None and free.expires_at <= time.time(), "the lease is released"
        if point == "reclaim":
            # The next reclaim finishes what the killed one started: exactly the declared
            # generation is left (the poison chunk stays fenced, never embedded).
            release_store()
            (report,) = run_reconciliation(
                load_settings(), load_tenants(drill.tenants), instance, apply=True
            )
            assert report["success"] and report["reclaimed"] > 0, report
            assert all(c["passed"] for c in report["checks"].values()), report["checks"]
            state, rows = _check_on_disk(drill, generation)
            assert repo_ids(rows, TENANT, SLUG) == declared - fenced
        drill.log.append(
            {
                "trial": number,
                "point": where,
                "killedAfterS": round(killed_after, 2),
                "rowsAtKill": rows_at_kill,
                "staleLease": stale,
                "declared": len(declared),
                "newRows": result["counts"].get("embedded"),
            }
        )
        release_store()
    print("\nkill -9 trials:")
    for entry in drill.log:
        print("  ", entry)
    assert len(drill.log) == len(TRIALS) == 10
