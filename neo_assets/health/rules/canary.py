"""The provider health canary's rules: the vector verdict of a probe (the same one the freeze
rules read), what is cached, how failures back off. Pure.
Design: docs/design/health.md#canary"""

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from neo_assets.core import codes

CANARY_TEXT = "neo health canary: def ping(): return 'pong'"
CANARY_OPERATION_LABEL = "health-canary"
REPROBE_OPERATION_LABEL = "freeze-reprobe"

VECTORS_VALID = "valid"
VECTORS_DIMENSION_MISMATCH = "dimension-mismatch"
VECTORS_NON_FINITE = "non-finite"
VECTORS_ZERO = "zero"
VECTORS_WRONG_COUNT = "wrong-count"
VECTORS_MALFORMED = "malformed"
VECTOR_VERDICTS = frozenset(
    {
        VECTORS_VALID,
        VECTORS_DIMENSION_MISMATCH,
        VECTORS_NON_FINITE,
        VECTORS_ZERO,
        VECTORS_WRONG_COUNT,
        VECTORS_MALFORMED,
    }
)
# Answers that would corrupt the collection if written: the freeze triggers, most telling
# first (the order picks the trigger when one sweep saw several).
CORRUPTING_VERDICTS: tuple[str, ...] = (
    VECTORS_DIMENSION_MISMATCH,
    VECTORS_NON_FINITE,
    VECTORS_ZERO,
)

# Causes that are a deadline or an abort: the record's code names the cause itself, so the
# consumer's own deadline, an upstream abort and each provider's deadline stay distinct.
DEADLINE_OR_ABORT_CAUSES = codes.DEADLINE_CAUSE_CODES | {codes.ABORT_ERR}

# The wording of ``embedding/vectors.py`` (and the providers' "malformed response"), read
# back into a verdict. A pinned contract test keeps the two in step.
_DIMENSION = re.compile(r"expected dimension (\d+), got \[?([0-9, ]+)\]?")
_COUNT = re.compile(r"expected \d+ vectors, got \d+")


@dataclass(frozen=True)
class VectorFacts:
    """What a provider's answer looked like: how many vectors, their distinct widths,
    whether every value is finite and whether every vector has a non-zero value."""

    count: int
    dimensions: tuple[int, ...]
    finite: bool
    nonzero: bool


def judge_vectors(facts: VectorFacts | None, expected_dimension: int) -> str:
    """The verdict on an answer to one text; ``None`` facts are ``malformed``."""
    if facts is None:
        return VECTORS_MALFORMED
    if facts.count != 1:
        return VECTORS_WRONG_COUNT
    if facts.count and set(facts.dimensions) != {expected_dimension}:
        return VECTORS_DIMENSION_MISMATCH
    if not facts.finite:
        return VECTORS_NON_FINITE
    if not facts.nonzero:
        return VECTORS_ZERO
    return VECTORS_VALID


def invalid_detail_verdict(detail: str) -> str:
    """The verdict an invalid-vectors failure's detail names (a provider validates the
    answer itself and raises; its detail is all that is left of the vectors)."""
    text = detail or ""
    if _DIMENSION.search(text):
        return VECTORS_DIMENSION_MISMATCH
    if "non-finite" in text:
        return VECTORS_NON_FINITE
    if "all-zero" in text:
        return VECTORS_ZERO
    if _COUNT.search(text):
        return VECTORS_WRONG_COUNT
    return VECTORS_MALFORMED


def detail_dimensions(detail: str) -> tuple[int, ...]:
    """The dimensions an invalid-vectors detail says came back (empty when it names none)."""
    match = _DIMENSION.search(detail or "")
    if match is None:
        return ()
    return tuple(sorted({int(x) for x in re.findall(r"\d+", match.group(2))}))


@dataclass(frozen=True)
class ProbeOutcome:
    """One bounded probe as the shell observed it: ``facts`` when vectors came back, else the
    failure's class and cause; ``timeout_ms`` the deadline as read when it ran."""

    operation_label: str
    timeout_ms: int
    elapsed_ms: float
    facts: VectorFacts | None = None
    failure_code: str | None = None
    cause_code: str | None = None
    detail: str = ""


def probe_verdict(outcome: ProbeOutcome, expected_dimension: int) -> str | None:
    """The vector verdict the probe's evidence supports; ``None`` when it carries no vector
    evidence at all (deadline, abort, refused, reset, provider error: inconclusive)."""
    if outcome.failure_code is None:
        return judge_vectors(outcome.facts, expected_dimension)
    if outcome.failure_code == codes.KB_VECTOR_EMBED_INVALID_VECTORS:
        return invalid_detail_verdict(outcome.detail)
    return None


def answered_in_time(outcome: ProbeOutcome) -> bool:
    return (
        outcome.failure_code is None
        and outcome.facts is not None
        and math.isfinite(outcome.elapsed_ms)
        and outcome.elapsed_ms <= outcome.timeout_ms
    )


def is_healthy(outcome: ProbeOutcome, expected_dimension: int) -> bool:
    """Answered before its own deadline with exactly one valid vector of the dimension."""
    return answered_in_time(outcome) and probe_verdict(outcome, expected_dimension) == VECTORS_VALID


def is_inconclusive(outcome: ProbeOutcome, expected_dimension: int) -> bool:
    """True when the probe proves nothing about the vectors (no verdict, or not in time)."""
    verdict = probe_verdict(outcome, expected_dimension)
    return verdict is None or (verdict == VECTORS_VALID and not answered_in_time(outcome))


def probe_code(outcome: ProbeOutcome, expected_dimension: int) -> str | None:
    """The record's code: ``None`` when healthy; the cause for a deadline or an abort
    (``EMBEDDING_PROBE_TIMEOUT``, ``ABORT_ERR``, a provider's timeout code); else the
    failure class; ``KB_VECTOR_EMBED_INVALID_VECTORS`` for an answer judged invalid here."""
    if is_healthy(outcome, expected_dimension):
        return None
    if outcome.cause_code in DEADLINE_OR_ABORT_CAUSES:
        return outcome.cause_code
    if outcome.failure_code is not None:
        return outcome.failure_code
    if probe_verdict(outcome, expected_dimension) != VECTORS_VALID:
        return codes.KB_VECTOR_EMBED_INVALID_VECTORS
    # Valid vectors that arrived after the deadline: the probe's own deadline decided.
    return codes.EMBEDDING_PROBE_TIMEOUT


def observed_dimension(outcome: ProbeOutcome) -> int | None:
    """The one dimension the provider answered with, when the evidence names exactly one."""
    if outcome.facts is not None and len(outcome.facts.dimensions) == 1:
        return outcome.facts.dimensions[0]
    if outcome.failure_code == codes.KB_VECTOR_EMBED_INVALID_VECTORS:
        dims = detail_dimensions(outcome.detail)
        if len(dims) == 1:
            return dims[0]
    return None


# ------------------------------------------------------------------ cache and back-off
@dataclass(frozen=True)
class CanaryPolicy:
    """``ttl_s``: how long a healthy record is reused; the failure back-off bounds."""

    ttl_s: float = 300.0
    backoff_initial_s: float = 30.0
    backoff_max_s: float = 600.0


@dataclass(frozen=True)
class ProviderIdentity:
    """What a cached record is about: a different identity is never served from cache."""

    provider: str
    model: str
    endpoint: str | None
    dimension: int


@dataclass(frozen=True)
class CanaryRecord:
    """One canary result as the ledger keeps it and the snapshot shows it."""

    observed_at: float
    healthy: bool
    code: str | None
    operation_label: str
    timeout_ms: int
    elapsed_ms: float
    dimension: int | None
    expected_dimension: int
    provider: str
    model: str
    endpoint: str | None
    consecutive_failures: int
    retry_at: float | None
    failure_code: str | None = None
    cause_code: str | None = None
    detail: str = ""

    @property
    def identity(self) -> ProviderIdentity:
        return ProviderIdentity(self.provider, self.model, self.endpoint, self.expected_dimension)

    def to_doc(self, *, cached: bool | None = None) -> dict[str, Any]:
        """The CLI / snapshot shape (CONTRACT.md ``canary``), plus context keys."""
        doc: dict[str, Any] = {
            "healthy": self.healthy,
            "code": self.code,
            "operationLabel": self.operation_label,
            "timeoutMs": self.timeout_ms,
            "elapsedMs": self.elapsed_ms,
            "dimension": self.dimension,
            "expectedDimension": self.expected_dimension,
            "observedAt": self.observed_at,
            "provider": self.provider,
            "model": self.model,
            "failureCode": self.failure_code,
            "causeCode": self.cause_code,
            "consecutiveFailures": self.consecutive_failures,
            "retryAt": self.retry_at,
            "detail": self.detail,
        }
        if cached is not None:
            doc["cached"] = cached
        return doc


def failure_backoff_s(consecutive_failures: int, initial_s: float, max_s: float) -> float:
    """``initial_s × 2^(n-1)`` for the n-th consecutive failure, capped at ``max_s``."""
    if consecutive_failures < 1:
        raise ValueError(f"the failure (or attempt) count must be >= 1, got {consecutive_failures}")
    if initial_s < 0 or max_s < 0:
        raise ValueError("back-off bounds must be >= 0")
    exponent = min(consecutive_failures - 1, 64)  # past 2^64 the cap has long been hit
    return float(min(initial_s * (2.0**exponent), max_s))


def reusable(
    latest: CanaryRecord | None, identity: ProviderIdentity, now: float, policy: CanaryPolicy
) -> bool:
    """True when ``latest`` answers for now without probing: a healthy record within its
    TTL, or a failed one whose back-off is still running (it is returned unhealthy)."""
    if latest is None or latest.identity != identity:
        return False
    age = now - latest.observed_at
    if age < 0:  # a clock that went back proves nothing about freshness
        return False
    if latest.healthy:
        return age < policy.ttl_s
    return latest.retry_at is not None and now < latest.retry_at


def canary_record(
    outcome: ProbeOutcome,
    identity: ProviderIdentity,
    now: float,
    previous: CanaryRecord | None,
    policy: CanaryPolicy,
) -> CanaryRecord:
    """The record a fresh probe makes: healthy or not, and the back-off of a failure
    (consecutive failures count on only for the same provider identity)."""
    healthy = is_healthy(outcome, identity.dimension)
    failures = 0
    retry_at = None
    if not healthy:
        streak = (
            previous.consecutive_failures
            if previous is not None and previous.identity == identity and not previous.healthy
            else 0
        )
        failures = max(0, streak) + 1
        retry_at = now + failure_backoff_s(failures, policy.backoff_initial_s, policy.backoff_max_s)
    return CanaryRecord(
        observed_at=now,
        healthy=healthy,
        code=probe_code(outcome, identity.dimension),
        operation_label=outcome.operation_label,
        timeout_ms=outcome.timeout_ms,
        elapsed_ms=outcome.elapsed_ms,
        dimension=observed_dimension(outcome),
        expected_dimension=identity.dimension,
        provider=identity.provider,
        model=identity.model,
        endpoint=identity.endpoint,
        consecutive_failures=failures,
        retry_at=retry_at,
        failure_code=outcome.failure_code,
        cause_code=outcome.cause_code,
        detail=outcome.detail,
    )


def probe_doc(outcome: ProbeOutcome, expected_dimension: int, observed_at: float) -> dict[str, Any]:
    """A probe as the freeze record keeps its last one (same keys as a canary record)."""
    return {
        "healthy": is_healthy(outcome, expected_dimension),
        "code": probe_code(outcome, expected_dimension),
        "verdict": probe_verdict(outcome, expected_dimension),
        "operationLabel": outcome.operation_label,
        "timeoutMs": outcome.timeout_ms,
        "elapsedMs": outcome.elapsed_ms,
        "dimension": observed_dimension(outcome),
        "expectedDimension": expected_dimension,
        "failureCode": outcome.failure_code,
        "causeCode": outcome.cause_code,
        "detail": outcome.detail,
        "observedAt": observed_at,
    }


def record_from_mapping(row: Mapping[str, Any]) -> CanaryRecord | None:
    """A stored record, or ``None`` when a field a decision reads is torn (unobserved)."""
    try:
        healthy = row["healthy"]
        observed_at = row["observed_at"]
        timeout_ms = row["timeout_ms"]
        elapsed_ms = row["elapsed_ms"]
        expected = row["expected_dimension"]
        failures = row["consecutive_failures"]
        provider, model = row["provider"], row["model"]
        if not (isinstance(healthy, bool) and isinstance(provider, str) and isinstance(model, str)):
            return None
        if not all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            for v in (observed_at, timeout_ms, elapsed_ms, expected, failures)
        ):
            return None
        retry_at = row.get("retry_at")
        if not healthy and not (isinstance(retry_at, int | float) and math.isfinite(retry_at)):
            return None
        return CanaryRecord(
            observed_at=float(observed_at),
            healthy=healthy,
            code=row.get("code"),
            operation_label=str(row.get("operation_label") or ""),
            timeout_ms=int(timeout_ms),
            elapsed_ms=float(elapsed_ms),
            dimension=row.get("dimension"),
            expected_dimension=int(expected),
            provider=provider,
            model=model,
            endpoint=row.get("endpoint"),
            consecutive_failures=int(failures),
            retry_at=None if healthy else float(retry_at),
            failure_code=row.get("failure_code"),
            cause_code=row.get("cause_code"),
            detail=str(row.get("detail") or ""),
        )
    except (KeyError, TypeError, ValueError):
        return None
