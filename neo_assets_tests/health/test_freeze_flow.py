"""The frozen collection end to end, against the real fault-injecting server subprocess.

A provider switched to another dimension freezes the write path through a real sweep
(``run_sweeps``: Dagster runs, real git repo, real Chroma); sweeps then defer with the
frozen cause and write nothing; the re-probe (durable record, own back-off, own deadline
leaf) keeps the freeze on every inconclusive outcome and lifts it only on a valid vector
of the collection's dimension; the cap contains it and ``neo-assets unfreeze`` lifts it.
Probes are counted where they land: at the server.
"""

import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from neo_assets.cli.launch import run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.core import codes
from neo_assets.core.ids.stamps import tenant_filter
from neo_assets.defs.resources import default_resources
from neo_assets.embedding.cancel import CancelScope
from neo_assets.health import records as store
from neo_assets.health.canary import run_canary
from neo_assets.health.defs import freeze_reprobe_sensor
from neo_assets.health.freezing import (
    blocking_freeze,
    freeze_now,
    freeze_policy,
    observe_sweep,
    unfreeze,
)
from neo_assets.health.reprobe import ReprobeReport, reprobe_async, run_due_reprobe
from neo_assets.health.rules.freeze import (
    FREEZE_CLEAR,
    FREEZE_CONTAINED,
    FREEZE_FROZEN,
    LIFTED_BY_OPERATOR,
    LIFTED_BY_REPROBE,
    TRIGGER_CIRCUIT_STREAK,
    FreezeRecord,
    FreezeTrigger,
)
from neo_assets.status.report import build_status
from neo_assets.sweep.rules.scheduling import DUE_RECOVERY_HEALTHY
from neo_assets.sweep.rules.summary import LaneSummary, SweepCounts
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.health.conftest import DIM, HealthEnv
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_800_000_000.0
FIRST_PROBE = T0 + 60.0  # the default initial re-probe back-off after a freeze at T0
# Long enough for a request to reach a busy server, far below the server's 30 s hang.
DEADLINE_MS = 1500


def freeze_at(env: HealthEnv, when: float, trigger: str = "dimension-mismatch") -> FreezeRecord:
    settings = env.settings
    return freeze_now(
        env.ledger,
        settings.store.collection_name,
        FreezeTrigger(trigger),
        when,
        freeze_policy(settings),
    )


def record(env: HealthEnv) -> FreezeRecord:
    stored = store.freeze_record(env.ledger, env.settings.store.collection_name)
    assert stored is not None
    return stored


def reprobe(env: HealthEnv, at: float) -> ReprobeReport:
    return run_due_reprobe(env.settings, env.ledger, clock=lambda: at)


def assert_stayed_frozen(env: HealthEnv, report: ReprobeReport, code: str, at: float) -> None:
    """One probe ran, proved nothing, and the record backs off, still frozen."""
    assert report.probed and not report.lifted
    stored = record(env)
    assert stored.state == FREEZE_FROZEN and stored.attempts == 1
    assert stored.next_probe_at == at + 60.0 and stored.lifted_at is None
    assert stored.last_probe is not None and stored.last_probe["code"] == code
    assert stored.last_probe["healthy"] is False
    assert blocking_freeze(env.ledger, env.settings.store.collection_name) is not None


# ------------------------------------------------------------------ inconclusive classes
def _hang_and_expect_disconnect(env: HealthEnv, run: Any) -> ReprobeReport:
    env.srv.configure(mode="hang", hang_s=30)
    before = env.srv.stats()
    report = run()
    env.srv.wait_for(
        lambda s: s["client_disconnects"] >= before["client_disconnects"] + 1,
        timeout_s=30,
        what="the re-probe's disconnect",
    )
    after = env.settle()
    assert after["requests_received"] == before["requests_received"] + 1
    assert after["requests_completed"] == before["requests_completed"]
    return report


def test_own_deadline_expiry_keeps_the_freeze(env: HealthEnv) -> None:
    freeze_at(env, T0)
    env.set(recovery_freeze_reprobe_timeout_ms=DEADLINE_MS)
    report = _hang_and_expect_disconnect(env, lambda: reprobe(env, FIRST_PROBE))
    assert_stayed_frozen(env, report, codes.EMBEDDING_PROBE_TIMEOUT, FIRST_PROBE)
    last = record(env).last_probe
    assert last is not None and last["timeoutMs"] == DEADLINE_MS
    assert last["operationLabel"] == "freeze-reprobe:attempt-1"


def test_an_upstream_abort_keeps_the_freeze(env: HealthEnv) -> None:
    freeze_at(env, T0)
    env.set(recovery_freeze_reprobe_timeout_ms=20_000)

    async def aborted() -> ReprobeReport:
        upstream = CancelScope(label="sensor-tick")
        base = env.requests()

        async def abort_once_received() -> None:
            # Abort upstream while the request is in flight at the server.
            while env.requests() < base + 1:
                await asyncio.sleep(0.02)
            upstream.cancel(codes.ABORT_ERR)

        aborter = asyncio.create_task(abort_once_received())
        try:
            return await reprobe_async(
                env.settings, env.ledger, clock=lambda: FIRST_PROBE, upstream=upstream
            )
        finally:
            aborter.cancel()

    report = _hang_and_expect_disconnect(env, lambda: asyncio.run(aborted()))
    assert_stayed_frozen(env, report, codes.ABORT_ERR, FIRST_PROBE)
    assert record(env).last_probe["failureCode"] == codes.KB_VECTOR_EMBED_ABORTED  # type: ignore[index]


@pytest.mark.parametrize(
    ("provider", "code"),
    [
        ("openai_compatible", codes.OPENAI_COMPATIBLE_REQUEST_TIMEOUT),
        ("ollama", codes.PROVIDER_TIMEOUT),
    ],
)
def test_a_provider_timeout_keeps_the_freeze(env: HealthEnv, provider: str, code: str) -> None:
    freeze_at(env, T0)
    env.set(
        embedding_provider=provider,
        embedding_request_timeout_ms=DEADLINE_MS,
        recovery_freeze_reprobe_timeout_ms=20_000,
    )
    report = _hang_and_expect_disconnect(env, lambda: reprobe(env, FIRST_PROBE))
    assert_stayed_frozen(env, report, code, FIRST_PROBE)


def test_a_refused_connection_keeps_the_freeze(env: HealthEnv) -> None:
    freeze_at(env, T0)
    env.srv.refuse()
    before = env.requests()
    report = reprobe(env, FIRST_PROBE)
    assert env.requests() == before  # nothing accepted the connection
    assert_stayed_frozen(env, report, codes.KB_VECTOR_EMBED_CONNECTION_REFUSED, FIRST_PROBE)


def test_a_reset_connection_keeps_the_freeze(env: HealthEnv) -> None:
    freeze_at(env, T0)
    env.srv.configure(mode="reset")
    before = env.srv.stats()
    report = reprobe(env, FIRST_PROBE)
    assert env.srv.stats()["requests_closed"] == before["requests_closed"] + 1
    assert_stayed_frozen(env, report, codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED, FIRST_PROBE)


def test_any_other_provider_failure_keeps_the_freeze(env: HealthEnv) -> None:
    freeze_at(env, T0)
    env.srv.configure(mode="error500")
    report = reprobe(env, FIRST_PROBE)
    assert_stayed_frozen(env, report, codes.KB_VECTOR_EMBED_UNCLASSIFIED, FIRST_PROBE)


def test_an_operator_who_unfreezes_during_a_probe_is_not_overwritten(env: HealthEnv) -> None:
    freeze_at(env, T0)
    env.set(recovery_freeze_reprobe_timeout_ms=DEADLINE_MS)
    collection = env.settings.store.collection_name

    async def race() -> ReprobeReport:
        base = env.requests()

        async def operator() -> None:
            while env.requests() < base + 1:  # the probe is in flight at the server
                await asyncio.sleep(0.02)
            _, lifted = unfreeze(env.ledger, collection, FIRST_PROBE + 0.5)
            assert lifted is not None

        task = asyncio.create_task(operator())
        try:
            return await reprobe_async(env.settings, env.ledger, clock=lambda: FIRST_PROBE)
        finally:
            await task

    report = _hang_and_expect_disconnect(env, lambda: asyncio.run(race()))
    assert report.decision == "raced" and report.probed and not report.lifted
    stored = record(env)
    assert stored.state == FREEZE_CLEAR and stored.lifted_by == LIFTED_BY_OPERATOR
    # A stale writer changes nothing.
    assert not store.write_freeze(env.ledger, replace(stored, state=FREEZE_FROZEN), 0)
    assert record(env).state == FREEZE_CLEAR


# ------------------------------------------------------------------ cadence and leaves
def _tick() -> str:
    with dg.build_sensor_context(resources=default_resources()) as context:
        result = freeze_reprobe_sensor(context)
    assert isinstance(result, dg.SkipReason)
    return result.skip_message or ""


def test_the_sensor_probes_only_on_due_ticks(env: HealthEnv) -> None:
    env.srv.configure(dimensions=DIM // 2)  # still wrong: a probe cannot lift it
    base = env.requests()
    assert _tick().startswith("no re-probe (none)")  # nothing frozen: no probe
    frozen = freeze_at(env, time.time())  # due in 60 s
    for _ in range(3):
        assert _tick().startswith("no re-probe (wait)")
    assert env.requests() == base  # three ticks, zero probes
    # Make it due (as if the back-off had passed): exactly one probe, then not due again.
    due = replace(frozen, next_probe_at=time.time() - 1.0)
    assert store.write_freeze(env.ledger, due, frozen.version)
    assert "attempt 1" in _tick()
    assert env.requests() == base + 1
    for _ in range(3):
        assert _tick().startswith("no re-probe (wait)")
    assert env.requests() == base + 1
    stored = record(env)
    assert stored.state == FREEZE_FROZEN and stored.attempts == 1
    assert stored.last_probe["code"] == codes.KB_VECTOR_EMBED_INVALID_VECTORS  # type: ignore[index]
    # A contained record is never probed, however long it waits.
    held = replace(stored, state=FREEZE_CONTAINED, next_probe_at=0.0)
    assert store.write_freeze(env.ledger, held, stored.version)
    assert _tick().startswith("no re-probe (wait)")
    assert env.requests() == base + 1


def test_the_cap_contains_and_unfreeze_lifts(env: HealthEnv) -> None:
    env.set(recovery_freeze_reprobe_max_attempts=2)
    env.srv.configure(dimensions=DIM // 2)
    freeze_at(env, T0)
    base = env.requests()
    first = reprobe(env, FIRST_PROBE)
    assert first.probed and record(env).state == FREEZE_FROZEN
    assert reprobe(env, FIRST_PROBE + 1).decision == "wait"  # not due: no probe
    second = reprobe(env, FIRST_PROBE + 120)
    assert second.probed and not second.lifted
    stored = record(env)
    assert stored.state == FREEZE_CONTAINED and stored.attempts == 2
    assert stored.next_probe_at is None
    assert env.requests() == base + 2
    env.srv.reset()  # even a healthy provider is not probed: an operator decides
    assert reprobe(env, T0 + 10**7).decision == "wait"
    assert env.requests() == base + 2

    done = _cli(["unfreeze", "--json"])
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["lifted"] is True and doc["previousState"] == FREEZE_CONTAINED
    assert doc["freeze"]["state"] == FREEZE_CLEAR
    lifted = record(env)
    assert lifted.state == FREEZE_CLEAR and lifted.lifted_by == LIFTED_BY_OPERATOR
    assert blocking_freeze(env.ledger, env.settings.store.collection_name) is None
    again = _cli(["unfreeze", "--json"])
    assert again.returncode == 0 and json.loads(again.stdout)["lifted"] is False


def test_each_deadline_leaf_is_its_own_and_read_at_use(env: HealthEnv) -> None:
    env.srv.configure(mode="hang", hang_s=30)
    settings = env.settings  # loaded once: the leaves must still be read when probing
    freeze_at(env, T0)
    env.set(recovery_freeze_reprobe_timeout_ms=250, canary_timeout_ms=150)
    first = run_due_reprobe(settings, env.ledger, clock=lambda: FIRST_PROBE)
    canary = run_canary(settings, env.ledger, force=True)
    env.set(recovery_freeze_reprobe_timeout_ms=600)
    second = run_due_reprobe(settings, env.ledger, clock=lambda: FIRST_PROBE + 120)
    assert first.outcome is not None and second.outcome is not None
    assert (first.outcome.timeout_ms, second.outcome.timeout_ms) == (250, 600)
    assert second.outcome.elapsed_ms >= 600
    assert canary.record.timeout_ms == 150
    assert record(env).last_probe["timeoutMs"] == 600  # type: ignore[index]
    env.settle()


def test_the_circuit_opening_in_k_consecutive_sweeps_freezes(env: HealthEnv) -> None:
    env.set(recovery_freeze_circuit_sweeps=2)
    settings, ledger = env.settings, env.ledger
    opened = LaneSummary(
        errors=({"code": codes.KB_VECTOR_EMBED_CIRCUIT_OPEN, "message": "", "details": {}},)
    )
    healthy = LaneSummary(counts=SweepCounts(embedded=3))
    assert observe_sweep(ledger, settings, opened, T0) is None
    assert observe_sweep(ledger, settings, healthy, T0 + 1) is None  # the streak resets
    assert observe_sweep(ledger, settings, opened, T0 + 2) is None
    froze = observe_sweep(ledger, settings, opened, T0 + 3)
    assert froze is not None and froze["trigger"] == TRIGGER_CIRCUIT_STREAK
    assert record(env).state == FREEZE_FROZEN and record(env).circuit_streak == 2
    lifted = reprobe(env, T0 + 3 + 60)  # the provider answers well: lifted, K starts over
    assert lifted.lifted and record(env).circuit_streak == 0
    assert observe_sweep(ledger, settings, opened, T0 + 100) is None
    assert record(env).state == FREEZE_CLEAR


# ------------------------------------------------------------------ the sweep, end to end
def _cli(args: list[str]) -> subprocess.CompletedProcess:
    proc_env = {k: v for k, v in os.environ.items() if not k.startswith("DAGSTER_")}
    return subprocess.run(
        [sys.executable, "-m", "neo_assets.cli", *args],
        cwd=ROOT,
        env=proc_env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_switched_dimension_freezes_sweeps_until_a_due_reprobe_lifts_it(
    env: HealthEnv, tmp_path: Path
) -> None:
    repo = GitRepo(tmp_path / "repo")
    repo.write("core.py", "def render(x):\n    return x * 2\n\n\nclass Widget:\n    pass\n")
    repo.write("util.py", "def helper(a, b):\n    return a + b\n")
    repo.commit("one", when=1_700_000_000)
    tenants_file = write_tenants(tmp_path / "tenants.yaml", {"acme": [repo_entry("w", repo.path)]})
    env.set(tenants_file=tenants_file)
    (tmp_path / "dagster").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    settings = load_settings()
    tenants = load_tenants(tenants_file)
    chroma = env.kb.store

    def sweep() -> dict[str, Any]:
        (result,) = run_sweeps(settings, tenants, instance)
        return result

    try:
        first = sweep()
        assert first["outcome"] == codes.OUTCOME_COMPLETE, first
        rows = chroma.count()
        assert rows > 0

        # The provider now answers another dimension: the sweep freezes the write path.
        env.srv.configure(dimensions=DIM // 2)
        repo.write("more.py", "def more():\n    return 'more'\n")
        repo.commit("two", when=1_700_000_100)
        second = sweep()
        assert second["outcome"] == codes.OUTCOME_DEFERRED, second
        assert chroma.count() == rows
        frozen = record(env)
        assert frozen.state == FREEZE_FROZEN and frozen.trigger == "dimension-mismatch"
        assert frozen.trigger_detail["observedDimensions"] == [DIM // 2]

        # While frozen a sweep embeds nothing: no request, no row, the frozen cause.
        repo.write("most.py", "def most():\n    return 'most'\n")
        repo.commit("three", when=1_700_000_200)
        before = env.requests()
        third = sweep()
        assert third["outcome"] == codes.OUTCOME_DEFERRED, third
        assert third["deferredCauseCode"] == codes.KB_COLLECTION_FROZEN
        assert third["counts"]["embedded"] == 0 and third["counts"]["requests"] == 0
        assert env.requests() == before and chroma.count() == rows
        snap = build_status(settings, tenants, env.ledger, chroma)
        assert snap["freeze"]["state"] == FREEZE_FROZEN and snap["freeze"]["frozen"] is True
        assert snap["repos"][0]["deferredCauseCode"] == codes.KB_COLLECTION_FROZEN

        # A due re-probe against the still-wrong provider stays frozen.
        assert frozen.next_probe_at is not None
        still = reprobe(env, frozen.next_probe_at)
        assert still.probed and not still.lifted
        assert record(env).last_probe["dimension"] == DIM // 2  # type: ignore[index]
        assert env.requests() == before + 1

        # Fixed: the next due re-probe lifts it, and the next sweep is due at once.
        env.srv.configure(dimensions=None)
        due_at = record(env).next_probe_at
        assert due_at is not None
        lifted = reprobe(env, due_at)
        assert lifted.lifted and record(env).lifted_by == LIFTED_BY_REPROBE
        fourth = sweep()
        assert fourth["outcome"] == codes.OUTCOME_COMPLETE, fourth
        assert fourth["dueReason"] == DUE_RECOVERY_HEALTHY
        assert chroma.count() > rows
        written = chroma.iter_rows(tenant_filter("acme", "w"))
        paths = {r["metadata"]["sourcePath"] for r in written}
        assert paths == {"core.py", "util.py", "more.py", "most.py"}
    finally:
        instance.dispose()
