"""One repo's sweep, envelope to census, as a library call: ``sweep_stages`` yields each
stage's end (one module per stage in ``sweep/``), ``run_sweep`` drains them and returns
the ``SweepResult``. Every rule the stages apply lives in ``sweep/rules/``."""

import contextlib
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from neo_assets.config.settings import Settings
from neo_assets.core import codes
from neo_assets.embedding.discovery import discover_and_record, fit_provider, learn_and_record
from neo_assets.embedding.provider import EmbeddingProvider, close_provider
from neo_assets.embedding.rules.provider_kinds import UNREACHABLE_REFUSED, unreachable_message
from neo_assets.embedding.server_tokens import CountUnavailable
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.store.ledger import Ledger
from neo_assets.store.provider_limits import recorded_discovery
from neo_assets.sweep.census import census_step
from neo_assets.sweep.chunk import ChunkGeneration, chunk_step, plan_chunks
from neo_assets.sweep.context import RepoContext, check_parser
from neo_assets.sweep.embed import SweepAborted, embed_step
from neo_assets.sweep.embed_plan import EmbedContext
from neo_assets.sweep.envelope import EnvelopeResult, envelope_step
from neo_assets.sweep.failures import failure_recorded, record_deferred_before_lane
from neo_assets.sweep.lease import SweepLease, skipped_result
from neo_assets.sweep.rules.chunk_tally import PREVIEW_COLUMNS, PREVIEW_ROWS, ChunkTally
from neo_assets.sweep.rules.report import SweepReport
from neo_assets.sweep.rules.summary import LaneSummary, SweepCounts

# The four stages, in order: each is one asset of the sweep in the Dagster UI.
SWEEP_STAGES = ("repo_envelope", "chunk_generation", "kb_embeddings", "fence_census")

# (batches done, batches total, chunks embedded so far)
Progress = Callable[[int, int, int], None]


@dataclass(frozen=True)
class StageEnded:
    """A stage finished: what it produced, for whoever shows it."""

    stage: str
    envelope: EnvelopeResult
    # chunk_generation: the generation's tally (counts, kinds, a preview)
    tally: ChunkTally | None = None
    # kb_embeddings: the lane's summary (counts, strikes, errors, seconds, generation)
    summary: LaneSummary | None = None


@dataclass(frozen=True)
class StageSkipped:
    """The run holds no (or no longer the) sweep lease: this stage wrote nothing."""

    stage: str
    lease: Mapping[str, Any]


SweepEvent = StageEnded | StageSkipped


@dataclass(frozen=True)
class SweepResult:
    """The sweep's verdict as the census recorded it (``report``; its ``to_doc()`` is the
    contract's shape of one repo in ``neo-assets sweep --json``), plus what the run
    measured."""

    report: SweepReport
    # Seconds the embedding stage took (None: the stage did not run).
    embed_seconds: float | None = None
    errors: int = 0

    @property
    def outcome(self) -> str:
        return self.report.outcome

    @property
    def counts(self) -> SweepCounts:
        return self.report.counts or SweepCounts()

    def to_doc(self) -> dict[str, Any]:
        return self.report.to_doc()


@dataclass
class SweepInputs:
    """What one sweep works with: who (from the declaration), the settings, the ledger,
    the store (opened when first needed), the run's provider, and the run's identity."""

    ctx: RepoContext
    settings: Settings
    ledger: Ledger
    open_store: Callable[[], ChromaStore]
    provider: EmbeddingProvider
    run_id: str
    progress: Progress | None = None
    clock: Callable[[], float] = time.time


def sweep_stages(inputs: SweepInputs) -> Generator[SweepEvent, None, SweepResult]:
    """Run one repo's sweep under its lease; yield each stage's end; return its result. Without
    the lease nothing more is written (``skipped``). An upstream abort is recorded as the lane
    left it, then raised; the provider is closed on every way out."""
    ctx, cfg, book = inputs.ctx, inputs.settings, inputs.ledger
    with (
        SweepLease(book, ctx, inputs.run_id, cfg) as lease,
        contextlib.ExitStack() as stack,
    ):
        # Closed on every way out, even a generator closed at a yield (twice is a no-op).
        stack.callback(close_provider, inputs.provider)
        if not lease.held:
            return (yield from _skipped(ctx, lease.info, SWEEP_STAGES))
        mark = time.perf_counter()
        with failure_recorded(ctx, cfg, book, codes.PARSE_FAILED):
            check_parser(ctx)  # a missing grammar fails here, before anything is written
        with failure_recorded(ctx, cfg, book, codes.SOURCE_UNREADABLE):
            envelope = envelope_step(ctx, cfg, book, inputs.clock())
        # Seconds inside each stage: the sweep's own work, not its caller's event handling.
        envelope_s = time.perf_counter() - mark
        yield StageEnded("repo_envelope", envelope)

        if not lease.held:
            return (yield from _skipped(ctx, lease.info, SWEEP_STAGES[1:]))
        mark = time.perf_counter()
        # First contact, before anything is split: the provider's limit and tokenizer, kept
        # in the ledger (a change is a new generation); a provider that does not answer
        # leaves the record as it was, and the lane meets it.
        found, _ = discover_and_record(cfg, book, inputs.clock())
        fit_provider(inputs.provider, cfg, found)
        with failure_recorded(ctx, cfg, book, codes.PARSE_FAILED, envelope):
            plan = plan_chunks(ctx, cfg, book, envelope)
            try:
                chunks = chunk_step(ctx, cfg, book, envelope, inputs.clock(), plan=plan)
            except CountUnavailable as unavailable:
                return _deferred_before_lane(inputs, lease, envelope, unavailable)
        chunks_s = time.perf_counter() - mark
        code_index_s = chunks.index_s
        yield StageEnded("chunk_generation", envelope, tally=generation_tally(chunks))

        if not lease.held:
            return (yield from _skipped(ctx, lease.info, SWEEP_STAGES[2:]))
        started = time.monotonic()
        with failure_recorded(ctx, cfg, book, codes.KB_VECTOR_EMBED_UNCLASSIFIED, envelope):
            summary = _embed_stage(inputs, lease, envelope, chunks)
        del chunks  # the declared generation is in the ledger; the census needs no chunk
        embed_s = time.monotonic() - started
        summary = replace(summary, seconds=embed_s)
        if not lease.held:  # lost mid-way: the writes stopped; the new holder finishes
            return (yield from _skipped(ctx, lease.info, SWEEP_STAGES[2:]))
        yield StageEnded("kb_embeddings", envelope, summary=summary)

        mark = time.perf_counter()
        with failure_recorded(ctx, cfg, book, codes.STORE_FAILED, envelope):
            report = census_step(ctx, cfg, book, envelope, summary, inputs.clock())
        census_s = time.perf_counter() - mark
        timings = replace(
            report.timings,
            envelope_s=envelope_s,
            chunks_s=chunks_s,
            code_index_s=code_index_s,
            embed_s=embed_s,
            census_s=census_s,
            stages_s=envelope_s + chunks_s + embed_s + census_s,
        )
        report = replace(report, timings=timings, lease=lease.info)
    return SweepResult(report, embed_seconds=embed_s, errors=len(summary.errors))


def _deferred_before_lane(
    inputs: SweepInputs, lease: SweepLease, envelope: EnvelopeResult, unavailable: CountUnavailable
) -> SweepResult:
    """The split could not count (NEO_EMBEDDING_TOKENIZER=server): nothing of the
    generation was recorded; defer, as the lane would without its server."""
    ctx, cfg, book = inputs.ctx, inputs.settings, inputs.ledger
    code, message = unavailable.code, str(unavailable)
    if code == codes.KB_VECTOR_EMBED_CONNECTION_REFUSED:
        # Nothing listens where the provider was: named at once, like the lane.
        code = codes.KB_VECTOR_EMBED_PROVIDER_UNREACHABLE
        message = unreachable_message(
            cfg.embedding.provider,
            cfg.embedding.base_url,
            UNREACHABLE_REFUSED,
            cfg.embedding.unreachable_wait_s,
        )
    report = record_deferred_before_lane(ctx, cfg, book, envelope, code, message, inputs.clock())
    return SweepResult(replace(report, lease=lease.info), errors=1)


def _embed(
    inputs: SweepInputs, lease: SweepLease, envelope: EnvelopeResult, chunks: ChunkGeneration
) -> LaneSummary:
    return embed_step(
        inputs.ctx,
        inputs.settings,
        inputs.open_store(),
        inputs.ledger,
        envelope,
        chunks,
        EmbedContext(provider=inputs.provider, progress=inputs.progress, guard=lease.check),
    )


def _embed_stage(
    inputs: SweepInputs, lease: SweepLease, envelope: EnvelopeResult, chunks: ChunkGeneration
) -> LaneSummary:
    """The embed stage, and the resplit rounds after size refusals."""
    ctx, cfg, book = inputs.ctx, inputs.settings, inputs.ledger
    try:
        summary = _embed(inputs, lease, envelope, chunks)
    except SweepAborted as aborted:
        # Record the sweep as the lane left it (deferred, cause aborted), then end.
        census_step(ctx, cfg, book, envelope, aborted.summary, inputs.clock())
        raise aborted.interrupt from None
    return _resplit_refused(inputs, lease, envelope, summary)


# Rounds of split-smaller-and-send-again after size refusals, per sweep (bounded: each
# round's refusals either teach a tighter band or end it).
MAX_RESPLITS = 2


def _resplit_refused(
    inputs: SweepInputs, lease: SweepLease, envelope: EnvelopeResult, summary: LaneSummary
) -> LaneSummary:
    """Size refusals teach a tighter band where they can (``embedding/discovery.learn_and_record``);
    the repo is split again and the rest sent again, at most ``MAX_RESPLITS`` times. Runs
    inside the embedding stage, so the events stay one per stage."""
    ctx, cfg, book = inputs.ctx, inputs.settings, inputs.ledger
    notices: list[str] = []
    for _ in range(MAX_RESPLITS):
        if not lease.held:
            break
        notice = learn_and_record(cfg, book, summary.errors, inputs.clock())
        if notice is None:
            break
        notices.append(notice)
        found = recorded_discovery(
            book, cfg.embedding.provider, cfg.embedding.base_url, cfg.embedding.model
        )
        fit_provider(inputs.provider, cfg, found)
        plan = plan_chunks(ctx, cfg, book, envelope)
        chunks = chunk_step(ctx, cfg, book, envelope, inputs.clock(), plan=plan)
        summary = _embed(inputs, lease, envelope, chunks)
    if notices:
        summary = replace(summary, notices=(*notices, *summary.notices))
    return summary


def run_sweep(
    inputs: SweepInputs, on_event: Callable[[SweepEvent], None] | None = None
) -> SweepResult:
    """``sweep_stages`` run to its end: each event to ``on_event`` (when given)."""
    stages = sweep_stages(inputs)
    while True:
        try:
            event = next(stages)
        except StopIteration as done:
            return done.value
        if on_event is not None:
            on_event(event)


def _skipped(
    ctx: RepoContext, info: Mapping[str, Any], stages: tuple[str, ...]
) -> Generator[SweepEvent, None, SweepResult]:
    """What a run that does not (or no longer) hold the lease reports: each remaining
    stage says why it wrote nothing, and the result (the census stage's) is ``skipped``."""
    for stage in stages:
        if stage != "fence_census":
            yield StageSkipped(stage, dict(info))
    return SweepResult(skipped_result(ctx, info))


def generation_tally(generation: ChunkGeneration) -> ChunkTally:
    """The chunk stage's generation, tallied for the UI."""
    chunks = generation.chunks
    tally = ChunkTally(
        chunks=len(chunks),
        parsed_paths=generation.parsed_paths,
        reused_paths=generation.reused_paths,
        fallback_files=dict(generation.fallback_files),
    )
    tally.kinds.update(c.kind for c in chunks)
    tally.paths.update(c.source_path for c in chunks)
    tally.preview = [{k: getattr(c, k) for k in PREVIEW_COLUMNS} for c in chunks[:PREVIEW_ROWS]]
    return tally
