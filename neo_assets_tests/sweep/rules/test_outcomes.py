"""The sweep outcome classifier over every combination of row kinds, and its cause rules."""

import dataclasses
import itertools
import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neo_assets.core import codes
from neo_assets.core.codes import SWEEP_SUMMARY_MALFORMED
from neo_assets.sweep.rules.outcomes import (
    CAUSE_PRIORITY,
    DEFERRABLE_CODES,
    PROVIDER_FAILURE_CODES,
    SweepVerdict,
    classify_sweep_outcome,
    pick_cause,
)

COMPLETE, DEFERRED, FAILED = codes.OUTCOME_COMPLETE, codes.OUTCOME_DEFERRED, codes.OUTCOME_FAILED
POISON = codes.DISPOSITION_PROVEN_CONTENT_POISON
UNDELIVERABLE = codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY


def chunk(n: int) -> str:
    return f"{n:064x}"


def row(code: object, details: object = None) -> dict:
    return {"code": code, "message": "m", "details": {} if details is None else details}


def fence(disposition: str, code: str, n: int) -> dict:
    return row(code, {"chunkId": chunk(n), "reasonCode": code, "disposition": disposition})


def summary(*rows: object) -> tuple[object, ...]:
    """A sweep's error rows, as ``LaneSummary.errors`` carries them."""
    return rows


# --- Row kinds. The durable fences deliberately carry codes that would WIN the cause if a
# fence row were ever counted: the undeliverable fence carries a provider code ranked above
# the live timeout (a death-strike graduation), the poison fence the content code.
POISON_FENCE_CODE = codes.KB_VECTOR_EMBED_CONTENT
UNDELIVERABLE_FENCE_CODE = codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED
LIVE_CODE = codes.KB_VECTOR_EMBED_TIMEOUT
MALFORMED_CODE = codes.KB_VECTOR_EMBED_PROVEN_CONTENT_POISON
NON_DEFERRABLE_CODE = codes.KB_VECTOR_EMBED_UNCLASSIFIED


def _malformed(n: int, **changes: object) -> dict:
    details: dict = {"chunkId": chunk(n), "reasonCode": MALFORMED_CODE, "disposition": POISON}
    for key, value in changes.items():
        if value is _DROP:
            del details[key]
        else:
            details[key] = value
    return row(MALFORMED_CODE, details)


_DROP = object()

# kind -> (row builder, category). Categories drive the independent expectation below.
KINDS = {
    "none": (None, "none"),
    "poison fence": (lambda n: fence(POISON, POISON_FENCE_CODE, n), "fence"),
    "undeliverable fence": (lambda n: fence(UNDELIVERABLE, UNDELIVERABLE_FENCE_CODE, n), "fence"),
    "live deferrable": (lambda n: row(LIVE_CODE, {"chunkId": chunk(n)}), "live"),
    "malformed: disposition missing": (lambda n: _malformed(n, disposition=_DROP), "live"),
    "malformed: disposition non-string": (lambda n: _malformed(n, disposition=7), "live"),
    "malformed: disposition unknown": (lambda n: _malformed(n, disposition="quarantined"), "live"),
    "malformed: reasonCode != code": (
        lambda n: _malformed(n, reasonCode=codes.KB_VECTOR_EMBED_CONTENT),
        "live",
    ),
    "malformed: bad chunk id": (lambda n: _malformed(n, chunkId="XYZ"), "live"),
    "malformed: details not a dict": (
        lambda n: row(MALFORMED_CODE, [chunk(n), POISON]),
        "live",
    ),
    "non-deferrable": (lambda n: row(NON_DEFERRABLE_CODE), "failing"),
}


def expected(kinds: tuple[str, ...]) -> tuple[str, Counter]:
    """The independent rule: any failing row fails; else any live row defers; else complete.
    Also returns the live codes that may be the cause, with their frequencies."""
    categories = [KINDS[k][1] for k in kinds]
    live_codes: Counter = Counter()
    for kind in kinds:
        category = KINDS[kind][1]
        if category == "live":
            live_codes[LIVE_CODE if kind == "live deferrable" else MALFORMED_CODE] += 1
        elif category == "failing":
            live_codes[NON_DEFERRABLE_CODE] += 1
    if "failing" in categories:
        return FAILED, Counter({NON_DEFERRABLE_CODE: live_codes[NON_DEFERRABLE_CODE]})
    if "live" in categories:
        return DEFERRED, live_codes
    return COMPLETE, Counter()


COMBINATIONS = list(itertools.product(sorted(KINDS), repeat=3))


def test_the_combinations_cover_every_kind_in_every_slot() -> None:
    assert len(COMBINATIONS) == len(KINDS) ** 3
    for slot in range(3):
        assert {combo[slot] for combo in COMBINATIONS} == set(KINDS)


@pytest.mark.parametrize("kinds", COMBINATIONS, ids=lambda kinds: " + ".join(kinds))
def test_every_combination_of_row_kinds(kinds: tuple[str, ...]) -> None:
    rows = [KINDS[k][0](n) for n, k in enumerate(kinds) if KINDS[k][0] is not None]
    verdict = classify_sweep_outcome(summary(*rows))
    outcome, candidates = expected(kinds)

    assert verdict.outcome == outcome
    n_fences = sum(KINDS[k][1] == "fence" for k in kinds)
    assert len(verdict.fence_rows) == n_fences
    assert len(verdict.live_rows) == len(rows) - n_fences
    assert verdict.advance_checkpoint is verdict.reset_failures is (outcome == COMPLETE)
    if outcome == COMPLETE:
        assert verdict.cause_code is None
        assert verdict.arms_recovery_episode is False
        return
    # The cause is a live row's code, among the most frequent ones; never a fence's code.
    top = max(candidates.values())
    assert verdict.cause_code in {c for c, k in candidates.items() if k == top}
    assert verdict.cause_code not in {POISON_FENCE_CODE, UNDELIVERABLE_FENCE_CODE}
    # The only provider code among live rows is the live timeout.
    assert verdict.arms_recovery_episode is (
        outcome == DEFERRED and verdict.cause_code == LIVE_CODE
    )


def test_no_errors_completes() -> None:
    verdict = classify_sweep_outcome(summary())
    assert verdict == SweepVerdict(
        outcome=COMPLETE,
        cause_code=None,
        advance_checkpoint=True,
        reset_failures=True,
        arms_recovery_episode=False,
        live_rows=(),
        fence_rows=(),
    )


def test_fences_of_both_families_complete_and_are_handed_back_in_order() -> None:
    rows = [
        fence(POISON, codes.KB_VECTOR_EMBED_CONTENT, 1),
        fence(UNDELIVERABLE, codes.KB_VECTOR_EMBED_UNDELIVERABLE_AT_GEOMETRY, 2),
        fence(UNDELIVERABLE, codes.KB_VECTOR_EMBED_TIMEOUT, 3),
    ]
    verdict = classify_sweep_outcome(summary(*rows))
    assert verdict.outcome == COMPLETE and verdict.advance_checkpoint and verdict.reset_failures
    assert verdict.fence_rows == tuple(rows) and verdict.live_rows == ()


@pytest.mark.parametrize("code", sorted(PROVIDER_FAILURE_CODES))
@pytest.mark.parametrize("disposition", [POISON, UNDELIVERABLE])
def test_no_fence_row_arms_a_recovery_episode_whatever_its_code(
    code: str, disposition: str
) -> None:
    fences = [fence(disposition, code, n) for n in range(5)]
    verdict = classify_sweep_outcome(summary(*fences))
    assert verdict.outcome == COMPLETE and not verdict.arms_recovery_episode
    # Beside a live non-provider row, the many provider-coded fences still arm nothing.
    mixed = classify_sweep_outcome(summary(*fences, row(codes.KB_VECTOR_EMBED_WRITE_ERROR)))
    assert mixed.outcome == DEFERRED
    assert mixed.cause_code == codes.KB_VECTOR_EMBED_WRITE_ERROR
    assert not mixed.arms_recovery_episode


@pytest.mark.parametrize("code", sorted(DEFERRABLE_CODES))
def test_each_deferrable_code_alone_defers_with_itself_as_cause(code: str) -> None:
    verdict = classify_sweep_outcome(summary(row(code)))
    assert (verdict.outcome, verdict.cause_code) == (DEFERRED, code)
    assert not verdict.advance_checkpoint and not verdict.reset_failures
    assert verdict.arms_recovery_episode is (code in PROVIDER_FAILURE_CODES)


def test_the_deferrable_set_is_the_embed_taxonomy_minus_unclassified_plus_documented_codes() -> (
    None
):
    embed = codes.EMBED_FAILURE_CODES - {codes.KB_VECTOR_EMBED_UNCLASSIFIED}
    assert embed <= DEFERRABLE_CODES
    assert codes.KB_COLLECTION_FROZEN in DEFERRABLE_CODES
    assert codes.KB_VECTOR_EMBED_PROVEN_CONTENT_POISON in DEFERRABLE_CODES
    assert codes.KB_VECTOR_EMBED_UNDELIVERABLE_AT_GEOMETRY in DEFERRABLE_CODES
    assert codes.KB_VECTOR_EMBED_UNCLASSIFIED not in DEFERRABLE_CODES


def test_provider_failures_are_exactly_the_documented_ones() -> None:
    assert {
        codes.KB_VECTOR_EMBED_TIMEOUT,
        codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED,
        codes.KB_VECTOR_EMBED_CONNECTION_REFUSED,
        codes.KB_VECTOR_EMBED_CIRCUIT_OPEN,
        codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL,
    } <= PROVIDER_FAILURE_CODES
    for not_provider in (
        codes.KB_VECTOR_EMBED_WRITE_ERROR,
        codes.KB_VECTOR_EMBED_CONTENT,
        codes.KB_VECTOR_EMBED_ABORTED,
        codes.ABORT_ERR,
        codes.KB_VECTOR_EMBED_YIELD,
        codes.KB_VECTOR_EMBED_INVALID_VECTORS,
        codes.KB_COLLECTION_FROZEN,
        codes.KB_VECTOR_EMBED_PROVEN_CONTENT_POISON,
        codes.KB_VECTOR_EMBED_UNDELIVERABLE_AT_GEOMETRY,
    ):
        assert not_provider not in PROVIDER_FAILURE_CODES
    assert PROVIDER_FAILURE_CODES <= DEFERRABLE_CODES


@pytest.mark.parametrize(
    "code",
    [
        codes.KB_VECTOR_EMBED_UNCLASSIFIED,
        codes.PARSE_FAILED,
        codes.STORE_FAILED,
        codes.SOURCE_UNREADABLE,
        codes.SOURCE_REPO_MISSING,
        codes.CONFIG_INVALID,
        "SOME_UNKNOWN_CODE",
        "",
    ],
)
def test_a_non_deferrable_code_fails_and_wins_over_many_deferrable_rows(code: str) -> None:
    alone = classify_sweep_outcome(summary(row(code)))
    assert (alone.outcome, alone.cause_code) == (FAILED, code)
    crowded = classify_sweep_outcome(
        summary(*(row(codes.KB_VECTOR_EMBED_TIMEOUT) for _ in range(9)), row(code))
    )
    assert (crowded.outcome, crowded.cause_code) == (FAILED, code)
    assert not crowded.arms_recovery_episode
    assert not crowded.advance_checkpoint and not crowded.reset_failures


def test_a_malformed_fence_defers_with_its_top_level_code_not_its_reason_code() -> None:
    # reasonCode says provider timeout; the row's own code is the fence code. The gate
    # failed, so details prove nothing: the top-level code is the cause, and it arms nothing.
    bad = row(
        codes.KB_VECTOR_EMBED_PROVEN_CONTENT_POISON,
        {"chunkId": chunk(1), "reasonCode": codes.KB_VECTOR_EMBED_TIMEOUT, "disposition": POISON},
    )
    verdict = classify_sweep_outcome(summary(bad))
    assert verdict.outcome == DEFERRED
    assert verdict.cause_code == codes.KB_VECTOR_EMBED_PROVEN_CONTENT_POISON
    assert not verdict.arms_recovery_episode
    assert verdict.live_rows == (bad,)


def test_a_malformed_fence_with_a_provider_code_defers_and_arms_like_a_live_row() -> None:
    bad = row(
        codes.KB_VECTOR_EMBED_TIMEOUT,
        {"chunkId": "nope", "reasonCode": codes.KB_VECTOR_EMBED_TIMEOUT, "disposition": POISON},
    )
    live = row(codes.KB_VECTOR_EMBED_TIMEOUT)
    assert classify_sweep_outcome(summary(bad)) == dataclasses.replace(
        classify_sweep_outcome(summary(live)), live_rows=(bad,)
    )


def test_a_well_formed_fence_with_a_failing_code_is_not_excused() -> None:
    disguised = fence(POISON, codes.KB_VECTOR_EMBED_UNCLASSIFIED, 1)
    verdict = classify_sweep_outcome(summary(disguised))
    assert (verdict.outcome, verdict.cause_code) == (FAILED, codes.KB_VECTOR_EMBED_UNCLASSIFIED)
    assert verdict.fence_rows == ()


@pytest.mark.parametrize("bad_row", [None, "KB_VECTOR_EMBED_TIMEOUT", 3, {}, {"code": 5}], ids=repr)
def test_a_row_without_a_string_code_fails_the_sweep(bad_row: object) -> None:
    verdict = classify_sweep_outcome(summary(row(codes.KB_VECTOR_EMBED_TIMEOUT), bad_row))
    assert (verdict.outcome, verdict.cause_code) == (FAILED, SWEEP_SUMMARY_MALFORMED)


def test_errors_may_be_a_list_or_a_tuple() -> None:
    for rows in ([row(codes.KB_VECTOR_EMBED_YIELD)], (row(codes.KB_VECTOR_EMBED_YIELD),)):
        assert classify_sweep_outcome(rows).outcome == DEFERRED


# --- Cause selection.


def test_the_most_frequent_live_code_is_the_cause() -> None:
    rows = [row(codes.KB_VECTOR_EMBED_CONTENT)] * 2 + [row(codes.KB_VECTOR_EMBED_CIRCUIT_OPEN)]
    assert classify_sweep_outcome(summary(*rows)).cause_code == codes.KB_VECTOR_EMBED_CONTENT


def test_ties_go_to_the_priority_order() -> None:
    rows = [row(codes.KB_VECTOR_EMBED_TIMEOUT), row(codes.KB_VECTOR_EMBED_CIRCUIT_OPEN)]
    verdict = classify_sweep_outcome(summary(*rows))
    assert verdict.cause_code == codes.KB_VECTOR_EMBED_CIRCUIT_OPEN
    assert verdict.arms_recovery_episode


def test_priority_ties_between_every_pair_follow_the_listed_order() -> None:
    for first, second in itertools.combinations(CAUSE_PRIORITY, 2):
        assert pick_cause([second, first]) == first


def test_unknown_codes_rank_after_known_ones_then_lexicographically() -> None:
    assert pick_cause(["AAA_UNKNOWN", codes.KB_VECTOR_EMBED_UNCLASSIFIED]) == (
        codes.KB_VECTOR_EMBED_UNCLASSIFIED
    )
    assert pick_cause(["ZZZ", "AAA"]) == "AAA"
    verdict = classify_sweep_outcome(summary(row("ZZZ"), row("AAA")))
    assert (verdict.outcome, verdict.cause_code) == (FAILED, "AAA")


def test_pick_cause_needs_a_candidate() -> None:
    with pytest.raises(ValueError):
        pick_cause([])


def test_the_priority_list_has_no_duplicates_and_covers_every_deferrable_code() -> None:
    assert len(CAUSE_PRIORITY) == len(set(CAUSE_PRIORITY))
    assert set(DEFERRABLE_CODES) <= set(CAUSE_PRIORITY)


def test_the_verdict_is_frozen() -> None:
    verdict = classify_sweep_outcome(summary())
    with pytest.raises(dataclasses.FrozenInstanceError):
        verdict.outcome = FAILED  # type: ignore[misc]


# --- Properties over arbitrary mixes.

_any_code = st.sampled_from(
    sorted(DEFERRABLE_CODES)
    + [codes.KB_VECTOR_EMBED_UNCLASSIFIED, codes.STORE_FAILED, codes.PARSE_FAILED, "UNKNOWN"]
)


@st.composite
def any_row(draw: st.DrawFn) -> dict:
    code = draw(_any_code)
    if draw(st.booleans()):
        return row(code)
    disposition = draw(st.sampled_from([POISON, UNDELIVERABLE, "bogus"]))
    reason = code if draw(st.booleans()) else draw(_any_code)
    chunk_id = chunk(draw(st.integers(0, 50))) if draw(st.booleans()) else "short"
    return row(code, {"chunkId": chunk_id, "reasonCode": reason, "disposition": disposition})


@given(st.lists(any_row(), max_size=12), st.randoms(use_true_random=False))
def test_verdict_invariants_and_order_independence(rows: list[dict], rnd: random.Random) -> None:
    verdict = classify_sweep_outcome(summary(*rows))
    assert len(verdict.live_rows) + len(verdict.fence_rows) == len(rows)
    assert (verdict.outcome == COMPLETE) == (not verdict.live_rows)
    assert (verdict.cause_code is None) == (verdict.outcome == COMPLETE)
    if verdict.cause_code is not None:
        assert verdict.cause_code in {r["code"] for r in verdict.live_rows}
    if verdict.arms_recovery_episode:
        assert verdict.outcome == DEFERRED and verdict.cause_code in PROVIDER_FAILURE_CODES
    shuffled = list(rows)
    rnd.shuffle(shuffled)
    again = classify_sweep_outcome(summary(*shuffled))
    assert (again.outcome, again.cause_code, again.arms_recovery_episode) == (
        verdict.outcome,
        verdict.cause_code,
        verdict.arms_recovery_episode,
    )
