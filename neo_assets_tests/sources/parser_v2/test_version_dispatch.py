"""chunk_file dispatches on the declared version: 1.x is the original parser byte for
byte, 2.x the syntax-aware one; ids never cover the new metadata; grammars check up
front."""

import pytest

from neo_assets.core.ids.chunk_ids import chunk_id
from neo_assets.sources.parsers import grammars
from neo_assets.sources.parsers.neo_code import PARSER_ID, chunk_file
from neo_assets.sources.parsers.neo_code_v1 import parse_file
from neo_assets_tests.sources.parser_v2 import samples

FILES = [
    ("cobra/command.go", samples.GO),
    ("src/lib.rs", samples.RUST),
    ("pkg/mod.py", "import os\n\n\nclass A:\n    def m(self):\n        return 1\n"),
    ("README.md", "# T\n\ntext\n"),
    ("package.json", '{\n  "a": 1\n}\n'),
]


@pytest.mark.parametrize("version", ["1.0.0", "1.1.0", "0.9.0"])
@pytest.mark.parametrize(("path", "text"), FILES)
def test_version_1_is_the_original_parser(version: str, path: str, text: str) -> None:
    chunks = chunk_file("acme", "web", path, text, PARSER_ID, version).chunks
    original = parse_file(path, text)
    assert [(c.kind, c.name, c.content, c.start_line, c.end_line) for c in chunks] == [
        (p.kind, p.name, p.content, p.start_line, p.end_line) for p in original
    ]
    assert all(c.language == "" and c.qualified_name == "" and c.parent is None for c in chunks)


def test_version_2_reads_structure_and_fills_metadata() -> None:
    result = chunk_file("acme", "web", "cobra/command.go", samples.GO, PARSER_ID, "2.0.0")
    assert result.language == "go"
    assert result.fallback_reason is None
    execute = next(c for c in result.chunks if c.name == "Command.Execute")
    assert (execute.kind, execute.parent, execute.qualified_name) == (
        "method",
        "Command",
        "cobra.Command.Execute",
    )
    assert (execute.start_line, execute.end_line) == (21, 26)


def test_chunk_id_stays_the_contract_tuple() -> None:
    (only,) = [
        c
        for c in chunk_file(
            "acme", "web", "a.go", "package p\n\nfunc F() {}\n", PARSER_ID, "2.0.0"
        ).chunks
        if c.kind == "function"
    ]
    assert only.chunk_id == chunk_id(
        "acme", "web", "function", "F", "func F() {}", "a.go", PARSER_ID, "2.0.0"
    )


def test_fallback_reason_is_reported_to_the_caller() -> None:
    broken = "func broken( {\n\treturn ]]\n" * 5
    result = chunk_file("acme", "web", "a.go", broken, PARSER_ID, "2.0.0")
    assert result.fallback_reason == "syntax-errors"
    assert {c.kind for c in result.chunks} == {"text"}


def test_an_unknown_major_is_refused() -> None:
    with pytest.raises(ValueError, match="no parser version '3.0.0'"):
        chunk_file("acme", "web", "a.go", "package p\n", PARSER_ID, "3.0.0")


def test_check_grammars_loads_every_grammar() -> None:
    packages = grammars.check_grammars()
    assert packages["go"] == "tree-sitter-go"
    assert packages["tsx"] == "tree-sitter-typescript"
    assert set(packages) >= {"javascript", "typescript", "rust", "java", "c", "cpp"}


def test_a_missing_grammar_names_the_package_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    missing = grammars.Grammar("tree-sitter-nonesuch", "tree_sitter_nonesuch", "language")
    monkeypatch.setitem(grammars.GRAMMARS, "nonesuch", missing)
    with pytest.raises(grammars.GrammarUnavailable, match="pip install tree-sitter-nonesuch"):
        grammars.check_grammars()
