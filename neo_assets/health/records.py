"""Canary records and the collection freeze record in the ledger. Writes commit before
returning; freeze writes are compare-and-set on ``version``, so two deciders never both act
on one state. Torn values read as ``None``."""

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from neo_assets.health.rules.canary import CanaryRecord, record_from_mapping
from neo_assets.health.rules.freeze import (
    FREEZE_CLEAR,
    FREEZE_STATES,
    FreezeRecord,
    next_circuit_streak,
)
from neo_assets.store.ledger import Ledger
from neo_assets.store.ledger_schema import canary_records, collection_freeze

# Canary records kept (newest first); at one per 5 minutes that is well over a day.
CANARY_RECORDS_KEPT = 500
_CAS_RETRIES = 20


def _json(value: Mapping[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(dict(value), sort_keys=True, default=str)


def _loads(raw: object) -> Any:
    if not isinstance(raw, str):
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# ------------------------------------------------------------------ canary records
def record_canary(ledger: Ledger, record: CanaryRecord) -> None:
    """Append one canary record (committed) and prune the oldest beyond the kept count."""
    t = canary_records
    with ledger.engine.begin() as conn:
        # The record's fields are the table's columns, one for one.
        conn.execute(sa.insert(t).values(**dataclasses.asdict(record)))
        keep = sa.select(t.c.id).order_by(t.c.id.desc()).limit(CANARY_RECORDS_KEPT).subquery()
        conn.execute(sa.delete(t).where(t.c.id.not_in(sa.select(keep.c.id))))


def latest_canary(ledger: Ledger) -> CanaryRecord | None:
    """The newest canary record; ``None`` when there is none or it is torn."""
    t = canary_records
    with ledger.engine.connect() as conn:
        row = conn.execute(sa.select(t).order_by(t.c.id.desc()).limit(1)).mappings().first()
    return None if row is None else record_from_mapping(dict(row))


def latest_healthy_at(ledger: Ledger) -> float | None:
    """When the canary last saw the provider healthy (a real probe, never a cache hit)."""
    t = canary_records
    with ledger.engine.connect() as conn:
        value = conn.execute(
            sa.select(sa.func.max(t.c.observed_at)).where(t.c.healthy.is_(True))
        ).scalar()
    return _number(value)


def canary_count(ledger: Ledger) -> int:
    with ledger.engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(canary_records)).scalar())


# ------------------------------------------------------------------ the freeze record
def _freeze_from_row(row: Mapping[str, Any]) -> FreezeRecord:
    state = row.get("state")
    detail = _loads(row.get("trigger_detail"))
    last = _loads(row.get("last_probe"))
    return FreezeRecord(
        collection=str(row["collection"]),
        state=state if state in FREEZE_STATES else None,
        version=int(row["version"]),
        circuit_streak=_int(row.get("circuit_streak")),
        frozen_at=_number(row.get("frozen_at")),
        trigger=row.get("trigger"),
        trigger_detail=detail if isinstance(detail, dict) else {},
        attempts=_int(row.get("attempts")),
        next_probe_at=_number(row.get("next_probe_at")),
        last_probe_at=_number(row.get("last_probe_at")),
        last_probe=last if isinstance(last, dict) else None,
        lifted_at=_number(row.get("lifted_at")),
        lifted_by=row.get("lifted_by"),
        updated_at=_number(row.get("updated_at")),
    )


def freeze_record(ledger: Ledger, collection: str) -> FreezeRecord | None:
    """The collection's freeze record; ``None`` when it never had one."""
    t = collection_freeze
    with ledger.engine.connect() as conn:
        row = conn.execute(sa.select(t).where(t.c.collection == collection)).mappings().first()
    return None if row is None else _freeze_from_row(dict(row))


def _values(record: FreezeRecord) -> dict[str, Any]:
    return {
        "state": record.state or FREEZE_CLEAR,
        "version": record.version,
        "frozen_at": record.frozen_at,
        "trigger": record.trigger,
        "trigger_detail": _json(record.trigger_detail),
        "attempts": record.attempts,
        "next_probe_at": record.next_probe_at,
        "last_probe_at": record.last_probe_at,
        "last_probe": _json(record.last_probe),
        "lifted_at": record.lifted_at,
        "lifted_by": record.lifted_by,
        "updated_at": record.updated_at or 0.0,
    }


def write_freeze(
    ledger: Ledger,
    record: FreezeRecord,
    expected_version: int | None,
    *,
    reset_streak: bool = False,
) -> bool:
    """Store ``record`` if the stored one still has ``expected_version`` (``None``: only if
    there is no record yet). True when written (committed), False when another writer won.
    The circuit streak is ``note_circuit``'s: written only when inserting, or set to 0 with
    ``reset_streak`` (a lift starts the K count over)."""
    t = collection_freeze
    if record.state is None:
        raise ValueError("refusing to write a freeze record without a state")
    with ledger.engine.begin() as conn:
        if expected_version is None:
            exists = conn.execute(
                sa.select(sa.literal(1)).where(t.c.collection == record.collection)
            ).first()
            if exists is not None:
                return False
            conn.execute(
                sa.insert(t).values(
                    collection=record.collection,
                    circuit_streak=record.circuit_streak or 0,
                    **_values(record),
                )
            )
            return True
        values = _values(record)
        if reset_streak:
            values["circuit_streak"] = 0
        done = conn.execute(
            sa.update(t)
            .where(t.c.collection == record.collection, t.c.version == expected_version)
            .values(**values)
        )
        return done.rowcount == 1


def note_circuit(ledger: Ledger, collection: str, opened: bool | None, now: float) -> int:
    """Move the K counter by one sweep's observation (``health.rules.freeze.next_circuit_streak``);
    compare-and-set on the counter itself, so concurrent sweeps never lose a sighting.
    Returns the streak after this sweep."""
    t = collection_freeze
    for _ in range(_CAS_RETRIES):
        record = freeze_record(ledger, collection)
        if record is None:
            streak = next_circuit_streak(0, opened)
            fresh = FreezeRecord(
                collection=collection, state=FREEZE_CLEAR, circuit_streak=streak, updated_at=now
            )
            if write_freeze(ledger, fresh, None):
                return streak
            continue
        streak = next_circuit_streak(record.circuit_streak, opened)
        if streak == record.circuit_streak:
            return streak
        # The streak as read (IS NULL when it read as unreadable): compare-and-set on it.
        guard = t.c.circuit_streak.is_not_distinct_from(record.circuit_streak)
        with ledger.engine.begin() as conn:
            done = conn.execute(
                sa.update(t)
                .where(t.c.collection == collection, guard)
                .values(circuit_streak=streak)
            )
        if done.rowcount == 1:
            return streak
    raise RuntimeError(f"circuit streak of {collection!r}: too much contention")
