"""Model-based simulation of the invariants (hypothesis ``RuleBasedStateMachine``).

Random sequences of what users, operators and providers do — edit, add, delete and
rename files; bump a parser; add or remove an exclude glob; change a tenant's
declaration; declare or undeclare a repo; switch the fault server between healthy, slow,
refusing and resetting; put content-poison, provider-killing and oversized content in
files; sweep (whole, or ended by a crash after a step, a cancelled lane, a failing store,
or through Dagster); reconcile with reclaim on or off — drive the real pipeline (git
repos, Chroma, the SQLite ledger, the fault server over HTTP). After every step the
invariants of ``invariants.py`` must hold: no hole, containment (and a step for one tenant
changes no row of the other), stamps, evidence, census. At the end, with the faults
stopped, a bounded number of rounds of sweeps and reclaims must reach exactly the
declared generation with every non-fenced chunk embedded.

Profiles (``HYPOTHESIS_PROFILE``): ``ci`` (default; derandomized, a few dozen examples,
~2-3 minutes on 2 cores) and ``soak`` (``make soak``: hundreds of examples, random).
"""

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from neo_assets.core import codes
from neo_assets.generations.serving import configured_generation
from neo_assets_tests.drills.harness import release_store
from neo_assets_tests.drills.invariants import (
    HoleTracker,
    all_fences,
    census_problems,
    containment_problems,
    converged_problems,
    fence_evidence_problems,
    read_rows,
    snapshot,
    stamp_problems,
    unchanged_problems,
    yielded_paths,
)
from neo_assets_tests.drills.model import (
    CONTENT_KINDS,
    EXCLUDES,
    FAULT_MODES,
    PATHS,
    REPOS,
    SWEEP_ENDINGS,
    World,
    sim_env,
)
from neo_assets_tests.fakes.fixtures import fault_server_fixture
from neo_assets_tests.fakes.supervisor import FaultServerSupervisor

CONVERGENCE_ROUNDS = 6
TENANTS = ("acme", "globex")

settings.register_profile(
    "ci",
    max_examples=30,
    stateful_step_count=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)
settings.register_profile(
    "dev",
    max_examples=int(os.environ.get("SIM_EXAMPLES", "3")),
    stateful_step_count=8,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)
settings.register_profile(
    "soak",
    max_examples=300,
    stateful_step_count=30,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)

fault_server = fault_server_fixture(scope="module", dimensions=32, restart_delay_s=0.05)


class Simulation(RuleBasedStateMachine):
    """One example = one fresh world (NEO_HOME, repos, tenants file) and a random run."""

    server: FaultServerSupervisor  # set by the test before running
    stats: dict[str, int]
    seconds: dict[str, float]

    def __init__(self) -> None:
        super().__init__()
        root = Path(tempfile.mkdtemp(prefix="neo-sim-"))
        os.environ["NEO_HOME"] = str(root / "home")
        os.environ["DAGSTER_HOME"] = str(root / "home" / "dagster")
        os.environ["NEO_TENANTS_FILE"] = str(root / "tenants.yaml")
        release_store()
        self.server.reset()
        self.world = World(root, self.server)
        self.tracker = HoleTracker()
        self.generation = configured_generation(self.world.settings())
        Simulation.stats["examples"] += 1

    # ------------------------------------------------------------------ helpers
    def rows(self) -> dict:
        return read_rows(self.world.kb.store)

    def ledger(self):  # noqa: ANN201
        return self.world.kb.ledger

    def others(self, tenant: str) -> dict[str, dict]:
        rows = self.rows()
        return {t: snapshot(rows, t) for t in TENANTS if t != tenant}

    def assert_others_unchanged(self, tenant: str, before: dict[str, dict]) -> None:
        after = self.others(tenant)
        problems = []
        for other, snap in before.items():
            problems += unchanged_problems(snap, after[other], f"{tenant}'s step, {other}'s rows")
        assert not problems, problems

    def begin(self) -> None:
        self.t0 = time.perf_counter()

    def step(self, name: str) -> None:
        Simulation.stats[name] = Simulation.stats.get(name, 0) + 1
        spent = time.perf_counter() - getattr(self, "t0", time.perf_counter())
        Simulation.seconds[name] = Simulation.seconds.get(name, 0.0) + spent

    # Hypothesis picks among rules evenly, so the mix is set by how many rules each kind of
    # step has: trees change and sweeps/reclaims run often; declarations and faults change
    # now and then (one rule each, with the variant drawn inside).

    # ------------------------------------------------------------------ rules: the trees
    @initialize()
    def start(self) -> None:
        """Every example starts from a swept knowledge base: rows that could be lost."""
        self.begin()
        for key in REPOS:
            for path, n in (("b.txt", 1), ("c.py", 2)):
                self.world.write_file(key, path, "plain", n)
            result = self.world.sweep(key, "whole")
            assert result is not None and result["outcome"] == codes.OUTCOME_COMPLETE, result
        self.step("init")

    @rule(
        key=st.sampled_from(REPOS),
        path=st.sampled_from(PATHS),
        kind=st.sampled_from(CONTENT_KINDS + ("plain",) * 6),
        n=st.integers(0, 4),
    )
    def write_file(self, key: str, path: str, kind: str, n: int) -> None:
        self.begin()
        before = self.rows()
        self.world.write_file(key, path, kind, n)
        self.step(f"content_{self.world.repos[key].files[path][0]}")
        after = self.rows()  # a file change alone touches no row of anyone
        for tenant in TENANTS:
            assert not unchanged_problems(snapshot(before, tenant), snapshot(after, tenant), key)
        self.step("write_file")

    @rule(key=st.sampled_from(REPOS), n=st.integers(1, 4), data=st.data())
    def edit_file(self, key: str, n: int, data: st.DataObject) -> None:
        self.begin()
        files = self.world.repos[key].files
        if files:
            path = data.draw(st.sampled_from(sorted(files)))
            kind, old = files[path]
            self.world.write_file(key, path, kind, (old + n) % 7)
            self.step("edit_file")

    @rule(key=st.sampled_from(REPOS), rename=st.booleans(), data=st.data())
    def delete_or_rename(self, key: str, rename: bool, data: st.DataObject) -> None:
        self.begin()
        repo = self.world.repos[key]
        if not repo.files:
            return
        src = data.draw(st.sampled_from(sorted(repo.files)))
        free = [p for p in PATHS if p not in repo.files]
        if not rename or not free:
            self.world.delete_file(key, src)
            self.step("delete_file")
            return
        same_suffix = [p for p in free if p.rsplit(".", 1)[-1] == src.rsplit(".", 1)[-1]]
        self.world.rename_file(key, src, data.draw(st.sampled_from(same_suffix or free)))
        self.step("rename_file")

    # ------------------------------------------------------------------ rules: declarations
    @rule(
        change=st.sampled_from(("bump_parser", "exclude", "config", "beta")),
        key=st.sampled_from(REPOS),
        glob=st.sampled_from(EXCLUDES),
        tenant=st.sampled_from(TENANTS),
    )
    def change_declaration(self, change: str, key: str, glob: str, tenant: str) -> None:
        self.begin()
        if change == "bump_parser":
            self.world.bump_parser(key)
        elif change == "exclude":
            self.world.toggle_exclude(key, glob)
        elif change == "config":
            self.world.change_config(tenant)
        else:
            self.world.toggle_beta()
        self.step(f"declaration_{change}")

    # ------------------------------------------------------------------ rules: the provider
    @rule(mode=st.sampled_from(FAULT_MODES))
    def set_fault(self, mode: str) -> None:
        self.begin()
        self.world.set_fault(mode)
        self.step(f"fault_{mode}")

    # ------------------------------------------------------------------ rules: the pipeline
    # Sweeps and reconciliations are what the invariants are about, so they get several
    # rules each (hypothesis picks among rules evenly).
    @rule(key=st.sampled_from(REPOS))
    def sweep(self, key: str) -> None:
        self.begin()
        self._sweep(key, "whole", 0)

    @rule(
        key=st.sampled_from(REPOS),
        ending=st.sampled_from(SWEEP_ENDINGS[1:-1]),
        k=st.integers(0, 3),
    )
    def sweep_interrupted(self, key: str, ending: str, k: int) -> None:
        self.begin()
        self._sweep(key, ending, k)

    @rule(
        key=st.sampled_from(REPOS),
        ending=st.sampled_from(SWEEP_ENDINGS[1:-1]),
        k=st.integers(0, 3),
    )
    def sweep_interrupted_again(self, key: str, ending: str, k: int) -> None:
        self.begin()
        self._sweep(key, ending, k)

    @rule(key=st.sampled_from(REPOS), dagster=st.integers(0, 7))
    def sweep_maybe_through_dagster(self, key: str, dagster: int) -> None:
        self.begin()
        self._sweep(key, "dagster" if dagster == 7 else "whole", 0)

    def _declared_by_path(self, repo: Any) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for c in self.ledger().declared_chunks(repo.tenant, repo.slug):
            out.setdefault(c.source_path, set()).add(c.chunk_id)
        return out

    def _sweep(self, key: str, ending: str, k: int) -> None:
        repo = self.world.repos[key]
        if not repo.declared:
            return
        before = self.others(repo.tenant)
        result = self.world.sweep(key, ending, k)
        self.assert_others_unchanged(repo.tenant, before)
        # The model: the envelope yields exactly the files the declaration does not exclude.
        got = yielded_paths(self.ledger(), repo.tenant, repo.slug)
        assert got == repo.yielded(), (key, got, repo.yielded())
        if ending != "crash-after-envelope":
            # ... and the declared generation is what a full parse of those files gives,
            # however much of it the sweep reused from the previous one.
            declared = {c.chunk_id for c in self.ledger().declared_chunks(repo.tenant, repo.slug)}
            assert declared == self.world.expected_declared(key), key
        if result is not None:
            assert result["outcome"] in (codes.OUTCOME_COMPLETE, codes.OUTCOME_DEFERRED), result
            if result["outcome"] == codes.OUTCOME_COMPLETE:
                gen = self.ledger().declared_generation(repo.tenant, repo.slug)
                assert gen["parser_version"] == f"1.0.{repo.parser_patch}"
        self.step(f"sweep_{ending}")
        if result is not None:
            self.step(f"outcome_{result['outcome']}")
            if result.get("deferredCauseCode"):
                self.step(f"cause_{result['deferredCauseCode']}")

    @rule(tenant=st.sampled_from(TENANTS), reclaim=st.booleans(), write=st.booleans())
    def reconcile(self, tenant: str, reclaim: bool, write: bool) -> None:
        self.begin()
        self._reconcile(tenant, reclaim, write)

    @rule(tenant=st.sampled_from(TENANTS))
    def reclaim(self, tenant: str) -> None:
        self.begin()
        self._reconcile(tenant, True, True)

    @rule(tenant=st.sampled_from(TENANTS))
    def reclaim_again(self, tenant: str) -> None:
        self.begin()
        self._reconcile(tenant, True, True)

    def _reconcile(self, tenant: str, reclaim: bool, write: bool) -> None:
        before = self.others(tenant)
        report = self.world.reconcile(tenant, reclaim=reclaim, write=write)
        self.assert_others_unchanged(tenant, before)
        assert report["planForeignRows"] == 0 and report["foreign"] == 0, report
        assert report["planHoles"]["count"] == 0 or report["reclaimed"] == 0, report
        if not (reclaim and write):
            assert report["reclaimed"] == 0, report
        self.step("reconcile_reclaim" if reclaim and write else "reconcile_classify")
        Simulation.stats["reclaimed_rows"] = (
            Simulation.stats.get("reclaimed_rows", 0) + report["reclaimed"]
        )

    # ------------------------------------------------------------------ the invariants
    @invariant()
    def invariants_hold(self) -> None:
        started = time.perf_counter()
        world = self.world
        ledger = self.ledger()
        rows = self.rows()
        problems = stamp_problems(rows.values())
        problems += containment_problems(rows.values(), world.owners)
        problems += self.tracker.check(ledger, rows, world.declared_keys(), self.generation)
        problems += fence_evidence_problems(ledger)
        for repo in world.repos.values():
            if repo.declared and repo.settled:
                problems += census_problems(ledger, repo.tenant, repo.slug)
        assert not problems, problems
        Simulation.seconds["invariants"] = (
            Simulation.seconds.get("invariants", 0.0) + time.perf_counter() - started
        )

    # ------------------------------------------------------------------ convergence
    def converge(self) -> int:
        """Faults stop; an operator lifts any freeze; rounds of sweeps and reclaims until
        the collection is exactly the declared generation (bounded)."""
        world = self.world
        world.set_fault("healthy")
        problems: list[str] = []
        for round_number in range(1, CONVERGENCE_ROUNDS + 1):
            if world.unfreeze():
                self.step("converge_lifted_freeze")
            for key in REPOS:
                if world.repos[key].declared:
                    world.sweep(key, "whole")
            for tenant in TENANTS:
                report = world.reconcile(tenant, reclaim=True)
                Simulation.stats["converge_reclaimed_rows"] = (
                    Simulation.stats.get("converge_reclaimed_rows", 0) + report["reclaimed"]
                )
            self.invariants_hold()
            declared = {
                t: {r.slug for r in world.repos.values() if r.tenant == t and r.declared}
                for t in TENANTS
            }
            problems = converged_problems(
                self.ledger(), self.rows(), declared, world.revisions(), self.generation
            )
            if not problems:
                for fence in all_fences(self.ledger()):
                    self.step(f"converged_fence_{fence['disposition']}")
                return round_number
        raise AssertionError(f"not converged after {CONVERGENCE_ROUNDS} rounds: {problems}")

    def teardown(self) -> None:
        try:
            if sys.exc_info()[0] is not None:
                return  # a step failed: that is the finding; converging would hide it
            started = time.perf_counter()
            rounds = self.converge()
            Simulation.seconds["converge"] = (
                Simulation.seconds.get("converge", 0.0) + time.perf_counter() - started
            )
            Simulation.stats[f"converged_in_{rounds}"] = (
                Simulation.stats.get(f"converged_in_{rounds}", 0) + 1
            )
        finally:
            self.world.close()


# The ci profile (30 examples of up to 25 steps, ~75 s here) gets room for a slower CI
# machine; the soak profile runs for ~15-20 min on purpose and has no timeout.
@pytest.mark.timeout(0 if os.environ.get("HYPOTHESIS_PROFILE") == "soak" else 900)
def test_the_invariants_hold_under_random_schedules(
    fault_server: FaultServerSupervisor, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith("NEO_"):
            monkeypatch.delenv(name)
    for key, value in sim_env(fault_server).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("NEO_HOME", os.environ.get("NEO_HOME", "/nonexistent"))
    monkeypatch.setenv("DAGSTER_HOME", os.environ.get("DAGSTER_HOME", "/nonexistent"))
    Simulation.server = fault_server
    Simulation.stats = {"examples": 0}
    Simulation.seconds = {}
    # Only this module's profiles apply here (another suite's profile name falls back).
    name = os.environ.get("HYPOTHESIS_PROFILE", "ci")
    name = name if name in ("ci", "soak", "dev") else "ci"
    profile = settings.get_profile(name)
    try:
        run_state_machine_as_test(Simulation, settings=profile)
    finally:
        print(f"\nsimulation ({name}):")
        for key, value in sorted(Simulation.stats.items()):
            print(f"  {key}: {value}")
        print("  seconds:", {k: round(v, 1) for k, v in sorted(Simulation.seconds.items())})
        release_store()
