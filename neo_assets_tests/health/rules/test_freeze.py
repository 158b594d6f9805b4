"""The freeze rules: triggers, the frozen write path, re-probe cadence, what lifts it."""

import hashlib
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neo_assets.core import codes
from neo_assets.embedding.rules.lane import FenceRecord
from neo_assets.health.rules.canary import (
    CORRUPTING_VERDICTS,
    ProbeOutcome,
    VectorFacts,
    judge_vectors,
)
from neo_assets.health.rules.freeze import (
    DECISION_CONTAIN,
    DECISION_NONE,
    DECISION_PROBE,
    DECISION_WAIT,
    FREEZE_CLEAR,
    FREEZE_CONTAINED,
    FREEZE_FROZEN,
    LIFTED_BY_OPERATOR,
    LIFTED_BY_REPROBE,
    TRIGGER_CIRCUIT_STREAK,
    FreezePolicy,
    FreezeRecord,
    FreezeTrigger,
    blocks_writes,
    circuit_opened,
    claim_reprobe,
    freeze_trigger,
    frozen_record,
    frozen_summary,
    next_circuit_streak,
    operator_unfreeze,
    released_by_lift,
    reprobe_backoff_s,
    reprobe_decision,
    reprobe_lifts,
    settle_reprobe,
    vector_verdict_counts,
)
from neo_assets.sweep.rules.censuses import build_censuses
from neo_assets.sweep.rules.outcomes import classify_sweep_outcome
from neo_assets.sweep.rules.summary import LaneSummary, SweepCounts

DIM = 32
POLICY = FreezePolicy(circuit_sweeps=3, reprobe_initial_s=60.0, reprobe_max_s=600.0, max_attempts=3)
COLLECTION = "neo-knowledge-base"
GOOD = VectorFacts(count=1, dimensions=(DIM,), finite=True, nonzero=True)


def cid(n: int) -> str:
    return hashlib.sha256(f"chunk-{n}".encode()).hexdigest()


def probe(**kw: Any) -> ProbeOutcome:
    base: dict[str, Any] = {"operation_label": "freeze-reprobe", "timeout_ms": 1000}
    base.update({"elapsed_ms": 5.0, **kw})
    return ProbeOutcome(**base)


def frozen(**kw: Any) -> FreezeRecord:
    base = frozen_record(None, COLLECTION, FreezeTrigger("dimension-mismatch"), 1000.0, POLICY)
    return replace(base, **kw)


def summary(
    errors: list[dict[str, Any]] | None = None, embedded: int = 0, verdicts: object = None
) -> LaneSummary:
    return LaneSummary(
        counts=SweepCounts(embedded=embedded),
        errors=tuple(errors or ()),
        vector_evidence=None
        if verdicts is None
        else {"verdicts": verdicts, "expectedDimension": DIM},
    )


CIRCUIT_ROW = {"code": codes.KB_VECTOR_EMBED_CIRCUIT_OPEN, "message": "open", "details": {}}

# Probes that carry no vector evidence: every one must keep the freeze.
INCONCLUSIVE = {
    "own-deadline": probe(
        failure_code=codes.KB_VECTOR_EMBED_TIMEOUT, cause_code=codes.EMBEDDING_PROBE_TIMEOUT
    ),
    "upstream-abort": probe(failure_code=codes.KB_VECTOR_EMBED_ABORTED, cause_code=codes.ABORT_ERR),
    "openai-timeout": probe(
        failure_code=codes.KB_VECTOR_EMBED_TIMEOUT,
        cause_code=codes.OPENAI_COMPATIBLE_REQUEST_TIMEOUT,
    ),
    "ollama-timeout": probe(
        failure_code=codes.KB_VECTOR_EMBED_TIMEOUT, cause_code=codes.PROVIDER_TIMEOUT
    ),
    "refused": probe(failure_code=codes.KB_VECTOR_EMBED_CONNECTION_REFUSED),
    "reset": probe(failure_code=codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED),
    "other": probe(failure_code=codes.KB_VECTOR_EMBED_UNCLASSIFIED),
    "late-valid": probe(facts=GOOD, timeout_ms=10, elapsed_ms=11.0),
}


# ------------------------------------------------------------------ the write path
def test_blocks_writes() -> None:
    assert not blocks_writes(None)
    assert not blocks_writes(FreezeRecord(COLLECTION, FREEZE_CLEAR))
    assert blocks_writes(FreezeRecord(COLLECTION, FREEZE_FROZEN))
    assert blocks_writes(FreezeRecord(COLLECTION, FREEZE_CONTAINED))
    assert blocks_writes(FreezeRecord(COLLECTION, None))  # unreadable: fail closed


def _fence(chunk_id: str) -> FenceRecord:
    return FenceRecord(
        chunk_id,
        codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY,
        codes.KB_VECTOR_EMBED_UNDELIVERABLE_AT_GEOMETRY,
        {"evidenceCode": codes.KB_VECTOR_EMBED_OVER_ADMISSION_BAND},
        900.0,
    )


def test_a_frozen_sweep_defers_with_the_frozen_cause_and_keeps_fences() -> None:
    ids = [cid(i) for i in range(5)]
    out = frozen_summary([*ids, ids[0]], {ids[4]: _fence(ids[4])}, "gen", frozen())
    assert out.counts.embedded == 0 and out.counts.requests == 0
    assert out.counts.deferred == 4 and out.counts.already_fenced == 1
    assert out.counts.offered == out.counts.deferred
    live = [r for r in out.errors if r["code"] == codes.KB_COLLECTION_FROZEN]
    assert len(live) == 1 and live[0]["details"]["chunkCount"] == 4
    assert live[0]["details"]["causeCode"] == "dimension-mismatch"
    verdict = classify_sweep_outcome(out.errors)
    assert verdict.outcome == codes.OUTCOME_DEFERRED
    assert verdict.cause_code == codes.KB_COLLECTION_FROZEN
    assert not verdict.arms_recovery_episode and not verdict.advance_checkpoint
    census = build_censuses(verdict.fence_rows)["undeliverableChunks"]
    assert census is not None and census["count"] == 1 and census["ids"] == [ids[4]]


def test_a_frozen_repo_that_lacks_nothing_has_nothing_to_withhold() -> None:
    out = frozen_summary([], {}, "gen", frozen())
    assert out.errors == () and classify_sweep_outcome(out.errors).outcome == codes.OUTCOME_COMPLETE
    fenced_only = frozen_summary([cid(1)], {cid(1): _fence(cid(1))}, "gen", frozen())
    assert classify_sweep_outcome(fenced_only.errors).outcome == codes.OUTCOME_COMPLETE


# ------------------------------------------------------------------ triggers
def test_vector_verdict_counts_drop_what_is_not_evidence() -> None:
    doc = summary(verdicts={"zero": 2, "bogus": 3, "non-finite": -1, "valid": True, "malformed": 1})
    assert vector_verdict_counts(doc) == {"zero": 2, "malformed": 1}
    assert vector_verdict_counts(summary(verdicts="x")) == {}
    assert vector_verdict_counts(LaneSummary()) == {}


@pytest.mark.parametrize("verdict", CORRUPTING_VERDICTS)
def test_a_corrupting_answer_freezes(verdict: str) -> None:
    trigger = freeze_trigger(summary(verdicts={verdict: 1}), 0, POLICY)
    assert trigger is not None and trigger.code == verdict
    assert trigger.detail["verdicts"] == {verdict: 1}


def test_a_dimension_mismatch_is_the_named_trigger_among_several() -> None:
    doc = summary(verdicts={"zero": 5, "non-finite": 1, "dimension-mismatch": 1})
    assert freeze_trigger(doc, 99, POLICY).code == "dimension-mismatch"  # type: ignore[union-attr]


@pytest.mark.parametrize("verdicts", [{}, {"malformed": 3}, {"wrong-count": 1}, {"valid": 4}])
def test_answers_that_could_not_corrupt_do_not_freeze(verdicts: dict[str, int]) -> None:
    assert freeze_trigger(summary(verdicts=verdicts), 0, POLICY) is None


def test_circuit_open_in_k_consecutive_sweeps_freezes() -> None:
    assert freeze_trigger(summary([CIRCUIT_ROW]), 2, POLICY) is None
    trigger = freeze_trigger(summary([CIRCUIT_ROW]), 3, POLICY)
    assert trigger is not None and trigger.code == TRIGGER_CIRCUIT_STREAK
    assert trigger.detail == {"circuitStreak": 3, "circuitSweeps": 3}
    assert freeze_trigger(summary(), None, POLICY) is None


@pytest.mark.parametrize(
    ("doc", "opened"),
    [
        (summary([CIRCUIT_ROW], embedded=3), True),
        (summary([CIRCUIT_ROW]), True),
        (summary(embedded=2), False),
        (summary(), None),
        (summary([{"code": codes.KB_VECTOR_EMBED_ABORTED, "details": {}}]), None),
        (summary(["junk"]), None),  # type: ignore[list-item]
    ],
)
def test_circuit_opened(doc: LaneSummary, opened: bool | None) -> None:
    assert circuit_opened(doc) is opened


def test_the_streak_counts_consecutive_openings_only() -> None:
    streak = 0
    for opened, expected in [(True, 1), (None, 1), (True, 2), (False, 0), (True, 1)]:
        streak = next_circuit_streak(streak, opened)
        assert streak == expected
    assert next_circuit_streak(None, True) == 1


def test_a_trigger_freezes_a_clear_record_once() -> None:
    rec = frozen_record(None, COLLECTION, FreezeTrigger("zero", {"a": 1}), 500.0, POLICY)
    assert rec.state == FREEZE_FROZEN and rec.trigger == "zero" and rec.frozen_at == 500.0
    assert rec.attempts == 0 and rec.next_probe_at == 560.0 and rec.version == 1
    # A later sighting keeps the existing record: the back-off does not restart.
    claimed = claim_reprobe(rec, 600.0, POLICY)
    assert frozen_record(claimed, COLLECTION, FreezeTrigger("non-finite"), 700.0, POLICY) is claimed
    lifted = replace(claimed, state=FREEZE_CLEAR, version=9, lifted_at=650.0)
    again = frozen_record(lifted, COLLECTION, FreezeTrigger("non-finite"), 700.0, POLICY)
    assert again.state == FREEZE_FROZEN and again.version == 10 and again.attempts == 0
    assert again.lifted_at is None and again.trigger == "non-finite"


# ------------------------------------------------------------------ re-probe cadence
def test_reprobe_backoff() -> None:
    assert [reprobe_backoff_s(n, POLICY) for n in range(1, 7)] == [
        60.0,
        120.0,
        240.0,
        480.0,
        600.0,
        600.0,
    ]
    assert reprobe_backoff_s(10**6, POLICY) == 600.0
    with pytest.raises(ValueError):
        reprobe_backoff_s(0, POLICY)


@pytest.mark.parametrize(
    ("record", "now", "decision"),
    [
        (None, 0.0, DECISION_NONE),
        (FreezeRecord(COLLECTION, FREEZE_CLEAR), 0.0, DECISION_NONE),
        (frozen(next_probe_at=2000.0), 1999.9, DECISION_WAIT),
        (frozen(next_probe_at=2000.0), 2000.0, DECISION_PROBE),
        (frozen(next_probe_at=None), 0.0, DECISION_PROBE),
        (frozen(state=None, next_probe_at=10.0), 20.0, DECISION_PROBE),
        (frozen(attempts=3, next_probe_at=0.0), 5000.0, DECISION_CONTAIN),
        (frozen(attempts=None, next_probe_at=0.0), 5000.0, DECISION_CONTAIN),
        (frozen(state=FREEZE_CONTAINED, next_probe_at=0.0), 1e12, DECISION_WAIT),
    ],
)
def test_reprobe_decision(record: FreezeRecord | None, now: float, decision: str) -> None:
    assert reprobe_decision(record, now, POLICY) == decision


def test_a_claim_counts_the_attempt_and_pushes_the_next_probe_before_probing() -> None:
    rec = frozen(version=4)
    claimed = claim_reprobe(rec, 2000.0, POLICY)
    assert claimed.attempts == 1 and claimed.next_probe_at == 2060.0
    assert claimed.last_probe_at == 2000.0 and claimed.version == 5
    assert reprobe_decision(claimed, 2059.0, POLICY) == DECISION_WAIT
    second = claim_reprobe(claimed, 2060.0, POLICY)
    assert second.attempts == 2 and second.next_probe_at == 2180.0


def test_only_a_valid_vector_in_time_lifts_the_freeze() -> None:
    claimed = claim_reprobe(frozen(circuit_streak=5), 2000.0, POLICY)
    lifted = settle_reprobe(claimed, probe(facts=GOOD), DIM, 2001.0, POLICY)
    assert lifted.state == FREEZE_CLEAR and lifted.lifted_by == LIFTED_BY_REPROBE
    assert lifted.lifted_at == 2001.0 and lifted.circuit_streak == 0
    assert lifted.next_probe_at is None and lifted.version == claimed.version + 1
    assert lifted.last_probe is not None and lifted.last_probe["healthy"] is True
    assert not blocks_writes(lifted)


@pytest.mark.parametrize("case", sorted(INCONCLUSIVE))
def test_every_inconclusive_probe_keeps_the_freeze_and_backs_off(case: str) -> None:
    outcome = INCONCLUSIVE[case]
    assert not reprobe_lifts(outcome, DIM)
    claimed = claim_reprobe(frozen(), 2000.0, POLICY)
    settled = settle_reprobe(claimed, outcome, DIM, 2001.0, POLICY)
    assert settled.state == FREEZE_FROZEN and blocks_writes(settled)
    assert settled.attempts == 1 and settled.next_probe_at == 2060.0
    assert settled.last_probe is not None and settled.last_probe["healthy"] is False
    assert settled.lifted_at is None


@pytest.mark.parametrize(
    "facts",
    [
        VectorFacts(1, (DIM - 1,), True, True),
        VectorFacts(1, (DIM,), False, True),
        VectorFacts(1, (DIM,), True, False),
        VectorFacts(2, (DIM,), True, True),
    ],
)
def test_a_still_wrong_provider_keeps_the_freeze(facts: VectorFacts) -> None:
    claimed = claim_reprobe(frozen(), 2000.0, POLICY)
    settled = settle_reprobe(claimed, probe(facts=facts), DIM, 2001.0, POLICY)
    assert settled.state == FREEZE_FROZEN
    assert settled.last_probe["code"] == codes.KB_VECTOR_EMBED_INVALID_VECTORS  # type: ignore[index]


def test_the_cap_contains_the_record() -> None:
    rec = frozen()
    now = 2000.0
    for attempt in range(1, POLICY.max_attempts + 1):
        assert reprobe_decision(rec, now, POLICY) == DECISION_PROBE
        claimed = claim_reprobe(rec, now, POLICY)
        rec = settle_reprobe(claimed, INCONCLUSIVE["refused"], DIM, now, POLICY)
        assert rec.attempts == attempt
        now = rec.next_probe_at or now + 10**6
    assert rec.state == FREEZE_CONTAINED and rec.next_probe_at is None
    assert blocks_writes(rec)
    assert reprobe_decision(rec, 1e15, POLICY) == DECISION_WAIT


def test_an_operator_lifts_a_contained_record() -> None:
    held = replace(frozen(attempts=3), state=FREEZE_CONTAINED, circuit_streak=4)
    lifted = operator_unfreeze(held, 3000.0)
    assert lifted is not None and lifted.state == FREEZE_CLEAR
    assert lifted.lifted_by == LIFTED_BY_OPERATOR and lifted.lifted_at == 3000.0
    assert lifted.version == held.version + 1 and lifted.circuit_streak == 0
    assert operator_unfreeze(lifted, 3001.0) is None
    assert operator_unfreeze(None, 3001.0) is None
    assert operator_unfreeze(frozen(), 3001.0) is not None


# ------------------------------------------------------------------ one rule both ways
facts_strategy = st.builds(
    VectorFacts,
    count=st.integers(0, 3),
    dimensions=st.lists(st.sampled_from([DIM - 1, DIM, DIM + 1, 8]), max_size=2).map(
        lambda d: tuple(sorted(set(d)))
    ),
    finite=st.booleans(),
    nonzero=st.booleans(),
)


@given(facts_strategy)
def test_the_rule_that_freezes_is_the_rule_that_lifts(facts: VectorFacts) -> None:
    verdict = judge_vectors(facts, DIM)
    freezes = freeze_trigger(summary(verdicts={verdict: 1}), 0, POLICY) is not None
    lifts = reprobe_lifts(probe(facts=facts), DIM)
    # An answer that would freeze the write path can never lift it; only "valid" lifts.
    assert not (freezes and lifts)
    assert lifts == (verdict == "valid")


# ------------------------------------------------------------------ after a lift
def test_a_lift_releases_repos_deferred_by_the_freeze_once() -> None:
    lifted = replace(frozen(), state=FREEZE_CLEAR, lifted_at=500.0)
    deferred, cause = codes.OUTCOME_DEFERRED, codes.KB_COLLECTION_FROZEN
    assert released_by_lift(deferred, cause, 400.0, lifted)
    assert not released_by_lift(deferred, cause, 600.0, lifted)  # already retried
    assert not released_by_lift(deferred, codes.KB_VECTOR_EMBED_TIMEOUT, 400.0, lifted)
    assert not released_by_lift(codes.OUTCOME_FAILED, cause, 400.0, lifted)
    assert not released_by_lift(deferred, cause, None, lifted)
    assert not released_by_lift(deferred, cause, 400.0, frozen(lifted_at=500.0))
    assert not released_by_lift(deferred, cause, 400.0, None)


def test_policy_validation() -> None:
    with pytest.raises(ValueError):
        FreezePolicy(circuit_sweeps=0)
    with pytest.raises(ValueError):
        FreezePolicy(max_attempts=0)
    with pytest.raises(ValueError):
        FreezePolicy(reprobe_initial_s=-1)
