"""The ledger and the Dagster instance on a real Postgres (initdb/pg_ctl on 127.0.0.1),
and concurrent sweeps in separate processes sharing it with a real Chroma server."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
import sqlalchemy as sa

from neo_assets.core import codes
from neo_assets.core.ids.stamps import tenant_filter
from neo_assets.sources.rules.chunks import DeclaredChunk
from neo_assets.store import leases
from neo_assets.store.chroma_store import open_store
from neo_assets.store.ledger import Ledger
from neo_assets.sweep.rules import leases as rules
from neo_assets.sweep.rules.leases import sweep_lease_key
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.servers import PostgresServer, chroma_server_or_skip, postgres_or_skip
from neo_assets_tests.store.test_ledger import check_config_versions_at_once
from neo_assets_tests.tenantfiles import repo_entry, write_tenants
from neo_assets_tests.test_concurrency import (
    assert_opened_at_once_and_migrated,
    check_store_against_rules,
    migration_head,
    run_mutex_workers,
)

ROOT = Path(__file__).resolve().parents[2]
DEPLOY_YAML = ROOT / "deploy" / "dagster.yaml"
EMBEDDING_POOL = "neo-embedding-provider"


@pytest.fixture(scope="module")
def pg():
    with postgres_or_skip() as server:
        yield server


@pytest.fixture
def pg_ledger(pg: PostgresServer):
    ledger = Ledger.open(pg.create_database())
    yield ledger
    ledger.dispose()


def dagster_home(tmp_path: Path, pg: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A DAGSTER_HOME holding deploy/dagster.yaml, its DAGSTER_PG_* pointing at ``pg``."""
    home = tmp_path / "dagster-home"
    home.mkdir()
    shutil.copyfile(DEPLOY_YAML, home / "dagster.yaml")
    database = pg.create_database().rsplit("/", 1)[-1]
    for name, value in pg.dagster_env(database).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


# ---------------------------------------------------------------------------- the ledger
def test_the_ledger_migrates_and_round_trips_on_postgres(pg: PostgresServer) -> None:
    url = pg.create_database()
    ledger = Ledger.open(url)
    ledger.dispose()
    ledger = Ledger.open(url)  # the same alembic migrations, idempotent here too
    assert ledger.engine.dialect.name == "postgresql"
    names = set(sa.inspect(ledger.engine).get_table_names())
    assert {"repo_state", "fences", "strikes", "declared_chunks", "leases"} <= names
    with ledger.engine.connect() as conn:
        assert conn.execute(sa.text("select version_num from alembic_version")).scalar() == (
            migration_head()
        )
    assert ledger.config_version("acme", "d1", 1.0) == 1
    assert ledger.config_version("acme", "d2", 2.0) == 2
    ledger.record_generation(
        "acme",
        "w",
        revision="r1",
        parser_id="neo-code",
        parser_version="1.0.0",
        declaration_digest="x" * 64,
        now=1.0,
        chunks=[DeclaredChunk("a" * 64, "a.py", "function", "f")],
    )
    assert [c.chunk_id for c in ledger.declared_chunks("acme", "w")] == ["a" * 64]
    ledger.record_fence(
        "acme",
        "w",
        "g1",
        "a" * 64,
        disposition="undeliverable-at-geometry",
        reason_code=codes.KB_VECTOR_EMBED_UNDELIVERABLE_AT_GEOMETRY,
        receipt={"n": 1},
        observed_at=3.0,
    )
    assert ledger.fences("acme", "w", "g1")[0]["receipt"] == {"n": 1}
    ledger.record_sweep_result("acme", "w", state={"last_outcome": "complete", "rows": 1})
    assert ledger.repo_state("acme", "w")["last_outcome"] == "complete"
    ledger.dispose()


def test_leases_on_postgres_follow_the_rules(pg_ledger: Ledger) -> None:
    k = "sweep:acme/widgets"
    assert leases.acquire(pg_ledger, k, "a", 30.0, 100.0)
    assert not leases.acquire(pg_ledger, k, "b", 30.0, 129.0)
    assert leases.acquire(pg_ledger, k, "a", 30.0, 129.0)
    assert leases.renew(pg_ledger, k, "a", 30.0, 150.0)
    assert not leases.acquire(pg_ledger, k, "b", 30.0, 170.0)
    assert leases.try_acquire(pg_ledger, k, "b", 30.0, 180.0) == 2  # expired: taken over
    assert not leases.renew(pg_ledger, k, "a", 30.0, 181.0, epoch=1)
    assert not leases.release(pg_ledger, k, "a")
    assert leases.release(pg_ledger, k, "b", epoch=2)
    assert leases.current(pg_ledger, k) == rules.LeaseRecord(k, "b", 2, 180.0, rules.RELEASED_AT)
    histories = [
        [
            ("acquire", "a", 0.0, 30.0),
            ("acquire", "b", 29.0, 30.0),
            ("acquire", "b", 1.0, 30.0),
            ("renew", "a", 0.0, 30.0),
            ("release", "b", 5.0, 1.0),
            ("acquire", "c", 0.0, 1.0),
            ("acquire", "a", 1.0, 60.0),
            ("renew", "a", 100.0, 30.0),
            ("release", "a", 0.0, 1.0),
        ],
        [
            ("renew", "a", 0.0, 30.0),
            ("release", "a", 0.0, 30.0),
            ("acquire", "a", 0.0, 30.0),
            ("acquire", "a", 31.0, 30.0),
            ("acquire", "b", 30.0, 30.0),
            ("renew", "b", 0.5, 1.0),
        ],
    ]
    for ops in histories:
        check_store_against_rules(pg_ledger, ops)


def test_processes_never_hold_the_lease_at_once_on_postgres(pg: PostgresServer) -> None:
    run_mutex_workers(pg.create_database(), workers=3, rounds=15)


# ---------------------------------------------------------------------------- deploy/
def test_deploy_dagster_yaml_loads_against_postgres(
    pg: PostgresServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = dagster_home(tmp_path, pg, monkeypatch)
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        assert instance.event_log_storage.supports_global_concurrency_limits
        config = instance.get_concurrency_config()
        queue = config.run_queue_config
        limits = {
            (x["key"], json.dumps(x.get("value"))): x["limit"] for x in queue.tag_concurrency_limits
        }
        per_unique = json.dumps({"applyLimitPerUniqueValue": True})
        assert limits == {("dagster/partition", per_unique): 1, ("neo/tenant", per_unique): 2}
        assert config.pool_config.default_pool_limit == 2
        assert config.pool_config.pool_granularity.value == "op"
        assert instance.run_monitoring_enabled and instance.run_retries_enabled
        assert instance.get_runs() == []
    finally:
        instance.dispose()


# ---------------------------------------------------------------------------- concurrent sweeps
def make_repo(path: Path, n_files: int, per_file: int) -> GitRepo:
    repo = GitRepo(path)
    for f in range(n_files):
        repo.write(
            f"pkg/mod_{f:03d}.py",
            "".join(f"def f_{f}_{i}(x):\n    return x * {i} + {f}\n\n\n" for i in range(per_file)),
        )
    repo.commit("initial", when=1_700_000_000)
    return repo


def test_concurrent_sweeps_in_separate_processes_never_write_twice(
    pg: PostgresServer, neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    widgets = make_repo(tmp_path / "widgets", n_files=20, per_file=20)
    tools = make_repo(tmp_path / "tools", n_files=5, per_file=20)
    tenants = write_tenants(
        tmp_path / "tenants.yaml",
        {
            "acme": [repo_entry("widgets", widgets.path)],
            "globex": [repo_entry("tools", tools.path)],
        },
    )
    ledger_url = pg.create_database()
    home = dagster_home(tmp_path, pg, monkeypatch)
    # Schemas first (as a deployment runs `dagster instance migrate` before starting):
    # the ledger's alembic migrations and Dagster's own tables.
    Ledger.open(ledger_url).dispose()
    dg.DagsterInstance.from_config(str(home)).dispose()

    with chroma_server_or_skip(tmp_path / "chroma") as chroma:
        env = {
            **os.environ,
            "NEO_TENANTS_FILE": str(tenants),
            "NEO_LEDGER_URL": ledger_url,
            "NEO_CHROMA_URL": chroma.url,
            "NEO_EMBEDDING_BATCH_SIZE": "16",
            "NEO_SWEEP_LEASE_WAIT_S": "150",
        }

        def cli_sweep(tenant: str, repo: str) -> subprocess.Popen[str]:
            return subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "neo_assets.cli",
                    "sweep",
                    "--tenant",
                    tenant,
                    "--repo",
                    repo,
                    "--force",
                    "--json",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=ROOT,
                env=env,
            )

        started = time.monotonic()
        procs = [
            cli_sweep("acme", "widgets"),
            cli_sweep("acme", "widgets"),
            cli_sweep("globex", "tools"),
        ]
        results = []
        for proc in procs:
            out, errs = proc.communicate(timeout=300)
            assert proc.returncode == 0, errs[-3000:]
            (result,) = json.loads(out)["repos"]
            results.append(result)
        elapsed = time.monotonic() - started

        store = open_store(persist_dir=None, url=chroma.url, collection_name="neo-knowledge-base")
        ledger = Ledger.open(ledger_url)
        try:
            first, duplicate = sorted(results[:2], key=lambda r: -r["counts"].get("embedded", 0))
            tools_result = results[2]
            declared = {
                (t, r): {c.chunk_id for c in ledger.declared_chunks(t, r)}
                for t, r in (("acme", "widgets"), ("globex", "tools"))
            }
            assert len(declared["acme", "widgets"]) == 400
            assert len(declared["globex", "tools"]) == 100
            # Different repos ran side by side and both completed.
            assert tools_result["outcome"] == codes.OUTCOME_COMPLETE
            assert tools_result["counts"]["embedded"] == 100
            # The duplicate waited for the lease (then found everything present) or was
            # skipped: either way it embedded nothing, and together they embedded each once.
            assert first["outcome"] == codes.OUTCOME_COMPLETE
            assert first["counts"]["embedded"] == 400
            assert duplicate["counts"].get("embedded", 0) == 0
            if duplicate["outcome"] == codes.OUTCOME_SKIPPED:
                assert duplicate["deferredCauseCode"] == codes.SWEEP_LEASE_HELD
            else:
                assert duplicate["outcome"] == codes.OUTCOME_COMPLETE
                assert duplicate["counts"]["alreadyPresent"] == 400
            # They did overlap: the duplicate met the other's lease.
            assert duplicate["lease"]["waitedS"] > 0 or duplicate["outcome"] == "skipped", (
                results,
                elapsed,
            )
            # Collection and ledger agree: every declared id exactly once, nothing else.
            for (t, r), ids in declared.items():
                rows = [row["id"] for row in store.iter_rows(tenant_filter(t, r))]
                assert len(rows) == len(set(rows)) == len(ids) and set(rows) == ids
                state = ledger.repo_state(t, r)
                assert state["last_outcome"] == codes.OUTCOME_COMPLETE
                assert state["last_ingested_rev"] == (widgets if t == "acme" else tools).git(
                    "rev-parse", "HEAD"
                )
            assert store.count() == 500
            for t, r in declared:
                assert rules.is_free(leases.current(ledger, sweep_lease_key(t, r)), time.time())
        finally:
            ledger.dispose()

    # The runs are in the Postgres instance, tagged for the queue's limits, and their
    # embedding step took (and gave back) slots of the provider pool from deploy/dagster.yaml.
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        sweeps = [r for r in instance.get_runs() if r.job_name == "sweep"]
        assert len(sweeps) == 3
        assert sorted(r.tags["dagster/partition"] for r in sweeps) == [
            "acme/widgets",
            "acme/widgets",
            "globex/tools",
        ]
        assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in sweeps)
        assert EMBEDDING_POOL in instance.event_log_storage.get_concurrency_keys()
        pool = instance.event_log_storage.get_concurrency_info(EMBEDDING_POOL)
        assert pool.slot_count == 2 and pool.active_slot_count == 0
    finally:
        instance.dispose()


def test_processes_opening_a_fresh_ledger_at_once_all_find_it_migrated(pg: PostgresServer) -> None:
    for _ in range(3):  # without the advisory lock the first trial already failed
        assert_opened_at_once_and_migrated(pg.create_database())


def test_config_versions_asked_at_once_are_one_per_digest_on_postgres(pg: PostgresServer) -> None:
    check_config_versions_at_once(lambda _n: pg.create_database())
