"""Backoff, stable jitter and the due rule of the sweep sensor."""

import dataclasses
import math
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neo_assets.core import codes
from neo_assets.sweep.rules.scheduling import (
    DEFAULT_RETRY_POLICY,
    DUE_BACKOFF_ELAPSED,
    DUE_DECLARATION_MOVED,
    DUE_GENERATION_CHANGED,
    DUE_NEVER_SWEPT,
    DUE_REASONS,
    DUE_RECOVERY_HEALTHY,
    DUE_REVISION_MOVED,
    DUE_STATE_UNOBSERVED,
    Observed,
    RepoState,
    RetryPolicy,
    backoff_seconds,
    due_reason,
    next_due_at,
    retry_due_at,
    stable_jitter_seconds,
)

# --- backoff


def test_backoff_doubles_per_failure_up_to_the_cap_and_resets() -> None:
    seen = [backoff_seconds(60.0, n, 1800.0) for n in range(8)]
    assert seen == [60.0, 120.0, 240.0, 480.0, 960.0, 1800.0, 1800.0, 1800.0]
    # a success resets consecutive failures to 0, which is the cadence again
    assert backoff_seconds(60.0, 0, 1800.0) == 60.0


def test_default_cap_is_thirty_minutes() -> None:
    assert DEFAULT_RETRY_POLICY.cap_seconds == 1800.0


@pytest.mark.parametrize("failures", [64, 1023, 1024, 5000, 10**6, 10**18, 2**200])
def test_huge_failure_counts_stay_at_the_cap_without_overflow(failures: int) -> None:
    assert backoff_seconds(1800.0, failures, 1800.0) == 1800.0
    assert backoff_seconds(1.7e308, failures, 1800.0) == 1800.0
    if failures >= 1100:  # even the smallest positive cadence has passed any cap by then
        assert backoff_seconds(5e-324, failures, 1800.0) == 1800.0


def test_tiny_cadence_still_reaches_the_cap() -> None:
    assert backoff_seconds(5e-324, 1100, 10.0) == 10.0
    assert backoff_seconds(5e-324, 1, 10.0) == 1e-323


def test_cadence_above_cap_is_capped_and_zero_stays_zero() -> None:
    assert backoff_seconds(7200.0, 0, 1800.0) == 1800.0
    assert backoff_seconds(0.0, 50, 1800.0) == 0.0


@pytest.mark.parametrize(
    "args",
    [
        (-1.0, 0, 10.0),
        (math.inf, 0, 10.0),
        (math.nan, 0, 10.0),
        (1.0, -1, 10.0),
        (1.0, 1.5, 10.0),
        (1.0, True, 10.0),
        (1.0, 0, -10.0),
        (1.0, 0, math.inf),
        ("1", 0, 10.0),
    ],
    ids=repr,
)
def test_backoff_refuses_bad_inputs(args: tuple) -> None:
    with pytest.raises(ValueError):
        backoff_seconds(*args)


@given(
    st.floats(min_value=0.001, max_value=1e6),
    st.integers(min_value=0, max_value=3000),
    st.floats(min_value=0, max_value=1e7),
)
def test_backoff_is_the_formula_and_monotone(cadence: float, failures: int, cap: float) -> None:
    value = backoff_seconds(cadence, failures, cap)
    assert 0 <= value <= cap
    assert value <= backoff_seconds(cadence, failures + 1, cap)
    exact = cadence * 2.0**failures if failures < 1000 else math.inf
    assert value == min(exact, cap)


# --- jitter


def test_jitter_is_stable_per_key_and_bounded() -> None:
    first = stable_jitter_seconds("acme/widgets", 30.0)
    assert first == stable_jitter_seconds("acme/widgets", 30.0)
    assert 0.0 <= first < 30.0
    assert stable_jitter_seconds("acme/widgets", 0.0) == 0.0


def test_jitter_is_the_same_in_another_process_with_another_hash_seed() -> None:
    here = [stable_jitter_seconds(f"t/r{n}", 30.0) for n in range(5)]
    code = (
        "from neo_assets.sweep.rules.scheduling import stable_jitter_seconds as j;"
        "print(repr([j(f't/r{n}', 30.0) for n in range(5)]))"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == repr(here)


def test_jitter_spreads_keys_apart() -> None:
    values = [stable_jitter_seconds(f"tenant/repo-{n}", 30.0) for n in range(200)]
    assert len(set(values)) == 200
    # roughly uniform: both halves of the interval are used plenty
    assert 50 < sum(v < 15.0 for v in values) < 150


@given(st.text(), st.floats(min_value=0, max_value=1e9))
def test_jitter_is_always_in_range(key: str, max_jitter: float) -> None:
    value = stable_jitter_seconds(key, max_jitter)
    assert 0.0 <= value and (value < max_jitter or value == max_jitter == 0.0)


@pytest.mark.parametrize("args", [(1, 30.0), ("k", -1.0), ("k", math.nan), ("k", math.inf)])
def test_jitter_refuses_bad_inputs(args: tuple) -> None:
    with pytest.raises(ValueError):
        stable_jitter_seconds(*args)


def test_next_due_at_adds_backoff_and_jitter() -> None:
    assert next_due_at(1000.0, 60.0, 3, 1800.0, 7.5) == 1000.0 + 480.0 + 7.5
    assert next_due_at(1000.0, 60.0, 30, 1800.0, 0.0) == 2800.0
    with pytest.raises(ValueError):
        next_due_at(1000.0, 60.0, 0, 1800.0, -1.0)
    with pytest.raises(ValueError):
        next_due_at(math.nan, 60.0, 0, 1800.0, 0.0)


# --- due-ness

KEY = "acme/widgets"
CADENCE = 600.0
POLICY = RetryPolicy(cap_seconds=1800.0, max_jitter_seconds=30.0)
JITTER = stable_jitter_seconds(KEY, 30.0)
T0 = 1_700_000_000.0

OBSERVED = Observed(
    repo_key=KEY,
    cadence_seconds=CADENCE,
    current_revision="rev-2",
    declaration_digest="decl-1",
    embedding_generation="gen-1",
)
COMPLETE = RepoState(
    last_outcome=codes.OUTCOME_COMPLETE,
    last_ingested_rev="rev-2",
    last_attempted_rev="rev-2",
    declaration_digest="decl-1",
    embedding_generation="gen-1",
    consecutive_failures=0,
    last_attempt_at=T0,
)
# Deferred on rev-2: the checkpoint is held back at rev-1 by design.
DEFERRED = dataclasses.replace(
    COMPLETE,
    last_outcome=codes.OUTCOME_DEFERRED,
    last_ingested_rev="rev-1",
    consecutive_failures=2,
)
# Failed on rev-2; the failed attempt recorded its inputs (attempt_inputs_at = its time).
FAILED = dataclasses.replace(DEFERRED, last_outcome=codes.OUTCOME_FAILED, attempt_inputs_at=T0)


def reason(state: RepoState | None, now: float = T0, **observed: object) -> str | None:
    return due_reason(state, dataclasses.replace(OBSERVED, **observed), now, POLICY)


def independent_due_at(failures: int) -> float:
    return T0 + min(CADENCE * 2**failures, 1800.0) + JITTER


def test_never_swept() -> None:
    assert reason(None) == DUE_NEVER_SWEPT
    assert reason(RepoState()) == DUE_NEVER_SWEPT


@pytest.mark.parametrize(
    "state",
    [
        dataclasses.replace(COMPLETE, last_outcome=None),
        dataclasses.replace(COMPLETE, last_outcome=codes.OUTCOME_SKIPPED),
        dataclasses.replace(COMPLETE, last_outcome="bogus"),
        dataclasses.replace(COMPLETE, last_ingested_rev=None),
        dataclasses.replace(COMPLETE, declaration_digest=None),
        dataclasses.replace(COMPLETE, embedding_generation=None),
        dataclasses.replace(DEFERRED, consecutive_failures=None),
        dataclasses.replace(DEFERRED, consecutive_failures=-1),
        dataclasses.replace(DEFERRED, consecutive_failures=True),
        dataclasses.replace(DEFERRED, consecutive_failures="2"),
        dataclasses.replace(DEFERRED, last_attempt_at=None),
        dataclasses.replace(DEFERRED, last_attempt_at=math.nan),
        dataclasses.replace(DEFERRED, last_attempt_at="yesterday"),
        dataclasses.replace(FAILED, last_attempt_at=None),
        # a failed repo whose inputs are not those of its last attempt (a ledger from
        # before they were recorded, a write that recorded only part of them)
        dataclasses.replace(FAILED, attempt_inputs_at=None),
        dataclasses.replace(FAILED, attempt_inputs_at=T0 - 60.0),
        dataclasses.replace(FAILED, attempt_inputs_at="torn"),
        dataclasses.replace(FAILED, declaration_digest=None),
        dataclasses.replace(FAILED, embedding_generation=None),
    ],
    ids=repr,
)
def test_an_unreadable_state_is_due_as_unobserved(state: RepoState) -> None:
    assert reason(state) == DUE_STATE_UNOBSERVED
    assert retry_due_at(state, OBSERVED, POLICY) is None


@given(st.floats(min_value=-1e12, max_value=1e12))
def test_a_complete_repo_with_nothing_moved_is_never_due(now: float) -> None:
    assert reason(COMPLETE, now) is None


def test_a_fence_only_repo_launches_nothing_on_three_consecutive_ticks() -> None:
    # completing advanced the checkpoint; fences are not inputs to due-ness
    for tick in range(3):
        assert reason(COMPLETE, T0 + 30.0 * (tick + 1)) is None
    assert retry_due_at(COMPLETE, OBSERVED, POLICY) is None


@pytest.mark.parametrize("state", [COMPLETE, DEFERRED, FAILED], ids=lambda s: s.last_outcome)
def test_moved_inputs_make_any_repo_due_at_once(state: RepoState) -> None:
    assert reason(state, current_revision="rev-3") == DUE_REVISION_MOVED
    assert reason(state, declaration_digest="decl-2") == DUE_DECLARATION_MOVED
    assert reason(state, embedding_generation="gen-2") == DUE_GENERATION_CHANGED


def test_reasons_are_reported_in_the_documented_order() -> None:
    everything = dict(current_revision="r9", declaration_digest="d9", embedding_generation="g9")
    late = T0 + 10**6
    assert reason(DEFERRED, late, **everything) == DUE_REVISION_MOVED
    everything.pop("current_revision")
    assert reason(DEFERRED, late, **everything) == DUE_DECLARATION_MOVED
    everything.pop("declaration_digest")
    assert reason(DEFERRED, late, **everything) == DUE_GENERATION_CHANGED


def test_unknown_observations_are_never_a_reason() -> None:
    unknown = dict(current_revision=None, declaration_digest=None, embedding_generation=None)
    assert reason(COMPLETE, **unknown) is None
    assert reason(DEFERRED, **unknown) is None


def test_a_deferred_repo_is_not_due_merely_because_its_checkpoint_is_held_back() -> None:
    assert DEFERRED.last_ingested_rev != OBSERVED.current_revision
    assert reason(DEFERRED, T0 + 1.0) is None


def test_a_deferred_repo_whose_attempt_never_learned_the_revision_waits_for_backoff() -> None:
    early = dataclasses.replace(DEFERRED, last_attempted_rev=None, declaration_digest=None)
    assert reason(early, T0 + 1.0) is None
    assert reason(early, independent_due_at(2)) == DUE_BACKOFF_ELAPSED


# --- failed repos: compared with the failed attempt's own inputs

# The case: the repo completed at rev-2 under decl-0, then 'ref:' got a typo
# (decl-1): the failed attempt saw decl-1 and no revision (the ref does not resolve).
BAD_REF = dataclasses.replace(
    FAILED, last_ingested_rev="rev-2", last_attempted_rev=None, consecutive_failures=1
)


def test_a_failed_repo_with_nothing_moved_waits_for_its_backoff() -> None:
    # what the sensor sees on every tick while the typo stands: the same declaration,
    # still no revision
    ticks = [T0 + 60.0 * n for n in range(1, 30) if T0 + 60.0 * n < independent_due_at(1)]
    assert len(ticks) >= 19  # 20 minutes of backoff: about 20 ticks of a 60 s sensor
    assert [reason(BAD_REF, now, current_revision=None) for now in ticks] == [None] * len(ticks)
    assert reason(BAD_REF, independent_due_at(1) - 0.01, current_revision=None) is None
    assert reason(BAD_REF, independent_due_at(1), current_revision=None) == DUE_BACKOFF_ELAPSED


def test_a_failed_repo_is_not_due_for_the_declaration_its_checkpoint_was_made_with() -> None:
    # the completed sweep's declaration is not what the failed attempt is compared with
    assert reason(BAD_REF, T0 + 60.0, current_revision=None, declaration_digest="decl-1") is None


def test_a_fixed_declaration_makes_a_failed_repo_due_at_once() -> None:
    fixed = dict(current_revision="rev-2", declaration_digest="decl-2")
    assert reason(BAD_REF, T0 + 60.0, **fixed) == DUE_REVISION_MOVED  # readable again
    assert reason(BAD_REF, T0 + 60.0, current_revision=None, declaration_digest="decl-2") == (
        DUE_DECLARATION_MOVED
    )


def test_a_failed_repo_whose_revision_became_readable_is_due_at_once() -> None:
    # e.g. the declared branch was created after the failed attempt
    assert reason(BAD_REF, T0 + 60.0, current_revision="rev-9") == DUE_REVISION_MOVED


def test_a_failed_repo_whose_revision_became_unreadable_waits_for_its_backoff() -> None:
    # None now means "cannot tell": never a reason; sweeping would fail the same way
    assert reason(FAILED, T0 + 60.0, current_revision=None) is None


def test_a_failed_repo_at_the_revision_it_failed_at_waits_for_its_backoff() -> None:
    assert reason(FAILED, T0 + 60.0) is None
    assert reason(FAILED, T0 + 60.0, current_revision="rev-3") == DUE_REVISION_MOVED
    assert reason(FAILED, T0 + 60.0, embedding_generation="gen-2") == DUE_GENERATION_CHANGED


@pytest.mark.parametrize("state", [DEFERRED, FAILED], ids=lambda s: s.last_outcome)
@pytest.mark.parametrize("failures", [0, 1, 2, 3, 10])
def test_backoff_elapses_exactly_at_the_independent_due_time(
    state: RepoState, failures: int
) -> None:
    state = dataclasses.replace(state, consecutive_failures=failures)
    due_at = independent_due_at(failures)
    assert retry_due_at(state, OBSERVED, POLICY) == pytest.approx(due_at, abs=1e-6)
    assert reason(state, due_at - 0.01) is None
    assert reason(state, due_at + 1e-6) == DUE_BACKOFF_ELAPSED


def test_backoff_waits_double_per_deferral_up_to_the_cap() -> None:
    waits = []
    for failures in range(1, 6):
        state = dataclasses.replace(DEFERRED, consecutive_failures=failures)
        due_at = retry_due_at(state, OBSERVED, POLICY)
        assert due_at is not None
        waits.append(round(due_at - T0 - JITTER, 6))
    assert waits == [1200.0, 1800.0, 1800.0, 1800.0, 1800.0]


def test_the_default_policy_is_used_when_none_is_given() -> None:
    state = dataclasses.replace(DEFERRED, consecutive_failures=0)
    default_jitter = stable_jitter_seconds(KEY, DEFAULT_RETRY_POLICY.max_jitter_seconds)
    due_at = T0 + CADENCE + default_jitter
    assert retry_due_at(state, OBSERVED) == pytest.approx(due_at)
    assert due_reason(state, OBSERVED, due_at - 0.01) is None
    assert due_reason(state, OBSERVED, due_at + 1e-6) == DUE_BACKOFF_ELAPSED


# --- recovery episodes

EPISODE = dataclasses.replace(DEFERRED, recovery_episode_opened_at=T0)


def test_a_healthy_provider_after_the_episode_makes_the_deferred_repo_due_at_once() -> None:
    assert reason(EPISODE, T0 + 5.0, recovery_healthy_at=T0 + 4.0) == DUE_RECOVERY_HEALTHY
    assert reason(EPISODE, T0 + 5.0) is None  # without the sighting it waits for backoff


@pytest.mark.parametrize(
    ("state", "healthy_at"),
    [
        (EPISODE, T0 - 1.0),  # healthy before the episode opened
        (EPISODE, T0),  # not strictly after
        (dataclasses.replace(EPISODE, recovery_episode_opened_at=None), T0 + 4.0),  # no episode
        (dataclasses.replace(EPISODE, last_attempt_at=T0 + 10.0), T0 + 4.0),  # already retried
        (
            dataclasses.replace(EPISODE, last_outcome=codes.OUTCOME_FAILED, attempt_inputs_at=T0),
            T0 + 4.0,
        ),  # failed
        (dataclasses.replace(EPISODE, recovery_episode_opened_at="torn"), T0 + 4.0),
    ],
    ids=["before-open", "at-open", "no-episode", "after-retry", "failed", "torn-episode"],
)
def test_recovery_does_not_make_the_repo_due(state: RepoState, healthy_at: float) -> None:
    assert reason(state, T0 + 11.0, recovery_healthy_at=healthy_at) is None


def test_recovery_does_not_touch_a_complete_repo() -> None:
    state = dataclasses.replace(COMPLETE, recovery_episode_opened_at=T0)
    assert reason(state, T0 + 5.0, recovery_healthy_at=T0 + 4.0) is None


def test_every_reason_is_reachable_and_in_the_closed_set() -> None:
    reached = {
        reason(None),
        reason(dataclasses.replace(COMPLETE, last_outcome="bogus")),
        reason(COMPLETE, current_revision="x"),
        reason(COMPLETE, declaration_digest="x"),
        reason(COMPLETE, embedding_generation="x"),
        reason(EPISODE, T0 + 5.0, recovery_healthy_at=T0 + 4.0),
        reason(DEFERRED, T0 + 10**6),
    }
    assert reached == DUE_REASONS


@given(
    st.sampled_from([codes.OUTCOME_DEFERRED, codes.OUTCOME_FAILED]),
    st.integers(0, 40),
    st.floats(min_value=0, max_value=5000),
)
def test_a_retrying_repo_is_due_exactly_when_its_backoff_has_elapsed(
    outcome: str, failures: int, elapsed: float
) -> None:
    state = dataclasses.replace(
        DEFERRED, last_outcome=outcome, consecutive_failures=failures, attempt_inputs_at=T0
    )
    due = reason(state, T0 + elapsed)
    wait = min(CADENCE * 2.0**failures, 1800.0) + JITTER
    if elapsed >= wait + 1e-6:
        assert due == DUE_BACKOFF_ELAPSED
    elif elapsed < wait - 1e-6:
        assert due is None


def test_unreadable_source_is_due_once_then_left_to_backoff() -> None:
    from neo_assets.sweep.rules.scheduling import DUE_SOURCE_UNREADABLE, unreadable_source_reason

    assert unreadable_source_reason(None) == DUE_SOURCE_UNREADABLE
    assert unreadable_source_reason(RepoState(last_outcome=codes.OUTCOME_COMPLETE)) == (
        DUE_SOURCE_UNREADABLE
    )
    assert unreadable_source_reason(RepoState(last_outcome=codes.OUTCOME_FAILED)) is None
