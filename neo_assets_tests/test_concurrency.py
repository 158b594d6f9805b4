"""Two sweeps of one repo never interleave their writes: the ledger lease, on SQLite.

The store's statements are checked against the pure rules (sweep/rules/leases.py), mutual
exclusion is checked across real processes, and the sweep is run for real (Dagster,
Chroma, git) against a lease left by a killed process, one held by a live process, and
one taken away in the middle of embedding. The same store checks run on Postgres in
store/test_postgres_ledger.py.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import dagster as dg
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neo_assets.cli.launch import run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.core import codes
from neo_assets.core.ids.stamps import tenant_filter
from neo_assets.store import leases
from neo_assets.store.ledger import Ledger
from neo_assets.store.ledger_schema import leases as lease_table
from neo_assets.sweep.rules import leases as rules
from neo_assets.sweep.rules.leases import sweep_lease_key
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.kb_handles import KbHandles
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

ROOT = Path(__file__).resolve().parent.parent
K = "sweep:acme/widgets"


# ---------------------------------------------------------------------------- helpers
def migration_head() -> str:
    """The head of the ledger's alembic history, checked to pass through 0004 (leases)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from neo_assets.store.ledger_engine import MIGRATIONS_DIR

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    script = ScriptDirectory.from_config(cfg)
    head = script.get_current_head()
    assert "0004" in {r.revision for r in script.iterate_revisions(head, "base")}
    return head


_OPEN_AT = """
import sys, time
from neo_assets.store.ledger import Ledger
url, at = sys.argv[1], float(sys.argv[2])
time.sleep(max(0.0, at - time.time()))  # every process opens at the same instant
Ledger.open(url).dispose()
"""


def assert_opened_at_once_and_migrated(url: str, processes: int = 4) -> None:
    """``processes`` fresh processes open the new ledger at ``url`` at the same instant:
    each succeeds and the schema is at head. (Unguarded, all ran the migrations and the
    losers failed creating tables the winner had made.)"""
    at = time.time() + 4.0  # after every interpreter has started and imported
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _OPEN_AT, url, str(at)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * processes, [e[-1500:] for e in errors]
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        version = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
    engine.dispose()
    assert version == migration_head()


def test_processes_opening_a_fresh_sqlite_ledger_at_once_all_find_it_migrated(
    tmp_path: Path,
) -> None:
    for trial in range(3):  # without the lock, 4 of 5 such trials had failures
        assert_opened_at_once_and_migrated(f"sqlite:///{tmp_path / f'ledger{trial}.sqlite'}")


def check_store_against_rules(ledger: Ledger, ops: list[tuple[str, str, float, float]]) -> None:
    """Apply ``ops`` to the store and to the pure model; both agree after every step."""
    key = f"model:{time.monotonic_ns()}"
    model: rules.LeaseRecord | None = None
    now = 1000.0
    for name, holder, advance, ttl in ops:
        now += advance
        if name == "acquire":
            expected = rules.after_acquire(model, key, holder, ttl, now)
            got = leases.try_acquire(ledger, key, holder, ttl, now)
            assert (got is not None) == (expected is not None), (name, holder, now, model)
            if expected is not None:
                assert got == expected.epoch
                model = expected
        elif name == "renew":
            expected = rules.after_renew(model, holder, ttl, now)
            assert leases.renew(ledger, key, holder, ttl, now) == (expected is not None)
            model = expected or model
        else:
            expected = rules.after_release(model, holder)
            assert leases.release(ledger, key, holder) == (expected is not None)
            model = expected or model
        assert leases.current(ledger, key) == (
            None
            if model is None
            else rules.LeaseRecord(
                key, model.holder, model.epoch, model.acquired_at, model.expires_at
            )
        )


MUTEX_WORKER = r"""
import json, sys, time
import sqlalchemy as sa
from neo_assets.store.ledger import Ledger
from neo_assets.store import leases
url, holder, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
ledger = Ledger.open(url)
counter = sa.table("mutex_counter", sa.column("id"), sa.column("value"))
spans = []
while len(spans) < rounds:
    if not leases.acquire(ledger, "mutex", holder, 30.0, time.time()):
        time.sleep(0.002)
        continue
    start = time.time()
    # read, pause, write: without mutual exclusion another process's update is lost
    with ledger.engine.begin() as conn:
        value = conn.execute(sa.select(counter.c.value).where(counter.c.id == 1)).scalar()
    time.sleep(0.003)
    with ledger.engine.begin() as conn:
        conn.execute(sa.update(counter).where(counter.c.id == 1).values(value=value + 1))
    end = time.time()
    assert leases.release(ledger, "mutex", holder)
    spans.append((start, end))
print(json.dumps(spans))
"""


def run_mutex_workers(url: str, workers: int, rounds: int) -> None:
    """``workers`` processes each increment a shared counter ``rounds`` times, each time
    read-pause-write under the lease: no update is lost and no two spans overlap."""
    ledger = Ledger.open(url)  # migrated once, before the workers start
    meta = sa.MetaData()
    counter = sa.Table(
        "mutex_counter",
        meta,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("value", sa.Integer, nullable=False),
    )
    meta.create_all(ledger.engine)
    with ledger.engine.begin() as conn:
        conn.execute(sa.insert(counter).values(id=1, value=0))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", MUTEX_WORKER, url, f"worker-{i}", str(rounds)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for i in range(workers)
    ]
    spans = []
    for proc in procs:
        out, errs = proc.communicate(timeout=120)
        assert proc.returncode == 0, errs
        spans += [(s, e, proc.pid) for s, e in json.loads(out)]
    with ledger.engine.connect() as conn:
        assert conn.execute(sa.select(counter.c.value)).scalar() == workers * rounds
    spans.sort()
    for (_, end, pid), (start, _, pid2) in zip(spans, spans[1:], strict=False):
        assert end <= start or pid == pid2, "two holders inside the lease at once"
    ledger.dispose()


HOLD_AND_SLEEP = r"""
import sys, time
from neo_assets.store.ledger import Ledger
from neo_assets.store import leases
url, key, ttl = sys.argv[1], sys.argv[2], float(sys.argv[3])
ledger = Ledger.open(url)
assert leases.acquire(ledger, key, "dead-holder", ttl, time.time())
print("held", flush=True)
time.sleep(600)
"""


def make_repo(path: Path, files: dict[str, str]) -> GitRepo:
    repo = GitRepo(path)
    for rel, text in files.items():
        repo.write(rel, text)
    repo.commit("initial", when=1_700_000_000)
    return repo


def many_functions(n_files: int, per_file: int) -> dict[str, str]:
    return {
        f"pkg/mod_{f:03d}.py": "".join(
            f"def f_{f}_{i}(x):\n    return x * {i} + {f}\n\n\n" for i in range(per_file)
        )
        for f in range(n_files)
    }


@pytest.fixture
def ledger(tmp_path: Path):
    led = Ledger.open(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    yield led
    led.dispose()


@pytest.fixture
def instance(tmp_path: Path):
    (tmp_path / "dagster").mkdir()
    inst = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    yield inst
    inst.dispose()


@pytest.fixture
def small_repo(neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    repo = make_repo(
        tmp_path / "widgets",
        {
            "widgets/core.py": "class Widget:\n    def render(self):\n        return 'w'\n",
            "README.md": "# Widgets\n\nRender them.\n",
        },
    )
    tenants = write_tenants(tmp_path / "tenants.yaml", {"acme": [repo_entry("widgets", repo.path)]})
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants))
    return {"repo": repo, "tenants": tenants}


def sweep_once(tenants: Path, instance: dg.DagsterInstance) -> dict:
    (result,) = run_sweeps(load_settings(), load_tenants(tenants), instance, force=True)
    return result


# ---------------------------------------------------------------------------- the store
def test_the_lease_table_comes_from_the_migrations(ledger: Ledger) -> None:
    assert "leases" in sa.inspect(ledger.engine).get_table_names()
    with ledger.engine.connect() as conn:
        version = conn.execute(sa.text("select version_num from alembic_version")).scalar()
    assert version == migration_head()


def test_acquire_renew_release_on_sqlite(ledger: Ledger) -> None:
    assert leases.acquire(ledger, K, "a", 30.0, 100.0)
    assert leases.acquire(ledger, K, "a", 30.0, 110.0)  # re-entrant
    assert not leases.acquire(ledger, K, "b", 30.0, 139.0)  # a's lease runs to 140
    assert leases.renew(ledger, K, "a", 30.0, 135.0)
    assert not leases.acquire(ledger, K, "b", 30.0, 160.0)  # renewed to 165
    assert not leases.renew(ledger, K, "b", 30.0, 160.0)
    assert not leases.release(ledger, K, "b")
    assert leases.release(ledger, K, "a")
    assert leases.try_acquire(ledger, K, "b", 30.0, 161.0) == 2  # a new holder, a new epoch
    assert not leases.renew(ledger, K, "a", 30.0, 162.0)
    assert leases.current(ledger, K) == rules.LeaseRecord(K, "b", 2, 161.0, 191.0)


_ops = st.lists(
    st.tuples(
        st.sampled_from(["acquire", "acquire", "renew", "release"]),
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from([0.0, 0.5, 5.0, 29.0, 30.0, 31.0, 100.0]),
        st.sampled_from([1.0, 30.0, 60.0]),
    ),
    max_size=25,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=_ops)
def test_the_store_does_what_the_rules_say(ledger: Ledger, ops) -> None:
    check_store_against_rules(ledger, ops)


def test_processes_never_hold_the_lease_at_once_on_sqlite(tmp_path: Path) -> None:
    run_mutex_workers(f"sqlite:///{tmp_path / 'mutex.sqlite'}", workers=3, rounds=15)


# ---------------------------------------------------------------------------- the keeper
def test_keeper_waits_for_a_release_and_then_holds(ledger: Ledger) -> None:
    assert leases.acquire(ledger, K, "other", 60.0, time.time())
    threading.Timer(0.5, lambda: leases.release(ledger, K, "other")).start()
    with leases.LeaseKeeper(ledger, K, "me", ttl_s=60.0, wait_s=30.0) as keeper:
        assert keeper.held and keeper.epoch == 2 and keeper.waited_s > 0
        assert keeper.seen is not None and keeper.seen.holder == "other"
        keeper.check()  # confirmed with the ledger
    # not released on a clean exit: the run's next step takes it again at the same epoch
    assert leases.current(ledger, K).holder == "me"
    with leases.LeaseKeeper(
        ledger, K, "me", ttl_s=60.0, expected_epoch=2, release_on_exit=True
    ) as keeper:
        assert keeper.held
    assert rules.is_free(leases.current(ledger, K), time.time())


def test_keeper_gives_up_after_its_bounded_wait(ledger: Ledger) -> None:
    assert leases.acquire(ledger, K, "other", 60.0, time.time())
    with leases.LeaseKeeper(ledger, K, "me", ttl_s=60.0, wait_s=0.3) as keeper:
        assert not keeper.held and keeper.reason == leases.REASON_HELD
        assert keeper.waited_s >= 0.3 and keeper.seen.holder == "other"
    assert leases.current(ledger, K).holder == "other"  # untouched


def test_keeper_sees_a_moved_epoch_as_lost_and_gives_the_key_back(ledger: Ledger) -> None:
    assert leases.try_acquire(ledger, K, "me", 60.0, 100.0) == 1
    assert leases.try_acquire(ledger, K, "other", 60.0, 200.0) == 2  # mine expired: taken
    assert leases.release(ledger, K, "other")
    keeper = leases.LeaseKeeper(ledger, K, "me", ttl_s=60.0, expected_epoch=1)
    with keeper:
        assert not keeper.held and keeper.reason == leases.REASON_LOST
    assert rules.is_free(leases.current(ledger, K), time.time())


def test_keeper_check_refuses_the_write_after_a_takeover(ledger: Ledger) -> None:
    with leases.LeaseKeeper(ledger, K, "me", ttl_s=60.0, release_on_exit=True) as keeper:
        keeper.check()
        with ledger.engine.begin() as conn:  # another sweep took it over (e.g. we paused)
            conn.execute(
                sa.update(lease_table).values(holder="thief", epoch=lease_table.c.epoch + 1)
            )
        with pytest.raises(leases.LeaseLostError):
            keeper.check()
        assert keeper.lost
    assert leases.current(ledger, K).holder == "thief"  # our exit did not release theirs


def test_keeper_heartbeat_holds_the_lease_past_its_ttl(ledger: Ledger) -> None:
    with leases.LeaseKeeper(ledger, K, "me", ttl_s=1.5, release_on_exit=True) as keeper:
        deadline = time.time() + 3.5  # more than twice the TTL
        while time.time() < deadline:
            assert not leases.acquire(ledger, K, "other", 1.5, time.time())
            time.sleep(0.2)
        assert keeper.valid()
    assert leases.acquire(ledger, K, "other", 1.5, time.time())


# ---------------------------------------------------------------------------- the sweep
def test_a_killed_holders_lease_expires_and_the_next_sweep_proceeds(
    small_repo, instance, kb: KbHandles, monkeypatch: pytest.MonkeyPatch
) -> None:
    ttl = 2.5
    monkeypatch.setenv("NEO_SWEEP_LEASE_TTL_S", str(ttl))
    monkeypatch.setenv("NEO_SWEEP_LEASE_WAIT_S", str(ttl + 20))
    url = load_settings().store.resolved_ledger_url
    ledger = kb.ledger
    key = sweep_lease_key("acme", "widgets")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_AND_SLEEP, url, key, str(ttl)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    left = leases.current(ledger, key)
    assert left.holder == "dead-holder" and not rules.is_free(left, time.time())

    result = sweep_once(small_repo["tenants"], instance)

    assert result["outcome"] == codes.OUTCOME_COMPLETE, result
    lease = result["lease"]
    assert lease["otherHolder"] == "dead-holder" and lease["epoch"] == 2
    assert lease["waitedS"] > 0  # it did wait for the expiry (bounded by the wait setting)
    assert rules.is_free(leases.current(ledger, key), time.time())  # released at the end
    # Dagster's own run-level limit sees the repo: the run is tagged with its partition.
    (run,) = [r for r in instance.get_runs() if r.job_name == "sweep"]
    assert run.tags["dagster/partition"] == "acme/widgets" and run.tags["neo/tenant"] == "acme"


def test_a_sweep_that_cannot_get_the_lease_is_skipped_and_writes_nothing(
    small_repo, instance, kb: KbHandles, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEO_SWEEP_LEASE_WAIT_S", "0.5")
    ledger = kb.ledger
    key = sweep_lease_key("acme", "widgets")
    assert leases.acquire(ledger, key, "a-live-sweep", 600.0, time.time())

    result = sweep_once(small_repo["tenants"], instance)

    assert result["outcome"] == codes.OUTCOME_SKIPPED  # not failed
    assert result["deferredCauseCode"] == codes.SWEEP_LEASE_HELD
    assert result["lease"]["otherHolder"] == "a-live-sweep"
    assert ledger.repo_state("acme", "widgets") is None
    assert ledger.envelope("acme", "widgets") is None
    assert ledger.declared_generation("acme", "widgets") is None
    assert kb.store.count() == 0
    assert leases.current(ledger, key).holder == "a-live-sweep"


def test_a_lease_lost_mid_embedding_stops_the_writes_and_the_new_holder_finishes(
    kb: KbHandles, tmp_path: Path, instance, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "big", many_functions(n_files=20, per_file=20))
    tenants = write_tenants(tmp_path / "tenants.yaml", {"acme": [repo_entry("big", repo.path)]})
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants))
    monkeypatch.setenv("NEO_EMBEDDING_BATCH_SIZE", "4")
    store, ledger = kb.store, kb.ledger
    key = sweep_lease_key("acme", "big")
    stolen = threading.Event()

    def steal_once_rows_appear() -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not stolen.is_set():
            if store.count() > 0:
                # what another sweep does once our lease expired (we were paused, say)
                with ledger.engine.begin() as conn:
                    conn.execute(
                        sa.update(lease_table)
                        .where(lease_table.c.key == key)
                        .values(
                            holder="thief",
                            epoch=lease_table.c.epoch + 1,
                            expires_at=time.time() + 600,
                        )
                    )
                stolen.set()
            time.sleep(0.01)

    thief = threading.Thread(target=steal_once_rows_appear, daemon=True)
    thief.start()
    first = sweep_once(tenants, instance)
    thief.join(timeout=60)

    assert stolen.is_set()
    assert first["outcome"] == codes.OUTCOME_SKIPPED, first
    assert first["deferredCauseCode"] == codes.SWEEP_LEASE_HELD
    assert first["lease"]["reason"] == leases.REASON_LOST
    declared = {c.chunk_id for c in ledger.declared_chunks("acme", "big")}
    written = store.count()
    assert 0 < written < len(declared)  # the writes stopped at the next batch
    assert ledger.repo_state("acme", "big") is None  # no census under a lost lease
    assert leases.current(ledger, key).holder == "thief"  # and the thief's lease is intact

    assert leases.release(ledger, key, "thief")
    second = sweep_once(tenants, instance)
    assert second["outcome"] == codes.OUTCOME_COMPLETE
    assert second["counts"]["alreadyPresent"] == written
    ids = [r["id"] for r in store.iter_rows(tenant_filter("acme", "big"))]
    assert len(ids) == len(set(ids)) == len(declared) and set(ids) == declared


def test_embedding_runs_in_the_provider_pool() -> None:
    from neo_assets.definitions import defs
    from neo_assets.sweep.defs import EMBEDDING_POOL

    node = defs.resolve_job_def("sweep").graph.node_named("sweep_repo")
    assert node.definition.pool == EMBEDDING_POOL == "neo-embedding-provider"
