"""Put embedded Chroma's threads on one core (the rule and the why: core/chroma_core.py).

Linux only: elsewhere, or where the process may not change affinities, it does nothing
and the sweep runs as before. Threads are found by name under /proc/self/task; a thread
that ends while being looked at is skipped.
"""

import os
from pathlib import Path

from neo_assets.core.chroma_core import is_chroma_thread, pick_core

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
