"""Which file line each line of a row's text is: a module or class row's text is its lines
less those of the units nested in it, so its n-th text line is not its first line plus n.
Pure. Design: docs/design/sources.md#split-to-fit"""

from collections.abc import Iterable


def text_line_numbers(first: int, count: int, nested: Iterable[tuple[int, int]]) -> list[int]:
    """The file line of each of a row's ``count`` text lines, the row starting at line
    ``first`` and its text skipping the ``nested`` spans (first, last line), which come in
    line order; only as many spans are read as the text reaches."""
    spans = iter(nested)
    span = next(spans, None)
    out: list[int] = []
    at = first
    while len(out) < count:
        while span is not None and span[0] <= at:
            at = max(at, span[1] + 1)
            span = next(spans, None)
        out.append(at)
        at += 1
    return out
