"""Which behaviour of the ``neo-code`` parser a declared version selects (1.x the original,
2.x syntax-aware; any other major refused), and the registry of parsers a repo may
declare (``PARSERS``), readable without importing a parser."""

import difflib
import re

GENERATION_WINDOWS = 1
GENERATION_UNITS = 2
SUPPORTED_MAJORS = {0: GENERATION_WINDOWS, 1: GENERATION_WINDOWS, 2: GENERATION_UNITS}

_MAJOR_RE = re.compile(r"(0|[1-9]\d*)\.")

NEO_CODE = "neo-code"
# Every parser a repo may declare: its id -> the majors it has (major -> generation).
PARSERS: dict[str, dict[int, int]] = {NEO_CODE: SUPPORTED_MAJORS}


def available_parsers() -> str:
    """The declarable parsers and their versions, as messages show them."""
    return ", ".join(
        f"{pid} (versions {', '.join(f'{m}.x' for m in sorted(majors))})"
        for pid, majors in sorted(PARSERS.items())
    )


def unknown_parser_problem(parser_id: str) -> str | None:
    """Why ``parser_id`` cannot be declared (no such parser), or None when it can."""
    if parser_id in PARSERS:
        return None
    close = difflib.get_close_matches(parser_id, list(PARSERS), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return (
        f"unknown parser {parser_id!r}; found {parser_id!r}; allowed: one of the "
        f"available parsers: {available_parsers()}{hint}"
    )


def parser_generation(version: str) -> int:
    """GENERATION_WINDOWS or GENERATION_UNITS for a semantic version; ValueError for a
    major this parser does not have."""
    match = _MAJOR_RE.match(version) if isinstance(version, str) else None
    if match is None:
        raise ValueError(f"neo-code parser version must be MAJOR.MINOR.PATCH, got {version!r}")
    major = int(match.group(1))
    if major not in SUPPORTED_MAJORS:
        raise ValueError(
            f"neo-code has no parser version {version!r}; found major {major}; allowed: "
            f"{', '.join(f'{m}.x' for m in sorted(SUPPORTED_MAJORS))} "
            "(1.x windows and Python/Markdown units, 2.x syntax-aware units)"
        )
    return SUPPORTED_MAJORS[major]


def unsupported_version_problem(version: str) -> str | None:
    """Why ``version`` cannot be declared for neo-code, or None when it can."""
    try:
        parser_generation(version)
    except ValueError as exc:
        return str(exc)
    return None
