"""The frozen collection: when the embedding write path freezes, when a re-probe is due, and
which probe outcome lifts it (only a valid vector in time). Pure; time is an argument.
Design: docs/design/health.md#freeze"""

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from neo_assets.core import codes
from neo_assets.embedding.rules.lane import FenceRecord
from neo_assets.embedding.rules.lane_rows import error_row, fence_row_from_record
from neo_assets.health.rules.canary import (
    CORRUPTING_VERDICTS,
    VECTOR_VERDICTS,
    ProbeOutcome,
    failure_backoff_s,
    is_healthy,
    probe_doc,
)
from neo_assets.sweep.rules.summary import LaneSummary, SweepCounts

FREEZE_CLEAR = "clear"
FREEZE_FROZEN = "frozen"
FREEZE_CONTAINED = "contained"
FREEZE_STATES = frozenset({FREEZE_CLEAR, FREEZE_FROZEN, FREEZE_CONTAINED})

TRIGGER_CIRCUIT_STREAK = "circuit-open-streak"
LIFTED_BY_REPROBE = "reprobe"
LIFTED_BY_OPERATOR = "operator"

ReprobeDecision = Literal["probe", "wait", "contain", "none"]
DECISION_PROBE: ReprobeDecision = "probe"
DECISION_WAIT: ReprobeDecision = "wait"
DECISION_CONTAIN: ReprobeDecision = "contain"
DECISION_NONE: ReprobeDecision = "none"

FROZEN_OPERATION_LABEL = "embed-step"


@dataclass(frozen=True)
class FreezePolicy:
    """K, the re-probe back-off and the attempt cap (one settings leaf each)."""

    circuit_sweeps: int = 3
    reprobe_initial_s: float = 60.0
    reprobe_max_s: float = 3600.0
    max_attempts: int = 12

    def __post_init__(self) -> None:
        if self.circuit_sweeps < 1 or self.max_attempts < 1:
            raise ValueError("circuit_sweeps and max_attempts must be >= 1")
        if self.reprobe_initial_s < 0 or self.reprobe_max_s < 0:
            raise ValueError("re-probe back-off bounds must be >= 0")


@dataclass(frozen=True)
class FreezeTrigger:
    """Why the write path froze: a corrupting verdict or ``circuit-open-streak``."""

    code: str
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FreezeRecord:
    """The durable freeze record of one collection (``None``: unobserved). ``version`` guards
    compare-and-set; ``circuit_streak`` moves by its own atomic update."""

    collection: str
    state: str | None
    version: int = 0
    circuit_streak: int | None = 0
    frozen_at: float | None = None
    trigger: str | None = None
    trigger_detail: Mapping[str, Any] = field(default_factory=dict)
    attempts: int | None = 0
    next_probe_at: float | None = None
    last_probe_at: float | None = None
    last_probe: Mapping[str, Any] | None = None
    lifted_at: float | None = None
    lifted_by: str | None = None
    updated_at: float | None = None

    def to_doc(self) -> dict[str, Any]:
        """The snapshot / CLI shape."""
        return {
            "collection": self.collection,
            "state": self.state,
            "frozen": blocks_writes(self),
            "trigger": self.trigger,
            "triggerDetail": dict(self.trigger_detail),
            "frozenAt": self.frozen_at,
            "attempts": self.attempts,
            "nextProbeAt": self.next_probe_at,
            "lastProbeAt": self.last_probe_at,
            "lastProbe": dict(self.last_probe) if self.last_probe is not None else None,
            "liftedAt": self.lifted_at,
            "liftedBy": self.lifted_by,
            "circuitStreak": self.circuit_streak,
            "updatedAt": self.updated_at,
        }


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# ------------------------------------------------------------------ the write path
def blocks_writes(record: FreezeRecord | None) -> bool:
    """True while the collection is frozen or contained, or its state is unreadable."""
    return record is not None and record.state != FREEZE_CLEAR


def frozen_summary(
    missing_ids: Iterable[str],
    fences: Mapping[str, FenceRecord],
    generation: str,
    record: FreezeRecord,
) -> LaneSummary:
    """The sweep summary when the collection is frozen: nothing embedded, every chunk the
    collection lacks deferred with ``KB_COLLECTION_FROZEN``; fenced chunks report their
    fence rows (the fence gate reads them as settled, the censuses stay observed)."""
    deferred: list[str] = []
    fence_rows: list[dict[str, Any]] = []
    for chunk_id in dict.fromkeys(missing_ids):  # each chunk once, in order
        fence = fences.get(chunk_id)
        row = fence_row_from_record(fence, recorded_this_sweep=False) if fence else None
        if row is not None:
            fence_rows.append(row)
        else:
            deferred.append(chunk_id)
    errors = list(fence_rows)
    if deferred:
        errors.append(
            error_row(
                codes.KB_COLLECTION_FROZEN,
                f"collection {record.collection} is {record.state or 'frozen (unreadable)'} "
                f"({record.trigger}): nothing embedded, nothing written",
                deferred,
                FROZEN_OPERATION_LABEL,
                record.trigger,
                freezeState=record.state,
            )
        )
    return LaneSummary(
        counts=SweepCounts(
            offered=len(deferred), already_fenced=len(fence_rows), deferred=len(deferred)
        ),
        errors=tuple(errors),
        generation=generation,
        freeze=record.to_doc(),
    )


# ------------------------------------------------------------------ triggers
def vector_verdict_counts(summary: LaneSummary) -> dict[str, int]:
    """``summary.vector_evidence["verdicts"]`` as ``{verdict: count}``; unknown verdicts
    and unreadable counts are dropped (they are not evidence)."""
    evidence = summary.vector_evidence
    verdicts = evidence.get("verdicts") if isinstance(evidence, Mapping) else None
    if not isinstance(verdicts, Mapping):
        return {}
    return {
        str(k): int(v) for k, v in verdicts.items() if k in VECTOR_VERDICTS and _count(v) and v > 0
    }


def circuit_opened(summary: LaneSummary) -> bool | None:
    """True when the lane's circuit opened in this sweep; False when the sweep embedded
    something without it opening; None when the sweep learned nothing about it."""
    if any(
        isinstance(r, Mapping) and r.get("code") == codes.KB_VECTOR_EMBED_CIRCUIT_OPEN
        for r in summary.errors
    ):
        return True
    if summary.counts.embedded > 0:
        return False
    return None


def next_circuit_streak(previous: int | None, opened: bool | None) -> int:
    """The K counter after one sweep: +1 when its circuit opened, 0 when it embedded
    without opening it, unchanged when it learned nothing. (The column is NOT NULL; an
    unreadable previous value, possible only in a hand-edited row, starts over.)"""
    base = previous if _count(previous) else 0
    if opened is True:
        return base + 1
    if opened is False:
        return 0
    return base


def freeze_trigger(
    summary: LaneSummary, circuit_streak: int | None, policy: FreezePolicy
) -> FreezeTrigger | None:
    """The trigger this sweep's evidence fires, if any."""
    verdicts = vector_verdict_counts(summary)
    for verdict in CORRUPTING_VERDICTS:
        if verdicts.get(verdict):
            evidence = summary.vector_evidence
            detail = dict(evidence) if isinstance(evidence, Mapping) else {}
            return FreezeTrigger(code=verdict, detail=detail)
    if _count(circuit_streak) and circuit_streak >= policy.circuit_sweeps:
        return FreezeTrigger(
            code=TRIGGER_CIRCUIT_STREAK,
            detail={"circuitStreak": circuit_streak, "circuitSweeps": policy.circuit_sweeps},
        )
    return None


def frozen_record(
    previous: FreezeRecord | None,
    collection: str,
    trigger: FreezeTrigger,
    now: float,
    policy: FreezePolicy,
) -> FreezeRecord:
    """The record a trigger makes. A record already frozen or contained keeps its own
    trigger, attempts and schedule (a new sighting does not restart the back-off)."""
    if previous is not None and blocks_writes(previous):
        return previous
    base = previous or FreezeRecord(collection=collection, state=FREEZE_CLEAR)
    return _moved(
        base,
        now,
        state=FREEZE_FROZEN,
        frozen_at=now,
        trigger=trigger.code,
        trigger_detail=dict(trigger.detail),
        attempts=0,
        next_probe_at=now + reprobe_backoff_s(1, policy),
        last_probe_at=None,
        last_probe=None,
        lifted_at=None,
        lifted_by=None,
    )


# ------------------------------------------------------------------ re-probe cadence
def reprobe_backoff_s(attempt: int, policy: FreezePolicy) -> float:
    """The wait before attempt ``attempt`` (1-based): ``initial × 2^(attempt-1)``, capped
    (the canary's own back-off, on the re-probe's bounds)."""
    return failure_backoff_s(attempt, policy.reprobe_initial_s, policy.reprobe_max_s)


def reprobe_decision(record: FreezeRecord | None, now: float, policy: FreezePolicy) -> str:
    """``probe`` only when a frozen record is due; ``contain`` when its attempts are spent
    (or unreadable); ``wait`` when not due or contained; ``none`` when not frozen."""
    if record is None or record.state == FREEZE_CLEAR:
        return DECISION_NONE
    if record.state == FREEZE_CONTAINED:
        return DECISION_WAIT
    if not _count(record.attempts) or record.attempts >= policy.max_attempts:
        return DECISION_CONTAIN
    if not _finite(record.next_probe_at):
        return DECISION_PROBE  # an unreadable schedule is rewritten by the claim
    return DECISION_PROBE if now >= record.next_probe_at else DECISION_WAIT


def contained(record: FreezeRecord, now: float) -> FreezeRecord:
    """The record once its attempts are spent: no more probes, an operator decides."""
    return _moved(record, now, state=FREEZE_CONTAINED, next_probe_at=None)


def claim_reprobe(record: FreezeRecord, now: float, policy: FreezePolicy) -> FreezeRecord:
    """Count the attempt and push the next probe back BEFORE probing (committed first)."""
    attempts = (record.attempts if _count(record.attempts) else 0) + 1
    return _moved(
        record,
        now,
        state=FREEZE_FROZEN,
        attempts=attempts,
        next_probe_at=now + reprobe_backoff_s(attempts, policy),
        last_probe_at=now,
    )


def reprobe_lifts(outcome: ProbeOutcome, expected_dimension: int) -> bool:
    """The one outcome that lifts a freeze: answered in time, a valid vector of the
    collection's dimension (``health.rules.canary.is_healthy``, the verdict the trigger reads)."""
    return is_healthy(outcome, expected_dimension)


def settle_reprobe(
    claimed: FreezeRecord,
    outcome: ProbeOutcome,
    expected_dimension: int,
    now: float,
    policy: FreezePolicy,
) -> FreezeRecord:
    """The record after a claimed probe: lifted (clear, streak reset) on a valid answer;
    otherwise still frozen with the claimed back-off, or contained once attempts are spent."""
    last = probe_doc(outcome, expected_dimension, now)
    if reprobe_lifts(outcome, expected_dimension):
        return _lifted(claimed, now, LIFTED_BY_REPROBE, last_probe=last)
    settled = _moved(claimed, now, last_probe=last)
    if not _count(claimed.attempts) or claimed.attempts >= policy.max_attempts:
        return contained(settled, now)
    return settled


def operator_unfreeze(record: FreezeRecord | None, now: float) -> FreezeRecord | None:
    """An operator lifts a frozen or contained record; ``None`` when nothing is frozen."""
    if record is None or not blocks_writes(record):
        return None
    return _lifted(record, now, LIFTED_BY_OPERATOR)


def _lifted(record: FreezeRecord, now: float, by: str, **changes: Any) -> FreezeRecord:
    """``record`` lifted ``by`` a re-probe or an operator at ``now``: clear, streak reset."""
    return _moved(
        record,
        now,
        state=FREEZE_CLEAR,
        circuit_streak=0,
        next_probe_at=None,
        lifted_at=now,
        lifted_by=by,
        **changes,
    )


def _moved(record: FreezeRecord, now: float, **changes: Any) -> FreezeRecord:
    """``record`` changed at ``now``: its version moves on (writes compare-and-set on it)."""
    return replace(record, version=record.version + 1, updated_at=now, **changes)


# ------------------------------------------------------------------ after a lift
def released_by_lift(
    last_outcome: str | None,
    deferred_cause_code: str | None,
    last_attempt_at: float | None,
    record: FreezeRecord | None,
) -> bool:
    """True when a repo deferred only because the collection was frozen may sweep at once:
    the freeze has since been lifted (after its last attempt). One lift, one retry."""
    if record is None or record.state != FREEZE_CLEAR or not _finite(record.lifted_at):
        return False
    return (
        last_outcome == codes.OUTCOME_DEFERRED
        and deferred_cause_code == codes.KB_COLLECTION_FROZEN
        and _finite(last_attempt_at)
        and record.lifted_at > last_attempt_at
    )
