"""Leases in the ledger: each of ``acquire`` / ``renew`` / ``release`` is ONE conditional
statement, atomic on SQLite and Postgres, so two processes are never both told they hold a
key (rules: ``neo_assets.sweep.rules.leases``). ``LeaseKeeper`` is the holder's side."""

import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from neo_assets.store.ledger import Ledger
from neo_assets.store.ledger_rows import first_row
from neo_assets.store.ledger_schema import leases as t
from neo_assets.sweep.rules import leases as rules
from neo_assets.sweep.rules.leases import LeaseRecord

# Why a keeper does not hold its key.
REASON_HELD = "held"  # another holder had it for the whole wait
REASON_LOST = "lost"  # we had it, and another holder took it over (or it expired unseen)

_UPSERT_DIALECTS = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}


class LeaseLostError(RuntimeError):
    """The holder can no longer prove it holds its lease: it must stop writing."""


def holder_detail() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def try_acquire(
    ledger: Ledger, key: str, holder: str, ttl_s: float, now: float, *, detail: str | None = None
) -> int | None:
    """Take ``key`` for ``holder`` until ``now + ttl_s``: the lease's epoch, or None when
    another holder has it. Re-entrant for the same holder (extends, keeps the epoch)."""
    until = rules.expiry(now, ttl_s)
    dialect = ledger.engine.dialect.name
    make_insert = _UPSERT_DIALECTS.get(dialect)
    if make_insert is None:
        raise NotImplementedError(
            f"leases need an atomic upsert; the ledger on {dialect!r} is not supported "
            "(use SQLite or Postgres)"
        )
    ins = make_insert(t).values(
        key=key, holder=holder, epoch=1, acquired_at=now, expires_at=until, detail=detail
    )
    same_holder = t.c.holder == ins.excluded.holder
    stmt = ins.on_conflict_do_update(
        index_elements=[t.c.key],
        set_={
            "holder": ins.excluded.holder,
            "epoch": sa.case((same_holder, t.c.epoch), else_=t.c.epoch + 1),
            "acquired_at": sa.case((same_holder, t.c.acquired_at), else_=ins.excluded.acquired_at),
            "expires_at": ins.excluded.expires_at,
            "detail": ins.excluded.detail,
        },
        # Free (released: expires_at 0, or expired) or already ours; else no row changes.
        where=same_holder | (t.c.expires_at <= now),
    ).returning(t.c.epoch)
    with ledger.engine.begin() as conn:
        row = conn.execute(stmt).first()
    return None if row is None else int(row[0])


def acquire(ledger: Ledger, key: str, holder: str, ttl_s: float, now: float) -> bool:
    """True when ``holder`` holds ``key`` until ``now + ttl_s``."""
    return try_acquire(ledger, key, holder, ttl_s, now) is not None


def renew(
    ledger: Ledger, key: str, holder: str, ttl_s: float, now: float, *, epoch: int | None = None
) -> bool:
    """Extend the holder's lease to ``now + ttl_s``; False when it no longer has it."""
    until = rules.expiry(now, ttl_s)
    cond = [t.c.key == key, t.c.holder == holder, t.c.expires_at > rules.RELEASED_AT]
    if epoch is not None:
        cond.append(t.c.epoch == epoch)
    with ledger.engine.begin() as conn:
        done = conn.execute(sa.update(t).where(*cond).values(expires_at=until))
    return done.rowcount == 1


def release(ledger: Ledger, key: str, holder: str, *, epoch: int | None = None) -> bool:
    """Free the key if ``holder`` (at ``epoch``) has it. The row stays, so the next holder's
    epoch keeps growing."""
    cond = [t.c.key == key, t.c.holder == holder]
    if epoch is not None:
        cond.append(t.c.epoch == epoch)
    with ledger.engine.begin() as conn:
        done = conn.execute(sa.update(t).where(*cond).values(expires_at=rules.RELEASED_AT))
    return done.rowcount == 1


def current(ledger: Ledger, key: str) -> LeaseRecord | None:
    """The key's row (holder, epoch, expiry), whether or not it is still held."""
    row = first_row(ledger.engine, sa.select(t).where(t.c.key == key))
    if row is None:
        return None
    return LeaseRecord(
        key=row["key"],
        holder=row["holder"],
        epoch=int(row["epoch"]),
        acquired_at=float(row["acquired_at"]),
        expires_at=float(row["expires_at"]),
    )


@dataclass(eq=False)
class LeaseKeeper:
    """Hold ``key`` for ``holder`` across a block of work: wait up to ``wait_s``, renew from a
    daemon thread every TTL/3, and ``check()`` raises ``LeaseLostError`` once a renewal was
    refused or expiry is within TTL/10, so work stops before another holder may start.
    ``expected_epoch``: a later step's lease is lost if another holder had it in between."""

    ledger: Ledger
    key: str
    holder: str
    _: KW_ONLY
    ttl_s: float
    wait_s: float = 0.0
    expected_epoch: int | None = None
    release_on_exit: bool = False
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    held: bool = field(default=False, init=False)
    epoch: int | None = field(default=None, init=False)
    reason: str | None = field(default=None, init=False)
    waited_s: float = field(default=0.0, init=False)
    seen: LeaseRecord | None = field(default=None, init=False)  # the row found on the first try
    _valid_until: float = field(default=0.0, init=False)
    _lost: threading.Event = field(default_factory=threading.Event, init=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        rules.expiry(0.0, self.ttl_s)  # validates the TTL up front
        self.wait_s = max(0.0, self.wait_s)

    # ------------------------------------------------------------------ acquiring
    def acquire(self) -> bool:
        started = self.clock()
        deadline = started + self.wait_s
        self.seen = current(self.ledger, self.key)
        detail = holder_detail()
        while True:
            now = self.clock()
            epoch = try_acquire(self.ledger, self.key, self.holder, self.ttl_s, now, detail=detail)
            if epoch is not None:
                if self.expected_epoch is not None and epoch != self.expected_epoch:
                    release(self.ledger, self.key, self.holder, epoch=epoch)
                    self.reason = REASON_LOST
                    return False
                self.held, self.epoch = True, epoch
                self._valid_until = now + self.ttl_s
                self.waited_s = now - started
                return True
            delay = rules.poll_delay(self.clock(), deadline, self.ttl_s)
            if delay is None:
                self.reason = REASON_LOST if self.expected_epoch is not None else REASON_HELD
                self.waited_s = self.clock() - started
                self.seen = current(self.ledger, self.key) or self.seen
                return False
            self.sleep(delay)

    # ------------------------------------------------------------------ holding
    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    def valid(self) -> bool:
        """True while the holder may still write under this lease."""
        return (
            self.held
            and not self._lost.is_set()
            and rules.still_valid(self._valid_until, self.clock(), rules.write_margin(self.ttl_s))
        )

    def check(self) -> None:
        """Confirm the lease with the ledger (renewing it) and raise ``LeaseLostError``
        unless the holder may still write. Call it right before each write: one small
        UPDATE, so a takeover is seen by the very next write, not a heartbeat later."""
        if self.held and not self._lost.is_set():
            self._renew()
        if not self.valid():
            self._lost.set()
            self.reason = REASON_LOST
            raise LeaseLostError(
                f"lease {self.key!r} (epoch {self.epoch}) is no longer held by {self.holder!r}"
            )

    def start_heartbeat(self) -> None:
        if self._thread is not None or not self.held:
            return
        self._thread = threading.Thread(
            target=self._beat, name=f"lease-heartbeat {self.key}", daemon=True
        )
        self._thread.start()

    def stop_heartbeat(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _renew(self) -> bool | None:
        """Renew with the ledger: True (held a TTL more), False (lost), None (unknown: the
        last confirmed expiry stands)."""
        now = self.clock()
        try:
            ok = renew(self.ledger, self.key, self.holder, self.ttl_s, now, epoch=self.epoch)
        except Exception:  # noqa: BLE001 - unknown: fall back on the last confirmed expiry
            return None
        if ok:
            self._valid_until = now + self.ttl_s
        else:
            self._lost.set()
        return ok

    def _beat(self) -> None:
        interval = rules.heartbeat_interval(self.ttl_s)
        while not self._stop.wait(interval):
            if self._renew() is False:
                self.reason = REASON_LOST
                return

    def release(self) -> None:
        if self.held and self.epoch is not None:
            release(self.ledger, self.key, self.holder, epoch=self.epoch)
        self.held = False

    # ------------------------------------------------------------------ as a block
    def __enter__(self) -> "LeaseKeeper":
        if self.acquire():
            self.start_heartbeat()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.stop_heartbeat()
        if self.held and (exc_type is not None or self.release_on_exit or self.lost):
            self.release()
