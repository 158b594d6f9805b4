"""A repository's files parsed into chunk rows: the chunk stage's one call into the parser."""

from dataclasses import dataclass

from neo_assets.sources.parsers.neo_code import chunk_file

# (chunk_id, source_path, kind, name, start_line, end_line, content, language,
#  qualified_name, parent, fallback_reason). ``parent`` is "" when the chunk has none;
#  ``fallback_reason`` is the file's (every chunk of a windowed file carries it), "" when
#  it was read by structure.
Row = tuple[str, str, str, str, int, int, str, str, str, str, str]


@dataclass(frozen=True)
class ParseIdentity:
    """Everything besides a file's path and text that decides its chunks."""

    tenant_id: str
    repo_slug: str
    parser_id: str
    parser_version: str
    max_chunk_chars: int
    window_lines: int


def parse_rows(identity: ParseIdentity, files: list[tuple[str, str]]) -> list[Row]:
    """The chunks of ``files`` (path, text), in order, as plain rows."""
    rows: list[Row] = []
    for path, text in files:
        result = chunk_file(
            identity.tenant_id,
            identity.repo_slug,
            path,
            text,
            identity.parser_id,
            identity.parser_version,
            max_chunk_chars=identity.max_chunk_chars,
            window_lines=identity.window_lines,
        )
        reason = result.fallback_reason or ""
        for ch in result.chunks:
            row = (ch.chunk_id, ch.source_path, ch.kind, ch.name, ch.start_line, ch.end_line)
            meta = (ch.language, ch.qualified_name, ch.parent or "", reason)
            rows.append((*row, ch.content, *meta))
    return rows
