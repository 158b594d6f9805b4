"""The store opened, and the repo's rows listed, on a thread, early in the sweep.

A sweep asks Chroma which of its declared ids it already holds before it embeds them:
the whole generation on a forced sweep of an unchanged repo, every wave's ids on a first
sweep. Here one thread opens the store (the client takes ~0.15 s to open on a process's
first sweep) and lists the ids of the repo's rows once, while the sweep does other
work; Chroma's lookup releases the GIL while it runs, so the two overlap.

What the listing answers, and why that is sound under the repo's lease, is the rule in
core/sweep/presence.py; the ids it cannot answer are asked of the store, by id.
"""

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

from neo_assets.core.sweep.presence import answer_from_listing


class _Store(Protocol):
    def present_ids(self, ids: Iterable[str]) -> set[str]: ...

    def ids_where(self, where: Mapping[str, Any]) -> set[str]: ...


S = TypeVar("S", bound=_Store)


class EarlyPresence(Generic[S]):
    """Open a store and list the ids matching ``where`` (the repo's rows) on a thread,
    from construction on; ``recorded_ids`` are the recorded generation's.

    ``store()`` waits for the thread and returns the store (raising what opening it
    raised, where the caller would have opened it itself). ``present_ids`` answers from
    the listing (core/sweep/presence.py); when the listing failed it asks the store about
    every id."""

    def __init__(
        self,
        open_store: Callable[[], S],
        where: Mapping[str, Any],
        recorded_ids: Sequence[str],
    ) -> None:
        self._open = open_store
        self._where = dict(where)
        self._recorded = frozenset(recorded_ids)
        self._store: S | None = None
        self._error: BaseException | None = None
        self._rows: set[str] | None = None
        self._thread = threading.Thread(target=self._run, name="neo-early-presence", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._store = self._open()
        except BaseException as exc:  # noqa: BLE001 - raised again by store()
            self._error = exc
            return
        try:
            self._rows = self._store.ids_where(self._where)
        except Exception:  # noqa: BLE001 - present_ids asks by id, on the caller's thread
            self._rows = None

    def store(self) -> S:
        self._thread.join()
        if self._store is None:
            assert self._error is not None
            raise self._error
        return self._store

    def present_ids(self, ids: Iterable[str]) -> set[str]:
        store = self.store()
        wanted = list(dict.fromkeys(ids))
        rows = self._rows
        if rows is None:
            return store.present_ids(wanted)
        found, again = answer_from_listing(wanted, rows, self._recorded)
        if again:
            found |= store.present_ids(again)
        return found

    def close(self) -> None:
        """Wait for the thread (a run that stops before its embed stage still leaves
        nothing running)."""
        self._thread.join()
