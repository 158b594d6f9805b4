"""The freeze re-probe: probe the provider ONLY when the durable freeze record is due; claim
the attempt before probing, settle it after, both compare-and-set.
Design: docs/design/health.md#freeze"""

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from neo_assets.config.settings import Settings, load_settings
from neo_assets.embedding.cancel import CancelScope
from neo_assets.health import records as store
from neo_assets.health.canary import ledger_for
from neo_assets.health.freezing import freeze_policy
from neo_assets.health.probe import REPROBE_DEADLINE_LEAF, probe_and_close
from neo_assets.health.rules.canary import REPROBE_OPERATION_LABEL, ProbeOutcome
from neo_assets.health.rules.freeze import (
    DECISION_CONTAIN,
    DECISION_PROBE,
    FREEZE_CLEAR,
    FreezeRecord,
    claim_reprobe,
    contained,
    reprobe_decision,
    settle_reprobe,
)
from neo_assets.services.handles import build_provider
from neo_assets.store.ledger import Ledger

DECISION_RACED = "raced"  # another decider changed the record first: nothing done


@dataclass(frozen=True)
class ReprobeReport:
    decision: str  # probe / wait / contain / none / raced
    probed: bool
    lifted: bool
    record: FreezeRecord | None
    outcome: ProbeOutcome | None = None  # what the probe saw, when one ran

    def message(self) -> str:
        state = self.record.state if self.record is not None else None
        if not self.probed:
            due = self.record.next_probe_at if self.record is not None else None
            return f"no re-probe ({self.decision}); freeze state {state}, next probe at {due}"
        code = (
            self.record.last_probe.get("code") if self.record and self.record.last_probe else None
        )
        verdict = "lifted the freeze" if self.lifted else f"not lifted ({code}): stays {state}"
        return f"re-probe attempt {self.record.attempts if self.record else '?'}: {verdict}"


async def reprobe_async(
    settings: Settings,
    ledger: Ledger,
    *,
    clock: Callable[[], float] = time.time,
    upstream: CancelScope | None = None,
) -> ReprobeReport:
    """One re-probe cycle: docs/design/health.md#freeze."""
    collection = settings.store.collection_name
    policy = freeze_policy(settings)
    record = store.freeze_record(ledger, collection)
    now = clock()
    decision = reprobe_decision(record, now, policy)

    def raced(outcome: ProbeOutcome | None = None) -> ReprobeReport:
        """Another writer moved the record first: theirs holds, as read now."""
        fresh = store.freeze_record(ledger, collection)
        return ReprobeReport(DECISION_RACED, outcome is not None, False, fresh, outcome)

    if decision == DECISION_CONTAIN and record is not None:
        held = contained(record, now)
        if not store.write_freeze(ledger, held, record.version):
            return raced()
        return ReprobeReport(decision, False, False, held)
    if decision != DECISION_PROBE or record is None:
        return ReprobeReport(decision, False, False, record)
    claimed = claim_reprobe(record, now, policy)
    if not store.write_freeze(ledger, claimed, record.version):
        return raced()
    outcome = await probe_and_close(
        build_provider(settings),
        deadline_leaf=REPROBE_DEADLINE_LEAF,
        operation_label=f"{REPROBE_OPERATION_LABEL}:attempt-{claimed.attempts}",
        upstream=upstream,
    )
    expected = settings.embedding.dimensions
    settled = settle_reprobe(claimed, outcome, expected, clock(), policy)
    lifted = settled.state == FREEZE_CLEAR
    if not store.write_freeze(ledger, settled, claimed.version, reset_streak=lifted):
        # An operator (or another writer) moved the record while the probe ran: theirs holds.
        return raced(outcome)
    return ReprobeReport(decision, True, lifted, settled, outcome)


def run_due_reprobe(
    settings: Settings | None = None,
    ledger: Ledger | None = None,
    *,
    clock: Callable[[], float] = time.time,
) -> ReprobeReport:
    """``reprobe_async`` on a fresh event loop (the sensor's tick)."""
    settings = settings or load_settings()
    with ledger_for(settings, ledger) as held:
        return asyncio.run(reprobe_async(settings, held, clock=clock))
