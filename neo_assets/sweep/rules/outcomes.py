"""The sweep outcome classifier: complete, deferred or failed, from the live rows' codes
after the fence gate; the same summary always yields the same cause.
Design: docs/design/sweep.md#outcomes"""

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from neo_assets.core import codes
from neo_assets.sweep.rules.fence_gate import FENCEABLE_CODES, is_durable_fence

# Live codes that defer: embed-domain failures a later sweep may finish (the codes a fence
# may carry, which include the fence codes for malformed fence rows), plus a frozen
# collection. Everything else fails.
DEFERRABLE_CODES: frozenset[str] = FENCEABLE_CODES | {codes.KB_COLLECTION_FROZEN}

# Live causes that arm an embedding-recovery episode: the provider itself misbehaved.
PROVIDER_FAILURE_CODES: frozenset[str] = frozenset(
    {
        codes.KB_VECTOR_EMBED_TIMEOUT,
        codes.KB_VECTOR_EMBED_CIRCUIT_OPEN,
        codes.KB_VECTOR_EMBED_CONNECTION_REFUSED,
        codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED,
        codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL,
        codes.KB_VECTOR_EMBED_PROVIDER_LOADING,
        codes.KB_VECTOR_EMBED_PROVIDER_UNREACHABLE,
    }
    | codes.PROVIDER_DEADLINE_CODES
)

# Tie-break order between equally frequent live codes, most telling first: what stops the
# whole repo before what stops one chunk; provider-wide before per-request; transient and
# self-inflicted (abort, yield) last.
CAUSE_PRIORITY: tuple[str, ...] = (
    # failing
    codes.SWEEP_SUMMARY_MALFORMED,
    codes.CONFIG_INVALID,
    codes.SOURCE_REPO_MISSING,
    codes.SOURCE_UNREADABLE,
    codes.STORE_FAILED,
    codes.PARSE_FAILED,
    codes.KB_VECTOR_EMBED_UNCLASSIFIED,
    # deferring
    codes.KB_COLLECTION_FROZEN,
    codes.KB_VECTOR_EMBED_PROVIDER_UNREACHABLE,
    codes.KB_VECTOR_EMBED_CIRCUIT_OPEN,
    codes.KB_VECTOR_EMBED_PROVIDER_LOADING,
    codes.KB_VECTOR_EMBED_CONNECTION_REFUSED,
    codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED,
    codes.KB_VECTOR_EMBED_TIMEOUT,
    *sorted(codes.PROVIDER_DEADLINE_CODES),
    codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL,
    codes.KB_VECTOR_EMBED_BATCH_CAP,
    codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE,
    codes.KB_VECTOR_EMBED_INVALID_VECTORS,
    codes.KB_VECTOR_EMBED_WRITE_ERROR,
    codes.KB_VECTOR_EMBED_CONTENT,
    codes.KB_VECTOR_EMBED_PROVEN_CONTENT_POISON,
    codes.KB_VECTOR_EMBED_UNDELIVERABLE_AT_GEOMETRY,
    codes.KB_CHUNK_SECRET,
    codes.KB_VECTOR_EMBED_ABORTED,
    codes.ABORT_ERR,
    codes.EMBEDDING_PROBE_TIMEOUT,
    codes.KB_VECTOR_EMBED_YIELD,
)
_PRIORITY_INDEX = {code: index for index, code in enumerate(CAUSE_PRIORITY)}


@dataclass(frozen=True)
class SweepVerdict:
    """What one sweep's summary means for the repo's durable state: the outcome, its cause (a
    live row's code, ``None`` when complete), whether the checkpoint advances and failures
    reset, whether a recovery episode is armed, and the rows split by the fence gate."""

    outcome: str
    cause_code: str | None
    advance_checkpoint: bool
    reset_failures: bool
    arms_recovery_episode: bool
    live_rows: tuple[Any, ...]
    fence_rows: tuple[Any, ...]


def row_code(row: object) -> str:
    """The code a live row is classified by: its top-level ``code`` when that is a string,
    else ``codes.SWEEP_SUMMARY_MALFORMED`` (a row with no readable code cannot be deferred)."""
    if isinstance(row, Mapping):
        code = row.get("code")
        if isinstance(code, str):
            return code
    return codes.SWEEP_SUMMARY_MALFORMED


def pick_cause(candidate_codes: list[str]) -> str:
    """The most frequent code; ties by ``CAUSE_PRIORITY``, then lexicographically."""
    if not candidate_codes:
        raise ValueError("pick_cause needs at least one code")
    counts = Counter(candidate_codes)
    unranked = len(CAUSE_PRIORITY)
    return min(
        counts,
        key=lambda code: (-counts[code], _PRIORITY_INDEX.get(code, unranked), code),
    )


def classify_sweep_outcome(rows: Sequence[object]) -> SweepVerdict:
    """Classify one sweep by its error rows (``LaneSummary.errors``):
    docs/design/sweep.md#outcomes."""
    fence_rows = tuple(row for row in rows if is_durable_fence(row))
    live_rows = tuple(row for row in rows if not is_durable_fence(row))
    live_codes = [row_code(row) for row in live_rows]
    failing = [code for code in live_codes if code not in DEFERRABLE_CODES]
    if not live_rows:
        outcome, cause = codes.OUTCOME_COMPLETE, None
    elif failing:
        outcome, cause = codes.OUTCOME_FAILED, pick_cause(failing)
    else:
        outcome, cause = codes.OUTCOME_DEFERRED, pick_cause(live_codes)
    complete = outcome == codes.OUTCOME_COMPLETE
    return SweepVerdict(
        outcome=outcome,
        cause_code=cause,
        advance_checkpoint=complete,
        reset_failures=complete,
        arms_recovery_episode=outcome == codes.OUTCOME_DEFERRED and cause in PROVIDER_FAILURE_CODES,
        live_rows=live_rows,
        fence_rows=fence_rows,
    )
