"""The code tools, one declaration each (``TOOLS``): their arguments and their answers'
JSON schema; ``parse_args`` checks a request against its tool's declaration."""

from dataclasses import replace
from typing import Any

from neo_assets.code_tools.rules.arguments import Arg, ToolSpec, check_args
from neo_assets.code_tools.rules.limits import (
    DEFAULT_GREP,
    DEFAULT_READ_LINES,
    DEFAULT_REFERENCES,
    DEFAULT_SYMBOLS,
    LANGUAGES,
    MAX_GREP,
    MAX_LINE_CHARS,
    MAX_PATTERN_CHARS,
    MAX_READ_LINES,
    MAX_REFERENCES,
    MAX_SYMBOLS,
    SYMBOL_KINDS,
)
from neo_assets.code_tools.rules.matching import MATCH_EXACT, MATCH_FUZZY, MATCH_PREFIX

_REPO_OPT = Arg(
    "repo",
    "string",
    "Only this repo (a slug that list_repos names). Left out: every repo your token may read.",
    examples=("widgets",),
)
_REPO_REQ = replace(
    _REPO_OPT, description="The repo (a slug that list_repos names).", required=True
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


def _searched(hits: str, item: dict[str, Any]) -> dict[str, Any]:
    """The answer of a search over the caller's repos: its hits, then what it searched."""
    return _out(
        {
            hits: {"type": "array", "items": item},
            "truncated": {"type": "boolean"},
            "revisions": _REVISIONS,
            "notIndexed": _NOT_INDEXED,
        },
        [hits, "truncated", "revisions", "notIndexed"],
    )


def _max_results(description: str, default: int, maximum: int) -> Arg:
    return Arg("max_results", "integer", description, default=default, minimum=1, maximum=maximum)


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
                _max_results("At most this many hits.", DEFAULT_SYMBOLS, MAX_SYMBOLS),
            ),
            _searched("symbols", _SYMBOL),
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
                _max_results("At most this many uses.", DEFAULT_REFERENCES, MAX_REFERENCES),
            ),
            _searched("references", _LINE_HIT),
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
                _max_results("Stop after this many matching lines.", DEFAULT_GREP, MAX_GREP),
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


def parse_args(tool: str, body: Any) -> dict[str, Any]:
    """The tool's arguments from ``body`` (a decoded JSON object), defaults filled, or a
    QueryInputError naming the field and the fix. No coercion: ``"5"`` is no integer."""
    return check_args(TOOLS[tool], body)
