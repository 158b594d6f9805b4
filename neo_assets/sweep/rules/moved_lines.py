"""A chunk whose file lines moved (code added or removed above it) keeps its id, so its row
is present and not written again: its ``startLine`` / ``endLine`` are restamped instead.
Pure. Design: docs/design/sweep.md#lines-that-moved"""

from collections.abc import Mapping
from typing import Any

LINE_KEYS = ("startLine", "endLine")
# How rows' lines are stamped, in the chunking identity: a release that changes it (2: parts
# of module rows on their true lines, and moved chunks restamped) parses every file once
# at the next sweep, so rows written wrong before are restamped; nothing is embedded again.
LINES_STAMP = 2


def moved_lines(
    declared: Mapping[str, tuple[int | None, int | None]],
    stored: Mapping[str, Mapping[str, Any]],
) -> dict[str, dict[str, Any]]:
    """Each stored row whose lines are not its declared chunk's: the two line stamps to
    write (the store merges them into the row's metadata, so no other stamp is written
    back). A row with no declared lines, or not declared, is left as it is."""
    out: dict[str, dict[str, Any]] = {}
    for rid, metadata in stored.items():
        lines = declared.get(rid)
        if lines is None or None in lines:
            continue
        if tuple(metadata.get(key) for key in LINE_KEYS) != lines:
            out[rid] = dict(zip(LINE_KEYS, lines, strict=True))
    return out
