"""The embedding lane's rules: admission, generation, evidence classes, strikes, rows.

Pure functions over plain data (no clock, no I/O). The lane (``embedding/lane.py``) asks
these rules every question whose answer is a verdict, so that what may be concluded from a
failure is decided in one place, by the failure's class alone.

Evidence classes (the decisions this module owns):

- **Content class** — a failure that may be *about the input*: ``KB_VECTOR_EMBED_CONTENT``,
  and ``KB_VECTOR_EMBED_PROVIDER_REFUSAL`` unless its HTTP status says the refusal is about
  the caller or the provider rather than the input (401/403/404/429... in
  ``NON_CONTENT_REFUSAL_STATUSES``). So a 400 or 422 is content class; a 401 or a 429 is
  not (it is retried after the provider answers again, and counts toward the circuit).
  Only a content-class failure of ONE input dispatched alone, right after a success (the
  paired control), of an input that had already failed (in the group being isolated, or
  alone just before that control), becomes content evidence: ``content_evidence`` maps it
  to ``KB_VECTOR_EMBED_CONTENT``.
- **Size refusal** — ``KB_VECTOR_EMBED_INPUT_TOO_LARGE`` (the provider said the input is
  over its limit: llama.cpp's "input is too large" 500, Ollama's context length, TEI's
  413, vLLM/OpenAI "maximum context length", the in-process model's own check). It is
  geometry evidence, never content: a group failing with it is bisected like a content
  failure (to find the input), and the input alone is fenced ``undeliverable-at-geometry``
  with the limit in its receipt (``size_refusal_receipt``), without a paired control —
  its size explains the refusal. The sweep has split every chunk to fit the band before
  (``sources/rules/fit_parts.py``), so this fences only what the band misjudged; the band
  is in the generation digest, so fixing the geometry re-offers it.
- **Poison** — ``poison_forbidden(code)`` is False for ``KB_VECTOR_EMBED_CONTENT`` only.
  Every other code (timeout, abort, circuit open, yield, connection refused, transport
  closed, write error, invalid vectors, unclassified, a raw provider refusal, an unknown
  code) can never produce a ``proven-content-poison`` fence. The lane guards every
  attribution site with it.
- **Strikes** — deliverability evidence, never content evidence. A single input whose
  dispatch ends in ``TRANSPORT_CLOSED`` accrued a ``death`` strike (the provider accepted
  the connection, so it was alive, and this input was the only one in flight); a single
  input whose provider-side deadline fired accrued a ``timeout`` strike. Connection
  refused proves only that nothing was listening: no strike, no fence. A multi-input
  failure proves nothing about any one member: its members become suspects.
- **Graduation** — at ``strike_threshold`` strikes (any mix of kinds, counted per
  embedding generation across sweeps; the lane takes at most one per input per sweep, so
  a blip cannot graduate an input within one sweep) the input is fenced
  ``undeliverable-at-geometry``, directly on the failure that reaches the threshold (so
  it is reachable when the input is the last work). Reversible: the band and call
  ceiling are in the generation digest, so repairing the geometry re-offers every
  fenced chunk.

Rows (the sweep summary contract, ``errors`` list): ``error_row`` for live work (a failure
that left chunks deferred) and ``fence_row`` for one fenced chunk, shaped so the fence gate
(``sweep/rules/fence_gate.py``) recognises it: ``code == details.reasonCode`` is the fence code,
``details.disposition`` is the family, ``details.chunkId`` the chunk.
"""

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from neo_assets.core import codes
from neo_assets.core.ids.chunk_ids import is_chunk_id
from neo_assets.embedding.rules.provider_kinds import (
    UNREACHABLE_REFUSED,
    UNREACHABLE_UNRESOLVED,
    UNREACHABLE_WRONG_PATH,
)

KB_VECTOR_EMBED_CALL_CEILING = codes.KB_VECTOR_EMBED_CALL_CEILING
KB_VECTOR_EMBED_OVER_ADMISSION_BAND = codes.KB_VECTOR_EMBED_OVER_ADMISSION_BAND

StrikeKind = Literal["death", "timeout"]
STRIKE_DEATH: StrikeKind = "death"
STRIKE_TIMEOUT: StrikeKind = "timeout"

# The statuses at which a provider refusal is about the caller/provider, never the input.
NON_CONTENT_REFUSAL_STATUSES: frozenset[int] = frozenset(
    {401, 402, 403, 404, 405, 406, 407, 408, 409, 410, 421, 423, 425, 426, 428, 429, 451}
)
CONTENT_CLASS_CODES: frozenset[str] = frozenset(
    {codes.KB_VECTOR_EMBED_CONTENT, codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL}
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

FENCE_CODE_BY_DISPOSITION: dict[str, str] = {
    codes.DISPOSITION_PROVEN_CONTENT_POISON: codes.KB_VECTOR_EMBED_PROVEN_CONTENT_POISON,
    codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY: codes.KB_VECTOR_EMBED_UNDELIVERABLE_AT_GEOMETRY,
    codes.DISPOSITION_SECRET: codes.KB_CHUNK_SECRET,
}
CONTROL_TEXT = "neo embedding control: def ping(): return 'pong'"
MAX_ROW_CHUNK_IDS = 50
GENERATION_DIGEST_CHARS = 16


@dataclass(frozen=True)
class LaneSettings:
    """Every tunable of the embedding lane (one typed leaf each in ``config/settings.py``)."""

    batch_size: int = 64
    max_inflight: int = 2  # concurrent provider requests in the happy path
    strike_threshold: int = 2
    circuit_threshold: int = 5  # consecutive provider-wide failures that open the circuit
    recovery_initial_s: float = 0.5
    recovery_max_s: float = 30.0
    recovery_max_wait_s: float = 120.0
    # How long a provider that says it is loading its model (or whose port is closed before
    # it ever answered, as llama-cpp-python's while it starts) is waited for.
    loading_max_wait_s: float = 300.0
    # How long a port that refuses before the provider ever answered is waited for (a
    # server starting) before the sweep fails naming the provider as not there.
    unreachable_wait_s: float = 15.0
    # Take max_inflight from the server's free slots where it reports them (/props, /slots).
    inflight_from_server: bool = False
    context_tokens: int = 8192  # the provider's slot, in the unit the engine counts
    admission_safety_factor: float = 0.9
    chars_per_token: float = 3.0  # conservative for code: over-estimates tokens
    call_ceiling_ms: int = 60_000  # the lane's deadline for one provider request
    write_queue_depth: int = 2  # finished batches waiting for the store
    control_text: str = CONTROL_TEXT

    def __post_init__(self) -> None:
        for name in ("batch_size", "max_inflight", "strike_threshold", "circuit_threshold"):
            if getattr(self, name) < 1:
                raise ValueError(f"LaneSettings.{name} must be >= 1")
        if self.context_tokens < 1:
            raise ValueError("LaneSettings.context_tokens must be >= 1")
        if not 0 < self.admission_safety_factor <= 1:
            raise ValueError("LaneSettings.admission_safety_factor must be in (0, 1]")
        if self.chars_per_token <= 0:
            raise ValueError("LaneSettings.chars_per_token must be > 0")
        if self.call_ceiling_ms < 1:
            raise ValueError("LaneSettings.call_ceiling_ms must be >= 1")
        if self.write_queue_depth < 1:
            raise ValueError("LaneSettings.write_queue_depth must be >= 1")
        if (
            min(
                self.recovery_initial_s,
                self.recovery_max_s,
                self.recovery_max_wait_s,
                self.loading_max_wait_s,
            )
            < 0
        ):
            raise ValueError("LaneSettings recovery delays must be >= 0")


@dataclass(frozen=True)
class LaneItem:
    """One chunk the collection lacks: its id and the text to embed (``tokens``: its
    count by the model's own tokenizer, when the sweep counted it; else estimated)."""

    chunk_id: str
    text: str
    tokens: int | None = None


@dataclass(frozen=True)
class FenceRecord:
    """A durable fence at one generation, as the fence book stores it."""

    chunk_id: str
    disposition: str
    reason_code: str
    receipt: Mapping[str, Any] = field(default_factory=dict)
    observed_at: float | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "FenceRecord":
        """From a ledger row (``chunk_id``, ``disposition``, ``reason_code``, ``receipt``,
        ``observed_at``); an unreadable receipt reads as empty, never as evidence."""
        receipt = row.get("receipt")
        return cls(
            chunk_id=str(row["chunk_id"]),
            disposition=str(row["disposition"]),
            reason_code=str(row["reason_code"]),
            receipt=receipt if isinstance(receipt, Mapping) else {},
            observed_at=row.get("observed_at"),
        )


@dataclass(frozen=True)
class StrikeRecord:
    """Strikes one input has accrued at one generation (``kind`` of the latest strike)."""

    chunk_id: str
    kind: str
    count: int
    receipt: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "StrikeRecord":
        """From a ledger row (``chunk_id``, ``kind``, ``count``, ``receipt``)."""
        receipt = row.get("receipt")
        return cls(
            chunk_id=str(row["chunk_id"]),
            kind=str(row["kind"]),
            count=int(row["count"]),
            receipt=receipt if isinstance(receipt, Mapping) else {},
        )


# ------------------------------------------------------------------ admission, generation
def estimate_tokens(text: str, chars_per_token: float) -> int:
    """Tokens an input is assumed to cost: ``ceil(chars / chars_per_token)``."""
    if chars_per_token <= 0:
        raise ValueError("chars_per_token must be > 0")
    return math.ceil(len(text) / chars_per_token)


def admission_band(settings: LaneSettings) -> int:
    """The largest token estimate admitted: the provider slot times the safety factor."""
    return max(1, math.floor(settings.context_tokens * settings.admission_safety_factor))


def admitted(text: str, settings: LaneSettings, tokens: int | None = None) -> bool:
    """True when the input may be dispatched at all: its count (``tokens``, the model's
    own, when known) or else its estimate fits the band."""
    cost = tokens if tokens is not None else estimate_tokens(text, settings.chars_per_token)
    return cost <= admission_band(settings)


def embedding_generation(
    provider_name: str,
    model: str,
    dimensions: int,
    band_tokens: int,
    call_ceiling_ms: int,
    input_format: str,
) -> str:
    """A short hex digest of the geometry and of the input format (what text is sent for
    a chunk: neo_assets/embedding/rules/input.py); fences and strikes belong to one generation, so
    changing any of these re-offers every fenced chunk, and rows stamped with another
    generation are embedded again."""
    payload = json.dumps(
        {
            "provider": provider_name,
            "model": model,
            "dimensions": int(dimensions),
            "bandTokens": int(band_tokens),
            "callCeilingMs": int(call_ceiling_ms),
            "inputFormat": str(input_format),
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:GENERATION_DIGEST_CHARS]


def plan_batches(count: int, batch_size: int) -> list[tuple[int, int]]:
    """``[start, end)`` slices of ``count`` inputs in batches of at most ``batch_size``."""
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    return [(start, min(start + batch_size, count)) for start in range(0, count, batch_size)]


# ------------------------------------------------------------------ evidence classes
def is_content_class(code: str, status: int | None = None) -> bool:
    """True when the failure may be about the input itself (module docstring)."""
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
    """True for a size refusal: geometry evidence about one input (module docstring)."""
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
    """What the lane does with a failed dispatch of ``inputs`` inputs:

    - ``wait``: the provider is loading its model — the same inputs go again once it
      answers; no count toward the circuit.
    - ``shrink``: the provider named its cap on inputs per request — the batch (and every
      later one) is cut to the cap; or a deadline of a batch of at least
      ``MIN_TIMEOUT_SHRINK`` inputs with nothing else in flight (too much work per request
      for the server at this moment) — halved; nothing was learned about any input. A
      smaller batch past its deadline alone makes its members suspects (a hung server is
      found after two halvings, not six), and a single input past its deadline strikes.
    - ``serialize``: a multi-input deadline while other requests of the lane were in
      flight (``concurrent``): its ceiling may have run while the server worked on them,
      so the lane drops to one request at a time and sends the batch again.

    - ``isolate``: content class — bisect with a paired control (a single input: control,
      then the input again); a size refusal of several inputs — bisect to find them.
    - ``geometry``: a size refusal of ONE input — fenced undeliverable-at-geometry.
    - ``retry``: connection refused or a non-content refusal (401/429...) — nothing was
      learned about the inputs; re-dispatch the same inputs once the provider answers.
    - ``suspects``: any other multi-input failure — members are re-dispatched one by one.
    - ``strike``: a single input whose transport closed or whose deadline fired.
    - ``defer``: any other single-input failure — the input stays offerable, next sweep.
    """
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


# ------------------------------------------------------------------ receipts and rows
def size_of(text: str, chars_per_token: float) -> dict[str, int]:
    """An input's size as receipts record it (never the text itself)."""
    return {"chars": len(text), "estimateTokens": estimate_tokens(text, chars_per_token)}


def size_refusal_receipt(
    *,
    code: str,
    status: int | None,
    operation_label: str,
    detail: str,
    provider_limit_tokens: int | None,
    input_tokens: int | None,
    band: Mapping[str, Any],
    suspect_size: Mapping[str, int],
) -> dict[str, Any]:
    """What an undeliverable-at-geometry fence from a size refusal records: the limit the
    provider named (when it named one), the band in force, the input's size, the answer."""
    return {
        "failureCode": code,
        "status": status,
        "operationLabel": operation_label,
        "providerMessage": detail,
        "providerLimitTokens": provider_limit_tokens,
        "inputTokens": input_tokens,
        "band": dict(band),
        "suspect": dict(suspect_size),
        "sizeRefusal": True,
    }


def admission_receipt(
    text: str, settings: LaneSettings, tokens: int | None = None
) -> dict[str, Any]:
    return {
        "estimateTokens": estimate_tokens(text, settings.chars_per_token),
        "countedTokens": tokens,
        "bandTokens": admission_band(settings),
        "chars": len(text),
        "charsPerToken": settings.chars_per_token,
        "evidenceCode": KB_VECTOR_EMBED_OVER_ADMISSION_BAND,
    }


def strike_receipt(
    *,
    kind: str,
    count: int,
    threshold: int,
    code: str,
    suspect_size: Mapping[str, int],
    operation_label: str,
    observed_at: float,
    previous: Mapping[str, Any] | None = None,
    cause_code: str | None = None,
) -> dict[str, Any]:
    """What one strike records; keeps the kinds and the recovery sizes of earlier strikes
    so a graduation receipt can name the input whose success showed the provider healthy."""
    prior = dict(previous or {})
    kinds = list(prior.get("kinds", [])) if isinstance(prior.get("kinds"), list) else []
    receipt: dict[str, Any] = {
        "kind": kind,
        "kinds": [*kinds, kind],
        "strikes": count,
        "threshold": threshold,
        "evidenceCode": code,
        "suspect": dict(suspect_size),
        "operationLabel": operation_label,
        "observedAt": observed_at,
        "recoveredBy": prior.get("recoveredBy"),
    }
    if cause_code is not None:
        receipt["causeCode"] = cause_code
    return receipt


def with_recovery(receipt: Mapping[str, Any], recovered_by: Mapping[str, Any]) -> dict[str, Any]:
    """The strike receipt once a later success showed the provider healthy again."""
    return {**receipt, "recoveredBy": dict(recovered_by)}


def graduation_receipt(strike: Mapping[str, Any], threshold: int) -> dict[str, Any]:
    """An undeliverable-at-geometry receipt from the strike receipt that reached it."""
    return {
        "strikeKind": strike.get("kind"),
        "strikeKinds": strike.get("kinds"),
        "strikes": strike.get("strikes"),
        "threshold": threshold,
        "suspect": strike.get("suspect"),
        "recoveredBy": strike.get("recoveredBy"),
        "evidenceCode": strike.get("evidenceCode"),
    }


def bounded_ids(chunk_ids: Iterable[str], cap: int = MAX_ROW_CHUNK_IDS) -> list[str]:
    ids = list(chunk_ids)
    return ids[:cap]


def error_row(
    code: str,
    message: str,
    chunk_ids: Iterable[str],
    operation_label: str,
    cause_code: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One live row: a failure that left ``chunk_ids`` deferred (ids bounded, count not)."""
    ids = list(chunk_ids)
    details: dict[str, Any] = {
        "chunkIds": bounded_ids(ids),
        "chunkCount": len(ids),
        "operationLabel": operation_label,
    }
    if cause_code is not None:
        details["causeCode"] = cause_code
    details.update(extra)
    return {"code": code, "message": message, "details": details}


def fence_row(
    chunk_id: str,
    disposition: str,
    evidence_code: str | None,
    receipt: Mapping[str, Any],
    observed_at: float | None,
    *,
    recorded_this_sweep: bool,
) -> dict[str, Any]:
    """One fence row the fence gate reads as a durable fence of ``disposition``."""
    code = FENCE_CODE_BY_DISPOSITION[disposition]
    return {
        "code": code,
        "message": f"chunk fenced {disposition}",
        "details": {
            "chunkId": chunk_id,
            "reasonCode": code,
            "disposition": disposition,
            "observedAt": observed_at,
            "evidenceCode": evidence_code,
            "recordedThisSweep": recorded_this_sweep,
            "receipt": dict(receipt),
        },
    }


def fence_row_from_record(
    record: FenceRecord, *, recorded_this_sweep: bool
) -> dict[str, Any] | None:
    """A fence row for a stored fence; ``None`` for a record that is not a coherent fence
    (a disposition outside the closed vocabulary, a reason code that is not its
    disposition's code, a malformed chunk id, or a poison verdict whose recorded evidence
    is not content). Such a record must not read as a fence: its chunk is offered again
    and the record rewritten from fresh evidence."""
    code = FENCE_CODE_BY_DISPOSITION.get(record.disposition)
    if code is None or record.reason_code != code or not is_chunk_id(record.chunk_id):
        return None
    evidence = record.receipt.get("evidenceCode")
    if (
        record.disposition == codes.DISPOSITION_PROVEN_CONTENT_POISON
        and isinstance(evidence, str)
        and poison_forbidden(evidence)
    ):
        return None
    return fence_row(
        record.chunk_id,
        record.disposition,
        evidence if isinstance(evidence, str) else None,
        record.receipt,
        record.observed_at,
        recorded_this_sweep=recorded_this_sweep,
    )


def strike_row(chunk_id: str, kind: str, strikes: int, threshold: int) -> dict[str, Any]:
    return {"chunkId": chunk_id, "kind": kind, "strikes": strikes, "threshold": threshold}
