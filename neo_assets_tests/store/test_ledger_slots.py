"""Provider-wide slots across machines: advisory locks in a real Postgres ledger
(``store/ledger_slots.py``). Each "machine" is its own engine (its own connections) and
its own slots directory, so the file locks of one cannot see the other's requests; only
the ledger's locks can."""

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.provider_slots import ProviderSlots, provider_key
from neo_assets.embedding.slot_backend import slots_for
from neo_assets.store.ledger import Ledger
from neo_assets.store.ledger_slots import LedgerSlots
from neo_assets_tests.embedding.test_lane_real_behaviour import (
    DIM,
    sweeps_sharing_a_killed_provider,
)
from neo_assets_tests.fakes.fixtures import fault_server_factory
from neo_assets_tests.servers import PostgresServer, postgres_or_skip

__all__ = ["fault_server_factory"]  # the fixture, used by name
KEY = provider_key("openai_compatible", "http://127.0.0.1:1", "m")


@pytest.fixture(scope="module")
def pg():
    with postgres_or_skip() as server:
        yield server


@pytest.fixture
def url(pg: PostgresServer) -> str:
    database = pg.create_database()
    Ledger.open(database).dispose()  # migrated: the provider_work table exists
    return database


def machine(url: str, slots: int = 2) -> LedgerSlots:
    """One machine's view of the provider's slots: its own engine and connections."""
    return LedgerSlots(sa.create_engine(url, pool_size=4), KEY, slots)


HOLDER = """
import asyncio, sys, time
import sqlalchemy as sa
from neo_assets.embedding.cancel import CancelScope
from neo_assets.store.ledger_slots import LedgerSlots
async def main():
    slots = LedgerSlots(sa.create_engine(sys.argv[1]), sys.argv[2], 2)
    held = await slots.acquire(CancelScope(label="holder"), solo=False, max_wait_s=5)
    print("held", flush=True)
    time.sleep(float(sys.argv[3]))
    slots.release(held)
asyncio.run(main())
"""


def hold_in_another_process(url: str, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, url, KEY, str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    return proc


def acquire(slots: LedgerSlots, *, solo: bool, max_wait_s: float) -> Any:
    return asyncio.run(slots.acquire(CancelScope(label="t"), solo=solo, max_wait_s=max_wait_s))


def test_a_solo_dispatch_waits_for_a_request_of_another_machine(url: str) -> None:
    proc = hold_in_another_process(url, 0.8)
    try:
        slots = machine(url)
        started = time.monotonic()
        held = acquire(slots, solo=True, max_wait_s=10)
        waited = time.monotonic() - started
        slots.release(held)
    finally:
        proc.wait(10)
    assert held.alone
    assert waited >= 0.4  # it waited for the other machine's request to end


def test_a_solo_dispatch_that_cannot_drain_in_time_is_not_alone(url: str) -> None:
    a, b = machine(url), machine(url)
    in_flight = acquire(a, solo=False, max_wait_s=5)
    try:
        held = acquire(b, solo=True, max_wait_s=0.3)
        b.release(held)
    finally:
        a.release(in_flight)
    assert not held.alone
    # once the other request is released, the solo dispatch is alone
    held = acquire(b, solo=True, max_wait_s=5)
    b.release(held)
    assert held.alone


def test_a_killed_holders_slot_is_freed_with_its_connection(url: str) -> None:
    proc = hold_in_another_process(url, 120.0)
    proc.kill()
    proc.wait(10)
    slots = machine(url, slots=2)
    held = acquire(slots, solo=True, max_wait_s=10)
    slots.release(held)
    assert held.alone


def test_shared_dispatches_of_two_machines_take_at_most_the_slots(url: str) -> None:
    a, b = machine(url), machine(url)
    first = acquire(a, solo=False, max_wait_s=5)
    second = acquire(b, solo=False, max_wait_s=5)
    try:
        third = acquire(a, solo=False, max_wait_s=0.3)  # both slots are taken
        assert third.waited_s >= 0.25
        a.release(third)
    finally:
        a.release(first)
        b.release(second)


def test_abandoned_work_is_counted_for_every_machine(url: str) -> None:
    a, b = machine(url), machine(url)
    assert a.abandoned_count() == 0
    a.mark_abandoned()
    b.mark_abandoned()
    assert a.abandoned_count() == b.abandoned_count() == 2


def test_a_postgres_ledger_gives_ledger_slots_and_sqlite_file_locks(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEO_LEDGER_URL", url)
    assert isinstance(slots_for("openai_compatible", "http://h:1", "m", 2), LedgerSlots)
    monkeypatch.setenv("NEO_PROVIDER_SLOTS", "local")
    monkeypatch.setenv("NEO_PROVIDER_SLOTS_DIR", str(tmp_path))
    assert isinstance(slots_for("openai_compatible", "http://h:1", "m", 2), ProviderSlots)
    monkeypatch.setenv("NEO_PROVIDER_SLOTS", "ledger")
    monkeypatch.setenv("NEO_LEDGER_URL", f"sqlite:///{tmp_path / 'l.sqlite'}")
    with pytest.raises(ValueError, match="NEO_PROVIDER_SLOTS=local"):
        slots_for("openai_compatible", "http://h:1", "m", 2)


def test_sweeps_on_two_machines_sharing_a_killed_provider_strike_only_the_killer(
    url: str, fault_server_factory: Any
) -> None:
    # Each sweep on its own "machine": its own engine, so only the ledger's locks are
    # shared (with a slots directory per machine instead, the other machine's innocent
    # input is struck).
    srv = fault_server_factory(dimensions=DIM, restart=True, restart_delay_s=0.3)
    sweeps_sharing_a_killed_provider(srv, lambda tag: machine(url))
