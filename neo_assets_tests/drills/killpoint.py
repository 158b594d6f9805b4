"""Run the real CLI and SIGKILL the process itself at a named point of the sweep.

    python -m neo_assets_tests.drills.killpoint POINT NTH -- sweep --force --json

The product code is untouched: the drill wraps a function the sweep calls and, on its
NTH call, sends SIGKILL to its own process at that point (the same death as an outside
``kill -9``, but landing exactly where the drill wants it). Points:

- ``envelope``: the tree was walked, nothing recorded yet;
- ``envelope-recorded``: the envelope is committed, the tenant's configVersion too;
- ``parse``: after NTH files were read and parsed, before the declared generation;
- ``generation-recorded``: the declared generation is committed, nothing embedded;
- ``mid-write``: during the NTH Chroma write (a timer fires a few ms into ``add``);
- ``after-write``: right after the NTH batch is in Chroma, before anything else;
- ``fence``: right after the NTH fence is committed to the ledger;
- ``census``: every batch is written, the checkpoint/census commit has not run;
- ``reclaim``: right after the NTH reclaim delete batch (reconciliation).

Once the process reached its point it writes ``$NEO_DRILL_REACHED`` (if set) first, so
the drill can tell "killed at the point" from "died elsewhere".
"""

import functools
import os
import random
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

POINTS = (
    "envelope",
    "envelope-recorded",
    "parse",
    "generation-recorded",
    "mid-write",
    "after-write",
    "fence",
    "census",
    "reclaim",
)


def _die(point: str) -> None:
    marker = os.environ.get("NEO_DRILL_REACHED")
    if marker:
        Path(marker).write_text(point)
    os.kill(os.getpid(), signal.SIGKILL)


def _counting(nth: int) -> Callable[[], bool]:
    calls = [0]
    lock = threading.Lock()

    def due() -> bool:
        with lock:
            calls[0] += 1
            return calls[0] == nth

    return due


def _after(owner: Any, name: str, point: str, nth: int) -> None:
    real = getattr(owner, name)
    due = _counting(nth)

    @functools.wraps(real)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        if due():
            _die(point)
        return result

    setattr(owner, name, wrapper)


def _before(owner: Any, name: str, point: str, nth: int) -> None:
    real = getattr(owner, name)
    due = _counting(nth)

    @functools.wraps(real)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if due():
            _die(point)
        return real(*args, **kwargs)

    setattr(owner, name, wrapper)


def install(point: str, nth: int) -> None:
    """Wrap the function of ``point`` so its ``nth`` call kills this process."""
    from neo_assets.store.chroma_store import ChromaStore
    from neo_assets.store.ledger import Ledger
    from neo_assets.sweep import chunk, envelope

    if point == "envelope":
        _after(envelope, "build_envelope", point, nth)
    elif point == "envelope-recorded":
        _after(Ledger, "record_envelope", point, nth)
    elif point == "parse":
        real = chunk.read_texts
        due = _counting(nth)  # files read across calls

        def read_texts(*args: Any, **kwargs: Any) -> Iterator[tuple[str, str]]:
            for item in real(*args, **kwargs):
                yield item
                if due():
                    _die(point)

        chunk.read_texts = read_texts
    elif point == "generation-recorded":
        _after(Ledger, "record_generation", point, nth)
    elif point == "mid-write":
        real_add = ChromaStore.add
        due = _counting(nth)

        def add(self: ChromaStore, *args: Any, **kwargs: Any) -> None:
            if due():
                delay = random.Random(nth).uniform(0.0, 0.02)
                threading.Timer(delay, _die, args=(point,)).start()
            real_add(self, *args, **kwargs)

        ChromaStore.add = add  # type: ignore[method-assign]
    elif point == "after-write":
        _after(ChromaStore, "add", point, nth)
    elif point == "fence":
        _after(Ledger, "record_fence", point, nth)
    elif point == "census":
        _before(Ledger, "record_sweep_result", point, nth)
    elif point == "reclaim":
        _after(ChromaStore, "delete_ids", point, nth)
    else:
        raise SystemExit(f"unknown kill point {point!r}; one of {', '.join(POINTS)}")


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[2] != "--":
        raise SystemExit(__doc__)
    point, nth = argv[0], int(argv[1])
    install(point, nth)
    from neo_assets.cli.app import main as cli_main

    sys.argv = ["neo-assets", *argv[3:]]
    cli_main()


if __name__ == "__main__":
    main(sys.argv[1:])
