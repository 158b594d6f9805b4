"""Provider-wide request slots shared by every process on this machine: file locks, so a
verdict about one input can rely on "nothing else was in flight to this provider".
Design: docs/design/embedding.md#slots"""

import contextlib
import fcntl
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.rules.batch_caps import provider_cap_key

_POLL_S = 0.005
_POLL_MAX_S = 0.05
ENV_SLOTS_DIR = "NEO_PROVIDER_SLOTS_DIR"


def provider_key(name: str, endpoint: str, model: str) -> str:
    """The directory name of one provider: the same server, seen by every process."""
    return provider_cap_key(name, endpoint, model)[:20]


def default_slots_root() -> Path:
    root = os.environ.get(ENV_SLOTS_DIR)
    return Path(root) if root else Path(tempfile.gettempdir()) / "neo-assets-provider-slots"


async def poll_until(attempt: Callable[[], bool], scope: CancelScope, deadline: float) -> bool:
    """Try a non-blocking lock until it is taken (True) or ``deadline`` passes (False),
    sleeping abortably in growing steps between tries."""
    delay = _POLL_S
    while not attempt():
        if time.monotonic() >= deadline:
            return False
        await scope.sleep(delay)
        delay = min(delay * 2, _POLL_MAX_S)
    return True


def ledger_is_postgres(url: str) -> bool:
    return url.startswith(("postgresql", "postgres:"))


@dataclass
class Held:
    """Locks one dispatch holds; ``alone`` is True when it held every slot and the gate."""

    fds: list[int]
    alone: bool
    waited_s: float
    abandoned_seen: int
    handle: Any = None  # the ledger slots' connection holding the advisory locks


class Slots(Protocol):
    """What the lane asks of a provider's slots, wherever they live."""

    slots: int

    def resize(self, slots: int) -> None: ...
    def abandoned_count(self) -> int: ...
    def mark_abandoned(self) -> None: ...
    async def acquire(self, scope: CancelScope, *, solo: bool, max_wait_s: float) -> Held: ...
    def release(self, held: Held) -> None: ...


class ProviderSlots:
    """The slots of one provider (docs/design/embedding.md#slots)."""

    def __init__(self, directory: Path, slots: int) -> None:
        self.resize(slots)
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)

    def resize(self, slots: int) -> None:
        if slots < 1:
            raise ValueError("slots must be >= 1")
        self.slots = slots

    # --- the abandoned-work counter
    def abandoned_count(self) -> int:
        try:
            return int((self.dir / "abandoned").read_text() or 0)
        except (OSError, ValueError):
            return 0

    def mark_abandoned(self) -> None:
        fd = self._open("abandoned.lock")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            count = self.abandoned_count() + 1
            tmp = self.dir / f".abandoned.{os.getpid()}.tmp"
            tmp.write_text(str(count))
            os.replace(tmp, self.dir / "abandoned")
        finally:
            os.close(fd)  # closing releases the lock

    # --- locks
    def _open(self, name: str) -> int:
        return os.open(self.dir / name, os.O_RDWR | os.O_CREAT, 0o666)

    @staticmethod
    def _try(fd: int, kind: int) -> bool:
        try:
            fcntl.flock(fd, kind | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    async def acquire(self, scope: CancelScope, *, solo: bool, max_wait_s: float) -> Held:
        """One slot (shared mode) or the gate and every slot (``solo``), waiting at most
        ``max_wait_s``; past it the dispatch goes ahead unlocked with ``alone`` False."""
        started = time.monotonic()
        deadline = started + max(0.0, max_wait_s)
        fds: list[int] = []
        try:
            gate = self._open("gate.lock")
            fds.append(gate)
            got_gate = await poll_until(
                lambda: self._try(gate, fcntl.LOCK_EX if solo else fcntl.LOCK_SH),
                scope,
                deadline,
            )
            if solo:
                held_all = got_gate
                for index in range(self.slots):
                    fd = self._open(f"slot-{index}.lock")
                    fds.append(fd)
                    if not held_all:
                        continue
                    if not await poll_until(
                        lambda fd=fd: self._try(fd, fcntl.LOCK_EX), scope, deadline
                    ):
                        held_all = False
                return Held(fds, held_all, time.monotonic() - started, self.abandoned_count())
            slot_fds = [self._open(f"slot-{i}.lock") for i in range(self.slots)]
            fds.extend(slot_fds)

            def any_slot() -> bool:
                for fd in slot_fds:
                    if self._try(fd, fcntl.LOCK_EX):
                        for other in slot_fds:  # keep only the one held
                            if other != fd:
                                fds.remove(other)
                                os.close(other)
                        return True
                return False

            await poll_until(any_slot, scope, deadline)
            if got_gate:
                # The gate only orders arrivals: a solo waiting for it must not wait for
                # this request's whole flight, only for the slot it drains.
                fcntl.flock(gate, fcntl.LOCK_UN)
            return Held(fds, False, time.monotonic() - started, self.abandoned_count())
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise

    @staticmethod
    def release(held: Held) -> None:
        for fd in held.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        held.fds.clear()


class LocalSlots:
    """The slots of an in-process provider (the hashing embedder, sentence-transformers):
    nothing outside this process shares it, and the lane already sends an input alone
    only with nothing else of its own in flight, so no lock is needed."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._abandoned = 0

    def resize(self, slots: int) -> None:
        self.slots = slots

    def abandoned_count(self) -> int:
        return self._abandoned

    def mark_abandoned(self) -> None:
        self._abandoned += 1

    async def acquire(self, scope: CancelScope, *, solo: bool, max_wait_s: float) -> Held:
        scope.raise_if_cancelled()
        return Held([], solo, 0.0, self._abandoned)

    @staticmethod
    def release(held: Held) -> None:
        held.fds.clear()
