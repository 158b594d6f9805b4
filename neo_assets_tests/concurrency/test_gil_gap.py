"""The wait before an embedded add: with fake clocks (the loop), and with real threads
and a real embedded Chroma (what the wait is for)."""

import threading
from pathlib import Path

import numpy as np

from neo_assets.concurrency.chroma_writes import chroma_writes
from neo_assets.concurrency.gil_gap import GilGap
from neo_assets.concurrency.idle_gap import IDLE_SLICES, MAX_S, SLICE_S
from neo_assets.store.chroma_store import open_store


class FakeProcess:
    """A process whose other threads use ``busy_slices`` slices of CPU, then go idle."""

    def __init__(self, busy_slices: int) -> None:
        self.busy_slices = busy_slices
        self.now = 0.0
        self.cpu_s = 0.0

    def clock(self) -> float:
        return self.now

    def cpu(self) -> float:
        return self.cpu_s

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        if self.busy_slices > 0:
            self.busy_slices -= 1
            self.cpu_s += seconds  # someone else ran through the whole slice


def _gap(proc: FakeProcess) -> GilGap:
    return GilGap(clock=proc.clock, cpu=proc.cpu, sleep=proc.sleep)


def test_an_idle_process_costs_a_few_slices() -> None:
    proc = FakeProcess(busy_slices=0)
    gap = _gap(proc)
    assert abs(gap.wait() - IDLE_SLICES * SLICE_S) < 1e-9
    assert (gap.waits, gap.capped) == (1, 0)


def test_it_waits_until_the_other_threads_are_done() -> None:
    proc = FakeProcess(busy_slices=7)
    gap = _gap(proc)
    waited = gap.wait()
    assert proc.busy_slices == 0
    assert abs(waited - (7 + IDLE_SLICES) * SLICE_S) < 1e-9  # seven busy, then the idle run
    assert gap.capped == 0


def test_a_thread_that_never_goes_quiet_holds_the_write_back_at_most_max_s() -> None:
    proc = FakeProcess(busy_slices=10**9)
    gap = _gap(proc)
    waited = gap.wait()
    assert MAX_S <= waited < MAX_S + SLICE_S + 1e-9
    assert gap.capped == 1
    gap.wait()
    assert (gap.waits, gap.capped) == (2, 2)
    assert abs(gap.waited_s - 2 * waited) < 1e-9


def _spin(seconds_of_work: int, done: threading.Event, go: threading.Event) -> None:
    go.wait()
    total = 0
    for i in range(seconds_of_work):
        total += i * i  # pure Python: needs the GIL throughout
    done.set()


def test_work_another_thread_is_ready_to_do_runs_before_the_add(tmp_path: Path) -> None:
    store = open_store(
        persist_dir=tmp_path / "chroma",
        url=None,
        collection_name="neo-gap-kb",
        hooks=chroma_writes(one_core=False, gil_gap=True, remote=False),
    )
    assert store.hooks is not None and store.hooks.gil_gap is not None
    order: list[str] = []
    done, go = threading.Event(), threading.Event()
    worker = threading.Thread(target=_spin, args=(500_000, done, go))
    worker.start()
    real_add = store.collection.add

    def add(**kwargs: object) -> None:
        order.append("worker done" if done.is_set() else "worker still busy")
        real_add(**kwargs)

    store.collection.add = add  # type: ignore[method-assign]
    go.set()
    vectors = np.eye(4, 8, dtype=np.float32)
    store.add([f"{i:064x}" for i in range(4)], vectors, ["a", "b", "c", "d"], [{"k": 1}] * 4)
    worker.join()
    # The work (~0.05 s of pure Python, under the cap) ran before the add took the GIL.
    assert order == ["worker done"]
    assert store.count() == 4
    assert (store.hooks.gil_gap.waits, store.hooks.gil_gap.capped) == (1, 0)


def test_a_server_store_never_waits(tmp_path: Path) -> None:
    # No GIL is held by a server's add; and an embedded store without the setting waits
    # for nothing either.
    store = open_store(persist_dir=tmp_path / "chroma", url=None, collection_name="neo-gap-kb")
    assert store.hooks is None
    assert chroma_writes(one_core=True, gil_gap=True, remote=True) is None
