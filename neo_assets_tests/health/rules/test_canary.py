"""The canary's rules: vector verdicts, health, codes, cache and back-off."""

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neo_assets.core import codes
from neo_assets.embedding.failures import EmbedFailure
from neo_assets.embedding.providers.http import malformed
from neo_assets.embedding.vectors import validate_vectors
from neo_assets.health.rules.canary import (
    CanaryPolicy,
    CanaryRecord,
    ProbeOutcome,
    ProviderIdentity,
    VectorFacts,
    canary_record,
    detail_dimensions,
    failure_backoff_s,
    invalid_detail_verdict,
    is_healthy,
    is_inconclusive,
    judge_vectors,
    observed_dimension,
    probe_code,
    probe_verdict,
    record_from_mapping,
    reusable,
)

DIM = 32
IDENTITY = ProviderIdentity("openai_compatible", "m", "http://127.0.0.1:1", DIM)
POLICY = CanaryPolicy(ttl_s=300.0, backoff_initial_s=30.0, backoff_max_s=600.0)
GOOD = VectorFacts(count=1, dimensions=(DIM,), finite=True, nonzero=True)


def outcome(**kw: object) -> ProbeOutcome:
    base: dict[str, object] = {
        "operation_label": "health-canary",
        "timeout_ms": 1000,
        "elapsed_ms": 12.0,
    }
    base.update(kw)
    return ProbeOutcome(**base)  # type: ignore[arg-type]


def failed(code: str, cause: str | None = None, detail: str = "") -> ProbeOutcome:
    return outcome(failure_code=code, cause_code=cause, detail=detail)


# Every class a probe can fail with that carries no vector evidence, with the record code.
INCONCLUSIVE = {
    "own-deadline": (
        failed(codes.KB_VECTOR_EMBED_TIMEOUT, codes.EMBEDDING_PROBE_TIMEOUT),
        codes.EMBEDDING_PROBE_TIMEOUT,
    ),
    "upstream-abort": (
        failed(codes.KB_VECTOR_EMBED_ABORTED, codes.ABORT_ERR),
        codes.ABORT_ERR,
    ),
    "openai-timeout": (
        failed(codes.KB_VECTOR_EMBED_TIMEOUT, codes.OPENAI_COMPATIBLE_REQUEST_TIMEOUT),
        codes.OPENAI_COMPATIBLE_REQUEST_TIMEOUT,
    ),
    "ollama-timeout": (
        failed(codes.KB_VECTOR_EMBED_TIMEOUT, codes.PROVIDER_TIMEOUT),
        codes.PROVIDER_TIMEOUT,
    ),
    "refused": (
        failed(codes.KB_VECTOR_EMBED_CONNECTION_REFUSED),
        codes.KB_VECTOR_EMBED_CONNECTION_REFUSED,
    ),
    "reset": (
        failed(codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED),
        codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED,
    ),
    "http-500": (
        failed(codes.KB_VECTOR_EMBED_UNCLASSIFIED, detail="internal error"),
        codes.KB_VECTOR_EMBED_UNCLASSIFIED,
    ),
    "http-401": (
        failed(codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL),
        codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL,
    ),
}


# ------------------------------------------------------------------ vector verdicts
@pytest.mark.parametrize(
    ("facts", "verdict"),
    [
        (GOOD, "valid"),
        (None, "malformed"),
        (VectorFacts(0, (), True, True), "wrong-count"),
        (VectorFacts(2, (DIM,), True, True), "wrong-count"),
        (VectorFacts(1, (DIM - 1,), True, True), "dimension-mismatch"),
        (VectorFacts(1, (DIM, 8), True, True), "dimension-mismatch"),
        (VectorFacts(1, (DIM,), False, True), "non-finite"),
        (VectorFacts(1, (DIM,), True, False), "zero"),
        # A wrong dimension is named before what its values look like.
        (VectorFacts(1, (8,), False, False), "dimension-mismatch"),
        (VectorFacts(1, (DIM,), False, False), "non-finite"),
    ],
)
def test_judge_vectors(facts: VectorFacts | None, verdict: str) -> None:
    assert judge_vectors(facts, DIM) == verdict


def _detail_of(raw: object, count: int = 1) -> str:
    with pytest.raises(EmbedFailure) as info:
        validate_vectors(raw, count, DIM)
    assert info.value.code == codes.KB_VECTOR_EMBED_INVALID_VECTORS
    return info.value.detail


@pytest.mark.parametrize(
    ("raw", "count", "verdict", "dims"),
    [
        ([[0.5] * (DIM - 1)], 1, "dimension-mismatch", (DIM - 1,)),
        ([[0.5] * 16, [0.5] * 16], 2, "dimension-mismatch", (16,)),
        (np.ones((1, 8), dtype=np.float32), 1, "dimension-mismatch", (8,)),
        ([[float("nan")] + [0.5] * (DIM - 1)], 1, "non-finite", ()),
        ([[float("inf")] + [0.5] * (DIM - 1)], 1, "non-finite", ()),
        ([[0.0] * DIM], 1, "zero", ()),
        ([[0.5] * DIM, [0.5] * DIM], 1, "wrong-count", ()),
        ([["x"] * DIM], 1, "malformed", ()),
        (np.ones((1, 1, DIM)), 1, "malformed", ()),
    ],
)
def test_invalid_detail_verdict_reads_what_validate_vectors_says(
    raw: object, count: int, verdict: str, dims: tuple[int, ...]
) -> None:
    # The contract with embedding/vectors.py's wording: if that wording changes, this fails.
    detail = _detail_of(raw, count)
    assert invalid_detail_verdict(detail) == verdict
    assert detail_dimensions(detail) == dims


def test_a_malformed_response_is_not_a_corrupting_verdict() -> None:
    assert invalid_detail_verdict(malformed("openai_compatible", "x", "no data list").detail) == (
        "malformed"
    )
    assert invalid_detail_verdict("") == "malformed"


# ------------------------------------------------------------------ health of one probe
def test_a_valid_answer_in_time_is_healthy() -> None:
    good = outcome(facts=GOOD)
    assert probe_verdict(good, DIM) == "valid"
    assert is_healthy(good, DIM) and not is_inconclusive(good, DIM)
    assert probe_code(good, DIM) is None
    assert observed_dimension(good) == DIM


@pytest.mark.parametrize("case", sorted(INCONCLUSIVE))
def test_no_vector_evidence_is_inconclusive_and_unhealthy(case: str) -> None:
    probe, code = INCONCLUSIVE[case]
    assert probe_verdict(probe, DIM) is None
    assert is_inconclusive(probe, DIM)
    assert not is_healthy(probe, DIM)
    assert probe_code(probe, DIM) == code
    assert observed_dimension(probe) is None


@pytest.mark.parametrize(
    ("facts", "verdict"),
    [
        (VectorFacts(1, (DIM * 2,), True, True), "dimension-mismatch"),
        (VectorFacts(1, (DIM,), False, True), "non-finite"),
        (VectorFacts(1, (DIM,), True, False), "zero"),
        (VectorFacts(3, (DIM,), True, True), "wrong-count"),
        (None, "malformed"),
    ],
)
def test_an_invalid_answer_is_conclusive_and_unhealthy(
    facts: VectorFacts | None, verdict: str
) -> None:
    probe = outcome(facts=facts)
    assert probe_verdict(probe, DIM) == verdict
    assert not is_healthy(probe, DIM) and not is_inconclusive(probe, DIM)
    assert probe_code(probe, DIM) == codes.KB_VECTOR_EMBED_INVALID_VECTORS


def test_a_provider_that_refused_the_dimension_names_it() -> None:
    detail = _detail_of([[0.5] * 16])
    probe = failed(codes.KB_VECTOR_EMBED_INVALID_VECTORS, detail=detail)
    assert probe_verdict(probe, DIM) == "dimension-mismatch"
    assert probe_code(probe, DIM) == codes.KB_VECTOR_EMBED_INVALID_VECTORS
    assert observed_dimension(probe) == 16
    assert not is_inconclusive(probe, DIM)


def test_a_valid_answer_after_the_deadline_is_not_healthy() -> None:
    late = outcome(facts=GOOD, timeout_ms=100, elapsed_ms=100.5)
    assert not is_healthy(late, DIM)
    assert is_inconclusive(late, DIM)
    assert probe_code(late, DIM) == codes.EMBEDDING_PROBE_TIMEOUT
    assert not is_healthy(outcome(facts=GOOD, elapsed_ms=math.nan), DIM)


def test_the_expected_dimension_decides() -> None:
    assert is_healthy(outcome(facts=GOOD), DIM)
    assert not is_healthy(outcome(facts=GOOD), DIM + 1)


# ------------------------------------------------------------------ back-off
def test_failure_backoff_doubles_from_30_s_to_10_min() -> None:
    got = [failure_backoff_s(n, 30.0, 600.0) for n in range(1, 9)]
    assert got == [30.0, 60.0, 120.0, 240.0, 480.0, 600.0, 600.0, 600.0]
    assert failure_backoff_s(10**9, 30.0, 600.0) == 600.0
    with pytest.raises(ValueError):
        failure_backoff_s(0, 30.0, 600.0)
    with pytest.raises(ValueError):
        failure_backoff_s(1, -1.0, 600.0)


@given(st.integers(1, 10_000), st.floats(0, 1e4), st.floats(0, 1e5))
def test_failure_backoff_is_monotone_and_capped(n: int, initial: float, cap: float) -> None:
    now = failure_backoff_s(n, initial, cap)
    assert 0 <= now <= cap
    assert failure_backoff_s(n + 1, initial, cap) >= now


# ------------------------------------------------------------------ records and cache
def _record(probe: ProbeOutcome, now: float, previous: CanaryRecord | None = None) -> CanaryRecord:
    return canary_record(probe, IDENTITY, now, previous, POLICY)


def test_a_healthy_record_is_reused_within_its_ttl_only() -> None:
    rec = _record(outcome(facts=GOOD), now=1000.0)
    assert rec.healthy and rec.code is None and rec.retry_at is None
    assert rec.consecutive_failures == 0 and rec.dimension == DIM
    assert reusable(rec, IDENTITY, 1000.0, POLICY)
    assert reusable(rec, IDENTITY, 1299.9, POLICY)
    assert not reusable(rec, IDENTITY, 1300.0, POLICY)
    assert not reusable(rec, IDENTITY, 999.0, POLICY)  # the clock went back
    assert not reusable(None, IDENTITY, 1000.0, POLICY)


@pytest.mark.parametrize(
    "other",
    [
        replace(IDENTITY, provider="ollama"),
        replace(IDENTITY, model="other"),
        replace(IDENTITY, endpoint="http://127.0.0.1:2"),
        replace(IDENTITY, dimension=DIM * 2),
    ],
)
def test_a_switched_provider_is_never_served_from_cache(other: ProviderIdentity) -> None:
    rec = _record(outcome(facts=GOOD), now=1000.0)
    assert not reusable(rec, other, 1001.0, POLICY)


def test_a_failure_is_never_cached_as_healthy_and_backs_off() -> None:
    probe, code = INCONCLUSIVE["own-deadline"]
    first = _record(probe, now=1000.0)
    assert not first.healthy and first.code == code
    assert first.consecutive_failures == 1 and first.retry_at == 1030.0
    # Within the back-off the failed record answers (unhealthy), no new probe.
    assert reusable(first, IDENTITY, 1029.0, POLICY)
    assert not reusable(first, IDENTITY, 1030.0, POLICY)
    second = _record(probe, now=1030.0, previous=first)
    assert second.consecutive_failures == 2 and second.retry_at == 1090.0
    healed = _record(outcome(facts=GOOD), now=1090.0, previous=second)
    assert healed.healthy and healed.consecutive_failures == 0 and healed.retry_at is None
    again = _record(probe, now=1100.0, previous=healed)
    assert again.consecutive_failures == 1


def test_failures_of_another_provider_do_not_lengthen_the_backoff() -> None:
    probe, _ = INCONCLUSIVE["refused"]
    old = canary_record(probe, replace(IDENTITY, model="old"), 1000.0, None, POLICY)
    old = replace(old, consecutive_failures=7)
    fresh = _record(probe, now=1001.0, previous=old)
    assert fresh.consecutive_failures == 1


def test_record_roundtrip_and_contract_keys() -> None:
    probe, _ = INCONCLUSIVE["own-deadline"]
    rec = _record(probe, now=1000.0)
    row = {
        "observed_at": rec.observed_at,
        "healthy": rec.healthy,
        "code": rec.code,
        "operation_label": rec.operation_label,
        "timeout_ms": rec.timeout_ms,
        "elapsed_ms": rec.elapsed_ms,
        "dimension": rec.dimension,
        "expected_dimension": rec.expected_dimension,
        "provider": rec.provider,
        "model": rec.model,
        "endpoint": rec.endpoint,
        "consecutive_failures": rec.consecutive_failures,
        "retry_at": rec.retry_at,
        "failure_code": rec.failure_code,
        "cause_code": rec.cause_code,
        "detail": rec.detail,
    }
    assert record_from_mapping(row) == rec
    doc = rec.to_doc(cached=False)
    assert {"healthy", "code", "operationLabel", "timeoutMs", "elapsedMs", "dimension"} <= set(doc)
    assert doc["code"] == codes.EMBEDDING_PROBE_TIMEOUT and doc["timeoutMs"] == 1000
    # Torn fields read as unobserved, never as a default.
    for key, torn in [
        ("healthy", None),
        ("healthy", 1),
        ("observed_at", None),
        ("observed_at", math.inf),
        ("timeout_ms", "x"),
        ("retry_at", None),  # a failure without its back-off cannot be served
        ("consecutive_failures", None),
        ("provider", None),
    ]:
        assert record_from_mapping({**row, key: torn}) is None, key
    assert record_from_mapping({k: v for k, v in row.items() if k != "model"}) is None
