"""When a repo is due for a sweep: backoff, stable jitter and the due rule
(``due_reason``; first matching reason wins). Time is an argument.
Design: docs/design/sweep.md#due-rule"""

import hashlib
import math
from dataclasses import dataclass, fields
from typing import TypeGuard

from neo_assets.core import codes

# Due reasons (sensor tags / run tags / status); a closed set.
DUE_NEVER_SWEPT = "never-swept"
DUE_STATE_UNOBSERVED = "state-unobserved"
DUE_REVISION_MOVED = "revision-moved"
DUE_DECLARATION_MOVED = "declaration-moved"
DUE_GENERATION_CHANGED = "generation-changed"
DUE_RECOVERY_HEALTHY = "recovery-healthy"
DUE_BACKOFF_ELAPSED = "backoff-elapsed"
# The repo cannot be read now (missing, ref gone): sweep once so the failure is recorded
# and visible; after that, the failed state's backoff decides.
DUE_SOURCE_UNREADABLE = "source-unreadable"
DUE_REASONS = frozenset(
    {
        DUE_NEVER_SWEPT,
        DUE_STATE_UNOBSERVED,
        DUE_REVISION_MOVED,
        DUE_DECLARATION_MOVED,
        DUE_GENERATION_CHANGED,
        DUE_RECOVERY_HEALTHY,
        DUE_BACKOFF_ELAPSED,
    }
)

# Defaults mirror settings.sweep.backoff_cap_minutes (30) and settings.sweep.backoff_jitter_s (30).
DEFAULT_BACKOFF_CAP_SECONDS = 30 * 60.0
DEFAULT_MAX_JITTER_SECONDS = 30.0

# Past this exponent cadence × 2^n overflows a float for every positive cadence, i.e. the
# cap has long been reached; clamping first keeps huge failure counts O(1).
_MAX_EXPONENT = 2100

_RETRYING_OUTCOMES = frozenset({codes.OUTCOME_DEFERRED, codes.OUTCOME_FAILED})
_PERSISTED_OUTCOMES = _RETRYING_OUTCOMES | {codes.OUTCOME_COMPLETE}


@dataclass(frozen=True)
class RepoState:
    """A repo's persisted scheduling state, as the ledger holds it (``None``: not observed).
    ``attempt_inputs_at``: the attempt whose revision, declaration digest and generation are
    recorded; equal to ``last_attempt_at`` when they are the last attempt's own."""

    last_outcome: str | None = None
    last_ingested_rev: str | None = None
    last_attempted_rev: str | None = None
    declaration_digest: str | None = None
    embedding_generation: str | None = None
    consecutive_failures: int | None = None
    last_attempt_at: float | None = None
    recovery_episode_opened_at: float | None = None
    attempt_inputs_at: float | None = None


@dataclass(frozen=True)
class Observed:
    """What is true now for one repo, as the sensor can learn it without sweeping; ``None``
    means the sensor cannot tell (never a reason to be due)."""

    repo_key: str
    cadence_seconds: float
    current_revision: str | None = None
    declaration_digest: str | None = None
    embedding_generation: str | None = None
    recovery_healthy_at: float | None = None


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff settings: ``cap_seconds`` bounds the exponential part; the stable jitter in
    ``[0, max_jitter_seconds)`` is added on top so repos failing together retry apart."""

    cap_seconds: float = DEFAULT_BACKOFF_CAP_SECONDS
    max_jitter_seconds: float = DEFAULT_MAX_JITTER_SECONDS


DEFAULT_RETRY_POLICY = RetryPolicy()


def _check_non_negative(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be finite and >= 0, got {value!r}")


def backoff_seconds(cadence_seconds: float, consecutive_failures: int, cap_seconds: float) -> float:
    """``min(cadence_seconds × 2^consecutive_failures, cap_seconds)``, without overflow; raises
    ``ValueError`` for negative or non-finite inputs."""
    _check_non_negative("cadence_seconds", cadence_seconds)
    _check_non_negative("cap_seconds", cap_seconds)
    if not _is_count(consecutive_failures):
        raise ValueError(f"consecutive_failures must be an int >= 0, got {consecutive_failures!r}")
    try:
        raw = math.ldexp(float(cadence_seconds), min(consecutive_failures, _MAX_EXPONENT))
    except OverflowError:
        return float(cap_seconds)
    return float(min(raw, cap_seconds))


def stable_jitter_seconds(key: str, max_jitter_seconds: float) -> float:
    """A per-key jitter in ``[0, max_jitter_seconds)``, the same for the same key in every
    process (sha256 of the key, not ``hash()`` or a random draw), so a repo's retry time
    does not wander from tick to tick yet repos are spread apart."""
    if not isinstance(key, str):
        raise ValueError(f"key must be a str, got {key!r}")
    _check_non_negative("max_jitter_seconds", max_jitter_seconds)
    digest = hashlib.sha256(b"neo-assets/jitter\x00" + key.encode("utf-8", "surrogatepass"))
    # 53 bits: the fraction is an exact float in [0, 1), so the product stays below max.
    fraction = (int.from_bytes(digest.digest()[:8], "big") >> 11) / float(1 << 53)
    if max_jitter_seconds == 0:
        return 0.0
    # Rounding may carry the product up to the bound itself; keep the interval half-open.
    return min(fraction * float(max_jitter_seconds), math.nextafter(max_jitter_seconds, 0.0))


def next_due_at(
    last_attempt_at: float,
    cadence_seconds: float,
    consecutive_failures: int,
    cap_seconds: float,
    jitter_seconds: float,
) -> float:
    """When a deferred or failed repo is due again:
    ``last_attempt_at + backoff_seconds(...) + jitter_seconds``."""
    _check_non_negative("jitter_seconds", jitter_seconds)
    if isinstance(last_attempt_at, bool) or not isinstance(last_attempt_at, int | float):
        raise ValueError(f"last_attempt_at must be a number, got {last_attempt_at!r}")
    if not math.isfinite(last_attempt_at):
        raise ValueError(f"last_attempt_at must be finite, got {last_attempt_at!r}")
    backoff = backoff_seconds(cadence_seconds, consecutive_failures, cap_seconds)
    return float(last_attempt_at) + backoff + float(jitter_seconds)


def _is_finite_number(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_unobserved(state: RepoState) -> bool:
    """The state cannot be read by the rule (docs/design/sweep.md#due-rule, reason 2)."""
    if state.last_outcome not in _PERSISTED_OUTCOMES:
        return True
    if state.last_outcome == codes.OUTCOME_COMPLETE:
        return (
            state.last_ingested_rev is None
            or state.declaration_digest is None
            or state.embedding_generation is None
        )
    if not (_is_finite_number(state.last_attempt_at) and _is_count(state.consecutive_failures)):
        return True
    if state.last_outcome == codes.OUTCOME_FAILED:
        return not (
            _is_finite_number(state.attempt_inputs_at)
            and state.attempt_inputs_at == state.last_attempt_at
            and state.declaration_digest is not None
            and state.embedding_generation is not None
        )
    return False


def retry_due_at(
    state: RepoState | None, observed: Observed, policy: RetryPolicy = DEFAULT_RETRY_POLICY
) -> float | None:
    """The backoff-based due time of a deferred or failed repo (for ``nextDueAt`` in
    status), or ``None`` when the repo is not retrying (complete, never swept, unreadable).
    A recovery episode or a moved input may make the repo due earlier."""
    if state is None or state.last_outcome not in _RETRYING_OUTCOMES or _is_unobserved(state):
        return None
    last_attempt_at, failures = state.last_attempt_at, state.consecutive_failures
    if last_attempt_at is None or failures is None:  # excluded by _is_unobserved; narrows types
        return None
    return next_due_at(
        last_attempt_at,
        observed.cadence_seconds,
        failures,
        policy.cap_seconds,
        stable_jitter_seconds(observed.repo_key, policy.max_jitter_seconds),
    )


def _moved(before: str | None, now: str | None) -> bool:
    return before is not None and now is not None and before != now


def due_reason(
    state: RepoState | None,
    observed: Observed,
    now: float,
    policy: RetryPolicy = DEFAULT_RETRY_POLICY,
) -> str | None:
    """Why the repo is due now (one of ``DUE_REASONS``), or ``None`` when it is not; the
    reasons in order: docs/design/sweep.md#due-rule."""
    if state is None or all(getattr(state, f.name) is None for f in fields(state)):
        return DUE_NEVER_SWEPT
    if _is_unobserved(state):
        return DUE_STATE_UNOBSERVED

    complete = state.last_outcome == codes.OUTCOME_COMPLETE
    if state.last_outcome == codes.OUTCOME_FAILED:
        # the revision as the failed attempt saw it (None: unreadable then)
        now_rev = observed.current_revision
        revision_moved = now_rev is not None and now_rev != state.last_attempted_rev
    else:
        decided_at_rev = state.last_ingested_rev if complete else state.last_attempted_rev
        revision_moved = _moved(decided_at_rev, observed.current_revision)
    if revision_moved:
        return DUE_REVISION_MOVED
    if _moved(state.declaration_digest, observed.declaration_digest):
        return DUE_DECLARATION_MOVED
    if _moved(state.embedding_generation, observed.embedding_generation):
        return DUE_GENERATION_CHANGED
    if complete:
        return None

    healthy_at = observed.recovery_healthy_at
    opened_at = state.recovery_episode_opened_at
    last_attempt_at = state.last_attempt_at
    if (
        state.last_outcome == codes.OUTCOME_DEFERRED
        and _is_finite_number(opened_at)
        and _is_finite_number(healthy_at)
        and last_attempt_at is not None
        and healthy_at > opened_at
        and healthy_at > last_attempt_at
    ):
        return DUE_RECOVERY_HEALTHY

    due_at = retry_due_at(state, observed, policy)
    if due_at is not None and now >= due_at:
        return DUE_BACKOFF_ELAPSED
    return None


def unreadable_source_reason(state: RepoState | None) -> str | None:
    """Due-ness of a repo whose revision cannot be read now: due once (so the failure is
    recorded and shown), then left to the failed state's backoff."""
    if state is not None and state.last_outcome == codes.OUTCOME_FAILED:
        return None
    return DUE_SOURCE_UNREADABLE
