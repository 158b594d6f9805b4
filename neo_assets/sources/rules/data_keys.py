"""Top-level keys of JSON, YAML and TOML files as ``(key, first, last)`` line spans (0-based,
inclusive), or None when the file has no top-level mapping (the caller windows it). Pure."""

import json
import re
from collections.abc import Sequence

KeySpan = tuple[str, int, int]

_YAML_KEY = re.compile(
    r"""^(?:"((?:[^"\\]|\\.)*)"|'((?:[^']|'')*)'|([^\s#\-?:,\[\]{}&*!|>'"%@`][^:#]*?))\s*:(?:\s|$)"""
)
_TOML_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_TOML_KEY = re.compile(
    r"""^([A-Za-z0-9_\-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_\-]+|"[^"]*"|'[^']*'))*\s*="""
)


def _with_comments_above(
    starts: list[tuple[str, int]], lines: Sequence[str], first: int
) -> list[tuple[str, int]]:
    out = []
    for name, start in starts:
        j = start
        while j - 1 >= first and lines[j - 1].lstrip().startswith("#"):
            j -= 1
        out.append((name, j))
    return out


def _spans(starts: list[tuple[str, int]], end: int, head: int) -> list[KeySpan]:
    """Spans from each start to the line before the next; keys starting on one line
    (minified JSON, ``a: 1, b: 2``) share one span named by its keys."""
    merged: list[tuple[list[str], int]] = []
    for name, start in starts:
        if merged and merged[-1][1] >= start:
            merged[-1][0].append(name)
        else:
            merged.append(([name], start))
    spans: list[KeySpan] = []
    for k, (names, start) in enumerate(merged):
        stop = merged[k + 1][1] - 1 if k + 1 < len(merged) else end
        label = ", ".join(names[:3]) + (f", ... ({len(names)} keys)" if len(names) > 3 else "")
        spans.append((label, head if k == 0 else start, stop))
    return spans


def yaml_key_spans(lines: Sequence[str]) -> list[KeySpan] | None:
    starts: list[tuple[str, int]] = []
    for i, line in enumerate(lines):
        match = _YAML_KEY.match(line)
        if match:
            raw = match.group(1) or match.group(2) or match.group(3) or ""
            starts.append((raw.strip(), i))
    if not starts:
        return None
    starts = _with_comments_above(starts, lines, 0)
    return _spans(starts, len(lines) - 1, 0)


def toml_key_spans(lines: Sequence[str]) -> list[KeySpan] | None:
    starts: list[tuple[str, int]] = []
    seen: dict[str, int] = {}
    in_string: str | None = None
    for i, line in enumerate(lines):
        if in_string is not None:
            if line.count(in_string) % 2 == 1:
                in_string = None
            continue
        header = _TOML_HEADER.match(line)
        if header and not line.lstrip().startswith("#"):
            name = " ".join(header.group(2).split())
            if header.group(1) == "[[":
                seen[name] = seen.get(name, 0) + 1
                name = f"{name}[{seen[name]}]"
            starts.append((name, i))
        elif not starts or not _TOML_HEADER.match(lines[starts[-1][1]]):
            key = _TOML_KEY.match(line)
            if key:
                starts.append((line.split("=", 1)[0].strip(), i))
        for quote in ('"""', "'''"):
            if line.count(quote) % 2 == 1:
                in_string = quote
                break
    if not starts:
        return None
    starts = _with_comments_above(starts, lines, 0)
    return _spans(starts, len(lines) - 1, 0)


def json_key_spans(text: str) -> list[KeySpan] | None:
    """Keys of a top-level JSON object (comments as in JSONC are skipped)."""
    depth = 0
    line = 0
    i = 0
    n = len(text)
    starts: list[tuple[str, int]] = []
    opened: int | None = None
    closed: int | None = None
    expect_key = False
    comment_line: int | None = None  # a comment right before the next key goes with it
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
        elif c == "/" and text.startswith("//", i):
            if depth == 1 and expect_key and comment_line is None:
                comment_line = line
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        elif c == "/" and text.startswith("/*", i):
            if depth == 1 and expect_key and comment_line is None:
                comment_line = line
            j = text.find("*/", i + 2)
            end = n if j < 0 else j + 2
            line += text.count("\n", i, end)
            i = end
            continue
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            token = text[i : j + 1]
            if depth == 1 and expect_key:
                start = line if comment_line is None else comment_line
                try:
                    starts.append((str(json.loads(token)), start))
                except ValueError:
                    starts.append((token.strip('"'), start))
                expect_key = False
                comment_line = None
            line += token.count("\n")
            i = j + 1
            continue
        elif c in "{[":
            if depth == 0:
                if c == "[" or opened is not None:
                    return None
                opened = line
                expect_key = True
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                closed = line
                break
        elif c == "," and depth == 1:
            expect_key = True
        elif not c.isspace() and depth == 0:
            return None  # a scalar at the top level
        i += 1
    if opened is None or not starts:
        return None
    end = closed if closed is not None else line
    return _spans(starts, end, opened)
