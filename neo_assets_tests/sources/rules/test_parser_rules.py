"""Pure rules of parser 2.x: versions, languages, parts, windows, syntax-error fallback,
doc headings, data keys and stylesheet rules."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neo_assets.sources.rules.css_blocks import css_rule_spans
from neo_assets.sources.rules.data_keys import json_key_spans, toml_key_spans, yaml_key_spans
from neo_assets.sources.rules.doc_headings import asciidoc_headings, heading_paths, rst_headings
from neo_assets.sources.rules.languages import FAMILY_CODE, FAMILY_TEXT, language_of
from neo_assets.sources.rules.line_parts import pack_lines, part_name, slice_line
from neo_assets.sources.rules.parser_versions import (
    GENERATION_UNITS,
    GENERATION_WINDOWS,
    parser_generation,
    unsupported_version_problem,
)
from neo_assets.sources.rules.syntax_errors import (
    ERROR_RUN_LIMIT,
    REASON_SYNTAX_ERRORS,
    syntax_fallback_reason,
)
from neo_assets.sources.rules.text_windows import window_ranges


@pytest.mark.parametrize(
    ("version", "generation"),
    [
        ("1.0.0", GENERATION_WINDOWS),
        ("0.1.0", GENERATION_WINDOWS),
        ("1.9.3-rc.1", GENERATION_WINDOWS),
        ("2.0.0", GENERATION_UNITS),
        ("2.1.0-rc.1+build.7", GENERATION_UNITS),
    ],
)
def test_parser_generation(version: str, generation: int) -> None:
    assert parser_generation(version) == generation
    assert unsupported_version_problem(version) is None


@pytest.mark.parametrize("version", ["3.0.0", "10.0.0", "x", ""])
def test_unsupported_versions(version: str) -> None:
    with pytest.raises(ValueError):
        parser_generation(version)
    assert unsupported_version_problem(version)


@pytest.mark.parametrize(
    ("path", "language", "family"),
    [
        ("src/a.mjs", "javascript", FAMILY_CODE),
        ("src/A.CJS", "javascript", FAMILY_CODE),
        ("x/y.jsx", "javascript", FAMILY_CODE),
        ("source/index.ts", "typescript", FAMILY_CODE),
        ("a.mts", "typescript", FAMILY_CODE),
        ("App.tsx", "tsx", FAMILY_CODE),
        ("cmd.go", "go", FAMILY_CODE),
        ("lib.rs", "rust", FAMILY_CODE),
        ("x.h", "c", FAMILY_CODE),
        ("x.hpp", "cpp", FAMILY_CODE),
        ("A.cs", "csharp", FAMILY_CODE),
        ("Rakefile", "ruby", FAMILY_CODE),
        ("run.sh", "bash", FAMILY_CODE),
        ("a.py", "python", "python"),
        ("docs/x.rst", "rst", "docs"),
        ("g.adoc", "asciidoc", "docs"),
        ("c.yml", "yaml", "data"),
        ("s.scss", "scss", "style"),
        ("Makefile", "text", FAMILY_TEXT),
        (".gitignore", "text", FAMILY_TEXT),
        ("media/logo.ai", "text", FAMILY_TEXT),
    ],
)
def test_language_of(path: str, language: str, family: str) -> None:
    assert (language_of(path).language, language_of(path).family) == (language, family)


def test_pack_lines_prefers_a_blank_line_in_the_second_half() -> None:
    lengths = [10] * 10
    blank = [False] * 10
    blank[6] = True
    assert pack_lines(lengths, blank, 80) == [range(0, 7), range(7, 10)]
    assert pack_lines(lengths, [False] * 10, 80) == [range(0, 8), range(8, 10)]


def test_pack_lines_keeps_a_long_line_alone() -> None:
    assert pack_lines([5, 100, 5], [False] * 3, 50) == [range(0, 1), range(1, 2), range(2, 3)]


@given(st.lists(st.integers(min_value=1, max_value=120), max_size=60), st.integers(10, 200))
def test_pack_lines_covers_everything_in_order_within_the_bound(
    lengths: list[int], limit: int
) -> None:
    groups = pack_lines(lengths, [n % 7 == 0 for n in lengths], limit)
    assert [i for g in groups for i in g] == list(range(len(lengths)))
    for g in groups:
        assert len(g) == 1 or sum(lengths[i] for i in g) <= limit


def test_part_name_and_slices() -> None:
    assert part_name("Ky._retry", 2, 3) == "Ky._retry [part 2/3]"
    assert slice_line("abcdefg", 3) == ["abc", "def", "g"]


def test_window_ranges_cut_at_blank_lines() -> None:
    blank = [i == 6 for i in range(20)]
    assert window_ranges([1] * 20, blank, 8, 1000) == [range(0, 7), range(7, 15), range(15, 20)]
    assert window_ranges([1] * 10, [False] * 10, 4, 1000) == [
        range(0, 4),
        range(4, 8),
        range(8, 10),
    ]


def test_syntax_fallback_rule() -> None:
    lines = set(range(1, 101))
    assert syntax_fallback_reason([], lines) is None
    assert syntax_fallback_reason([(3, 3), (50, 52)], lines) is None  # 4 %
    assert syntax_fallback_reason([(1, 5), (10, 14)], lines) == REASON_SYNTAX_ERRORS  # 10 %
    assert (
        syntax_fallback_reason([(1, ERROR_RUN_LIMIT)], set(range(1, 10_000)))
        == REASON_SYNTAX_ERRORS
    )
    assert syntax_fallback_reason([(1, 1)], set()) is None


def test_rst_headings_levels_by_first_appearance() -> None:
    lines = [
        "====\n",
        "Top\n",
        "====\n",
        "\n",
        "A\n",
        "---\n",
        "\n",
        "B\n",
        "~~~\n",
        "\n",
        "C\n",
        "---\n",
    ]
    headings = rst_headings(lines)
    assert headings == [(0, 1, "Top"), (4, 2, "A"), (7, 3, "B"), (10, 2, "C")]
    assert heading_paths(headings) == [["Top"], ["Top", "A"], ["Top", "A", "B"], ["Top", "C"]]


def test_rst_short_underline_and_literal_blocks_are_not_titles() -> None:
    assert rst_headings(["Long title\n", "---\n"]) == []
    assert rst_headings(["Example::\n", "\n", "    x\n", "    =\n"]) == []


def test_asciidoc_headings_skip_delimited_blocks() -> None:
    lines = ["= T\n", "....\n", "== no\n", "....\n", "== Yes\n", "### Also\n"]
    assert asciidoc_headings(lines) == [(0, 1, "T"), (4, 2, "Yes"), (5, 3, "Also")]


def test_json_key_spans() -> None:
    assert json_key_spans('{"a": {"x": "}"}, "b": [1,\n2]}') == [("a, b", 0, 1)]
    assert json_key_spans('{\n"a": 1,\n"b": 2\n}') == [("a", 0, 1), ("b", 2, 3)]
    assert json_key_spans("[1]") is None
    assert json_key_spans('"s"') is None
    assert json_key_spans("{}") is None


def test_yaml_and_toml_key_spans() -> None:
    yaml_lines = ["---\n", "a: 1\n", "b:\n", "  - x\n", "'c d': 2\n"]
    assert yaml_key_spans(yaml_lines) == [("a", 0, 1), ("b", 2, 3), ("c d", 4, 4)]
    assert yaml_key_spans(["- a\n", "- b\n"]) is None
    toml_lines = ['x = """\n', "[not.a.table]\n", '"""\n', "[t]\n", "k = 1\n"]
    assert toml_key_spans(toml_lines) == [("x", 0, 2), ("t", 3, 4)]


def test_css_rule_spans() -> None:
    text = "@import 'a';\n/* c */\na { b: '}' }\n\n/* far */\n\n@media x {\n  p { q: r }\n}\n"
    assert css_rule_spans(text, line_comments=False) == [("a", 1, 2), ("@media x", 6, 8)]
    assert css_rule_spans("// c\n.a { x: y } // t\n", line_comments=True) == [(".a", 0, 1)]
