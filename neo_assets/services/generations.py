"""Embedding generations as the services see them: the digest of the settings or of a
built provider (one function, ``core/generations.generation_digest``)."""

from neo_assets.config.settings import Settings
from neo_assets.core.embedding import LaneSettings, admission_band
from neo_assets.core.embedding_input import embedding_input_format
from neo_assets.core.generations import generation_digest


def lane_geometry(settings: Settings) -> LaneSettings:
    """The lane limits that are part of the generation (band and call ceiling)."""
    e = settings.embedding
    return LaneSettings(
        context_tokens=e.context_tokens,
        admission_safety_factor=e.admission_safety,
        chars_per_token=e.chars_per_token,
        call_ceiling_ms=e.call_ceiling_ms,
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
