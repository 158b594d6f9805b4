"""The four steps of one repo sweep, as plain functions over the store, ledger and provider.

The Dagster assets call these (and add metadata); benchmarks and tests can call them
without Dagster. Every rule they apply lives in ``neo_assets.core``.
"""

import asyncio
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np

from neo_assets.code_tools.index_store import ParsedFile, build_index, reclaim_indexes
from neo_assets.code_tools.rules import Unit
from neo_assets.config.settings import Settings
from neo_assets.core import codes
from neo_assets.core.ids.chunk_ids import part_chunk_id
from neo_assets.core.ids.config_digest import declaration_digest, repo_declaration_digest
from neo_assets.core.ids.stamps import INPUT_DIGEST_KEY, chunk_metadata, row_stamps
from neo_assets.core.sweep.censuses import build_censuses, decode_census, encode_census
from neo_assets.core.sweep.outcomes import classify_sweep_outcome
from neo_assets.core.sweep.report import EMPTY_CENSUS, SweepReport, cause_message
from neo_assets.core.sweep.scheduling import RetryPolicy, next_due_at, stable_jitter_seconds
from neo_assets.core.sweep.summary import LaneSummary, SweepTimings
from neo_assets.embedding.band import band_for, provider_limit
from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.lane import LaneItem, embed_chunks
from neo_assets.embedding.provider import EmbeddingProvider
from neo_assets.embedding.rules.band import SOURCE_SERVER, Band, check_band, headroom_notice
from neo_assets.embedding.rules.input import embedding_input
from neo_assets.embedding.rules.lane import LaneSettings
from neo_assets.embedding.rules.reuse import ReusePlan, embedding_input_digest, plan_reuse
from neo_assets.embedding.server_tokens import CountUnavailable
from neo_assets.generations.records import record_repo_generation
from neo_assets.generations.rules import resolved_collection
from neo_assets.generations.serving import (
    configured_generation,
    register_provider_generation,
)
from neo_assets.health.evidence import VectorEvidenceRecorder
from neo_assets.health.freezing import blocking_freeze, observe_sweep
from neo_assets.health.rules.freeze import frozen_summary
from neo_assets.secrets.rules import secret_locations
from neo_assets.services.sweep.secrets import fence_secrets
from neo_assets.sources.envelope import build_envelope, read_texts
from neo_assets.sources.model import Envelope, FileEntry
from neo_assets.sources.parsers.rules_digest import parser_rules_digest
from neo_assets.sources.parsing import ParseIdentity, Row, parse_rows
from neo_assets.sources.revision import current_revision
from neo_assets.sources.rules.chunks import DeclaredChunk
from neo_assets.sources.rules.envelope_reuse import envelope_delta
from neo_assets.sources.rules.fit_parts import fit_parts
from neo_assets.sources.rules.line_parts import part_name
from neo_assets.sources.rules.parser_versions import GENERATION_UNITS, parser_generation
from neo_assets.store.batch_caps import batch_cap_memory
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.store.ledger import Ledger
from neo_assets.store.ledger_fence_book import LedgerFenceBook
from neo_assets.tenants.validation import RepoDecl, Tenant

# Rows per write of copied vectors (the store splits further at its own limit).
COPY_BATCH = 4096


@dataclass(frozen=True)
class RepoContext:
    """Who and what one sweep is about: taken from the declaration, never from content."""

    tenant: Tenant
    repo: RepoDecl

    @property
    def tenant_id(self) -> str:
        return self.tenant.id

    @property
    def repo_slug(self) -> str:
        return self.repo.slug

    @property
    def key(self) -> str:
        return f"{self.tenant.id}/{self.repo.slug}"


def lane_settings(settings: Settings, band: Band | None = None) -> LaneSettings:
    """The lane's tunables; its admission band is the band in force (``band_for``)."""
    band = band or band_for(settings)
    return LaneSettings(
        batch_size=settings.embedding.resolved_batch_size,
        max_inflight=settings.embedding.max_inflight or 2,
        inflight_from_server=settings.embedding.max_inflight is None,
        loading_max_wait_s=settings.embedding.loading_max_wait_s,
        unreachable_wait_s=settings.embedding.unreachable_wait_s,
        strike_threshold=settings.embedding.strike_threshold,
        circuit_threshold=settings.embedding.circuit_threshold,
        recovery_initial_s=settings.embedding.recovery_initial_s,
        recovery_max_s=settings.embedding.recovery_max_s,
        recovery_max_wait_s=settings.embedding.recovery_max_wait_s,
        context_tokens=band.limit_tokens,
        admission_safety_factor=band.safety,
        chars_per_token=band.chars_per_token,
        call_ceiling_ms=settings.embedding.call_ceiling_ms,
    )


class ParserUnavailable(RuntimeError):
    """The repo's declared parser cannot run here (a grammar package is missing): the
    sweep fails at its start, before anything is written, naming what to install."""

    code = codes.PARSE_FAILED


def check_parser(ctx: RepoContext) -> None:
    """Before a sweep of a repo declared with parser 2.x: every tree-sitter grammar loads
    (else ParserUnavailable, code PARSE_FAILED, naming the repo and the pip package).
    Without it a missing grammar would window every file of its language silently
    (``grammar-unusable``) and declare that as the generation. 1.x needs no grammar."""
    if parser_generation(ctx.repo.parser.version) != GENERATION_UNITS:
        return
    from neo_assets.sources.parsers.grammars import GrammarUnavailable, check_grammars

    try:
        check_grammars()
    except GrammarUnavailable as exc:
        parser = f"{ctx.repo.parser.id} {ctx.repo.parser.version}"
        raise ParserUnavailable(f"{ctx.key}: parser {parser} cannot run: {exc}") from None


# ---------------------------------------------------------------------------- 1 envelope
@dataclass
class EnvelopeResult:
    revision: str
    kind: str
    config_version: int
    declaration_digest: str
    repo_declaration_digest: str
    listing: Envelope  # its entries (sorted by path), for the metadata and the chunk stage


def previous_envelope(ledger: Ledger, ctx: RepoContext) -> Envelope | None:
    """The repo's last recorded envelope, rebuilt from the ledger (None when never seen)."""
    record = ledger.envelope_rows(ctx.tenant_id, ctx.repo_slug)
    if record is None:
        return None
    head, rows = record
    entries = tuple(
        sorted(
            FileEntry(path, int(size or 0), blob or "", bool(yielded), reason, changed_at)
            for path, size, blob, yielded, reason, changed_at in rows
        )
    )
    return Envelope(
        kind=head["kind"],
        root=str(ctx.repo.path),
        revision=head["revision"],
        entries=entries,
        rules=head.get("rules") or "",
    )


def _entry_key(e: FileEntry) -> tuple[object, ...]:
    return (e.path, e.size, e.blob, e.yielded, e.skip_reason, e.changed_at)


def envelope_step(
    ctx: RepoContext,
    settings: Settings,
    ledger: Ledger,
    now: float,
) -> EnvelopeResult:
    """List the repo at its revision, record the envelope and the tenant's configVersion.

    The previous envelope lets git skip re-reading blobs it has already classified, so
    the cost follows what changed, not the repo's size."""
    previous = previous_envelope(ledger, ctx)
    env = build_envelope(
        ctx.repo.path,
        ref=ctx.repo.ref,
        exclude=ctx.repo.parser.effective_exclude,
        max_file_bytes=settings.sweep.max_file_bytes,
        previous=previous,
    )
    tenant_digest = declaration_digest(ctx.tenant.to_plain())
    version = ledger.config_version(ctx.tenant_id, tenant_digest, now)
    # What differs from the recorded envelope, path by path (None: none recorded, or most
    # of it differs). Nothing differs for the recorded envelope itself (same commit, same
    # rules: build_envelope reused it) or one listed afresh with the same entries.
    reused = previous is not None and env.entries is previous.entries
    delta = (
        None
        if previous is None or reused
        else envelope_delta(previous.entries, env.entries, _entry_key)
    )
    unchanged = reused or (
        previous is not None
        and previous.revision == env.revision
        and previous.kind == env.kind
        and delta == ([], [])
    )
    if unchanged:
        ledger.touch_envelope(ctx.tenant_id, ctx.repo_slug, now=now, rules=env.rules)
    else:
        changed, replacing = delta if delta is not None else (env.entries, None)
        ledger.record_envelope(
            ctx.tenant_id,
            ctx.repo_slug,
            revision=env.revision,
            kind=env.kind,
            # The entries themselves: the frame's to_dict boxed every cell (25 ms of a
            # first sweep's 2,000-path envelope).
            entries=(e._asdict() for e in changed),
            now=now,
            rules=env.rules,
            replacing=replacing,
        )
    return EnvelopeResult(
        revision=env.revision,
        kind=env.kind,
        config_version=version,
        declaration_digest=tenant_digest,
        repo_declaration_digest=repo_declaration_digest(ctx.repo.to_plain()),
        listing=env,
    )


# ---------------------------------------------------------------------------- 2 chunks
def chunking_identity(ctx: RepoContext, settings: Settings) -> str:
    """What, besides a file's bytes, decides its chunks: reuse needs both unchanged. The
    band is in it because a chunk over the band is split into parts (``fit_to_band``); the
    parser's rules digest because a release may change its tables under the same version."""
    parser = ctx.repo.parser
    sweep = settings.sweep
    band = band_for(settings)
    return (
        f"{parser.id}@{parser.version}:{sweep.max_chunk_chars}:{sweep.window_lines}"
        f":band{band.tokens}" + _counted_by(band) + f":rules{parser_rules_digest()}"
    )


def _counted_by(band: Band) -> str:
    if band.source == SOURCE_SERVER:
        return "s"  # the server's tokenizer
    return "t" if band.exact else f"e{band.chars_per_token}"


def parse_identity(ctx: RepoContext, settings: Settings) -> ParseIdentity:
    return ParseIdentity(
        ctx.tenant_id,
        ctx.repo_slug,
        ctx.repo.parser.id,
        ctx.repo.parser.version,
        settings.sweep.max_chunk_chars,
        settings.sweep.window_lines,
    )


def parsed_chunks(rows: list[Row], blob_of: Mapping[str, str]) -> list[DeclaredChunk]:
    """The parser's rows (``sources/parsing.Row``) as the
    sweep's chunks, each with its file's blob: the one conversion, at that boundary."""
    return [
        DeclaredChunk(
            chunk_id=chunk_id,
            source_path=path,
            kind=kind,
            name=name,
            blob=blob_of.get(path),
            content=content,
            start_line=start,
            end_line=end,
            language=language,
            qualified_name=qualified_name,
            parent=parent,
            fallback_reason=reason,
        )
        for (
            chunk_id,
            path,
            kind,
            name,
            start,
            end,
            content,
            language,
            qualified_name,
            parent,
            reason,
        ) in rows
    ]


def fallback_counts(parsed: list[DeclaredChunk]) -> dict[str, int]:
    """Files windowed instead of read by their structure, per reason (parsed rows only:
    every chunk of such a file carries its reason)."""
    paths: dict[str, set[str]] = {}
    for c in parsed:
        if c.fallback_reason:
            paths.setdefault(c.fallback_reason, set()).add(c.source_path)
    return {reason: len(p) for reason, p in sorted(paths.items())}


def _parse(
    ctx: RepoContext,
    settings: Settings,
    env: Envelope,
    paths: list[str],
    files_out: list[ParsedFile] | None = None,
) -> list[DeclaredChunk]:
    """``files_out``: filled with each file's text and units, for the code index."""
    blob_of = {e.path: e.blob for e in env.entries}
    files = list(read_texts(env, paths))
    rows = parse_rows(parse_identity(ctx, settings), files)
    if files_out is not None:
        files_out.extend(parsed_files(files, rows))
    return fit_to_band(ctx, parsed_chunks(rows, blob_of), band_for(settings))


def parsed_files(files: list[tuple[str, str]], rows: list[Row]) -> list[ParsedFile]:
    """Each file's (path, text, units) from the parser's rows, for the code index."""
    units: dict[str, list[Unit]] = {path: [] for path, _text in files}
    for _id, path, kind, name, start, end, _content, _lang, qualified, _p, _r in rows:
        units[path].append(Unit(kind, name, qualified, start, end))
    return [(path, text, units[path]) for path, text in files]


def index_step(
    ctx: RepoContext,
    settings: Settings,
    ledger: Ledger,
    envelope: "EnvelopeResult",
    chunking: str,
    parsed: list[ParsedFile],
    now: float,
) -> float:
    """Record the code tools' index of the envelope's revision (``code_tools``): symbols,
    identifiers and the file map; the seconds it took."""
    env = envelope.listing
    state = ledger.repo_state(ctx.tenant_id, ctx.repo_slug) or {}

    def parse_missing(paths: list[str]) -> list[ParsedFile]:
        files = list(read_texts(env, paths))
        return parsed_files(files, parse_rows(parse_identity(ctx, settings), files))

    return build_index(
        ledger,
        ctx.tenant_id,
        ctx.repo_slug,
        env,
        chunking=chunking,
        parsed=parsed,
        parse_missing=parse_missing,
        serving_revision=state.get("last_ingested_rev"),
        now=now,
    )


def _sent_text(ctx: RepoContext, chunk: DeclaredChunk, content: str, name: str) -> str:
    return embedding_input(
        content,
        kind=chunk.kind,
        name=name,
        qualified_name=chunk.qualified_name,
        source_path=chunk.source_path,
        parser_version=ctx.repo.parser.version,
    )


def fit_to_band(ctx: RepoContext, parsed: list[DeclaredChunk], band: Band) -> list[DeclaredChunk]:
    """Every parsed chunk whose embedding input is over the band, split into parts that
    fit (``sources/rules/fit_parts.py``): each part an ordinary chunk of the declared
    generation, with its id from the parent's and its index and count, its own line
    range and the name ``<name> [part i/n]``. Never truncated, never dropped; a chunk
    that cannot be cut smaller stays whole (the lane's admission then fences it)."""
    if not parsed:
        return parsed
    counts = band.count([_sent_text(ctx, c, c.content or "", c.name) for c in parsed])
    out: list[DeclaredChunk] = []
    for chunk, tokens in zip(parsed, counts, strict=True):
        if tokens <= band.tokens:
            out.append(chunk)
            continue
        widest = part_name(chunk.name, 999, 999)  # the header a part's count may need
        if not band.fits(_sent_text(ctx, chunk, "", widest)):
            # Its header alone (a name longer than the window) is over the band: no part
            # could fit, so it stays whole and is fenced once, not character by character.
            out.append(chunk)
            continue
        pieces = fit_parts(
            chunk.content or "",
            lambda text, c=chunk, w=widest: band.fits(_sent_text(ctx, c, text, w)),
        )
        if len(pieces) == 1:
            out.append(chunk)
            continue
        count = len(pieces)
        first = chunk.start_line
        for index, piece in enumerate(pieces, start=1):
            out.append(
                replace(
                    chunk,
                    chunk_id=part_chunk_id(chunk.chunk_id, index, count),
                    name=part_name(chunk.name, index, count),
                    content=piece.text,
                    start_line=None if first is None else first + piece.first_line,
                    end_line=None if first is None else first + piece.last_line,
                )
            )
    return out


@dataclass
class ChunkPlan:
    """What the chunk stage must do: which yielded paths keep their recorded chunks (same
    blob, same chunking identity) and which are parsed."""

    chunking: str
    previous: dict[str, Any] | None
    recorded: dict[str, list[DeclaredChunk]]
    reused: dict[str, list[DeclaredChunk]]
    to_parse: list[str]
    blob_of: dict[str, str]

    @property
    def kept(self) -> list[DeclaredChunk]:
        return [dc for chunks in self.reused.values() for dc in chunks]

    @property
    def full(self) -> bool:
        """No usable recorded generation: the whole generation is declared anew."""
        return not self.recorded

    @property
    def replaced(self) -> set[str]:
        """Recorded paths whose chunks are rewritten (changed) or dropped (gone)."""
        return set(self.recorded) - set(self.reused)


class RecordedGeneration(NamedTuple):
    """The repo's recorded generation: its head row (None when never declared) and its
    chunks, by path, when they were cut with the current chunking identity (else none)."""

    previous: dict[str, Any] | None
    by_path: dict[str, list[DeclaredChunk]]

    def chunk_ids(self) -> list[str]:
        return [dc.chunk_id for chunks in self.by_path.values() for dc in chunks]


def recorded_generation(ctx: RepoContext, settings: Settings, ledger: Ledger) -> RecordedGeneration:
    previous = ledger.declared_generation(ctx.tenant_id, ctx.repo_slug)
    by_path: dict[str, list[DeclaredChunk]] = {}
    if previous is not None and previous.get("chunking") == chunking_identity(ctx, settings):
        for dc in ledger.declared_chunks(ctx.tenant_id, ctx.repo_slug):
            by_path.setdefault(dc.source_path, []).append(dc)
    return RecordedGeneration(previous, by_path)


def plan_chunks(
    ctx: RepoContext,
    settings: Settings,
    ledger: Ledger,
    envelope: EnvelopeResult,
    recorded_as_read: RecordedGeneration | None = None,
) -> ChunkPlan:
    """``recorded_as_read``: the recorded generation, when the caller read it already
    (it cannot change while the run holds the repo's lease)."""
    env = envelope.listing
    yielded = env.yielded_paths()
    blob_of = {e.path: e.blob for e in env.entries if e.yielded}
    chunking = chunking_identity(ctx, settings)
    previous, recorded = recorded_as_read or recorded_generation(ctx, settings, ledger)
    reused = {
        p: recorded[p]
        for p in yielded
        if p in recorded and all(dc.blob == blob_of[p] for dc in recorded[p])
    }
    return ChunkPlan(
        chunking=chunking,
        previous=previous,
        recorded=recorded,
        reused=reused,
        to_parse=[p for p in yielded if p not in reused],
        blob_of=blob_of,
    )


def record_parsed(
    ctx: RepoContext,
    ledger: Ledger,
    envelope: EnvelopeResult,
    plan: ChunkPlan,
    parsed: list[DeclaredChunk],
    replace_paths: set[str] | None,
    now: float,
) -> None:
    """Declare ``parsed`` in the ledger: replacing ``replace_paths``' chunks, or the whole
    generation when None."""
    ledger.record_generation(
        ctx.tenant_id,
        ctx.repo_slug,
        revision=envelope.revision,
        parser_id=ctx.repo.parser.id,
        parser_version=ctx.repo.parser.version,
        declaration_digest=envelope.repo_declaration_digest,
        chunks=parsed,
        now=now,
        chunking=plan.chunking,
        replace_paths=replace_paths,
    )


@dataclass(frozen=True)
class ChunkGeneration:
    """What the chunk stage declared: the generation's chunks, the parsed ones first (with
    their text), then the kept ones (from the ledger, without), and what it did."""

    chunks: list[DeclaredChunk]
    parsed_paths: int = 0
    reused_paths: int = 0
    # Parsed files windowed instead of read by their structure, per reason.
    fallback_files: Mapping[str, int] = field(default_factory=dict)
    # Seconds of the chunk stage spent on the code tools' index (code_tools.index_store).
    index_s: float = 0.0

    def __len__(self) -> int:
        return len(self.chunks)

    def chunk_ids(self) -> list[str]:
        return [c.chunk_id for c in self.chunks]


def chunk_step(
    ctx: RepoContext,
    settings: Settings,
    ledger: Ledger,
    envelope: EnvelopeResult,
    now: float,
    plan: ChunkPlan | None = None,
) -> ChunkGeneration:
    """Record the declared generation (path -> chunk ids), parsing only what changed.

    A yielded path whose blob and chunking identity are those of the recorded generation
    keeps its recorded chunks (content not loaded: ``content`` is None for those chunks);
    every other yielded path is parsed. Only changed paths are rewritten in the ledger."""
    if plan is None:
        plan = plan_chunks(ctx, settings, ledger, envelope)
    files: list[ParsedFile] = []
    parsed = _parse(ctx, settings, envelope.listing, plan.to_parse, files)
    index_s = index_step(ctx, settings, ledger, envelope, plan.chunking, files, now)
    del files
    chunks = ChunkGeneration(
        chunks=parsed + plan.kept,
        parsed_paths=len(plan.to_parse),
        reused_paths=len(plan.reused),
        fallback_files=fallback_counts(parsed),
        index_s=index_s,
    )
    previous = plan.previous
    unchanged = (
        not plan.full
        and not plan.replaced
        and not parsed
        and previous is not None
        and previous["revision"] == envelope.revision
        and previous["declaration_digest"] == envelope.repo_declaration_digest
    )
    if unchanged:
        return chunks  # the recorded generation is this one: nothing to write
    record_parsed(ctx, ledger, envelope, plan, parsed, None if plan.full else plan.replaced, now)
    return chunks


def fill_missing_content(
    ctx: RepoContext, settings: Settings, ledger: Ledger, chunks: list[DeclaredChunk]
) -> list[DeclaredChunk]:
    """Give chunks that need embedding but were kept without their text that text and
    what the parse says of it (lines, language, qualified name, parent), by parsing just
    their files again (rare: only after an incomplete earlier sweep)."""
    need = {c.source_path for c in chunks if not c.has_text}
    if not need:
        return chunks
    env = previous_envelope(ledger, ctx)
    if env is None:
        return chunks
    reparsed = {c.chunk_id: c for c in _parse(ctx, settings, env, sorted(need))}
    return [c if c.has_text else _text_from(c, reparsed.get(c.chunk_id)) for c in chunks]


def _text_from(chunk: DeclaredChunk, parsed: DeclaredChunk | None) -> DeclaredChunk:
    """``chunk`` with the text and parse facts of ``parsed`` (its file parsed again), or
    as it is when the parse no longer yields it (it stays without text)."""
    if parsed is None:
        return chunk
    return replace(
        chunk,
        content=parsed.content,
        start_line=parsed.start_line,
        end_line=parsed.end_line,
        language=parsed.language,
        qualified_name=parsed.qualified_name,
        parent=parsed.parent,
    )


# ---------------------------------------------------------------------------- 3 embeddings
@dataclass
class EmbedContext:
    provider: EmbeddingProvider
    cancel_scope: CancelScope = field(default_factory=lambda: CancelScope(label="sweep"))
    clock: Callable[[], float] = time.time
    progress: Callable[[int, int, int], None] | None = None
    # Called before every batch write; raises to refuse it (e.g. the sweep lease was lost).
    guard: Callable[[], None] | None = None


def embed_step(
    ctx: RepoContext,
    settings: Settings,
    store: ChromaStore,
    ledger: Ledger,
    envelope: EnvelopeResult,
    chunks: ChunkGeneration,
    run: EmbedContext,
) -> LaneSummary:
    """Embed what the collection lacks at the current generation, minus what is fenced.

    Each finished batch is added to Chroma at once, stamped from the declaration."""
    started = time.perf_counter()
    provider = run.provider
    # The generation is recorded (and where its rows live) before a row of it is written;
    # its rows go to its own collection, beside the generation that serves queries.
    record = register_provider_generation(settings, ledger, provider, run.clock())
    generation = record.generation
    store = store.sibling(resolved_collection(settings.store.collection_name, record, generation))
    ids = chunks.chunk_ids()
    lookup = store.present_ids
    present = lookup(ids)
    # Rows present at another generation (the input format or geometry changed since)
    # are embedded again and rewritten in place.
    stale = stale_rows(ctx, store, ledger, present, generation)
    present -= stale
    missing = fill_missing_content(
        ctx, settings, ledger, [c for c in chunks.chunks if c.chunk_id not in present]
    )
    by_id = embeddable_by_id(missing)
    # Secrets never leave the repo: a chunk holding one is fenced before anything is sent.
    secret_ids, secret_rows = fence_secrets(
        by_id,
        LedgerFenceBook(ledger, ctx.tenant_id, ctx.repo_slug, clock=run.clock),
        generation,
        run.clock,
    )
    texts = {
        cid: _sent_text(ctx, c, c.content or "", c.name)
        for cid, c in by_id.items()
        if cid not in secret_ids
    }
    band = band_for(settings)
    # The model's own count, when it has a tokenizer: the lane admits by it.
    counted: list[int | None] = [None] * len(texts)
    if band.exact:
        try:
            counted = list(band.count(list(texts.values())))
        except CountUnavailable:
            pass  # the lane meets the same server: it defers, or the size checks apply

    items = [
        LaneItem(chunk_id=cid, text=text, tokens=tokens)
        for (cid, text), tokens in zip(texts.items(), counted, strict=True)
    ]
    # Each content once per generation: the missing chunks' exact inputs are looked up
    # among the rows of this generation (this tenant's, unless the operator allows reuse
    # across tenants) and copied; only inputs no row has are sent, once each.
    digest_of = {item.chunk_id: embedding_input_digest(item.text) for item in items}
    stored = (
        store.vectors_by_input_digest(
            digest_of.values(),
            generation=generation,
            tenant_id=None if settings.embedding.reuse_across_tenants else ctx.tenant_id,
        )
        if items and settings.embedding.reuse_vectors
        else {}
    )
    reuse = plan_reuse(items, digest_of, stored)

    present_check_s = time.perf_counter() - started
    written_s = [0.0]  # seconds inside the store's writes (a box: the writer adds to it)

    def write_batch(batch: list[LaneItem], vectors: np.ndarray) -> None:
        if run.guard is not None:
            run.guard()
        write_started = time.perf_counter()
        ingested_at = run.clock()
        metas = []
        for item in batch:
            c = by_id[item.chunk_id]
            metas.append(
                chunk_metadata(
                    language=c.language,
                    start_line=c.start_line,
                    end_line=c.end_line,
                    qualified_name=c.qualified_name,
                    parent=c.parent,
                )
                | row_stamps(
                    tenant_id=ctx.tenant_id,
                    repo_slug=ctx.repo_slug,
                    source_path=c.source_path,
                    kind=c.kind,
                    name=c.name,
                    parser_id=ctx.repo.parser.id,
                    parser_version=ctx.repo.parser.version,
                    tenant_config_version=envelope.config_version,
                    ingested_at=ingested_at,
                    revision=envelope.revision,
                    embedding_generation=generation,
                )
                | {INPUT_DIGEST_KEY: digest_of[item.chunk_id]}
            )
        batch_ids = [i.chunk_id for i in batch]
        documents = [by_id[cid].content for cid in batch_ids]  # the content, no header
        if not stale or stale.isdisjoint(batch_ids):
            store.add(batch_ids, vectors, documents, metas)
        else:
            for write, keep in ((store.add, False), (store.upsert, True)):
                rows = [n for n, cid in enumerate(batch_ids) if (cid in stale) == keep]
                if rows:
                    write(
                        [batch_ids[n] for n in rows],
                        vectors[rows],
                        [documents[n] for n in rows],
                        [metas[n] for n in rows],
                    )
        written_s[0] += time.perf_counter() - write_started

    fence_book = LedgerFenceBook(ledger, ctx.tenant_id, ctx.repo_slug, clock=run.clock)
    frozen = blocking_freeze(ledger, settings.store.collection_name)
    if frozen is not None:
        # The write path is frozen: embed nothing, defer with KB_COLLECTION_FROZEN.
        asyncio.run(provider.aclose())
        summary = frozen_summary(
            [i.chunk_id for i in items], fence_book.fence_records(generation), generation, frozen
        )
    else:
        copied = write_copies(reuse, stored, items, write_batch)

        def write_sent(batch: list[LaneItem], vectors: np.ndarray) -> None:
            """A sent batch, and the chunks with the same inputs (they take its vectors)."""
            rows = [
                n
                for n, item in enumerate(batch)
                for _ in (item, *reuse.followers.get(item.chunk_id, ()))
            ]
            ids_out = [
                cid
                for item in batch
                for cid in (item.chunk_id, *reuse.followers.get(item.chunk_id, ()))
            ]
            write_batch([LaneItem(cid, "") for cid in ids_out], vectors[rows])
            copied[0] += len(ids_out) - len(batch)

        recorder = VectorEvidenceRecorder(provider)
        summary, interrupt = run_lane_abortably(
            lambda: _embed(
                reuse.send,
                recorder,
                settings,
                generation,
                fence_book,
                write_sent,
                run,
                width_known=store.count() > 0,
            ),
            run.cancel_scope,
        )
        summary = replace(
            summary,
            counts=replace(
                summary.counts,
                reused=copied[0],
                embedded=summary.counts.embedded + copied[0],
                already_present=len(present),
            ),
            vector_evidence=recorder.evidence(),
            generation=generation,
            revision=envelope.revision,
        )
        if interrupt is not None:
            raise SweepAborted(summary, interrupt)
        # Freeze (durably, before the verdict) when this sweep's evidence says so.
        summary = replace(summary, freeze=observe_sweep(ledger, settings, summary, run.clock()))
    unavailable = sorted({c.chunk_id for c in missing} - set(by_id))
    errors = (*secret_rows, *summary.errors)
    if unavailable:
        # Never complete silently over a chunk whose text could not be read again.
        errors += (
            {
                "code": codes.SOURCE_UNREADABLE,
                "message": f"{len(unavailable)} chunk(s) could not be re-read from the repo",
                "details": {"chunkIds": unavailable[:32]},
            },
        )
    return replace(
        summary,
        counts=replace(
            summary.counts,
            already_present=len(present),
            chunks=len(ids),
            fenced_secret=len(secret_ids),
        ),
        errors=errors,
        generation=generation,
        revision=envelope.revision,
        band=band.describe(),
        timings=SweepTimings(
            present_check_s=present_check_s,
            write_s=written_s[0],
            embed_total_s=time.perf_counter() - started,
        ),
    )


def write_copies(
    reuse: ReusePlan,
    stored: dict[str, np.ndarray],
    items: list[LaneItem],
    write_batch: Callable[[list[LaneItem], np.ndarray], None],
) -> list[int]:
    """Write the chunks whose input a row of this generation already has, with that row's
    vector, in store-sized batches. Returns ``[rows written]`` (a box: the lane's writer
    adds the followers of sent inputs to it)."""
    copy_items = [item for item in items if item.chunk_id in reuse.copy]
    for start in range(0, len(copy_items), COPY_BATCH):
        batch = copy_items[start : start + COPY_BATCH]
        vectors = np.stack([stored[reuse.copy[item.chunk_id]] for item in batch])
        write_batch(batch, vectors)
    return [len(copy_items)]


def stale_rows(
    ctx: RepoContext, store: ChromaStore, ledger: Ledger, present: set[str], generation: str
) -> set[str]:
    """Which ``present`` rows were embedded at another generation than ``generation``.

    Read from the rows' stamps only when the repo is not settled at this generation (its
    last sweep was at another one, or did not complete): a sweep that completed at
    ``generation`` left every declared row at it, so an unchanged repo reads no stamps."""
    if not present:
        return set()
    state = ledger.repo_state(ctx.tenant_id, ctx.repo_slug) or {}
    if (
        state.get("embedding_generation") == generation
        and state.get("last_outcome") == codes.OUTCOME_COMPLETE
    ):
        return set()
    rows = store.get_rows(sorted(present))
    return {
        rid for rid, row in rows.items() if row["metadata"].get("embeddingGeneration") != generation
    }


def embeddable_by_id(chunks: list[DeclaredChunk]) -> dict[str, DeclaredChunk]:
    """The chunks whose text is at hand, by id, in their order: a kept chunk whose file
    could not be read again has none, and is left out."""
    return {c.chunk_id: c for c in chunks if c.has_text}


class SweepAborted(BaseException):
    """The run was interrupted (Ctrl-C, or a Dagster run terminated from the UI) while
    embedding. The lane was cancelled with ABORT_ERR and wound down; ``summary`` holds
    its verdicts (the remainder deferred as aborted) so the caller can record the sweep
    before letting ``interrupt`` end the run."""

    def __init__(self, summary: LaneSummary, interrupt: BaseException) -> None:
        super().__init__("sweep aborted")
        self.summary = summary
        self.interrupt = interrupt


def run_lane_abortably(
    make: Callable[[], Any], scope: CancelScope
) -> tuple[LaneSummary, BaseException | None]:
    """Run the lane's event loop in a worker thread so an interrupt delivered to the main
    thread (signals only arrive there) becomes an upstream abort of the cancellation
    scope: no later request starts, the connection in flight is closed, and the lane
    still returns its summary. Returns (summary, the interrupt or None)."""
    box: dict[str, Any] = {}
    ready = threading.Event()
    done = threading.Event()  # not Thread.is_alive(): an interrupted join can misreport it

    def worker() -> None:
        loop = asyncio.new_event_loop()
        box["loop"] = loop
        ready.set()
        try:
            box["result"] = loop.run_until_complete(make())
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller
            box["error"] = exc
        finally:
            loop.close()
            done.set()

    threading.Thread(target=worker, name="embed-lane", daemon=True).start()
    ready.wait()
    interrupt: BaseException | None = None
    while True:
        try:
            if done.wait(0.1):
                break
        except BaseException as exc:  # KeyboardInterrupt, DagsterExecutionInterruptedError
            if interrupt is None:
                interrupt = exc
                scope.cancel_threadsafe(box["loop"], codes.ABORT_ERR)
    if "error" in box:
        raise box["error"]
    return box["result"], interrupt


async def _embed(
    items: list[LaneItem],
    provider: EmbeddingProvider,
    settings: Settings,
    generation: str,
    fence_book: LedgerFenceBook,
    write_batch: Callable[[list[LaneItem], np.ndarray], None],
    run: EmbedContext,
    *,
    width_known: bool = False,
) -> LaneSummary:
    try:
        notice = None
        if items and "context_tokens" in settings.embedding.model_fields_set:
            # A band set by hand, at first contact: a server that says it takes less is
            # told so; one that takes more is named, with the setting that would use it.
            # (Unset, the band is what the server said: embedding/discovery.py.)
            band = band_for(settings)
            limit = await provider_limit(getattr(provider, "inner", provider), run.cancel_scope)
            check_band(provider.name, band, limit)
            notice = headroom_notice(band, limit)
        summary = await embed_chunks(
            items,
            provider=provider,
            settings=lane_settings(settings),
            generation=generation,
            fence_book=fence_book,
            write_batch=write_batch,
            cancel_scope=run.cancel_scope,
            clock=run.clock,
            progress=run.progress,
            width_known=width_known,
            batch_caps=batch_cap_memory(fence_book.ledger, provider, clock=run.clock),
        )
        if notice is not None:
            summary = replace(summary, notices=(*summary.notices, notice))
        return summary
    finally:
        await provider.aclose()


# ---------------------------------------------------------------------------- 4 census
def census_step(
    ctx: RepoContext,
    settings: Settings,
    ledger: Ledger,
    envelope: EnvelopeResult,
    summary: LaneSummary,
    now: float,
) -> SweepReport:
    """Classify the sweep, move the checkpoint, persist both censuses in one transaction."""
    verdict = classify_sweep_outcome(summary.errors)
    previous = ledger.repo_state(ctx.tenant_id, ctx.repo_slug) or {}
    failures = 0 if verdict.reset_failures else int(previous.get("consecutive_failures") or 0) + 1
    censuses = build_censuses(verdict.fence_rows)
    next_due = None
    if verdict.outcome != codes.OUTCOME_COMPLETE:
        next_due = backoff_due_at(ctx, settings, failures, now)
    episode = previous.get("recovery_episode_opened_at")
    if verdict.outcome == codes.OUTCOME_COMPLETE:
        episode = None
    elif verdict.arms_recovery_episode and episode is None:
        episode = now
    state = {
        "last_outcome": verdict.outcome,
        "deferred_cause_code": verdict.cause_code,
        "consecutive_failures": failures,
        "last_attempt_at": now,
        "last_attempted_rev": envelope.revision,
        "declaration_digest": envelope.repo_declaration_digest,
        "embedding_generation": summary.generation,
        "attempt_inputs_at": now,  # the three above are this attempt's own
        "next_due_at": next_due,
        "recovery_episode_opened_at": episode,
        "content_poison_census": encode_census(censuses["contentPoisonChunks"]),
        "undeliverable_census": encode_census(censuses["undeliverableChunks"]),
        "secret_census": encode_census(censuses["secretChunks"]),
        "last_summary": _json(summary.to_doc()),
        "updated_at": now,
    }
    if verdict.advance_checkpoint:
        state["last_ingested_rev"] = envelope.revision
    ledger.record_sweep_result(ctx.tenant_id, ctx.repo_slug, state=state)
    # The code index follows the checkpoint: kept at the revision served and the one this
    # sweep declared (served once complete), reclaimed at any other.
    served = state.get("last_ingested_rev", previous.get("last_ingested_rev"))
    reclaim_indexes(ledger, ctx.tenant_id, ctx.repo_slug, {envelope.revision, served})
    if summary.generation:
        counts = summary.counts
        record_repo_generation(
            ledger,
            ctx.tenant_id,
            ctx.repo_slug,
            summary.generation,
            complete=verdict.outcome == codes.OUTCOME_COMPLETE,
            chunks=counts.chunks,
            present=(counts.already_present or 0) + counts.embedded,
            now=now,
        )
    return SweepReport(
        tenant_id=ctx.tenant_id,
        repo_slug=ctx.repo_slug,
        outcome=verdict.outcome,
        revision=envelope.revision,
        counts=summary.counts,
        deferred_cause_code=verdict.cause_code,
        consecutive_failures=failures,
        next_due_at=next_due,
        content_poison_chunks=censuses["contentPoisonChunks"],
        undeliverable_chunks=censuses["undeliverableChunks"],
        secret_chunks=with_locations(censuses["secretChunks"], verdict.fence_rows),
        strikes=summary.strikes,
        embedding_generation=summary.generation,
        timings=summary.timings,
        notices=summary.notices,
        error=cause_message(summary.errors, verdict.cause_code)
        if verdict.cause_code == codes.KB_VECTOR_EMBED_PROVIDER_UNREACHABLE
        else None,
    )


def with_locations(census: Mapping[str, Any], fence_rows: tuple[Any, ...]) -> dict[str, Any]:
    """The secret census with where each secret is (path, line, rule; never the secret)."""
    receipts = [
        (row["details"]["chunkId"], row["details"].get("receipt"))
        for row in fence_rows
        if row["details"]["disposition"] == codes.DISPOSITION_SECRET
    ]
    return {**census, "locations": secret_locations(receipts)}


def backoff_due_at(ctx: RepoContext, settings: Settings, failures: int, now: float) -> float:
    """When a repo that did not complete is due again: its cadence, backed off by its
    consecutive failures, capped, with the repo's stable jitter."""
    cadence_s = 60.0 * (ctx.repo.cadence_minutes or settings.sweep.default_cadence_minutes)
    return next_due_at(
        now,
        cadence_s,
        failures,
        60.0 * settings.sweep.backoff_cap_minutes,
        stable_jitter_seconds(ctx.key, settings.sweep.backoff_jitter_s),
    )


def record_failed_sweep(
    ctx: RepoContext,
    settings: Settings,
    ledger: Ledger,
    code: str,
    message: str,
    now: float,
    envelope: EnvelopeResult | None = None,
) -> None:
    """A sweep that raised still counts: failed, one more consecutive failure, backoff.

    Without this a crashed run would leave the ledger as it was, so the sensor's run key
    would never change and the repo would never be retried (or retried with no backoff).
    The checkpoint and the censuses are left as they were.

    What the attempt was made with is recorded too — its revision (``envelope``'s when the
    envelope was listed; else the one the sensor would see now, ``None`` when the repo
    cannot be read), its declaration digest and the settings' embedding generation —
    with ``attempt_inputs_at`` set to the attempt's time. The due rule compares a failed
    repo with exactly these, so the repo is due again when its backoff elapses or one of
    them moves, not because the inputs of an older sweep differ from today's."""
    revision: str | None = None
    if envelope is not None:
        revision = envelope.revision
    else:
        with suppress(Exception):  # unreadable in any way: seen as None, still recorded
            revision = current_revision(
                ctx.repo.path,
                ctx.repo.ref,
                ctx.repo.parser.effective_exclude,
                settings.sweep.max_file_bytes,
            )
    record_unfinished_attempt(
        ctx,
        settings,
        ledger,
        outcome=codes.OUTCOME_FAILED,
        code=code,
        revision=revision,
        summary=LaneSummary(errors=({"code": code, "message": message[:500]},)),
        now=now,
    )


class UnfinishedAttempt(NamedTuple):
    previous: dict[str, Any]  # the repo's state before this attempt
    failures: int
    next_due: float
    generation: str


def record_unfinished_attempt(
    ctx: RepoContext,
    settings: Settings,
    ledger: Ledger,
    *,
    outcome: str,
    code: str,
    revision: str | None,
    summary: LaneSummary,
    now: float,
    arms_recovery_episode: bool = False,
) -> UnfinishedAttempt:
    """An attempt that ended before its census (failed, or deferred before the lane): one
    more consecutive failure, its backoff, and what the attempt was made with (revision,
    declaration digest, the settings' generation, ``attempt_inputs_at``), which the due
    rule compares with. The checkpoint and the censuses are left as they were."""
    previous = ledger.repo_state(ctx.tenant_id, ctx.repo_slug) or {}
    failures = int(previous.get("consecutive_failures") or 0) + 1
    next_due = backoff_due_at(ctx, settings, failures, now)
    generation = configured_generation(settings)
    state = {
        "last_outcome": outcome,
        "deferred_cause_code": code,
        "consecutive_failures": failures,
        "last_attempt_at": now,
        "last_attempted_rev": revision,
        "declaration_digest": repo_declaration_digest(ctx.repo.to_plain()),
        "embedding_generation": generation,
        "attempt_inputs_at": now,
        "next_due_at": next_due,
        "last_summary": _json(summary.to_doc()),
        "updated_at": now,
    }
    if arms_recovery_episode:
        state["recovery_episode_opened_at"] = previous.get("recovery_episode_opened_at") or now
    ledger.record_sweep_result(ctx.tenant_id, ctx.repo_slug, state=state)
    return UnfinishedAttempt(previous, failures, next_due, generation)


def record_deferred_before_lane(
    ctx: RepoContext,
    settings: Settings,
    ledger: Ledger,
    envelope: EnvelopeResult,
    code: str,
    message: str,
    now: float,
) -> SweepReport:
    """A sweep that cannot go on before its lane (the server that counts tokens for the
    split is unreachable): deferred with ``code``, one more consecutive failure, backoff,
    a recovery episode armed like any provider failure. Nothing of the generation was
    recorded, so the checkpoint and the censuses are left as they were; the returned doc
    has the census stage's shape, with the censuses as last recorded."""
    row = {"code": code, "message": message[:500], "details": {"stage": "chunk_generation"}}
    done = record_unfinished_attempt(
        ctx,
        settings,
        ledger,
        outcome=codes.OUTCOME_DEFERRED,
        code=code,
        revision=envelope.revision,
        summary=LaneSummary(errors=(row,), generation=configured_generation(settings)),
        now=now,
        arms_recovery_episode=True,
    )
    return SweepReport(
        tenant_id=ctx.tenant_id,
        repo_slug=ctx.repo_slug,
        outcome=codes.OUTCOME_DEFERRED,
        revision=envelope.revision,
        deferred_cause_code=code,
        consecutive_failures=done.failures,
        next_due_at=done.next_due,
        content_poison_chunks=_census_or_empty(done.previous.get("content_poison_census")),
        undeliverable_chunks=_census_or_empty(done.previous.get("undeliverable_census")),
        secret_chunks=_census_or_empty(done.previous.get("secret_census")),
        embedding_generation=done.generation,
        errors=(row,),
        error=message if code == codes.KB_VECTOR_EMBED_PROVIDER_UNREACHABLE else None,
    )


def _census_or_empty(raw: object) -> Mapping[str, Any]:
    census = decode_census(raw)
    return census if census is not None else EMPTY_CENSUS


@contextmanager
def failure_recorded(
    ctx: RepoContext,
    settings: Settings,
    ledger: Ledger,
    default_code: str,
    envelope: EnvelopeResult | None = None,
) -> Iterator[None]:
    """Record a step's exception as a failed sweep (its own code when it carries one,
    else ``default_code``; attempted at ``envelope``'s revision when the envelope was
    listed), then let it propagate so the run fails visibly too."""
    try:
        yield
    except Exception as exc:
        code = getattr(exc, "code", None)
        if not isinstance(code, str) or not code.isupper():
            code = default_code
        try:
            record_failed_sweep(ctx, settings, ledger, code, str(exc), time.time(), envelope)
        except Exception:  # noqa: BLE001 - the ledger may be what failed; keep the cause
            pass
        raise


def _json(value: Any) -> str:
    import json

    return json.dumps(value, sort_keys=True, default=str)


__all__ = [
    "RepoContext",
    "EnvelopeResult",
    "EmbedContext",
    "RetryPolicy",
    "envelope_step",
    "chunk_step",
    "embed_step",
    "census_step",
]
