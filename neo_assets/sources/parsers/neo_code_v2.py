"""Parser ``neo-code`` 2.x: every file by its structure, with metadata on each chunk; a file
whose structure cannot be read is windowed, saying why (``fallback_reason``). Pure.
Design: docs/design/sources.md#parser-2x"""

from collections.abc import Sequence
from dataclasses import dataclass

from neo_assets.sources.parsers import neo_code_v1
from neo_assets.sources.parsers.code_units import code_units
from neo_assets.sources.parsers.data_sections import data_units, style_units
from neo_assets.sources.parsers.doc_sections import doc_units
from neo_assets.sources.parsers.units import ParsedUnit, Unit, bound_units, is_blank
from neo_assets.sources.rules.chunk_kinds import KIND_MODULE, KIND_TEXT
from neo_assets.sources.rules.languages import (
    FAMILY_CODE,
    FAMILY_DATA,
    FAMILY_DOCS,
    FAMILY_PYTHON,
    FAMILY_STYLE,
    language_of,
)
from neo_assets.sources.rules.syntax_errors import REASON_SYNTAX_ERRORS
from neo_assets.sources.rules.text_windows import window_ranges

REASON_NO_TOP_LEVEL_KEYS = "no-top-level-keys"


@dataclass(frozen=True)
class ParseResult:
    language: str
    chunks: list[ParsedUnit]
    fallback_reason: str | None  # why the file was windowed instead of read by structure


def parse_file_v2(
    source_path: str, text: str, *, max_chunk_chars: int = 6000, window_lines: int = 60
) -> ParseResult:
    if max_chunk_chars < 1:
        raise ValueError(f"max_chunk_chars must be at least 1, got {max_chunk_chars}")
    if window_lines < 1:
        raise ValueError(f"window_lines must be at least 1, got {window_lines}")
    lines = neo_code_v1.split_lines(text)
    kind = language_of(source_path)
    language = kind.language
    units: list[Unit] | None = None
    reason: str | None = None
    namespace = ""
    if kind.family == FAMILY_PYTHON:
        units = _python_units(source_path, text, len(lines))
        if units is None:
            reason = REASON_SYNTAX_ERRORS
        namespace = neo_code_v1.module_name(source_path)
    elif kind.family == FAMILY_CODE:
        found = code_units(language, source_path, text, lines)
        units = found.units or None
        reason = found.fallback_reason
        namespace = found.namespace
    elif kind.family == FAMILY_DOCS:
        units = doc_units(language, source_path, lines)
    elif kind.family == FAMILY_DATA:
        units = data_units(language, source_path, text, lines)
        if units is None and text.strip():
            reason = REASON_NO_TOP_LEVEL_KEYS
    elif kind.family == FAMILY_STYLE:
        units = style_units(language, source_path, text, lines)
    if units is None:
        units = window_units(source_path, lines, window_lines, max_chunk_chars)

    def qualify(unit: Unit) -> str:
        if kind.family not in (FAMILY_CODE, FAMILY_PYTHON) or unit.kind == KIND_TEXT:
            return unit.name
        if unit.kind == KIND_MODULE:
            return namespace or source_path
        return f"{namespace}.{unit.name}" if namespace else unit.name

    return ParseResult(language, bound_units(units, lines, max_chunk_chars, qualify), reason)


def window_units(
    source_path: str, lines: Sequence[str], window_lines: int, max_chars: int
) -> list[Unit]:
    lengths = [len(line) for line in lines]
    blank = [is_blank(line) for line in lines]
    units = []
    for r in window_ranges(lengths, blank, window_lines, max_chars):
        first, last = r.start + 1, r.stop
        units.append(
            Unit(KIND_TEXT, f"{source_path}#L{first}-{last}", tuple(range(first, last + 1)))
        )
    return units


def _python_units(source_path: str, text: str, n_lines: int) -> list[Unit] | None:
    """The units parser 1.x finds in Python, with their parents."""
    pieces = neo_code_v1._python_pieces(source_path, text, n_lines)
    if pieces is None:
        return None
    units = []
    for piece in pieces:
        parent = None
        if piece.kind != KIND_MODULE and "." in piece.name:
            parent = piece.name.rsplit(".", 1)[0]
        units.append(Unit(piece.kind, piece.name, piece.line_numbers, parent))
    return units
