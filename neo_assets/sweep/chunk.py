"""Stage 2 of a sweep: parse the envelope's files into chunks fitted to the band, record them."""

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from neo_assets.code_tools.index_store import ParsedFile, build_index
from neo_assets.code_tools.rules.index import Unit
from neo_assets.config.settings import Settings
from neo_assets.core.ids.chunk_ids import part_chunk_id
from neo_assets.embedding.band import band_for
from neo_assets.embedding.rules.band import SOURCE_SERVER, Band
from neo_assets.embedding.rules.input import embedding_input
from neo_assets.sources.envelope import read_texts
from neo_assets.sources.model import Envelope
from neo_assets.sources.parsers.rules_digest import parser_rules_digest
from neo_assets.sources.parsing import ParseIdentity, Row, parse_rows
from neo_assets.sources.rules.chunks import DeclaredChunk
from neo_assets.sources.rules.fit_parts import fit_parts
from neo_assets.sources.rules.line_numbers import text_line_numbers
from neo_assets.sources.rules.line_parts import part_name
from neo_assets.store.ledger import Ledger
from neo_assets.sweep.context import RepoContext
from neo_assets.sweep.envelope import EnvelopeResult, previous_envelope
from neo_assets.sweep.rules.moved_lines import LINES_STAMP


def chunking_identity(ctx: RepoContext, settings: Settings) -> str:
    """What, besides a file's bytes, decides its chunks: reuse needs both unchanged. The
    band is in it because a chunk over the band is split into parts (``fit_to_band``); the
    parser's rules digest because a release may change its tables under the same version;
    the lines stamp because a release may change how rows' lines are stamped."""
    parser = ctx.repo.parser
    sweep = settings.sweep
    band = band_for(settings)
    return (
        f"{parser.id}@{parser.version}:{sweep.max_chunk_chars}:{sweep.window_lines}"
        f":band{band.tokens}" + _counted_by(band) + f":rules{parser_rules_digest()}"
        f":lines{LINES_STAMP}"
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
        DeclaredChunk(chunk_id, path, kind, name, blob_of.get(path), content, start, end, *parse)
        # parse: language, qualified name, parent, fallback reason (in the chunk's own order)
        for chunk_id, path, kind, name, start, end, content, *parse in rows
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
    """Every parsed chunk whose embedding input is over the band, split into parts that fit
    (``sources/rules/fit_parts.py``), named ``<name> [part i/n]``. Never truncated, never
    dropped: a chunk that cannot be cut smaller stays whole (the lane's admission fences it)."""
    if not parsed:
        return parsed
    counts = band.count([_sent_text(ctx, c, c.content or "", c.name) for c in parsed])
    spans = _file_spans(parsed)
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
        numbers = _line_numbers(chunk, spans.get(chunk.source_path, []))
        for index, piece in enumerate(pieces, start=1):
            out.append(
                replace(
                    chunk,
                    chunk_id=part_chunk_id(chunk.chunk_id, index, count),
                    name=part_name(chunk.name, index, count),
                    content=piece.text,
                    start_line=None if numbers is None else numbers[piece.first_line],
                    end_line=None if numbers is None else numbers[piece.last_line],
                )
            )
    return out


def _file_spans(parsed: list[DeclaredChunk]) -> dict[str, list[tuple[int, int]]]:
    """Each file's chunk spans (first, last line), in line order."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for c in parsed:
        if c.start_line is not None and c.end_line is not None:
            spans.setdefault(c.source_path, []).append((c.start_line, c.end_line))
    return {path: sorted(found) for path, found in spans.items()}


def _line_numbers(chunk: DeclaredChunk, spans: list[tuple[int, int]]) -> list[int] | None:
    """The file line of each of ``chunk``'s text lines (as ``fit_parts`` splits them): its
    first line on, skipping the units nested in it when its text is the file less them (a
    module or class row). None without line numbers."""
    first, last = chunk.start_line, chunk.end_line
    if first is None or last is None:
        return None
    count = len((chunk.content or "").splitlines(keepends=True)) or 1
    contiguous = list(range(first, first + count))
    if first + count - 1 == last:
        return contiguous
    nested = [(a, b) for a, b in spans if first <= a and b <= last and (a, b) != (first, last)]
    numbers = text_line_numbers(first, count, nested)
    # A text that does not end on the row's last line is read as before: line by line.
    return numbers if numbers[-1] == last else contiguous


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


def plan_chunks(
    ctx: RepoContext, settings: Settings, ledger: Ledger, envelope: EnvelopeResult
) -> ChunkPlan:
    """The recorded generation (its head row, None when never declared, and its chunks by
    path when they were cut with the current chunking identity) against the envelope."""
    env = envelope.listing
    yielded = env.yielded_paths()
    blob_of = {e.path: e.blob for e in env.entries if e.yielded}
    chunking = chunking_identity(ctx, settings)
    previous = ledger.declared_generation(ctx.tenant_id, ctx.repo_slug)
    recorded: dict[str, list[DeclaredChunk]] = {}
    if previous is not None and previous.get("chunking") == chunking:
        for dc in ledger.declared_chunks(ctx.tenant_id, ctx.repo_slug):
            recorded.setdefault(dc.source_path, []).append(dc)
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
    """Record the declared generation (path -> chunk ids), parsing only what changed: a path
    whose blob and chunking identity are the recorded ones keeps its chunks (``content`` None)."""
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
