"""Headings of reStructuredText and AsciiDoc documents, with their levels as docutils and
AsciiDoc assign them. Pure. Design: docs/design/sources.md#parser-2x"""

import re
from collections.abc import Sequence

Heading = tuple[int, int, str]  # (0-based line index of the heading's first line, level, title)

_RST_ADORNMENT = re.compile(r"^([!-/:-@\[-`{-~])\1+\s*$")
_ADOC_HEADING = re.compile(r"^(={1,6}|#{1,6})[ \t]+(\S.*?)[ \t]*$")
_ADOC_DELIMITER = re.compile(r"^(-{4,}|\.{4,}|={4,}|\*{4,}|_{4,}|\+{4,}|/{4,})\s*$")


def _text(line: str) -> str:
    return line.rstrip("\r\n")


def rst_headings(lines: Sequence[str]) -> list[Heading]:
    styles: list[tuple[str, bool]] = []
    out: list[Heading] = []
    i = 0
    n = len(lines)
    literal = False
    while i < n:
        line = _text(lines[i])
        if literal:
            if line.strip() and not line[:1].isspace():
                literal = False
            else:
                i += 1
                continue
        over = _RST_ADORNMENT.match(line)
        if (
            over
            and i + 2 < n
            and _text(lines[i + 1]).strip()
            and _text(lines[i + 2]).rstrip() == line.rstrip()
            and len(line.rstrip()) >= len(_text(lines[i + 1]).strip())
        ):
            title = _text(lines[i + 1]).strip()
            out.append((i, _level(styles, (over.group(1), True)), title))
            i += 3
            continue
        if (
            line.strip()
            and not line[:1].isspace()
            and not _RST_ADORNMENT.match(line)
            and i + 1 < n
            and (i == 0 or not _text(lines[i - 1]).strip())
        ):
            under = _RST_ADORNMENT.match(_text(lines[i + 1]))
            width = len(_text(lines[i + 1]).rstrip())
            if under and width >= max(2, len(line.strip())):
                out.append((i, _level(styles, (under.group(1), False)), line.strip()))
                i += 2
                continue
        if line.rstrip().endswith("::"):
            literal = True
        i += 1
    return out


def _level(styles: list[tuple[str, bool]], style: tuple[str, bool]) -> int:
    if style not in styles:
        styles.append(style)
    return styles.index(style) + 1


def asciidoc_headings(lines: Sequence[str]) -> list[Heading]:
    out: list[Heading] = []
    block: str | None = None
    for i, raw in enumerate(lines):
        line = _text(raw)
        delimiter = _ADOC_DELIMITER.match(line)
        if block is not None:
            if delimiter and delimiter.group(1) == block:
                block = None
            continue
        if delimiter:
            block = delimiter.group(1)
            continue
        match = _ADOC_HEADING.match(line)
        if match:
            out.append((i, len(match.group(1)), match.group(2)))
    return out


def heading_paths(headings: Sequence[Heading]) -> list[list[str]]:
    """Each heading's path of titles from the outermost enclosing heading: a heading
    closes every open heading of its level or deeper."""
    stack: list[tuple[int, str]] = []
    paths: list[list[str]] = []
    for _, level, title in headings:
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        paths.append([t for _, t in stack])
    return paths
