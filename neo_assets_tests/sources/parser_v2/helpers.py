"""Shared helpers of the parser 2.x tests."""

from neo_assets.sources.parsers.neo_code_v2 import ParseResult, parse_file_v2


def parse(path: str, text: str, **kw: int) -> ParseResult:
    return parse_file_v2(path, text, **kw)


def outline(path: str, text: str, **kw: int) -> list[tuple[str, str, int, int]]:
    """(kind, name, start_line, end_line) of every chunk, in order."""
    result = parse(path, text, **kw)
    assert result.fallback_reason is None, result.fallback_reason
    return [(c.kind, c.name, c.start_line, c.end_line) for c in result.chunks]


def by_name(path: str, text: str, **kw: int) -> dict:
    return {c.name: c for c in parse(path, text, **kw).chunks}
