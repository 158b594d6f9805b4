"""The health canary against the real fault-injecting server subprocess.

Every probe travels the real path: OpenAI-compatible provider → httpx → socket → the
server process, whose counters say what it received, what it saw disconnect, and what is
still open afterwards.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from neo_assets.core import codes
from neo_assets.core.ids.config_digest import repo_declaration_digest
from neo_assets.definitions import defs
from neo_assets.generations.serving import configured_generation
from neo_assets.health import records as store
from neo_assets.health.canary import run_canary
from neo_assets.health.rules.canary import CANARY_OPERATION_LABEL
from neo_assets.sources.revision import current_revision
from neo_assets.status.report import build_status
from neo_assets.sweep.due import declared_repos, evaluate
from neo_assets.sweep.rules.scheduling import DUE_RECOVERY_HEALTHY
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.health.conftest import DIM, HealthEnv
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_800_000_000.0
DEADLINE_MS = 1500


def test_a_canary_against_a_hanging_server_returns_at_its_deadline(env: HealthEnv) -> None:
    env.srv.configure(mode="hang", hang_s=30)
    # Long enough for the request to reach a busy server, far below the 30 s hang.
    env.set(canary_timeout_ms=DEADLINE_MS)
    before = env.srv.stats()
    started = time.monotonic()
    result = run_canary(env.settings, env.ledger)
    waited = time.monotonic() - started
    record = result.record
    assert not result.cached and not record.healthy
    assert record.code == codes.EMBEDDING_PROBE_TIMEOUT
    assert record.cause_code == codes.EMBEDDING_PROBE_TIMEOUT
    assert record.operation_label == CANARY_OPERATION_LABEL
    assert record.timeout_ms == DEADLINE_MS and record.elapsed_ms >= DEADLINE_MS
    assert record.dimension is None
    # Bounded by its own deadline, not by the server's 30 s hang.
    assert waited < 20
    # The server saw the request arrive and its client go away; nothing stays open.
    after = env.srv.wait_for(
        lambda s: s["client_disconnects"] >= before["client_disconnects"] + 1,
        timeout_s=30,
        what="the canary's disconnect",
    )
    assert after["requests_received"] == before["requests_received"] + 1
    idle = env.settle()
    assert idle["requests_completed"] == before["requests_completed"]
    assert idle["open_requests"] == 0 and idle["open_connections"] == 0
    assert store.latest_canary(env.ledger) == record  # committed, as returned


def test_a_healthy_result_is_reused_within_its_ttl(env: HealthEnv) -> None:
    env.set(canary_ttl_s=300)
    base = env.requests()
    first = run_canary(env.settings, env.ledger, clock=lambda: T0)
    assert first.record.healthy and not first.cached
    assert first.record.code is None and first.record.dimension == DIM
    assert env.requests() == base + 1
    again = run_canary(env.settings, env.ledger, clock=lambda: T0 + 299)
    assert again.cached and again.record == first.record
    assert env.requests() == base + 1  # no new request reached the server
    expired = run_canary(env.settings, env.ledger, clock=lambda: T0 + 300)
    assert not expired.cached and expired.record.healthy
    assert env.requests() == base + 2
    assert store.canary_count(env.ledger) == 2  # a cache hit writes nothing


def test_a_failure_is_not_cached_as_healthy_and_backs_off(env: HealthEnv) -> None:
    env.srv.configure(mode="error500")
    base = env.requests()
    failed = run_canary(env.settings, env.ledger, clock=lambda: T0)
    assert not failed.record.healthy
    assert failed.record.code == codes.KB_VECTOR_EMBED_UNCLASSIFIED
    assert failed.record.retry_at == T0 + 30
    assert store.latest_healthy_at(env.ledger) is None
    env.srv.reset()  # the provider is fine again, but the back-off still runs
    during = run_canary(env.settings, env.ledger, clock=lambda: T0 + 29)
    assert during.cached and not during.record.healthy
    assert env.requests() == base + 1
    after = run_canary(env.settings, env.ledger, clock=lambda: T0 + 30)
    assert not after.cached and after.record.healthy
    assert env.requests() == base + 2
    assert store.latest_healthy_at(env.ledger) == T0 + 30


def test_a_switched_dimension_is_unhealthy_and_named(env: HealthEnv) -> None:
    env.srv.configure(dimensions=DIM // 2)
    result = run_canary(env.settings, env.ledger, clock=lambda: T0)
    assert not result.record.healthy
    assert result.record.code == codes.KB_VECTOR_EMBED_INVALID_VECTORS
    assert result.record.dimension == DIM // 2
    assert result.record.expected_dimension == DIM


def test_the_deadline_leaf_is_read_when_the_probe_runs(env: HealthEnv) -> None:
    env.srv.configure(mode="hang", hang_s=30)
    settings = env.settings  # loaded once: the leaf must still be read at use
    env.set(canary_timeout_ms=200)
    first = run_canary(settings, env.ledger, force=True)
    env.set(canary_timeout_ms=700)
    second = run_canary(settings, env.ledger, force=True)
    assert (first.record.timeout_ms, second.record.timeout_ms) == (200, 700)
    assert first.record.code == second.record.code == codes.EMBEDDING_PROBE_TIMEOUT
    assert second.record.elapsed_ms >= 700
    env.settle()


def test_the_canary_ends_a_recovery_episode(env: HealthEnv, tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    repo.write("a.py", "def a():\n    return 1\n")
    repo.commit("a", when=1_700_000_000)
    tenants_file = write_tenants(tmp_path / "tenants.yaml", {"acme": [repo_entry("w", repo.path)]})
    ctxs = declared_repos(load_tenants(tenants_file))
    settings, ledger = env.settings, env.ledger
    decl = ctxs[0].repo
    now = time.time()
    # Deferred by a provider timeout a moment ago; its backoff is far away.
    ledger.upsert_repo_state(
        "acme",
        "w",
        last_outcome=codes.OUTCOME_DEFERRED,
        deferred_cause_code=codes.KB_VECTOR_EMBED_TIMEOUT,
        consecutive_failures=4,
        last_attempt_at=now - 5,
        last_attempted_rev=current_revision(decl.path, decl.ref, decl.parser.exclude, 10**6),
        declaration_digest=repo_declaration_digest(decl.to_plain()),
        embedding_generation=configured_generation(settings),
        recovery_episode_opened_at=now - 5,
    )
    assert evaluate(ctxs, settings, ledger, now)[0].reason is None
    env.srv.refuse()
    unhealthy = run_canary(settings, ledger)
    assert unhealthy.record.code == codes.KB_VECTOR_EMBED_CONNECTION_REFUSED
    assert evaluate(ctxs, settings, ledger, time.time())[0].reason is None
    env.srv.resume()
    healthy = run_canary(settings, ledger, force=True)
    assert healthy.record.healthy
    assert evaluate(ctxs, settings, ledger, time.time())[0].reason == DUE_RECOVERY_HEALTHY
    # The snapshot shows the canary record.
    snap = build_status(settings, load_tenants(tenants_file), ledger, env.kb.store)
    assert snap["canary"]["healthy"] is True and snap["freeze"] is None
    assert snap["repos"][0]["repoSlug"] == "w"


def test_the_schedule_job_runs_the_canary_once(env: HealthEnv, tmp_path: Path) -> None:
    schedule = defs.resolve_schedule_def("provider_health_schedule")
    assert schedule.cron_schedule == "*/5 * * * *"
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    assert schedule.description and "canary" in schedule.description
    sensor = defs.resolve_sensor_def("freeze_reprobe_sensor")
    assert sensor.default_status == dg.DefaultSensorStatus.STOPPED
    base = env.requests()
    (tmp_path / "dagster").mkdir()
    with dg.DagsterInstance.local_temp(str(tmp_path / "dagster")) as instance:
        result = defs.resolve_job_def("provider_health").execute_in_process(instance=instance)
    assert result.success
    doc = result.output_for_node("provider_canary")
    assert doc["healthy"] is True and doc["cached"] is False and doc["dimension"] == DIM
    assert env.requests() == base + 1
    assert store.latest_canary(env.ledger) is not None


def _cli(args: list[str], env: HealthEnv) -> subprocess.CompletedProcess:
    proc_env = {k: v for k, v in os.environ.items() if not k.startswith("DAGSTER_")}
    return subprocess.run(
        [sys.executable, "-m", "neo_assets.cli", *args],
        cwd=ROOT,
        env=proc_env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_canary_json_and_exit_codes(env: HealthEnv) -> None:
    ok = _cli(["canary", "--json"], env)
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)  # one JSON document, nothing else on stdout
    assert {"healthy", "code", "operationLabel", "timeoutMs", "elapsedMs", "dimension"} <= set(doc)
    assert doc["healthy"] is True and doc["code"] is None and doc["dimension"] == DIM
    assert doc["operationLabel"] == CANARY_OPERATION_LABEL and doc["timeoutMs"] == 30_000
    env.srv.refuse()
    bad = _cli(["canary", "--json", "--force"], env)
    assert bad.returncode == 1, bad.stderr
    doc = json.loads(bad.stdout)
    assert doc["healthy"] is False and doc["code"] == codes.KB_VECTOR_EMBED_CONNECTION_REFUSED


@pytest.mark.parametrize("leaf", ["canary_timeout_ms"])
def test_an_invalid_leaf_is_a_usage_error(env: HealthEnv, leaf: str) -> None:
    env.set(**{leaf: "soon"})
    done = _cli(["canary", "--json"], env)
    assert done.returncode == 2
    assert "NEO_CANARY_TIMEOUT_MS" in json.loads(done.stdout)["error"]
