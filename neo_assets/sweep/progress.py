"""Embedding progress inside one repo, for whoever watches in this process: the CLI runs its
sweeps in process, so its progress bar moves with each finished batch."""

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

# (repo key, batches done, batches total, chunks embedded so far)
Listener = Callable[[str, int, int, int], None]

_lock = threading.Lock()
_listener: Listener | None = None


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Route progress reports to ``listener`` for the duration of the block."""
    global _listener
    with _lock:
        previous, _listener = _listener, listener
    try:
        yield
    finally:
        with _lock:
            _listener = previous


def report(key: str, done: int, total: int, embedded: int) -> None:
    """Tell the listener, if any; a listener's error never disturbs the sweep."""
    listener = _listener
    if listener is None:
        return
    try:
        listener(key, done, total, embedded)
    except Exception:  # a progress bar must never fail a sweep
        pass
