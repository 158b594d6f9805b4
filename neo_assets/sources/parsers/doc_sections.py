"""Docs by section (parser 2.x): Markdown as parser 1.x reads it, reStructuredText and
AsciiDoc by their headings (sources/rules/doc_headings.py). A section runs from its
heading to the next heading of any level and is named by its heading path
``Guide > Install``, its parent the path without the last title; text before the first
heading is a section named by the source path."""

from collections.abc import Sequence

from neo_assets.sources.parsers.neo_code_v1 import _markdown_headings
from neo_assets.sources.parsers.units import Unit
from neo_assets.sources.rules.chunk_kinds import KIND_SECTION
from neo_assets.sources.rules.doc_headings import asciidoc_headings, heading_paths, rst_headings

_HEADINGS = {"markdown": _markdown_headings, "rst": rst_headings, "asciidoc": asciidoc_headings}


def doc_units(language: str, source_path: str, lines: Sequence[str]) -> list[Unit]:
    headings = _HEADINGS[language](lines)
    units: list[Unit] = []
    first = headings[0][0] if headings else len(lines)
    if first > 0:
        units.append(Unit(KIND_SECTION, source_path, tuple(range(1, first + 1))))
    for n, ((start, _, _), path) in enumerate(zip(headings, heading_paths(headings), strict=True)):
        end = headings[n + 1][0] if n + 1 < len(headings) else len(lines)
        parent = " > ".join(path[:-1]) or None
        units.append(Unit(KIND_SECTION, " > ".join(path), tuple(range(start + 1, end + 1)), parent))
    return units
