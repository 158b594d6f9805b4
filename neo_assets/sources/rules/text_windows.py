"""Line windows for plain text (parser 2.x): consecutive windows of at most
``window_lines`` lines and ``max_chars`` characters, each cut after the last blank line
of its second half when it has one (a paragraph boundary), else where it is full.
Pure over line lengths and blankness; indices are 0-based, ranges end-exclusive."""

from collections.abc import Sequence


def window_ranges(
    lengths: Sequence[int], blank: Sequence[bool], window_lines: int, max_chars: int
) -> list[range]:
    if window_lines < 1 or max_chars < 1:
        raise ValueError("window_lines and max_chars must be at least 1")
    out: list[range] = []
    n = len(lengths)
    start = 0
    while start < n:
        end = start + 1
        size = lengths[start]
        while end < n and end - start < window_lines and size + lengths[end] <= max_chars:
            size += lengths[end]
            end += 1
        if end < n:
            half = start + (end - start) // 2
            for j in range(end - 1, half, -1):
                if blank[j]:
                    end = j + 1
                    break
        out.append(range(start, end))
        start = end
    return out
