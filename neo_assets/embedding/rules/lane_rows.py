"""The embedding lane's receipts and rows: what a fence or a strike records, and the summary's
rows, shaped for the fence gate (``sweep/rules/fence_gate.py``). Pure."""

from collections.abc import Iterable, Mapping
from typing import Any

from neo_assets.core import codes
from neo_assets.core.ids.chunk_ids import is_chunk_id
from neo_assets.embedding.rules.lane import (
    KB_VECTOR_EMBED_OVER_ADMISSION_BAND,
    FenceRecord,
    LaneSettings,
    admission_band,
    estimate_tokens,
)
from neo_assets.embedding.rules.lane_evidence import poison_forbidden

FENCE_CODE_BY_DISPOSITION: dict[str, str] = {
    codes.DISPOSITION_PROVEN_CONTENT_POISON: codes.KB_VECTOR_EMBED_PROVEN_CONTENT_POISON,
    codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY: codes.KB_VECTOR_EMBED_UNDELIVERABLE_AT_GEOMETRY,
    codes.DISPOSITION_SECRET: codes.KB_CHUNK_SECRET,
}
MAX_ROW_CHUNK_IDS = 50


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
        "chunkIds": ids[:MAX_ROW_CHUNK_IDS],
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
    """A fence row for a stored fence; ``None`` for a record that is not a coherent fence, whose
    chunk is then offered again and the record rewritten from fresh evidence."""
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
