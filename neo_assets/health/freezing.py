"""The sweep's side of the freeze: is the write path frozen, and does this sweep's
evidence freeze it. The rules are ``health/rules/freeze.py``; this module reads and writes the
durable record (committed before the sweep acts on it).
"""

from typing import Any

from neo_assets.config.settings import Settings
from neo_assets.health import records as store
from neo_assets.health.rules.freeze import (
    FreezePolicy,
    FreezeRecord,
    FreezeTrigger,
    blocks_writes,
    circuit_opened,
    freeze_trigger,
    frozen_record,
    operator_unfreeze,
)
from neo_assets.store.ledger import Ledger
from neo_assets.sweep.rules.summary import LaneSummary

_CAS_RETRIES = 20


def freeze_policy(settings: Settings) -> FreezePolicy:
    return FreezePolicy(
        circuit_sweeps=settings.health.recovery_freeze_circuit_sweeps,
        reprobe_initial_s=settings.health.recovery_freeze_reprobe_initial_s,
        reprobe_max_s=settings.health.recovery_freeze_reprobe_max_s,
        max_attempts=settings.health.recovery_freeze_reprobe_max_attempts,
    )


def blocking_freeze(ledger: Ledger, collection: str) -> FreezeRecord | None:
    """The freeze record when it blocks writes (frozen, contained, unreadable), else None."""
    record = store.freeze_record(ledger, collection)
    return record if blocks_writes(record) else None


def freeze_now(
    ledger: Ledger, collection: str, trigger: FreezeTrigger, now: float, policy: FreezePolicy
) -> FreezeRecord:
    """Freeze the collection (durably) unless it already is; the record that now holds."""
    for _ in range(_CAS_RETRIES):
        previous = store.freeze_record(ledger, collection)
        record = frozen_record(previous, collection, trigger, now, policy)
        if record is previous:
            return record
        expected = None if previous is None else previous.version
        if store.write_freeze(ledger, record, expected):
            return record
    raise RuntimeError(f"freeze of {collection!r}: too much contention")


def observe_sweep(
    ledger: Ledger, settings: Settings, summary: LaneSummary, now: float
) -> dict[str, Any] | None:
    """After the lane: move the circuit streak, and freeze when the evidence says so.
    Returns the freeze record's snapshot when this sweep froze (or found frozen) it."""
    collection = settings.store.collection_name
    policy = freeze_policy(settings)
    streak = store.note_circuit(ledger, collection, circuit_opened(summary), now)
    trigger = freeze_trigger(summary, streak, policy)
    if trigger is None:
        return None
    return freeze_now(ledger, collection, trigger, now, policy).to_doc()


def unfreeze(
    ledger: Ledger, collection: str, now: float
) -> tuple[FreezeRecord | None, FreezeRecord | None]:
    """An operator lifts the freeze: ``(previous, lifted)``; ``lifted`` is None when
    nothing was frozen. Compare-and-set, retried if a sweep or a probe moved it."""
    for _ in range(_CAS_RETRIES):
        previous = store.freeze_record(ledger, collection)
        lifted = operator_unfreeze(previous, now)
        if lifted is None or previous is None:
            return previous, None
        if store.write_freeze(ledger, lifted, previous.version, reset_streak=True):
            return previous, lifted
    raise RuntimeError(f"unfreeze of {collection!r}: too much contention")
