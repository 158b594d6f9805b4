"""Two ranking steps over plain data: a doc comment a blank line above its function (left
in the module row by the parser) read as that function's lexical context, and a list's
best row kept in the top few when fusion alone would drop it."""

from neo_assets.query.rules.fusion import fuse_lists, keeps_first
from neo_assets.query.rules.lexical_context import (
    detached_comment,
    detached_comments,
    file_lines,
)
from neo_assets.query.rules.ranking import (
    DEFAULT_RANKING,
    KEEP_MARGIN,
    RankingOptions,
)
from neo_assets.sources.rules.line_numbers import text_line_numbers

FILE = """'use strict'

/**
 * Check whether the request's content type matches.
 */

req.is = function is(types) {
  return typeis(this, types)
}

// Parse the range header.
req.range = function range(size) {
  return parse(size)
}

/* a note */


req.far = function far() {}
module.exports = req""".split("\n")


KINDS = {"module": "module", "is": "function", "range": "function", "far": "method"}


def rows_of_file(kinds: dict[str, str] = KINDS) -> list[tuple[str, str, str, int, int, str]]:
    """The parser's shape: units by their lines, the module row the file less its units."""
    units = [("is", 7, 9), ("range", 12, 14), ("far", 19, 19)]
    inside = {n for _r, a, b in units for n in range(a, b + 1)}
    module = "\n".join(line for n, line in enumerate(FILE, 1) if n not in inside)
    out = [("module", "p.js", "module", 1, len(FILE), module)]
    out += [(rid, rid, kinds[rid], a, b, "\n".join(FILE[a - 1 : b])) for rid, a, b in units]
    return out


def test_file_lines_rebuilds_the_file_from_a_module_row_and_its_units() -> None:
    lines = file_lines(rows_of_file())
    assert [lines[n] for n in range(1, len(FILE) + 1)] == FILE


def test_a_module_the_sweep_cut_in_parts_is_read_whole_from_its_first_line() -> None:
    # A part's lines count its own text (1-4, 5-...), not the file's: joined, then walked.
    (_m, _n, kind, first, last, text), *units = rows_of_file()
    head, tail = text.split("\n")[:4], text.split("\n")[4:]
    parts = [
        ("m1", "p.js [part 1/2]", kind, first, 4, "\n".join(head)),
        ("m2", "p.js [part 2/2]", kind, 5, 4 + len(tail), "\n".join(tail)),
    ]
    lines = file_lines(parts + units)
    assert [lines[n] for n in range(1, len(FILE) + 1)] == FILE


def test_a_row_whose_text_does_not_end_on_its_last_line_is_left_out() -> None:
    rows = [("m", "m", "module", 1, 5, "only\ntwo"), ("f", "f", "function", 7, 7, "f()")]
    # Its span still counts as held: only line 6, in no row's span, is read as blank.
    assert file_lines(rows) == {6: "", 7: "f()"}


def test_the_comment_a_blank_line_above_a_function_is_found_whole() -> None:
    lines = file_lines(rows_of_file())
    assert detached_comment(lines, 7) == "\n".join(FILE[2:5])
    # Directly above: the parser gives it to the function already; two blank lines: not its.
    assert detached_comment(lines, 12) == ""
    assert detached_comment(lines, 19) == ""
    assert detached_comment(lines, 1) == ""


def test_only_function_rows_get_a_comment() -> None:
    got = detached_comments([(r, "p.js", n, k, a, b, t) for r, n, k, a, b, t in rows_of_file()])
    assert got == {"is": "\n".join(FILE[2:5])}
    rows = rows_of_file({**KINDS, "is": "class"})
    assert detached_comments([(r, "p.js", n, k, a, b, t) for r, n, k, a, b, t in rows]) == {}


def test_line_comments_a_blank_line_above_are_taken_and_a_shebang_is_not() -> None:
    lines = {
        1: "#!/usr/bin/env node",
        2: "",
        3: "fn()",
        4: "# one",
        5: "# two",
        6: "",
        7: "def f():",
    }
    assert detached_comment(lines, 7) == "# one\n# two"
    assert detached_comment(lines, 3) == ""


def test_a_lists_best_row_keeps_a_place_in_the_top_few() -> None:
    lists = [["v1", "a", "b"], ["a", "b", "c", "d", "e"], ["b", "a", "c", "d", "e"]]
    plain = [h for h, _s, _m in fuse_lists(lists, 10)]
    assert plain == ["a", "b", "c", "d", "e", "v1"]
    kept = [h for h, _s, _m in fuse_lists(lists, 10, keep_first=(0,), keep_within=3)]
    assert kept == ["a", "b", "v1", "c", "d", "e"]
    assert [h for h, _s, _m in fuse_lists(lists, 2, keep_first=(0,), keep_within=5)] == ["a", "b"]
    # A demoted best row (a test, when the question is about source) is not kept.
    got = fuse_lists(lists, 10, keep_first=(0,), keep_within=3, demoted={"v1"})
    assert [h for h, _s, _m in got][-1] == "v1"


def test_the_vector_lists_best_row_is_kept_only_when_it_leads_the_second() -> None:
    options = RankingOptions(keep_first=(0,), keep_margin=0.05)
    assert keeps_first(options, [0.61, 0.55]).keep_first == (0,)
    assert keeps_first(options, [0.61, 0.58]).keep_first == ()
    assert keeps_first(options, [0.61]).keep_first == ()  # nothing to lead
    always = RankingOptions(keep_first=(0,))
    assert keeps_first(always, [0.61, 0.61]) is always
    assert DEFAULT_RANKING.keep_first == (0,) and DEFAULT_RANKING.keep_margin == KEEP_MARGIN


def test_a_rows_text_lines_skip_the_units_nested_in_it() -> None:
    # Lines 1-2, a unit on 3-5 (and one nested in it on 4), then 6, a unit on 7, then 8.
    assert text_line_numbers(1, 4, [(3, 5), (4, 4), (7, 7)]) == [1, 2, 6, 8]
    assert text_line_numbers(10, 3, []) == [10, 11, 12]
    assert text_line_numbers(3, 1, [(3, 4)]) == [5]  # a unit on its first line: skipped


def test_a_comment_above_a_module_parts_trimmed_edge_is_found() -> None:
    # The parser cuts a long module into parts and trims the blank lines at a part's
    # edges: line 6 (between the JSDoc and ``req.is``) is in no row.
    (_m, _n, kind, _first, _last, text), *units = rows_of_file()
    module = text.split("\n")
    parts = [
        ("m1", "p.js [part 1/2]", kind, 1, 5, "\n".join(module[:5])),
        ("m2", "p.js [part 2/2]", kind, 10, len(FILE), "\n".join(module[6:])),
    ]
    lines = file_lines(parts + units)
    assert lines[6] == ""
    assert [lines[n] for n in range(1, len(FILE) + 1)] == FILE
    got = detached_comments([(r, "p.js", n, k, a, b, t) for r, n, k, a, b, t in parts + units])
    assert got["is"] == "\n".join(FILE[2:5])


def test_only_a_functions_very_first_part_gets_the_comment_above_it() -> None:
    # ``far`` cut by the parser in two, then by the sweep: the first line of its second
    # half sits under a comment and a blank line inside the function, which is not its doc.
    lines = {1: "/** far's doc */", 2: "", 3: "function far() {", 4: "  // step two", 5: ""}
    text = {3: "function far() {\n  // step two", 6: "  two()\n}"}
    rows = [
        ("m", "p.js", "p.js", "module", 1, 1, lines[1]),
        ("a", "p.js", "far [part 1/2] [part 1/1]", "function", 3, 4, text[3]),
        ("b", "p.js", "far [part 2/2] [part 1/1]", "function", 6, 7, text[6]),
    ]
    assert detached_comments(rows) == {"a": "/** far's doc */"}
