"""Provider-wide slots: file locks that another process sees, and that die with it."""

import asyncio
import subprocess
import sys
import time
from pathlib import Path

from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.provider_slots import LocalSlots, ProviderSlots, provider_key

HOLDER = """
import asyncio, sys, time
from pathlib import Path
from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.provider_slots import ProviderSlots
async def main():
    slots = ProviderSlots(Path(sys.argv[1]), 2)
    held = await slots.acquire(CancelScope(label="holder"), solo=False, max_wait_s=5)
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
    slots.release(held)
asyncio.run(main())
"""


def hold_in_another_process(directory: Path, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(directory), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_solo_dispatch_waits_for_another_process_to_finish(tmp_path: Path) -> None:
    proc = hold_in_another_process(tmp_path, 0.6)
    try:
        slots = ProviderSlots(tmp_path, 2)
        started = time.monotonic()
        held = asyncio.run(slots.acquire(CancelScope(label="solo"), solo=True, max_wait_s=10))
        waited = time.monotonic() - started
        slots.release(held)
    finally:
        proc.wait(10)
    assert held.alone
    assert waited >= 0.3  # it waited for the other process's request


def test_a_solo_dispatch_that_cannot_drain_in_time_is_not_alone(tmp_path: Path) -> None:
    proc = hold_in_another_process(tmp_path, 3.0)
    try:
        slots = ProviderSlots(tmp_path, 2)
        held = asyncio.run(slots.acquire(CancelScope(label="solo"), solo=True, max_wait_s=0.2))
        slots.release(held)
    finally:
        proc.kill()
        proc.wait(10)
    assert not held.alone


def test_a_killed_holder_frees_its_slot(tmp_path: Path) -> None:
    proc = hold_in_another_process(tmp_path, 60.0)
    proc.kill()
    proc.wait(10)
    slots = ProviderSlots(tmp_path, 1)
    held = asyncio.run(slots.acquire(CancelScope(label="solo"), solo=True, max_wait_s=2))
    slots.release(held)
    assert held.alone


def test_shared_dispatches_take_at_most_the_slots(tmp_path: Path) -> None:
    slots = ProviderSlots(tmp_path, 2)

    async def main() -> list[float]:
        scope = CancelScope(label="shared")
        first = await slots.acquire(scope, solo=False, max_wait_s=5)
        second = await slots.acquire(scope, solo=False, max_wait_s=5)
        started = time.monotonic()
        loop = asyncio.get_running_loop()
        loop.call_later(0.3, slots.release, first)
        third = await slots.acquire(scope, solo=False, max_wait_s=5)
        waited = time.monotonic() - started
        slots.release(second)
        slots.release(third)
        return [waited]

    (waited,) = asyncio.run(main())
    assert waited >= 0.25  # the third waited for a slot


def test_abandoned_work_is_counted_for_every_process(tmp_path: Path) -> None:
    a, b = ProviderSlots(tmp_path, 2), ProviderSlots(tmp_path, 2)
    assert a.abandoned_count() == 0
    a.mark_abandoned()
    a.mark_abandoned()
    assert b.abandoned_count() == 2


def test_provider_key_names_one_server() -> None:
    assert provider_key("openai_compatible", "http://h:1/", "m") == provider_key(
        "openai_compatible", "http://h:1", "m"
    )
    assert provider_key("openai_compatible", "http://h:1", "m") != provider_key(
        "openai_compatible", "http://h:2", "m"
    )


def test_local_slots_are_alone_only_when_solo() -> None:
    slots = LocalSlots(2)
    scope = CancelScope(label="local")
    assert asyncio.run(slots.acquire(scope, solo=True, max_wait_s=0)).alone
    assert not asyncio.run(slots.acquire(scope, solo=False, max_wait_s=0)).alone
