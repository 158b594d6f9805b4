"""Embedding generations as the services see them: the digest of the settings or of a
built provider (one function, ``generations/rules.generation_digest``); each generation's
collection; which generation serves a tenant's queries and which provider embeds them
(``serving_generation``, ``query_provider``: the query path's one rule)."""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from neo_assets.config.settings import Settings
from neo_assets.embedding.provider import EmbeddingProvider
from neo_assets.embedding.rules.input import embedding_input_format
from neo_assets.embedding.rules.lane import LaneSettings, admission_band
from neo_assets.generations.records import (
    generation_records,
    register_generation,
    repo_generations,
)
from neo_assets.generations.rules import (
    GenerationRecord,
    Serving,
    collection_name_for,
    generation_digest,
    resolved_collection,
    tenant_serving,
)
from neo_assets.quality.gate import GateVerdict, gate
from neo_assets.quality.records import decision, latest_scores
from neo_assets.store.ledger import Ledger

if TYPE_CHECKING:
    from neo_assets.store.chroma_store import ChromaStore


def lane_geometry(settings: Settings) -> LaneSettings:
    """The lane limits that are part of the generation: the band in force
    (``embedding/band.band_for``: the in-process model's own window, else the configured
    one, never the network) and the call ceiling."""
    from neo_assets.embedding.band import band_for  # noqa: PLC0415 - providers load lazily

    band = band_for(settings)
    return LaneSettings(
        context_tokens=band.limit_tokens,
        admission_safety_factor=band.safety,
        chars_per_token=band.chars_per_token,
        call_ceiling_ms=settings.embedding.call_ceiling_ms,
    )


def generation_for(settings: Settings, kind: str, model: str | None, dimensions: int) -> str:
    """The generation of provider ``kind``/``model``/``dimensions`` under these settings'
    band, call ceiling and the input format in force."""
    lane = lane_geometry(settings)
    return generation_digest(
        kind,
        model,
        dimensions,
        admission_band(lane),
        lane.call_ceiling_ms,
        embedding_input_format(),
    )


def configured_generation(settings: Settings) -> str:
    """The generation the settings declare (no provider built): equal to the digest of the
    provider built from the same settings, for every accepted spelling of its model."""
    e = settings.embedding
    return generation_for(settings, e.provider, e.model, e.dimensions)


# ------------------------------------------------------------------ generations side by side
def collection_of(settings: Settings, records: dict[str, GenerationRecord], generation: str) -> str:
    """The collection name holding ``generation``'s rows (legacy: the prefix itself). A
    generation not recorded yet is where its first sweep will put it: the prefix itself
    while no generation is recorded (the knowledge base's first), else its own name."""
    prefix = settings.store.collection_name
    if generation not in records and not records:
        return prefix
    return resolved_collection(prefix, records.get(generation), generation)


def generation_store(
    settings: Settings, ledger: Ledger, store: "ChromaStore", generation: str
) -> "ChromaStore":
    """``generation``'s collection, on ``store``'s client (closed with it)."""
    return store.sibling(collection_of(settings, generation_records(ledger), generation))


def register_provider_generation(
    settings: Settings, ledger: Ledger, provider: EmbeddingProvider, now: float
) -> GenerationRecord:
    """Record the generation ``provider`` embeds at, before a row of it is written: its
    collection (its own, or the legacy one it was adopted in) and what rebuilds the
    provider for queries (kind, model, base URL, dimensions; never the key)."""
    generation = generation_for(settings, provider.name, provider.model, provider.dimensions)
    return register_generation(
        ledger,
        generation,
        collection_name=collection_name_for(settings.store.collection_name, generation),
        provider=provider.name,
        model=provider.model,
        base_url=settings.embedding.base_url,
        dimensions=provider.dimensions,
        now=now,
    )


@dataclass(frozen=True)
class ServingChoice:
    """What serves one tenant's queries: the rule's answer plus the records it needs, and
    the quality gate's verdict when the configured generation waits on it."""

    serving: Serving
    records: dict[str, GenerationRecord]
    configured: str
    gate: GateVerdict | None = None

    @property
    def generation(self) -> str | None:
        return self.serving.generation


def serving_generation(
    settings: Settings, ledger: Ledger, tenant_id: str, repo_slugs: Iterable[str]
) -> ServingChoice:
    """THE rule for queries: which generation serves ``tenant_id`` (over its declared
    ``repo_slugs``), in which collection, and which provider embeds the query
    (``query_provider``); fallbacks in order when that provider cannot embed."""
    records = generation_records(ledger)
    configured = configured_generation(settings)
    slugs = list(repo_slugs)
    states = repo_generations(ledger, tenant_id)
    reclaimed = [g for g, r in records.items() if r.reclaimed]
    serving = tenant_serving(configured, slugs, states, reclaimed=reclaimed)
    if not (serving.complete and serving.generation == configured):
        return ServingChoice(serving=serving, records=records, configured=configured)
    # The configured generation is complete: it takes over from another complete one
    # only past the quality gate (core of the rule: quality/gate.py).
    held = tenant_serving(configured, slugs, states, reclaimed=reclaimed, held=[configured])
    if held.generation == configured:  # nothing else is complete: nothing to compare
        return ServingChoice(serving=serving, records=records, configured=configured)
    verdict = quality_gate(settings, ledger, tenant_id, slugs, configured, held.generation)
    chosen = serving if verdict.allowed else held
    return ServingChoice(serving=chosen, records=records, configured=configured, gate=verdict)


def quality_gate(
    settings: Settings,
    ledger: Ledger,
    tenant_id: str,
    repo_slugs: list[str],
    candidate: str,
    serving: str,
) -> GateVerdict:
    """The gate's verdict on ``candidate`` replacing ``serving`` for ``tenant_id``, from
    the ledger's latest self-evaluations and the operators' decisions."""
    return gate(
        candidate,
        serving,
        repo_slugs,
        latest_scores(ledger, tenant_id, repo_slugs) if settings.quality.gate else {},
        settings.quality.margin,
        enabled=settings.quality.gate,
        overridden=decision(ledger, tenant_id, candidate) is not None,
    )


class GenerationUnavailable(RuntimeError):
    """A generation's provider cannot be rebuilt here (not recorded, or misconfigured)."""


def query_provider(
    settings: Settings, generation: str, record: GenerationRecord | None
) -> EmbeddingProvider:
    """A provider that embeds at ``generation``: the configured one when it is that
    generation, else one rebuilt from the ledger's record, with the key from the settings
    (NEO_EMBEDDING_API_KEY) — a record holds no key."""
    from neo_assets.embedding.factory import build_provider  # noqa: PLC0415

    if generation == configured_generation(settings):
        from neo_assets.services.handles import build_provider as configured  # noqa: PLC0415

        return configured(settings)
    if record is None or not record.provider or not record.dimensions:
        raise GenerationUnavailable(
            f"embedding generation {generation} has no recorded provider (a knowledge base "
            "made before generations were recorded): set NEO_EMBEDDING_* back to the "
            "provider it was built with, or let the configured generation finish building"
        )
    try:
        return build_provider(
            record.provider,
            base_url=record.base_url,
            model=record.model,
            api_key=settings.embedding.api_key,
            dimensions=int(record.dimensions),
            request_timeout_ms=settings.embedding.request_timeout_ms,
        )
    except (ValueError, ImportError) as exc:
        raise GenerationUnavailable(
            f"embedding generation {generation} ({record.provider} {record.model}) cannot be "
            f"rebuilt for queries: {exc}"
        ) from None
