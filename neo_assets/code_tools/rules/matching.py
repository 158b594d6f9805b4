"""Matching: ``find_symbols`` (exact, then prefix, then fuzzy), ``find_references``
(name-based: every line where the identifier occurs as a token, the line that defines a
unit of that name excluded), path globs, line windows, grep's prefilter."""

import difflib
import fnmatch
import re
from collections.abc import Sequence
from typing import Any

from neo_assets.code_tools.rules.index import RepoIndex, Symbol, enclosing_unit, short_name
from neo_assets.code_tools.rules.limits import (
    DEFAULT_READ_LINES,
    DEFAULT_REFERENCES,
    DEFAULT_SYMBOLS,
    FUZZY_CUTOFF,
    MAX_READ_LINES,
)

MATCH_EXACT = "exact"
MATCH_PREFIX = "prefix"
MATCH_FUZZY = "fuzzy"
_TIER = {MATCH_EXACT: 0, MATCH_PREFIX: 1, MATCH_FUZZY: 2}


def _tier(sym: Symbol, query: str, bare_q: str, low: str) -> str | None:
    if query in (sym.name, sym.qualified_name) or sym.qualified_name.endswith("." + query):
        return MATCH_EXACT
    if "." not in query and sym.bare == bare_q:
        return MATCH_EXACT
    low_q = bare_q.lower()
    if low_q and sym.bare_lower.startswith(low_q):
        return MATCH_PREFIX
    if low in sym.qualified_lower or low in sym.name_lower:
        return MATCH_FUZZY
    return None


def find_symbols(
    indexes: Sequence[RepoIndex],
    name: str,
    *,
    kind: str | None = None,
    language: str | None = None,
    limit: int = DEFAULT_SYMBOLS,
) -> tuple[list[dict[str, Any]], bool]:
    """Definitions matching ``name``, exact first, then prefix, then fuzzy (a substring,
    or a bare name spelled closely: difflib ratio >= FUZZY_CUTOFF, for names of 4+
    characters), within a tier by repo, path and line; and whether more matched than
    ``limit``."""
    found: list[tuple[int, str, str, int, Symbol]] = []
    unmatched: dict[str, list[Symbol]] = {}
    bare_q, low = short_name(name), name.lower()
    for index in indexes:
        for syms in index.symbols.values():
            for sym in syms:
                if (kind is not None and sym.kind != kind) or (
                    language is not None and sym.language != language
                ):
                    continue
                tier = _tier(sym, name, bare_q, low)
                if tier is not None:
                    found.append((_TIER[tier], sym.repo, sym.path, sym.start_line, sym))
                else:
                    unmatched.setdefault(sym.bare_lower, []).append(sym)
    low_q = bare_q.lower()
    if len(found) <= limit and len(low_q) >= 4 and unmatched:
        # A ratio of FUZZY_CUTOFF needs lengths within that ratio of each other.
        near = [
            n
            for n in unmatched
            if min(len(n), len(low_q)) >= FUZZY_CUTOFF * max(len(n), len(low_q)) * 0.8
        ]
        for close in difflib.get_close_matches(low_q, near, n=limit, cutoff=FUZZY_CUTOFF):
            for sym in unmatched[close]:
                found.append((_TIER[MATCH_FUZZY], sym.repo, sym.path, sym.start_line, sym))
    found.sort(key=lambda t: t[:4])
    tiers = {v: k for k, v in _TIER.items()}
    out = [{**sym.as_json(), "match": tiers[t]} for t, _r, _p, _l, sym in found[:limit]]
    return out, len(found) > limit


def find_references(
    indexes: Sequence[RepoIndex], name: str, *, limit: int = DEFAULT_REFERENCES
) -> tuple[list[tuple[RepoIndex, str, int, Symbol | None]], bool]:
    """Where the identifier is used: (index, path, line, enclosing unit) for every line
    holding it as a token, minus the signature line of each unit it names; by repo, path,
    line; and whether more were found than ``limit``."""
    ident = short_name(name)
    hits: list[tuple[RepoIndex, str, int, Symbol | None]] = []
    for index in indexes:
        for path in sorted(index.identifiers):
            lines = index.identifiers[path].get(ident)
            if not lines:
                continue
            syms = index.symbols.get(path, [])
            defining = {s.signature_line for s in syms if short_name(s.name) == ident}
            for line in lines:
                if line in defining:
                    continue
                hits.append((index, path, line, enclosing_unit(syms, line)))
                if len(hits) > limit:
                    return hits[:limit], True
    return hits, False


def path_matches(path: str, glob: str | None) -> bool:
    """A shell glob over the whole path (``*`` crosses folders: ``src/*.py`` holds
    ``src/a/b.py``); a glob without a wildcard also matches the folder it names."""
    if glob is None:
        return True
    if fnmatch.fnmatchcase(path, glob):
        return True
    return not any(c in glob for c in "*?[") and path.startswith(glob.rstrip("/") + "/")


def line_window(total: int, start: int | None, end: int | None) -> tuple[int, int, bool]:
    """The lines a read returns: ``start`` (default 1) to ``end`` (default ``start`` +
    DEFAULT_READ_LINES - 1), at most MAX_READ_LINES, cut to the file; and whether lines
    follow the window. A window past the end is empty (start > end)."""
    first = start or 1
    last = end if end is not None else first + DEFAULT_READ_LINES - 1
    last = min(last, first + MAX_READ_LINES - 1, total)
    return first, last, last < total


# What makes a pattern's whole-text search differ from its line-by-line one beyond line
# boundaries: text anchors and a flag group that turns multi-line mode off.
_NOT_PREFILTERABLE = re.compile(r"\\[Az]|\(\?[a-zA-Z]*-[a-zA-Z]*m")


def prefilter_pattern(pattern: str) -> str | None:
    """A pattern that matches somewhere in a file's whole text whenever ``pattern``
    matches one of its lines (``(?m)``: ``^`` and ``$`` at line boundaries), so a file it
    does not match is skipped unread line by line; None when no such is known."""
    return None if _NOT_PREFILTERABLE.search(pattern) else "(?m)" + pattern
