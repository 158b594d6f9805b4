"""Golden chunks per parser version, and the rules digest that re-parses on a change.

A release that changes what a declared parser version cuts from the same file (a language
table, a unit rule, a grammar upgrade) changes every tenant's chunks under the version
they declared. The golden files pin each version's output on a fixed corpus: a change
fails here until it is made on purpose, by a new parser version, or by refreshing the
golden file (``NEO_UPDATE_GOLDEN=1``) with the chunking identity's rules digest moving
with it, so sweeps re-parse what it changes."""

import hashlib
import json
import os
from pathlib import Path

import pytest

from neo_assets.sources.parsers import rules_digest
from neo_assets.sources.parsers.neo_code import chunk_file
from neo_assets_tests.sources.parser_v2 import samples

GOLDEN = Path(__file__).parent / "golden"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample-widgets"
VERSIONS = ("1.0.0", "2.0.0")

CORPUS = {
    "cobra/command.go": samples.GO,
    "walkdir/lib.rs": samples.RUST,
    "lib/list.c": samples.C,
    "lib/list.cpp": samples.CPP,
    "jdk/List.java": samples.JAVA,
    "net/List.cs": samples.CSHARP,
    "rails/model.rb": samples.RUBY,
    "laravel/Model.php": samples.PHP,
    "tools/build.sh": samples.BASH,
    **{
        str(p.relative_to(EXAMPLE)): p.read_text()
        for p in sorted(EXAMPLE.rglob("*"))
        if p.is_file() and p.suffix in (".py", ".md")
    },
}


def chunks_of(version: str) -> list[list[object]]:
    out: list[list[object]] = []
    for path, text in sorted(CORPUS.items()):
        result = chunk_file("golden", "corpus", path, text, "neo-code", version)
        for c in result.chunks:
            digest = hashlib.sha256(c.content.encode()).hexdigest()[:16]
            out.append(
                [c.chunk_id, path, c.kind, c.name, c.start_line, c.end_line, c.language]
                + [c.qualified_name, c.parent or "", digest]
            )
    return out


@pytest.mark.parametrize("version", VERSIONS)
def test_each_parser_version_cuts_the_corpus_as_its_golden_file_says(version: str) -> None:
    golden = GOLDEN / f"neo-code-{version}.json"
    got = chunks_of(version)
    if os.environ.get("NEO_UPDATE_GOLDEN"):
        golden.write_text(json.dumps(got, indent=0) + "\n")
    expected = json.loads(golden.read_text())
    changed = [row for row in got if row not in expected]
    gone = [row for row in expected if row not in got]
    assert not changed and not gone, (
        f"neo-code {version} cuts the corpus differently from {golden.name}: "
        f"{len(changed)} new or changed chunks (first: {changed[:1]}), {len(gone)} gone "
        f"(first: {gone[:1]}). Declare a new parser version for the new output, or refresh "
        "the golden file on purpose (NEO_UPDATE_GOLDEN=1): the rules digest moves with the "
        "change, so sweeps re-parse what it changes"
    )


def test_the_corpus_holds_every_kind_of_source() -> None:
    languages = {row[6] for row in chunks_of("2.0.0")}
    assert {"go", "rust", "c", "cpp", "java", "csharp", "ruby", "php", "bash"} <= languages
    assert {"python", "markdown"} & languages


def test_the_rules_digest_moves_with_a_table_or_a_grammar_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compute = rules_digest.parser_rules_digest.__wrapped__
    now = compute()
    assert now == rules_digest.parser_rules_digest() and len(now) == 16
    # A copy of the parser's modules and the core's source rules, one table changed.
    copies = []
    for index, folder in enumerate(rules_digest.rule_dirs()):
        (tmp_path / str(index)).mkdir()
        for path in folder.glob("*.py"):
            (tmp_path / str(index) / path.name).write_bytes(path.read_bytes())
        copies.append(tmp_path / str(index))
    # The copy of the digest's own module is skipped like the original.
    monkeypatch.setattr(rules_digest, "OWN", copies[0] / "rules_digest.py")
    monkeypatch.setattr(rules_digest, "rule_dirs", lambda: tuple(copies))
    assert compute() == now
    for table in (copies[0] / "code_languages.py", copies[1] / "chunk_kinds.py"):
        original = table.read_text()
        table.write_text(original + "\nONE_MORE_ENTRY = 1\n")
        assert compute() != now, table
        # Words about the rules decide no chunk: a comment or a docstring edit (and a
        # reformat) re-parses nothing.
        head, _, rest = original.partition('"""')
        table.write_text(f'{head}"""Reworded. {rest}\n# a remark\n')
        assert compute() == now, table
        table.write_text(original)
        assert compute() == now
    # A grammar package at another version.
    real = rules_digest._version
    monkeypatch.setattr(
        rules_digest, "_version", lambda d: "9.9.9" if d == "tree-sitter-go" else real(d)
    )
    assert compute() != now
