"""When the sweep's own process has gone idle, so embedded Chroma may take the GIL.

An embedded ``add`` holds the GIL for its whole run (a 2,048-row add: ~1.5 s). Whatever
the process's other threads are ready to do at that moment (declare a parsed wave, send
the next batch to the hashing helper, unpickle an answer) waits the whole add, and the
helper processes it would feed sit idle: the pipeline degrades into stages taking turns.
So before each add the writer sleeps in short slices until a few in a row pass in which
the process spent (almost) no CPU: its other threads have done what they could and now
wait on something outside it (a helper's pipe, a queue). One idle slice is not enough:
handing work from thread to thread (a future completes, the event loop wakes, a worker
thread picks the call up) leaves moments where every thread is waking and none is
running. The wait is bounded, so a thread that never goes quiet holds writes back by at
most ``max_s`` each.
"""

# A slice counts as idle when the process used less than this share of it.
IDLE_SHARE = 0.25
SLICE_S = 0.002
# This many idle slices in a row end the wait.
IDLE_SLICES = 3
MAX_S = 0.25


def slice_was_idle(cpu_used_s: float, slice_s: float = SLICE_S) -> bool:
    """Whether ``cpu_used_s`` of process CPU time during a ``slice_s`` sleep means the
    other threads are done (they would have used most of it)."""
    return cpu_used_s < slice_s * IDLE_SHARE


def gap_over(idle_streak: int, waited_s: float, *, max_s: float = MAX_S) -> bool:
    """Stop waiting: the last ``IDLE_SLICES`` slices were idle, or ``max_s`` is spent."""
    return idle_streak >= IDLE_SLICES or waited_s >= max_s
