"""The embedding lane's settings and inputs: an input's admission band and its generation.
Pure. Its other rules: ``rules/lane_evidence.py`` and ``rules/lane_rows.py``."""

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from neo_assets.core import codes

KB_VECTOR_EMBED_OVER_ADMISSION_BAND = codes.KB_VECTOR_EMBED_OVER_ADMISSION_BAND

CONTROL_TEXT = "neo embedding control: def ping(): return 'pong'"
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
        at_least_one = (
            "batch_size",
            "max_inflight",
            "strike_threshold",
            "circuit_threshold",
            "context_tokens",
            "call_ceiling_ms",
            "write_queue_depth",
        )
        for name in at_least_one:
            if getattr(self, name) < 1:
                raise ValueError(f"LaneSettings.{name} must be >= 1")
        if not 0 < self.admission_safety_factor <= 1:
            raise ValueError("LaneSettings.admission_safety_factor must be in (0, 1]")
        if self.chars_per_token <= 0:
            raise ValueError("LaneSettings.chars_per_token must be > 0")
        delays = (
            "recovery_initial_s",
            "recovery_max_s",
            "recovery_max_wait_s",
            "loading_max_wait_s",
        )
        if min(getattr(self, name) for name in delays) < 0:
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
