"""Provider-wide request slots across machines: with a Postgres ledger, the protocol of
``embedding/provider_slots.py`` on session advisory locks (slot ``i`` is ``(key, i)``,
the gate ``(key, -1)``). A lock dies with its connection, as a file lock with its process.
Design: docs/design/embedding.md#slots"""

import contextlib
import hashlib
import time
from typing import Any

import sqlalchemy as sa

from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.provider_slots import Held, ProviderSlots, poll_until
from neo_assets.store.ledger_schema import provider_work

_ENGINES: dict[str, sa.Engine] = {}
GATE = -1


def slots_engine(url: str) -> sa.Engine:
    """One engine per ledger URL in this process, its schema migrated once; each held
    dispatch takes one of its pooled connections."""
    engine = _ENGINES.get(url)
    if engine is None:
        from neo_assets.store.ledger import Ledger  # noqa: PLC0415 - migrates on open

        Ledger.open(url).dispose()
        engine = _ENGINES[url] = sa.create_engine(
            url, pool_size=8, max_overflow=24, pool_pre_ping=True
        )
    return engine


def lock_class(provider_key: str) -> int:
    """The advisory-lock class (int4) of one provider."""
    return int.from_bytes(hashlib.sha256(provider_key.encode()).digest()[:4], "big", signed=True)


class LedgerSlots:
    """The slots of one provider in a Postgres ledger; the interface of
    ``embedding.provider_slots.ProviderSlots``."""

    def __init__(self, engine: sa.Engine, provider_key: str, slots: int) -> None:
        self.engine = engine
        self.key = provider_key
        self.cls = lock_class(provider_key)
        self.resize(slots)

    resize = ProviderSlots.resize

    # --- the abandoned-work counter
    def abandoned_count(self) -> int:
        with self.engine.connect() as conn:
            value = conn.execute(
                sa.select(provider_work.c.abandoned).where(provider_work.c.provider_key == self.key)
            ).scalar()
        return int(value or 0)

    def mark_abandoned(self) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO provider_work (provider_key, abandoned) VALUES (:k, 1) "
                    "ON CONFLICT (provider_key) DO UPDATE "
                    "SET abandoned = provider_work.abandoned + 1"
                ),
                {"k": self.key},
            )

    # --- locks
    def _try(self, conn: sa.Connection, obj: int, *, shared: bool = False) -> bool:
        fn = "pg_try_advisory_lock_shared" if shared else "pg_try_advisory_lock"
        got = conn.execute(sa.text(f"SELECT {fn}(:c, :o)"), {"c": self.cls, "o": obj}).scalar()
        conn.commit()  # end the implicit transaction: the lock is the session's, not its
        return bool(got)

    async def acquire(self, scope: CancelScope, *, solo: bool, max_wait_s: float) -> Held:
        """One slot (shared mode) or the gate and every slot (``solo``), on a connection
        kept until ``release``. Past ``max_wait_s`` the dispatch goes ahead without the
        locks it could not get, and ``alone`` is False."""
        started = time.monotonic()
        deadline = started + max(0.0, max_wait_s)
        conn = self.engine.connect()
        try:
            got_gate = await poll_until(
                lambda: self._try(conn, GATE, shared=not solo), scope, deadline
            )
            if solo:
                held_all = got_gate
                for index in range(self.slots):  # once one is missed, no more are tried
                    held_all = held_all and await poll_until(
                        lambda index=index: self._try(conn, index), scope, deadline
                    )
                return Held([], held_all, time.monotonic() - started, self.abandoned_count(), conn)

            def any_slot() -> bool:
                return any(self._try(conn, index) for index in range(self.slots))

            await poll_until(any_slot, scope, deadline)
            if got_gate:
                # The gate only orders arrivals (as with the file locks).
                conn.execute(
                    sa.text("SELECT pg_advisory_unlock_shared(:c, :o)"), {"c": self.cls, "o": GATE}
                )
                conn.commit()
            return Held([], False, time.monotonic() - started, self.abandoned_count(), conn)
        except BaseException:
            _drop(conn)
            raise

    @staticmethod
    def release(held: Held) -> None:
        conn, held.handle = held.handle, None
        if conn is None:
            return
        try:
            conn.execute(sa.text("SELECT pg_advisory_unlock_all()"))
            conn.commit()
            conn.close()
        except Exception:  # noqa: BLE001 - a broken connection has lost its locks anyway
            _drop(conn)


def _drop(conn: Any) -> None:
    """Close without returning to the pool: a connection's locks must not outlive it."""
    with contextlib.suppress(Exception):
        conn.invalidate()
    with contextlib.suppress(Exception):
        conn.close()
