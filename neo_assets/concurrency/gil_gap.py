"""Before an embedded Chroma ``add``: let the process's other threads finish what they
are ready to do (the rule and the why: concurrency/idle_gap.py)."""

import time
from collections.abc import Callable
from dataclasses import dataclass

from neo_assets.concurrency.idle_gap import MAX_S, SLICE_S, gap_over, slice_was_idle


@dataclass
class GilGap:
    """Waits until the process is idle; counts what the waits cost (observability)."""

    max_s: float = MAX_S
    slice_s: float = SLICE_S
    clock: Callable[[], float] = time.monotonic
    cpu: Callable[[], float] = time.process_time
    sleep: Callable[[float], None] = time.sleep
    waits: int = 0
    waited_s: float = 0.0
    capped: int = 0  # waits that hit max_s (a thread that never went quiet)

    def wait(self) -> float:
        """Sleep in slices until a few in a row pass idle, at most ``max_s``; returns the
        wait."""
        started = self.clock()
        streak = 0
        while True:
            before = self.cpu()
            self.sleep(self.slice_s)
            waited = self.clock() - started
            idle = slice_was_idle(self.cpu() - before, self.slice_s)
            streak = streak + 1 if idle else 0
            if gap_over(streak, waited, max_s=self.max_s):
                break
        self.waits += 1
        self.waited_s += waited
        if waited >= self.max_s:
            self.capped += 1
        return waited
