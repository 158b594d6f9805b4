"""What embedded Chroma's writes do to run well beside the sweep on two cores: its threads
share one core (concurrency/chroma_core.py), the helper processes keep off that core while
an add runs, and each add first lets this process's other threads go idle (the GIL gap,
concurrency/idle_gap.py). The store calls these as hooks around its writes; it knows
nothing of cores or helpers. A Chroma server gets none of it: its threads are its own and
its add does not hold this process's GIL."""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from neo_assets.concurrency.chroma_threads import chroma_core, helpers_kept_off, pin_chroma_threads
from neo_assets.concurrency.gil_gap import GilGap


@dataclass
class ChromaWrites:
    # The core embedded Chroma's threads share, or None (not pinned).
    pin_core: int | None = None
    # Before each add, wait for the process's other threads to go idle; None: no wait.
    gil_gap: GilGap | None = None

    def opened(self) -> None:
        """After the client started (and before each write: a second client's new threads
        start unpinned)."""
        if self.pin_core is not None:
            pin_chroma_threads(self.pin_core)

    def before_write(self) -> None:
        if self.gil_gap is not None:
            self.gil_gap.wait()

    @contextmanager
    def writing(self) -> Iterator[None]:
        with helpers_kept_off(self.pin_core):
            yield


def chroma_writes(*, one_core: bool, gil_gap: bool, remote: bool) -> ChromaWrites | None:
    """The hooks for a store opened with these settings (None when there is nothing to do)."""
    if remote or not (one_core or gil_gap):
        return None
    return ChromaWrites(
        pin_core=chroma_core() if one_core else None, gil_gap=GilGap() if gil_gap else None
    )
