"""The code tools' rules (pure: plain data in, plain data out; no I/O, no clock).

- The per-file index the sweep records: a file's symbols (its code units, parts merged,
  each with its signature line) and its identifiers (name -> lines), built from the
  parser's units and the file's text (``file_record``).
- Matching: ``find_symbols`` (exact, then prefix, then fuzzy), ``find_references``
  (name-based: every line where the identifier occurs as a token, the line that defines
  a unit of that name excluded), the enclosing unit of a line, path globs, line windows.
- The tools' arguments: one declaration per tool (``TOOLS``) that both validates a
  request (``parse_args``: the same rules for HTTP, MCP and the CLI, no coercion: ``"5"``
  is not an integer) and publishes its JSON schema (``input_schema``).
"""

import difflib
import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from neo_assets.core import codes
from neo_assets.query.rules.request import QueryInputError, glob_matches_everything
from neo_assets.sources.rules.languages import known_languages, language_of

# The kinds of unit find_symbol answers (sources/parsers/units.CODE_UNIT_KINDS; a unit
# test keeps them equal).
SYMBOL_KINDS = ("class", "class-config", "function", "method", "type")
LANGUAGES = known_languages()

MAX_NAME_CHARS = 256
MAX_PATTERN_CHARS = 1000
DEFAULT_SYMBOLS = 20
MAX_SYMBOLS = 200
DEFAULT_REFERENCES = 100
MAX_REFERENCES = 1000
DEFAULT_GREP = 100
MAX_GREP = 1000
DEFAULT_READ_LINES = 400
MAX_READ_LINES = 2000
MAX_LIST_FILES = 5000
MAX_LINE_CHARS = 500  # a result line is cut here (minified files have 100 kB lines)
FUZZY_CUTOFF = 0.75

MATCH_EXACT = "exact"
MATCH_PREFIX = "prefix"
MATCH_FUZZY = "fuzzy"
_TIER = {MATCH_EXACT: 0, MATCH_PREFIX: 1, MATCH_FUZZY: 2}

# An identifier in the languages the parser reads (``$`` for JS/PHP); ``#name`` private
# members and ``@name`` decorators are looked up by their bare name.
IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_PART = re.compile(r" \[part \d+/\d+\]$")


# ------------------------------------------------------------------------ the index
@dataclass(frozen=True)
class Unit:
    """A parsed unit as the parser rows give it (one row per part of a long unit)."""

    kind: str
    name: str
    qualified_name: str
    start_line: int | None
    end_line: int | None


def short_name(name: str) -> str:
    """The last segment of a (qualified) name, without a private ``#``: ``Ky.#retry`` ->
    ``retry``."""
    return re.split(r"[.:/\\]+", name)[-1].lstrip("#@")


def split_lines(text: str) -> list[str]:
    """The file's lines as ``git grep`` counts them (``\\n``-separated; no last empty
    line after a final newline)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def merged_symbols(units: Iterable[Unit]) -> list[tuple[str, str, str, int, int]]:
    """Code units of one file, the parts of a long unit merged into one span:
    ``(kind, name, qualified_name, start, end)`` sorted by start line."""
    spans: dict[tuple[str, str, str], list[int]] = {}
    for u in units:
        if u.kind not in SYMBOL_KINDS or u.start_line is None or u.end_line is None:
            continue
        name = _PART.sub("", u.name)
        key = (u.kind, name, u.qualified_name or name)
        span = spans.get(key)
        if span is None:
            spans[key] = [u.start_line, u.end_line]
        else:
            span[0], span[1] = min(span[0], u.start_line), max(span[1], u.end_line)
    return sorted(
        ((k, n, q, s, e) for (k, n, q), (s, e) in spans.items()), key=lambda t: (t[3], -t[4])
    )


_COMMENT = re.compile(r"\s*(?://|/\*|\*|<!--|--|;|#(?![A-Za-z_$\[!]))|\s*#!|\s*$")


def is_comment_line(line: str) -> bool:
    """A blank line, or one that opens with a comment marker (``#`` only when no name
    follows it: ``#retry()`` is a private member)."""
    return _COMMENT.match(line) is not None


def signature_line(lines: Sequence[str], name: str, start: int, end: int) -> int:
    """The first line of a unit that names it and is no comment (a unit's span opens with
    its comments and decorators), else its first line that is no comment, else
    ``start``."""
    bare = short_name(name)
    first_code = None
    in_block = False  # inside a /* ... */ comment that opened on an earlier line
    for number in range(start, min(end, len(lines)) + 1):
        line = lines[number - 1]
        stripped = line.strip()
        if in_block:
            in_block = "*/" not in stripped
            continue
        if stripped.startswith("/*"):
            # JSDoc without leading stars: its example lines name the unit too.
            close = stripped.find("*/", 2)
            in_block = close < 0
            line = "" if in_block else stripped[close + 2 :]
            if not line.strip():
                continue
        if is_comment_line(line):
            continue
        if bare and bare in IDENT.findall(line):
            return number
        if first_code is None:
            first_code = number
    return first_code or start


def identifiers(lines: Sequence[str]) -> dict[str, list[int]]:
    """Every identifier token of the file -> the lines it occurs on (ascending, once per
    line)."""
    found: dict[str, list[int]] = {}
    for number, line in enumerate(lines, start=1):
        for token in set(IDENT.findall(line)):
            found.setdefault(token, []).append(number)
    return found


def file_record(path: str, text: str, blob: str, size: int, units: Iterable[Unit]) -> list[Any]:
    """One file's entry of the index, JSON-ready: ``[blob, language, size, lines,
    symbols, identifiers]``; a symbol is ``[kind, name, qualifiedName, start, end,
    signatureLine, signature]`` (that line's text, clipped)."""
    lines = split_lines(text)
    symbols = []
    for kind, name, qname, start, end in merged_symbols(units):
        sig = signature_line(lines, name, start, end)
        text_of = clip(lines[sig - 1]) if sig <= len(lines) else ""
        symbols.append([kind, name, qname, start, end, sig, text_of])
    return [blob, language_of(path).language, size, len(lines), symbols, identifiers(lines)]


@dataclass(frozen=True)
class Symbol:
    repo: str
    path: str
    kind: str
    name: str
    qualified_name: str
    language: str
    start_line: int
    end_line: int
    signature_line: int
    signature: str = ""
    # Spellings matching compares, computed once when the index is decoded.
    bare: str = ""
    bare_lower: str = ""
    name_lower: str = ""
    qualified_lower: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "repo": self.repo,
            "path": self.path,
            "kind": self.kind,
            "name": self.name,
            "qualifiedName": self.qualified_name,
            "language": self.language,
            "startLine": self.start_line,
            "endLine": self.end_line,
            "signatureLine": self.signature_line,
            "signature": self.signature,
        }

    def unit_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "qualifiedName": self.qualified_name,
            "kind": self.kind,
            "startLine": self.start_line,
            "endLine": self.end_line,
        }


@dataclass(frozen=True)
class FileInfo:
    path: str
    blob: str
    language: str
    size: int
    lines: int


@dataclass
class RepoIndex:
    """One repo's index at one revision, as the tools read it."""

    repo: str
    revision: str
    kind: str  # "git" or "dir": how its files are read
    files: dict[str, FileInfo]
    symbols: dict[str, list[Symbol]]  # by path, sorted by start line
    identifiers: dict[str, dict[str, list[int]]]  # by path

    @classmethod
    def from_payload(cls, repo: str, payload: Mapping[str, Any]) -> "RepoIndex":
        files: dict[str, FileInfo] = {}
        symbols: dict[str, list[Symbol]] = {}
        idents: dict[str, dict[str, list[int]]] = {}
        for path, (blob, language, size, lines, syms, refs) in payload["files"].items():
            files[path] = FileInfo(path, blob, language, size, lines)
            symbols[path] = [
                Symbol(
                    repo,
                    path,
                    k,
                    n,
                    q,
                    language,
                    s,
                    e,
                    sig,
                    text,
                    short_name(n),
                    short_name(n).lower(),
                    n.lower(),
                    q.lower(),
                )
                for k, n, q, s, e, sig, text in syms
            ]
            idents[path] = refs
        return cls(repo, payload["revision"], payload["kind"], files, symbols, idents)

    def enclosing(self, path: str, line: int) -> Symbol | None:
        return enclosing_unit(self.symbols.get(path, ()), line)


def enclosing_unit(symbols: Sequence[Symbol], line: int) -> Symbol | None:
    """The innermost unit whose lines hold ``line`` (None: module level)."""
    best = None
    for sym in symbols:
        if sym.start_line <= line <= sym.end_line and (
            best is None or sym.end_line - sym.start_line <= best.end_line - best.start_line
        ):
            best = sym
    return best


# ------------------------------------------------------------------------ matching
def symbol_tier(sym: Symbol, query: str) -> str | None:
    """How ``sym`` matches ``query`` by its spelling: exact (its name, its qualified name,
    a dotted tail of it, or its bare name), prefix (its bare name starts with it, any
    case), fuzzy (it occurs in its name, any case), or None. Close spellings are the
    fuzzy tier's other half (``find_symbols``)."""
    return _tier(sym, query, short_name(query), query.lower())


def _tier(sym: Symbol, query: str, bare_q: str, low: str) -> str | None:
    if query in (sym.name, sym.qualified_name) or sym.qualified_name.endswith("." + query):
        return MATCH_EXACT
    bare = sym.bare or short_name(sym.name)
    if "." not in query and bare == bare_q:
        return MATCH_EXACT
    low_q = bare_q.lower()
    if low_q and (sym.bare_lower or bare.lower()).startswith(low_q):
        return MATCH_PREFIX
    if low in (sym.qualified_lower or sym.qualified_name.lower()) or low in (
        sym.name_lower or sym.name.lower()
    ):
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


def reference_name(name: str) -> str:
    """The identifier a reference lookup searches: the bare last segment."""
    return short_name(name)


def find_references(
    indexes: Sequence[RepoIndex], name: str, *, limit: int = DEFAULT_REFERENCES
) -> tuple[list[tuple[RepoIndex, str, int, Symbol | None]], bool]:
    """Where the identifier is used: (index, path, line, enclosing unit) for every line
    holding it as a token, minus the signature line of each unit it names; by repo, path,
    line; and whether more were found than ``limit``."""
    ident = reference_name(name)
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


def clip(line: str) -> str:
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "…"


# ------------------------------------------------------------------------ arguments
@dataclass(frozen=True)
class Arg:
    name: str
    type: str  # "string" | "integer" | "boolean"
    description: str
    required: bool = False
    default: Any = None
    minimum: int | None = None
    maximum: int | None = None
    enum: tuple[str, ...] | None = None
    max_length: int = MAX_NAME_CHARS
    examples: tuple[Any, ...] = ()


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    args: tuple[Arg, ...]
    output: dict[str, Any]

    def arg(self, name: str) -> Arg | None:
        return next((a for a in self.args if a.name == name), None)


_REPO_OPT = Arg(
    "repo",
    "string",
    "Only this repo (a slug that list_repos names). Left out: every repo your token may read.",
    examples=("widgets",),
)
_REPO_REQ = Arg(
    "repo",
    "string",
    "The repo (a slug that list_repos names).",
    required=True,
    examples=("widgets",),
)

_UNIT = {
    "type": ["object", "null"],
    "description": "The innermost unit (function, method, class) holding the line; null at "
    "module level.",
    "properties": {
        "name": {"type": "string"},
        "qualifiedName": {"type": "string"},
        "kind": {"type": "string"},
        "startLine": {"type": "integer"},
        "endLine": {"type": "integer"},
    },
}
_REVISIONS = {
    "type": "object",
    "description": "Per repo searched: the revision its index is at (the one search_code "
    "answers from).",
    "additionalProperties": {"type": "string"},
}
_NOT_INDEXED = {
    "type": "array",
    "items": {"type": "string"},
    "description": "Repos searched that have no code index at their indexed revision yet "
    "(the next sweep builds it).",
}
_SYMBOL = {
    "type": "object",
    "properties": {
        "repo": {"type": "string"},
        "path": {"type": "string"},
        "kind": {"type": "string", "enum": list(SYMBOL_KINDS)},
        "name": {"type": "string", "description": "The name within its file (Class.method)."},
        "qualifiedName": {"type": "string"},
        "language": {"type": "string"},
        "startLine": {"type": "integer", "description": "1-based, inclusive."},
        "endLine": {"type": "integer", "description": "1-based, inclusive."},
        "signatureLine": {"type": "integer", "description": "The line that names the unit."},
        "signature": {"type": "string", "description": "That line's text."},
        "match": {"type": "string", "enum": [MATCH_EXACT, MATCH_PREFIX, MATCH_FUZZY]},
    },
    "required": ["repo", "path", "kind", "name", "startLine", "endLine", "signatureLine"],
}
_LINE_HIT = {
    "type": "object",
    "properties": {
        "repo": {"type": "string"},
        "path": {"type": "string"},
        "line": {"type": "integer", "description": "1-based."},
        "text": {"type": "string", "description": f"The line (cut at {MAX_LINE_CHARS} chars)."},
        "unit": _UNIT,
    },
    "required": ["repo", "path", "line", "text", "unit"],
}


def _out(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


TOOLS: dict[str, ToolSpec] = {
    t.name: t
    for t in (
        ToolSpec(
            "find_symbol",
            "Find where a function, method, class or type is defined, by its name or "
            "qualified name (Ky.retry, flask.app.Flask.run). Exact matches come first, then "
            "names starting with it, then close spellings. Each hit has the path, the line "
            "range and the line that names it; read it with read_file.",
            (
                Arg(
                    "name",
                    "string",
                    "The name to look for: a bare name (retry), a dotted one (Ky.retry) or "
                    "a prefix.",
                    required=True,
                    examples=("retry", "Ky.retry"),
                ),
                Arg(
                    "kind",
                    "string",
                    "Only units of this kind.",
                    enum=SYMBOL_KINDS,
                ),
                _REPO_OPT,
                Arg("language", "string", "Only units in this language.", enum=LANGUAGES),
                Arg(
                    "max_results",
                    "integer",
                    "At most this many hits.",
                    default=DEFAULT_SYMBOLS,
                    minimum=1,
                    maximum=MAX_SYMBOLS,
                ),
            ),
            _out(
                {
                    "symbols": {"type": "array", "items": _SYMBOL},
                    "truncated": {"type": "boolean"},
                    "revisions": _REVISIONS,
                    "notIndexed": _NOT_INDEXED,
                },
                ["symbols", "truncated", "revisions", "notIndexed"],
            ),
        ),
        ToolSpec(
            "find_references",
            "Find where an identifier is used: every line of the indexed files where the "
            "name occurs as a whole identifier (code, comments and strings alike), with the "
            "unit that holds the line; the line that defines a unit of that name is left "
            "out. Name-based, not type-resolved: different things with one name all show.",
            (
                Arg(
                    "name",
                    "string",
                    "The identifier; of a dotted name (Ky.retry) the last part is looked up.",
                    required=True,
                    examples=("retry",),
                ),
                _REPO_OPT,
                Arg(
                    "max_results",
                    "integer",
                    "At most this many uses.",
                    default=DEFAULT_REFERENCES,
                    minimum=1,
                    maximum=MAX_REFERENCES,
                ),
            ),
            _out(
                {
                    "references": {"type": "array", "items": _LINE_HIT},
                    "truncated": {"type": "boolean"},
                    "revisions": _REVISIONS,
                    "notIndexed": _NOT_INDEXED,
                },
                ["references", "truncated", "revisions", "notIndexed"],
            ),
        ),
        ToolSpec(
            "grep",
            "Search the files of your repos at their indexed revision with a regular "
            "expression (RE2 syntax: no backreferences or lookaround), line by line like "
            "git grep. Each match is path and line with the unit that holds it. Time and "
            "output are bounded: a cut answer says truncated and why.",
            (
                Arg(
                    "pattern",
                    "string",
                    "The regular expression (RE2), matched against each line.",
                    required=True,
                    max_length=MAX_PATTERN_CHARS,
                    examples=("retry\\(", "^def "),
                ),
                _REPO_OPT,
                Arg(
                    "path",
                    "string",
                    "Only files whose path matches this glob (src/**/*.ts; * also crosses "
                    "folders) or lie under this folder.",
                    examples=("source/*.ts",),
                ),
                Arg(
                    "case_sensitive",
                    "boolean",
                    "Match case exactly (true) or ignore it (false).",
                    default=True,
                ),
                Arg(
                    "max_results",
                    "integer",
                    "Stop after this many matching lines.",
                    default=DEFAULT_GREP,
                    minimum=1,
                    maximum=MAX_GREP,
                ),
            ),
            _out(
                {
                    "matches": {"type": "array", "items": _LINE_HIT},
                    "truncated": {"type": "boolean"},
                    "truncatedBy": {
                        "type": ["string", "null"],
                        "enum": ["max_results", "time", None],
                        "description": "Why the answer was cut: the result bound or the "
                        "time bound; null when complete.",
                    },
                    "filesSearched": {"type": "integer"},
                    "revisions": _REVISIONS,
                    "notIndexed": _NOT_INDEXED,
                },
                ["matches", "truncated", "truncatedBy", "filesSearched", "revisions"],
            ),
        ),
        ToolSpec(
            "read_file",
            f"Read lines of one file at its indexed revision (at most {MAX_READ_LINES} "
            f"lines a call; {DEFAULT_READ_LINES} from start_line when end_line is left out). "
            "Paths are those list_files, find_symbol and grep give.",
            (
                _REPO_REQ,
                Arg(
                    "path",
                    "string",
                    "The file's path in the repo, as list_files gives it.",
                    required=True,
                    max_length=1024,
                    examples=("source/core/Ky.ts",),
                ),
                Arg(
                    "start_line",
                    "integer",
                    "The first line to read (1-based).",
                    default=1,
                    minimum=1,
                    maximum=10_000_000,
                ),
                Arg(
                    "end_line",
                    "integer",
                    "The last line to read (inclusive).",
                    minimum=1,
                    maximum=10_000_000,
                ),
            ),
            _out(
                {
                    "repo": {"type": "string"},
                    "path": {"type": "string"},
                    "revision": {"type": "string"},
                    "language": {"type": "string"},
                    "startLine": {"type": "integer"},
                    "endLine": {"type": "integer"},
                    "totalLines": {"type": "integer"},
                    "truncated": {
                        "type": "boolean",
                        "description": "More lines follow endLine.",
                    },
                    "text": {"type": "string", "description": "The lines, joined by newlines."},
                    "units": {
                        "type": "array",
                        "items": _SYMBOL,
                        "description": "The units that overlap the lines read.",
                    },
                },
                ["repo", "path", "revision", "startLine", "endLine", "totalLines", "text"],
            ),
        ),
        ToolSpec(
            "list_files",
            "List the files of a repo at its indexed revision (the files the parser reads), "
            "with language, size in bytes and line count.",
            (
                _REPO_REQ,
                Arg(
                    "path_glob",
                    "string",
                    "Only paths matching this glob (src/**/*.py; * also crosses folders) or "
                    "under this folder.",
                    examples=("source/**",),
                ),
            ),
            _out(
                {
                    "repo": {"type": "string"},
                    "revision": {"type": "string"},
                    "files": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "path": {"type": "string"},
                                "language": {"type": "string"},
                                "size": {"type": "integer"},
                                "lines": {"type": "integer"},
                            },
                            "required": ["path", "language", "size", "lines"],
                        },
                    },
                    "truncated": {"type": "boolean"},
                },
                ["repo", "revision", "files", "truncated"],
            ),
        ),
    )
}


def input_schema(spec: ToolSpec) -> dict[str, Any]:
    """The tool's JSON schema (draft 2020-12), every argument described."""
    props: dict[str, Any] = {}
    for a in spec.args:
        p: dict[str, Any] = {"type": a.type, "description": a.description}
        if a.type == "string":
            p |= {"minLength": 1, "maxLength": a.max_length}
        if a.minimum is not None:
            p["minimum"] = a.minimum
        if a.maximum is not None:
            p["maximum"] = a.maximum
        if a.enum is not None:
            p["enum"] = list(a.enum)
        if a.default is not None:
            p["default"] = a.default
        if a.examples:
            p["examples"] = list(a.examples)
        props[a.name] = p
    return {
        "type": "object",
        "properties": props,
        "required": [a.name for a in spec.args if a.required],
        "additionalProperties": False,
    }


def _bad(name: str, message: str) -> QueryInputError:
    return QueryInputError(codes.QUERY_INVALID, f"{name}: {message}", name)


def _check(a: Arg, value: Any) -> Any:
    if a.type == "integer":
        if type(value) is not int or not (a.minimum or 0) <= value <= (a.maximum or value):
            raise _bad(
                a.name,
                f"must be an integer from {a.minimum} to {a.maximum} (got {str(value)[:32]})",
            )
    elif a.type == "boolean":
        if type(value) is not bool:
            raise _bad(a.name, "must be true or false")
    else:
        if type(value) is not str or not value.strip():
            raise _bad(
                a.name, "must be a non-empty string" + ("" if a.required else " (or left out)")
            )
        if len(value) > a.max_length or "\x00" in value:
            raise _bad(a.name, f"must be at most {a.max_length} characters, without NUL")
        if a.enum is not None and value not in a.enum:
            raise _bad(a.name, f"must be one of {', '.join(a.enum)} (got {value[:40]!r})")
    return value


def parse_args(tool: str, body: Any) -> dict[str, Any]:
    """The tool's arguments from ``body`` (a decoded JSON object), defaults filled, or a
    QueryInputError naming the field and the fix. No coercion: ``"5"`` is no integer."""
    return check_args(TOOLS[tool], body)


def check_args(spec: ToolSpec, body: Any) -> dict[str, Any]:
    """``parse_args`` for any declared tool (``spec``)."""
    tool = spec.name
    if not isinstance(body, Mapping):
        raise QueryInputError(codes.QUERY_INVALID, "the arguments must be a JSON object", None)
    names = [a.name for a in spec.args]
    for key in body:
        if key not in names:
            raise QueryInputError(
                codes.QUERY_UNKNOWN_FIELD,
                f"unknown field {str(key)[:64]!r}; {tool} takes {', '.join(names)}",
                str(key)[:64],
            )
    out: dict[str, Any] = {}
    for a in spec.args:
        value = body.get(a.name)
        if value is None:
            if a.required:
                raise _bad(a.name, f"is required ({a.description})")
            out[a.name] = a.default
            continue
        out[a.name] = _check(a, value)
    for glob_field in ("path", "path_glob"):
        glob = out.get(glob_field)
        if tool != "read_file" and glob is not None and glob_matches_everything(glob):
            raise _bad(glob_field, f"the glob {glob!r} matches every path; leave it out instead")
    if tool == "read_file" and out["end_line"] is not None and out["end_line"] < out["start_line"]:
        raise _bad("end_line", f"must be at least start_line ({out['start_line']})")
    return out


def portable(schema: Any) -> Any:
    """``schema`` with every nullable ``type`` array (``["string", "null"]``) spelled as
    ``anyOf`` branches of one type each, which clients that map tool schemas onto a
    single-type dialect accept (the MCP Inspector's ``--strict`` lint warns otherwise)."""
    if isinstance(schema, list):
        return [portable(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: portable(v) for k, v in schema.items()}
    types = out.get("type")
    if not isinstance(types, list):
        return out
    top = {k: out.pop(k) for k in ("description", "default", "examples") if k in out}
    out.pop("type")
    if "enum" in out:
        out["enum"] = [v for v in out["enum"] if v is not None]
    branches = [{"type": t, **out} if t != "null" else {"type": "null"} for t in types]
    return {"anyOf": branches, **top}
