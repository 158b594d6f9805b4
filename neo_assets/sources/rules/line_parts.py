"""Bounding a unit: which lines go into which part when a unit's content exceeds the chunk
size (cut at line boundaries, preferring a blank line). Pure over line lengths."""

from collections.abc import Sequence


def pack_lines(lengths: Sequence[int], blank: Sequence[bool], max_chars: int) -> list[range]:
    """Consecutive index ranges covering ``range(len(lengths))`` in order; each range's
    summed length is at most ``max_chars`` unless it is a single longer line."""
    if max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, got {max_chars}")
    if len(lengths) != len(blank):
        raise ValueError("lengths and blank must be the same length")
    groups: list[range] = []
    start, size, i = 0, 0, 0
    n = len(lengths)
    while i < n:
        if i > start and size + lengths[i] > max_chars:
            cut = _preferred_cut(blank, start, i)
            groups.append(range(start, cut))
            start = cut
            size = sum(lengths[start:i])
            continue
        size += lengths[i]
        i += 1
    if start < n:
        groups.append(range(start, n))
    return groups


def _preferred_cut(blank: Sequence[bool], start: int, stop: int) -> int:
    """Where to end the group start..stop-1: after its last blank line in the second
    half, else at stop."""
    half = start + (stop - start) // 2
    for j in range(stop - 1, half, -1):
        if blank[j]:
            return j + 1
    return stop


def slice_line(text: str, max_chars: int) -> list[str]:
    """A single over-long line in slices of at most ``max_chars`` characters."""
    return [text[i : i + max_chars] for i in range(0, len(text), max_chars)]


def part_name(name: str, index: int, count: int) -> str:
    """The name of part ``index`` (1-based) of ``count`` of the unit ``name``."""
    return f"{name} [part {index}/{count}]"
