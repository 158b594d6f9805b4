"""The embedding lane's evidence rules: what a failure may prove and what the lane does with
it, decided in one place by the failure's class alone. Pure.
Design: docs/design/embedding.md#evidence"""

import math
import re
from typing import Literal

from neo_assets.core import codes
from neo_assets.embedding.rules.provider_kinds import (
    UNREACHABLE_REFUSED,
    UNREACHABLE_UNRESOLVED,
    UNREACHABLE_WRONG_PATH,
)

KB_VECTOR_EMBED_CALL_CEILING = codes.KB_VECTOR_EMBED_CALL_CEILING

StrikeKind = Literal["death", "timeout"]
STRIKE_DEATH: StrikeKind = "death"
STRIKE_TIMEOUT: StrikeKind = "timeout"

# The statuses at which a provider refusal is about the caller/provider, never the input.
NON_CONTENT_REFUSAL_STATUSES: frozenset[int] = frozenset(
    {401, 402, 403, 404, 405, 406, 407, 408, 409, 410, 421, 423, 425, 426, 428, 429, 451}
)
# Failures after which the lane waits for the provider to answer again before going on.
RECOVERY_WAIT_CODES: frozenset[str] = frozenset(
    {
        codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED,
        codes.KB_VECTOR_EMBED_CONNECTION_REFUSED,
    }
)
# Codes that never count toward the circuit, whoever sent the request: the provider is
# loading its model (a wait, bounded on its own), or named its cap on inputs per request
# (the lane shrinks its batches).
NEVER_COUNTED_CODES: frozenset[str] = frozenset(
    {codes.KB_VECTOR_EMBED_PROVIDER_LOADING, codes.KB_VECTOR_EMBED_BATCH_CAP}
)
# Codes that are the lane's own decision or a store problem: never a provider failure.
NOT_PROVIDER_FAILURE_CODES: frozenset[str] = NEVER_COUNTED_CODES | frozenset(
    {
        codes.KB_VECTOR_EMBED_ABORTED,
        codes.KB_VECTOR_EMBED_WRITE_ERROR,
        codes.KB_VECTOR_EMBED_YIELD,
        codes.KB_VECTOR_EMBED_CIRCUIT_OPEN,
    }
)


# ------------------------------------------------------------------ evidence classes
def is_content_class(code: str, status: int | None = None) -> bool:
    """True when the failure may be about the input itself."""
    if code == codes.KB_VECTOR_EMBED_CONTENT:
        return True
    if code == codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL:
        return status not in NON_CONTENT_REFUSAL_STATUSES
    return False


def content_evidence(code: str, status: int | None = None) -> str | None:
    """The evidence code a content-class failure stands for (``KB_VECTOR_EMBED_CONTENT``),
    ``None`` for any other failure."""
    return codes.KB_VECTOR_EMBED_CONTENT if is_content_class(code, status) else None


def is_size_refusal(code: str) -> bool:
    """True for a size refusal: geometry evidence about one input."""
    return code == codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE


def starts_isolation(code: str, status: int | None = None) -> bool:
    """True when a failed group is bisected to find its input: content class or size."""
    return is_content_class(code, status) or is_size_refusal(code)


def poison_forbidden(code: str | None) -> bool:
    """True unless ``code`` is the content code: the only evidence that may poison."""
    return code != codes.KB_VECTOR_EMBED_CONTENT


def strike_attributable(kind: StrikeKind | None, alone: bool) -> bool:
    """A death or timeout is evidence about ONE input only when it was the only request in
    flight to the provider, from any process (``embedding/provider_slots.py``), and its
    ceiling ran on the provider's own time (the provider drained first). Otherwise the
    input is deferred, never struck."""
    return kind is not None and alone


def strike_kind(code: str, single_input: bool) -> StrikeKind | None:
    """The strike a failure accrues against the input: ``death`` for a single input whose
    transport closed after the provider accepted it, ``timeout`` for a single input whose
    provider-side deadline fired, ``None`` otherwise (refused, multi-input, any other)."""
    if not single_input:
        return None
    if code == codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED:
        return STRIKE_DEATH
    if code == codes.KB_VECTOR_EMBED_TIMEOUT:
        return STRIKE_TIMEOUT
    return None


def should_graduate(strikes: int, threshold: int) -> bool:
    """True once ``strikes`` reach ``threshold`` (the input is then undeliverable)."""
    if threshold < 1:
        raise ValueError("threshold must be >= 1")
    return strikes >= threshold


def first_contact(code: str, status: int | None, connect_error: bool) -> str | None:
    """Before a provider has answered once this sweep, whether a failure says it is not
    there (``provider_requirements.UNREACHABLE_*``), None when it says nothing of that.
    A refused port may be a server still starting: the lane waits for it, bounded
    (``unreachable_wait_s``); a host that does not resolve and a 404 will not heal."""
    if status == 404:
        return UNREACHABLE_WRONG_PATH
    if code == codes.KB_VECTOR_EMBED_CONNECTION_REFUSED:
        return UNREACHABLE_REFUSED
    if connect_error and code == codes.KB_VECTOR_EMBED_UNCLASSIFIED:
        return UNREACHABLE_UNRESOLVED
    return None


def waits_for_recovery(code: str, status: int | None = None) -> bool:
    """True after a death, a refused connection or a non-content refusal (429, 401...):
    wait until the provider answers again before sending more."""
    if code in RECOVERY_WAIT_CODES or code == codes.KB_VECTOR_EMBED_PROVIDER_LOADING:
        return True
    return code == codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL and not is_content_class(code, status)


def is_provider_failure(code: str, status: int | None = None) -> bool:
    """True for a failure that counts toward the circuit: the provider misbehaved (not
    a content-class answer, not the lane's own decision, not a store error)."""
    return (
        not is_content_class(code, status)
        and not is_size_refusal(code)
        and code not in NOT_PROVIDER_FAILURE_CODES
    )


FailureRoute = Literal[
    "isolate", "suspects", "retry", "strike", "defer", "wait", "shrink", "serialize", "geometry"
]


# The smallest batch a lone deadline halves (64 -> 32 -> 16, then suspects one by one).
MIN_TIMEOUT_SHRINK = 32


def failure_route(
    code: str, status: int | None, inputs: int, *, concurrent: bool = False
) -> FailureRoute:
    """What the lane does with a failed dispatch of ``inputs`` inputs (``concurrent``: other
    requests of the lane were in flight). The routes: docs/design/embedding.md#evidence"""
    if inputs < 1:
        raise ValueError("inputs must be >= 1")
    if code == codes.KB_VECTOR_EMBED_PROVIDER_LOADING:
        return "wait"
    if code == codes.KB_VECTOR_EMBED_BATCH_CAP:
        return "shrink" if inputs > 1 else "defer"
    if is_size_refusal(code):
        return "isolate" if inputs > 1 else "geometry"
    if code == codes.KB_VECTOR_EMBED_TIMEOUT and inputs > 1:
        if concurrent:
            return "serialize"
        if inputs >= MIN_TIMEOUT_SHRINK:
            return "shrink"
    if is_content_class(code, status):
        return "isolate"
    if code in (codes.KB_VECTOR_EMBED_CONNECTION_REFUSED, codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL):
        return "retry"
    if inputs > 1:
        return "suspects"
    if strike_kind(code, True) is not None:
        return "strike"
    return "defer"


# A refusal naming the provider's cap on inputs per request: TEI "batch size 64 > maximum
# allowed batch size 32", vLLM/others "maximum batch size is 32", "too many inputs (max 32)".
_BATCH_CAP = re.compile(
    r"batch size (?:of )?\d+ (?:>|exceeds|is greater than) (?:the )?(?:maximum|max)"
    r"(?: allowed)?(?: client)? batch size (?:of |is )?(?P<a>\d+)"
    r"|(?:maximum|max)(?: allowed)?(?: client)? batch size (?:is |of |: ?)?(?P<b>\d+)"
    r"|too many inputs[^0-9]{0,20}(?P<c>\d+)",
    re.IGNORECASE,
)


def batch_cap_from_message(message: str) -> int | None:
    """The provider's cap on inputs per request when its refusal names one, else None."""
    found = _BATCH_CAP.search(message or "")
    if found is None:
        return None
    cap = int(next(v for v in found.groups() if v is not None))
    return cap if cap >= 1 else None


def cancellation_code(cause: str | None) -> str:
    """The taxonomy code of a cancelled scope: an upstream abort stays ABORTED, every
    deadline (provider, probe, sweep, call ceiling) is TIMEOUT; the cause itself travels
    in ``details.causeCode``."""
    return (
        codes.KB_VECTOR_EMBED_ABORTED if cause == codes.ABORT_ERR else codes.KB_VECTOR_EMBED_TIMEOUT
    )


def isolation_request_bound(n: int) -> int:
    """Most extra requests isolating ONE bad input among ``n`` may cost:
    ``2*ceil(log2 n) + 2`` (two per bisection level, a control before the walk and one
    before the attribution)."""
    if n < 1:
        raise ValueError("n must be >= 1")
    return 2 * math.ceil(math.log2(n)) + 2


def recovery_delays(
    initial_s: float, max_s: float, max_wait_s: float, max_probes: int = 32
) -> list[float]:
    """The sleeps between recovery probes: doubling from ``initial_s``, capped at
    ``max_s``, stopping before their sum would exceed ``max_wait_s`` (and after
    ``max_probes`` sleeps, so a zero delay still makes a bounded wait)."""
    delays: list[float] = []
    total = 0.0
    delay = max(0.0, initial_s)
    while len(delays) < max_probes:
        step = min(delay, max(0.0, max_s))
        if total + step > max_wait_s:
            break
        delays.append(step)
        total += step
        delay *= 2
    return delays
