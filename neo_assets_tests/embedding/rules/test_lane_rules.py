"""The embedding lane's pure rules, exhaustively: every code through every decision."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neo_assets.core import codes
from neo_assets.embedding.rules import lane as rules
from neo_assets.embedding.rules import lane_evidence, lane_rows
from neo_assets.embedding.rules.lane import FenceRecord, LaneSettings, StrikeRecord
from neo_assets.sweep.rules.fence_gate import fence_family, is_durable_fence
from neo_assets.sweep.rules.outcomes import classify_sweep_outcome

CHUNK = "a" * 64
ALL_CODES = sorted(
    codes.EMBED_FAILURE_CODES
    | {
        codes.KB_VECTOR_EMBED_PROVEN_CONTENT_POISON,
        codes.KB_VECTOR_EMBED_UNDELIVERABLE_AT_GEOMETRY,
        codes.ABORT_ERR,
        codes.PROVIDER_TIMEOUT,
        codes.OPENAI_COMPATIBLE_REQUEST_TIMEOUT,
        codes.EMBEDDING_PROBE_TIMEOUT,
        lane_evidence.KB_VECTOR_EMBED_CALL_CEILING,
        "SOMETHING_UNKNOWN",
        "",
    }
)


# ---------------------------------------------------------------------------- settings
def test_settings_defaults_match_the_issue_and_the_settings_module() -> None:
    s = LaneSettings()
    assert (s.batch_size, s.max_inflight, s.strike_threshold, s.circuit_threshold) == (64, 2, 2, 5)
    assert (s.recovery_initial_s, s.recovery_max_s, s.recovery_max_wait_s) == (0.5, 30.0, 120.0)
    assert (s.context_tokens, s.admission_safety_factor, s.chars_per_token) == (8192, 0.9, 3.0)
    assert s.call_ceiling_ms == 60_000
    assert s.write_queue_depth == 2


@pytest.mark.parametrize(
    "bad",
    [
        {"batch_size": 0},
        {"max_inflight": 0},
        {"strike_threshold": 0},
        {"circuit_threshold": 0},
        {"context_tokens": 0},
        {"admission_safety_factor": 0.0},
        {"admission_safety_factor": 1.5},
        {"chars_per_token": 0.0},
        {"call_ceiling_ms": 0},
        {"write_queue_depth": 0},
        {"recovery_initial_s": -1.0},
        {"recovery_max_wait_s": -0.1},
    ],
)
def test_settings_reject_values_that_cannot_work(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=next(iter(bad)).split("_")[0]):
        LaneSettings(**bad)  # type: ignore[arg-type]


def test_settings_are_frozen() -> None:
    with pytest.raises(AttributeError):
        LaneSettings().batch_size = 3  # type: ignore[misc]


# ---------------------------------------------------------------------------- admission
@pytest.mark.parametrize(
    ("text", "cpt", "tokens"),
    [("", 3.0, 0), ("a", 3.0, 1), ("abc", 3.0, 1), ("abcd", 3.0, 2), ("x" * 12, 4.0, 3)],
)
def test_estimate_tokens(text: str, cpt: float, tokens: int) -> None:
    assert rules.estimate_tokens(text, cpt) == tokens


def test_estimate_tokens_rejects_a_non_positive_ratio() -> None:
    with pytest.raises(ValueError):
        rules.estimate_tokens("abc", 0)


@given(st.text(max_size=400), st.floats(min_value=0.5, max_value=8.0))
def test_estimate_never_undercounts(text: str, cpt: float) -> None:
    tokens = rules.estimate_tokens(text, cpt)
    assert tokens * cpt >= len(text)
    assert tokens == 0 or (tokens - 1) * cpt < len(text)


def test_admission_band_and_boundary() -> None:
    s = LaneSettings(context_tokens=8192, admission_safety_factor=0.9)
    assert rules.admission_band(s) == 7372
    assert rules.admission_band(LaneSettings(context_tokens=1, admission_safety_factor=0.5)) == 1
    small = LaneSettings(context_tokens=10, admission_safety_factor=1.0, chars_per_token=2.0)
    assert rules.admitted("x" * 20, small)  # 10 tokens == band
    assert not rules.admitted("x" * 21, small)  # 11 tokens
    receipt = lane_rows.admission_receipt("x" * 21, small)
    assert receipt["estimateTokens"] == 11
    assert receipt["bandTokens"] == 10
    assert receipt["evidenceCode"] == rules.KB_VECTOR_EMBED_OVER_ADMISSION_BAND


# ---------------------------------------------------------------------------- generation
def test_generation_is_a_short_stable_hex_digest() -> None:
    g = rules.embedding_generation("openai_compatible", "qwen3", 1024, 7372, 60_000, "plain")
    assert len(g) == 16 and all(c in "0123456789abcdef" for c in g)
    assert g == rules.embedding_generation(
        "openai_compatible", "qwen3", 1024, 7372, 60_000, "plain"
    )


@pytest.mark.parametrize(
    "changed",
    [
        ("ollama", "qwen3", 1024, 7372, 60_000),
        ("openai_compatible", "qwen3-b", 1024, 7372, 60_000),
        ("openai_compatible", "qwen3", 768, 7372, 60_000),
        ("openai_compatible", "qwen3", 1024, 7371, 60_000),
        ("openai_compatible", "qwen3", 1024, 7372, 59_999),
    ],
)
def test_any_geometry_change_changes_the_generation(changed: tuple) -> None:
    base = rules.embedding_generation("openai_compatible", "qwen3", 1024, 7372, 60_000, "plain")
    assert rules.embedding_generation(*changed, "plain") != base


def test_the_input_format_changes_the_generation() -> None:
    base = rules.embedding_generation("openai_compatible", "qwen3", 1024, 7372, 60_000, "plain")
    other = rules.embedding_generation(
        "openai_compatible", "qwen3", 1024, 7372, 60_000, "header-v1"
    )
    assert other != base


def test_fields_cannot_bleed_into_each_other() -> None:
    assert rules.embedding_generation("a", "bc", 1, 1, 1, "plain") != rules.embedding_generation(
        "ab", "c", 1, 1, 1, "plain"
    )


@given(st.integers(min_value=0, max_value=2000), st.integers(min_value=1, max_value=300))
def test_plan_batches_cover_everything_once_in_order(count: int, size: int) -> None:
    plan = rules.plan_batches(count, size)
    covered = [i for start, end in plan for i in range(start, end)]
    assert covered == list(range(count))
    assert all(0 < end - start <= size for start, end in plan)
    assert len(plan) == math.ceil(count / size)


def test_plan_batches_rejects_a_zero_size() -> None:
    with pytest.raises(ValueError):
        rules.plan_batches(3, 0)


# ---------------------------------------------------------------------------- evidence
@pytest.mark.parametrize("code", ALL_CODES)
def test_poison_is_forbidden_for_every_code_but_content(code: str) -> None:
    assert lane_evidence.poison_forbidden(code) is (code != codes.KB_VECTOR_EMBED_CONTENT)


@pytest.mark.parametrize(
    "code",
    [
        codes.KB_VECTOR_EMBED_TIMEOUT,
        codes.KB_VECTOR_EMBED_ABORTED,
        codes.KB_VECTOR_EMBED_CIRCUIT_OPEN,
        codes.KB_VECTOR_EMBED_YIELD,
        codes.KB_VECTOR_EMBED_CONNECTION_REFUSED,
        codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED,
        codes.KB_VECTOR_EMBED_WRITE_ERROR,
        codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL,  # raw: only content_evidence converts it
        codes.KB_VECTOR_EMBED_INVALID_VECTORS,
        codes.KB_VECTOR_EMBED_UNCLASSIFIED,
    ],
)
def test_the_issue_list_of_forbidden_codes(code: str) -> None:
    assert lane_evidence.poison_forbidden(code)


def test_poison_is_forbidden_without_a_code() -> None:
    assert lane_evidence.poison_forbidden(None)


@pytest.mark.parametrize("code", ALL_CODES)
@pytest.mark.parametrize("status", [None, 400, 401, 403, 404, 408, 413, 422, 429, 500, 503])
def test_content_class(code: str, status: int | None) -> None:
    expected = code == codes.KB_VECTOR_EMBED_CONTENT or (
        code == codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL
        and status not in lane_evidence.NON_CONTENT_REFUSAL_STATUSES
    )
    assert lane_evidence.is_content_class(code, status) is expected
    evidence = lane_evidence.content_evidence(code, status)
    assert evidence == (codes.KB_VECTOR_EMBED_CONTENT if expected else None)
    if evidence is not None:
        assert not lane_evidence.poison_forbidden(evidence)


def test_a_size_refusal_is_never_content_and_never_a_provider_failure() -> None:
    size = codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE
    for status in (None, 400, 413, 422, 500):
        assert not lane_evidence.is_content_class(size, status)
        assert lane_evidence.content_evidence(size, status) is None
        assert lane_evidence.starts_isolation(size, status)
        assert not lane_evidence.is_provider_failure(size, status)  # no circuit count
        assert not lane_evidence.waits_for_recovery(size, status)
    assert lane_evidence.poison_forbidden(size)


def test_content_refusals_are_exactly_the_per_input_ones() -> None:
    refusal = codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL
    for status in (400, 413, 422, 500):
        assert lane_evidence.is_content_class(refusal, status)
    for status in (401, 403, 404, 429):
        assert not lane_evidence.is_content_class(refusal, status)


@pytest.mark.parametrize("code", ALL_CODES)
@pytest.mark.parametrize("single", [True, False])
def test_strike_kind(code: str, single: bool) -> None:
    expected = None
    if single and code == codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED:
        expected = "death"
    elif single and code == codes.KB_VECTOR_EMBED_TIMEOUT:
        expected = "timeout"
    assert lane_evidence.strike_kind(code, single) == expected


def test_connection_refused_never_strikes() -> None:
    assert lane_evidence.strike_kind(codes.KB_VECTOR_EMBED_CONNECTION_REFUSED, True) is None
    assert lane_evidence.failure_route(codes.KB_VECTOR_EMBED_CONNECTION_REFUSED, None, 1) == "retry"


@pytest.mark.parametrize(
    ("strikes", "threshold", "graduates"),
    [(0, 1, False), (1, 1, True), (1, 2, False), (2, 2, True), (3, 2, True), (2, 3, False)],
)
def test_should_graduate(strikes: int, threshold: int, graduates: bool) -> None:
    assert lane_evidence.should_graduate(strikes, threshold) is graduates


def test_should_graduate_rejects_a_zero_threshold() -> None:
    with pytest.raises(ValueError):
        lane_evidence.should_graduate(5, 0)


@pytest.mark.parametrize("code", ALL_CODES)
@pytest.mark.parametrize("status", [None, 400, 429])
@pytest.mark.parametrize("inputs", [1, 2, 64])
def test_failure_route(code: str, status: int | None, inputs: int) -> None:
    route = lane_evidence.failure_route(code, status, inputs)
    if code == codes.KB_VECTOR_EMBED_PROVIDER_LOADING:
        assert route == "wait"  # the same inputs again once loaded; nobody suspected
    elif code == codes.KB_VECTOR_EMBED_BATCH_CAP:
        assert route == ("shrink" if inputs > 1 else "defer")
    elif code == codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE:  # geometry: bisect, then fence alone
        assert route == ("geometry" if inputs == 1 else "isolate")
    elif lane_evidence.is_content_class(code, status):
        assert route == "isolate"
    elif code in (codes.KB_VECTOR_EMBED_CONNECTION_REFUSED, codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL):
        assert route == "retry"
    elif code == codes.KB_VECTOR_EMBED_TIMEOUT and inputs >= lane_evidence.MIN_TIMEOUT_SHRINK:
        assert route == "shrink"  # halved and sent again, nobody suspected
    elif inputs > 1:
        assert route == "suspects"  # a multi-input failure never strikes anyone
    elif code in (codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED, codes.KB_VECTOR_EMBED_TIMEOUT):
        assert route == "strike"
    else:
        assert route == "defer"


def test_failure_route_needs_an_input() -> None:
    with pytest.raises(ValueError):
        lane_evidence.failure_route(codes.KB_VECTOR_EMBED_CONTENT, None, 0)


@pytest.mark.parametrize("code", ALL_CODES)
def test_recovery_waits_follow_deaths_and_refusals(code: str) -> None:
    expected = code in (
        codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED,
        codes.KB_VECTOR_EMBED_CONNECTION_REFUSED,
        codes.KB_VECTOR_EMBED_PROVIDER_LOADING,
    )
    assert lane_evidence.waits_for_recovery(code) is expected
    assert lane_evidence.waits_for_recovery(codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL, 429)
    assert not lane_evidence.waits_for_recovery(codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL, 400)


@pytest.mark.parametrize("code", ALL_CODES)
def test_provider_failures_count_toward_the_circuit(code: str) -> None:
    expected = code not in (
        codes.KB_VECTOR_EMBED_CONTENT,
        codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL,  # status None: a per-input refusal
        codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE,  # geometry of one input, not the provider
        codes.KB_VECTOR_EMBED_ABORTED,
        codes.KB_VECTOR_EMBED_WRITE_ERROR,
        codes.KB_VECTOR_EMBED_YIELD,
        codes.KB_VECTOR_EMBED_CIRCUIT_OPEN,
        codes.KB_VECTOR_EMBED_PROVIDER_LOADING,  # a wait bounded on its own
        codes.KB_VECTOR_EMBED_BATCH_CAP,  # the lane shrinks its batches
    )
    assert lane_evidence.is_provider_failure(code) is expected


def test_a_multi_input_deadline_beside_other_requests_serializes_the_lane() -> None:
    timeout = codes.KB_VECTOR_EMBED_TIMEOUT
    assert lane_evidence.failure_route(timeout, None, 64, concurrent=True) == "serialize"
    assert lane_evidence.failure_route(timeout, None, 1, concurrent=True) == "strike"


def test_a_multi_input_deadline_alone_halves_the_batches() -> None:
    # A batch past its deadline with nothing else in flight says the request is too much
    # work for the server at this moment (a loaded machine), nothing about an input: the
    # lane halves its batches and sends them again; a single input past it still strikes.
    timeout = codes.KB_VECTOR_EMBED_TIMEOUT
    assert lane_evidence.failure_route(timeout, None, 64, concurrent=False) == "shrink"
    assert lane_evidence.failure_route(timeout, None, 32, concurrent=False) == "shrink"
    # Down to 16: a server that hangs on everything is found after two halvings.
    assert lane_evidence.failure_route(timeout, None, 16, concurrent=False) == "suspects"
    assert lane_evidence.failure_route(timeout, None, 2, concurrent=False) == "suspects"
    assert lane_evidence.failure_route(timeout, None, 1, concurrent=False) == "strike"


@pytest.mark.parametrize(
    ("message", "cap"),
    [
        ("batch size 64 > maximum allowed batch size 32", 32),
        ("Input validation error: batch size 128 > maximum allowed batch size 16", 16),
        ("maximum batch size is 8", 8),
        ("too many inputs (max 10)", 10),
        (
            "input (902 tokens) is too large to process. increase the physical batch size "
            "(current batch size: 512)",
            None,
        ),
        ("invalid input", None),
    ],
)
def test_batch_cap_from_message(message: str, cap: int | None) -> None:
    assert lane_evidence.batch_cap_from_message(message) == cap


def test_a_strike_needs_the_input_alone_at_the_provider() -> None:
    assert lane_evidence.strike_attributable(lane_evidence.STRIKE_DEATH, alone=True)
    assert not lane_evidence.strike_attributable(lane_evidence.STRIKE_DEATH, alone=False)
    assert not lane_evidence.strike_attributable(lane_evidence.STRIKE_TIMEOUT, alone=False)
    assert not lane_evidence.strike_attributable(None, alone=True)


def test_a_rate_limit_counts_toward_the_circuit() -> None:
    assert lane_evidence.is_provider_failure(codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL, 429)


@pytest.mark.parametrize(
    ("cause", "code"),
    [
        (codes.ABORT_ERR, codes.KB_VECTOR_EMBED_ABORTED),
        (codes.PROVIDER_TIMEOUT, codes.KB_VECTOR_EMBED_TIMEOUT),
        (codes.OPENAI_COMPATIBLE_REQUEST_TIMEOUT, codes.KB_VECTOR_EMBED_TIMEOUT),
        (codes.EMBEDDING_PROBE_TIMEOUT, codes.KB_VECTOR_EMBED_TIMEOUT),
        (lane_evidence.KB_VECTOR_EMBED_CALL_CEILING, codes.KB_VECTOR_EMBED_TIMEOUT),
        (None, codes.KB_VECTOR_EMBED_TIMEOUT),
    ],
)
def test_cancellation_code_keeps_abort_and_deadline_apart(cause: str | None, code: str) -> None:
    assert lane_evidence.cancellation_code(cause) == code


@pytest.mark.parametrize(
    ("n", "bound"), [(1, 2), (2, 4), (3, 6), (4, 6), (5, 8), (63, 14), (64, 14), (65, 16)]
)
def test_isolation_request_bound(n: int, bound: int) -> None:
    assert lane_evidence.isolation_request_bound(n) == bound


def test_isolation_request_bound_needs_an_input() -> None:
    with pytest.raises(ValueError):
        lane_evidence.isolation_request_bound(0)


# ---------------------------------------------------------------------------- backoff
def test_recovery_delays_double_up_to_the_cap_within_the_wait() -> None:
    assert lane_evidence.recovery_delays(0.5, 30.0, 120.0) == [
        0.5,
        1.0,
        2.0,
        4.0,
        8.0,
        16.0,
        30.0,
        30.0,
    ]
    assert lane_evidence.recovery_delays(1.0, 1.0, 3.5) == [1.0, 1.0, 1.0]
    assert lane_evidence.recovery_delays(5.0, 5.0, 1.0) == []


@given(
    st.floats(min_value=0.0, max_value=10.0),
    st.floats(min_value=0.0, max_value=60.0),
    st.floats(min_value=0.0, max_value=600.0),
)
def test_recovery_delays_are_bounded(initial: float, cap: float, wait: float) -> None:
    delays = lane_evidence.recovery_delays(initial, cap, wait)
    assert len(delays) <= 32
    assert sum(delays) <= wait + 1e-9
    assert all(0.0 <= d <= max(cap, 0.0) for d in delays)
    assert delays == sorted(delays)


# ---------------------------------------------------------------------------- rows
@pytest.mark.parametrize("disposition", sorted(codes.FENCE_DISPOSITIONS))
def test_fence_rows_pass_the_fence_gate(disposition: str) -> None:
    row = lane_rows.fence_row(
        CHUNK, disposition, codes.KB_VECTOR_EMBED_CONTENT, {"x": 1}, 12.5, recorded_this_sweep=True
    )
    assert is_durable_fence(row)
    assert fence_family(row) == disposition
    assert (
        row["code"]
        == row["details"]["reasonCode"]
        == lane_rows.FENCE_CODE_BY_DISPOSITION[disposition]
    )
    assert row["details"]["observedAt"] == 12.5
    assert row["details"]["receipt"] == {"x": 1}


def test_an_unknown_disposition_is_not_a_fence() -> None:
    with pytest.raises(KeyError):
        lane_rows.fence_row(CHUNK, "maybe-bad", None, {}, 1.0, recorded_this_sweep=True)
    record = FenceRecord(CHUNK, "maybe-bad", "X", {}, 1.0)
    assert lane_rows.fence_row_from_record(record, recorded_this_sweep=False) is None


def test_fence_row_from_a_stored_record() -> None:
    record = FenceRecord.from_row(
        {
            "chunk_id": CHUNK,
            "disposition": codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY,
            "reason_code": codes.KB_VECTOR_EMBED_UNDELIVERABLE_AT_GEOMETRY,
            "receipt": {"evidenceCode": codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED},
            "observed_at": 7.0,
        }
    )
    row = lane_rows.fence_row_from_record(record, recorded_this_sweep=False)
    assert row is not None and is_durable_fence(row)
    assert row["details"]["evidenceCode"] == codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED
    assert row["details"]["recordedThisSweep"] is False


def test_records_from_torn_ledger_rows_carry_no_receipt() -> None:
    fence = FenceRecord.from_row(
        {
            "chunk_id": CHUNK,
            "disposition": codes.DISPOSITION_PROVEN_CONTENT_POISON,
            "reason_code": codes.KB_VECTOR_EMBED_PROVEN_CONTENT_POISON,
            "receipt": None,
        }
    )
    assert fence.receipt == {} and fence.observed_at is None
    strike = StrikeRecord.from_row({"chunk_id": CHUNK, "kind": "death", "count": "2"})
    assert strike == StrikeRecord(CHUNK, "death", 2, {})


def test_error_rows_bound_their_ids_and_are_never_fences() -> None:
    ids = [f"{i:064x}" for i in range(120)]
    row = lane_rows.error_row(
        codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED, "m", ids, "embed-batch", codes.ABORT_ERR, status=1
    )
    assert row["details"]["chunkIds"] == ids[: lane_rows.MAX_ROW_CHUNK_IDS]
    assert row["details"]["chunkCount"] == 120
    assert row["details"]["causeCode"] == codes.ABORT_ERR
    assert row["details"]["status"] == 1
    assert not is_durable_fence(row)
    assert "causeCode" not in lane_rows.error_row("C", "m", [], "op")["details"]


def test_strike_receipts_accumulate_and_graduate() -> None:
    first = lane_rows.strike_receipt(
        kind="death",
        count=1,
        threshold=2,
        code=codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED,
        suspect_size={"chars": 900, "estimateTokens": 300},
        operation_label="embed-single",
        observed_at=1.0,
    )
    assert first["recoveredBy"] is None and first["kinds"] == ["death"]
    healed = lane_rows.with_recovery(first, {"chars": 40, "estimateTokens": 14, "source": "input"})
    second = lane_rows.strike_receipt(
        kind="timeout",
        count=2,
        threshold=2,
        code=codes.KB_VECTOR_EMBED_TIMEOUT,
        suspect_size={"chars": 900, "estimateTokens": 300},
        operation_label="embed-single",
        observed_at=2.0,
        previous=healed,
        cause_code=lane_evidence.KB_VECTOR_EMBED_CALL_CEILING,
    )
    assert second["kinds"] == ["death", "timeout"]
    assert second["recoveredBy"]["chars"] == 40
    assert second["causeCode"] == lane_evidence.KB_VECTOR_EMBED_CALL_CEILING
    grad = lane_rows.graduation_receipt(second, 2)
    assert grad["strikeKind"] == "timeout" and grad["strikes"] == 2 and grad["threshold"] == 2
    assert grad["suspect"] == {"chars": 900, "estimateTokens": 300}
    assert grad["recoveredBy"]["source"] == "input"


def test_size_of_records_size_never_text() -> None:
    assert lane_rows.size_of("abcdef", 3.0) == {"chars": 6, "estimateTokens": 2}


def test_a_summary_of_fences_only_completes_and_a_strike_row_defers() -> None:
    fence = lane_rows.fence_row(
        CHUNK,
        codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY,
        codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED,
        {},
        1.0,
        recorded_this_sweep=True,
    )
    assert classify_sweep_outcome([fence]).outcome == codes.OUTCOME_COMPLETE
    live = lane_rows.error_row(codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED, "strike 1/2", [CHUNK], "op")
    verdict = classify_sweep_outcome([fence, live])
    assert verdict.outcome == codes.OUTCOME_DEFERRED
    assert verdict.cause_code == codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED
    assert lane_rows.strike_row(CHUNK, "death", 1, 2) == {
        "chunkId": CHUNK,
        "kind": "death",
        "strikes": 1,
        "threshold": 2,
    }
