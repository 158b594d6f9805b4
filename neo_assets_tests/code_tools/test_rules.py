"""The code tools' pure rules over plain data: the per-file index, symbol matching,
references, path globs, line windows and the argument declarations (one for HTTP, MCP
and the CLI)."""

import pytest

from neo_assets.code_tools.rules.arguments import input_schema, portable
from neo_assets.code_tools.rules.index import (
    RepoIndex,
    Unit,
    file_record,
    signature_line,
    split_lines,
)
from neo_assets.code_tools.rules.limits import DEFAULT_GREP, LANGUAGES, SYMBOL_KINDS
from neo_assets.code_tools.rules.matching import (
    find_references,
    find_symbols,
    line_window,
    path_matches,
    prefilter_pattern,
)
from neo_assets.code_tools.rules.tools import TOOLS, parse_args
from neo_assets.core import codes
from neo_assets.query.rules.request import QueryInputError
from neo_assets.sources.rules.chunk_kinds import CODE_UNIT_KINDS
from neo_assets.sources.rules.languages import known_languages, language_of

PY = (
    "import os\n"  # 1
    "\n"  # 2
    "# retry helpers\n"  # 3
    "@decorate\n"  # 4
    "def retry(fn):\n"  # 5
    "    return fn()\n"  # 6
    "\n"  # 7
    "class Ky:\n"  # 8
    "    def calculate_delay(self):\n"  # 9
    "        return retry(self.x)\n"  # 10
    "    def more(self):\n"  # 11
    "        pass\n"  # 12
)
UNITS = [
    Unit("module", "m", "", 1, 2),
    Unit("function", "retry", "pkg.m.retry", 3, 6),
    Unit("class", "Ky [part 1/2]", "pkg.m.Ky", 8, 10),
    Unit("class", "Ky [part 2/2]", "pkg.m.Ky", 11, 12),
    Unit("method", "Ky.calculate_delay", "pkg.m.Ky.calculate_delay", 9, 10),
    Unit("method", "Ky.more", "pkg.m.Ky.more", 11, 12),
]


def index_of(files: dict[str, tuple[str, list[Unit]]], repo: str = "r") -> RepoIndex:
    payload = {
        "revision": "rev1",
        "kind": "git",
        "files": {
            path: file_record(path, text, f"blob-{path}", len(text), units)
            for path, (text, units) in files.items()
        },
    }
    return RepoIndex.from_payload(repo, payload)


def test_the_symbol_kinds_are_the_parsers_code_unit_kinds_and_languages_are_known() -> None:
    assert set(SYMBOL_KINDS) == CODE_UNIT_KINDS
    assert LANGUAGES == known_languages()
    assert {"python", "typescript", "go", "text", "markdown"} <= set(LANGUAGES)
    assert language_of("a/b.mjs").language in LANGUAGES


def test_a_file_record_merges_parts_and_finds_each_signature_line() -> None:
    blob, language, size, lines, symbols, idents = file_record("pkg/m.py", PY, "b1", len(PY), UNITS)
    assert (blob, language, size, lines) == ("b1", "python", len(PY), 12)
    assert symbols == [
        # The comment and the decorator open the unit's span; the name is on line 5.
        ["function", "retry", "pkg.m.retry", 3, 6, 5, "def retry(fn):"],
        ["class", "Ky", "pkg.m.Ky", 8, 12, 8, "class Ky:"],
        [
            "method",
            "Ky.calculate_delay",
            "pkg.m.Ky.calculate_delay",
            9,
            10,
            9,
            "    def calculate_delay(self):",
        ],
        ["method", "Ky.more", "pkg.m.Ky.more", 11, 12, 11, "    def more(self):"],
    ]
    assert idents["retry"] == [3, 5, 10] and idents["os"] == [1]


def test_signature_lines_skip_comments_but_not_private_members() -> None:
    ts = ["\t// #retry is private", "\t#retry(): number {", "\t\treturn 1;", "\t}"]
    assert signature_line(ts, "Ky.#retry", 1, 4) == 2
    go = ["// ExactArgs returns a validator", "func ExactArgs(n int) {", "}"]
    assert signature_line(go, "ExactArgs", 1, 3) == 2
    assert signature_line(["/*", " * x", " */", "x = () => 1"], "anon", 1, 4) == 4


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("retry", [("retry", "exact")]),
        ("pkg.m.retry", [("retry", "exact")]),
        ("m.Ky.more", [("Ky.more", "exact")]),
        ("Ky.calculate_delay", [("Ky.calculate_delay", "exact")]),
        ("calc", [("Ky.calculate_delay", "prefix")]),
        ("CALCULATE", [("Ky.calculate_delay", "prefix")]),
        ("late_del", [("Ky.calculate_delay", "fuzzy")]),
        ("calculate_dalay", [("Ky.calculate_delay", "fuzzy")]),
        ("nothing_like_it", []),
    ],
)
def test_find_symbol_matches_exact_then_prefix_then_fuzzy(query: str, expected: list) -> None:
    index = index_of({"pkg/m.py": (PY, UNITS)})
    found, truncated = find_symbols([index], query)
    assert [(s["name"], s["match"]) for s in found] == expected and not truncated


def test_find_symbol_orders_tiers_filters_and_bounds() -> None:
    other = "def ky_helper():\n    pass\n"
    index = index_of(
        {
            "pkg/m.py": (PY, UNITS),
            "a/other.py": (other, [Unit("function", "ky_helper", "a.other.ky_helper", 1, 2)]),
        }
    )
    found, _ = find_symbols([index], "Ky")
    assert [(s["name"], s["match"]) for s in found] == [
        ("Ky", "exact"),
        ("ky_helper", "prefix"),
        ("Ky.calculate_delay", "fuzzy"),
        ("Ky.more", "fuzzy"),
    ]
    found, truncated = find_symbols([index], "Ky", limit=2)
    assert len(found) == 2 and truncated
    found, _ = find_symbols([index], "Ky", kind="method")
    assert {s["kind"] for s in found} == {"method"}
    assert find_symbols([index], "Ky", language="go")[0] == []


def test_references_are_name_based_minus_the_defining_line_with_their_unit() -> None:
    index = index_of({"pkg/m.py": (PY, UNITS)})
    hits, truncated = find_references([index], "retry")
    # Line 3 is a comment naming it, line 10 a call; line 5 defines it.
    assert [(p, line, u.name if u else None) for _i, p, line, u in hits] == [
        ("pkg/m.py", 3, "retry"),
        ("pkg/m.py", 10, "Ky.calculate_delay"),
    ]
    assert not truncated
    assert find_references([index], "pkg.m.retry")[0] == hits  # the last segment
    hits, truncated = find_references([index], "retry", limit=1)
    assert len(hits) == 1 and truncated


def test_path_globs_and_line_windows() -> None:
    assert path_matches("src/a/b.py", "src/*.py")
    assert path_matches("src/a/b.py", "src/**/*.py")
    assert path_matches("src/a/b.py", "src/a")
    assert path_matches("src/a/b.py", "src/a/")
    assert not path_matches("src/ab.py", "src/a")
    assert not path_matches("src/a/b.py", "../src/a/b.py")
    assert line_window(10, None, None) == (1, 10, False)
    assert line_window(1000, 10, None) == (10, 409, True)
    assert line_window(10_000, 1, 9_999) == (1, 2000, True)
    assert line_window(10, 20, 30) == (20, 10, False)  # past the end: empty


def test_split_lines_counts_like_git_grep() -> None:
    assert split_lines("a\nb\n") == ["a", "b"]
    assert split_lines("a\nb") == ["a", "b"]
    assert split_lines("a\r\n\nb") == ["a\r", "", "b"]
    assert split_lines("") == []


@pytest.mark.parametrize(
    ("tool", "body", "field"),
    [
        ("find_symbol", {}, "name"),
        ("find_symbol", {"name": ""}, "name"),
        ("find_symbol", {"name": 5}, "name"),
        ("find_symbol", {"name": "x", "max_results": "5"}, "max_results"),
        ("find_symbol", {"name": "x", "max_results": True}, "max_results"),
        ("find_symbol", {"name": "x", "max_results": 201}, "max_results"),
        ("find_symbol", {"name": "x", "kind": "func"}, "kind"),
        ("find_symbol", {"name": "x", "language": "klingon"}, "language"),
        ("find_symbol", {"name": "x", "nope": 1}, "nope"),
        ("grep", {"pattern": "x", "case_sensitive": "true"}, "case_sensitive"),
        ("grep", {"pattern": "x" * 1001}, "pattern"),
        ("grep", {"pattern": "x", "path": "**"}, "path"),
        ("grep", {"pattern": "x\x00"}, "pattern"),
        ("read_file", {"path": "a"}, "repo"),
        ("read_file", {"repo": "r", "path": "a", "start_line": 0}, "start_line"),
        ("read_file", {"repo": "r", "path": "a", "start_line": 3, "end_line": 2}, "end_line"),
        ("list_files", {"repo": "r", "path_glob": "*"}, "path_glob"),
    ],
)
def test_arguments_are_refused_without_coercion(tool: str, body: dict, field: str) -> None:
    with pytest.raises(QueryInputError) as refused:
        parse_args(tool, body)
    assert refused.value.field == field
    assert refused.value.code in (codes.QUERY_INVALID, codes.QUERY_UNKNOWN_FIELD)
    assert refused.value.message


def test_arguments_get_their_defaults_and_the_schema_describes_each() -> None:
    assert parse_args("grep", {"pattern": "x"}) == {
        "pattern": "x",
        "repo": None,
        "path": None,
        "case_sensitive": True,
        "max_results": DEFAULT_GREP,
    }
    for spec in TOOLS.values():
        schema = input_schema(spec)
        assert schema["additionalProperties"] is False
        assert all(
            p["description"] and "``" not in p["description"] for p in schema["properties"].values()
        )
        assert "``" not in spec.description
        assert set(schema["required"]) == {a.name for a in spec.args if a.required}
        assert spec.output["type"] == "object"
    grep = input_schema(TOOLS["grep"])["properties"]
    assert (grep["max_results"]["minimum"], grep["max_results"]["maximum"]) == (1, 1000)
    assert grep["case_sensitive"] == {
        "type": "boolean",
        "description": grep["case_sensitive"]["description"],
        "default": True,
    }


@pytest.mark.parametrize(
    "pattern",
    [r"^def ", r"x$", r"^\s*$", r"\bretry\b", r"a\s+b", r"(?i)RETRY", r"[^a]+$", r"^$", "."],
)
def test_the_whole_text_prefilter_never_skips_a_file_with_a_matching_line(pattern: str) -> None:
    import re2

    texts = ["def retry():\n  a\n\n b x\r\n", "  \n", "x", "aaa\nretry\n", "", "a\nb"]
    whole = prefilter_pattern(pattern)
    assert whole is not None
    line_re, whole_re = re2.compile(pattern), re2.compile(whole)
    for text in texts:
        if any(line_re.search(line) for line in split_lines(text)):
            assert whole_re.search(text) is not None, (pattern, text)


def test_patterns_anchored_to_the_text_are_not_prefiltered() -> None:
    assert prefilter_pattern(r"\Adef") is None
    assert prefilter_pattern(r"x\z") is None
    assert prefilter_pattern(r"(?i-m)^x") is None
    assert prefilter_pattern(r"(?i)^x") == r"(?m)(?i)^x"


def test_nullable_types_are_spelled_as_any_of_for_portability() -> None:
    schema = {
        "type": "object",
        "properties": {
            "why": {"type": ["string", "null"], "enum": ["a", None], "description": "d"},
            "n": {"type": "integer"},
        },
    }
    assert portable(schema)["properties"] == {
        "why": {"anyOf": [{"type": "string", "enum": ["a"]}, {"type": "null"}], "description": "d"},
        "n": {"type": "integer"},
    }
    for spec in TOOLS.values():
        assert '"type": [' not in str(portable(spec.output)).replace("'", '"')


def test_a_block_comment_naming_the_unit_is_not_its_signature() -> None:
    # ky's JSDoc: no leading stars, and an example that calls the function it documents.
    lines = [
        "/**",
        "Type guard to check if an error is a Ky error.",
        "```",
        "if (isKyError(error)) {",
        "```",
        "*/",
        "export function isKyError(error) {",
        "    return isHTTPError(error);",
        "}",
        "/* one line */ function after() {}",
    ]
    assert signature_line(lines, "isKyError", 1, 9) == 7
    assert signature_line(["/**", "x", "*/", "/* y */ function x() {}"], "x", 1, 4) == 4
