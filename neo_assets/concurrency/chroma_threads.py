"""Put embedded Chroma's threads on one core (the rule and the why: concurrency/chroma_core.py).

Linux only: elsewhere, or where the process may not change affinities, it does nothing
and the sweep runs as before. Threads are found by name under /proc/self/task; a thread
that ends while being looked at is skipped.
"""

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from neo_assets.concurrency.chroma_core import is_chroma_thread, pick_core
from neo_assets.concurrency.helper_process import keep_helpers_on

TASKS = Path("/proc/self/task")


def chroma_core() -> int | None:
    """The core this process's Chroma threads share, or None to leave them be."""
    if not hasattr(os, "sched_getaffinity") or not TASKS.is_dir():
        return None
    return pick_core(os.sched_getaffinity(0), os.getpid())


def pin_chroma_threads(core: int) -> int:
    """Give every Chroma thread of this process the one ``core``; returns how many moved.

    Cheap enough to call before every write (a few dozen small reads): threads Chroma
    starts later on a Python thread's behalf would not inherit the pin.
    """
    moved = 0
    try:
        tasks = list(TASKS.iterdir())
    except OSError:
        return 0
    for task in tasks:
        try:
            if not is_chroma_thread((task / "comm").read_text()):
                continue
            tid = int(task.name)
            if os.sched_getaffinity(tid) != {core}:
                os.sched_setaffinity(tid, {core})
                moved += 1
        except (OSError, ValueError):
            continue  # the thread ended, or we may not move it: leave it where it is
    return moved


@contextlib.contextmanager
def helpers_kept_off(core: int | None) -> Iterator[None]:
    """While inside, this process's helpers (concurrency/helper_process.py) run off ``core`` (None:
    no change); after, anywhere again.

    For the length of an add: two helpers busy beside it (one hashing the next wave, one
    parsing the one after) left one of them on Chroma's core. Against the same adds
    replayed alone, first sweeps of 2,000 files: a median 0.27 s longer with the helpers
    anywhere (7 pairs), 0.04-0.60 s shorter with them kept off during each add (4 pairs).
    Only for the add: kept off for the whole sweep, the first wave's hashing (before any
    add, Chroma's core idle) shared one core with the second wave's parse and took
    0.11-0.16 s, not 0.05-0.10. Not nested: leaving lets helpers run anywhere again."""
    if core is None:
        yield
        return
    try:
        others = os.sched_getaffinity(0) - {core}
    except OSError:
        others = set()
    keep_helpers_on(others)
    try:
        yield
    finally:
        keep_helpers_on(None)
