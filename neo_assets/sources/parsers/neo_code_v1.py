"""The ``neo-code`` parser, versions 0.x and 1.x, kept byte for byte: Python through
``ast``, Markdown by heading, ``text`` windows for the rest. Pure: same input, same
chunks in the same order. Design: docs/design/sources.md#parser-1x"""

import ast
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from neo_assets.sources.parsers.units import content_of, is_blank, trimmed
from neo_assets.sources.rules.chunk_kinds import CHUNK_KINDS_V1 as CHUNK_KINDS  # noqa: F401
from neo_assets.sources.rules.chunk_kinds import (
    KIND_CLASS,
    KIND_FUNCTION,
    KIND_METHOD,
    KIND_MODULE,
    KIND_SECTION,
    KIND_TEXT,
)
from neo_assets.sources.rules.doc_headings import heading_paths
from neo_assets.sources.rules.parser_versions import NEO_CODE

PARSER_ID = NEO_CODE  # declared in the parser registry (sources/rules/parser_versions.py)

PYTHON_SUFFIXES = (".py", ".pyi")
MARKDOWN_SUFFIXES = (".md", ".markdown")

_LINE_RE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX_RE = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_ATX_CLOSE_RE = re.compile(r"(?:^|[ \t]+)#+$")
_SETEXT_RE = re.compile(r"^ {0,3}(?:=+|-+)[ \t]*$")
_BLOCK_START_RE = re.compile(r"^ {0,3}(?:[-*+>|#]|\d+[.)])|^(?: {4}|\t)")


@dataclass(frozen=True)
class ParsedChunk:
    kind: str
    name: str
    content: str
    start_line: int  # 1-based, inclusive
    end_line: int  # 1-based, inclusive


@dataclass(frozen=True)
class _Piece:
    """A chunk before trimming and bounding: 1-based line numbers, maybe non-contiguous
    (a module or class with its members carved out)."""

    kind: str
    name: str
    line_numbers: tuple[int, ...]


def split_lines(text: str) -> list[str]:
    """Lines with their terminators, split where Python's tokenizer splits them."""
    return _LINE_RE.findall(text)


def parse_file(
    source_path: str, text: str, *, max_chunk_chars: int = 6000, window_lines: int = 60
) -> list[ParsedChunk]:
    """Chunks of one file."""
    if max_chunk_chars < 1:
        raise ValueError(f"max_chunk_chars must be at least 1, got {max_chunk_chars}")
    if window_lines < 1:
        raise ValueError(f"window_lines must be at least 1, got {window_lines}")
    lines = split_lines(text)
    lower = source_path.lower()
    pieces: list[_Piece] | None = None
    if lower.endswith(PYTHON_SUFFIXES):
        pieces = _python_pieces(source_path, text, len(lines))
    elif lower.endswith(MARKDOWN_SUFFIXES):
        pieces = _markdown_pieces(source_path, lines)
    if pieces is None:
        pieces = _window_pieces(source_path, lines, 1, len(lines), window_lines, max_chunk_chars)
    out: list[ParsedChunk] = []
    for piece in pieces:
        out.extend(_bounded(piece, lines, max_chunk_chars))
    return out


def module_name(source_path: str) -> str:
    """Dotted module path: ``src/pkg/mod.py`` -> ``src.pkg.mod``, ``pkg/__init__.py`` ->
    ``pkg``."""
    stem = source_path
    for suffix in PYTHON_SUFFIXES:
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    parts = [p for p in stem.split("/") if p]
    if len(parts) > 1 and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


# --------------------------------------------------------------------------- python


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _span(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> range:
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    last = node.end_lineno if node.end_lineno is not None else node.lineno
    return range(first, last + 1)


def _python_pieces(source_path: str, text: str, n_lines: int) -> list[_Piece] | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. SyntaxWarning for invalid escapes
            tree = ast.parse(text, filename=source_path)
    except (SyntaxError, ValueError, RecursionError):
        return None  # the caller falls back to windows
    module_lines = set(range(1, n_lines + 1))
    members: list[_Piece] = []
    for node in tree.body:
        if isinstance(node, _DEFS):
            span = _span(node)
            module_lines.difference_update(span)
            members.append(_Piece(KIND_FUNCTION, node.name, tuple(span)))
        elif isinstance(node, ast.ClassDef):
            module_lines.difference_update(_span(node))
            members.extend(_class_pieces(node, node.name))
    module = _Piece(KIND_MODULE, module_name(source_path), tuple(sorted(module_lines)))
    return [module, *members]


def _class_pieces(node: ast.ClassDef, qualname: str) -> list[_Piece]:
    own = set(_span(node))
    members: list[_Piece] = []
    for child in node.body:
        if isinstance(child, _DEFS):
            span = _span(child)
            own.difference_update(span)
            members.append(_Piece(KIND_METHOD, f"{qualname}.{child.name}", tuple(span)))
        elif isinstance(child, ast.ClassDef):
            own.difference_update(_span(child))
            members.extend(_class_pieces(child, f"{qualname}.{child.name}"))
    return [_Piece(KIND_CLASS, qualname, tuple(sorted(own))), *members]


# --------------------------------------------------------------------------- markdown


def _front_matter_end(lines: Sequence[str]) -> int:
    """Index of the first line after YAML front matter (0 when there is none)."""
    if not lines or lines[0].rstrip("\r\n") != "---":
        return 0
    for i in range(1, len(lines)):
        if lines[i].rstrip("\r\n") in ("---", "..."):
            return i + 1
    return 0


def _markdown_headings(lines: Sequence[str]) -> list[tuple[int, int, str]]:
    """(0-based first line of the heading, level, title) in order."""
    headings: list[tuple[int, int, str]] = []
    fence: str | None = None
    heading_lines: set[int] = set()
    start = _front_matter_end(lines)
    for i in range(start, len(lines)):
        line = lines[i].rstrip("\r\n")
        fence_match = _FENCE_RE.match(line)
        if fence is not None:
            if fence_match and fence_match.group(1)[0] == fence[0]:
                marker = fence_match.group(1)
                if len(marker) >= len(fence) and not line.strip().strip(fence[0]):
                    fence = None
            continue
        if fence_match:
            fence = fence_match.group(1)
            continue
        atx = _ATX_RE.match(line)
        if atx:
            title = _ATX_CLOSE_RE.sub("", (atx.group(2) or "")).strip()
            headings.append((i, len(atx.group(1)), title))
            heading_lines.add(i)
            continue
        if _SETEXT_RE.match(line) and _is_setext_text(lines, i - 1, start, heading_lines):
            level = 1 if line.strip()[0] == "=" else 2
            headings.append((i - 1, level, lines[i - 1].strip()))
            heading_lines.update((i - 1, i))
    return headings


def _is_setext_text(lines: Sequence[str], j: int, start: int, heading_lines: set[int]) -> bool:
    """True when line j is a one-line paragraph that a setext underline can title."""
    if j < start or j in heading_lines:
        return False
    text = lines[j].rstrip("\r\n")
    if is_blank(text) or _BLOCK_START_RE.match(text) or _FENCE_RE.match(text):
        return False
    return j == start or is_blank(lines[j - 1]) or (j - 1) in heading_lines


def _markdown_pieces(source_path: str, lines: Sequence[str]) -> list[_Piece]:
    headings = _markdown_headings(lines)
    pieces: list[_Piece] = []
    first = headings[0][0] if headings else len(lines)
    if first > 0:
        pieces.append(_Piece(KIND_SECTION, source_path, tuple(range(1, first + 1))))
    for n, ((start, _, _), path) in enumerate(zip(headings, heading_paths(headings), strict=True)):
        end = headings[n + 1][0] if n + 1 < len(headings) else len(lines)
        pieces.append(_Piece(KIND_SECTION, " > ".join(path), tuple(range(start + 1, end + 1))))
    return pieces


# --------------------------------------------------------------------------- windows


def _window_pieces(
    source_path: str,
    lines: Sequence[str],
    first: int,
    last: int,
    window_lines: int,
    max_chars: int,
) -> list[_Piece]:
    """Consecutive windows over lines first..last (1-based) of at most ``window_lines``
    lines and, where lines allow, ``max_chars`` characters."""
    pieces: list[_Piece] = []
    start = first
    while start <= last:
        end = start
        size = len(lines[start - 1])
        while (
            end + 1 <= last
            and end + 1 - start < window_lines
            and size + len(lines[end]) <= max_chars
        ):
            size += len(lines[end])
            end += 1
        name = f"{source_path}#L{start}-{end}"
        pieces.append(_Piece(KIND_TEXT, name, tuple(range(start, end + 1))))
        start = end + 1
    return pieces


# --------------------------------------------------------------------------- bounds


def _bounded(piece: _Piece, lines: Sequence[str], max_chars: int) -> list[ParsedChunk]:
    numbers = trimmed(piece.line_numbers, lines)
    if not numbers:
        return []
    content = content_of(numbers, lines)
    if len(content) <= max_chars:
        return [ParsedChunk(piece.kind, piece.name, content, numbers[0], numbers[-1])]
    parts: list[tuple[str, int, int]] = []
    group: list[int] = []
    size = 0
    for n in numbers:
        length = len(lines[n - 1])
        if group and size + length > max_chars:
            parts.extend(_group_parts(group, lines, max_chars))
            group, size = [], 0
        group.append(n)
        size += length
    parts.extend(_group_parts(group, lines, max_chars))
    return [
        ParsedChunk(piece.kind, f"{piece.name}#part{i}", text, lo, hi)
        for i, (text, lo, hi) in enumerate(parts, start=1)
    ]


def _group_parts(
    group: list[int], lines: Sequence[str], max_chars: int
) -> list[tuple[str, int, int]]:
    """One part for a group of lines, or character slices of a single over-long line;
    blank-only groups yield nothing."""
    numbers = trimmed(group, lines)
    if not numbers:
        return []
    text = content_of(numbers, lines)
    if len(text) <= max_chars:
        return [(text, numbers[0], numbers[-1])]
    # Only a single line can exceed the bound here (groups are packed by line length).
    n = numbers[0]
    return [
        (text[i : i + max_chars], n, n)
        for i in range(0, len(text), max_chars)
        if text[i : i + max_chars].strip()
    ]
