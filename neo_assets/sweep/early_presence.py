"""The store opened, and the recorded generation's ids looked up, while the envelope reads.

A sweep asks Chroma which of its declared ids it already holds before it embeds. Most
of them are the recorded generation's (all of them on a forced sweep of an unchanged
repo), known from the ledger before the envelope is even listed. So one thread opens the
store (on a process's first sweep the client takes ~0.15 s to open) and asks about those
ids while the envelope waits on git; the embed stage then asks only about the rest.

Chroma's lookup releases the GIL while it runs, so the two overlap. The early answer is
as good as one taken later in the same run: the run holds the repo's lease, and nothing
deletes a declared id's row (reclaim takes only ids no longer declared).
"""

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Generic, Protocol, TypeVar


class _Store(Protocol):
    def present_ids(self, ids: Iterable[str]) -> set[str]: ...


S = TypeVar("S", bound=_Store)


class EarlyPresence(Generic[S]):
    """Open a store and look up ``recorded_ids`` on a thread, from construction on.

    ``store()`` waits for the thread and returns the store (raising what opening it
    raised, where the caller would have opened it itself). ``present_ids`` answers from
    the early lookup for the ids it covered and asks the store about the others; an
    early lookup that failed is simply asked again."""

    def __init__(self, open_store: Callable[[], S], recorded_ids: Sequence[str]) -> None:
        self._open = open_store
        self._asked = frozenset(recorded_ids)
        self._store: S | None = None
        self._error: BaseException | None = None
        self._present: set[str] | None = None
        self._thread = threading.Thread(target=self._run, name="neo-early-presence", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._store = self._open()
        except BaseException as exc:  # noqa: BLE001 - raised again by store()
            self._error = exc
            return
        if not self._asked:
            return
        try:
            self._present = self._store.present_ids(self._asked)
        except Exception:  # noqa: BLE001 - present_ids asks again, on the caller's thread
            self._present = None

    def store(self) -> S:
        self._thread.join()
        if self._store is None:
            assert self._error is not None
            raise self._error
        return self._store

    def present_ids(self, ids: Iterable[str]) -> set[str]:
        store = self.store()
        wanted = list(dict.fromkeys(ids))
        if self._present is None:
            return store.present_ids(wanted)
        found = {i for i in wanted if i in self._present}
        found |= store.present_ids(i for i in wanted if i not in self._asked)
        return found

    def close(self) -> None:
        """Wait for the thread (a run that stops before its embed stage still leaves
        nothing running)."""
        self._thread.join()
