"""Units of parser 2.x before and after bounding: a ``Unit`` is what a structure reader
finds (kind, name, 1-based lines, maybe non-contiguous, parent); ``bound_units`` turns
units into ``ParsedUnit`` chunks of at most ``max_chunk_chars``."""

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from neo_assets.sources.rules.line_parts import pack_lines, part_name, slice_line


@dataclass(frozen=True)
class Unit:
    kind: str
    name: str
    line_numbers: tuple[int, ...]
    parent: str | None = None


@dataclass(frozen=True)
class ParsedUnit:
    kind: str
    name: str  # ``<unit> [part i/n]`` for a part
    content: str
    start_line: int  # 1-based, inclusive
    end_line: int  # 1-based, inclusive
    qualified_name: str  # the unit's, without the part suffix
    parent: str | None
    part: tuple[int, int] | None = None  # (i, n) for a part of a longer unit


def is_blank(line: str) -> bool:
    return not line.strip()


def trimmed(numbers: Sequence[int], lines: Sequence[str]) -> list[int]:
    lo, hi = 0, len(numbers)
    while lo < hi and is_blank(lines[numbers[lo] - 1]):
        lo += 1
    while hi > lo and is_blank(lines[numbers[hi - 1] - 1]):
        hi -= 1
    return list(numbers[lo:hi])


def content_of(numbers: Sequence[int], lines: Sequence[str]) -> str:
    return "".join(lines[n - 1] for n in numbers).rstrip("\r\n")


def bound_units(
    units: Iterable[Unit],
    lines: Sequence[str],
    max_chars: int,
    qualify: Callable[[Unit], str],
) -> list[ParsedUnit]:
    """The chunks of ``units`` in order; ``qualify`` gives each unit's qualified name."""
    out: list[ParsedUnit] = []
    for unit in units:
        out.extend(_bound(unit, lines, max_chars, qualify(unit)))
    return out


def _bound(unit: Unit, lines: Sequence[str], max_chars: int, qname: str) -> list[ParsedUnit]:
    numbers = trimmed(unit.line_numbers, lines)
    if not numbers:
        return []
    content = content_of(numbers, lines)
    if len(content) <= max_chars:
        return [
            ParsedUnit(unit.kind, unit.name, content, numbers[0], numbers[-1], qname, unit.parent)
        ]
    lengths = [len(lines[n - 1]) for n in numbers]
    blank = [is_blank(lines[n - 1]) for n in numbers]
    pieces: list[tuple[str, int, int]] = []
    for group in pack_lines(lengths, blank, max_chars):
        part = trimmed([numbers[i] for i in group], lines)
        if not part:
            continue
        text = content_of(part, lines)
        if len(text) <= max_chars:
            pieces.append((text, part[0], part[-1]))
        else:  # a single line longer than the bound
            pieces.extend(
                (piece, part[0], part[0]) for piece in slice_line(text, max_chars) if piece.strip()
            )
    count = len(pieces)
    return [
        ParsedUnit(
            unit.kind,
            part_name(unit.name, i, count),
            text,
            lo,
            hi,
            qname,
            unit.parent,
            (i, count),
        )
        for i, (text, lo, hi) in enumerate(pieces, start=1)
    ]
