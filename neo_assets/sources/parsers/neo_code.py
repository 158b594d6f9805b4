"""The ``neo-code`` parser: a file's text to chunks, by the declared parser version —
0.x and 1.x in neo_code_v1.py (windows, Python by ``ast``, Markdown by heading), 2.x in
neo_code_v2.py (code units through tree-sitter, docs and data by structure). The
version is part of each chunk id, so a version bump re-identifies every chunk."""

from dataclasses import dataclass

from neo_assets.sources.parsers.neo_code_v1 import PARSER_ID, parse_file
from neo_assets.sources.parsers.neo_code_v2 import parse_file_v2
from neo_assets.sources.rules.chunks import Chunk, dedupe_chunks
from neo_assets.sources.rules.parser_versions import GENERATION_UNITS, parser_generation


@dataclass(frozen=True)
class ChunkedFile:
    """A file's chunks, its language ("" from 1.x) and, when it was windowed instead of
    read by its structure, why (2.x: ``"syntax-errors"``, ``"grammar-unusable"``, ...)."""

    chunks: list[Chunk]
    language: str
    fallback_reason: str | None


def chunk_file(
    tenant_id: str,
    repo_slug: str,
    source_path: str,
    text: str,
    parser_id: str,
    parser_version: str,
    *,
    max_chunk_chars: int = 6000,
    window_lines: int = 60,
) -> ChunkedFile:
    """The file's chunks with contract ids (identical chunks, same kind, name and content,
    collapse to the first), its language and fallback reason. The declared version picks
    the parser: 1.x neo_code_v1's, 2.x neo_code_v2's."""
    if parser_id != PARSER_ID:
        raise ValueError(f"chunk_file of {PARSER_ID!r} cannot produce chunks for {parser_id!r}")
    if parser_generation(parser_version) == GENERATION_UNITS:
        result = parse_file_v2(
            source_path, text, max_chunk_chars=max_chunk_chars, window_lines=window_lines
        )
        parsed, language, reason = list(result.chunks), result.language, result.fallback_reason
    else:
        parsed = parse_file(
            source_path, text, max_chunk_chars=max_chunk_chars, window_lines=window_lines
        )
        language, reason = "", None  # 1.x names no language and never falls back by choice
    chunks = dedupe_chunks(
        Chunk(
            tenant_id=tenant_id,
            repo_slug=repo_slug,
            source_path=source_path,
            parser_id=parser_id,
            parser_version=parser_version,
            kind=p.kind,
            name=p.name,
            content=p.content,
            start_line=p.start_line,
            end_line=p.end_line,
            language=language,
            # 1.x chunks carry neither (ParsedChunk has no such fields): "" and None.
            qualified_name=getattr(p, "qualified_name", ""),
            parent=getattr(p, "parent", None),
        )
        for p in parsed
    )
    return ChunkedFile(chunks, language, reason)
