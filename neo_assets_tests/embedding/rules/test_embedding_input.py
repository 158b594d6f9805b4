"""The text sent to the provider: parser 2.x chunks get a first line naming kind and
in-file name (header-v2, in force; header-v1 also named the qualified name and path);
1.x chunks go bare; the format's id is in the generation."""

import pytest

from neo_assets.config.settings import load_settings
from neo_assets.embedding.rules import input as inputs
from neo_assets.embedding.rules.lane import embedding_generation
from neo_assets.generations.serving import configured_generation

BODY = "static doSort(a, b) {\n    return a - b;\n}"


def test_a_2x_unit_gets_a_header_line_before_its_body() -> None:
    text = inputs.embedding_input(
        BODY,
        kind="method",
        name="Collection.doSort",
        qualified_name="Neo.collection.Base.doSort",
        source_path="src/collection/Base.mjs",
        parser_version="2.0.0",
    )
    assert inputs.embedding_input_format() == inputs.FORMAT_HEADER_V2
    assert text == "method Collection.doSort\n" + BODY


def test_header_v2_has_no_path_so_a_moved_chunk_is_the_same_input() -> None:
    common = {"kind": "function", "name": "f", "parser_version": "2.0.0"}
    here = inputs.embedding_input("x", qualified_name="a.b.f", source_path="a/b.py", **common)
    moved = inputs.embedding_input("x", qualified_name="c.d.f", source_path="c/d.py", **common)
    assert here == moved == "function f\nx"
    # A window or a module remainder is named by its path or lines: embedded bare.
    for kind, name in (("text", "a/b.go#L1-60"), ("module", "a/b.py")):
        bare = inputs.embedding_input(
            "x",
            kind=kind,
            name=name,
            qualified_name=name,
            source_path="a/b.py",
            parser_version="2.0.0",
        )
        assert bare == "x"


def test_header_v1_names_the_qualified_name_and_the_path() -> None:
    text = inputs.embedding_input(
        BODY,
        kind="method",
        name="Collection.doSort",
        qualified_name="Neo.collection.Base.doSort",
        source_path="src/collection/Base.mjs",
        parser_version="2.0.0",
        input_format=inputs.FORMAT_HEADER_V1,
    )
    assert text == "method Neo.collection.Base.doSort in src/collection/Base.mjs\n" + BODY


def test_the_name_stands_in_for_a_missing_qualified_name_and_windows_say_only_where() -> None:
    common = {
        "source_path": "a/b.go",
        "parser_version": "2.1.3",
        "input_format": inputs.FORMAT_HEADER_V1,
    }
    assert inputs.embedding_input(
        "x", kind="function", name="f", qualified_name="", **common
    ).startswith("function f in a/b.go\n")
    window = inputs.embedding_input(
        "x", kind="text", name="a/b.go#L1-60", qualified_name="a/b.go#L1-60", **common
    )
    assert window == "text in a/b.go\nx"


@pytest.mark.parametrize("version", ["1.0.0", "0.3.1"])
def test_a_1x_chunk_is_embedded_bare(version: str) -> None:
    text = inputs.embedding_input(
        BODY,
        kind="method",
        name="C.m",
        qualified_name="",
        source_path="a.py",
        parser_version=version,
    )
    assert text == BODY


def test_the_plain_format_sends_every_chunk_bare() -> None:
    text = inputs.embedding_input(
        BODY,
        kind="method",
        name="C.m",
        qualified_name="m.C.m",
        source_path="a.py",
        parser_version="2.0.0",
        input_format=inputs.FORMAT_PLAIN,
    )
    assert text == BODY


def test_the_input_format_is_part_of_the_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    args = ("openai_compatible", "qwen3", 1024, 7372, 60_000)
    assert embedding_generation(*args, "header-v1") != embedding_generation(*args, "plain")
    before = configured_generation(load_settings())
    monkeypatch.setattr(inputs, "EMBEDDING_INPUT_FORMAT", inputs.FORMAT_PLAIN)
    assert configured_generation(load_settings()) != before
