"""When a syntax tree with errors is still worth chunking by its units: tree-sitter recovers
around errors, but past ``ERROR_SHARE_LIMIT`` or ``ERROR_RUN_LIMIT`` the units are
guesses and the file is windowed."""

from collections.abc import Iterable

ERROR_SHARE_LIMIT = 0.10
ERROR_RUN_LIMIT = 40

REASON_SYNTAX_ERRORS = "syntax-errors"
REASON_GRAMMAR_UNUSABLE = "grammar-unusable"
REASON_TOO_DEEP = "too-deep"


def syntax_fallback_reason(
    error_spans: Iterable[tuple[int, int]], non_blank_lines: set[int] | frozenset[int]
) -> str | None:
    """REASON_SYNTAX_ERRORS when the error spans (1-based inclusive line ranges) exceed
    the rule above, else None."""
    covered: set[int] = set()
    for first, last in error_spans:
        if last - first + 1 >= ERROR_RUN_LIMIT:
            return REASON_SYNTAX_ERRORS
        covered.update(range(first, last + 1))
    if not non_blank_lines:
        return None
    share = len(covered & non_blank_lines) / len(non_blank_lines)
    return REASON_SYNTAX_ERRORS if share >= ERROR_SHARE_LIMIT else None
