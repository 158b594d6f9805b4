"""The per-file index the sweep records: a file's symbols (its code units, parts merged,
each with its signature line) and its identifiers (name -> lines), built from the
parser's units and the file's text (``file_record``); a repo's index read back
(``RepoIndex``), the unit enclosing a line, and a result line's cut (``clip``)."""

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from neo_assets.code_tools.rules.limits import MAX_LINE_CHARS, SYMBOL_KINDS
from neo_assets.sources.rules.languages import language_of

# An identifier in the languages the parser reads (``$`` for JS/PHP); ``#name`` private
# members and ``@name`` decorators are looked up by their bare name.
IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_PART = re.compile(r" \[part \d+/\d+\]$")


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


def clip(line: str) -> str:
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "…"


def line_hit(repo: str, path: str, line: int, text: str, unit: "Symbol | None") -> dict[str, Any]:
    """A result line of find_references and grep: where, its text (cut) and its unit."""
    at = {"repo": repo, "path": path, "line": line, "text": clip(text)}
    return {**at, "unit": None if unit is None else unit.unit_json()}


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

    # Spellings matching compares, computed once per symbol.
    @cached_property
    def bare(self) -> str:
        return short_name(self.name)

    @cached_property
    def bare_lower(self) -> str:
        return self.bare.lower()

    @cached_property
    def name_lower(self) -> str:
        return self.name.lower()

    @cached_property
    def qualified_lower(self) -> str:
        return self.qualified_name.lower()

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
                Symbol(repo, path, k, n, q, language, s, e, sig, text)
                for k, n, q, s, e, sig, text in syms
            ]
            idents[path] = refs
        return cls(repo, payload["revision"], payload["kind"], files, symbols, idents)


def enclosing_unit(symbols: Sequence[Symbol], line: int) -> Symbol | None:
    """The innermost unit whose lines hold ``line`` (None: module level)."""
    best = None
    for sym in symbols:
        if sym.start_line <= line <= sym.end_line and (
            best is None or sym.end_line - sym.start_line <= best.end_line - best.start_line
        ):
            best = sym
    return best
