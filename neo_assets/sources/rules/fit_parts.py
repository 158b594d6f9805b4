"""Split to fit: a chunk over the provider's band becomes consecutive parts that each fit,
nothing dropped or truncated. Pure over text and a ``fits`` predicate.
Design: docs/design/sources.md#split-to-fit"""

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Piece:
    """One part: its text and its lines, 0-based offsets from the chunk's first line."""

    text: str
    first_line: int
    last_line: int


def fit_parts(content: str, fits: Callable[[str], bool]) -> list[Piece]:
    """``content`` itself when it fits, else parts that each fit. ``fits`` must hold for a prefix
    of a fitting text; a single character that does not fit is still its own part."""
    if not content or fits(content):
        return [Piece(content, 0, max(0, content.count("\n") - _ends_with_newline(content)))]
    lines = content.splitlines(keepends=True)
    pieces: list[Piece] = []
    start = 0
    while start < len(lines):
        end = _longest_fit(lines, start, fits)
        if end == start:  # this one line alone is over the band: cut it by characters
            pieces.extend(Piece(part, start, start) for part in _char_parts(lines[start], fits))
            start += 1
            continue
        if end < len(lines):
            end = _preferred_cut(lines, start, end)
        pieces.append(Piece("".join(lines[start:end]), start, end - 1))
        start = end
    return pieces


def _ends_with_newline(text: str) -> int:
    return 1 if text.endswith("\n") else 0


def _longest_fit(lines: list[str], start: int, fits: Callable[[str], bool]) -> int:
    """The largest ``end`` such that ``lines[start:end]`` fits (``start`` when none does):
    doubling, then bisection, so a part costs O(log lines) counts."""
    if not fits(lines[start]):
        return start
    good, step = start + 1, 1
    bad = len(lines) + 1
    while good < len(lines):
        probe = min(len(lines), good + step)
        if fits("".join(lines[start:probe])):
            good = probe
            step *= 2
        else:
            bad = probe
            break
    while bad - good > 1:
        mid = (good + bad) // 2
        if fits("".join(lines[start:mid])):
            good = mid
        else:
            bad = mid
    return good


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _preferred_cut(lines: list[str], start: int, end: int) -> int:
    """Where to end a part that could run to ``end`` (exclusive), searched in the second
    half of ``start..end``: after the last blank line, else before the least-indented
    non-blank line (the latest such), else at ``end``."""
    half = start + max(1, (end - start) // 2)
    for cut in range(end, half - 1, -1):
        if cut > start and not lines[cut - 1].strip():
            return cut
    best, best_indent = end, None
    for cut in range(end, half - 1, -1):
        if cut <= start or cut >= len(lines) or not lines[cut].strip():
            continue
        indent = _indent(lines[cut])
        if best_indent is None or indent < best_indent:
            best, best_indent = cut, indent
    return best


def _char_parts(line: str, fits: Callable[[str], bool]) -> list[str]:
    """A line over the band, as consecutive slices that each fit (at least one char)."""
    out: list[str] = []
    rest = line
    while rest:
        if fits(rest):
            out.append(rest)
            break
        good, bad = 1, len(rest)
        while bad - good > 1:
            mid = (good + bad) // 2
            if fits(rest[:mid]):
                good = mid
            else:
                bad = mid
        out.append(rest[:good])
        rest = rest[good:]
    return out
