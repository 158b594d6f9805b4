"""What the lexical index reads of a row besides its own text: the class or impl block
holding a function, and the doc comment a blank line above it that the parser left in
the module row. Pure. Design: docs/design/query.md#ranking"""

import re
from collections.abc import Hashable, Mapping, Sequence

from neo_assets.query.rules.ranking import part_of, unit_part
from neo_assets.sources.rules.line_numbers import text_line_numbers

_CONTAINER_KINDS = frozenset({"class"})  # class, struct, interface, trait, impl, enum
_MEMBER_KINDS = frozenset({"function", "method"})


def enclosing_blocks(
    rows: Sequence[tuple[str, Hashable, str, str, int, int]],
) -> dict[str, tuple[str, str]]:
    """For each function or method row of ``(id, file, kind, name, first line, last
    line)`` (``file`` names one file: its repo and path): (id, name) of the innermost
    class-like row of its file whose lines hold it
    (``impl ToValue for Rc`` for a Rust method, whose own text names neither). Units nest
    (they are syntax nodes), so one pass per file with a stack of open blocks finds it."""
    by_path: dict[Hashable, list[tuple[int, int, int, str, str]]] = {}
    for rid, path, kind, name, first, last in rows:
        if kind in _CONTAINER_KINDS and name:
            by_path.setdefault(path, []).append((first, -last, 0, rid, name))
        elif kind in _MEMBER_KINDS:
            by_path.setdefault(path, []).append((first, -last, 1, rid, name))
    out: dict[str, tuple[str, str]] = {}
    for events in by_path.values():
        open_blocks: list[tuple[int, str, str]] = []  # (last line, id, name), innermost last
        for first, neg_last, member, rid, name in sorted(events):
            while open_blocks and open_blocks[-1][0] < first:
                open_blocks.pop()
            if not member:
                open_blocks.append((-neg_last, rid, name))
            elif open_blocks and open_blocks[-1][0] >= -neg_last:
                out[rid] = open_blocks[-1][1:]
    return out


_COMMENT_END = re.compile(r"^\s*(?:\*/|/\*.*\*/\s*$|\*|//|#(?!!))")
_COMMENT_START = re.compile(r"^\s*/\*")
_LINE_COMMENT = re.compile(r"^\s*(?://|#(?!!))")
DETACHED_GAP = 1  # blank lines allowed between a doc comment and its function


def _pieces(
    rows: Sequence[tuple[str, str, str, int, int, str]],
) -> list[tuple[int, int, int | None, list[str]]]:
    """A file's rows as (first line, kind rank, last line or None when to be walked, text
    lines), with a unit the sweep cut into ``[part i/n]`` (lines counted from its first,
    one after another) joined again: a module part's line numbers count its own text, not
    the file's, and only the joined text read from its first line finds them."""
    groups: dict[tuple[str, str], list[tuple[int, int, int, str]]] = {}
    out: list[tuple[int, int, int | None, list[str]]] = []
    for _rid, name, kind, first, last, text in rows:
        if not 0 < first <= last:
            continue
        rank = 0 if kind in _MEMBER_KINDS else 2 if kind == "module" else 1
        cut = part_of(name)
        if cut:
            groups.setdefault((cut[0], kind), []).append((cut[1], first, last, text))
        else:
            out.append((first, rank, last, _text_lines(text)))
    for (_base, kind), parts in groups.items():
        rank = 0 if kind in _MEMBER_KINDS else 2 if kind == "module" else 1
        parts.sort()
        joined = parts[0][3]
        for (_i, _f, last, _t), (_j, first, _l, text) in zip(parts, parts[1:], strict=False):
            if first not in (last, last + 1):  # not one cut unit: each part its own row
                break
            newline = first == last + 1 and not joined.endswith("\n")
            joined += ("\n" if newline else "") + text
        else:
            out.append((parts[0][1], rank, None, _text_lines(joined)))
            continue
        out += [(first, rank, last, _text_lines(text)) for _i, first, last, text in parts]
    return out


def _text_lines(text: str) -> list[str]:
    """A row's text by line (a part's text may end with its last line's newline)."""
    return text.removesuffix("\n").split("\n")


def file_lines(
    rows: Sequence[tuple[str, str, str, int, int, str]],
) -> dict[int, str]:
    """A file's lines by number, rebuilt from its rows ``(id, name, kind, first line, last
    line, text)``: a row's text is its lines less those of the units nested in it (a module
    row is the file less its units). Walked innermost first, so each unit's span is known
    when the row around it skips it; a row whose text does not end on its last line is
    left out. A line in no row's span is blank: the parser trims the blank lines at the
    edges of a module part (the one between a JSDoc and ``req.is = function``)."""
    pieces = sorted(_pieces(rows), key=lambda p: (-p[0], p[1]))
    spans: list[tuple[int, int, int]] = []  # (first, rank, last) walked, first descending
    left_out: list[tuple[int, int]] = []
    lines: dict[int, str] = {}
    for first, rank, last, text in pieces:
        # The spans walked so far start at or after this one's first line: reversed, they
        # come in line order, and the walk reads only as many as its text reaches.
        ahead = ((a, b) for a, r, b in reversed(spans) if a > first or r < rank)
        numbers = text_line_numbers(first, len(text), ahead)
        own = dict(zip(numbers, text, strict=True))
        end = numbers[-1] if numbers else first - 1
        if last is not None and end != last:
            left_out.append((first, last))
            continue
        spans.append((first, rank, end))
        lines.update(own)
    lines.update(dict.fromkeys(_uncovered([(a, b) for a, _r, b in spans] + left_out), ""))
    return lines


def _uncovered(spans: list[tuple[int, int]]) -> list[int]:
    """The line numbers between the spans' first and last line that no span holds."""
    spans = sorted(spans)
    out: list[int] = []
    reached = spans[0][0] - 1 if spans else 0
    for first, last in spans:
        out.extend(range(reached + 1, first))
        reached = max(reached, last)
    return out


def detached_comment(lines: Mapping[int, str], first: int) -> str:
    """The comment block ending at most DETACHED_GAP blank lines above line ``first``
    (a JSDoc one blank line above ``req.is = function``, which the parser leaves in the
    module row), or ""."""
    at = first - 1
    gap = 0
    while at in lines and not lines[at].strip() and gap <= DETACHED_GAP:
        at, gap = at - 1, gap + 1
    if gap == 0 or gap > DETACHED_GAP or at not in lines or not _COMMENT_END.match(lines[at]):
        return ""
    block: list[str] = []
    if _LINE_COMMENT.match(lines[at]):
        while at in lines and _LINE_COMMENT.match(lines[at]):
            block.append(lines[at])
            at -= 1
    else:
        while at in lines and len(block) < 200:
            block.append(lines[at])
            if _COMMENT_START.match(lines[at]):
                break
            at -= 1
        else:
            return ""
    return "\n".join(reversed(block))


def detached_comments(
    rows: Sequence[tuple[str, Hashable, str, str, int, int, str]],
) -> dict[str, str]:
    """For each function or method row (its first part) of ``(id, file, name, kind, first
    line, last line, text)`` (``file`` names one file: its repo and path) whose doc comment
    sits a blank line above it, in another row: that comment. Given to the lexical index
    only (the row's text and embedding are unchanged)."""
    by_path: dict[Hashable, list[tuple[str, str, str, int, int, str]]] = {}
    for rid, path, name, kind, first, last, text in rows:
        by_path.setdefault(path, []).append((rid, name, kind, first, last, text))
    out: dict[str, str] = {}
    for members in by_path.values():
        if not any(kind in _MEMBER_KINDS for _r, _n, kind, *_ in members):
            continue
        lines = file_lines(members)
        for rid, name, kind, first, _last, _text in members:
            cut = unit_part(name)  # its very first part: not ``f [part 2/2] [part 1/3]``
            if kind in _MEMBER_KINDS and (cut is None or set(cut[1]) == {1}):
                comment = detached_comment(lines, first)
                if comment:
                    out[rid] = comment
    return out
