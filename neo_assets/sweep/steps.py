"""The stages of one repo sweep, in order, as plain functions over the store, ledger and provider.

Each stage is its own module: ``envelope`` (revision and file list), ``chunk`` (parse, fit,
record), ``embed`` (vectors: ``embed_plan`` decides what is copied or sent, ``embed_writes``
writes the rows), ``census`` (census, fences, switch); ``failures`` records a sweep that did
not finish. The Dagster assets and ``run.py`` call them in this order; benchmarks and tests
import them from here. Every rule they apply lives in ``neo_assets.core``.
"""

from neo_assets.sweep.census import census_step, with_locations
from neo_assets.sweep.chunk import (
    ChunkGeneration,
    ChunkPlan,
    RecordedGeneration,
    chunk_step,
    chunking_identity,
    fallback_counts,
    fill_missing_content,
    fit_to_band,
    index_step,
    parse_identity,
    parsed_chunks,
    parsed_files,
    plan_chunks,
    record_parsed,
    recorded_generation,
)
from neo_assets.sweep.context import (
    COPY_BATCH,
    ParserUnavailable,
    RepoContext,
    check_parser,
    lane_settings,
)
from neo_assets.sweep.embed import SweepAborted, embed_step, run_lane_abortably
from neo_assets.sweep.embed_plan import (
    EmbedContext,
    EmbedPlan,
    embeddable_by_id,
    plan_embedding,
    stale_rows,
)
from neo_assets.sweep.embed_writes import batch_writer, write_copies
from neo_assets.sweep.envelope import EnvelopeResult, envelope_step, previous_envelope
from neo_assets.sweep.failures import (
    UnfinishedAttempt,
    backoff_due_at,
    failure_recorded,
    record_deferred_before_lane,
    record_failed_sweep,
    record_unfinished_attempt,
)
from neo_assets.sweep.rules.scheduling import RetryPolicy

__all__ = [
    "COPY_BATCH",
    "ChunkGeneration",
    "ChunkPlan",
    "EmbedContext",
    "EmbedPlan",
    "EnvelopeResult",
    "ParserUnavailable",
    "RecordedGeneration",
    "RepoContext",
    "RetryPolicy",
    "SweepAborted",
    "UnfinishedAttempt",
    "backoff_due_at",
    "batch_writer",
    "census_step",
    "check_parser",
    "chunk_step",
    "chunking_identity",
    "embed_step",
    "embeddable_by_id",
    "envelope_step",
    "failure_recorded",
    "fallback_counts",
    "fill_missing_content",
    "fit_to_band",
    "index_step",
    "lane_settings",
    "parse_identity",
    "parsed_chunks",
    "parsed_files",
    "plan_chunks",
    "plan_embedding",
    "previous_envelope",
    "record_deferred_before_lane",
    "record_failed_sweep",
    "record_parsed",
    "record_unfinished_attempt",
    "recorded_generation",
    "run_lane_abortably",
    "stale_rows",
    "with_locations",
    "write_copies",
]
